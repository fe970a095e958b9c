"""Work moved off the turn: a placeholder counted as its head plus the fact lines counted
ahead with its result, the precount asked for once the micro step is done, and a merge's
summary counted when it is prepared (issue 22: ordinary turns and merges without pauses)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_compact import CompactionConfig, tokens
from langchain_compact._facts import facts_block, remember_facts, with_facts
from langchain_compact._placeholders import DEFAULT_PLACEHOLDER, FACTS_MARK
from langchain_compact.microcompact import clear_tool_results


def _result(rng: random.Random, lines: int, cjk: bool) -> str:
    """A tool result with fact lines (``key = value``, paths, ids) among log noise."""
    out = []
    for i in range(lines):
        kind = rng.randrange(5)
        if kind == 0:
            out.append(f"step_{i} = {rng.randint(10**4, 10**7)}")
        elif kind == 1:
            out.append(f"wrote /srv/app/module_{i}.py ({rng.randint(1, 900)} lines)")
        elif kind == 2:
            out.append(f"ticket QX-{rng.randint(1000, 9999)} status: open")
        elif kind == 3 and cjk:
            out.append("日志条目" * rng.randint(1, 6) + f" 值={rng.randint(1, 999)}")
        else:
            out.append(
                " ".join(rng.choice(["alpha", "beta", "gamma", "{", "}", "=>"]) for _ in range(12))
            )
    return "\n".join(out)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), lines=st.integers(5, 400), cjk=st.booleans())
def test_a_placeholder_counts_as_its_parts_the_same_in_every_process(
    seed: int, lines: int, cjk: bool
) -> None:
    """A placeholder is counted as its head plus its fact lines (``parts_cut``: the line
    break that opens them), within a token of counting it whole, for the estimate and for
    tiktoken; and the count is a function of the text alone: the same whether the fact
    lines were counted ahead (the process that cleared the result) or not (a worker that
    loaded the thread from a checkpoint). A count that followed the cache made workers
    decide differently from one process."""
    text = _result(random.Random(seed), lines, cjk)
    head = DEFAULT_PLACEHOLDER.format(name="run", chars=len(text), tool_call_id=f"c{seed}")
    whole = with_facts(head, text)
    block = facts_block(text)
    # a result without a fact line (all noise: seed 49015, 5 lines) gets no block, and a
    # placeholder without parts is counted whole (parts_cut 0)
    assert whole == head + block and tokens.parts_cut(whole) == (len(head) if block else 0)
    tokens._APPROX_TEXT_CACHE.clear()
    cold = tokens.approx_text(whole)  # nothing counted ahead
    tokens._APPROX_TEXT_CACHE.clear()
    remember_facts(text)  # the precount thread's work
    assert tokens.approx_text(whole) == cold
    assert abs(cold - tokens._estimate(whole)) <= 2
    precise = tokens.precise_counter()
    if precise is None:
        return
    counter = tokens.TiktokenCounter(encoding="o200k_base")  # a fresh cache: cold
    assert counter.count_text(whole) == precise.count_text(whole)
    exact = len(precise._load().encode(whole, disallowed_special=()))
    assert 0 <= counter.count_text(whole) - exact <= 1  # errs high, if at all


def test_clearing_a_result_counted_ahead_encodes_only_the_placeholder_head(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The precount thread counts a large unread result and the fact lines its placeholder
    will carry; the turn that clears it then encodes nothing but the placeholder's short
    head (before, it encoded the whole placeholder, fact lines and all: about 0.3 ms each,
    several a turn when clearings come in batches)."""
    precise = tokens.precise_counter()
    if precise is None:
        pytest.skip("tiktoken's o200k files are not available here")
    text = _result(random.Random(5), 900, cjk=False)
    block = facts_block(text)
    assert block.startswith(FACTS_MARK)
    history: list[BaseMessage] = [
        HumanMessage("Task: read the logs.", id="task"),
        AIMessage("", tool_calls=[{"name": "run", "args": {}, "id": "c1"}], id="a1"),
        ToolMessage(text, tool_call_id="c1", name="run", id="r1"),
    ]
    tokens.precount_unread(history)
    assert tokens._precount_queue is not None
    tokens._precount_queue.join()
    for turn in range(2, 6):  # read by later calls: the result may be cleared
        history += [
            AIMessage(
                "", tool_calls=[{"name": "run", "args": {}, "id": f"c{turn}"}], id=f"a{turn}"
            ),
            ToolMessage("ok", tool_call_id=f"c{turn}", name="run", id=f"r{turn}"),
        ]
    encoder = precise._load()
    encoded: list[str] = []
    real = type(encoder).encode

    def spy(self: Any, s: str, *args: Any, **kwargs: Any) -> Any:
        encoded.append(s)
        return real(self, s, *args, **kwargs)

    monkeypatch.setattr(type(encoder), "encode", spy)
    cleared = clear_tool_results(history, keep=1, min_chars=100)[2]
    assert FACTS_MARK in cleared.text and cleared.text.endswith(block)
    head = cleared.text[: -len(block)]
    assert encoded == [head]  # the head only: the result and its fact lines were counted ahead


def test_the_micro_step_asks_for_the_precount_once_its_work_is_done(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The precount worker holds the interpreter while it scores a result's lines: asked
    for before the micro step's own work, it ran beside that work and the turn waited for
    it (the slow 1% of ordinary turns); asked for after, it runs beside the model call."""
    import langchain_compact.core as core
    from langchain_compact.core import Compactor

    order: list[str] = []
    real_micro = core.micro_compact_with_count
    monkeypatch.setattr(core, "precount_unread", lambda messages: order.append("precount"))

    def micro(*args: Any, **kwargs: Any) -> Any:
        order.append("micro")
        return real_micro(*args, **kwargs)

    monkeypatch.setattr(core, "micro_compact_with_count", micro)
    compactor = Compactor(config=CompactionConfig(context_window=8_000), archive=None)
    history: list[BaseMessage] = [
        HumanMessage("Task: read the logs.", id="task"),
        AIMessage("", tool_calls=[{"name": "run", "args": {}, "id": "c1"}], id="a1"),
        ToolMessage("x = 1\n" * 900, tool_call_id="c1", name="run", id="r1"),
    ]
    compactor.clear(history, "t")
    assert order == ["micro", "precount"]


def test_the_fact_lines_hook_counts_the_block_a_placeholder_will_carry() -> None:
    """``remember_facts`` (run by the precount thread) leaves the placeholder's fact
    lines counted by the estimate and by tiktoken, under the block's own key."""
    text = _result(random.Random(9), 300, cjk=True)
    block = facts_block(text)
    tokens._APPROX_TEXT_CACHE.clear()
    remember_facts(text)
    assert tokens._text_key(block) in tokens._APPROX_TEXT_CACHE
    precise = tokens.precise_counter()
    if precise is not None:
        assert tokens._text_key(block) in precise._cache


def test_a_merged_summary_counts_as_its_header_plus_the_text_prepared_for_it() -> None:
    """A merged summary's body is merged and counted beside the model call (premerge);
    the trigger adds only its header, and the summary counts as the two parts."""
    from langchain_compact._placeholders import merged_summary_header

    body = "- step_3 = 48213\n- wrote /srv/app/module_3.py\n" * 20
    header = merged_summary_header(last=4)
    assert tokens.parts_cut(header + body) == len(header)
    assert tokens.approx_text(header + body) == tokens.approx_text(header) + tokens.approx_text(
        body
    )
    assert tokens.parts_cut(body) == 0 and tokens.parts_cut(header) == 0
