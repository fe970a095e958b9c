"""The placeholder format: every text the package writes into a history parses back.

The templates are pinned verbatim: tests, notebooks and transcripts exported earlier compare
or parse these exact texts, so changing one must be a deliberate change of this file.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_compact import _placeholders as ph
from langchain_compact.archive import JsonlArchive
from langchain_compact.compaction import compact_history
from langchain_compact.config import CompactionConfig
from langchain_compact.digest import structured_digest
from langchain_compact.markers import get_meta
from langchain_compact.microcompact import clear_tool_results, truncate_large_tool_results

PINNED = {
    "DEFAULT_PLACEHOLDER": (
        "[tool result cleared to save context: {name} returned {chars} characters. The full "
        'text is archived: call recall_archived(tool_call_id="{tool_call_id}") to read it again.]'
    ),
    "UNARCHIVED_PLACEHOLDER": (
        "[tool result cleared to save context: {name} returned {chars} characters. It was "
        "not archived; call the tool again if you need it.]"
    ),
    "FACTS_MARK": "\nfacts kept: ",
    "DEFAULT_TRUNCATION_NOTICE": (
        "\n[... {omitted} characters omitted from this {name} result ({chars} in all). The "
        'full text is archived: call recall_archived(tool_call_id="{tool_call_id}") to read '
        "it.]\n"
    ),
    "UNARCHIVED_NOTICE": (
        "\n[... {omitted} characters omitted from this {name} result ({chars} in all); "
        "they were not archived ({tool_call_id}).]\n"
    ),
    "HUMAN_TRUNCATION_NOTICE": (
        "\n[... {omitted} characters omitted from this {name} ({chars} in all). The full "
        "text is archived: call recall_archived(query=<a few words from it>) to read it.]\n"
    ),
    "TASK_TRUNCATION_NOTICE": (
        "\n[The original task is {chars} characters; {omitted} were left out here to fit the "
        "context window. The full text is archived: call recall_archived(query=<a few words "
        "from it>) to read it.]\n"
    ),
    "UNARCHIVED_TASK_NOTICE": (
        "\n[The original task is {chars} characters; {omitted} were left out here to fit the "
        "context window (not archived).]\n"
    ),
    "SUMMARY_HEADER": (
        "[Summary #{index} of the earlier conversation: {count} messages were compacted"
        "{archived}. It replaces them; the original task is pinned above. Continue the task "
        "from here.]\n\n"
    ),
    "SUMMARY_ARCHIVED": ", archived as {archive_ref} (recall_archived returns the originals)",
    "MERGED_SUMMARY_HEADER": "[Merged summary of compactions 1-{last}.]\n\n",
    "OMITTED_LINES": "[... {lines} lines omitted ...]",
    "OMITTED_LINES_KEY": "[... {lines} lines omitted; {key_lines} key lines of them:",
    "OMITTED_LINES_END": "[... end of the omitted lines]",
    "ARGUMENT_STUB": (
        "[argument archived to save context: {chars:,} characters. Call "
        "recall_archived({where}) to read the call as it was made.]"
    ),
    "ASSISTANT_TEXT_NOTICE": (
        "[... {omitted:,} of {chars:,} characters of this earlier assistant turn omitted to "
        "save context. The full text is archived: call recall_archived({where}) to read it.]"
    ),
}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_the_templates_are_pinned(name: str) -> None:
    assert getattr(ph, name) == PINNED[name]


def test_every_template_constant_is_pinned() -> None:
    constants = {n for n in ph.__all__ if n.isupper()}
    assert constants == set(PINNED)


# Tool names and ids as providers make them: no newlines, quotes or parentheses.
NAMES = st.text("abcdefghijklmnopqrstuvwxyzABCZ0123456789_-. :/", min_size=1, max_size=40).filter(
    lambda s: s.strip() == s and s
)
IDS = st.text("abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=40)
SIZES = st.integers(min_value=0, max_value=10**9)
FACTS = st.lists(
    st.text("abcdefgh =:0123456789/.", min_size=1, max_size=30).filter(
        lambda s: s.strip() == s and "  " not in s
    ),
    max_size=4,
)


@given(name=NAMES, chars=SIZES, call_id=IDS, archived=st.booleans(), facts=FACTS)
def test_a_placeholder_parses_back_to_its_fields(
    name: str, chars: int, call_id: str, archived: bool, facts: list[str]
) -> None:
    text = ph.append_facts(
        ph.cleared_text(name=name, chars=chars, tool_call_id=call_id, archived=archived), facts
    )
    assert ph.parse_cleared(text) == ph.Cleared(
        name=name,
        chars=chars,
        tool_call_id=call_id if archived else None,
        archived=archived,
        facts=tuple(facts),
    )
    assert ph.kept_facts(text) == facts
    assert ph.parse_cut_notice(text) is None and ph.parse_summary_header(text) is None


@given(
    name=NAMES,
    chars=SIZES,
    omitted=SIZES,
    ref=IDS,
    kind=st.sampled_from(["result", "message"]),
    archived=st.booleans(),
    body=st.sampled_from(["", "head\nline", "[... not a notice]\n"]),
)
def test_a_cut_notice_parses_back_wherever_it_stands(
    name: str, chars: int, omitted: int, ref: str, kind: str, archived: bool, body: str
) -> None:
    note = ph.cut_notice(
        kind=kind,  # type: ignore[arg-type]
        name=name,
        chars=chars,
        omitted=omitted,
        ref=ref,
        archived=archived,
    )
    # Unarchived, both kinds share one notice, which names a "result".
    expected = ph.CutNotice(
        kind="result" if kind == "result" or not archived else "message",
        name=name,
        chars=chars,
        omitted=omitted,
        ref=None if kind == "message" and archived else ref,
        archived=archived,
    )
    # First, as the package writes it; after a body (older versions); in the middle.
    for text in (note.lstrip("\n") + body, body + note, body + note + "tail"):
        assert ph.parse_cut_notice(text) == expected


@given(chars=SIZES, omitted=SIZES, archived=st.booleans())
def test_a_task_notice_parses_back(chars: int, omitted: int, archived: bool) -> None:
    text = "the task, head and tail" + ph.task_notice(
        chars=chars, omitted=omitted, archived=archived
    )
    assert ph.parse_cut_notice(text) == ph.CutNotice(
        kind="task", name="", chars=chars, omitted=omitted, ref=None, archived=archived
    )


@given(
    index=st.integers(min_value=1, max_value=10**6),
    count=SIZES,
    ref=st.one_of(st.none(), st.text("abc/_-.0123456789", min_size=1, max_size=60)),
)
def test_a_summary_header_parses_back(index: int, count: int, ref: str | None) -> None:
    text = ph.summary_header(index=index, count=count, archive_ref=ref) + "- the summary"
    assert ph.parse_summary_header(text) == ph.SummaryHeader(
        index=index, count=count, archive_ref=ref, merged=False
    )
    merged = ph.merged_summary_header(last=index) + "- merged"
    assert ph.parse_summary_header(merged) == ph.SummaryHeader(
        index=index, count=None, archive_ref=None, merged=True
    )
    assert ph.is_summary_text(text) and ph.is_summary_text(merged)
    assert not ph.is_summary_text("- the summary\n" + text)  # only at the start


@given(
    what=st.sampled_from(["a log: 4,009 lines", 'a JSON object: 600 records under "items"']),
    chars=SIZES,
    note=st.sampled_from(["", "2 base64 blobs replaced", "JSON Lines; 1 not JSON"]),
)
def test_a_digest_header_parses_back(what: str, chars: int, note: str) -> None:
    text = ph.digest_header(what, chars, note) + "\nbody line"
    assert ph.parse_digest_header(text) == ph.DigestHeader(what=what, chars=chars, note=note)


@given(lines=SIZES, key_lines=st.integers(min_value=0, max_value=10**6))
def test_an_omitted_lines_line_parses_back(lines: int, key_lines: int) -> None:
    assert ph.parse_omitted_lines(ph.omitted_lines(lines, key_lines)) == (lines, key_lines)


def test_a_changed_template_is_not_read() -> None:
    """The parsers read exactly the pinned texts: a reworded one is not recognised."""
    fields = {"name": "ls", "chars": 9, "tokens": 3, "tool_call_id": "c1"}
    text = ph.cleared_text(**fields)  # type: ignore[arg-type]
    assert ph.parse_cleared(text) is not None
    assert ph.parse_cleared(text.replace("archived", "stored")) is None
    assert ph.parse_cleared(text + " trailing words") is None
    notice = ph.cut_notice(name="ls", chars=9, omitted=3, ref="c1")
    assert ph.parse_cut_notice(notice.replace("omitted", "dropped")) is None
    header = ph.summary_header(index=2, count=5)
    assert ph.parse_summary_header(header.replace("#2", "2")) is None


# --------------------------------------------------------------------------- the real writers


def _round(i: int, text: str, name: str = "run") -> list[AIMessage | ToolMessage]:
    call = {"name": name, "args": {"n": i}, "id": f"c{i}"}
    return [
        AIMessage("", tool_calls=[call], id=f"a{i}"),
        ToolMessage(text, tool_call_id=f"c{i}", name=name, id=f"t{i}"),
    ]


@pytest.mark.parametrize("archived", [True, False])
def test_what_clearing_writes_parses_back_to_the_message(archived: bool) -> None:
    text = "noise line\n" * 80 + "RESULT step=3 value=42"
    msgs = [m for i in range(4) for m in _round(i, text, name="build")]
    out = clear_tool_results(msgs, keep=1, archived=archived)
    cleared = [m for m in out if get_meta(m).get("kind") == "cleared"]
    assert cleared
    for msg in cleared:
        assert isinstance(msg, ToolMessage)
        parsed = ph.parse_cleared(str(msg.content))
        assert parsed is not None
        assert parsed.name == "build" and parsed.chars == len(text)
        assert parsed.tool_call_id == (msg.tool_call_id if archived else None)
        assert "RESULT step=3 value=42" in parsed.facts


def test_a_placeholder_states_the_originals_size_in_one_unit() -> None:
    """Issue 20: a result cut to a digest, then cleared, once read "returned 2962 characters
    (~156 tokens)": the original's characters beside the digest's tokens. The placeholder
    now states the original's characters only; an exported old one still parses."""
    text = "\n".join(f"line {n}: all good, value={n * 7}" for n in range(400))
    msgs = [m for i in range(4) for m in _round(i, text, name="log")]
    cut = truncate_large_tool_results(msgs, max_chars=5_000)
    assert get_meta(cut[1]).get("original_chars") == len(text)
    out = clear_tool_results(cut, keep=1)
    cleared = [m for m in out if get_meta(m).get("kind") == "cleared"]
    assert cleared
    for msg in cleared:
        head = str(msg.content).partition(ph.FACTS_MARK)[0]
        assert f"returned {len(text)} characters." in head
        assert "token" not in head
        parsed = ph.parse_cleared(str(msg.content))
        assert parsed is not None and parsed.chars == len(text)
    old = (
        "[tool result cleared to save context: ls returned 2962 characters (~156 tokens). "
        'The full text is archived: call recall_archived(tool_call_id="c1") to read it again.]'
    )
    assert ph.parse_cleared(old) == ph.Cleared("ls", 2962, "c1", True, ())


