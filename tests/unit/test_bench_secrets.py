"""Smoke test of ``python -m bench.secrets`` (issue 30, must-show 1): the 25-log workload's
bench row runs every system, ours keep every secret without a call over the window, and the
table in ``docs/benchmarks.md`` is the one ``bench/results/secrets.json`` gives."""

from __future__ import annotations

import json
from pathlib import Path

from bench import secrets


def test_the_harness_runs_every_system_and_ours_keep_every_secret(tmp_path: Path) -> None:
    out = tmp_path / "secrets.json"
    assert secrets.main(["--out", str(out)]) == 0
    rows = {r["system"]: r for r in json.loads(out.read_text(encoding="utf-8"))["rows"]}
    assert set(rows) == set(secrets.SYSTEMS)
    for r in rows.values():
        assert set(secrets.COLUMNS) <= set(r), r
        assert r["calls"] == secrets.LOGS + 1
    lc = rows["lc_summarization"]
    for name in ("ours_graph", "ours_middleware", "ours_lcel"):
        r = rows[name]
        assert r["secrets_kept"] >= lc["secrets_kept"] and r["secrets_kept"] == secrets.LOGS, r
        assert r["over_window"] == r["summarizer_over_window"] == 0, r
        assert r["compactions"] >= 1 and r["summarizer_calls"] >= r["compactions"], r


def test_the_docs_table_is_the_results_file() -> None:
    rows = json.loads(secrets.OUT.read_text(encoding="utf-8"))["rows"]
    assert secrets.docs_section(rows) in secrets.DOCS.read_text(encoding="utf-8"), (
        "run python -m bench.secrets"
    )
    assert {r["system"] for r in rows} == set(secrets.SYSTEMS)
