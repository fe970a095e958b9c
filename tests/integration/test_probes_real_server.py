"""Issue 30, must-show 3: the probe bench's smoke size on the real llama.cpp server (the
shipped gemma3-270m), in the test command: the harness reaches every checkpoint, asks every
probe kind and checks the constraints, against a real model's summaries. What the model
answers is not judged here (a 270M model states almost nothing: docs/benchmarks.md); what the
compacted context holds is: ours pins the task, so the constraints are there at every
checkpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import probes
from bench._probe_script import CONSTRAINTS, KINDS

pytestmark = [pytest.mark.server, pytest.mark.timeout(900)]


def test_the_probe_bench_runs_on_the_real_server(llama_server: Any, tmp_path: Path) -> None:
    out = tmp_path / "probes.json"
    probes.main(
        [
            "--size",
            "smoke",
            "--systems",
            "ours",
            "--base-url",
            llama_server.base_url,
            "--model",
            llama_server.model,
            "--summary-tokens",
            "64",
            "--answer-tokens",
            "32",
            "--out",
            str(out),
        ]
    )
    result = json.loads(out.read_text())
    assert "OpenAI-compatible endpoint" in result["model"]
    (run,) = result["runs"]
    assert run["system"] == "ours" and run["not_reached"] == [], run.get("stop_reason")
    reached = [p["compactions"] for p in run["checkpoints"]]
    assert reached == list(probes.SIZES["smoke"]["checkpoints"])
    assert run["summarizer_calls"] > 0 and isinstance(run["fallback_summaries"], int)
    for point in run["checkpoints"]:
        assert set(point["probes"]) == set(KINDS)
        held = point["probes"]["constraints"]["items"]
        assert set(held) == {name for name, _, _ in CONSTRAINTS}
        assert point["probes"]["constraints"]["in_context"] == 1, point["compactions"]
