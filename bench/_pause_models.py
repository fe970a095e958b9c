"""Building blocks of ``bench/pause.py``: chat models that sleep, a shared timeline, timed
tools, and the compaction config with or without summary preparing.

* :class:`Timeline`: one list of ``(kind, perf_counter, info)`` events shared by every model
  and tool of a run (thread-safe appends: LangGraph runs parallel nodes in threads).
* :class:`SleepyPolicy`: :class:`~langchain_compact.demo.ContextReadingPolicy` (the scripted
  agent of the dependent task, with ``usage_metadata``) that sleeps ``latency`` seconds per
  call and logs ``model_start`` / ``model_end``.
* :class:`SleepySummarizer`: a summarizer chat model that sleeps ``latency`` seconds (or a
  share of it proportional to its input, with ``reference_tokens``) and then
  keeps every fact line it was shown (the task's lines, ``RESULT step=K value=V``, run_step
  arguments), as a good summarizer would; logs one ``summarizer`` event per call (at its
  end, with its ``start`` and input ``tokens``).
* :class:`TimedChatModel`: a real chat model as the summarizer, logging the same events.
* :func:`timed_tools`: the task's tools, logging ``tool_start`` / ``tool_end``.
* :func:`compaction_config`: a ``CompactionConfig`` that passes ``prepare=`` only when the
  installed package has that field, so the harness runs before and after the feature lands.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Annotated, Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import SkipValidation

from langchain_compact import CompactionConfig
from langchain_compact.demo import ContextReadingPolicy
from langchain_compact.tokens import approximate_tokens

__all__ = [
    "PREPARE_SUPPORTED",
    "SleepyPolicy",
    "SleepySummarizer",
    "TimedChatModel",
    "Timeline",
    "compaction_config",
    "keep_fact_lines",
    "timed_tools",
]

PREPARE_SUPPORTED = "prepare" in {f.name for f in fields(CompactionConfig)}
"""Whether the installed ``CompactionConfig`` has the ``prepare`` flag (zero-pause
compaction); without it only the "without preparing" columns run."""


def compaction_config(*, prepare: bool, **settings: Any) -> CompactionConfig | None:
    """``CompactionConfig(**settings, prepare=prepare)``; ``None`` when ``prepare=True`` is
    asked of a package without the flag (that column is then reported as not available).
    Without the flag, preparing does not exist, so ``prepare=False`` is the plain config."""
    if PREPARE_SUPPORTED:
        return CompactionConfig(**settings, prepare=prepare)
    return None if prepare else CompactionConfig(**settings)


@dataclass
class Timeline:
    """Events of one run: ``(kind, seconds since perf_counter's epoch, info)``."""

    events: list[tuple[str, float, dict[str, Any]]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, kind: str, **info: Any) -> float:
        now = time.perf_counter()
        with self._lock:
            self.events.append((kind, now, info))
        return now

    def of(self, kind: str) -> list[tuple[float, dict[str, Any]]]:
        """Events of one kind, in time order."""
        return sorted((t, info) for k, t, info in self.events if k == kind)


def _ids(messages: Sequence[BaseMessage]) -> list[str]:
    return [str(m.id) for m in messages]


class SleepyPolicy(ContextReadingPolicy):
    """The dependent task's scripted agent with a fixed latency per call (sync and async)."""

    latency: float = 0.0
    timeline: Annotated[Timeline | None, SkipValidation()] = None

    def _log(self, kind: str, **info: Any) -> None:
        if self.timeline is not None:
            self.timeline.add(kind, **info)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._log("model_start", ids=_ids(messages), tokens=approximate_tokens(messages))
        time.sleep(self.latency)
        result = self._respond(messages)
        self._log("model_end")
        return result

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._log("model_start", ids=_ids(messages), tokens=approximate_tokens(messages))
        await asyncio.sleep(self.latency)
        result = self._respond(messages)
        self._log("model_end")
        return result


_FACT_LINE = re.compile(
    r"RESULT step=\d+ value=\d+"
    r"|\bstep\s+\d+\s*=\s*\d+"
    r"|\bstep\W{0,3}\s*[:=]\s*\d+\s*,\s*\W{0,3}previous\W{0,3}\s*[:=]\s*\d+"
    r"|Total steps:\s*\d+|Starting value:\s*\d+|REPORT\s+`?[A-Z]{2}-\d+"
)


def keep_fact_lines(text: str) -> str:
    """The fact lines of ``text`` (the task's lines, every ``RESULT step=K value=V`` and
    run_step argument pair), de-duplicated, one per line: what a faithful summary keeps.

    Example:
        >>> keep_fact_lines("noise\\nRESULT step=1 value=42\\nTotal steps: 3")
        '- RESULT step=1 value=42\\n- Total steps: 3'
    """
    found = dict.fromkeys(m.group(0) for m in _FACT_LINE.finditer(text))
    return "\n".join(f"- {line}" for line in found) or "- nothing yet"


class SleepySummarizer(BaseChatModel):
    """A summarizer model that sleeps ``latency`` seconds, then returns
    :func:`keep_fact_lines` of its input. Logs a ``summarizer`` event per call into
    ``timeline`` (its ``start`` and input ``tokens``, counted by ``approximate_tokens``)."""

    latency: float = 0.0
    timeline: Annotated[Timeline | None, SkipValidation()] = None
    reference_tokens: int | None = None
    """``None`` (default): every call sleeps ``latency``. A number: a call sleeps
    ``latency * min(1, input_tokens / reference_tokens)``, so a short incremental call is
    cheaper than one over the whole span (``reference_tokens`` of input)."""

    @property
    def _llm_type(self) -> str:
        return "sleepy-summarizer"

    def _seconds(self, tokens: int) -> float:
        if not self.reference_tokens:
            return self.latency
        return self.latency * min(1.0, tokens / self.reference_tokens)

    def _reply(self, messages: Sequence[BaseMessage]) -> ChatResult:
        text = "\n".join(m.text for m in messages)
        reply = AIMessage(keep_fact_lines(text), response_metadata={"model_provider": "scripted"})
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def _log(self, kind: str, **info: Any) -> None:
        if self.timeline is not None:
            self.timeline.add(kind, **info)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        start, tokens = time.perf_counter(), approximate_tokens(messages)
        time.sleep(self._seconds(tokens))
        result = self._reply(messages)
        self._log("summarizer", start=start, tokens=tokens)
        return result

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        start, tokens = time.perf_counter(), approximate_tokens(messages)
        await asyncio.sleep(self._seconds(tokens))
        result = self._reply(messages)
        self._log("summarizer", start=start, tokens=tokens)
        return result


def timed_tools(tools: Sequence[BaseTool], timeline: Timeline) -> list[BaseTool]:
    """``tools`` with the same names, descriptions and schemas, logging ``tool_start`` /
    ``tool_end`` around each call (the tools themselves take no time)."""
    out: list[BaseTool] = []
    for tool in tools:

        def call(_tool: BaseTool = tool, **kwargs: Any) -> Any:
            timeline.add("tool_start", name=_tool.name)
            try:
                return _tool.invoke(kwargs)
            finally:
                timeline.add("tool_end", name=_tool.name)

        out.append(
            StructuredTool.from_function(
                func=call,
                name=tool.name,
                description=tool.description,
                args_schema=tool.args_schema,
            )
        )
    return out


class TimedChatModel(BaseChatModel):
    """A real chat model (e.g. the local llama.cpp server) as a summarizer, logging a
    ``summarizer`` event per call like :class:`SleepySummarizer`."""

    inner: Annotated[BaseChatModel, SkipValidation()]
    timeline: Annotated[Timeline | None, SkipValidation()] = None

    @property
    def _llm_type(self) -> str:
        return f"timed-{self.inner._llm_type}"

    def _log(self, kind: str, **info: Any) -> None:
        if self.timeline is not None:
            self.timeline.add(kind, **info)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        start = time.perf_counter()
        try:
            reply = self.inner.invoke(messages, stop=stop, **kwargs)
        finally:
            self._log("summarizer", start=start, tokens=approximate_tokens(messages))
        return ChatResult(generations=[ChatGeneration(message=reply)])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        start = time.perf_counter()
        try:
            reply = await self.inner.ainvoke(messages, stop=stop, **kwargs)
        finally:
            self._log("summarizer", start=start, tokens=approximate_tokens(messages))
        return ChatResult(generations=[ChatGeneration(message=reply)])
