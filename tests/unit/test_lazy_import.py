"""Importing the package is light: langsmith (via langgraph and langchain_core's runnables
and tools) is imported when a graph, a chain or a tool is built, not by ``import``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import langchain_compact


def _run(code: str) -> None:
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_import_does_not_pull_langsmith() -> None:
    _run("import langchain_compact, sys; assert 'langsmith' not in sys.modules")


def test_archive_without_a_tool_does_not_pull_langsmith() -> None:
    _run(
        "import sys\n"
        "from langchain_compact import JsonlArchive, CompactionConfig, approximate_tokens\n"
        "assert 'langsmith' not in sys.modules"
    )


def test_every_public_name_resolves(tmp_path: Path) -> None:
    for name in langchain_compact.__all__:
        assert getattr(langchain_compact, name) is not None, name
    assert set(langchain_compact.__all__) <= set(dir(langchain_compact))
    tool = langchain_compact.make_recall_tool(langchain_compact.JsonlArchive(tmp_path))
    assert tool.name == "recall_archived"

