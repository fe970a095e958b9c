"""The ecosystem's own contracts (issue 23): langchain-core's overflow error."""

from __future__ import annotations

import langchain_core.exceptions as core_exceptions
import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from langchain_compact import CompactionConfig, ContextOverflowError, compact_messages
from langchain_compact.errors import CompactionError


def test_the_overflow_error_is_langchain_cores() -> None:
    assert issubclass(ContextOverflowError, core_exceptions.ContextOverflowError)
    assert issubclass(ContextOverflowError, core_exceptions.LangChainException)
    assert issubclass(ContextOverflowError, CompactionError)
    error = ContextOverflowError("too long", messages=[HumanMessage("x")])
    assert error.reason == "too long" and len(error.messages) == 1
    assert "cannot go ahead: too long" in str(error)


def test_except_core_overflow_catches_what_compact_messages_raises() -> None:
    config = CompactionConfig(context_window=1_000, keep_last_n=2)
    history = [SystemMessage("rule " * 2_000, id="sys"), HumanMessage("go", id="task")]
    with pytest.raises(core_exceptions.ContextOverflowError) as info:
        compact_messages(history, config=config)
    assert isinstance(info.value, ContextOverflowError) and info.value.messages
    try:
        compact_messages(history, config=config)
    except CompactionError as error:  # the package's own base still catches it
        assert isinstance(error, core_exceptions.ContextOverflowError)
