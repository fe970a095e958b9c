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


def test_a_compactor_loads_the_encoding_off_the_calling_thread() -> None:
    _run(
        "import threading, tiktoken\n"
        "loaded_on = []\n"
        "real = tiktoken.get_encoding\n"
        "def spy(name):\n"
        "    loaded_on.append(threading.current_thread().name)\n"
        "    return real(name)\n"
        "tiktoken.get_encoding = spy\n"
        "from langchain_compact import CompactionConfig, tokens\n"
        "from langchain_compact.core import Compactor\n"
        "Compactor(config=CompactionConfig(context_window=10_000))\n"
        "Compactor(config=CompactionConfig(context_window=10_000))\n"
        "for t in threading.enumerate():\n"
        "    if t.name == 'langchain-compact-o200k':\n"
        "        t.join()\n"
        "tokens.precise_counter()\n"
        "assert loaded_on and set(loaded_on) == {'langchain-compact-o200k'}, loaded_on\n"
    )
