"""langchain-compact: context compaction for LangChain / LangGraph agents.

Clears old tool results, summarises old history when the real token usage crosses a
threshold, keeps the user's original task and every hard constraint, archives what it
removes, and stops instead of looping. See the README for the three ways to use it:
``add_compaction`` on your graph, ``compact_messages`` in an LCEL chain,
``create_compacting_agent``; and ``langchain_compact.middleware.CompactionMiddleware`` for
``langchain.agents.create_agent`` (extra ``agents``).
"""

from langchain_compact._digest import llm_digest, structured_digest
from langchain_compact.archive import (
    ArchivedMessage,
    ArchiveError,
    JsonlArchive,
    StoreArchive,
    TranscriptArchive,
    make_recall_tool,
)
from langchain_compact.compaction import (
    CompactionInfo,
    CompactionResult,
    Decision,
    acompact_history,
    compact_history,
    compaction_info,
    decide,
    stop_message,
)
from langchain_compact.config import CompactionConfig
from langchain_compact.errors import (
    CompactionError,
    CompactionWarning,
    ConfigError,
    ContextOverflowError,
    InvalidHistoryError,
    SummarizerError,
)
from langchain_compact.graph import (
    EVENT_KEY,
    CompactionNodes,
    CompactionState,
    add_compaction,
    create_compacting_agent,
    resolve_context_window,
)
from langchain_compact.history import (
    find_safe_cut,
    last_boundary_index,
    original_task_index,
    repair_history,
    validate_history,
)
from langchain_compact.lcel import MessageCompactor, compact_messages
from langchain_compact.microcompact import clear_tool_results, truncate_large_tool_results
from langchain_compact.redaction import Redactor, redact_messages, redact_secrets
from langchain_compact.summarizers import (
    DEFAULT_SUMMARY_PROMPT,
    SUMMARIZER_TAG,
    ExtractiveSummarizer,
    LLMSummarizer,
    Summarizer,
    fidelity_supplement,
)
from langchain_compact.tokens import (
    TiktokenCounter,
    TokenCounter,
    TokenizerUnavailableWarning,
    approximate_tokens,
    context_tokens,
    provision_tiktoken_cache,
)

__all__ = [
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

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # CompactionMiddleware needs the `agents` extra (langchain); import it on first use so
    # that `import langchain_compact` works without it.
    if name == "CompactionMiddleware":
        from langchain_compact.middleware import CompactionMiddleware

        return CompactionMiddleware
    raise AttributeError(f"module 'langchain_compact' has no attribute {name!r}")
