"""The fast paths give the same answers as their straightforward versions."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_compact import _facts, tokens
from langchain_compact._facts import FACTS_MARK, fact_lines, is_key_fact, result_gist, with_facts
from langchain_compact._placeholders import is_summary_text
from langchain_compact._render import (
    context_of,
    key_lines,
    message_text,
    render_call,
    salient_items,
    salient_rank,
)
from langchain_compact._scan import FactsMemo, history_facts
from langchain_compact.budget import OBSERVATION_CHARS
from langchain_compact.markers import KIND_CLEARED, KIND_SUMMARY, kind_of, with_meta
from langchain_compact.summarizers import (
    _ASSIGNED,
    _PAIR,
    _fact_segments,
    _unwrapped,
    fidelity_supplement,
)
from langchain_compact.tokens import approximate_tokens

# --------------------------------------------------------------------------- fidelity


def _reference_supplement(
    span: Sequence[BaseMessage],
    summary: str,
    *,
    max_items: int | None = None,
    max_tokens: int | None = None,
) -> str:
    """The nested-scan version, kept as the reference."""
    primary: list[str] = []  # what people and the assistant said: checked first
    secondary: list[str] = []  # outcome lines of tool results
    for msg in span:
        text = message_text(msg)
        if kind_of(msg) == KIND_CLEARED:
            # A placeholder: the original is archived (or gone), but the key facts it kept
            # (ids, ``key = value`` with data) are the visible copy of what the result said,
            # and the summary carries them on.
            kept = [p for p in text.partition(FACTS_MARK)[2].split(" | ") if is_key_fact(p)]
            if kept:
                secondary.append("\n".join(kept))
            continue
        if isinstance(msg, ToolMessage) or (
            len(text) > OBSERVATION_CHARS and kind_of(msg) != KIND_SUMMARY
        ):
            secondary.append("\n".join(dict.fromkeys([*key_lines(text), *result_gist(text)])))
        else:
            if kind_of(msg) == KIND_SUMMARY and is_summary_text(text):
                text = text.partition("\n")[2]  # the header: index, count, archive reference
            primary.append(text)
        if isinstance(msg, AIMessage):
            primary.extend(render_call(c["name"], c["args"]) for c in msg.tool_calls)
    sources = primary + secondary
    missing: dict[str, str] = {}  # item -> its context, in order of appearance
    for source in sources:
        # A placeholder's kept facts are joined with " | ": an item's context is its own
        # fact, not the neighbouring ones (a long context costs the bound other facts).
        segments = "\n".join(_fact_segments(source))
        for item in salient_items(source):
            if item not in summary and item not in missing:
                missing[item] = _unwrapped(item, context_of(item, segments))
    # A value is kept with its key: ``"previous": 674004`` in a later call's arguments does
    # not say that step 7 produced it, so the fact line ``step=7 value=674004`` is missing.
    # And with the other ``key=value`` pairs of its line: ``ep=32 value=140341`` (a line a
    # summarizer cut at its start) does not say which step produced the value.
    pairs = set(_PAIR.findall(summary))
    assigned = set(_ASSIGNED.findall(summary))
    paired: set[str] = set()  # values of numeric ``key = value`` facts
    for source in sources:
        for line in _fact_segments(source):
            if not is_key_fact(line):
                continue
            whole = all(p in assigned for p in _ASSIGNED.findall(line))
            for key, value in _PAIR.findall(line):
                paired.add(value)
                if value not in missing and ((key, value) not in pairs or not whole):
                    missing[value] = _unwrapped(value, context_of(value, line))
    if not missing:
        return ""
    # Ticket-like ids, URLs and the values of numeric ``key = value`` facts first, then the
    # other items of key fact lines (paths among them), plain numbers last: under a tight
    # bound the supplement keeps what is hardest to recover (the paths in the warning lines
    # of a hundred logs used to rank with the values a tool computed, and push them out).
    # The sort is stable. (A fact's context is then that fact line, wherever the item
    # appeared first.)
    facts: dict[str, str] = {}
    for source in sources:
        for line in _fact_segments(source):
            if any(item in line for item in missing) and is_key_fact(line):
                for item in salient_items(line):
                    if item in missing and item not in facts:
                        facts[item] = _unwrapped(item, context_of(item, line))
    missing.update(facts)

    def rank(item: str) -> int:
        base = salient_rank(item)
        return 0 if base == 0 or item in paired else 1 if item in facts else 1 + base

    missing = dict(sorted(missing.items(), key=lambda kv: rank(kv[0])))
    lines: list[str] = []
    used = 0
    for item, ctx in missing.items():
        line = f"- {item}: {ctx}"
        cost = approximate_tokens([HumanMessage(line)]) - 6
        full = max_items is not None and len(lines) >= max_items
        if full or (max_tokens is not None and used + cost > max_tokens):
            break
        lines.append(line)
        used += cost
    if len(lines) < len(missing):
        lines.append(f"- ({len(missing) - len(lines)} more details: ask recall_archived)")
    return "## Supplement: details the summary left out (verbatim)\n" + "\n".join(lines)


_WORDS = [
    "QX-4821", "QX-12", "step=7", "value=674004", "value=12345", "ep=32", "total: 98765",
    "/srv/app/billing.py", "app.py", "https://ci.example.com/run/77", "12.5", "50123", "137",
    "a1b2c3d4e", "ok", "the", "build", "|", " | ", "facts kept:", "- ", "\n", "\n", "x = 7",
    "order_id = QX-9", "warning", "1,234,567", "exit", "code", "done.",
]  # fmt: skip
_text = st.lists(st.sampled_from(_WORDS), max_size=30).map(" ".join)


@st.composite
def _message(draw: st.DrawFn) -> BaseMessage:
    kind = draw(st.sampled_from(["human", "ai", "tool", "cleared", "long", "summary"]))
    text = draw(_text)
    if kind == "human":
        return HumanMessage(text)
    if kind == "long":
        return HumanMessage((text + "\n") * (OBSERVATION_CHARS // max(len(text), 1) + 1))
    if kind == "ai":
        args = {"q": draw(_text)}
        return AIMessage(text, tool_calls=[{"name": "run", "args": args, "id": "c1"}])
    if kind == "summary":
        return with_meta(HumanMessage(f"[summary 1]\n## 2. Facts\n- {text}"), kind=KIND_SUMMARY)
    if kind == "tool":
        return ToolMessage(text, tool_call_id="c1", name="run")
    body = with_facts("[tool result cleared]", text)
    return with_meta(ToolMessage(body, tool_call_id="c1", name="run"), kind=KIND_CLEARED)


@settings(max_examples=300, deadline=None)
@given(
    span=st.lists(_message(), max_size=8),
    summary=_text,
    max_items=st.none() | st.integers(1, 6),
    max_tokens=st.none() | st.integers(5, 200),
)
def test_fidelity_supplement_matches_the_nested_scan(
    span: list[BaseMessage], summary: str, max_items: int | None, max_tokens: int | None
) -> None:
    expected = _reference_supplement(span, summary, max_items=max_items, max_tokens=max_tokens)
    got = fidelity_supplement(span, summary, max_items=max_items, max_tokens=max_tokens)
    assert got == expected


# --------------------------------------------------------------------------- fact scoring

_KEY = r"""^\s*[-*]?\s*["']?[A-Za-z_][\w\-.]*(?: [A-Za-z_][\w\-.]*){0,3}["']?\s*"""
_OLD_EQ = re.compile(_KEY + r"(?:=|:=)(?!=)\s*\S")
_OLD_COLON = re.compile(_KEY + r":(?!:)\s*\S")
_OLD_STRONG = re.compile(r"\b[A-Z][A-Z0-9]*-\d+|[\u4e00-\u9fff]{1,8}-\d+|https?://")
_OLD_ID = re.compile(_OLD_STRONG.pattern + r"|(?:^|\s)(?:~|\.{1,2})?/[\w.\-]+/")
_OLD_NOISE = re.compile(r"^\s*(?:#|//|import |from |def |class |return |if |for |while |\{|\}|<)")


def _reference_score(line: str) -> int | None:
    """The scoring as first written: every pattern on every line."""
    if _OLD_NOISE.match(line):
        return None
    eq = _OLD_EQ.match(line) is not None
    colon = not eq and _OLD_COLON.match(line) is not None
    data = _OLD_ID.search(line) is not None or re.search(r"\d", line) is not None
    if (eq and data) or _OLD_STRONG.search(line):
        return 0
    if (colon and data) or _OLD_ID.search(line):
        return 1
    return 2 if eq or colon else None


_PIECES = [
    "a", "key", "x_y", " ", "  ", "=", "==", ":=", ":", "::", "/", "./", "~/", "-", "QX-", "12",
    "7", "https://", "http:/", "#", "//", "import ", "{", "<", '"', "'", "*", "\u4e00", ".",
    "srv/", "value", "\t",
]  # fmt: skip
_line = st.lists(st.sampled_from(_PIECES), max_size=14).map("".join)


@settings(max_examples=500, deadline=None)
@given(_line)
def test_score_matches_the_reference(line: str) -> None:
    assert _facts._score(line) == _reference_score(line)


_BREAKS = ["\n", "\n", "\r\n", "\r", "\x1c", "\u2028", "\n\n", " \n"]
_text_lines = st.lists(
    st.tuples(_line | st.sampled_from(["[image: x.png]", " [file block]", "RESULT v=1"]),
              st.sampled_from(_BREAKS)),
    max_size=12,
).map(lambda parts: "".join(a + b for a, b in parts))  # fmt: skip


def _reference_lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip()]