def test_what_truncation_writes_parses_back_to_the_message() -> None:
    text = "\n".join(f"line {n}: all good" for n in range(2_000))
    out = truncate_large_tool_results(_round(0, text, name="log"), max_chars=5_000)
    parsed = ph.parse_cut_notice(str(out[1].content))
    assert parsed == ph.CutNotice(
        kind="result",
        name="log",
        chars=len(text),
        omitted=parsed.omitted if parsed else -1,
        ref="c0",
        archived=True,
    )
    assert parsed is not None and 0 < parsed.omitted < len(text)


def test_a_digest_header_says_what_the_digest_says() -> None:
    text = "\n".join(f"2024-01-01 INFO step {n} ok" for n in range(3_000))
    digest = structured_digest(text, max_chars=1_500)
    parsed = ph.parse_digest_header(digest)
    assert parsed is not None and parsed.chars == len(text) and "log" in parsed.what


def test_a_text_digest_says_how_many_lines_it_left_out() -> None:
    text = "\n".join(f"the quick brown fox jumps over lazy dog number {n}" for n in range(3_000))
    digest = structured_digest(text, max_chars=1_500)
    header = ph.parse_digest_header(digest)
    assert header is not None and header.what.startswith("text:")
    gaps = [g for line in digest.splitlines() if (g := ph.parse_omitted_lines(line))]
    assert len(gaps) == 1 and 2_000 < gaps[0][0] < 3_000


def test_a_summary_header_matches_the_summary_markers(tmp_path: Path) -> None:
    msgs = [SystemMessage("You run steps."), HumanMessage("Task: run 30 steps.")]
    for i in range(30):
        msgs += _round(i, f"step {i} value={i * 7}\n" + "detail line\n" * 60)
    config = CompactionConfig(context_window=4_000, keep_last_n=2)
    result = compact_history(msgs, config=config, archive=JsonlArchive(tmp_path), thread_id="t")
    assert result.summary is not None and result.archive_ref is not None
    parsed = ph.parse_summary_header(result.summary.text)
    meta = get_meta(result.summary)
    assert parsed == ph.SummaryHeader(
        index=meta["index"],
        count=len(result.compacted),
        archive_ref=result.archive_ref,
        merged=False,
    )
