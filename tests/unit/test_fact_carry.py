"""Facts that only a tool result held survive clearing, compaction and summary merges."""

from __future__ import annotations

from langchain_core.messages import ToolMessage

from langchain_compact._facts import FACTS_MARK, placeholder_facts, with_facts
from langchain_compact.markers import KIND_CLEARED, with_meta
from langchain_compact.summarizers import fidelity_supplement


def noisy_log(fact_line: str) -> str:
    """A build log whose every line is a ``key: value`` with numbers, with one line in the
    middle naming the identifier that matters."""
    mods = ["auth", "core", "sched", "net", "io", "cache", "rpc", "billing"]
    lines = [
        f"WARNING {mods[i % 8]}: deprecated call flush() in src/{mods[i % 8]}/flush.py:{100 + i}"
        for i in range(40)
    ]
    lines.insert(20, fact_line)
    lines.append("EXIT status=0 run=144 module=cache")
    return "\n".join(lines)


def test_a_placeholder_keeps_an_id_from_the_middle_of_a_noisy_log() -> None:
    text = noisy_log("NOTE artifact signing key id for this build: FX-79545")
    placeholder = with_facts("[tool result cleared]", text)
    assert "FX-79545" in placeholder
    assert "EXIT status=0" in placeholder, "the outcome line stays first"
    assert any("FX-79545" in line for line in placeholder_facts(placeholder))


def test_the_fidelity_check_carries_the_facts_a_cleared_placeholder_kept() -> None:
    kept = "EXIT status=0 run=225 | NOTE artifact signing key id for this build: FX-33707"
    placeholder = with_meta(
        ToolMessage("[tool result cleared]" + FACTS_MARK + kept, tool_call_id="c1", name="build"),
        kind=KIND_CLEARED,
    )
    supplement = fidelity_supplement([placeholder], "the build ran", max_tokens=40)
    assert "FX-33707" in supplement
