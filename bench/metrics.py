"""What the benchmark measures, written independently of the package under test.

* :class:`TruthCounter`: tiktoken ``o200k_base`` counts with OpenAI's published chat
  overhead (the reference every counter is compared against, and the unit of every token
  number in the results).
* :func:`cache_split`: cached vs fresh input tokens of one model call (longest unchanged
  prefix, by message, with the previous call's input); :class:`CallLog` also splits the
  fresh tokens into new content and content re-sent after a break of the prefix.
* :func:`violations`: provider rules a model input can break.
* :func:`present`: whether a snippet survives in a model input (retention).
* :class:`CallLog`: everything recorded per model call, and the per-run summary of it.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

#: gpt-4o list prices (USD per 1M tokens) at the time of writing; cached input is half price.
PRICE_FRESH_INPUT = 2.50
PRICE_CACHED_INPUT = 1.25
PRICE_OUTPUT = 10.00
PRICES = {
    "model": "gpt-4o (list prices, USD per 1M tokens)",
    "fresh_input": PRICE_FRESH_INPUT,
    "cached_input": PRICE_CACHED_INPUT,
    "output": PRICE_OUTPUT,
}

_TOKENS_PER_MESSAGE = 3  # OpenAI cookbook: <|start|>{role}<|message|> ... <|end|>
_TOKENS_REPLY_PRIMING = 3


def _encoding() -> Any:
    import tiktoken

    try:
        return tiktoken.get_encoding("o200k_base")
    except Exception:
        # Offline: the package's documented provisioning from `bpe-openai`.
        from langchain_compact.tokens import provision_tiktoken_cache

        provision_tiktoken_cache()
        return tiktoken.get_encoding("o200k_base")


def message_texts(message: BaseMessage) -> list[str]:
    """Every text of a message that a provider tokenizes: content, name, tool calls."""
    content = message.content
    texts: list[str] = []
    if isinstance(content, str):
        texts.append(content)
    else:
        for block in content:
            if isinstance(block, str):
                texts.append(block)
            elif isinstance(block, dict) and "text" in block:
                texts.append(str(block["text"]))
    if message.name:
        texts.append(message.name)
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            texts.append(call["name"])
            texts.append(json.dumps(call["args"], ensure_ascii=False))
    return texts


class TruthCounter:
    """Reference token count: o200k_base, 3 tokens per message, 3 reply-priming tokens.

    Tool calls count their name and JSON arguments (OpenAI publishes no framing cost for
    them, so none is added). Each distinct text is encoded once.
    """

    def __init__(self) -> None:
        self._enc = _encoding()
        self._cache: dict[str, int] = {}

    def text(self, text: str) -> int:
        n = self._cache.get(text)
        if n is None:
            n = len(self._enc.encode(text, disallowed_special=()))
            self._cache[text] = n
        return n

    def message(self, message: BaseMessage) -> int:
        return _TOKENS_PER_MESSAGE + sum(self.text(t) for t in message_texts(message))

    def __call__(self, messages: Sequence[BaseMessage]) -> int:
        if not messages:
            return 0
        return _TOKENS_REPLY_PRIMING + sum(self.message(m) for m in messages)


def _key(message: BaseMessage) -> tuple[Any, ...]:
    calls = message.tool_calls if isinstance(message, AIMessage) else []
    return (
        message.type,
        json.dumps(message.content, sort_keys=True, default=str),
        getattr(message, "tool_call_id", None),
        json.dumps(calls, sort_keys=True, default=str),
    )


def cache_split(
    previous: Sequence[BaseMessage] | None, current: Sequence[BaseMessage], truth: TruthCounter
) -> tuple[int, int]:
    """``(cached, fresh)`` input tokens of ``current``.

    Cached = the tokens of the longest run of leading messages identical (type, content,
    tool calls) to the previous call's input: a provider prompt cache serves exactly an
    unchanged prefix. Idealised: no minimum prefix length, no cache expiry.
    """
    total = truth(current)
    if not previous:
        return 0, total
    cached = 0
    for a, b in zip(previous, current, strict=False):
        if _key(a) != _key(b):
            break
        cached += truth.message(b)
    return cached, total - cached


def violations(messages: Sequence[BaseMessage]) -> dict[str, int]:
    """Provider rules broken by a model input (counts of each kind).

    * ``orphan_tool_results``: a tool result whose call is not in the assistant message
      right before its batch (OpenAI and Anthropic answer HTTP 400).
    * ``dangling_tool_calls``: an assistant tool call with no result before the next
      non-tool message (HTTP 400).
    * ``system_mid_list``: a system message after a non-system message (Anthropic and
      Gemini accept system text only first; OpenAI tolerates it).
    * ``first_not_user``: the first non-system message is not a user message (Anthropic and
      Gemini reject a conversation that starts with the assistant or a tool result).
    * ``empty_input``: no message besides system messages (every provider rejects it).
    """
    out = {
        "empty_input": 0,
        "orphan_tool_results": 0,
        "dangling_tool_calls": 0,
        "system_mid_list": 0,
        "first_not_user": 0,
    }
    batch: set[str] = set()
    pending: set[str] = set()
    seen_non_system = False
    for message in messages:
        if isinstance(message, SystemMessage):
            if seen_non_system:
                out["system_mid_list"] += 1
            continue
        if not seen_non_system:
            seen_non_system = True
            if not isinstance(message, HumanMessage):
                out["first_not_user"] += 1
        if isinstance(message, ToolMessage):
            if message.tool_call_id in batch and message.tool_call_id in pending:
                pending.discard(message.tool_call_id)
            else:
                out["orphan_tool_results"] += 1
            continue
        out["dangling_tool_calls"] += len(pending)
        pending = set()
        batch = set()
        if isinstance(message, AIMessage) and message.tool_calls:
            batch = {str(c.get("id")) for c in message.tool_calls}
            pending = set(batch)
    out["dangling_tool_calls"] += len(pending)
    if not seen_non_system:
        out["empty_input"] += 1
    return out


def input_text(messages: Iterable[BaseMessage]) -> str:
    """All text a model input carries (for retention checks)."""
    return "\n".join(t for m in messages for t in message_texts(m))


def present(snippet: str, text: str) -> bool:
    """``snippet`` appears in ``text`` (whitespace-normalised)."""
    return " ".join(snippet.split()) in " ".join(text.split())


@dataclass
class CallLog:
    """Per-call records of one system on one workload."""

    window: int
    truth: TruthCounter
    context: list[int] = field(default_factory=list)
    cached: list[int] = field(default_factory=list)
    fresh: list[int] = field(default_factory=list)
    new: list[int] = field(default_factory=list)
    """Per call, the tokens of messages the previous call did not send at all (new
    messages, summaries, placeholders): uncached whatever a system does. The rest of
    ``fresh`` was sent before and is re-sent because the prefix broke in front of it."""
    hook_seconds: list[float] = field(default_factory=list)
    compacted: list[bool] = field(default_factory=list)
    summarizer_calls: int = 0
    summarizer_input_tokens: int = 0
    summarizer_output_tokens: int = 0
    violation_counts: dict[str, int] = field(default_factory=dict)
    invalid_calls: int = 0
    stopped: bool = False
    stop_reason: str = ""
    last_input: list[BaseMessage] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    """Workload-specific records (first views of fresh results, the refused call's size)."""

    def record(
        self,
        model_input: Sequence[BaseMessage],
        *,
        hook_seconds: float,
        compacted: bool,
        summarizer: Sequence[tuple[int, int]] = (),
        extra_tokens: int = 0,
    ) -> None:
        """Record one model call. ``extra_tokens``: sent before the messages on every call
        (tool schemas), so cached whenever a previous call exists."""
        prev = self.last_input or None
        cached, fresh = cache_split(prev, model_input, self.truth)
        sent = {_key(m) for m in prev or ()}
        again = sum(self.truth.message(m) for m in model_input if _key(m) in sent)
        new = cached + fresh - again  # with the per-call overhead, never cached either
        if prev:
            cached += extra_tokens
        else:
            fresh += extra_tokens
            new = fresh  # the first call: all of it, tool schemas and message overhead too
        self.new.append(new)
        self.context.append(cached + fresh)
        self.cached.append(cached)
        self.fresh.append(fresh)
        self.hook_seconds.append(hook_seconds)
        self.compacted.append(compacted)
        self.add_summarizer(summarizer)
        broken = violations(model_input)
        if any(broken.values()):
            self.invalid_calls += 1
        for k, v in broken.items():
            self.violation_counts[k] = self.violation_counts.get(k, 0) + v
        self.last_input = list(model_input)

    def add_summarizer(self, calls: Sequence[tuple[int, int]]) -> None:
        """Count summarizer calls ``(input_tokens, output_tokens)``."""
        for tokens_in, tokens_out in calls:
            self.summarizer_calls += 1
            self.summarizer_input_tokens += tokens_in
            self.summarizer_output_tokens += tokens_out

    def summary(self) -> dict[str, Any]:
        calls = len(self.context)
        back_to_back = sum(
            1 for a, b in zip(self.compacted, self.compacted[1:], strict=False) if a and b
        )
        cost = (
            sum(self.fresh) * PRICE_FRESH_INPUT
            + sum(self.cached) * PRICE_CACHED_INPUT
            + self.summarizer_input_tokens * PRICE_FRESH_INPUT
            + self.summarizer_output_tokens * PRICE_OUTPUT
        ) / 1e6
        return {
            "calls": calls,
            "peak_context": max(self.context, default=0),
            "mean_context": round(statistics.fmean(self.context), 1) if self.context else 0,
            "over_window_calls": sum(c > self.window for c in self.context),
            "input_tokens": sum(self.context),
            "cached_tokens": sum(self.cached),
            "fresh_tokens": sum(self.fresh),
            "new_tokens": sum(self.new),
            "summarizer_calls": self.summarizer_calls,
            "summarizer_input_tokens": self.summarizer_input_tokens,
            "summarizer_output_tokens": self.summarizer_output_tokens,
            "cost_usd": round(cost, 6),
            "compactions": sum(self.compacted),
            "back_to_back_compactions": back_to_back,
            "invalid_calls": self.invalid_calls,
            "violations": dict(self.violation_counts),
            "hook_ms_median": round(statistics.median(self.hook_seconds) * 1e3, 4)
            if self.hook_seconds
            else 0.0,
            "hook_ms_total": round(sum(self.hook_seconds) * 1e3, 2),
            "stopped": self.stopped,
            "stop_reason": self.stop_reason,
        }


def relative_error(estimate: int, truth: int) -> float:
    """Signed relative error ``(estimate - truth) / truth``."""
    return (estimate - truth) / truth if truth else 0.0


def error_stats(errors: Sequence[float]) -> dict[str, float]:
    """Mean signed, mean absolute and worst absolute error, in percent."""
    if not errors:
        return {"mean_pct": 0.0, "mean_abs_pct": 0.0, "max_abs_pct": 0.0, "n": 0}
    return {
        "mean_pct": round(100 * statistics.fmean(errors), 1),
        "mean_abs_pct": round(100 * statistics.fmean(abs(e) for e in errors), 1),
        "max_abs_pct": round(100 * max(abs(e) for e in errors), 1),
        "n": len(errors),
    }
