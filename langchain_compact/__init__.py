"""langchain-compact: context compaction for LangChain / LangGraph agents.

Clears old tool results, summarises old history when the real token usage crosses a
threshold, keeps the user's original task and every hard constraint, archives what it
removes, and stops instead of looping. Four ways in, over one core
(:class:`~langchain_compact.core.Compactor`):

- :func:`add_compaction` on your own ``StateGraph`` (or :func:`create_compacting_agent`);
- :class:`CompactionMiddleware` for ``langchain.agents.create_agent`` (extra ``agents``);
- :func:`compact_messages` / :class:`MessageCompactor` in an LCEL chain.

The top level holds those integrations and the core types. The rest is reachable from its
module: the markers a UI needs (:mod:`langchain_compact.markers`), history helpers
(:mod:`langchain_compact.history`), token counting (:mod:`langchain_compact.tokens`),
digests (:mod:`langchain_compact.digest`), redaction (:mod:`langchain_compact.redaction`),
all errors (:mod:`langchain_compact.errors`), the one-shot compaction functions
(:mod:`langchain_compact.compaction`).
"""

from typing import TYPE_CHECKING

from langchain_compact.archive import (
    JsonlArchive,
    StoreArchive,
    TranscriptArchive,
    make_recall_tool,
)
from langchain_compact.compaction import compaction_info
from langchain_compact.config import CompactionConfig
from langchain_compact.errors import (
    CompactionError,
    ConfigError,
    ContextOverflowError,
    InvalidHistoryError,
    SummarizerError,
)
from langchain_compact.graph import (
    CompactionNodes,
    CompactionState,
    add_compaction,
    create_compacting_agent,
)
from langchain_compact.lcel import MessageCompactor, compact_messages
from langchain_compact.memory import CompactionMemory
from langchain_compact.summarizers import ExtractiveSummarizer, LLMSummarizer, Summarizer
from langchain_compact.tokens import TiktokenCounter, approximate_tokens

if TYPE_CHECKING:  # typed for checkers; imported on first use (needs the `agents` extra)
    from langchain_compact.middleware import CompactionMiddleware

__all__ = [
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

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # CompactionMiddleware needs the `agents` extra (langchain); import it on first use so
    # that `import langchain_compact` works without it.
    if name == "CompactionMiddleware":
        from langchain_compact.middleware import CompactionMiddleware

        return CompactionMiddleware
    raise AttributeError(f"module 'langchain_compact' has no attribute {name!r}")
