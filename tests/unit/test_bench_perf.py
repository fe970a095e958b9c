"""Smoke test of ``python -m bench.perf --quick``: every section runs and the comparison with
a baseline is written (no timing is asserted: speed lives in the bench)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import perf, workloads

pytestmark = pytest.mark.skipif(
    not any(workloads.TRAJECTORY_DIR.glob("*.jsonl")),
    reason=f"no shared transcripts in {workloads.TRAJECTORY_DIR}",
)


def test_quick_perf_run_compares_with_its_baseline(tmp_path: Path) -> None:
    baseline = tmp_path / "base.json"
    assert perf.main(["--quick", "--record-baseline", "--out", str(baseline)]) == 0
    out = tmp_path / "perf.json"
    assert perf.main(["--quick", "--baseline", str(baseline), "--out", str(out)]) == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    today = result["today"]
    assert today["import"]["langsmith_imported"] is False
    assert set(today["decision"]["median_ms"]) == {"150", "400"}
    assert set(today["one_shot"]) == {"compact_history", "compact_messages"}
    ratios = result["baseline_over_today"]
    assert ratios["extractive"] is not None and ratios["compact_history_2500_seconds"] is not None
    assert "compact_messages_peak_mib_2500/500" in result["today_growth"]
