"""A compacted history near the fit limit is counted precisely (issue 9: stop only when the
next call cannot fit).

The local count is an estimate and can err by content type: here the removed tool results
are dumps of random Cyrillic letters, which the estimate is made to count 2.5 times low
(``_without_precise_count``: a token per 4 letters, as before issue 28; it now matches
o200k's strings of other scripts and counts them 4% high) and what stays is prose. (They
were hex dumps, then random Latin letters, then random Cyrillic; the estimate by content
class now counts all three within 10% of o200k, so none shows the error unaided.)
One usage-calibrated scale over the whole history then puts the compacted
history at more than twice its real size, and a run in a small window was stopped, or its
unread result digested, with room to spare. A compaction counts with tiktoken, calibrated
on the same usage report.
"""

from __future__ import annotations

import random
import warnings

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

import langchain_compact._compaction_phases as phases
import langchain_compact._estimate as _estimate
import langchain_compact.tokens as tokens
from langchain_compact import CompactionConfig
from langchain_compact.compaction import compact_history
from langchain_compact.core import Compactor
from langchain_compact.markers import KIND_SUMMARY, KIND_TRUNCATED, kind_of
from langchain_compact.tokens import TiktokenCounter, context_tokens, precise_counter

PROSE = "Policy: answer the user's question using the tools; report every value you read. " * 25


def _dump(rng: random.Random, words: int) -> str:
    return " ".join(
        "".join(rng.choice("абвгдежзийклмнопрстуфхцчшщыэюя") for _ in range(32))
        for _ in range(words)
    )


def _history() -> tuple[list[BaseMessage], TiktokenCounter]:
    """Three dumps the model has read, a usage report that counted them exactly, and one
    unread prose result."""
    truth = precise_counter()
    assert truth is not None, "the test extra installs bpe-openai (tiktoken files offline)"
    rng = random.Random(7)
    history: list[BaseMessage] = [SystemMessage(PROSE), HumanMessage("Decode the dumps.")]
    for i in range(3):
        history.append(
            AIMessage("", tool_calls=[{"name": "dump", "args": {"i": i}, "id": f"c{i}"}])
        )
        history.append(ToolMessage(_dump(rng, 40), tool_call_id=f"c{i}"))
    usage = {"input_tokens": truth(history), "output_tokens": 10, "total_tokens": 0}
    history.append(
        AIMessage("", tool_calls=[{"name": "note", "args": {}, "id": "c9"}], usage_metadata=usage)
    )
    history.append(ToolMessage(PROSE[:1500], tool_call_id="c9"))
    for i, m in enumerate(history):
        m.id = f"m{i}"
    return history, truth


def _without_precise_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """No precise count, and the estimate of before issue 28 for the words of other scripts
    (a token per 4 letters and one a word: 2.5 times low on the dumps), as any estimate may
    be on content its classes do not know."""
    monkeypatch.setattr(phases, "precise_counter", lambda: None)
    monkeypatch.setattr(_estimate, "_script_word", lambda word: len(word.strip()) / 4 + 1)
    monkeypatch.setattr(tokens, "_APPROX_TEXT_CACHE", tokens.Generations())
    monkeypatch.setattr(tokens, "_APPROX_CACHE", tokens.Generations())
    monkeypatch.setattr(tokens, "_short_pieces", _estimate.pieces)  # uncached while patched


def test_estimate_after_compaction_follows_the_real_count() -> None:
    history, truth = _history()
    cfg = CompactionConfig(context_window=2200, keep_last_n=2)
    result = compact_history(history, config=cfg)
    real = truth(result.messages)
    assert abs(result.tokens_after - real) <= 0.02 * real
    # the counts after the boundary start from it (the stored calibration reproduces it)
    assert context_tokens(result.messages) == result.tokens_after
    assert [kind_of(m) for m in result.messages][-3:] == [KIND_SUMMARY, None, None]