@settings(max_examples=300, deadline=None)
@given(_text_lines, st.booleans())
def test_gist_and_placeholder_facts_match_the_full_split(text: str, tail_space: bool) -> None:
    text += " \n" if tail_space else ""
    lines = _reference_lines(text)
    assert _facts._last_line(text) == (lines[-1] if lines else "")
    gist = result_gist(text)
    if lines:
        refs = [ln for ln in lines if re.match(r"^\[(?:image|file|audio|video|document)\b", ln)]
        assert gist[: 1 + len(set(refs) - {gist[0]})] == list(
            dict.fromkeys([_facts._clip(lines[-1]), *refs])
        )
    else:
        assert gist == []


@settings(max_examples=400, deadline=None)
@given(_text_lines)
def test_the_candidate_lines_hold_every_fact_line(text: str) -> None:
    """The patterns run over all the lines at once score each line as ``_score`` scores it
    alone, so fact_lines (memoised) gives what scoring every scanned line gives."""
    lines = [raw.strip() for raw in _facts._scanned_lines(text)]
    scores = [(i, _facts._score(line)) for i, line in enumerate(lines) if line]
    assert _facts._line_scores(lines) == [(i, score) for i, score in scores if score is not None]
    _facts._FACT_MEMO.clear()
    for limit, best in ((6, False), (3, True), (40, False)):
        chosen: list[tuple[int, str]] = []
        used, seen = 0, set()
        full = []
        for pos, line in enumerate(lines):
            score = _facts._score(line) if line and line not in seen else None
            if score is not None:
                seen.add(line)
                full.append((score, pos, _facts._clip(line)))
        for score, pos, line in sorted(full):
            if best and score > 0:
                continue
            if len(chosen) >= limit or used + len(line) > _facts.DEFAULT_MAX_CHARS:
                break
            chosen.append((pos, line))
            used += len(line) + 3
        want = [line for _pos, line in sorted(chosen)]
        assert fact_lines(text, limit=limit, best_only=best) == want
        assert fact_lines(text, limit=limit, best_only=best) == want  # from the memo


