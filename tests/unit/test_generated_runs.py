"""Generated agent runs (issue 19): every shape of work, windows from 2k to 1M tokens, through
the graph, the ``create_agent`` middleware and the LCEL transformer.

Each seed is one generated run (``tests/unit/_generated.py``: shape, window, turns,
integration, archive). The invariants are computed there, independently of the package: no
call over the window; no invalid provider input; the run finishes whenever its smallest
context fits; an unread result reaches the model whole when it fits, else as a digest with its
first and last lines using at least a quarter of the room left; every original removed from
the context is recallable by id. ``python -m bench.generated --runs 20000`` runs the same
harness at scale.

Seeds that found a failure are kept below as named regression cases, with what they found on
the engine before issue 19.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _generated import generate, run_and_check

RUNS = 500
"""Generated runs in the normal test command (seeds 0 to RUNS - 1)."""

REGRESSIONS: list[tuple[int, str]] = []
"""(seed, what it found on the code before issue 19). Every seed here is also run by name."""


def _report(seed: int, tmp_path: Path) -> None:
    _, violations = run_and_check(seed, tmp_path)
    assert not violations, f"{generate(seed).describe()}:\n" + "\n".join(str(v) for v in violations)


@pytest.mark.parametrize("seed", [s for s, _ in REGRESSIONS], ids=[w for _, w in REGRESSIONS])
def test_regression_seed(seed: int, tmp_path: Path) -> None:
    _report(seed, tmp_path)


@pytest.mark.parametrize("seed", range(RUNS))
def test_generated_run(seed: int, tmp_path: Path) -> None:
    _report(seed, tmp_path)


def test_generation_is_deterministic_and_covers_every_shape_window_and_integration() -> None:
    from _generated import BANDS, INTEGRATIONS, SHAPES

    assert generate(123) == generate(123)
    scenarios = [generate(seed) for seed in range(RUNS)]
    assert {(s.shape, s.integration) for s in scenarios} == {
        (shape, way) for shape in SHAPES for way in INTEGRATIONS
    }
    assert {s.band for s in scenarios} == {label for _, label in BANDS}
    assert (
        min(s.window for s in scenarios) >= 2_000 and max(s.window for s in scenarios) <= 1_000_000
    )


def test_the_checker_sees_a_stop_a_call_over_the_window_and_a_broken_pairing() -> None:
    """The invariants are not vacuous: a run stopped early, an oversized call and an orphan
    result are each reported (judged on a hand-made record, without the package)."""
    from _generated import SYSTEM_PROMPT, ModelState, RunRecord, check
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    scenario = next(
        s for s in (generate(seed) for seed in range(RUNS)) if s.shape == "tool_results"
    )
    big = HumanMessage("word " * (scenario.window + 10), id=f"task_{scenario.seed}")
    orphan = ToolMessage("x", tool_call_id="nobody", id="orphan")
    inputs = [[SystemMessage(SYSTEM_PROMPT), big, AIMessage("", id="a"), orphan]]
    record = RunRecord(
        scenario=scenario,
        inputs=inputs,
        tools=[],
        finished=False,
        stopped=True,
        error=None,
        archive=None,
        thread_id="t",
        originals={f"task_{scenario.seed}": HumanMessage(scenario.task)},
    )
    found = {v.invariant for v in check(record)}
    assert {"over_window", "invalid_input"} <= found
    assert ModelState(replies=[]).cursor == 0
