"""Smoke test: ``python -m bench.pause`` runs end to end with tiny latencies.

No timing is asserted (the machine is noisy); the test proves the harness runs every system,
finds the compaction turn, and writes the expected keys and tables. Skipped when the
benchmark's extra dependencies or the shared transcripts are missing.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

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


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    from bench.pause import SYSTEMS, run

    out = tmp_path_factory.mktemp("pause")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = run(
            pairs=[(0.01, 0.01), (0.02, 0.01)],
            systems=SYSTEMS,
            small_pairs=[(0.01, 0.01)],
            transcripts=1,
            quick=True,
            out_dir=out,
        )
    return results, out


def test_writes_json_and_markdown(smoke: tuple[dict[str, Any], Path]) -> None:
    results, out = smoke
    assert json.loads((out / "pause.json").read_text(encoding="utf-8"))["quick"] is True
    md = (out / "pause.md").read_text(encoding="utf-8")
    for title in ("Pause at the trigger", "Summarizer input tokens", "Fidelity"):
        assert title in md
    assert md.count("SummarizationMiddleware") == len(results["pause"]["pairs"])


def test_every_available_system_compacts_once_and_finishes(
    smoke: tuple[dict[str, Any], Path],
) -> None:
    from bench._pause_models import PREPARE_SUPPORTED

    results, _ = smoke
    for row in results["pause"]["pairs"]:
        assert {"L", "M", "window", "goal_s", "systems"} <= set(row)
        for system, r in row["systems"].items():
            if r is None:  # the prepare columns, on a package without the flag
                assert system.endswith("_prepare") and not PREPARE_SUPPORTED
                continue
            assert r["finished"], (system, r["verdict"])
            assert r["compactions"] == 1, (system, r["turns"])
            assert r["calls"] == 5
            for key in (
                "pause_median_s",
                "added_latency_s",
                "max_wait_after_model_s",
                "summarizer_calls",
                "summarizer_calls_during_model",
                "meets_goal",
            ):
                assert key in r, (system, key)
            assert r["summarizer_calls"] >= 1


def test_replay_tokens_and_fidelity_have_both_columns(
    smoke: tuple[dict[str, Any], Path],
) -> None:
    results, _ = smoke
    for w in results["replay_tokens"]["windows"].values():
        assert w["without"]["summarizer_input_tokens"] > 0
        assert "with" in w and "ratio" in w
    rows = results["fidelity"]["rows"]
    assert {(r["via"], r["policy"]) for r in rows} == {
        (via, policy)
        for via in ("graph", "middleware")
        for policy in ("context_reading", "tool_only")
    }
    for row in rows:
        assert row["without"]["finished"], row
        assert "with" in row and "same_facts" in row


def test_config_passes_prepare_only_when_the_flag_exists() -> None:
    from bench._pause_models import PREPARE_SUPPORTED, compaction_config

    plain = compaction_config(prepare=False, context_window=6_000)
    assert plain is not None and plain.context_window == 6_000
    prepared = compaction_config(prepare=True, context_window=6_000)
    if PREPARE_SUPPORTED:
        assert prepared is not None and prepared.prepare is True
        assert plain.prepare is False
    else:
        assert prepared is None


def test_goal_follows_the_issue() -> None:
    from bench.pause import goal_seconds

    assert goal_seconds(2.0, 2.0) == pytest.approx(0.1)
    assert goal_seconds(2.0, 4.0) == pytest.approx(0.1)
    assert goal_seconds(4.0, 2.0) == pytest.approx(2.2)


@pytest.mark.parametrize("system", ["graph", "mw", "lc_summarization"])
def test_async_runs_measure_the_compaction_turn(system: str) -> None:
    from bench.pause import run_system

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = run_system(system, summarizer_latency=0.01, model_latency=0.01, use_async=True)
    assert r is not None and r["finished"], r
    # One full compaction, once the tool results have filled the window past the trigger
    # (call 4 since a usage report anchors only the list it describes, call 5 before: the
    # report of call 3 was trusted for a list it did not describe), and no call over the window.
    compacted = [t["call"] for t in r["turns"] if t["compaction"]]
    assert r["compactions"] == 1 and len(compacted) == 1 and compacted[0] in (4, 5), compacted
    assert all(t["input_tokens"] <= 6_000 for t in r["turns"]), r["turns"]