def test_fact_lines_reads_a_bounded_part_of_a_long_text(monkeypatch: pytest.MonkeyPatch) -> None:
    scored: list[str] = []
    real = _facts._line_scores

    def counting(lines: list[str]) -> list[tuple[int, int]]:
        scored.extend(lines)
        return real(lines)

    monkeypatch.setattr(_facts, "_line_scores", counting)
    body = "\n".join(f"log line {i}: status=ok id={i:07d}" for i in range(40_000))
    facts = fact_lines(body + "\norder_id = QX-4821")
    assert "order_id = QX-4821" in facts  # the tail is read
    assert sum(map(len, scored)) <= 2 * _facts._EDGE_CHARS + _facts._WINDOWS * 500
    assert len(scored) > 100
    # A normal-size text is read whole: a fact in its middle is found.
    scored.clear()
    small = "\n".join(["noise"] * 500 + ["ticket QX-77 opened"] + ["noise"] * 500)
    assert fact_lines(small) == ["ticket QX-77 opened"]


# --------------------------------------------------------------------------- running count


def _history(n: int) -> list[BaseMessage]:
    out: list[BaseMessage] = [HumanMessage("the task", id="h0")]
    for i in range(1, n):
        if i % 2:
            call = {"name": "run", "args": {"i": i}, "id": f"c{i}"}
            out.append(AIMessage(f"step {i}", tool_calls=[call], id=f"a{i}"))
        else:
            out.append(ToolMessage(f"result {i} " * (i % 7), tool_call_id=f"c{i - 1}", id=f"t{i}"))
    return out


