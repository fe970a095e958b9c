"""Compaction on demand in a graph: the agent's ``compact_conversation`` tool and a call for
the application (docs/overflow.md, "Compaction on demand").

Both run :meth:`~langchain_compact.core.Compactor.compact_now`: the compaction a trigger
runs (archive, fidelity, boundary), refused by the same limits (``max_compactions``, a
cooldown of at least one model turn, so an agent cannot loop on the tool), with an optional
focus the summary keeps first. The tool works in any graph whose tools run in a
``ToolNode`` (``create_compacting_agent``, ``add_compaction`` graphs, langchain's
``create_agent`` with :class:`~langchain_compact.middleware.CompactionMiddleware`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.prebuilt import InjectedState
from langgraph.types import Command

from langchain_compact.core import Compactor, Turn, thread_id_of

if TYPE_CHECKING:
    from langgraph.graph.state import CompiledStateGraph

__all__ = ["compact_thread", "make_compact_tool"]

TOOL_NAME = "compact_conversation"


def _core(source: Any) -> Compactor:
    core = source if isinstance(source, Compactor) else getattr(source, "core", None)
    if not isinstance(core, Compactor):
        raise TypeError(
            "pass a Compactor, or what holds one (CompactionMiddleware, CompactionNodes, "
            f"MessageCompactor: their .core), not {type(source).__name__}."
        )
    return core


def _calling(messages: list[BaseMessage], tool_call_id: str) -> int:
    """Index of the AIMessage that made the call ``tool_call_id`` (the newest one)."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if isinstance(m, AIMessage) and any(c.get("id") == tool_call_id for c in m.tool_calls):
            return i
    return len(messages)


def _answer(turn: Turn) -> str:
    if turn.outcome == "compacted" and turn.report is not None:
        r = turn.report
        return (
            f"Compacted: {r['compacted_messages']} messages summarised ({r['tokens_before']} -> "
            f"{r['tokens_after']} tokens); the summary above keeps the task, the facts and "
            "the status. Archived originals: recall_archived."
        )
    return f"Not compacted: {turn.reason or 'nothing to compact'}."


def make_compact_tool(
    source: Any, *, messages_key: str = "messages", name: str = TOOL_NAME
) -> BaseTool:
    """The ``compact_conversation(focus=None)`` tool for an agent.

    ``source`` is a :class:`~langchain_compact.core.Compactor` or what holds one (the
    middleware, :class:`~langchain_compact.graph.CompactionNodes`, a ``MessageCompactor``);
    use the one the agent's compaction runs with, or one with the same config and archive.
    The tool compacts everything before the assistant message that called it and answers
    with a ``Command`` that replaces the state's messages by the compacted history, that
    message and the tool's answer. When the compaction is refused (a limit, the cooldown,
    nothing to compact) the answer says why and nothing changes.
    """
    core = _core(source)

    @tool(name)
    def compact_conversation(
        state: Annotated[dict[str, Any], InjectedState],
        tool_call_id: Annotated[str, InjectedToolCallId],
        config: RunnableConfig,
        focus: str | None = None,
    ) -> Command[Any] | str:
        """Compact the conversation now: older messages are replaced by a summary (the
        originals stay archived). Use it before starting a new phase of work, or when the
        context is cluttered. focus: what the summary must keep first (optional)."""
        messages = list(state[messages_key])
        at = _calling(messages, tool_call_id)
        turn = core.compact_now(messages[:at], thread_id_of(config), focus=focus, run_config=config)
        answer = ToolMessage(_answer(turn), tool_call_id=tool_call_id, name=name)
        if turn.outcome != "compacted" or turn.history is None:
            return answer.text
        new = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *turn.history, *messages[at:], answer]
        return Command(update={messages_key: new})

    return compact_conversation


def compact_thread(
    graph: CompiledStateGraph[Any, Any, Any, Any],
    config: RunnableConfig,
    source: Any,
    *,
    focus: str | None = None,
    messages_key: str = "messages",
) -> Turn:
    """Compact a graph thread now, for the application or a human (between runs): read the
    thread's state, run :meth:`Compactor.compact_now` with ``focus``, and write the new
    history back (``graph.update_state``). Returns the :class:`Turn` (``"continue"`` with
    the reason when the compaction was refused; nothing is written then)."""
    core = _core(source)
    messages = list(graph.get_state(config).values.get(messages_key, []))
    turn = core.compact_now(messages, thread_id_of(config), focus=focus, run_config=config)
    if turn.outcome == "compacted" and turn.history is not None:
        graph.update_state(
            config, {messages_key: [RemoveMessage(id=REMOVE_ALL_MESSAGES), *turn.history]}
        )
    return turn