def test_without_the_precise_count_the_same_estimate_runs_far_high(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the test above guards against (and where a tokenizer cannot be loaded, what
    the package falls back to, silently)."""
    history, truth = _history()
    _without_precise_count(monkeypatch)
    cfg = CompactionConfig(context_window=2200, keep_last_n=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no tokenizer warning on the fallback path
        result = compact_history(history, config=cfg)
    assert result.tokens_after > 1.5 * truth(result.messages)


def test_a_compacted_history_that_fits_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """Window 1,900 (fit 1,805): the real size is under half of it. Counted precisely, the
    run goes on with the unread result whole; with the local estimate alone the
    compaction digested the unread result to make room that was there all along."""
    history, truth = _history()
    cfg = CompactionConfig(context_window=1900, keep_last_n=2)
    core = Compactor(config=cfg)
    result = compact_history(history, config=cfg)
    assert core.after_compaction(result.messages) == "continue"
    assert result.messages[-1].content == history[-1].content  # unread: whole
    assert truth(result.messages) <= (cfg.fit_tokens or 0)

    _without_precise_count(monkeypatch)
    rough = compact_history(history, config=cfg)
    assert kind_of(rough.messages[-1]) == KIND_TRUNCATED
    assert rough.messages[-1].content != history[-1].content


def test_a_chain_anchors_only_on_usage_that_can_describe_the_list_it_holds() -> None:
    """A stateless chain compacts a copy: its model's usage describes the copy. A report 10%
    below the o200k count of the raw history it is attached to (the copy had a few results
    cleared) cannot describe that history: the chain counts locally instead of trusting it
    (it used to accept reports down to 60% of the local count and passed histories over the
    window to its model)."""
    history, truth = _history()
    prefix = history[:-1]
    copy_usage = {"input_tokens": int(truth(prefix[:-1]) * 0.9), "output_tokens": 5}
    history[-2] = history[-2].model_copy(
        update={"usage_metadata": copy_usage | {"total_tokens": 0}}
    )
    anchored = context_tokens(history)  # a graph's own history: the report is trusted
    verified = context_tokens(history, verify_anchor="strict")
    assert anchored < truth(history) * 0.95
    assert verified == context_tokens(
        [*history[:-2], history[-2].model_copy(update={"usage_metadata": None}), history[-1]]
    )
    exact = {"input_tokens": truth(prefix[:-1]), "output_tokens": 5, "total_tokens": 0}
    history[-2] = history[-2].model_copy(update={"usage_metadata": exact})
    assert context_tokens(history, verify_anchor="strict") == context_tokens(history)


def test_a_chain_that_compacts_a_copy_does_not_calibrate_on_the_copys_usage() -> None:
    """``calibrate=False`` (what the LCEL transformer passes): the report describes another
    list, so the compacted history is counted with tiktoken as it is, not scaled by it."""
    history, truth = _history()
    copy_usage = {"input_tokens": int(truth(history[:-2]) * 0.7), "output_tokens": 5}
    history[-2] = history[-2].model_copy(
        update={"usage_metadata": copy_usage | {"total_tokens": 0}}
    )
    cfg = CompactionConfig(context_window=2200, keep_last_n=2)
    scaled = compact_history(history, config=cfg)
    plain = compact_history(history, config=cfg, calibrate=False)
    assert plain.tokens_after == pytest.approx(truth(plain.messages), rel=0.02)
    assert scaled.tokens_after < 0.8 * truth(scaled.messages)  # what it used to trust


def test_results_cleared_after_the_report_are_credited_in_tiktoken_units() -> None:
    """Micro-compaction cleared the dumps after the usage report that counted them: the
    calibration adds back what they took as tiktoken counts it (``saved_precise``), not the
    character estimate of it, which put the compacted history 15 to 20% high."""
    from langchain_compact.microcompact import clear_tool_results
    from langchain_compact.tokens import approximate_tokens

    history, truth = _history()
    cleared = clear_tool_results(history, keep=0, counter=approximate_tokens)
    assert sum(kind_of(m) == "cleared" for m in cleared) == 3
    cfg = CompactionConfig(context_window=2200, keep_last_n=2)
    result = compact_history(cleared, config=cfg)
    real = truth(result.messages)
    assert abs(result.tokens_after - real) <= 0.03 * real
