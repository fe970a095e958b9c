"""Test setup shared by every tier: offline tiktoken files, the shared data directory."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from langchain_compact.tokens import provision_tiktoken_cache

# Tests run offline: tiktoken's BPE files come from the bpe-openai package (test extra),
# whose copies match tiktoken's expected sha256, into a private TIKTOKEN_CACHE_DIR.
_cache = Path(tempfile.gettempdir()) / "langchain-compact-tests-tiktoken"
os.environ["TIKTOKEN_CACHE_DIR"] = str(_cache)
if provision_tiktoken_cache(_cache) is None:  # pragma: no cover - setup error
    raise RuntimeError(
        "bpe-openai is not installed; install the test extra: pip install -e '.[test]'"
    )
