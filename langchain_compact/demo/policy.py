"""A scripted chat model that can only continue from what its context still shows.

:class:`ContextReadingPolicy` stands in for an LLM on the :class:`~.task.DependentTask`. It is
stateless: every reply is computed from the input messages alone (it is never given the task
object), so a fact that compaction or truncation lost makes the run fail visibly.

What it reads, from the text of every message (``message.text``; all roles) and from the
structured ``tool_calls`` of AI messages:

* The task (first occurrence wins): the number of steps from ``Total steps: N``,
  ``N steps in total`` or ``N-step``; the starting value from ``Starting value: S`` (also
  ``start value``/``initial value``, with ``:``, ``=``, ``is`` or nothing before the number);
  the constraint code from ``REPORT <code>`` (upper-case ``REPORT``, code with a digit).
* Step values (a later mention overrides an earlier one; step 0 is the starting value, and
  a stated starting value always wins for step 0):

  - ``RESULT step=K value=V``, ``step=K value=V``, ``"step": K, "value": V``;
  - ``step K = V``, ``step K: V``, ``step K -> V``;
  - ``step K value V``, ``step K value=V``, ``step K: value V``, ``step K (value V``;
  - a ``run_step`` tool call with args ``{"step": K, "previous": P}``, meaning the value of
    step K-1 is P, and the same rendered as text: ``"step": K, "previous": P``,
    ``'step': K, 'previous': P``, ``run_step(step=K, previous=P)`` (either key order).

How it decides: with N unknown it answers ``BLOCKED: the original task is no longer in my
context``. Otherwise let m be the largest k with the values of steps 1..k all known (0 if step
1 is unknown). m == N: the final report ``REPORT <code>`` and one ``step K = V`` line per step
(just ``REPORT`` if the code is no longer visible). A value of a step beyond m known:
``BLOCKED: the value of step m+1 is no longer in my context (later steps are); ...``. Value m
unknown (only possible for m == 0, the starting value): ``BLOCKED``. Else it calls
``run_step(step=m+1, previous=<value of step m>)``.

Token usage mirrors a real API: ``input_tokens`` is ``token_counter(messages)`` plus
``token_counter([HumanMessage(<JSON of the bound tool schemas>)])`` (0 with no tools), and
``output_tokens`` is ``token_counter([reply])``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field, SkipValidation

from langchain_compact.demo.task import format_steps

__all__ = [
    "BLOCKED_NO_TASK",
    "MODEL_NAME",
    "ContextReadingPolicy",
    "ContextView",
    "decide",
    "read_context",
]

MODEL_NAME = "context-reading-policy"
"""``_llm_type`` and ``response_metadata["model_name"]`` of the policy."""
BLOCKED_NO_TASK = "BLOCKED: the original task is no longer in my context"

_I = re.IGNORECASE
_TOTAL_RES = (
    re.compile(r"\btotal\s+steps\s*[:=]?\s*(\d+)", _I),
    re.compile(r"\b(\d+)\s+steps\s+in\s+total\b", _I),
    re.compile(r"\b(\d+)-step\b", _I),
)
_START_RE = re.compile(r"\b(?:starting|start|initial)\s+value\s*(?:is|[:=])?\s*(\d+)", _I)
_CODE_RE = re.compile(r"\bREPORT[ \t]+`?((?=[A-Za-z_-]*\d)[A-Za-z0-9][A-Za-z0-9_-]{1,31})")
_Q = r"""['"]?"""
_VALUE_RES = (
    re.compile(rf"{_Q}\bstep{_Q}\s*[:=]\s*(\d+)\s*,?\s*{_Q}value{_Q}\s*[:=]\s*(\d+)", _I),
    re.compile(r"\bstep\s+(\d+)\s*(?:=|:|：|->|→)\s*(\d+)\b", _I),
    re.compile(r"\bstep\s+(\d+)\s*[(,:]?\s*value\s*(?:is|[:=])?\s*(\d+)", _I),
)
_CALL_RE = re.compile(rf"{_Q}\bstep{_Q}\s*[:=]\s*(\d+)\s*,?\s*{_Q}previous{_Q}\s*[:=]\s*(\d+)", _I)
_CALL_REVERSED_RE = re.compile(
    rf"{_Q}\bprevious{_Q}\s*[:=]\s*(\d+)\s*,?\s*{_Q}step{_Q}\s*[:=]\s*(\d+)", _I
)


@dataclass(slots=True)
class ContextView:
    """What a context shows about the task (see the module docstring for the forms).

    Example:
        >>> view = read_context([HumanMessage("Total steps: 2\\nStarting value: 5\\nstep 1 = 9")])
        >>> (view.steps, view.values)
        (2, {1: 9, 0: 5})
    """

    steps: int | None = None
    """Number of steps, or ``None`` when the task is not visible."""
    starting_value: int | None = None
    """The stated starting value, or ``None``."""
    code: str | None = None
    """The constraint code, or ``None``."""
    values: dict[int, int] = field(default_factory=dict)
    """Known values by step; step 0 is the starting value."""


def read_context(messages: Sequence[BaseMessage]) -> ContextView:
    """Parse the task and every known step value out of ``messages``.

    Example:
        >>> from langchain_core.messages import AIMessage
        >>> call = {"name": "run_step", "args": {"step": 4, "previous": 77}, "id": "c"}
        >>> read_context([AIMessage("", tool_calls=[call])]).values
        {3: 77}
    """
    view = ContextView()
    for message in messages:
        if not isinstance(message, BaseMessage):
            raise TypeError(
                f"ContextReadingPolicy reads BaseMessage objects, got {type(message).__name__};"
                " convert inputs with langchain_core.messages.convert_to_messages first"
            )
        text = message.text
        if view.steps is None:
            view.steps = _first_int(_TOTAL_RES, text)
        if view.starting_value is None:
            view.starting_value = _first_int((_START_RE,), text)
        if view.code is None and (code := _CODE_RE.search(text)):
            view.code = code.group(1)
        found: list[tuple[int, int, int]] = []  # (position, step, value)
        for regex in _VALUE_RES:
            found += [(m.start(), int(m.group(1)), int(m.group(2))) for m in regex.finditer(text)]
        found += [
            (m.start(), int(m.group(1)) - 1, int(m.group(2))) for m in _CALL_RE.finditer(text)
        ]
        found += [
            (m.start(), int(m.group(2)) - 1, int(m.group(1)))
            for m in _CALL_REVERSED_RE.finditer(text)
        ]
        for _, step, value in sorted(found):
            view.values[step] = value
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                args = call["args"]
                k, p = _as_int(args.get("step")), _as_int(args.get("previous"))
                if call["name"] == "run_step" and k is not None and p is not None:
                    view.values[k - 1] = p
    if view.starting_value is not None:
        view.values[0] = view.starting_value
    return view


def decide(view: ContextView) -> AIMessage:
    """Return the next move for ``view``: a ``run_step`` call, the report or ``BLOCKED``.

    Example:
        >>> decide(ContextView(steps=1, values={0: 5})).tool_calls[0]["args"]
        {'step': 1, 'previous': 5}
    """
    n = view.steps
    if n is None:
        return AIMessage(BLOCKED_NO_TASK)
    known = {k: v for k, v in view.values.items() if 0 <= k <= n}
    m = 0
    while m + 1 in known:
        m += 1
    if m == n:
        head = f"REPORT {view.code}" if view.code else "REPORT"
        return AIMessage("\n".join([head] + [f"step {k} = {known[k]}" for k in range(1, n + 1)]))
    later = [k for k in known if k > m]
    if later:
        lost = range(m + 1, min(later))
        noun = "value of step" if len(lost) == 1 else "values of steps"
        verb = "is" if len(lost) == 1 else "are"
        return AIMessage(
            f"BLOCKED: the {noun} {format_steps(lost)} {verb} no longer in my context (later"
            " steps are); cannot write the report"
        )
    if m not in known:
        return AIMessage(
            "BLOCKED: the starting value is no longer in my context; cannot run step 1"
        )
    step, previous = m + 1, known[m]
    call_hash = hashlib.sha256(f"{step}:{previous}".encode()).hexdigest()[:8]
    call = {
        "name": "run_step",
        "args": {"step": step, "previous": previous},
        "id": f"call_step_{step}_{call_hash}",
        "type": "tool_call",
    }
    return AIMessage("", tool_calls=[call])


class ContextReadingPolicy(BaseChatModel):
    """Scripted chat model for the dependent task: it continues only from what it can see.

    Stateless between calls; copies made by :meth:`bind_tools` share ``recorder``. Replies
    are deterministic, ids included (``policy-<hash of the input messages>``).

    Example:
        >>> from langchain_compact.demo import DependentTask
        >>> task = DependentTask(steps=2, payload_chars=0)
        >>> model = ContextReadingPolicy().bind_tools(task.tools())
        >>> model.invoke(task.prompt()).tool_calls[0]["args"]["step"]
        1
    """

    token_counter: Callable[[Sequence[BaseMessage]], int] = count_tokens_approximately
    """Counts tokens for ``usage_metadata``; default ``count_tokens_approximately``."""
    tool_schemas: list[dict[str, Any]] = Field(default_factory=list)
    """OpenAI-format schemas of the bound tools (set by :meth:`bind_tools`); default none."""
    recorder: Annotated[list[list[BaseMessage]] | None, SkipValidation()] = None
    """Optional shared list; every call (of every copy) appends its input messages to it."""

    @property
    def _llm_type(self) -> str:
        return MODEL_NAME

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": MODEL_NAME}

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Return a copy that counts ``tools``' schemas as input tokens.

        ``tool_choice`` and other keywords are accepted and ignored: the policy only ever
        calls ``run_step``.

        Example:
            >>> len(ContextReadingPolicy().bind_tools([{"name": "f", "parameters": {}}])
            ...     .tool_schemas)
            1
        """
        schemas = [convert_to_openai_tool(tool) for tool in tools]
        return self.model_copy(update={"tool_schemas": schemas})

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._respond(messages)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._respond(messages)

    def _respond(self, messages: list[BaseMessage]) -> ChatResult:
        reply = decide(read_context(messages))
        if self.recorder is not None:
            self.recorder.append(list(messages))
        schema_tokens = 0
        if self.tool_schemas:
            schema_json = json.dumps(self.tool_schemas, sort_keys=True, ensure_ascii=False)
            schema_tokens = self.token_counter([HumanMessage(schema_json)])
        input_tokens = self.token_counter(messages) + schema_tokens
        output_tokens = self.token_counter([reply])
        reply = reply.model_copy(
            update={
                "id": f"policy-{_fingerprint(messages)}",
                "usage_metadata": {
                    "input_tokens": input_tokens,
                    "output_tokens": output_tokens,
                    "total_tokens": input_tokens + output_tokens,
                },
                "response_metadata": {"model_provider": "scripted", "model_name": MODEL_NAME},
            }
        )
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _first_int(regexes: Sequence[re.Pattern[str]], text: str) -> int | None:
    hits = [m for regex in regexes if (m := regex.search(text))]
    return int(min(hits, key=lambda m: m.start()).group(1)) if hits else None


def _as_int(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _fingerprint(messages: Sequence[BaseMessage]) -> str:
    digest = hashlib.sha256()
    for message in messages:
        calls = message.tool_calls if isinstance(message, AIMessage) else []
        record = [message.type, message.text, getattr(message, "tool_call_id", None), calls]
        digest.update(json.dumps(record, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:24]
