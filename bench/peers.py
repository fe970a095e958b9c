"""The systems under test, each driven through its real package code.

Every system is an adapter with the same two calls, so all of them see the same growing
history turn by turn and the metrics are computed on what the model would receive:

* ``prepare(new_messages) -> Prepared``: append what arrived since the last model call
  (user / tool messages), run the system's own pre-model work (its real hooks), and return
  the model input. Only the hook calls are timed; applying a state update with LangGraph's
  ``add_messages`` reducer (what a graph does for every system alike) and the summarizer
  model's own time are not.
* ``observe(reply)``: append the model's reply to the system's state.

Systems (all at the same budget: trigger ``T = 0.75 x window``, summary bound ``S``):

* ``ours``: langchain-compact's graph nodes as ``add_compaction`` wires them
  (``CompactionNodes.micro`` -> ``route`` -> ``summarize`` -> ``after_summarize``), with
  ``CompactionConfig(context_window=W, summary_max_tokens=S)``, otherwise defaults.
* ``ours_lcel``: langchain-compact's stateless ``compact_messages(...)`` Runnable applied to the
  whole raw history on every call (the LCEL transformer). A ``CompactionError`` it raises
  (a call that cannot fit) ends the run like a stop.
* ``lc_summarization``: langchain ``SummarizationMiddleware(model=<summarizer>,
  trigger=("tokens", T), keep=("messages", 4))``; its ``before_model`` hook, whose update is
  applied to the agent state like ``create_agent`` does.
* ``lc_context_editing``: langchain ``ContextEditingMiddleware(edits=[ClearToolUsesEdit(
  trigger=T, keep=3)])``; its ``wrap_model_call`` hook with a real ``ModelRequest``.
* ``langmem``: langmem ``SummarizationNode(model=<summarizer>, max_tokens=T,
  max_tokens_before_summary=T, max_summary_tokens=S)`` (its documented node; the running
  summary is kept in ``context`` between calls, the full history in ``messages``).
* ``trim_messages``: langchain-core ``trim_messages(strategy="last", max_tokens=T,
  token_counter=count_tokens_approximately, start_on="human", end_on=("human", "tool"),
  include_system=True)`` on the full history, as LangGraph's docs show it.
* ``deepagents``: the context management ``create_deep_agent`` installs, with its default
  ``StateBackend`` and a model whose profile says ``max_input_tokens=W``: deepagents'
  ``SummarizationMiddleware`` with the parameters of its ``create_summarization_middleware``
  except the trigger, which is ``("tokens", T)`` like every peer's (see
  :func:`deepagents_summarization`), behind ``FilesystemMiddleware``'s eviction of large
  tool results and user messages (see :class:`DeepAgents`).

The same summarizer model serves every system that takes one: :class:`ExtractiveSummaryModel`,
a deterministic chat model that writes an extractive summary of the text it is given, so no
system gains anything from a better LLM.
"""

from __future__ import annotations

import re
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately, trim_messages
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.graph import MessagesState
from langgraph.graph.message import add_messages
from pydantic import Field, SkipValidation

from bench.metrics import TruthCounter, message_texts

with warnings.catch_warnings():
    # langmem's dependencies import deprecated LangGraph names at import time.
    warnings.simplefilter("ignore")
    from langmem.short_term import SummarizationNode
    from langmem.short_term.summarization import (
        DEFAULT_EXISTING_SUMMARY_PROMPT,
        DEFAULT_FINAL_SUMMARY_PROMPT,
        DEFAULT_INITIAL_SUMMARY_PROMPT,
    )

from deepagents.middleware.summarization import (
    DEEPAGENTS_DEFAULT_SUMMARY_PROMPT as DEEPAGENTS_SUMMARY_PROMPT,
)
from langchain.agents.middleware import (
    ClearToolUsesEdit,
    ContextEditingMiddleware,
    SummarizationMiddleware,
)
from langchain.agents.middleware.summarization import (
    DEFAULT_SUMMARY_PROMPT as LC_SUMMARY_PROMPT,
)
from langchain.agents.middleware.types import (
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    ToolCallRequest,
)

from langchain_compact import CompactionConfig
from langchain_compact.compaction import compaction_info
from langchain_compact.errors import CompactionError, ConfigError, InvalidHistoryError
from langchain_compact.graph.nodes import CompactionNodes
from langchain_compact.lcel import compact_messages
from langchain_compact.markers import newest_boundary
from langchain_compact.summarizers import DEFAULT_SUMMARY_PROMPT as OUR_SUMMARY_PROMPT
from langchain_compact.summarizers import ExtractiveSummarizer, LLMSummarizer

