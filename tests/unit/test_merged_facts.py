"""Issue 30: what the summaries state survives their merges, through 20 compactions.

A merged summary joins the earlier summaries and condenses them to the merge's bound
(``_facts.condense_summary``). Each summary may carry a fidelity supplement (verbatim lines
the summary left out), and a merge adds its own, which repeats a summary line under a label
(``/pricing/money.py: created src/pricing/money.py``). On a501e0a the newest copy of a line
was the one kept, so the summary's own line went for the supplement's copy, and a
supplement's lines are the first a tight bound drops: the probe bench's files and next step
were gone from the 5th compaction on, while eight filler log lines of the supplements stayed.
"""

from __future__ import annotations

import pytest

from langchain_compact._facts import condense_summary

JOINED = """- BUILD_ID=d18fc9fb64
- created src/pricing/money.py (2 lines)
- edited src/checkout/invoice.py: 1 occurrence replaced
- Next step of the plan: run scripts/migrate_v3.py --dry-run first.
- Decision: use SQLite for the rate cache, because the container has no network access.
## Supplement: details the summary left out (verbatim)
- 12:47:04 INFO step 997/400 finished, 339 ms, exit 0
- 12:55:56 WARN slow request to /health took 531 ms

## Supplement: details the summary left out (verbatim)
- /pricing/money.py: created src/pricing/money.py (2 lines)
- /checkout/invoice.py: edited src/checkout/invoice.py: 1 occurrence replaced
- migrate_v3.py: Next step of the plan: run scripts/migrate_v3.py --dry-run first.
""" + "".join(
    f"- {n}: 12:{n % 60:02d}:08 INFO worker-{n % 7} compiled package pkg_{n} in {n} ms\n"
    for n in range(100, 130)
)

FACTS = (
    "BUILD_ID=d18fc9fb64",
    "created src/pricing/money.py",
    "edited src/checkout/invoice.py",
    "Next step of the plan",
    "Decision: use SQLite",
)


@pytest.mark.parametrize("bound", [240, 300, 600, 933])
def test_a_tight_merge_keeps_the_summaries_lines_over_their_supplements(bound: int) -> None:
    out = condense_summary(JOINED, bound, soft_tokens=min(bound, 256))
    for fact in FACTS:
        assert fact in out, f"{fact!r} lost at a bound of {bound}:\n{out}"
    body = out.split("## Supplement", 1)[0]
    for fact in FACTS:  # stated by the summary itself, not only inside a supplement
        assert fact in body, f"{fact!r} kept only as a supplement copy:\n{out}"


def test_supplement_lines_go_before_the_summaries_own() -> None:
    out = condense_summary(JOINED, 200, soft_tokens=120)
    assert "compiled package" not in out.split("## Supplement", 1)[0]
    kept_filler = out.count("compiled package")
    assert kept_filler < 30, "the supplements' filler is what a tight bound drops first"
    assert "older entries omitted" in out


def test_the_probe_run_keeps_every_planted_fact_through_twenty_compactions() -> None:
    pytest.importorskip("deepagents")
    from bench import probes
    from bench._probe_script import KINDS, FactKeepingSummarizer, FactReader

    for system in ("ours", "ours_lcel"):
        run = probes.run_system(
            system,
            summary_model=FactKeepingSummarizer(),
            agent=FactReader(),
            window=4_096,
            checkpoints=(1, 5, 10, 20),
            log_chars=4_000,
            max_turns=400,
        )
        assert run["not_reached"] == [], system
        for point in run["checkpoints"]:
            for kind in KINDS:
                held = point["probes"][kind]["in_context"]
                assert held == 1, f"{system}: {kind} at compaction {point['compactions']}"
