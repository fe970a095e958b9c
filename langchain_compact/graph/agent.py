"""`create_compacting_agent`: a ReAct agent with compaction built in."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from langchain_compact._defaults import DEFAULT_ARCHIVE, DefaultArchiveFlag, resolve_context_window
from langchain_compact.config import CompactionConfig
from langchain_compact.core import Compactor
from langchain_compact.graph.ondemand import make_compact_tool
from langchain_compact.graph.state import CompactionState
from langchain_compact.graph.wiring import add_compaction
from langchain_compact.summarizers import Summarizer, resolve_summarizer
from langchain_compact.tokens import TokenCounter, approximate_tokens, resolve_counter

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.graph.state import CompiledStateGraph
    from langgraph.store.base import BaseStore

    from langchain_compact.archive import TranscriptArchive
    from langchain_compact.memory import CompactionMemory

__all__ = ["create_compacting_agent"]


def create_compacting_agent(
    model: BaseChatModel,
    tools: Sequence[Any],
    *,
    config: CompactionConfig | None = None,
    summarizer: Summarizer | None = None,
    archive: TranscriptArchive | DefaultArchiveFlag | None = DEFAULT_ARCHIVE,
    system_prompt: str | None = None,
    recall_tool: bool = True,
    counter: TokenCounter = approximate_tokens,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    store: BaseStore | None = None,
    memory: CompactionMemory | None = None,
    compact_tool: bool = False,
    summary_model: BaseChatModel | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Build a tool-calling agent (``agent`` -> ``tools`` loop) with compaction wired in.

    Args:
        model: A chat model that supports ``bind_tools``.
        tools: The agent's tools.
        config: Settings; ``context_window`` defaults to ``model.profile``.
        summarizer: Wins when given. By default an
            :class:`~langchain_compact.summarizers.LLMSummarizer` over ``model`` (or
            ``summary_model``) writes the summaries: one model call per compaction,
            prepared beside the agent's call, with the extractive summarizer as the
            fallback when it fails. Pass ``ExtractiveSummarizer()`` for no model calls.
        archive: Where originals go. By default the ``store`` when one is given, else JSONL
            files under ``config.archive_dir`` (``.memory``;
            :class:`~langchain_compact.archive.DefaultArchive`); ``None``: nothing is
            archived (and no recall tool is added).
        system_prompt: Prepended to every model call (not stored in the state).
        recall_tool: Add ``make_recall_tool(archive)`` so the model can read originals back
            (when there is an archive).
        counter: Local token counter.
        checkpointer: Any LangGraph checkpointer (``InMemorySaver``, SQLite, Postgres).
        store: A LangGraph store, passed to ``compile``.
        memory: Also keep the pinned task and newest summary in a store (per user or
            project) after each compaction; see :mod:`langchain_compact.memory`.
        compact_tool: Give the model the ``compact_conversation(focus=None)`` tool
            (:func:`~langchain_compact.graph.make_compact_tool`): compaction on demand.
        summary_model: The chat model that writes the summaries instead of ``model``
            (e.g. a cheaper one).

    Example:
        >>> from langchain_compact import ExtractiveSummarizer
        >>> from langchain_compact.demo import ContextReadingPolicy, DependentTask
        >>> task = DependentTask(steps=3, payload_chars=300)
        >>> agent = create_compacting_agent(
        ...     ContextReadingPolicy(), task.tools(), summarizer=ExtractiveSummarizer(),
        ...     config=CompactionConfig(context_window=4000), archive=None, recall_tool=False)
        >>> out = agent.invoke({"messages": [("user", task.prompt())]})
        >>> task.check(out["messages"][-1].content).ok
        True
    """
    from langchain_compact.archive import make_recall_tool, resolve_archive

    cfg = config or CompactionConfig()
    summarizer = resolve_summarizer(summarizer, model, summary_model)  # one for both uses
    archive = resolve_archive(archive, cfg.archive_dir)  # one object: compaction and recall
    all_tools = list(tools)
    if recall_tool and archive is not None:
        all_tools.append(make_recall_tool(archive))
    if compact_tool:
        core = Compactor(
            config=resolve_context_window(cfg, model),
            summarizer=summarizer,
            archive=archive,
            counter=resolve_counter(counter, model),
            memory=memory,
        )
        all_tools.append(make_compact_tool(core))
    bound = model.bind_tools(all_tools) if all_tools else model
    prefix: list[BaseMessage] = [SystemMessage(system_prompt)] if system_prompt else []

    def agent(state: CompactionState, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [bound.invoke([*prefix, *state["messages"]], config)]}

    async def aagent(state: CompactionState, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke([*prefix, *state["messages"]], config)]}

    builder = StateGraph(CompactionState)
    builder.add_node("agent", RunnableLambda(agent, afunc=aagent, name="agent"))
    builder.add_edge(START, "agent")
    if all_tools:
        builder.add_node("tools", ToolNode(all_tools))
        builder.add_conditional_edges("agent", tools_condition)
        builder.add_edge("tools", "agent")
    add_compaction(
        builder,
        model_node="agent",
        config=cfg,
        summarizer=summarizer,
        archive=archive,
        model=model,
        counter=counter,
        tools=all_tools,
        memory=memory,
    )
    return builder.compile(checkpointer=checkpointer, store=store)
