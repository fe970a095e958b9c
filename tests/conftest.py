"""Test setup shared by every tier: offline tiktoken files, where the transcripts are.

Tests marked ``full_transcripts`` (they assert over all 36 shared transcripts) or
``seed_articles`` (they read the Chinese seed articles) are skipped, with the reason, when
that data is not beside the checkout: a clone of the repository alone runs on the subset of
transcripts in ``tests/data/trajectories`` (see ``tests/_data.py``).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from _data import (
    FULL_TRANSCRIPTS_REASON,
    SEED_ARTICLES_REASON,
    has_full_set,
    has_seed_articles,
)

from langchain_compact.tokens import provision_tiktoken_cache

# Tests run offline: tiktoken's BPE files come from the bpe-openai package (test extra),
# whose copies match tiktoken's expected sha256, into a private TIKTOKEN_CACHE_DIR.
_cache = Path(tempfile.gettempdir()) / "langchain-compact-tests-tiktoken"
os.environ["TIKTOKEN_CACHE_DIR"] = str(_cache)
# The default archive (every integration's, when given no archive=) writes JSONL files under
# LANGCHAIN_COMPACT_ARCHIVE_DIR when set: a temporary folder, never the checkout or the home.
os.environ["LANGCHAIN_COMPACT_ARCHIVE_DIR"] = tempfile.mkdtemp(prefix="langchain-compact-archive-")
if provision_tiktoken_cache(_cache) is None:  # pragma: no cover - setup error
    raise RuntimeError(
        "bpe-openai is not installed; install the test extra: pip install -e '.[test]'"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the tests whose data is missing, saying which data and where to put it."""
    missing = {
        "full_transcripts": None if has_full_set() else FULL_TRANSCRIPTS_REASON,
        "seed_articles": None if has_seed_articles() else SEED_ARTICLES_REASON,
    }
    for item in items:
        for marker, reason in missing.items():
            if reason is not None and item.get_closest_marker(marker) is not None:
                item.add_marker(pytest.mark.skip(reason=reason), append=False)
                break
