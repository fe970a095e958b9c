"""examples/server/compacting_graphs.py in-process: the graphs the LangGraph server serves,
with the store injected at run time (RunStore), as the platform does."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langchain_compact.demo import DependentTask
from langchain_compact.memory import CompactionMemory

EXAMPLE_DIR = Path(__file__).resolve().parents[2] / "examples" / "server"


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    for name in ("LC_MODEL", "LC_BASE_URL", "LC_CONTEXT_WINDOW", "LC_MAX_COMPACTIONS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.syspath_prepend(str(EXAMPLE_DIR))
    sys.modules.pop("compacting_graphs", None)
    yield importlib.import_module("compacting_graphs")
    sys.modules.pop("compacting_graphs", None)


@pytest.mark.parametrize("name", ["agent", "user_graph"])
async def test_example_graphs_archive_and_remember_in_the_injected_store(
    example: ModuleType, name: str
) -> None:
    store = InMemoryStore()
    graph = getattr(example, name).builder.compile(checkpointer=InMemorySaver(), store=store)
    task = DependentTask(steps=30, payload_chars=1000, seed=11)
    config = {"configurable": {"thread_id": "t", "user_id": "ann", "demo_seed": 11,
                               "demo_steps": 30}}  # fmt: skip
    out = await graph.ainvoke({"messages": [("user", task.prompt())]}, config)
    assert task.check(out["messages"][-1].text).ok
    assert out["compaction_count"] >= 2
    archived = store.search(("langchain_compact", "archive"), limit=100)
    assert archived and {item.value["thread_id"] for item in archived} == {"t"}
    memory = CompactionMemory(store, namespace=("memory", "{user_id}"))
    record = await memory.aget(config=config)
    assert record is not None and record.compaction_count == out["compaction_count"]


def test_example_settings_from_the_environment(
    example: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LC_CONTEXT_WINDOW", "lots")
    with pytest.raises(ValueError, match="LC_CONTEXT_WINDOW='lots' is not an integer"):
        example.settings(None)
    monkeypatch.setenv("LC_CONTEXT_WINDOW", "5000")
    monkeypatch.setenv("LC_MAX_COMPACTIONS", "2")
    config = example.settings(None)
    assert (config.context_window, config.max_compactions) == (5000, 2)
    monkeypatch.setenv("LC_MEMORY_NAMESPACE", "project, demo")
    assert example.memory().namespace == ("project", "demo")
    monkeypatch.setenv("LC_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("LC_MODEL", "tiny")
    model = example.chat_model()
    assert type(model).__name__ == "ChatOpenAI" and model.model_name == "tiny"