SYSTEMS = (
    "ours",
    "ours_lcel",
    "lc_summarization",
    "lc_context_editing",
    "langmem",
    "trim_messages",
    "deepagents",
)
LABELS = {
    "ours": "langchain-compact (graph nodes)",
    "ours_lcel": "langchain-compact (compact_messages)",
    "lc_summarization": "langchain SummarizationMiddleware",
    "lc_context_editing": "langchain ContextEditingMiddleware",
    "langmem": "langmem SummarizationNode",
    "trim_messages": "langchain-core trim_messages",
    "deepagents": "deepagents SummarizationMiddleware (+ large-result eviction)",
    "ours_default": "langchain-compact (graph, default summarizer)",
}
SUMMARIZING = ("ours", "ours_lcel", "lc_summarization", "langmem", "deepagents")
_RUN_CONFIG: Any = {"configurable": {"thread_id": "bench"}}
#: trim_messages as LangGraph's "manage message history" guide configures it.
_TRIM_KWARGS: dict[str, Any] = {
    "strategy": "last",
    "token_counter": count_tokens_approximately,
    "start_on": "human",
    "end_on": ("human", "tool"),
    "include_system": True,
}


@dataclass(frozen=True)
class Budget:
    """The one context budget every system is configured with."""

    window: int
    trigger_ratio: float = 0.75

    @property
    def trigger(self) -> int:
        return int(self.window * self.trigger_ratio)

    @property
    def summary_tokens(self) -> int:
        """Summary bound ``S``: an eighth of the window."""
        return max(64, self.window // 8)


# --------------------------------------------------------------------------- summarizer


def _instruction_patterns(templates: Sequence[str]) -> list[re.Pattern[str]]:
    """One full-line pattern per template line (placeholders match anything); lines that are
    only a placeholder, or have under 8 literal characters, are not instructions."""
    out: dict[str, re.Pattern[str]] = {}
    for template in templates:
        for line in template.splitlines():
            line = " ".join(line.split())
            parts = re.split(r"\{[a-z_]+\}", line)
            if sum(len(p.strip()) for p in parts) < 8:
                continue
            out[line] = re.compile("^" + ".*".join(re.escape(p) for p in parts) + "$")
    return list(out.values())


def _prompt_templates() -> list[str]:
    out = [LC_SUMMARY_PROMPT, OUR_SUMMARY_PROMPT, "Here is a summary of the conversation to date:"]
    out += [DEEPAGENTS_SUMMARY_PROMPT, DEEPAGENTS_SUMMARY_MESSAGE]
    for prompt in (
        DEFAULT_INITIAL_SUMMARY_PROMPT,
        DEFAULT_EXISTING_SUMMARY_PROMPT,
        DEFAULT_FINAL_SUMMARY_PROMPT,
    ):
        for message in prompt.messages:
            template = getattr(getattr(message, "prompt", None), "template", None)
            if isinstance(template, str):
                out.append(template)
    out += [
        "Write the summary now.",
        "Summarize the conversation above now. Reply with text only: tool calls are refused.",
    ]
    return out


#: The text deepagents' SummarizationMiddleware wraps a summary in
#: (``_build_new_messages_with_path`` in ``deepagents/middleware/summarization.py``); a later
#: summary of it does not copy it.
DEEPAGENTS_SUMMARY_MESSAGE = (
    "You are in the middle of a conversation that has been summarized.\n"
    "The full conversation history has been saved to {file_path} should you need to refer "
    "back to it for details.\n"
    "A condensed summary follows:"
)

_INSTRUCTIONS = _instruction_patterns(_prompt_templates())
_FORMAT_TAGS = re.compile(r"</?(?:message|messages|content|tool_call|conversation)\b[^>\n]*>")
_SALIENT_LINE = re.compile(r"\d{3,}|\w=\S|/[\w.\-]+/|\b[A-Z]{2,}-\d")
"""Worth keeping at all: numbers, key=value pairs, paths, identifiers."""
_KEY_LINE = re.compile(
    r"\b[A-Z]{2,}-\d{3,}\b|[\u4e00-\u9fff]+-\d{3,}"  # identifiers (tickets, codes)
    r"|\b(?:RESULT|NOTE|FACT|ERROR|EXIT|FAILED|REPORT)\b"  # outcome lines
    r"|\"\w+\":\s*\d|\bvalue\s*[=:]\s*\d"  # tool-call arguments, reported values
    r"|\b(?:must|never|always|only|do not|don't|required?|forbidden|at most|at least|"
    r"exactly|ensure|avoid|constraint|deadline|total steps|starting value)\b"
    r"|必须|不要|不能|禁止|务必|不得|备注|记住",
    re.IGNORECASE,
)
"""Key lines (what an LLM summary states): constraints, identifiers, outcomes, arguments."""
_HEAD_LINES = 6
_LINE_CHARS = 300


def _fit(lines: list[str], budget: int, truth: TruthCounter) -> list[int]:
    """Indices to keep: the first few (where the goal usually is), then the newest."""
    keep: list[int] = []
    used = 0
    head = min(_HEAD_LINES, len(lines))
    for i in [*range(head), *range(len(lines) - 1, head - 1, -1)]:
        cost = truth.text(lines[i]) + 2
        if used + cost > budget:
            if i >= head:
                break
            continue
        keep.append(i)
        used += cost
    return keep


def extractive_summary(text: str, max_tokens: int, truth: TruthCounter) -> str:
    """Deterministic summary of ``text`` in at most ``max_tokens`` o200k tokens.

    Key lines first (constraints, identifiers, outcome lines, tool-call arguments and
    reported values: what an LLM summary would state), then other salient lines (numbers,
    paths, key=value) with the remaining budget. Within each class it keeps the first few
    lines (where the goal usually is) and then the newest; output is in original order.
    """
    lines: list[str] = []
    seen: set[str] = set()
    for raw in text.splitlines():
        line = " ".join(raw.split())
        if not line or line in seen or not (_KEY_LINE.search(line) or _SALIENT_LINE.search(line)):
            continue
        seen.add(line)
        lines.append(line if len(line) <= _LINE_CHARS else line[: _LINE_CHARS - 3] + "...")
    header = "Summary of the conversation so far (key lines):"
    budget = max_tokens - truth.text(header) - 2
    key = [i for i, line in enumerate(lines) if _KEY_LINE.search(line)]
    other = [i for i, line in enumerate(lines) if not _KEY_LINE.search(line)]
    chosen = [key[j] for j in _fit([lines[i] for i in key], budget, truth)]
    left = budget - sum(truth.text(lines[i]) + 2 for i in chosen)
    chosen += [other[j] for j in _fit([lines[i] for i in other], left, truth)]
    body = "\n".join(f"- {lines[i]}" for i in sorted(chosen))
    return f"{header}\n{body}" if body else f"{header}\n- (nothing salient)"


def summarizer_material(messages: Sequence[BaseMessage]) -> str:
    """The text a summarizer model is asked to summarise, minus the instruction lines around
    it (a model does not copy its prompt into its summary) and markup tags."""
    text = "\n".join(t for m in messages for t in message_texts(m))
    text = _FORMAT_TAGS.sub("\n", text)
    kept = []
    for line in text.splitlines():
        norm = " ".join(line.split())
        if not any(p.match(norm) for p in _INSTRUCTIONS):
            kept.append(line)
    return "\n".join(kept)


class ExtractiveSummaryModel(BaseChatModel):
    """The summarizer LLM stand-in shared by every system: replies with
    :func:`extractive_summary` of its input, bounded by ``max_tokens`` (o200k tokens).

    ``log`` (shared by copies) records ``(input_tokens, output_tokens, seconds)`` per call;
    ``provider`` is reported as the LangSmith provider (SummarizationMiddleware compares it
    with the agent replies' ``model_provider`` to trust reported usage).
    """

    max_tokens: int = 512
    provider: str = "openai"
    truth: Annotated[Any, SkipValidation()] = None
    log: Annotated[list[tuple[int, int, float]], SkipValidation()] = Field(default_factory=list)
    position: Annotated[Callable[[], int] | None, SkipValidation()] = None
    """Optional clock (e.g. the number of agent-model calls so far), logged per call."""
    positions: Annotated[list[int], SkipValidation()] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "extractive-summary"

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = self.provider
        return params

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        t0 = time.perf_counter()
        truth = self.truth
        summary = extractive_summary(summarizer_material(messages), self.max_tokens, truth)
        reply = AIMessage(summary, response_metadata={"model_provider": self.provider})
        self.log.append((truth(messages), truth([reply]), time.perf_counter() - t0))
        if self.position is not None:
            self.positions.append(self.position())
        return ChatResult(generations=[ChatGeneration(message=reply)])


# --------------------------------------------------------------------------- adapters


@dataclass
class Prepared:
    """What one ``prepare`` call produced."""

    model_input: list[BaseMessage]
    hook_seconds: float
    summarizer: list[tuple[int, int]] = field(default_factory=list)
    stopped: bool = False
    stop_reason: str = ""
    compacted: bool = False
    """The history was compacted before this call (a summarizer call that only prepared a
    summary for a later trigger is not a compaction)."""


def compactions_in(messages: Sequence[BaseMessage]) -> int:
    """How many compactions of ours ``messages`` went through: the newest boundary's index,
    0 before the first."""
    if newest_boundary(messages)[0] < 0:
        return 0
    return compaction_info(messages).count


def compacted_now(
    ours: bool, before: int, model_input: Sequence[BaseMessage], summarizer_ran: bool
) -> tuple[bool, int]:
    """Whether the history was compacted for the call that got ``model_input``, and the
    count to compare the next call with (``before``: the previous one). Ours by the
    boundary's index (a summarizer call that only prepared a summary for a later trigger
    is no compaction), the peers by a summarizer call."""
    if not ours:
        return summarizer_ran, before
    count = compactions_in(model_input)
    return count != before, count


class Adapter:
    """Base: a system with its own state, fed the same history as every other system."""

    name = "base"
    separate_system = False  # create_agent keeps the system prompt out of the state
    ours = False  # compactions are read from our boundary markers, not summarizer calls

    def __init__(self, budget: Budget, summary_model: ExtractiveSummaryModel) -> None:
        self.budget = budget
        self.summary_model = summary_model
        self.system: SystemMessage | None = None
        self.messages: list[BaseMessage] = []
        self._compactions = 0

    def _append(self, new: Sequence[BaseMessage]) -> None:
        for m in new:
            if self.separate_system and isinstance(m, SystemMessage) and not self.messages:
                self.system = m
            else:
                self.messages.append(m)

    def _hook(self) -> tuple[list[BaseMessage], bool, str]:
        raise NotImplementedError

    def prepare(self, new: Sequence[BaseMessage]) -> Prepared:
        self._append(new)
        mark = len(self.summary_model.log)
        self._timer = 0.0
        model_input, stopped, reason = self._hook()
        calls = self.summary_model.log[mark:]
        model_time = sum(c[2] for c in calls)
        compacted, self._compactions = compacted_now(
            self.ours, self._compactions, model_input, bool(calls)
        )
        return Prepared(
            model_input=model_input,
            hook_seconds=max(0.0, self._timer - model_time),
            summarizer=[(c[0], c[1]) for c in calls],
            stopped=stopped,
            stop_reason=reason,
            compacted=compacted,
        )

    def _timed(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        self._timer += time.perf_counter() - t0
        return out

    def observe(self, reply: BaseMessage) -> None:
        self.messages.append(reply)

    def _with_system(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        return ([self.system] if self.system is not None else []) + list(messages)


class Ours(Adapter):
    name = "ours"
    ours = True

    def __init__(self, budget: Budget, summary_model: ExtractiveSummaryModel) -> None:
        super().__init__(budget, summary_model)
        self.config = CompactionConfig(
            context_window=budget.window,
            trigger_ratio=budget.trigger_ratio,
            summary_max_tokens=budget.summary_tokens,
        )
        self.nodes = CompactionNodes(
            config=self.config, summarizer=LLMSummarizer(summary_model), archive=None
        )
        self.state: dict[str, Any] = {"messages": []}

    def _apply(self, update: dict[str, Any]) -> None:
        for key, value in update.items():
            if key == "messages":
                self.state["messages"] = add_messages(self.state["messages"], value)
            else:
                self.state[key] = value

    def _append(self, new: Sequence[BaseMessage]) -> None:
        if new:
            self.state["messages"] = add_messages(self.state["messages"], list(new))

    def _hook(self) -> tuple[list[BaseMessage], bool, str]:
        self._apply(self._timed(self.nodes.micro, self.state, _RUN_CONFIG))
        route = self._timed(self.nodes.route, self.state, _RUN_CONFIG)  # as LangGraph calls it
        if isinstance(route, list):  # the graph runs the prepare node beside the model call
            self._apply(self.nodes.prepare(self.state, _RUN_CONFIG))
            route = "continue"
        if route == "compact":
            self._apply(self._timed(self.nodes.summarize, self.state, _RUN_CONFIG))
            route = self._timed(self.nodes.after_summarize, self.state, _RUN_CONFIG)
        if route == "stop":
            update = self._timed(self.nodes.stop, self.state)
            return list(self.state["messages"]), True, str(update.get("stop_reason", ""))
        return list(self.state["messages"]), False, ""

    def observe(self, reply: BaseMessage) -> None:
        self.state["messages"] = add_messages(self.state["messages"], [reply])


class OursLCEL(Adapter):
    name = "ours_lcel"
    ours = True

    def __init__(self, budget: Budget, summary_model: ExtractiveSummaryModel) -> None:
        super().__init__(budget, summary_model)
        config = CompactionConfig(
            context_window=budget.window,
            trigger_ratio=budget.trigger_ratio,
            summary_max_tokens=budget.summary_tokens,
        )
        self.runnable_config = config
        self.runnable = compact_messages(
            config=config, summarizer=LLMSummarizer(summary_model), archive=None
        )

    def _hook(self) -> tuple[list[BaseMessage], bool, str]:
        try:
            return list(self._timed(self.runnable.invoke, self.messages)), False, ""
        except (ConfigError, InvalidHistoryError):
            raise  # a bug in the bench or the package, not a stop
        except CompactionError as exc:  # the chain refused a call that cannot fit: a stop
            return list(self.messages), True, f"raised {type(exc).__name__}: {exc}"


class LCSummarization(Adapter):
    name = "lc_summarization"
    separate_system = True

    def __init__(self, budget: Budget, summary_model: ExtractiveSummaryModel) -> None:
        super().__init__(budget, summary_model)
        self.middleware: Any = SummarizationMiddleware(
            model=summary_model, trigger=("tokens", budget.trigger), keep=("messages", 4)
        )

    def _hook(self) -> tuple[list[BaseMessage], bool, str]:
        state: Any = {"messages": self.messages}
        update = self._timed(self.middleware.before_model, state, None)
        if update:
            self.messages = add_messages(self.messages, update["messages"])
        return self._with_system(self.messages), False, ""


class LCContextEditing(Adapter):
    name = "lc_context_editing"
    separate_system = True

    def __init__(self, budget: Budget, summary_model: ExtractiveSummaryModel) -> None:
        super().__init__(budget, summary_model)
        self.middleware: Any = ContextEditingMiddleware(
            edits=[ClearToolUsesEdit(trigger=budget.trigger, keep=3)]
        )

    def _hook(self) -> tuple[list[BaseMessage], bool, str]:
        seen: list[list[BaseMessage]] = []

        def handler(request: Any) -> Any:
            seen.append(list(request.messages))
            return ModelResponse(result=[AIMessage("")])

        request: Any = ModelRequest(
            model=self.summary_model,
            messages=list(self.messages),
            system_message=self.system,
            tools=[],
            state={"messages": self.messages},  # type: ignore[typeddict-item]
            runtime=None,
        )
        self._timed(self.middleware.wrap_model_call, request, handler)
        return self._with_system(seen[0]), False, ""


class LangMem(Adapter):
    name = "langmem"

    def __init__(self, budget: Budget, summary_model: ExtractiveSummaryModel) -> None:
        super().__init__(budget, summary_model)
        self.node = SummarizationNode(
            model=summary_model,
            max_tokens=budget.trigger,
            max_tokens_before_summary=budget.trigger,
            max_summary_tokens=budget.summary_tokens,
        )
        self.context: dict[str, Any] = {}

    def _hook(self) -> tuple[list[BaseMessage], bool, str]:
        out = self._timed(self.node.invoke, {"messages": self.messages, "context": self.context})
        self.context = out.get("context", self.context)
        return list(out["summarized_messages"]), False, ""


class Trim(Adapter):
    name = "trim_messages"

    def _hook(self) -> tuple[list[BaseMessage], bool, str]:
        out = self._timed(
            trim_messages, self.messages, max_tokens=self.budget.trigger, **_TRIM_KWARGS
        )
        return list(out), False, ""


def deepagents_summarization(
    budget: Budget, model: BaseChatModel, summary_model: BaseChatModel, backend: Any
) -> Any:
    """deepagents' ``SummarizationMiddleware`` as ``create_deep_agent`` builds it, at the
    bench's trigger.

    ``create_deep_agent`` (``deepagents/graph.py``, deepagents 0.7.32) puts
    ``create_summarization_middleware(model, backend)`` in the main agent's stack (line 931),
    with ``backend = StateBackend()`` when none is passed (line 671). That factory
    (``deepagents/middleware/summarization.py``, lines 1873-1962) passes
    ``compute_summarization_defaults(model)`` (lines 279-316), which for a model whose
    profile has ``max_input_tokens`` are ``trigger=("fraction", 0.85)``,
    ``keep=("fraction", 0.10)`` and ``truncate_args_settings={"trigger": ("fraction", 0.85),
    "keep": ("fraction", 0.10)}``, with ``trim_tokens_to_summarize=None``,
    ``token_counter=count_tokens_approximately`` and ``DEEPAGENTS_DEFAULT_SUMMARY_PROMPT``.
    All of these are kept except the trigger: ``("tokens", T)`` like every other peer's, and
    the argument truncation's trigger with it (deepagents ties the two together).

    ``model`` is the agent's model (its profile gives the window; the middleware's
    ``keep`` fraction and its over-budget check read it); ``summary_model`` writes the
    summaries through the documented ``summarizer=`` parameter, so deepagents summarises with
    the same model as every other peer.
    """
    from deepagents.middleware.summarization import SummarizationMiddleware as DeepSummarization

    return DeepSummarization(
        model=model,
        backend=backend,
        trigger=("tokens", budget.trigger),
        keep=("fraction", 0.10),
        token_counter=count_tokens_approximately,
        summary_prompt=DEEPAGENTS_SUMMARY_PROMPT,
        trim_tokens_to_summarize=None,
        truncate_args_settings={"trigger": ("tokens", budget.trigger), "keep": ("fraction", 0.10)},
        summarizer=summary_model,
    )


class _AgentModel(BaseChatModel):
    """The agent model's stand-in in a replay: the transcript supplies the replies; this
    only carries what deepagents reads from the agent model, its profile (the window) and
    its provider (to trust the usage the replies report). Never called."""

    provider: str = "openai"

    @property
    def _llm_type(self) -> str:
        return "scripted-replay"

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = self.provider
        return params

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        raise RuntimeError("the replay's agent model is never called")


class DeepAgents(Adapter):
    """deepagents' context management, hook by hook as ``create_deep_agent``'s stack runs it.

    ``FilesystemMiddleware(backend=StateBackend())`` with its defaults
    (``tool_token_limit_before_evict=20000``, ``human_message_token_limit_before_evict=50000``)
    sees every new tool result through its ``wrap_tool_call`` (a result over 80,000
    characters goes to the backend, the model sees a head and tail preview and the path), and
    wraps the model call outside :func:`deepagents_summarization`'s ``wrap_model_call``
    (their order in ``create_deep_agent``); the model request has no tools, so the
    filesystem middleware adds nothing to the system prompt. The state updates the hooks
    return (the summarization event, the session id, replaced messages) are applied as
    ``create_agent`` applies them; a ``ContextOverflowError`` the middleware raises (the
    input is still over its budget, 95% of the window, after compacting) ends the run like a
    stop. ``StateBackend`` writes to the graph's ``files`` channel, so the hooks run inside
    a one-node LangGraph graph whose state carries the files; only the hook calls are timed.
    ``PatchToolCallsMiddleware`` (a ``before_agent`` hook that answers dangling tool calls
    once per invocation) has nothing to do on a replayed transcript and is left out.
    """

    name = "deepagents"
    separate_system = True

    def __init__(self, budget: Budget, summary_model: ExtractiveSummaryModel) -> None:
        super().__init__(budget, summary_model)
        from deepagents.backends import StateBackend
        from deepagents.middleware.filesystem import FilesystemMiddleware, FilesystemState
        from langgraph.graph import START, StateGraph

        backend = StateBackend()
        self.model = _AgentModel(profile={"max_input_tokens": budget.window})
        self.filesystem: Any = FilesystemMiddleware(backend=backend)
        self.summarization: Any = deepagents_summarization(
            budget, self.model, summary_model, backend
        )
        self.private: dict[str, Any] = {}  # _summarization_event, _summarization_session_id
        self.files: dict[str, Any] = {}
        self._new: list[BaseMessage] = []
        self._out: tuple[list[BaseMessage], bool, str] = ([], False, "")
        builder: Any = StateGraph(FilesystemState)
        builder.add_node("hooks", self._hooks)
        builder.add_edge(START, "hooks")
        self.graph = builder.compile()

    def _append(self, new: Sequence[BaseMessage]) -> None:
        for m in new:
            if isinstance(m, SystemMessage) and not self.messages and self.system is None:
                self.system = m
            else:
                self._new.append(m)

    def _tool_name(self, call_id: str) -> str:
        for m in reversed(self.messages):
            if isinstance(m, AIMessage):
                for call in m.tool_calls:
                    if call["id"] == call_id:
                        return call["name"]
        return ""

    def _evict(self, message: BaseMessage) -> BaseMessage:
        """A new tool result through ``FilesystemMiddleware.wrap_tool_call``."""
        from langchain_core.messages import ToolMessage

        if not isinstance(message, ToolMessage):
            return message
        name = self._tool_name(message.tool_call_id) or message.name or "tool"
        call = {"name": name, "args": {}, "id": message.tool_call_id, "type": "tool_call"}
        request: Any = ToolCallRequest(
            tool_call=call,  # type: ignore[arg-type]
            tool=None,
            state={"messages": self.messages},
            runtime=None,  # type: ignore[arg-type]
        )
        out = self._timed(self.filesystem.wrap_tool_call, request, lambda _r: message)
        return out if isinstance(out, BaseMessage) else message

    def _hooks(self, state: Any) -> dict[str, Any]:
        from langchain_core.exceptions import ContextOverflowError

        self.files = dict(state.get("files") or {})
        new, self._new = [self._evict(m) for m in self._new], []
        self.messages = add_messages(self.messages, new)
        seen: list[Any] = []
        commands: list[Any] = []

        def handler(request: Any) -> Any:
            seen.append(request)
            return ModelResponse(result=[AIMessage("")])

        def summarize(request: Any) -> Any:
            out = self.summarization.wrap_model_call(request, handler)
            if isinstance(out, ExtendedModelResponse):
                commands.append(out.command)
                return out.model_response
            return out

        request: Any = ModelRequest(
            model=self.model,
            messages=list(self.messages),
            system_message=self.system,
            tools=[],
            state={"messages": self.messages, "files": self.files, **self.private},  # type: ignore[typeddict-item]
            runtime=None,
            model_settings={},
        )
        try:
            out = self._timed(self.filesystem.wrap_model_call, request, summarize)
        except ContextOverflowError as exc:
            self._out = (
                self._with_system(self.messages),
                True,
                f"raised ContextOverflowError: {exc}",
            )
            return {}
        if isinstance(out, ExtendedModelResponse):
            commands.append(out.command)
        for command in commands:
            update = dict(command.update or {}) if command is not None else {}
            if "messages" in update:
                self.messages = add_messages(self.messages, update.pop("messages"))
            self.private.update(update)
        sent = seen[-1]
        system = [sent.system_message] if sent.system_message is not None else []
        self._out = (system + list(sent.messages), False, "")
        return {}

    def _hook(self) -> tuple[list[BaseMessage], bool, str]:
        out = self.graph.invoke({"messages": [], "files": self.files})
        self.files = dict(out.get("files") or {})
        return self._out

    def observe(self, reply: BaseMessage) -> None:
        self.messages = add_messages(self.messages, [reply])


ADAPTERS: dict[str, type[Adapter]] = {
    cls.name: cls
    for cls in (Ours, OursLCEL, LCSummarization, LCContextEditing, LangMem, Trim, DeepAgents)
}


def make_summary_model(
    budget: Budget, truth: TruthCounter, *, provider: str = "openai"
) -> ExtractiveSummaryModel:
    """A fresh shared summarizer for one run (its own call log)."""
    return ExtractiveSummaryModel(
        max_tokens=budget.summary_tokens, provider=provider, truth=truth, log=[], positions=[]
    )


def make(name: str, budget: Budget, truth: TruthCounter) -> Adapter:
    """A fresh adapter of system ``name`` with its own summarizer log."""
    return ADAPTERS[name](budget, make_summary_model(budget, truth))


def with_usage(reply: BaseMessage, model_input: Sequence[BaseMessage], truth: TruthCounter) -> Any:
    """The scripted reply as a provider would return it: usage computed from what the model
    received (o200k), ``model_provider`` set."""
    tokens_in, tokens_out = truth(model_input), truth([reply])
    return reply.model_copy(
        update={
            "usage_metadata": {
                "input_tokens": tokens_in,
                "output_tokens": tokens_out,
                "total_tokens": tokens_in + tokens_out,
            },
            "response_metadata": {"model_provider": "openai", "model_name": "scripted-replay"},
        }
    )


def task_prompt_in(messages: Sequence[BaseMessage], task: str) -> bool:
    """The original task (its first 300 characters) is still in ``messages``."""
    head = " ".join(task.split())[:300]
    return any(head in " ".join(str(m.content).split()) for m in messages if m.content)


# --------------------------------------------------------------------------- real agents


def _react_graph(
    model: Any, tools: Sequence[Any], preprocess: Callable[[list[BaseMessage]], Any]
) -> Any:
    """A plain tool-calling loop whose model node sends ``preprocess(messages)`` to the
    model (the pattern LangGraph's docs use for ``trim_messages`` and LCEL preprocessors)."""
    from langgraph.graph import START, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    bound = model.bind_tools(list(tools))

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke(preprocess(list(state["messages"])))]}

    builder = StateGraph(MessagesState)
    builder.add_node("call_model", call_model)
    builder.add_node("tools", ToolNode(list(tools)))
    builder.add_edge(START, "call_model")
    builder.add_conditional_edges("call_model", tools_condition)
    builder.add_edge("tools", "call_model")
    return builder.compile()


def _langmem_graph(model: Any, tools: Sequence[Any], node: Any) -> Any:
    """langmem's documented wiring: a summarization node before the model node, which reads
    ``summarized_messages``; the running summary lives in ``context``."""
    from langgraph.graph import START, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    class State(MessagesState):
        context: dict[str, Any]
        summarized_messages: list[AnyMessage]

    bound = model.bind_tools(list(tools))

    def call_model(state: State) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["summarized_messages"])]}

    builder = StateGraph(State)
    builder.add_node("summarize", node)
    builder.add_node("call_model", call_model)
    builder.add_node("tools", ToolNode(list(tools)))
    builder.add_edge(START, "summarize")
    builder.add_edge("summarize", "call_model")
    builder.add_conditional_edges("call_model", tools_condition)
    builder.add_edge("tools", "summarize")
    return builder.compile()


