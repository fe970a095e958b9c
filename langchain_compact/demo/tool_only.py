"""The dependent task with values only in tool results: a harder variant of the demo.

:class:`ToolOnlyPolicy` wraps a :class:`~langchain_compact.demo.ContextReadingPolicy` so its
``run_step`` calls carry only the step number; :func:`tool_only_tools` gives the matching
``run_step(step)``. The value of step k then appears only in step k's tool result (and in
whatever a summary keeps of it): the model never restates it, so a value that compaction
clears without carrying it forward makes the final report fail.

Example:
    >>> from langchain_compact.demo import ContextReadingPolicy, DependentTask
    >>> task = DependentTask(steps=2, payload_chars=0)
    >>> model = ToolOnlyPolicy(inner=ContextReadingPolicy()).bind_tools(tool_only_tools(task))
    >>> model.invoke(task.prompt()).tool_calls[0]["args"]
    {'step': 1}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import SkipValidation

from langchain_compact.demo.task import DependentTask

__all__ = ["ToolOnlyPolicy", "tool_only_tools"]


class ToolOnlyPolicy(BaseChatModel):
    """Wraps a ``ContextReadingPolicy``: its ``run_step`` calls keep only ``step``, so the
    value of step k is visible only in step k's tool result (and whatever a summary keeps)."""

    inner: Annotated[Any, SkipValidation()]

    @property
    def _llm_type(self) -> str:
        return "tool-only-policy"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self.model_copy(update={"inner": self.inner.bind_tools(tools, **kwargs)})

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        result: ChatResult = self.inner._generate(messages)
        reply = result.generations[0].message
        assert isinstance(reply, AIMessage)
        if reply.tool_calls:
            calls = [{**c, "args": {"step": c["args"]["step"]}} for c in reply.tool_calls]
            reply = reply.model_copy(update={"tool_calls": calls})
        return ChatResult(generations=[ChatGeneration(message=reply)])


def tool_only_tools(task: DependentTask) -> list[BaseTool]:
    """``run_step(step)``: the task's log for ``step`` given the correct previous value."""
    inner = task.tools()[0]
    values = [task.starting_value, *task.expected_values()]

    def run_step(step: int) -> str:
        previous = values[step - 1] if 1 <= step <= task.steps else 0
        return str(inner.invoke({"step": step, "previous": previous}))

    return [
        StructuredTool.from_function(
            run_step,
            name="run_step",
            description="Run one step of the dependent task; ends with RESULT step=K value=V.",
        )
    ]
