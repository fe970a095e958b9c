"""The public surface and the runtime dependencies are pinned: changing them is a decision."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import tomllib

import langchain_compact

ROOT = Path(__file__).resolve().parents[2]

EXPECTED = [
    "DEFAULT_SUMMARY_PROMPT",
    "EVENT_KEY",
    "SUMMARIZER_TAG",
    "ArchiveError",
    "ArchivedMessage",
    "CompactionConfig",
    "CompactionError",
    "CompactionInfo",
    "CompactionNodes",
    "CompactionResult",
    "CompactionState",
    "CompactionWarning",
    "ConfigError",
    "ContextOverflowError",
    "Decision",
    "ExtractiveSummarizer",
    "InvalidHistoryError",
    "JsonlArchive",
    "LLMSummarizer",
    "MessageCompactor",
    "Redactor",
    "StoreArchive",
    "Summarizer",
    "SummarizerError",
    "TiktokenCounter",
    "TokenCounter",
    "TokenizerUnavailableWarning",
    "TranscriptArchive",
    "acompact_history",
    "add_compaction",
    "approximate_tokens",
    "clear_tool_results",
    "compact_history",
    "compact_messages",
    "compaction_info",
    "context_tokens",
    "create_compacting_agent",
    "decide",
    "fidelity_supplement",
    "find_safe_cut",
    "last_boundary_index",
    "llm_digest",
    "make_recall_tool",
    "original_task_index",
    "provision_tiktoken_cache",
    "redact_messages",
    "redact_secrets",
    "repair_history",
    "resolve_context_window",
    "stop_message",
    "structured_digest",
    "truncate_large_tool_results",
    "validate_history",
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
