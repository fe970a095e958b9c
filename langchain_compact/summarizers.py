"""Summarizers (docs/design.md, B5): the protocol, an LLM summarizer, an extractive one.

A summarizer turns the span being compacted into text with five sections: goal
and hard constraints; confirmed facts and data; decisions and why; done / pending / next;
other context. :func:`fidelity_supplement` then lists numbers, identifiers, paths and URLs
of the span that the summary dropped, with their context, before the summary is committed.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol, cast, runtime_checkable

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig

from langchain_compact._facts import (
    CONSTRAINT_RE,
    FACTS_MARK,
    condense_summary,
    is_key_fact,
    key_fact_text,
    placeholder_facts,
    result_gist,
    unlabel,
)
from langchain_compact._placeholders import is_summary_text
from langchain_compact._render import (
    context_of,
    fit_sections,
    fits_sections,
    key_lines,
    message_text,
    render_call,
    render_transcript,
    salient_items,
    salient_rank,
    tool_result_text,
    word_prefix,
)
from langchain_compact.budget import OBSERVATION_CHARS
from langchain_compact.config import DEFAULT_SUMMARY_MAX_TOKENS
from langchain_compact.errors import ConfigError, SummarizerError
from langchain_compact.markers import KIND_CLEARED, KIND_SUMMARY, get_meta, kind_of, with_meta
from langchain_compact.tokens import approximate_tokens

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "MESSAGE_CHARS",
    "ROLLING_INSTRUCTIONS",
    "SUMMARIZER_TAG",
    "ExtractiveSummarizer",
    "LLMSummarizer",
    "Summarizer",
    "check_summary_text",
    "dense_merge",
    "fidelity_supplement",
    "focused",
    "is_running_summary",
    "merger",
    "over_bound",
    "resolve_summarizer",
    "running_summary",
    "running_text",
]

SUMMARIZER_TAG = "langchain_compact:summarizer"
"""Run tag of every summarizer model call (with LangGraph's ``nostream`` tag, so its tokens
never reach ``stream_mode="messages"``)."""

DEFAULT_SUMMARY_PROMPT = """You are the context compactor of an AI agent. The conversation \
below is about to be replaced by your summary, and the agent will continue its task from the \
summary alone (the user's original task stays pinned above it, verbatim).

Write the summary in exactly these five sections:
## 1. Goal and hard constraints
The user's goal and EVERY hard constraint, requirement or prohibition stated so far, \
verbatim where possible.
## 2. Confirmed facts and data
Numbers, identifiers, names, file paths, URLs, states and results, exactly as they appeared.
## 3. Decisions taken and why
## 4. Status
What is done, what is pending, and the next step.
## 5. Other context
Anything else that may matter later.

Rules: never invent anything; write "unknown" for what the conversation does not say. Do \
not call tools. Do not address the user. Stay under {max_tokens} tokens."""
"""Default instructions of :class:`LLMSummarizer`; ``{max_tokens}`` is filled in."""


def focused(summarizer: Summarizer, focus: str | None) -> Summarizer:
    """``summarizer`` told to keep ``focus`` first, for one compaction asked for on demand
    (``Compactor.compact_now``): its ``focused(focus)`` copy when it has one
    (:meth:`LLMSummarizer.focused`), else ``summarizer`` itself (the compactor then writes
    the focus section, :func:`~langchain_compact.core.with_focus`)."""
    focus = focus.strip() if focus and focus.strip() else None
    method = getattr(summarizer, "focused", None)
    if focus is None or not callable(method):
        return summarizer
    return cast(Summarizer, method(focus))


FOCUS_HEADING = "## 0. Focus"
"""The heading of the section a focused summary starts with."""


def focus_instructions(focus: str) -> str:
    """What an LLM summarizer is told when a compaction has a focus."""
    return (
        f"The user asked this compaction to focus on: {focus}\n"
        f"Start the summary with a section '{FOCUS_HEADING}: {focus}' that lists every fact "
        "about it (numbers, identifiers, paths, states, decisions), exactly as they appeared; "
        "then write the five sections."
    )


#: A sentence: up to a full stop that ends it (one followed by a space or the end; the dot
#: of ``report.md`` or ``v2.1`` does not end a sentence).
_SENTENCE_RE = re.compile(r"(?:[^.!?。！？\n]|[.!?](?=[^\s.!?]))+[.!?。！？]?")


MESSAGE_CHARS = 6_000
"""The most characters of one message an :class:`LLMSummarizer` request shows (a longer
one is shown as its head and tail). A compaction never hands it a longer one: it splits a
long original into parts of at most this size, read in turn (:func:`running_summary`)."""

ROLLING_INSTRUCTIONS = (
    "The conversation is too long for one request, so you read it in parts. "
    "<summary_so_far> is your summary of the parts before this one: your new summary "
    "replaces it and the part below, so carry forward EVERY fact, value, identifier, "
    "constraint and decision it states, verbatim, and add those of the part below."
)
"""What an :class:`LLMSummarizer` is told when its request starts with the summary of the
parts of the span it read before (:func:`running_summary`)."""

_RUNNING_HEADER = "[Summary of the earlier part of this conversation; carry every fact forward]"


def running_summary(text: str) -> BaseMessage:
    """The message that hands a summarizer what it wrote of the parts of a span read
    before: the first message of the next part's request, so the summary of the last part
    is the summary of the whole span (a rolling summary). An :class:`LLMSummarizer` shows it
    as ``<summary_so_far>``; another summarizer reads it as a user message.

    Example:
        >>> is_running_summary(running_summary("- a = 1")), running_text(running_summary("x"))
        (True, 'x')
    """
    return with_meta(HumanMessage(f"{_RUNNING_HEADER}\n{text}"), kind=KIND_SUMMARY, running=True)


def is_running_summary(message: BaseMessage) -> bool:
    """Whether ``message`` is a :func:`running_summary`."""
    return kind_of(message) == KIND_SUMMARY and get_meta(message).get("running") is True


def running_text(message: BaseMessage) -> str:
    """The summary text a :func:`running_summary` hands on."""
    return message_text(message).removeprefix(_RUNNING_HEADER).lstrip("\n")


@runtime_checkable
class Summarizer(Protocol):
    """Turns the messages of a span into summary text.

    Implementations raise :class:`~langchain_compact.errors.SummarizerError` (or any
    exception) on failure; the caller retries, then falls back to
    :class:`ExtractiveSummarizer`, and never loses anything.
    """

    def summarize(self, messages: Sequence[BaseMessage], *, max_tokens: int) -> str:
        """Return the summary of ``messages`` in at most ``max_tokens`` tokens."""
        ...

    async def asummarize(self, messages: Sequence[BaseMessage], *, max_tokens: int) -> str:
        """Async twin of :meth:`summarize`."""
        ...


def over_bound(text: str, max_tokens: int) -> bool:
    """Whether a summary ``text`` is over ``max_tokens``, with 25% + 20 tokens of slack
    (models and counters disagree a little on lengths). One rule for a summary written at
    the trigger and one prepared before it."""
    return approximate_tokens([HumanMessage(text)]) > max_tokens * 1.25 + 20


def check_summary_text(text: object, max_tokens: int) -> str:
    """Return ``text`` stripped, or raise :class:`SummarizerError` when it is not usable as a
    summary: not a string, empty, or over ``max_tokens`` (see :func:`over_bound`)."""
    if not isinstance(text, str) or not text.strip():
        raise SummarizerError("the summarizer returned empty text.")
    if over_bound(text, max_tokens):
        tokens = approximate_tokens([HumanMessage(text)])
        raise SummarizerError(
            f"the summary is over its bound (~{tokens} tokens > {max_tokens}); "
            "the model ignored the output limit."
        )
    return text.strip()


class LLMSummarizer:
    """Summarize with a chat model, safely.

    Temperature 0 and an output bound where the model has such fields; the call is tagged
    ``nostream`` + :data:`SUMMARIZER_TAG` so its tokens stay out of the user's stream; a
    reply that contains a tool call, is empty or is over the bound is refused (raises
    :class:`SummarizerError`), so the caller can retry or fall back.

    Args:
        model: Any LangChain chat model.
        prompt: Instructions; ``{max_tokens}`` is substituted.
        max_tokens: Default output bound (the compactor passes its own).
        fork: Claude Code's fork mode: send the agent's own system
            prompt, tools and history as the request prefix, so a provider prompt cache is
            reused, and ask for the summary last. Tool execution is still refused.
        tools: The agent's tools, for ``fork=True`` (bound only so the prefix matches).
        system_prompt: The agent's system prompt, for ``fork=True``.

    Example:
        >>> from langchain_core.language_models import GenericFakeChatModel
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> fake = GenericFakeChatModel(messages=iter([AIMessage("## 1. Goal ...")]))
        >>> LLMSummarizer(fake).summarize([HumanMessage("do x")], max_tokens=200)
        '## 1. Goal ...'
    """

    def __init__(
        self,
        model: BaseChatModel,
        *,
        prompt: str = DEFAULT_SUMMARY_PROMPT,
        max_tokens: int = DEFAULT_SUMMARY_MAX_TOKENS,
        fork: bool = False,
        tools: Sequence[Any] = (),
        system_prompt: str | None = None,
    ) -> None:
        if not isinstance(model, BaseChatModel):
            raise TypeError(
                f"LLMSummarizer needs a langchain chat model, got {type(model).__name__}; "
                "pass e.g. init_chat_model('openai:gpt-4o-mini')."
            )
        if "{max_tokens}" not in prompt and "{" in prompt:
            raise ValueError("prompt may only use the {max_tokens} placeholder")
        self.model = model
        self.prompt = prompt
        self.max_tokens = max_tokens
        self.fork = fork
        self.tools = list(tools)
        self.system_prompt = system_prompt
        self.focus: str | None = None
        """What this compaction must keep first (:meth:`focused`); ``None``: nothing."""

    def focused(self, focus: str | None) -> LLMSummarizer:
        """A copy of this summarizer told to keep ``focus`` first
        (:func:`focus_instructions`); the focus of one compaction, passed down explicitly."""
        twin = copy.copy(self)
        twin.focus = focus.strip() if focus and focus.strip() else None
        return twin

    def _runnable(self, max_tokens: int) -> Any:
        updates: dict[str, Any] = {}
        fields = type(self.model).model_fields
        if "temperature" in fields:
            updates["temperature"] = 0
        for name in ("max_tokens", "max_output_tokens"):
            if name in fields:
                updates[name] = max_tokens
                break
        model: Any = self.model.model_copy(update=updates) if updates else self.model
        if self.fork and self.tools:
            model = model.bind_tools(self.tools)
        return model

    def _request(self, messages: Sequence[BaseMessage], max_tokens: int) -> list[BaseMessage]:
        instructions = self.prompt.replace("{max_tokens}", str(max_tokens))
        if self.focus:
            instructions = f"{instructions}\n\n{focus_instructions(self.focus)}"
        if self.fork:
            prefix: list[BaseMessage] = []
            if self.system_prompt:
                prefix.append(SystemMessage(self.system_prompt))
            ask = (
                f"{instructions}\n\nSummarize the conversation above now. Reply with text "
                "only: tool calls are refused."
            )
            return [*prefix, *messages, HumanMessage(ask)]
        earlier = ""
        if messages and is_running_summary(messages[0]):
            # One part of a long span: the summary of the parts before it comes first, and
            # the summary written now replaces both (read_in_parts).
            earlier = f"<summary_so_far>\n{running_text(messages[0])}\n</summary_so_far>\n\n"
            instructions = f"{instructions}\n\n{ROLLING_INSTRUCTIONS}"
            messages = messages[1:]
        transcript = render_transcript(messages, max_chars_per_message=MESSAGE_CHARS)
        return [
            SystemMessage(instructions),
            HumanMessage(
                f"{earlier}<conversation>\n{transcript}\n</conversation>\n\nWrite the summary now."
            ),
        ]

    @staticmethod
    def _config() -> RunnableConfig:
        return {"tags": ["nostream", SUMMARIZER_TAG], "run_name": "langchain_compact_summarizer"}

    @staticmethod
    def _check(reply: BaseMessage, max_tokens: int) -> str:
        if isinstance(reply, AIMessage) and reply.tool_calls:
            names = [c["name"] for c in reply.tool_calls]
            raise SummarizerError(
                f"the summarizer replied with tool call(s) {names}; tool execution is refused "
                "during compaction."
            )
        return check_summary_text(tool_result_text(reply), max_tokens)

    def summarize(self, messages: Sequence[BaseMessage], *, max_tokens: int | None = None) -> str:
        bound = max_tokens or self.max_tokens
        reply = self._runnable(bound).invoke(self._request(messages, bound), self._config())
        return self._check(reply, bound)

    async def asummarize(
        self, messages: Sequence[BaseMessage], *, max_tokens: int | None = None
    ) -> str:
        bound = max_tokens or self.max_tokens
        reply = await self._runnable(bound).ainvoke(self._request(messages, bound), self._config())
        return self._check(reply, bound)


def resolve_summarizer(
    summarizer: Summarizer | None,
    model: Any = None,
    summary_model: Any = None,
) -> Summarizer | None:
    """The summarizer an integration runs: ``summarizer`` when one is given (it always
    wins), else an :class:`LLMSummarizer` over ``summary_model`` (e.g. a cheaper model) or
    over the integration's chat ``model``; ``None`` (the compactor's extractive default)
    when neither is a chat model.

    Example:
        >>> from langchain_core.language_models import FakeListChatModel
        >>> type(resolve_summarizer(None, FakeListChatModel(responses=["s"]))).__name__
        'LLMSummarizer'
        >>> resolve_summarizer(None, None) is None
        True
    """
    if summarizer is not None:
        return summarizer
    if summary_model is not None:
        if not isinstance(summary_model, BaseChatModel):
            raise ConfigError(
                f"summary_model must be a langchain chat model, got "
                f"{type(summary_model).__name__}; pass e.g. "
                "init_chat_model('openai:gpt-4o-mini'), or summarizer=... for another kind."
            )
        return LLMSummarizer(summary_model)
    if isinstance(model, BaseChatModel):
        return LLMSummarizer(model)
    return None


_OUTCOMES: dict[tuple[int, int], tuple[list[str], list[str]]] = {}
_OUTCOMES_LIMIT = 8_192


def _outcome_lines(text: str) -> tuple[list[str], list[str]]:
    """``(result_gist(text), key_lines(text))`` of a tool result, remembered by the text's
    length and hash (not the text): a compaction's summary and its fidelity check both read
    every result of the span, and a prepared summary reads them again at the trigger."""
    key = (len(text), hash(text))
    found = _OUTCOMES.get(key)
    if found is None:
        if len(_OUTCOMES) >= _OUTCOMES_LIMIT:
            _OUTCOMES.clear()
        found = _OUTCOMES[key] = (result_gist(text), key_lines(text))
    return found[0][:], found[1][:]


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    # Cut between words: a number cut short would read as another number.
    return text if len(text) <= limit else word_prefix(text[: limit - 3]) + " ..."


def _observation_lines(text: str) -> list[str]:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if len(lines) <= 3:
        return lines
    return [lines[0], "...", *lines[-2:]]


#: Relative keep-priority of the five sections when a summary must drop entries.
_SECTION_WEIGHTS = [0.5, 0.4, 1.0, 1.0, 1.0]


#: Section 1 when the span states no goal or constraint: the task's are in the pinned task
#: (never "none stated", which a reader takes to mean the task stated none).
NO_NEW_GOAL = "none beyond the pinned task (its goal and constraints stand)"

#: What a tool's output sent back as a user message looks like: a traceback or error line,
#: or a text-command agent's observation footer (SWE-agent's "(Open file: ...)").
_OBSERVATION_RE = re.compile(
    r"\A\s*(?:Traceback \(most recent call last\)|(?:[A-Za-z]*Error|ERROR|Exception)\b[:\s]"
    r"|Parameter '[^']+' is |EXECUTION TIMED OUT|Your command ran successfully)"
    r"|\(Open file: [^)]*\)\s*\(Current directory: [^)]*\)",
)


def _is_observation(text: str, prior: BaseMessage | None) -> bool:
    """A user message that is a tool's output, not the user's words: it answers tool calls
    no tool message answered, or it follows an assistant or tool message and reads as a
    tool's output (:data:`_OBSERVATION_RE`: an error, a text-command agent's observation).
    Such a message is a fact (section 2), never a goal."""
    if isinstance(prior, AIMessage) and prior.tool_calls:
        return True
    return isinstance(prior, (AIMessage, ToolMessage)) and bool(_OBSERVATION_RE.search(text))


#: The order in which :func:`_shed` drops whole sections (indices into the five): the
#: goal's filler line (the pinned task states the goal), other context, the status, the
#: calls. The facts never go whole, nor a goal the span stated.
_SHED_ORDER = (0, 4, 3, 2)


def _shed(sections: list[tuple[str, list[str]]], max_tokens: int) -> list[tuple[str, list[str]]]:
    """``sections`` as far cut down as a bound too small for every section's first entry
    needs (:func:`~langchain_compact._render.fits_sections`): whole sections go in
    :data:`_SHED_ORDER`, then the facts' ``[call_id]`` tags (half the cost of a short
    fact; the summary's header names the archive, which recall reads by tool name too).

    Otherwise fitting cuts the text at the bound, mid-entry: at the smallest bound the
    goal's filler line, the first call and the status stayed, and the facts section ended
    in the cut (``run_step [call_7]: RESULT``, the values lost, kept only by the fidelity
    supplement as far as its own room went). The calls and the status are recoverable from
    the facts; the facts from nothing but the archive."""
    if fits_sections(sections, max_tokens):
        return sections
    kept = dict(enumerate(sections))
    for index in _SHED_ORDER:
        if index == 0 and kept[0][1] != [NO_NEW_GOAL]:
            continue  # a goal or constraint the span stated stays
        del kept[index]
        if fits_sections(list(kept.values()), max_tokens):
            break
    title, facts = kept[1]
    if not fits_sections(list(kept.values()), max_tokens, whole=title):
        kept[1] = (title, list(dict.fromkeys(_ID_TAG_RE.sub(":", f, 1) for f in facts)))
    return list(kept.values())


class _Collected:
    """What :class:`ExtractiveSummarizer` gathers from a span, message by message, into its
    five sections."""

    def __init__(self) -> None:
        self.goal: list[str] = []
        self.facts: list[str] = []
        self.actions: list[str] = []
        self.carried: list[str] = []  # "other context" bullets of merged summaries
        self.cleared: list[str] = []  # tool_call_ids of results cleared before this compaction
        self.merged = 0
        self.answered: set[str] = set()
        self.calls: dict[str, str] = {}
        self.last_ai = ""

    def add(self, msg: BaseMessage, prior: BaseMessage | None) -> None:
        text = message_text(msg)
        if kind_of(msg) == KIND_SUMMARY:
            self._summary(text)
        elif isinstance(msg, HumanMessage):
            self._human(text, prior)
        elif isinstance(msg, AIMessage):
            self._assistant(msg, text)
        elif isinstance(msg, ToolMessage):
            self._tool(msg, text)
        elif not isinstance(msg, SystemMessage) and text.strip():
            self.facts.append(f"{msg.type}: {_clip(text, 300)}")

    def _summary(self, text: str) -> None:
        """Merging earlier summaries: keep their bullets."""
        self.merged += 1
        by_section = _summary_bullets(text)
        self.goal.extend(by_section.get("1", []))
        # Merged facts stay dense: a tool result's bullet keeps its outcome segment, and a
        # supplement item already stated in a fact is not repeated.
        kept = [_ID_TAG_RE.sub(":", b.split(" | ")[0], 1) for b in by_section.get("2", [])]
        stated = "\n".join(kept)
        extra = [b for b in by_section.get("S", []) if b.split(": ")[0] not in stated]
        self.facts.extend(kept + extra)
        self.actions.extend(by_section.get("3", []))
        self.carried.extend(by_section.get("5", []))

    def _human(self, text: str, prior: BaseMessage | None) -> None:
        if len(text) > OBSERVATION_CHARS or _is_observation(text, prior):
            lines = " | ".join(_clip(ln, 200) for ln in _observation_lines(text))
            self.facts.append("observation: " + lines)
            return
        self.goal.append("user: " + _clip(text, 400))
        # The user's words are clipped; each constraint they state stays whole.
        self.goal.extend(
            "constraint: " + " ".join(s.split())
            for s in _SENTENCE_RE.findall(text)
            if CONSTRAINT_RE.search(s) and len(text) > 400
        )

    def _assistant(self, msg: AIMessage, text: str) -> None:
        if text.strip():
            self.last_ai = _clip(text, 300)
            self.actions.append("assistant: " + _clip(text, 300))
        for call in msg.tool_calls:
            rendered = render_call(call["name"], call["args"])
            self.calls[str(call.get("id"))] = rendered
            self.actions.append(f"called {_clip(rendered, 400)}")
        for bad in msg.invalid_tool_calls:  # answered by an error result, if at all
            rendered = f"{bad.get('name') or 'a tool'} with malformed arguments"
            self.calls[str(bad.get("id"))] = rendered
            self.actions.append(f"called {rendered}: {_clip(str(bad.get('args')), 200)}")

    def _tool(self, msg: ToolMessage, text: str) -> None:
        self.answered.add(msg.tool_call_id)
        if kind_of(msg) == KIND_CLEARED:  # a placeholder: keep its fact lines and id
            self.cleared.append(msg.tool_call_id)
            keys = placeholder_facts(text)
            if keys:
                name = msg.name or "tool"
                self.facts.append(f"{name} [{msg.tool_call_id}]: " + " | ".join(keys))
            return
        flag = " (error)" if msg.status == "error" else ""
        gist, keys = _outcome_lines(text)
        shown = dict.fromkeys([*gist, *keys[:3]])
        body = " | ".join(_clip(ln, 240) for ln in shown)
        self.facts.append(f"{msg.name or 'tool'}{flag} [{msg.tool_call_id}]: {body}")

    def _status(self, compacted: int) -> list[str]:
        if self.merged and self.merged == compacted:
            return [
                f"merged from {self.merged} earlier summaries; the newest summary has the status"
            ]
        pending = [c for cid, c in self.calls.items() if cid not in self.answered]
        return [
            f"done: {len(self.answered)} tool call(s) returned, {compacted} messages compacted",
            "pending: " + ("; ".join(pending) if pending else "no unanswered tool calls"),
            "last assistant message: " + (self.last_ai or "unknown"),
            "next step: unknown (continue from the facts above and the pinned task)",
        ]

    def sections(self, compacted: int) -> list[tuple[str, list[str]]]:
        """The five sections, each without repeated entries."""
        status = self._status(compacted)
        carried = list(self.carried)
        if self.cleared:
            carried.append(
                f"{len(self.cleared)} tool results had been cleared before this compaction"
            )
        sections: list[tuple[str, list[str]]] = [
            ("1. Goal and hard constraints", self.goal or [NO_NEW_GOAL]),
            ("2. Confirmed facts and data", self.facts or ["none recorded"]),
            ("3. Decisions taken and why", self.actions or ["none recorded"]),
            ("4. Status", status),
            ("5. Other context", carried or ["none recorded"]),
        ]
        return [(title, list(dict.fromkeys(items))) for title, items in sections]


class ExtractiveSummarizer:
    """Deterministic summary built from the messages themselves; no LLM.

    Same five sections as the LLM prompt. Keeps human requests and every sentence that
    states a constraint, each tool call with its arguments, the first and last lines of
    each tool result (where commands report their outcome) and the assistant's statements.
    The offline default and the fallback of every other summarizer.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> text = ExtractiveSummarizer().summarize(
        ...     [HumanMessage("Deploy v2. You must never touch prod.")], max_tokens=300)
        >>> "must never touch prod" in text
        True
    """

    def summarize(
        self, messages: Sequence[BaseMessage], *, max_tokens: int = DEFAULT_SUMMARY_MAX_TOKENS
    ) -> str:
        collected = _Collected()
        previous: BaseMessage | None = None
        for msg in messages:
            collected.add(msg, previous)
            previous = msg
        sections = collected.sections(len(messages))
        if collected.merged and collected.merged == len(messages):
            # A merge of summaries: dense, and over the bound the calls and prose go first,
            # the facts last (a call's arguments repeat facts the merged summaries state).
            return condense_summary(fit_sections(sections, 1 << 30), max_tokens)
        # Facts are dropped last but for the goal and constraints, which are never cut
        # mid-entry: the calls and status are recoverable from the facts. A bound too small
        # for every section sheds whole sections first (_shed), so weights follow the titles.
        shed = _shed(sections, max_tokens)
        weight_of = dict(zip((t for t, _ in sections), _SECTION_WEIGHTS, strict=True))
        weights = [weight_of[t] for t, _ in shed]
        protect = (0,) if shed and shed[0][0] == sections[0][0] else ()
        return fit_sections(shed, max_tokens, weights=weights, protect=protect)

    async def asummarize(
        self, messages: Sequence[BaseMessage], *, max_tokens: int = DEFAULT_SUMMARY_MAX_TOKENS
    ) -> str:
        return self.summarize(messages, max_tokens=max_tokens)


_FILLER_RE = re.compile(
    r"unknown \(|none recorded|no new goal or constraint stated|none beyond the pinned task"
    r"|\(\d+ (older entries omitted|more details)"
)
_HEADING_RE = re.compile(r"^##\s*(?:(\d)\.|(Supplement))")


#: `` [call_id]:`` after a tool name in a fact bullet (dropped when merging: the merged
#: summary's archive reference covers recall).
_ID_TAG_RE = re.compile(r" \[[^\]\s]{1,80}\]:")


def _summary_bullets(text: str) -> dict[str, list[str]]:
    """Bullets of a summary by section number ("S" for the fidelity supplement)."""
    out: dict[str, list[str]] = {}
    section = ""
    for line in text.splitlines():
        heading = _HEADING_RE.match(line.strip())
        if heading:
            section = heading.group(1) or "S"
        elif section and line.startswith("- ") and not _FILLER_RE.match(line[2:]):
            out.setdefault(section, []).append(line[2:].strip())
    return out


def _unwrapped(item: str, ctx: str) -> str:
    """``ctx`` without the ``- `` and ``item: `` prefixes of a carried bullet."""
    while ctx.startswith(("- ", f"{item}: ")):
        ctx = ctx.removeprefix("- ").removeprefix(f"{item}: ")
    return ctx


def _fact_segments(source: str) -> list[str]:
    """The lines of ``source``, with the facts a placeholder kept (joined with ``" | "``
    after ``facts kept:``, and carried so into summaries) one per line and unprefixed, so
    each is judged and quoted as the fact it is. An earlier supplement's entry loses the
    label that only repeats it (``969529: RESULT step=14 value=969529``): labelled, it was
    no key fact, and a merge ranked its value with plain numbers, after every warning path,
    and dropped it at the bound."""
    out = []
    for raw in source.replace(" | ", "\n").splitlines():
        line = raw.strip().removeprefix("- ").strip()
        out.append(unlabel(line.removeprefix(_KEPT_PREFIX).strip()))
    return out


_KEPT_PREFIX = FACTS_MARK.strip()
_ASSIGNED = re.compile(r"(?<![\w.-])([A-Za-z_][\w.-]*)=([\w.,-]+)")
"""A ``key=value`` pair of any value, the key starting at a word boundary."""
_PAIR = re.compile(r"([A-Za-z_][\w.-]*)\s*[=:]\s*(\d[\d.,]{3,}\d)")
"""A ``key=value`` / ``key: value`` pair whose value is a number of five or more characters."""


def fidelity_supplement(
    span: Sequence[BaseMessage],
    summary: str,
    *,
    max_items: int | None = None,
    max_tokens: int | None = None,
    key_fact_tokens: int | None = None,
) -> str:
    """Details of ``span`` that ``summary`` dropped, as a supplement to append ('' if none).

    Checks numbers, identifiers, paths and URLs from human and assistant messages (text and
    tool-call arguments), from the outcome lines of tool results (first and last lines;
    the bodies are archived) and from the fact lines cleared results kept in their
    placeholders. Each missing item is listed with its surrounding text.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> fidelity_supplement([HumanMessage("ticket QX-4821 in /srv/app.py")], "a ticket")
        '...QX-4821: ticket QX-4821 in /srv/app.py...'
    """
    sources = _supplement_sources(span)
    missing = _missing_items(sources, summary)
    paired, key_facts = _unpaired_values(sources, summary, missing)
    if not missing:
        return ""
    # Ticket-like ids, URLs and the values of numeric ``key = value`` facts first, then the
    # other items of key fact lines (paths among them), plain numbers last: under a tight
    # bound the supplement keeps what is hardest to recover (the paths in the warning lines
    # of a hundred logs used to rank with the values a tool computed, and push them out).
    # The sort is stable. (A fact's context is then that fact line, wherever the item
    # appeared first.) One pass over the key fact lines: each line's salient items are
    # looked up in ``missing`` (dict lookups, not a scan of ``missing`` per line).
    facts: dict[str, str] = {}
    for line in key_facts:
        for item in salient_items(line):
            if item in missing and item not in facts:
                facts[item] = _unwrapped(item, context_of(item, line))
    missing.update(facts)

    def rank(item: str) -> int:
        base = salient_rank(item)
        return 0 if base == 0 or item in paired else 1 if item in facts else 1 + base

    ranked = sorted(missing.items(), key=lambda kv: rank(kv[0]))
    lines = _within(ranked, rank, max_items, max_tokens, key_fact_tokens)
    if len(lines) < len(missing):
        lines.append(f"- ({len(missing) - len(lines)} more details: ask recall_archived)")
    return "## Supplement: details the summary left out (verbatim)\n" + "\n".join(lines)


def _supplement_sources(span: Sequence[BaseMessage]) -> list[str]:
    """The texts :func:`fidelity_supplement` checks, what people and the assistant said
    first (text and tool-call arguments), then the outcome lines of tool results and the
    key facts cleared results kept in their placeholders."""
    primary: list[str] = []  # what people and the assistant said: checked first
    secondary: list[str] = []  # outcome lines of tool results
    for msg in span:
        text = message_text(msg)
        if kind_of(msg) == KIND_CLEARED:
            # A placeholder: the original is archived (or gone), but the key facts it kept
            # (ids, ``key = value`` with data) are the visible copy of what the result said,
            # and the summary carries them on.
            kept = [p for p in text.partition(FACTS_MARK)[2].split(" | ") if is_key_fact(p)]
            if kept:
                secondary.append("\n".join(kept))
            continue
        if isinstance(msg, ToolMessage) or (
            len(text) > OBSERVATION_CHARS and kind_of(msg) != KIND_SUMMARY
        ):
            gist, keys = _outcome_lines(text)
            secondary.append("\n".join(dict.fromkeys([*keys, *gist])))
        else:
            if kind_of(msg) == KIND_SUMMARY and is_summary_text(text):
                text = text.partition("\n")[2]  # the header: index, count, archive reference
            primary.append(text)
        if isinstance(msg, AIMessage):
            primary.extend(render_call(c["name"], c["args"]) for c in msg.tool_calls)
    return primary + secondary


def _missing_items(sources: Sequence[str], summary: str) -> dict[str, str]:
    """Each salient item of ``sources`` that ``summary`` does not hold, with its context,
    in order of appearance."""
    missing: dict[str, str] = {}
    checked: set[str] = set()  # items already looked up in the summary
    for source in sources:
        # A placeholder's kept facts are joined with " | ": an item's context is its own
        # fact, not the neighbouring ones (a long context costs the bound other facts).
        segments: str | None = None
        for item in salient_items(source):
            if item in checked:
                continue
            checked.add(item)
            if item not in summary:
                if segments is None:
                    segments = "\n".join(_fact_segments(source))
                missing[item] = _unwrapped(item, context_of(item, segments))
    return missing


def _unpaired_values(
    sources: Sequence[str], summary: str, missing: dict[str, str]
) -> tuple[set[str], list[str]]:
    """Add to ``missing`` the values of numeric ``key = value`` facts that ``summary`` does
    not state with their key (and with the other pairs of their line); return those facts'
    values and the key fact lines of ``sources``, in order.

    A value is kept with its key: ``"previous": 674004`` in a later call's arguments does
    not say that step 7 produced it, so the fact line ``step=7 value=674004`` is missing.
    And with the other ``key=value`` pairs of its line: ``ep=32 value=140341`` (a line a
    summarizer cut at its start) does not say which step produced the value."""
    pairs = set(_PAIR.findall(summary))
    assigned = set(_ASSIGNED.findall(summary))
    paired: set[str] = set()  # values of numeric ``key = value`` facts
    key_facts: list[str] = []  # the key fact lines of the sources, in order
    for source in sources:
        for line in _fact_segments(source):
            if not is_key_fact(line):
                continue
            key_facts.append(line)
            whole = all(p in assigned for p in _ASSIGNED.findall(line))
            for key, value in _PAIR.findall(line):
                paired.add(value)
                if value not in missing and ((key, value) not in pairs or not whole):
                    missing[value] = _unwrapped(value, context_of(value, line))
    return paired, key_facts


def _within(
    ranked: Sequence[tuple[str, str]],
    rank: Callable[[str], int],
    max_items: int | None,
    max_tokens: int | None,
    key_fact_tokens: int | None,
) -> list[str]:
    """The supplement's lines, in ``ranked`` order, up to ``max_items`` and ``max_tokens``
    (key facts, rank 0, up to ``key_fact_tokens`` when larger)."""
    lines: list[str] = []
    used = 0
    for item, ctx in ranked:
        line = f"- {item}: {ctx}"
        cost = approximate_tokens([HumanMessage(line)]) - 6
        full = max_items is not None and len(lines) >= max_items
        bound = max_tokens
        if bound is not None and key_fact_tokens is not None and rank(item) == 0:
            bound = max(bound, key_fact_tokens)  # key facts first, in the larger room
        if full or (bound is not None and used + cost > bound):
            break
        lines.append(line)
        used += cost
    return lines


class _JoinedSummaries:
    """Merges summaries without a model: their texts (headers dropped) one after the
    other, condensed to the bound (:func:`~langchain_compact._facts.condense_summary`:
    duplicates and lines a longer one states go, then the oldest calls and log lines)."""

    _local = True
    """Local, linear and deterministic: run without a timeout (no worker thread)."""

    def summarize(self, messages: Sequence[BaseMessage], *, max_tokens: int) -> str:
        texts = (message_text(m) for m in messages)
        bodies = (t.partition("\n")[2] if is_summary_text(t) else t for t in texts)
        return condense_summary("\n".join(bodies), max_tokens)

    async def asummarize(self, messages: Sequence[BaseMessage], *, max_tokens: int) -> str:
        return self.summarize(messages, max_tokens=max_tokens)


def merger(summarizer: Summarizer, *, prepared: bool) -> Summarizer:
    r"""The summarizer that merges earlier summaries at a compaction: ``summarizer``, or,
    when the compaction's own summary was prepared before the trigger, one that joins the
    summaries and condenses them, without a model.

    A prepared summary makes the compaction a swap the agent does not wait for; a merge by
    a model would put that model call back at the trigger (the merge is due only once the
    new summary is written). Merged summaries are dense anyway (:func:`dense_merge` keeps
    their key facts and drops calls and log lines first), and the summaries merged are
    archived whole.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> merged = merger(ExtractiveSummarizer(), prepared=True)
        >>> merged.summarize([HumanMessage("- a = 1"), HumanMessage("- a = 1\n- b = 2")],
        ...                  max_tokens=100)
        '- a = 1\n- b = 2'
    """
    return _JoinedSummaries() if prepared else summarizer


def dense_merge(
    summaries: Sequence[BaseMessage], text: str, max_tokens: int, *, soft_tokens: int
) -> str:
    """The merged summary of ``summaries`` that a summarizer wrote as ``text``, dense and
    checked: within ``max_tokens``, and within ``soft_tokens`` but for key facts.

    The text is condensed first (see :func:`~langchain_compact._facts.condense_summary`:
    calls and log lines beyond ``soft_tokens`` go), then the fidelity check runs on the key
    facts left, so a value the summarizer kept only inside a call comes back as its fact
    line (ids and ``key = value`` facts first, in the order they appear); then the whole
    is condensed again.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> s = [HumanMessage("- RESULT step=1 value=766457"), HumanMessage("- ticket QX-12")]
        >>> print(dense_merge(s, "- called f(766457)", 200, soft_tokens=2))
        ## Supplement: details the summary left out (verbatim)
        - RESULT step=1 value=766457
        - ticket QX-12
        - (1 older entries omitted; archived)
    """
    dense = condense_summary(text, max_tokens, soft_tokens=soft_tokens)
    # Checked against the key facts only: a value the dense text holds only in a call or a
    # log line (which the final condensing may drop) comes back as its own fact line.
    extra = fidelity_supplement(summaries, key_fact_text(dense), max_tokens=max_tokens)
    return condense_summary(f"{dense}\n\n{extra}", max_tokens, soft_tokens=soft_tokens)
