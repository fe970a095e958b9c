"""A precise count asked for on the turn's thread while the precount thread is counting the
same tool result waits for that count instead of encoding the result a second time beside
it (the exact floor of the turn that got the result: bench/results/perf_side_by_side.json)."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langchain_compact import tokens


def test_the_turn_waits_for_the_precount_of_the_same_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counter = tokens.precise_counter()
    assert counter is not None, "the tests provision tiktoken's o200k_base file"
    text = f"result {uuid.uuid4()}\n" + "line of a log, value = 12345\n" * 800
    started = threading.Event()
    encoded: list[str] = []
    real = tokens.TiktokenCounter._encoded

    def encode(self: Any, piece: str) -> int:
        if piece == text:
            encoded.append(threading.current_thread().name)
            if threading.current_thread() is not threading.main_thread():
                started.set()
                threading.Event().wait(0.3)  # a long result: the turn asks meanwhile
        return real(self, piece)

    monkeypatch.setattr(tokens.TiktokenCounter, "_encoded", encode)
    history = [
        HumanMessage("read it"),
        AIMessage("", tool_calls=[{"name": "read", "args": {}, "id": "c1"}]),
        ToolMessage(text, tool_call_id="c1"),
    ]
    tokens.precount_unread(history)
    assert started.wait(5), "the precount thread did not take the result"
    n = counter.count_text(text)
    assert encoded == ["langchain-compact-precount"]  # encoded once, off the turn's thread
    assert n == real(counter, text)
    assert not tokens._precounting  # nothing left waiting
