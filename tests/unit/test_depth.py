"""Issue 32, must-show 1: how deep the calls go below ``before_model`` (``bench.depth``)."""

from __future__ import annotations

from bench.depth import chains, measure


def test_the_summarizers_model_call_is_at_most_eight_calls_down() -> None:
    found = measure()
    model = found["summarizer_model_call"]
    assert 0 < model["calls"] <= 8, model["chain"]
    assert model["chain"][0] == "Compactor.turn"
    assert model["chain"][-1] == "LLMSummarizer.summarize"
    changed = found["first_changed_message"]
    assert changed["calls"] > 0 and changed["chain"][0] == "Compactor.turn", changed


def test_the_hook_finds_nothing_outside_before_model() -> None:
    from langchain_core.messages import HumanMessage

    # a copy made from the package but not below a before_model frame is not counted
    from langchain_compact.markers import with_meta

    assert chains(lambda: with_meta(HumanMessage("x"), kind="cleared")) == {}
