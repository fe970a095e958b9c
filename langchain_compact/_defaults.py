"""What an integration falls back to when the user gives nothing: the archive's folder and
the model's context window.

A leaf of the import graph: it imports :mod:`langchain_compact.errors` only (which imports
nothing), so :mod:`~langchain_compact.config`, :mod:`~langchain_compact.archive` and every
integration (the graph, the middleware, the LCEL transformer) can take these from here
without importing one another. The settings object is typed by what is read of it
(:class:`Windowed`), not by :class:`~langchain_compact.config.CompactionConfig`, which
imports this module.
"""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING, Final, Literal, Protocol, TypeVar

from typing_extensions import Self

from langchain_compact.errors import CompactionWarning, ConfigError

if TYPE_CHECKING:  # at run time the model is only read (its profile); langchain_core's
    # chat models pull in langsmith, which importing the package must not
    from langchain_core.language_models import BaseChatModel

__all__ = [
    "ARCHIVE_DIR_ENV",
    "DEFAULT_ARCHIVE",
    "DEFAULT_ARCHIVE_DIR",
    "DefaultArchiveFlag",
    "Windowed",
    "default_archive_dir",
    "resolve_context_window",
]

DEFAULT_ARCHIVE_DIR = ".memory"
"""Folder of the default JSONL archive (``CompactionConfig.archive_dir``, ``JsonlArchive()``),
relative to the working directory, unless ``LANGCHAIN_COMPACT_ARCHIVE_DIR`` names another."""

ARCHIVE_DIR_ENV: Final = "LANGCHAIN_COMPACT_ARCHIVE_DIR"
"""Environment variable that moves the default archive folder (e.g. a test's temporary one)."""

DefaultArchiveFlag = Literal["default"]
"""The type of :data:`DEFAULT_ARCHIVE`."""

DEFAULT_ARCHIVE: Final[DefaultArchiveFlag] = "default"
"""``archive=`` default of every integration: the run's LangGraph store when it has one, else
JSONL files under :func:`default_archive_dir`. ``archive=None`` turns archiving off."""


def default_archive_dir() -> str:
    """``$LANGCHAIN_COMPACT_ARCHIVE_DIR`` when set, else :data:`DEFAULT_ARCHIVE_DIR`."""
    return os.environ.get(ARCHIVE_DIR_ENV) or DEFAULT_ARCHIVE_DIR


#: Providers whose chat APIs reject a system message after the first non-system one.
_SYSTEM_FIRST_ONLY = ("anthropic", "google", "gemini", "vertex", "bedrock")


class Windowed(Protocol):
    """What :func:`resolve_context_window` reads of the settings
    (:class:`~langchain_compact.config.CompactionConfig` has it)."""

    @property
    def context_window(self) -> int | None: ...

    @property
    def summary_role(self) -> str: ...

    def with_window(self, context_window: int) -> Self: ...


ConfigT = TypeVar("ConfigT", bound=Windowed)


def resolve_context_window(config: ConfigT, model: BaseChatModel | None) -> ConfigT:
    """Fill ``context_window`` from the model's ``profile["max_input_tokens"]`` if unset.

    Raises:
        ConfigError: when neither the config nor the model's profile gives a window.
    """
    _check_summary_role(config, model)
    if config.context_window is not None:
        return config
    profile = getattr(model, "profile", None) or {}
    window = profile.get("max_input_tokens") if isinstance(profile, dict) else None
    if not isinstance(window, int) or window <= 0:
        why = (
            f"{type(model).__name__} has no profile['max_input_tokens']"
            if model is not None
            else "no model= was given to read profile['max_input_tokens'] from"
        )
        raise ConfigError(
            f"context_window is unknown ({why}); pass "
            "CompactionConfig(context_window=<the model's input window in tokens>)."
        )
    return config.with_window(window)


def _check_summary_role(config: Windowed, model: BaseChatModel | None) -> None:
    if config.summary_role != "system" or model is None:
        return
    name = type(model).__name__.lower() + " " + type(model).__module__.lower()
    if any(p in name for p in _SYSTEM_FIRST_ONLY):
        warnings.warn(
            f"summary_role='system' puts a system message in the middle of the history, "
            f"which {type(model).__name__} rejects ('multiple non-consecutive system "
            "messages'); use CompactionConfig(summary_role='human') (the default) with this "
            "model.",
            CompactionWarning,
            stacklevel=3,
        )
