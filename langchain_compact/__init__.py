"""langchain-compact: context compaction for LangChain / LangGraph agents."""

from langchain_compact.config import CompactionConfig
from langchain_compact.errors import (
    CompactionError,
    ConfigError,
    InvalidHistoryError,
    SummarizerError,
)
from langchain_compact.history import (
    find_safe_cut,
    last_boundary_index,
    repair_history,
    validate_history,
)
from langchain_compact.microcompact import clear_tool_results, truncate_large_tool_results
from langchain_compact.tokens import (
    TiktokenCounter,
    TokenCounter,
    TokenizerUnavailableWarning,
    approximate_tokens,
    context_tokens,
    provision_tiktoken_cache,
)

__all__ = [
    "CompactionConfig",
    "CompactionError",
    "ConfigError",
    "InvalidHistoryError",
    "SummarizerError",
    "TiktokenCounter",
    "TokenCounter",
    "TokenizerUnavailableWarning",
    "approximate_tokens",
    "clear_tool_results",
    "context_tokens",
    "find_safe_cut",
    "last_boundary_index",
    "provision_tiktoken_cache",
    "repair_history",
    "truncate_large_tool_results",
    "validate_history",
]

__version__ = "0.1.0"
