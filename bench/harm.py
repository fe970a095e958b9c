""" "Do no harm" measures, computed from what each system sent, independently of its metadata.

* :func:`fresh_results`: the tool results a replay appends before one model call (tool
  messages, and for text-command agents without native tool calls, the observation user
  messages).
* :func:`first_view`: how each fresh result reached the model on its first view (the first
  model call after it was appended): whole, cut or cleared (a message with the same
  ``tool_call_id`` / id whose content no longer holds the original), or dropped (no such
  message); and, when it did not arrive whole, whether it would have fitted (the call's
  input with the result whole is still at or under the trigger).
* :func:`task_head_tail_kept`: the original task's first and last 200 characters are both
  still in a model input.
* :func:`next_call_fits`: a stopped run's refused call (its input plus the reply the model
  gave in the transcript) would have fitted the window.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

from bench.metrics import TruthCounter, input_text

TASK_EDGE_CHARS = 200
"""Characters of the task's head and of its tail that must survive (must-show 6)."""


def _norm(text: str) -> str:
    return " ".join(text.split())


def has_native_tool_calls(messages: Sequence[BaseMessage]) -> bool:
    """Whether the transcript uses native tool calls (else it is a text-command agent)."""
    return any(isinstance(m, ToolMessage) or getattr(m, "tool_calls", None) for m in messages)


def fresh_results(
    new: Sequence[BaseMessage], *, text_commands: bool, task_id: str | None
) -> list[BaseMessage]:
    """The tool results among ``new`` (the messages appended since the last model call).

    Tool messages always; with ``text_commands`` (no native tool calls in the transcript),
    user messages other than the original task too: the environment's observations.
    """
    out: list[BaseMessage] = []
    for m in new:
        observation = text_commands and isinstance(m, HumanMessage) and m.id != task_id
        if isinstance(m, ToolMessage) or observation:
            out.append(m)
    return out


def _key(m: BaseMessage) -> str | None:
    return m.tool_call_id if isinstance(m, ToolMessage) else m.id


def _text(m: BaseMessage) -> str:
    """The message's content text (no name, no tool calls), whitespace-normalised."""
    content = m.content
    if isinstance(content, str):
        return _norm(content)
    parts = [b if isinstance(b, str) else str(b.get("text", "")) for b in content]
    return _norm("\n".join(parts))


@dataclass
class FirstView:
    """Counts over fresh results on their first view (summed over calls and runs)."""

    results: int = 0
    hidden: int = 0
    """Reached the model cut, cleared or not at all."""
    cut_or_cleared: int = 0
    """Same id / ``tool_call_id`` present, original content no longer in it."""
    dropped: int = 0
    """No message with its id / ``tool_call_id`` in the input (summarised or trimmed away)."""
    hidden_would_fit: int = 0
    """Hidden, yet the input with this result whole would have been at or under the trigger."""
    examples: list[str] = field(default_factory=list)

    def add(self, other: FirstView) -> None:
        self.results += other.results
        self.hidden += other.hidden
        self.cut_or_cleared += other.cut_or_cleared
        self.dropped += other.dropped
        self.hidden_would_fit += other.hidden_would_fit
        self.examples = (self.examples + other.examples)[:5]

    def as_dict(self) -> dict[str, int]:
        return {
            "results": self.results,
            "hidden": self.hidden,
            "cut_or_cleared": self.cut_or_cleared,
            "dropped": self.dropped,
            "hidden_would_fit": self.hidden_would_fit,
        }


def first_view(
    results: Sequence[BaseMessage],
    model_input: Sequence[BaseMessage],
    *,
    truth: TruthCounter,
    trigger: int,
) -> FirstView:
    """How ``results`` (appended just before this call) reached the model in ``model_input``."""
    out = FirstView()
    if not results:
        return out
    by_key: dict[str, BaseMessage] = {}
    for m in model_input:
        k = _key(m)
        if k is not None:
            by_key.setdefault(k, m)
    whole_text = None
    total = truth(model_input)
    for r in results:
        out.results += 1
        original = _text(r)
        shown = by_key.get(_key(r) or "")
        if shown is not None and original in _text(shown):
            continue
        if shown is None:
            if whole_text is None:
                whole_text = _norm(input_text(model_input))
            if original and original in whole_text:
                continue  # re-sent whole under another id
            out.dropped += 1
            shown_tokens = 0
        else:
            out.cut_or_cleared += 1
            shown_tokens = truth.message(shown)
        out.hidden += 1
        if total - shown_tokens + truth.message(r) <= trigger:
            out.hidden_would_fit += 1
            if len(out.examples) < 5:
                out.examples.append(f"{_key(r)}: {truth.message(r)} tokens")
    return out


def task_edges(task: str) -> tuple[str, str]:
    """The task's first and last :data:`TASK_EDGE_CHARS` characters (whitespace-normalised)."""
    t = _norm(task)
    return t[:TASK_EDGE_CHARS], t[-TASK_EDGE_CHARS:]


def task_head_tail_kept(messages: Sequence[BaseMessage], task: str) -> bool:
    """Both ends of the original task are in ``messages`` (a pinned head + tail counts)."""
    if not task.strip():
        return True
    head, tail = task_edges(task)
    text = _norm(input_text(messages))
    return head in text and tail in text


def next_call_fits(
    stop_input: Sequence[BaseMessage], reply: BaseMessage, *, truth: TruthCounter, window: int
) -> bool:
    """The refused call (``stop_input``) plus the reply the transcript gives fits ``window``."""
    return truth(stop_input) + truth([reply]) <= window


__all__ = [
    "TASK_EDGE_CHARS",
    "FirstView",
    "first_view",
    "fresh_results",
    "has_native_tool_calls",
    "next_call_fits",
    "task_edges",
    "task_head_tail_kept",
]
