"""Summarizer timeouts: no thread outlives the interpreter, no race with the clock."""

from __future__ import annotations

import asyncio
import contextvars
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

import langchain_compact._ops as ops_module
from langchain_compact import CompactionConfig
from langchain_compact.compaction import acompact_history, compact_history
from langchain_compact.summarizers import ExtractiveSummarizer

ROOT = Path(__file__).resolve().parents[2]


def history() -> list[BaseMessage]:
    msgs: list[BaseMessage] = [HumanMessage("Fix ticket QX-4821. Never touch prod.", id="task")]
    for k in range(6):
        call = {"name": "read", "args": {"k": k}, "id": f"c{k}", "type": "tool_call"}
        msgs.append(AIMessage("", tool_calls=[call], id=f"a{k}"))
        msgs.append(ToolMessage(f"line\n{'x' * 300}\nexit {100 + k}", tool_call_id=f"c{k}"))
    return msgs


class HungSummarizer:
    """Blocks until :attr:`release` is set (no sleep to race against); counts its calls."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def summarize(self, messages: Sequence[BaseMessage], *, max_tokens: int) -> str:
        self.calls += 1
        self.release.wait()
        return "released too late"

    async def asummarize(self, messages: Sequence[BaseMessage], *, max_tokens: int) -> str:
        self.calls += 1
        while not self.release.is_set():  # cancelled by the timeout
            await asyncio.sleep(0.01)
        return "released too late"


@pytest.fixture
def hung() -> Iterator[HungSummarizer]:
    summarizer = HungSummarizer()
    yield summarizer
    summarizer.release.set()  # let the abandoned threads finish


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_hung_summarizer_times_out_and_falls_back(hung: HungSummarizer, mode: str) -> None:
    config = CompactionConfig(keep_last_n=2, summarizer_retries=1, summarizer_timeout=0.05)
    messages = history()
    if mode == "sync":
        result = compact_history(messages, summarizer=hung, config=config)
    else:
        result = await acompact_history(messages, summarizer=hung, config=config)
    reference = compact_history(messages, config=config)
    assert hung.calls == 2, "one try and one retry, each timed out"
    assert result.summarizer == "fallback:ExtractiveSummarizer"
    assert all("timed out after 0.05 s" in e for e in result.errors), result.errors
    assert result.summary is not None and reference.summary is not None
    assert result.summary.content == reference.summary.content


class SlowExtractive(ExtractiveSummarizer):
    """The extractive fallback on a very slow machine: far slower than the timeout."""

    def summarize(self, messages: Sequence[BaseMessage], *, max_tokens: int = 2000) -> str:
        threading.Event().wait(0.3)
        return super().summarize(messages, max_tokens=max_tokens)


def test_the_extractive_fallback_is_not_cut_off_by_the_timeout(
    hung: HungSummarizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The old code ran the fallback under the same 50 ms budget as the model call, so a busy
    # machine turned the last resort into "every summarizer failed".
    monkeypatch.setattr(ops_module, "ExtractiveSummarizer", SlowExtractive)
    config = CompactionConfig(keep_last_n=2, summarizer_retries=0, summarizer_timeout=0.01)
    result = compact_history(history(), summarizer=hung, config=config)
    assert result.summarizer == "fallback:SlowExtractive"
    assert result.summary is not None and "exit 100" in result.summary.text


def test_the_summarizer_thread_sees_the_callers_context(hung: HungSummarizer) -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    seen: list[str] = []

    class Recording(ExtractiveSummarizer):
        def summarize(self, messages: Sequence[BaseMessage], *, max_tokens: int = 2000) -> str:
            seen.append(var.get())
            return super().summarize(messages, max_tokens=max_tokens)

    var.set("caller")
    config = CompactionConfig(keep_last_n=2, summarizer_timeout=30)
    compact_history(history(), summarizer=Recording(), config=config)
    assert seen == ["caller"]


HANG_SCRIPT = textwrap.dedent(
    """
    import threading
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_compact import CompactionConfig
    from langchain_compact.compaction import compact_history

    class Hung:
        def summarize(self, messages, *, max_tokens):
            threading.Event().wait()  # never returns

        async def asummarize(self, messages, *, max_tokens):
            raise NotImplementedError

    msgs = [HumanMessage("task", id="t")] + [AIMessage(f"step {i}", id=f"a{i}") for i in range(8)]
    config = CompactionConfig(keep_last_n=2, summarizer_retries=0, summarizer_timeout=0.2)
    result = compact_history(msgs, summarizer=Hung(), config=config)
    print(result.summarizer, flush=True)
    """
)


def test_a_hung_summarizer_does_not_keep_the_interpreter_alive() -> None:
    # A hang check, not a speed check: the child needs about a second; 60 s is generous.
    try:
        proc = subprocess.run(
            [sys.executable, "-c", HANG_SCRIPT],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the interpreter did not exit after the fallback: {exc.stdout!r}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "fallback:ExtractiveSummarizer"
