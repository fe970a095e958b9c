"""Issue 32, must-show 1: how deep the calls go below the middleware's hook,
``wrap_model_call`` (``bench.depth``)."""

from __future__ import annotations

from bench.depth import chains, measure


def test_the_first_change_is_at_most_six_calls_down_and_the_summary_eight() -> None:
    found = measure()
    model = found["summarizer_model_call"]
    assert 0 < model["calls"] <= 8, model["chain"]
    assert model["chain"][0] == "Compactor.turn"
    assert model["chain"][-1] == "LLMSummarizer.summarize"
    for key, last in (
        ("first_changed_message", "_truncate_one"),
        ("first_cleared_result", "_clear_one"),
    ):
        changed = found[key]
        assert 0 < changed["calls"] <= 6, (key, changed["chain"])
        assert changed["chain"][0] == "Compactor.turn", changed
        assert changed["chain"][-1] == last, changed


def test_the_hook_finds_nothing_outside_the_middlewares_hook() -> None:
    from langchain_core.messages import HumanMessage

    # a copy made from the package but not below a wrap_model_call frame is not counted
    from langchain_compact.markers import with_meta

    assert chains(lambda: with_meta(HumanMessage("x"), kind="cleared")) == {}
