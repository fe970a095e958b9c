"""Smoke test of ``python -m bench.overhead`` on tiny sizes (the real run: 5,000 and 50,000).

Skipped when the benchmark's extra dependencies or the shared transcripts are missing.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

pytest.importorskip("langchain.agents.middleware")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    pytest.importorskip("langmem")

from bench import workloads

pytestmark = pytest.mark.skipif(
    not any(workloads.TRAJECTORY_DIR.glob("*.jsonl")),
    reason=f"no shared transcripts in {workloads.TRAJECTORY_DIR}",
)


def test_overhead_command_writes_ratios_for_both_sizes(tmp_path: Path) -> None:
    from bench.overhead import main

    out = tmp_path / "overhead.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["--sizes", "60", "200", "--calls", "2", "--out", str(out)]) == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    assert set(result["median_ms"]) == {"ours", "lc_summarization"}
    assert set(result["ours_over_lc_summarization"]) == {"60", "200"}
    assert set(result["ours_growth"]) == {"200/60"}