def test_a_growing_history_without_usage_is_counted_once_per_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counted: list[BaseMessage] = []
    real = tokens._approx_message

    def spy(message: BaseMessage) -> int:
        counted.append(message)
        return real(message)

    monkeypatch.setattr(tokens, "_approx_message", spy)
    memo = FactsMemo()  # the thread's, as a compactor keeps it
    full = _history(400)
    for n in range(100, 401, 30):
        history = full[:n]
        assert tokens.context_tokens(history, memo=memo) == approximate_tokens(history)
        assert tokens.context_tokens(list(history), memo=memo) == approximate_tokens(history)
    assert len(counted) == 400  # each message once, though every prefix was counted twice
    # An edited copy is counted again, and right.
    edited = full[:370]
    edited[5] = HumanMessage("a much longer replacement message " * 20, id="h5")
    assert tokens.context_tokens(edited, memo=memo) == approximate_tokens(edited)
    counter = tokens.TiktokenCounter(encoding="o200k_base")
    assert tokens.context_tokens(edited, counter=counter, memo=memo) == counter(edited)
    assert tokens.context_tokens(edited + full[370:], counter=counter, memo=memo) == counter(
        edited + full[370:]
    )


def test_the_check_of_a_usage_report_counts_each_message_it_describes_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where a report may describe another list (an LCEL chain: ``verify_anchor``), every
    call checks the newest report against the local count of what it describes. On a
    growing history that count is remembered with the history's facts: each message is
    counted once, not once per call (7 of a call's 16 ms at 5,000 messages before)."""
    counted: list[BaseMessage] = []
    real = tokens._cached_count

    def spy(message: BaseMessage, *args: Any) -> int:
        counted.append(message)
        return real(message, *args)

    memo = FactsMemo()  # the thread's, as a compactor keeps it
    full: list[BaseMessage] = []
    for m in _history(400):  # every reply reports the input it was called with
        if isinstance(m, AIMessage):
            tokens_in = approximate_tokens(full)
            usage = {"input_tokens": tokens_in, "output_tokens": 5, "total_tokens": tokens_in + 5}
            m = m.model_copy(update={"usage_metadata": usage})
        full.append(m)
    seen = 0
    monkeypatch.setattr(tokens, "_cached_count", spy)
    for n in range(100, 401, 30):
        history = list(full[:n])
        facts = history_facts(history, memo)
        assert facts is not None and facts.anchor is not None
        i = facts.anchor[0]
        before = len(counted)
        pair = tokens._reported_and_local(history, approximate_tokens, None, facts=facts)
        assert len(counted) - before <= i - seen  # only what the last call had not summed
        assert pair is not None
        assert pair[1] == approximate_tokens(history[:i]) + facts.anchor[2]
        seen = i
    # An edited prefix is counted again, and right.
    edited = list(full[:370])
    edited[5] = HumanMessage("a much longer replacement message " * 20, id="h5")
    facts = history_facts(edited, memo)
    assert facts is not None and facts.anchor is not None
    pair = tokens._reported_and_local(edited, approximate_tokens, None, facts=facts)
    assert pair is not None
    assert pair[1] == approximate_tokens(edited[: facts.anchor[0]]) + facts.anchor[2]


def test_unread_large_results_are_counted_ahead_off_the_calling_thread() -> None:
    precise = tokens.precise_counter()
    if precise is None:
        pytest.skip("tiktoken's o200k files are not available here")
    big = "\n".join(f"line {i}: value={i * 7919}" for i in range(1_200))
    assert len(big) >= tokens.PRECOUNT_MIN_CHARS
    # a result of a few thousand characters is counted on the turn's thread when needed:
    # handing it to the thread cost more CPU than counting it there (PRECOUNT_MIN_CHARS)
    small = "\n".join(f"line {i}: value={i * 31}" for i in range(300))
    assert 4_000 <= len(small) < tokens.PRECOUNT_MIN_CHARS
    read = "\n".join(f"read {i}" for i in range(900))
    history: list[BaseMessage] = [
        HumanMessage("task"),
        AIMessage("", tool_calls=[{"name": "run", "args": {}, "id": "c0"}]),
        ToolMessage(read, tool_call_id="c0"),
        AIMessage(
            "",
            tool_calls=[
                {"name": "run", "args": {}, "id": "c1"},
                {"name": "run", "args": {}, "id": "c2"},
            ],
        ),
        ToolMessage(big, tool_call_id="c1"),
        ToolMessage(small, tool_call_id="c2"),
    ]
    tokens.precount_unread(history)
    assert tokens._precount_queue is not None
    tokens._precount_queue.join()
    assert tokens._text_key(big) in precise._cache
    assert tokens._text_key(small) not in precise._cache  # too small to be worth a thread
    assert tokens._text_key(read) not in precise._cache  # read already: not re-counted
    assert precise.count_text(big) == len(precise._encoder.encode(big, disallowed_special=()))
