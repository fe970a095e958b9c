"""The overflow retry and compaction on demand never block the event loop: their async paths
run under blockbuster in a fresh process with an empty tiktoken cache (_overflow_probe.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("blockbuster")

ROOT = Path(__file__).resolve().parents[2]


def test_overflow_and_on_demand_async_paths_do_not_block(tmp_path: Path) -> None:
    cache = tmp_path / "tiktoken"
    cache.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "TIKTOKEN_CACHE_DIR": str(cache),
    }
    probe = Path(__file__).with_name("_overflow_probe.py")
    done = subprocess.run(
        [sys.executable, str(probe), str(tmp_path / "archive")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    for name in ("middleware", "graph", "lcel", "on_demand"):
        assert f"{name} ok" in done.stdout, report