def deepagents_agent(budget: Budget, model: Any, tools: Sequence[Any], summary_model: Any) -> Any:
    """A real agent with deepagents' context management: ``create_agent`` with the
    middleware ``create_deep_agent`` puts around the model for it, in its order
    (:func:`deepagents_summarization`, then ``PatchToolCallsMiddleware``), a ``StateBackend``
    and deepagents' file state (where the summarized history is offloaded). The agent model
    gets a profile with ``max_input_tokens`` = the window, as a real model has, and the
    middleware's ``model`` (its profile, and the provider whose reported usage it trusts) is
    an :class:`_AgentModel` with that profile and the provider the scripted replies carry.

    ``create_deep_agent`` itself also adds ``FilesystemMiddleware``'s eight file tools and
    the ``task`` tool for subagents; their schemas (about 2,400 tokens for the file tools
    alone) would fill most of a 4k window before any compaction, so they are left out and
    every system runs with the same tools. Their large-result eviction (over 80,000
    characters) never fires on these tasks' results."""
    from deepagents.backends import StateBackend
    from deepagents.middleware.filesystem import FilesystemState
    from deepagents.middleware.patch_tool_calls import PatchToolCallsMiddleware
    from langchain.agents import create_agent

    profile = {"max_input_tokens": budget.window}
    profiled = model.model_copy(update={"profile": profile})
    # What the middleware reads from its ``model``: the profile, and the provider it checks
    # the replies' reported usage against (a real model's replies carry its own provider;
    # the scripted models here stamp the shared summarizer's).
    agent_model = _AgentModel(profile=profile, provider=getattr(summary_model, "provider", ""))
    summarization = deepagents_summarization(budget, agent_model, summary_model, StateBackend())
    return create_agent(
        profiled,
        list(tools),
        middleware=[summarization, PatchToolCallsMiddleware()],
        state_schema=FilesystemState,
    )


