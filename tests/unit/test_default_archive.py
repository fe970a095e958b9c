"""Every integration archives what it removes by default (issue 20): the graph's or agent's
store when it has one, else JSONL files under ``CompactionConfig.archive_dir`` (``.memory``,
or ``$LANGCHAIN_COMPACT_ARCHIVE_DIR``); ``archive=None`` is the one setting that turns it off.
Each default run is then read back through the recall tool built on the same archive."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.store.memory import InMemoryStore

from langchain_compact import (
    CompactionConfig,
    ExtractiveSummarizer,
    JsonlArchive,
    StoreArchive,
    add_compaction,
    compact_messages,
    create_compacting_agent,
    make_recall_tool,
)
from langchain_compact._defaults import ARCHIVE_DIR_ENV, DEFAULT_ARCHIVE_DIR
from langchain_compact.archive import DefaultArchive
from langchain_compact.core import Compactor
from langchain_compact.demo import ContextReadingPolicy, DependentTask
from langchain_compact.errors import ConfigError

WINDOW = 4_000


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The default folder, moved by the environment variable (never the user's cwd)."""
    monkeypatch.setenv(ARCHIVE_DIR_ENV, str(tmp_path / "archive"))
    return tmp_path / "archive"


def _records(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.jsonl"))


def _recalled(archive: Any, thread: str, tool_call_id: str) -> str:
    tool = make_recall_tool(archive)
    return str(tool.invoke({"tool_call_id": tool_call_id}, {"configurable": {"thread_id": thread}}))


def _graph(store: InMemoryStore | None) -> tuple[Any, DependentTask, DefaultArchive]:
    task = DependentTask(steps=12)
    archive = DefaultArchive()  # what add_compaction builds when given no archive=
    tools = [*task.tools(), make_recall_tool(archive)]
    bound = ContextReadingPolicy().bind_tools(tools)
    builder = StateGraph(MessagesState)
    builder.add_node("agent", lambda state: {"messages": [bound.invoke(state["messages"])]})
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    add_compaction(builder, config=CompactionConfig(context_window=WINDOW), tools=tools)
    return builder.compile(store=store), task, archive


def _archived_tool_call_id(archive: Any, thread: str) -> str:
    """The tool call id of the first tool result the archive holds for ``thread``."""
    for ref in archive.refs(thread_id=thread):
        for message in archive.read(ref, thread_id=thread):
            if isinstance(message, ToolMessage):
                return str(message.tool_call_id)
    raise AssertionError(f"no tool result archived for thread {thread!r}")


def test_the_default_is_on_in_every_signature_and_none_turns_it_off(folder: Path) -> None:
    import inspect

    from langchain_compact.lcel import MessageCompactor

    for entry in (add_compaction, create_compacting_agent, MessageCompactor, Compactor):
        assert inspect.signature(entry).parameters["archive"].default == "default", entry
    config = CompactionConfig(context_window=WINDOW)
    assert config.archive_dir == str(folder)
    assert isinstance(MessageCompactor(config=config).archive, DefaultArchive)
    assert MessageCompactor(config=config, archive=None).archive is None
    assert Compactor(config=config, archive=None).archive is None
    with pytest.raises(ConfigError, match="archive='files' is not allowed"):
        Compactor(config=config, archive="files")  # type: ignore[arg-type]


def test_the_default_folder_is_dot_memory_unless_the_environment_moves_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ARCHIVE_DIR_ENV)
    assert CompactionConfig().archive_dir == DEFAULT_ARCHIVE_DIR == ".memory"
    assert DefaultArchive().directory == Path(".memory").absolute()
    monkeypatch.setenv(ARCHIVE_DIR_ENV, "/somewhere/else")
    assert CompactionConfig().archive_dir == "/somewhere/else"


def test_add_compaction_without_a_store_archives_to_files_and_recall_reads_them(
    folder: Path,
) -> None:
    graph, task, archive = _graph(store=None)
    run = {"configurable": {"thread_id": "g"}, "recursion_limit": 200}
    state = graph.invoke({"messages": [("user", task.prompt())]}, run)
    assert task.check(state["messages"][-1].text).ok
    assert _records(folder), "nothing archived by default"
    call_id = _archived_tool_call_id(archive, "g")
    assert "No archived message" not in _recalled(archive, "g", call_id)


def test_add_compaction_with_a_store_archives_into_it_not_to_files(folder: Path) -> None:
    store = InMemoryStore()
    graph, task, _archive = _graph(store=store)
    run = {"configurable": {"thread_id": "s"}, "recursion_limit": 200}
    state = graph.invoke({"messages": [("user", task.prompt())]}, run)
    assert task.check(state["messages"][-1].text).ok
    assert not _records(folder)
    in_store = StoreArchive(store)
    refs = in_store.refs(thread_id="s")
    assert refs
    assert in_store.read(refs[0], thread_id="s")


def test_the_prebuilt_agent_with_a_store_recalls_from_it(folder: Path) -> None:
    store = InMemoryStore()
    task = DependentTask(steps=12)
    agent = create_compacting_agent(
        ContextReadingPolicy(), task.tools(), config=CompactionConfig(context_window=WINDOW),
        store=store, summarizer=ExtractiveSummarizer()
    )  # fmt: skip
    run = {"configurable": {"thread_id": "p"}, "recursion_limit": 200}
    state = agent.invoke({"messages": [("user", task.prompt())]}, run)
    assert task.check(state["messages"][-1].text).ok
    assert StoreArchive(store).refs(thread_id="p")
    assert not _records(folder)


def test_the_middleware_archives_by_default(folder: Path) -> None:
    pytest.importorskip("langchain.agents", reason="the middleware needs the agents extra")
    from langchain.agents import create_agent

    from langchain_compact.middleware import CompactionMiddleware

    task = DependentTask(steps=12)
    middleware = CompactionMiddleware(config=CompactionConfig(context_window=WINDOW))
    assert isinstance(middleware.core.archive, DefaultArchive)
    agent = create_agent(ContextReadingPolicy(), task.tools(), middleware=[middleware])
    run = {"configurable": {"thread_id": "m"}, "recursion_limit": 200}
    state = agent.invoke({"messages": [("user", task.prompt())]}, run)
    assert task.check(state["messages"][-1].text).ok
    assert _records(folder)
    archive = middleware.core.archive
    assert "No archived message" not in _recalled(
        archive, "m", _archived_tool_call_id(archive, "m")
    )


def _long_history() -> list[Any]:
    history: list[Any] = [HumanMessage("Task: read the files and report", id="task")]
    for i in range(12):
        call = {"name": "read", "args": {"path": f"f{i}.txt"}, "id": f"call_{i}"}
        history.append(AIMessage("", tool_calls=[call], id=f"a{i}"))
        history.append(ToolMessage(f"file {i}: " + "data " * 300, tool_call_id=f"call_{i}"))
    return history


def test_lcel_archives_by_default_and_recall_finds_it(folder: Path) -> None:
    history = _long_history()
    out = compact_messages(history, config=CompactionConfig(context_window=WINDOW))
    assert len(out) < len(history) or out != history
    assert _records(folder)
    recalled = _recalled(DefaultArchive(), "default", "call_0")
    assert "file 0: data" in recalled


def test_the_core_archives_by_default(folder: Path) -> None:
    core = Compactor(config=CompactionConfig(context_window=WINDOW))
    turn = core.turn(_long_history(), "c")
    assert turn.outcome != "continue" or turn.replaced
    assert JsonlArchive(folder).refs(thread_id="c")
