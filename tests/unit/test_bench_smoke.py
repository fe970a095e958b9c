"""Smoke test: the benchmark runner works end to end on tiny workloads (``--quick``).

Keeps ``bench/`` from rotting: every workload, every system adapter (the peers in their
real packages), the metrics, the markdown, the plot and the README section are exercised.
Skipped when the benchmark's extra dependencies or the shared transcripts are missing.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

pytest.importorskip("langchain.agents.middleware")
pytest.importorskip("matplotlib")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    pytest.importorskip("langmem")

from bench import workloads

pytestmark = pytest.mark.skipif(
    not any(workloads.TRAJECTORY_DIR.glob("*.jsonl")),
    reason=f"no shared transcripts in {workloads.TRAJECTORY_DIR}",
)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    from bench.__main__ import run

    out = tmp_path_factory.mktemp("bench")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = run(quick=True, out_dir=out)
    return results, out


def test_quick_run_writes_every_output(quick_run: tuple[dict, Path]) -> None:
    _, out = quick_run
    assert json.loads((out / "latest.json").read_text(encoding="utf-8"))["meta"]["quick"]
    md = (out / "latest.md").read_text(encoding="utf-8")
    assert "Decision overhead" in md and "Dependent task" in md
    assert (out / "context.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_system_is_measured_everywhere(quick_run: tuple[dict, Path]) -> None:
    from bench.peers import SYSTEMS

    results, _ = quick_run
    for name in SYSTEMS:
        assert results["overhead"]["median_ms"][name]
        for per_window in results["transcripts"].values():
            assert per_window[name]["scripted_calls"] > 0
        assert results["synthetic"]["systems"][name]["context_per_call"]
        for per_window in results["dependent"]["windows"].values():
            assert per_window[name]["calls"] > 0
    assert set(results["counting"]["counters"]) >= {"approximate_tokens", "TiktokenCounter"}


def test_readme_section_is_generated_from_results(quick_run: tuple[dict, Path]) -> None:
    from bench.report import readme_section

    results, _ = quick_run
    text = readme_section(results)
    assert text.startswith("## Benchmark")
    assert "python -m bench" in text and "context.png" in text
    assert "Where a peer wins" in text and "Closing note" in text


def test_metrics_flag_provider_rule_breaks() -> None:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    from bench.metrics import TruthCounter, cache_split, violations

    call = {"name": "ls", "args": {}, "id": "c1", "type": "tool_call"}
    broken = [
        ToolMessage("orphan", tool_call_id="zz"),
        HumanMessage("hi"),
        SystemMessage("late"),
        AIMessage("", tool_calls=[call]),
        HumanMessage("next"),
    ]
    assert violations(broken) == {
        "empty_input": 0,
        "orphan_tool_results": 1,
        "dangling_tool_calls": 1,
        "system_mid_list": 1,
        "first_not_user": 1,
    }
    ok = [SystemMessage("s"), HumanMessage("go"), AIMessage("", tool_calls=[call])]
    ok.append(ToolMessage("out", tool_call_id="c1"))
    assert not any(violations(ok).values())
    assert violations([SystemMessage("s")])["empty_input"] == 1
    truth = TruthCounter()
    cached, fresh = cache_split(ok[:2], ok, truth)
    assert cached == truth.message(ok[0]) + truth.message(ok[1])
    assert cached + fresh == truth(ok)
