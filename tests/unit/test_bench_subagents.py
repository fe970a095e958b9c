"""Smoke test of ``python -m bench.subagents`` (issue 29, must-show 2): the harness runs every
system in both wirings at a small size and reports the table's columns, and the table in
``docs/benchmarks.md`` is the one ``bench/results/subagents.json`` gives."""

from __future__ import annotations

import json
from pathlib import Path

from bench import subagents


def test_the_harness_runs_every_system_and_reports_the_columns(tmp_path: Path) -> None:
    out = tmp_path / "subagents.json"
    assert subagents.main(["--windows", "4000", "--reads", "4", "--out", str(out)]) == 0
    rows = json.loads(out.read_text(encoding="utf-8"))["rows"]
    assert {(r["system"], r["wiring"]) for r in rows} == {
        (s, w) for s in subagents.SYSTEMS for w in subagents.WIRINGS
    }
    for r in rows:
        assert set(subagents.COLUMNS) <= set(r), r
        assert r["answered"] == r["subtasks"]
        assert r["calls"] == r["subtasks"] * 5  # 4 reads and an answer per subtask
    ours = [r for r in rows if r["system"].startswith("ours")]
    assert all(r["summarizer_calls"] > 0 for r in ours)  # the worker did compact
    for r in ours:  # what the package promises inside another graph
        assert (r["subtask_lost"], r["over_window"], r["parent_changed"]) == (0, 0, 0), r
        assert r["parent_lost"] == 0, r
    # The metric sees a peer's summary reaching the parent.
    lc = [r for r in rows if r["system"] == "lc_summarization"]
    assert any(r["parent_changed"] > 0 for r in lc), lc


def test_the_docs_table_is_the_results_file() -> None:
    rows = json.loads(subagents.OUT.read_text(encoding="utf-8"))["rows"]
    text = subagents.DOCS.read_text(encoding="utf-8")
    assert subagents.docs_section(rows) in text, "run python -m bench.subagents --docs"
    assert {r["window"] for r in rows} == {8_000, 32_000}
    assert {r["wiring"] for r in rows} == set(subagents.WIRINGS)
