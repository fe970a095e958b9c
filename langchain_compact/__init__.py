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

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # typed for checkers; imported on first use (see ``__getattr__``)
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
    from langchain_compact.middleware import CompactionMiddleware
    from langchain_compact.summarizers import ExtractiveSummarizer, LLMSummarizer, Summarizer
    from langchain_compact.tokens import TiktokenCounter, approximate_tokens

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


#: The module of each public name. Each is imported on first use, so ``import
#: langchain_compact`` stays light: the graph, LCEL and model modules pull in langgraph,
#: langchain_core's runnables and langsmith; and ``CompactionMiddleware`` needs the
#: ``agents`` extra (langchain).
_HOME = {
    "CompactionConfig": "config",
    "CompactionError": "errors",
    "CompactionMemory": "memory",
    "CompactionMiddleware": "middleware",
    "CompactionNodes": "graph",
    "CompactionState": "graph",
    "ConfigError": "errors",
    "ContextOverflowError": "errors",
    "ExtractiveSummarizer": "summarizers",
    "InvalidHistoryError": "errors",
    "JsonlArchive": "archive",
    "LLMSummarizer": "summarizers",
    "MessageCompactor": "lcel",
    "StoreArchive": "archive",
    "Summarizer": "summarizers",
    "SummarizerError": "errors",
    "TiktokenCounter": "tokens",
    "TranscriptArchive": "archive",
    "add_compaction": "graph",
    "approximate_tokens": "tokens",
    "compact_messages": "lcel",
    "compaction_info": "compaction",
    "create_compacting_agent": "graph",
    "make_recall_tool": "archive",
}


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'langchain_compact' has no attribute {name!r}")
    value = getattr(import_module(f"langchain_compact.{home}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
