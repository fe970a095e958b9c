"""`add_compaction`: wire compaction into an existing ``StateGraph`` before compile."""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable, RunnableLambda
from langgraph.graph import END, StateGraph

# langgraph has no public API to move an edge: this module edits the builder's ``edges``,
# ``waiting_edges`` and ``branches`` and rebuilds ``BranchSpec`` tuples. Tested against the
# langgraph range pinned in pyproject.toml (>=1.2,<1.3); tests/unit/test_langgraph_compat.py
# fails, naming what changed, when one of these internals moves.
from langgraph.graph._branch import BranchSpec

from langchain_compact._defaults import DEFAULT_ARCHIVE, DefaultArchiveFlag, resolve_context_window
from langchain_compact.config import CompactionConfig
from langchain_compact.errors import ConfigError
from langchain_compact.graph.nodes import CompactionNodes
from langchain_compact.graph.state import compaction_state
from langchain_compact.summarizers import Summarizer, resolve_summarizer
from langchain_compact.tokens import TokenCounter, approximate_tokens, resolve_counter

if TYPE_CHECKING:
    from langchain_compact.archive import TranscriptArchive
    from langchain_compact.memory import CompactionMemory

__all__ = ["add_compaction"]


def add_compaction(
    builder: StateGraph[Any, Any, Any, Any],
    *,
    model_node: str = "agent",
    config: CompactionConfig | None = None,
    summarizer: Summarizer | None = None,
    archive: TranscriptArchive | DefaultArchiveFlag | None = DEFAULT_ARCHIVE,
    model: BaseChatModel | None = None,
    counter: TokenCounter = approximate_tokens,
    tools: Sequence[Any] | None = None,
    messages_key: str = "messages",
    prefix: str = "compact",
    memory: CompactionMemory | None = None,
    overflow_retry: bool = True,
    summary_model: BaseChatModel | None = None,
) -> StateGraph[Any, Any, Any, Any]:
    """Add compaction in front of ``model_node`` of an uncompiled ``StateGraph``.

    Every edge that led to ``model_node`` now leads to ``{prefix}_micro`` (clear old tool
    results, archiving originals), whose conditional edge goes to the model, to
    ``{prefix}_summarize`` (full compaction, then back to the model with
    ``transition="compacted"``) or to ``{prefix}_stop`` (a message to the user, then END).
    Your nodes are not touched. Add ``make_recall_tool(DefaultArchive())`` (or your own
    ``archive``) to your tools so the model can read archived originals back. Plain, waiting
    (``add_edge([a, b], model)``) and conditional edges (with or without a path map,
    returning a name or a list of names) are redirected. A way in that is not an edge (a
    node returning ``Command(goto=model_node)``, such as a human review's reject, or a
    ``Send`` to it) meets the same turn at the model node's entry
    (:meth:`CompactionNodes.entry`: the node is wrapped, not changed; a call that came
    through the gate is not checked twice).

    Inside another graph (the compiled graph used as a supervisor's node or a ``Send``
    target) the compaction nodes write the compacted list to the private
    ``compaction_view`` key and the model node is called with it; the shared message list
    gets only the agent's own new messages (``CompactionConfig.share_compaction``;
    docs/subagents.md).

    Args:
        builder: The graph builder, before ``.compile()``.
        model_node: Name of the node that calls the chat model.
        config: Settings; ``context_window`` defaults to ``model.profile``.
        summarizer: Wins when given. Otherwise, with ``model`` (or ``summary_model``), an
            :class:`~langchain_compact.summarizers.LLMSummarizer` over that model: one
            model call per compaction, prepared beside the model node's call; without a
            model, the extractive summarizer (no LLM), which is also the fallback when the
            model fails.
        archive: Where originals go before being replaced. By default the graph's store
            when it is compiled with one (``compile(store=...)``, a LangGraph server), else
            JSONL files under ``config.archive_dir`` (``.memory``, or
            ``$LANGCHAIN_COMPACT_ARCHIVE_DIR``): :class:`~langchain_compact.archive.DefaultArchive`.
            ``None``: nothing is archived.
        model: The chat model: its profile gives the context window, and it writes the
            summaries unless ``summary_model`` or ``summarizer`` is given.
        counter: Local token counter (messages after the last usage report).
        tools: The tools bound to the model (their schemas count toward the context).
        messages_key: State key of the messages.
        prefix: Prefix of the added node names.
        memory: Also keep the pinned task and newest summary in a store (per user or
            project) after each compaction; see :mod:`langchain_compact.memory`.
        overflow_retry: Wrap ``model_node`` so that a provider's refusal for length
            (langchain-core's ``ContextOverflowError``) is followed by one forced
            compaction to the window the refusal teaches and one retry of the node
            (:meth:`CompactionNodes.guard`; docs/overflow.md). The node itself is not
            changed; only the builder's entry for it is.
        summary_model: The chat model that writes the summaries instead of ``model``
            (e.g. a cheaper one).

    Returns:
        The same builder, for chaining.

    Example:
        >>> from langgraph.graph import MessagesState, StateGraph, START
        >>> builder = StateGraph(MessagesState)
        >>> _ = builder.add_node("agent", lambda state: {"messages": []})
        >>> _ = builder.add_edge(START, "agent")
        >>> _ = add_compaction(builder, config=CompactionConfig(context_window=8000))
        >>> sorted(builder.nodes)
        ['agent', 'compact_micro', 'compact_stop', 'compact_summarize']
    """
    if not isinstance(builder, StateGraph):
        raise TypeError(
            f"add_compaction needs the StateGraph builder before .compile(), got "
            f"{type(builder).__name__}; call add_compaction(builder) and then builder.compile()."
        )
    if model_node not in builder.nodes:
        raise ConfigError(
            f"model_node={model_node!r} is not a node of this graph (nodes: "
            f"{sorted(builder.nodes)}); pass the name of the node that calls the model."
        )
    names = {role: f"{prefix}_{role}" for role in ("micro", "summarize", "stop", "prepare")}
    clash = sorted(set(names.values()) & set(builder.nodes))
    if clash:
        raise ConfigError(
            f"nodes {clash} already exist; call add_compaction once, or pass prefix=."
        )
    if messages_key not in builder.channels:
        raise ConfigError(
            f"the graph state has no {messages_key!r} key (its keys: {sorted(builder.channels)})"
            "; pass messages_key=<the key of your message list> to add_compaction."
        )
    cfg = resolve_context_window(config or CompactionConfig(), model)
    nodes = CompactionNodes(
        config=cfg,
        summarizer=resolve_summarizer(summarizer, model, summary_model),
        archive=archive,
        counter=resolve_counter(counter, model),
        tools=tools,
        messages_key=messages_key,
        memory=memory,
    )
    gate = names["micro"]
    model_spec = builder.nodes[model_node]
    if isinstance(model_spec.runnable, Runnable):  # add_node coerced it
        inner: Any = model_spec.runnable
        if overflow_retry:  # called by the entry directly: no runnable layer of its own
            inner = nodes.guard_calls(inner)
        # A Command(goto=model_node) or a Send is not an edge to redirect: the node's entry
        # runs the turn for a call that did not come through the gate.
        entered = nodes.entry(inner, model_node)
        builder.nodes[model_node] = dataclasses.replace(model_spec, runnable=entered)

    _through_gate(builder, model_node, gate)
    runnables = nodes.runnables()
    schema = compaction_state(messages_key)
    if not nodes.core.prepares:  # no summary to prepare (the extractive summarizer is local)
        del names["prepare"]
    for role, node_name in names.items():
        builder.add_node(node_name, runnables[role], input_schema=schema)
    _route_from_gate(builder, nodes, gate, model_node, names)
    return builder


