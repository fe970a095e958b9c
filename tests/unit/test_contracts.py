"""The ecosystem's own contracts (issue 23): langchain-core's overflow error; tenants kept
apart in the memory's namespace (issue 21)."""

from __future__ import annotations

import logging
from typing import Any

import langchain_core.exceptions as core_exceptions
import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.store.memory import InMemoryStore

from langchain_compact import (
    CompactionConfig,
    CompactionMemory,
    ConfigError,
    ContextOverflowError,
    compact_messages,
)
from langchain_compact.compaction import compact_history
from langchain_compact.errors import CompactionError
from langchain_compact.memory import AUTH_USER_KEY, LOCAL_LABEL, MemoryRecord


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


# --------------------------------------------------------------------------- tenants


def _memory(**kwargs: Any) -> CompactionMemory:
    return CompactionMemory(InMemoryStore(), namespace=("memory", "{user_id}"), **kwargs)


@pytest.mark.parametrize("configurable", [{}, {"user_id": None}, {"user_id": ""}])
def test_no_namespace_is_made_from_a_missing_user(configurable: dict[str, Any]) -> None:
    config = {"configurable": {"thread_id": "t", **configurable}}
    with pytest.raises(ConfigError, match=r"needs 'user_id'.*missing='local'"):
        _memory().namespace_for(config)
    with pytest.raises(ConfigError, match="needs 'user_id'"):
        _memory().put(MemoryRecord.from_messages(compacted(), thread_id="t"), config=config)
    assert _memory().namespace_for({"configurable": {"user_id": 0}}) == ("memory", "0")


def test_the_local_namespace_without_auth_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    memory = CompactionMemory(
        InMemoryStore(), namespace=("memory", "{user_id}", "x{project}"), missing="local"
    )
    with caplog.at_level(logging.WARNING, logger="langchain_compact"):
        for configurable in ({}, {"user_id": None}, {"project": ""}):
            spaces = memory.namespace_for({"configurable": configurable})
            assert spaces[1] == LOCAL_LABEL and "None" not in spaces
    said = [r for r in caplog.records if LOCAL_LABEL in r.getMessage()]
    assert len(said) == 2  # once per placeholder, not once per run
    assert memory.namespace_for({"configurable": {"user_id": "ann", "project": "p"}}) == (
        "memory",
        "ann",
        "xp",
    )
    with pytest.raises(ConfigError, match="reserved"):
        memory.namespace_for({"configurable": {"user_id": LOCAL_LABEL}})
    assert memory.with_store(InMemoryStore()).missing == "local"


def test_with_auth_the_user_is_the_authenticated_one() -> None:
    memory = _memory(missing="local")
    authed = {"configurable": {AUTH_USER_KEY: "ann"}}
    assert memory.namespace_for(authed) == ("memory", "ann")
    same = {"configurable": {AUTH_USER_KEY: "ann", "user_id": "ann"}}
    assert memory.namespace_for(same) == ("memory", "ann")
    with pytest.raises(ConfigError, match="not the authenticated user"):
        memory.namespace_for({"configurable": {AUTH_USER_KEY: "ann", "user_id": "bob"}})
    for nobody in (None, ""):  # auth on, no user: never the local namespace
        configurable = {"langgraph_auth_user": {"identity": ""}, AUTH_USER_KEY: nobody}
        with pytest.raises(ConfigError, match=f"auth on.*{AUTH_USER_KEY}.*langgraph.json"):
            memory.namespace_for({"configurable": configurable})
    # langgraph dev without auth: no user object, an empty identity: the local namespace.
    noop = {"configurable": {"langgraph_auth_user": None, AUTH_USER_KEY: ""}}
    assert memory.namespace_for(noop) == ("memory", LOCAL_LABEL)
    with pytest.raises(ConfigError, match="needs 'user_id' in the run's configurable"):
        _memory().namespace_for(noop)


@pytest.mark.parametrize(
    "label",
    ["{thread_id!s}", "{thread_id!r}", "{thread_id:>4}", "t-{thread_id}", "{checkpoint_id}",
     "{run_id}", "{user_id.real}", "{user_id[0]}", "{}", "{0}", "{user_id"],
)  # fmt: skip
def test_the_per_user_template_cannot_be_bypassed(label: str) -> None:
    with pytest.raises(ConfigError, match=r"thread|plain|template"):
        CompactionMemory(InMemoryStore(), namespace=("memory", label))


async def test_async_memory_follows_the_same_rules() -> None:
    memory = _memory()
    with pytest.raises(ConfigError, match="needs 'user_id'"):
        await memory.aget(config={"configurable": {"user_id": None}})
    local = _memory(missing="local")
    record = MemoryRecord.from_messages(compacted(), thread_id="t")
    await local.aput(record, config={"configurable": {}})
    assert local.store.get(("memory", LOCAL_LABEL), local.key) is not None
    assert local.store.search(("memory", "None")) == []


def compacted() -> list[BaseMessage]:
    history: list[BaseMessage] = [HumanMessage("Task: count.", id="task")]
    history += [AIMessage(f"step {i} " * 40, id=f"a{i}") for i in range(12)]
    return compact_history(history, config=CompactionConfig(keep_last_n=2)).messages
