"""Compacting agents for the LangGraph server (``langgraph dev``, the LangGraph Platform).

Two graphs, both archiving into the server's store (``StoreArchive(RunStore())``: the store the
platform injects at run time; or a ``JsonlArchive`` folder with ``LC_ARCHIVE_DIR``) and keeping a
memory that outlives a thread (``CompactionMemory``, namespace ``("memory", "{user_id}")`` by
default):

* ``user_graph``: a hand-written ``StateGraph`` (``agent`` <-> ``tools``) with ``add_compaction``;
* ``agent``: the same agent from ``create_compacting_agent``.

Run it::

    cd examples/server && langgraph dev --no-browser --port 2024

``langgraph.json`` turns on LangGraph's custom auth (``auth.py``): every request carries
``Authorization: Bearer <token>``, each user reaches only their own threads and memory, and
``{user_id}`` is the authenticated user. Without auth (a ``langgraph.json`` with no ``auth``), a
run that passes no ``user_id`` keeps its memory in the one local namespace
``("memory", "~local")`` (``missing="local"``; the log says so once); with auth, a run with no
user is refused with an error naming the setting.

Settings (environment variables, all optional):

``LC_MODEL``             a model for ``init_chat_model`` (``"openai:gpt-4.1-mini"``), or with
                         ``LC_BASE_URL`` the model name on an OpenAI-compatible server.
``LC_BASE_URL``          OpenAI-compatible endpoint (``http://127.0.0.1:8080/v1``); key in
                         ``LC_API_KEY`` (default ``"not-needed"``).
``LC_CHAT_CLASS``        ``module:Class`` of a ``ChatOpenAI`` subclass to use with ``LC_BASE_URL``.
``LC_MAX_TOKENS``        output cap sent to the OpenAI-compatible server.
``LC_CONTEXT_WINDOW``    the model's input window in tokens (default: the model's profile; 4000
                         for the demo model).
``LC_MAX_COMPACTIONS``   stop after this many compactions (default: no limit).
``LC_MEMORY_NAMESPACE``  comma-separated namespace labels (default ``memory,{user_id}``);
                         ``{name}`` is filled from the run's ``configurable``.
``LC_ARCHIVE_DIR``       archive into JSONL files under this folder instead of the store.
``LC_AUTH_TOKENS``       ``token=user,...`` for ``auth.py`` (default: two demo tokens).

With no model configured it serves the offline demo: the scripted ``ContextReadingPolicy`` and
the dependent task's ``run_step`` tool. The task's seed, steps and log size come from the run's
``configurable`` (``demo_seed``, ``demo_steps``, ``demo_payload_chars``), so every thread can
have its own task; ``DependentTask(...).prompt()`` is the matching first message.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from langchain_compact import (
    CompactionConfig,
    CompactionState,
    ExtractiveSummarizer,
    JsonlArchive,
    StoreArchive,
    TranscriptArchive,
    add_compaction,
    create_compacting_agent,
    make_recall_tool,
)
from langchain_compact.demo import ContextReadingPolicy, DependentTask
from langchain_compact.memory import CompactionMemory, RunStore

DEMO_WINDOW = 4000


def _env_int(name: str) -> int | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not an integer") from None


def chat_model() -> BaseChatModel | None:
    """The configured chat model, or ``None`` for the offline demo."""
    model, base_url = os.environ.get("LC_MODEL", ""), os.environ.get("LC_BASE_URL", "")
    if base_url:
        from langchain_openai import ChatOpenAI

        cls: type[ChatOpenAI] = ChatOpenAI
        if path := os.environ.get("LC_CHAT_CLASS"):
            module, _, name = path.partition(":")
            cls = getattr(importlib.import_module(module), name)
        extra: dict[str, Any] = {}
        if (max_tokens := _env_int("LC_MAX_TOKENS")) is not None:
            extra["extra_body"] = {"max_tokens": max_tokens}
        return cls(
            base_url=base_url,
            model=model or "default",
            api_key=os.environ.get("LC_API_KEY", "not-needed"),  # type: ignore[arg-type]
            temperature=0,
            **extra,
        )
    if model:
        from langchain.chat_models import init_chat_model

        return init_chat_model(model)
    return None


def demo_tool() -> BaseTool:
    """``run_step`` of the demo task whose seed/steps/log size are in the run's configurable."""

    def run_step(step: int, previous: int, config: RunnableConfig) -> str:
        c = config.get("configurable") or {}
        task = DependentTask(
            steps=int(c.get("demo_steps", 14)),
            seed=int(c.get("demo_seed", 7)),
            payload_chars=int(c.get("demo_payload_chars", 1000)),
        )
        return str(task.tools()[0].invoke({"step": step, "previous": previous}))

    template = DependentTask().tools()[0]
    return StructuredTool.from_function(
        run_step, name=template.name, description=template.description
    )


def settings(model: BaseChatModel | None) -> CompactionConfig:
    """Compaction settings from the environment."""
    scripted = model is None or isinstance(model, ContextReadingPolicy)
    window = _env_int("LC_CONTEXT_WINDOW") or (DEMO_WINDOW if scripted else None)
    return CompactionConfig(context_window=window, max_compactions=_env_int("LC_MAX_COMPACTIONS"))


def summarizer(model: BaseChatModel | None) -> ExtractiveSummarizer | None:
    """``None`` for a real model (it writes the summaries, the integrations' default); the
    extractive summarizer for the scripted demo model, which cannot write one."""
    scripted = model is None or isinstance(model, ContextReadingPolicy)
    return ExtractiveSummarizer() if scripted else None


def memory() -> CompactionMemory:
    """Memory across threads in the server's store (a run without a user, on a server without
    auth, uses the local namespace)."""
    labels = os.environ.get("LC_MEMORY_NAMESPACE", "memory,{user_id}")
    namespace = tuple(s.strip() for s in labels.split(",") if s.strip())
    return CompactionMemory(namespace=namespace, missing="local")


def archive() -> TranscriptArchive:
    """The server's store, or JSONL files under ``LC_ARCHIVE_DIR``."""
    directory = os.environ.get("LC_ARCHIVE_DIR", "").strip()
    return JsonlArchive(directory) if directory else StoreArchive(RunStore())


def build_agent(
    model: BaseChatModel | None = None,
    tools: list[BaseTool] | None = None,
    config: CompactionConfig | None = None,
) -> Any:
    """``create_compacting_agent`` over the server's store (recall tool included)."""
    model = model or chat_model()
    return create_compacting_agent(
        model or ContextReadingPolicy(),
        tools if tools is not None else [demo_tool()],
        config=config or settings(model),
        archive=archive(),
        memory=memory(),
        summarizer=summarizer(model),
    )


def build_user_graph(model: BaseChatModel | None = None) -> Any:
    """A hand-written agent graph with ``add_compaction`` over the server's store."""
    model = model or chat_model()
    store = archive()
    tools = [demo_tool(), make_recall_tool(store)]
    bound = (model or ContextReadingPolicy()).bind_tools(tools)

    async def agent(state: CompactionState, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(state["messages"], config)]}

    builder = StateGraph(CompactionState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    add_compaction(
        builder, config=settings(model), archive=store, model=model, tools=tools,
        memory=memory(), summarizer=summarizer(model),
    )  # fmt: skip
    return builder.compile()


agent = build_agent()
user_graph = build_user_graph()