def dependent_agent(
    name: str, budget: Budget, model: Any, tools: Sequence[Any], summary_model: Any
) -> Any:
    """A compiled agent of system ``name`` for the dependent task, built the way each
    package documents: ``create_compacting_agent`` (ours), ``create_agent`` with the
    middleware (langchain), langmem's node before the model, a model node that trims or runs
    ``compact_messages`` on the history (trim_messages, ours_lcel). ``ours_default`` is
    ``create_compacting_agent`` with the extractive summarizer (passed explicitly: with a
    model the default is now an LLM summarizer over it)."""
    config = CompactionConfig(
        context_window=budget.window,
        trigger_ratio=budget.trigger_ratio,
        summary_max_tokens=budget.summary_tokens,
    )
    if name in ("ours", "ours_default"):
        from langchain_compact.graph import create_compacting_agent

        return create_compacting_agent(
            model,
            tools,
            config=config,
            summarizer=(LLMSummarizer(summary_model) if name == "ours" else ExtractiveSummarizer()),
            archive=None,
            recall_tool=False,
        )
    if name == "ours_lcel":
        runnable = compact_messages(
            config=config, summarizer=LLMSummarizer(summary_model), archive=None
        )
        return _react_graph(model, tools, runnable.invoke)
    if name in ("lc_summarization", "lc_context_editing"):
        from langchain.agents import create_agent

        middleware: Any = (
            SummarizationMiddleware(
                model=summary_model, trigger=("tokens", budget.trigger), keep=("messages", 4)
            )
            if name == "lc_summarization"
            else ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=budget.trigger, keep=3)])
        )
        return create_agent(model, list(tools), middleware=[middleware])
    if name == "langmem":
        node = SummarizationNode(
            model=summary_model,
            max_tokens=budget.trigger,
            max_tokens_before_summary=budget.trigger,
            max_summary_tokens=budget.summary_tokens,
        )
        return _langmem_graph(model, tools, node)
    if name == "trim_messages":
        return _react_graph(
            model,
            tools,
            lambda msgs: trim_messages(msgs, max_tokens=budget.trigger, **_TRIM_KWARGS),
        )
    if name == "deepagents":
        return deepagents_agent(budget, model, tools, summary_model)
    raise ValueError(f"unknown system {name!r}; choose from {SYSTEMS}")


__all__ = [
    "ADAPTERS",
    "LABELS",
    "SUMMARIZING",
    "SYSTEMS",
    "Adapter",
    "Budget",
    "ExtractiveSummaryModel",
    "Prepared",
    "compacted_now",
    "compactions_in",
    "deepagents_agent",
    "deepagents_summarization",
    "dependent_agent",
    "extractive_summary",
    "make",
    "make_summary_model",
    "summarizer_material",
    "task_prompt_in",
    "with_usage",
]
