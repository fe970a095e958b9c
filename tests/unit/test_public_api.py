"""The public surface and the runtime dependencies are pinned: changing them is a decision."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import tomllib

import langchain_compact

ROOT = Path(__file__).resolve().parents[2]

EXPECTED = [
    "CompactionConfig",
    "CompactionError",
    "CompactionMemory",
    "CompactionMiddleware",
    "CompactionNodes",
    "CompactionState",
    "ConfigError",
    "ContextOverflowError",
    "ExtractiveSummarizer",
    "InvalidHistoryError",
    "JsonlArchive",
    "LLMSummarizer",
    "MessageCompactor",
    "StoreArchive",
    "Summarizer",
    "SummarizerError",
    "TiktokenCounter",
    "TranscriptArchive",
    "add_compaction",
    "approximate_tokens",
    "compact_messages",
    "compaction_info",
    "create_compacting_agent",
    "make_recall_tool",
]


def test_all_is_pinned_and_sorted() -> None:
    assert langchain_compact.__all__ == EXPECTED
    assert len(set(EXPECTED)) == len(EXPECTED)
    for name in EXPECTED:
        assert getattr(langchain_compact, name) is not None


# Import name -> distribution that provides it.
_DISTRIBUTIONS = {
    "langchain_core": "langchain-core",
    "langgraph": "langgraph",
    "langchain_openai": "langchain-openai",
    "tiktoken": "tiktoken",
    "pydantic": "pydantic",
}
# Imported only inside functions behind an extra (documented in pyproject.toml).
_OPTIONAL = {"langchain", "matplotlib", "bpe_openai"}


def _third_party_imports() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "langchain_compact").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    stdlib = set(sys.stdlib_module_names) | {"typing_extensions", "langchain_compact"}
    return found - stdlib


def test_runtime_dependencies_are_exactly_what_the_code_imports() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {d.split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip() for d in declared}
    imported = _third_party_imports() - _OPTIONAL
    assert {_DISTRIBUTIONS.get(m, m) for m in imported} == names