def _through_gate(builder: StateGraph[Any, Any, Any, Any], model_node: str, gate: str) -> None:
    """Redirect every way into the model node (edges, waiting edges, branches) through
    the gate."""
    for start, end in list(builder.edges):
        if end == model_node:
            builder.edges.discard((start, end))
            builder.edges.add((start, gate))
    for starts, end in list(builder.waiting_edges):
        if end == model_node:
            builder.waiting_edges.discard((starts, end))
            builder.waiting_edges.add((starts, gate))
    for branches in builder.branches.values():
        for name, spec in list(branches.items()):
            branches[name] = _redirect_branch(spec, model_node, gate)


def _route_from_gate(
    builder: StateGraph[Any, Any, Any, Any],
    nodes: CompactionNodes,
    gate: str,
    model_node: str,
    names: dict[str, str],
) -> None:
    """The gate's routes (continue, compact, stop, prepare) and the edges after them."""
    ends: dict[Hashable, str] = {
        "continue": model_node,
        "compact": names["summarize"],
        "stop": names["stop"],
    }
    if "prepare" in names:
        ends["prepare"] = names["prepare"]
    builder.add_conditional_edges(gate, nodes.route, ends)
    builder.add_conditional_edges(
        names["summarize"], nodes.after_summarize, {"continue": model_node, "stop": names["stop"]}
    )
    builder.add_edge(names["stop"], END)
    if "prepare" in names:
        builder.add_edge(names["prepare"], END)  # its branch ends; the model's goes on


def _redirect_branch(spec: BranchSpec, target: str, gate: str) -> BranchSpec:
    if spec.ends is not None:
        if target not in spec.ends.values():
            return spec
        ends = {key: (gate if value == target else value) for key, value in spec.ends.items()}
        return spec._replace(ends=ends)

    def remap(result: Any) -> Any:
        if isinstance(result, list):
            return [gate if r == target else r for r in result]
        return gate if result == target else result

    return spec._replace(path=spec.path | RunnableLambda(remap))
