"""Async never blocks the event loop (issue 23): every async path (graph nodes, middleware
``abefore_model``, LCEL ``ainvoke``, the archives' and the memory's async methods, the recall
tool) runs under blockbuster in a fresh process with an empty tiktoken cache directory, as
``langgraph dev`` runs them without ``--allow-blocking``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("blockbuster")

ROOT = Path(__file__).resolve().parents[2]
PROBES = ("graph", "middleware", "lcel", "archives", "memory")


def test_no_async_path_blocks_the_loop_on_a_fresh_tiktoken_cache(tmp_path: Path) -> None:
    cache = tmp_path / "tiktoken"
    cache.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "TIKTOKEN_CACHE_DIR": str(cache),
    }
    probe = Path(__file__).with_name("_async_probe.py")
    done = subprocess.run(
        [sys.executable, str(probe), str(tmp_path / "archive"), "all"],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    for name in PROBES:
        assert f"{name} ok" in done.stdout, report
    assert any(cache.iterdir()), "the probe ran on the empty cache, which was then filled"
