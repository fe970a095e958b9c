"""Private: type checks of the components passed to an entry point (``compact_messages`` /
:class:`~langchain_compact.lcel.MessageCompactor`), so a wrong value is a
:class:`~langchain_compact.errors.ConfigError` naming the option, never a bare
``TypeError`` or ``AttributeError`` from deep inside a compaction."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from langchain_core.messages import HumanMessage

from langchain_compact.config import CompactionConfig
from langchain_compact.errors import ConfigError


def check_known(opts: Mapping[str, Any], known: Collection[str], where: str) -> None:
    """Refuse an option ``where`` does not take, naming the ones it does."""
    unknown = sorted(set(opts) - set(known))
    if unknown:
        raise ConfigError(
            f"{where} got unknown option(s) {', '.join(map(repr, unknown))}; it takes "
            f"{', '.join(sorted(known))}."
        )


def check_options(
    *,
    config: Any = None,
    summarizer: Any = None,
    archive: Any = None,
    counter: Any = None,
    tools: Any = None,
    thread_id: Any = None,
) -> None:
    """Check each component that is given (``None``: not given, not checked).

    Raises:
        ConfigError: a value of the wrong type; the message names the option.
    """
    if config is not None and not isinstance(config, CompactionConfig):
        raise ConfigError(f"config must be a CompactionConfig, got {type(config).__name__}.")
    if summarizer is not None and not callable(getattr(summarizer, "summarize", None)):
        raise ConfigError(
            f"summarizer must be a Summarizer (an object with summarize(messages, *, "
            f"max_tokens) -> str), got {type(summarizer).__name__}; e.g. "
            "LLMSummarizer(model) or ExtractiveSummarizer()."
        )
    if archive is not None and not callable(getattr(archive, "write", None)):
        raise ConfigError(
            f"archive must be a TranscriptArchive (JsonlArchive, StoreArchive), got "
            f"{type(archive).__name__}."
        )
    if tools is not None and (isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence)):
        raise ConfigError(f"tools must be a list of tools, got {type(tools).__name__}.")
    if thread_id is not None and not isinstance(thread_id, str):
        raise ConfigError(f"thread_id must be a str, got {type(thread_id).__name__}.")
    if counter is not None:
        _check_counter(counter)


def _check_counter(counter: Any) -> None:
    """A token counter: callable on messages, returning an int."""
    if not callable(counter):
        raise ConfigError(f"counter must be a callable messages -> int, got {counter!r}.")
    probe = counter([HumanMessage("probe")])
    if isinstance(probe, bool) or not isinstance(probe, int):
        raise ConfigError(
            f"counter must return an int token count, it returned "
            f"{type(probe).__name__} ({probe!r:.40}); e.g. approximate_tokens or "
            "TiktokenCounter()."
        )
