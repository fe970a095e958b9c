"""Smoke size of the probe benchmark (``python -m bench.probes --fake --size smoke``): every
system reaches the checkpoints, every probe kind and constraint checkpoint is reported, and
the checker fails a system that drops everything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("deepagents")

from bench import probes
from bench._probe_script import CONSTRAINTS, KINDS, Plant, check


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("probes") / "probes.json"
    systems = ",".join([*probes.SYSTEMS, "drop_all"])
    probes.main(["--fake", "--size", "smoke", "--systems", systems, "--out", str(out)])
    return json.loads(Path(out).read_text())


def test_every_system_probed_at_every_checkpoint(result: dict) -> None:
    ks = result["settings"]["checkpoints"]
    assert [r["system"] for r in result["runs"]] == [*probes.SYSTEMS, "drop_all"]
    for run in result["runs"]:
        assert run["not_reached"] == [], run["system"]
        assert [p["compactions"] for p in run["checkpoints"]] == ks
        for point in run["checkpoints"]:
            assert set(point["probes"]) == set(KINDS)
            for probe in point["probes"].values():
                assert 0 <= probe["in_context"] <= 1
            constraints = point["probes"]["constraints"]["items"]
            assert set(constraints) == {name for name, _, _ in CONSTRAINTS}


def test_table_reports_every_column(result: dict) -> None:
    text = probes.table(result)
    header = next(line for line in text.splitlines() if line.startswith("| system"))
    for kind in KINDS[:-1]:
        assert kind in header
    for k in result["settings"]["checkpoints"]:
        assert f"constraints after {k}" in header
    assert "model: offline fakes" in text
    assert "n/r" not in text.split("|---")[1]


def test_checker_fails_a_system_that_drops_everything(result: dict) -> None:
    drop = next(r for r in result["runs"] if r["system"] == "drop_all")
    for point in drop["checkpoints"]:
        assert all(p["score"] == 0 for p in point["probes"].values()), point
        assert all(p["in_context"] == 0 for p in point["probes"].values()), point
    # the peers keep the task's constraints with a fact-keeping summarizer: the score moves
    for run in result["runs"]:
        if run["system"] != "drop_all":
            first = run["checkpoints"][0]["probes"]["constraints"]
            assert first["score"] == 1, run["system"]


def test_checker_is_exact() -> None:
    plant = Plant(
        build_id="7f3a0c9e21",
        created="src/pricing/rates.py",
        edited="src/checkout/cart.py",
        script="migrate_v3",
        choice="Redis",
        reason="the rates API allows only 100 requests per hour",
        reason_re="100 requests",
    )
    assert check("recall", "BUILD_ID=7F3A0C9E21", plant) == {"build_id": True}
    assert check("recall", "BUILD_ID=7f3a0c9e22", plant) == {"build_id": False}
    files = "src/pricing/rates.py: created\nsrc/checkout/cart.py: edited"
    assert check("files", files, plant) == {"created": True, "edited": True}
    # the right path with the wrong verb, or the verb on another line, is not credited
    assert check("files", "src/pricing/rates.py: edited\nsrc/checkout/cart.py", plant) == {
        "created": False,
        "edited": False,
    }
    assert check("decision", "Redis, since the API allows 100 requests per hour", plant) == {
        "choice": True,
        "reason": True,
    }
    assert check("constraints", "never touch tests/; prices in USD", plant) == {
        "tests": True,
        "eur": False,
        "force_push": False,
    }


def test_the_ablations_run_and_put_the_supplement_back() -> None:
    from langchain_compact import _compaction_phases, summarizers

    before = (_compaction_phases.fidelity_supplement, summarizers.fidelity_supplement)
    from bench._probe_script import FactKeepingSummarizer, FactReader

    settings = probes.SIZES["smoke"]
    for name in probes.ABLATIONS:
        run = probes.run_system(
            name,
            summary_model=FactKeepingSummarizer(),
            agent=FactReader(),
            window=settings["window"],
            checkpoints=settings["checkpoints"][:1],
            log_chars=settings["log_chars"],
            max_turns=settings["max_turns"],
        )
        assert run["label"] == probes.ABLATIONS[name]
        assert run["not_reached"] == [], name
        assert isinstance(run["fallback_summaries"], int)
    assert (_compaction_phases.fidelity_supplement, summarizers.fidelity_supplement) == before
    with probes._ablated("ours_no_supplement"):
        assert summarizers.fidelity_supplement is probes._nothing_missing
    assert summarizers.fidelity_supplement is before[1]
