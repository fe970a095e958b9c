"""The ``langchain-compact`` command: demo, inspect, compact, and every error path."""

from __future__ import annotations

import io
import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _data import TRAJECTORY_DIR
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)

from langchain_compact.archive import JsonlArchive
from langchain_compact.cli import main
from langchain_compact.cli.transcripts import TranscriptError, dump_transcript, load_transcript
from langchain_compact.demo import ContextReadingPolicy
from langchain_compact.history import validate_history
from langchain_compact.markers import KIND_SUMMARY, kind_of

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
OPENAI_KEYS = {"role", "content", "tool_calls", "tool_call_id"}
# An OpenHands run with native tool calls (49 tool results, ~22k tokens).
TOOL_TRAJECTORY = TRAJECTORY_DIR / "openhands__ponyc-4588__llama-4-maverick.jsonl"


@pytest.fixture
def trajectory() -> Path:
    if not TOOL_TRAJECTORY.exists():  # pragma: no cover - shared/ is beside every checkout
        pytest.fail(f"{TOOL_TRAJECTORY} is missing; set LC_TRAJECTORY_DIR")
    return TOOL_TRAJECTORY


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str, *needles: str) -> None:
    assert code == 2
    lines = err.strip().splitlines()
    assert lines[-1].startswith("langchain-compact: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[-1], lines[-1]


# --------------------------------------------------------------------------- demo


def test_demo_default_finishes_with_compactions_table_and_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "demo", "--out", tmp_path)
    assert code == 0
    assert "VERDICT: task finished: all 50 step values are correct" in out
    progress = [line for line in out.splitlines() if re.match(r"turn +\d+ ", line)]
    assert len(progress) >= 51
    assert "compaction #1:" in out and "micro: " in out
    assert "tool call: run_step step 1" in progress[0]
    assert "stop: final report" in progress[-1]
    png = tmp_path / "context-compact.png"
    assert png.read_bytes().startswith(PNG_MAGIC)
    assert (tmp_path / "checkpoints.sqlite").stat().st_size > 0
    assert list((tmp_path / "archive").rglob("transcript_*.jsonl"))


def _unwrapped(out: str, prefix: str) -> str:
    """The printed line starting with ``prefix``, with its indented continuation lines."""
    match = re.search(rf"^{prefix}.*(?:\n  \S.*)*", out, re.M)
    assert match, out
    return " ".join(part.strip() for part in match.group(0).splitlines())


def _turn_numbers(out: str) -> list[int]:
    return [int(m.group(1)) for m in re.finditer(r"^turn +(\d+) ", out, re.M)]


def _table_turns(out: str) -> list[int]:
    return [int(m.group(1)) for m in re.finditer(r"^ *(\d+) +[\d,]+  [#.|!]+  ", out, re.M)]


def test_demo_shows_each_turn_once_within_100_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 20: every turn was printed twice (live lines and a table), lines up to 234 chars."""
    code, out, _ = run(capsys, "demo", "--steps", "30", "--out", tmp_path)
    assert code == 0
    widest = max(out.splitlines(), key=len)
    assert len(widest) <= 100, widest
    turns = _turn_numbers(out)
    assert turns == list(range(1, len(turns) + 1)) and len(turns) >= 31
    assert _table_turns(out) == []  # no second view of the same turns
    assert "compaction #1:" in out
    code, out, _ = run(capsys, "demo", "--steps", "30", "--out", tmp_path, "--view", "table")
    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= 100
    assert _turn_numbers(out) == [] and _table_turns(out) == turns
    assert "before the call (cleared / summarised)" in out and "compaction #1:" in out


def test_each_strategy_writes_its_own_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 20: `--strategy truncate` used to overwrite the compact run's context.png."""
    assert run(capsys, "demo", "--steps", "8", "--out", tmp_path)[0] == 0
    compact_png = tmp_path / "context-compact.png"
    first = compact_png.read_bytes()
    code, out, _ = run(capsys, "demo", "--steps", "8", "--strategy", "truncate", "--out", tmp_path)
    assert code == 1
    assert f"plot: {tmp_path / 'context-truncate.png'}" in out
    assert (tmp_path / "context-truncate.png").read_bytes().startswith(PNG_MAGIC)
    assert compact_png.read_bytes() == first


def test_demo_longer_task_survives_summary_merges(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "demo", "--steps", "60", "--out", tmp_path)
    assert code == 0, out.splitlines()[-1]
    assert "earlier summaries merged" in out


def test_demo_truncate_fails_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "demo", "--strategy", "truncate", "--out", tmp_path)
    assert code == 1
    verdict = _unwrapped(out, "VERDICT")
    assert "task NOT finished" in verdict
    assert "the original task is no longer in my context" in verdict
    assert "why: plain truncation" in out
    assert "0 compactions" in verdict
    assert (tmp_path / "context-truncate.png").read_bytes().startswith(PNG_MAGIC)


def test_demo_without_matplotlib_or_sqlite_still_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "langgraph.checkpoint.sqlite", None)
    code, out, _ = run(capsys, "demo", "--steps", "3", "--out", tmp_path)
    assert code == 0
    assert "plot: skipped, matplotlib is not installed" in out
    assert "pip install 'langchain-compact[demo]'" in out
    assert "checkpoints: in memory (langgraph-checkpoint-sqlite is not installed" in out
    assert "context-compact.png" in out
    assert not list(tmp_path.glob("*.png"))


def test_demo_with_a_model_uses_it_and_an_llm_summarizer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, str | None]] = []

    def fake_load(spec: str, *, base_url: str | None = None) -> ContextReadingPolicy:
        seen.append((spec, base_url))
        return ContextReadingPolicy()

    monkeypatch.setattr("langchain_compact.cli._demo.load_chat_model", fake_load)
    code, out, _ = run(
        capsys, "demo", "--model", "m1", "--base-url", "http://127.0.0.1:9/v1", "--out", tmp_path
    )
    assert seen == [("m1", "http://127.0.0.1:9/v1")]
    assert "model: m1 at http://127.0.0.1:9/v1" in out
    assert "summaries: LLMSummarizer(model)" in out
    assert "VERDICT" in out and code in (0, 1)


def test_python_dash_m_entry_point(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "langchain_compact", "demo", "--steps", "6", "--out", tmp_path],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "VERDICT: task finished: all 6 step values are correct" in proc.stdout
    assert (tmp_path / "context-compact.png").read_bytes().startswith(PNG_MAGIC)


# --------------------------------------------------------------------------- inspect


def test_inspect_json_numbers_add_up(trajectory: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "inspect", trajectory, "--json", "--window", "16000")
    assert code == 0
    report = json.loads(out)
    total = report["total_tokens"]
    assert report["format"] == "openai" and report["messages"] == 101
    assert "tiktoken" in report["counter"]
    assert sum(r["tokens"] for r in report["by_role"].values()) == total
    assert sum(r["messages"] for r in report["by_role"].values()) == report["messages"]
    assert (
        sum(t["tokens"] for t in report["by_tool"].values()) == report["by_role"]["tool"]["tokens"]
    )
    assert sum(t["results"] for t in report["by_tool"].values()) == 49
    assert set(report["by_tool"]) >= {"str_replace_editor", "execute_bash"}
    assert report["largest"][0]["tokens"] == max(r["tokens"] for r in report["largest"])
    micro, comp = report["micro"], report["compaction"]
    assert micro["tokens_before"] == total and micro["tokens_after"] < total
    assert micro["cleared"] > 0
    assert comp["tokens_before"] == micro["tokens_after"]
    assert comp["tokens_after"] < comp["tokens_before"] and comp["summarised"] > 0
    assert report["trigger"] == 12_000


def test_inspect_text_report(trajectory: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "inspect", trajectory, "--top", "3")
    assert code == 0
    assert "by role" in out and "tool results by tool" in out and "largest messages" in out
    assert "str_replace_editor" in out
    assert "counted with tiktoken" in out
    assert "micro-compaction:" in out and "full compaction would not run yet" in out


def test_inspect_langchain_dicts_as_a_json_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    messages = load_transcript(TOOL_TRAJECTORY)[:20]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(messages_to_dict(messages)))
    code, out, _ = run(capsys, "inspect", path, "--json")
    assert code == 0
    report = json.loads(out)
    assert report["format"] == "langchain" and report["messages"] == 20
    assert report["largest"][0]["where"].startswith("item ")


# --------------------------------------------------------------------------- compact


def _archived(archive_dir: Path, thread: str) -> list[BaseMessage]:
    archive = JsonlArchive(archive_dir)
    refs = archive.refs(thread_id=thread)
    return [m for ref in refs for m in archive.read(ref, thread_id=thread)]


def test_compact_openai_roundtrip_and_archive(
    trajectory: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file, archive_dir = tmp_path / "out.jsonl", tmp_path / "mem"
    code, out, _ = run(
        capsys, "compact", trajectory, "-o", out_file, "--archive", archive_dir, "--window", "16000"
    )
    assert code == 0
    assert "tokens: " in out and "archive: " in out and "transcript_" in out
    for line in out_file.read_text().splitlines():
        assert set(json.loads(line)) <= OPENAI_KEYS
    compacted = load_transcript(out_file)
    validate_history(compacted)
    assert len(compacted) < 20
    assert compacted[0].type == "system" and kind_of(compacted[2]) == KIND_SUMMARY
    original = load_transcript(trajectory)
    kept = {m.text for m in compacted}
    archived = {m.text for m in _archived(archive_dir, trajectory.stem)}
    lost = [m for m in original if m.text not in kept and m.text not in archived]
    assert not lost, f"{len(lost)} messages are neither kept nor archived"


def test_compact_twice_keeps_the_first_summary(
    trajectory: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = tmp_path / "1.jsonl", tmp_path / "2.jsonl"
    common = ["--archive", tmp_path / "mem", "--window", "16000", "--keep-last", "2"]
    assert run(capsys, "compact", trajectory, "-o", first, *common)[0] == 0
    summary = load_transcript(first)[2]
    assert summary.text.startswith("[Summary #1")
    # Extend the compacted history with one more turn, then compact again.
    extended = [
        *load_transcript(first),
        AIMessage("", tool_calls=[{"name": "execute_bash", "args": {"cmd": "ls"}, "id": "x1"}]),
        ToolMessage("file\n" * 200, tool_call_id="x1"),
        *[AIMessage(f"note {k}: " + "the build log shows nothing new. " * 80) for k in range(4)],
        AIMessage("done"),
    ]
    dump_transcript(extended, tmp_path / "ext.jsonl", "openai")
    assert run(capsys, "compact", tmp_path / "ext.jsonl", "-o", second, *common)[0] == 0
    texts = [m.text for m in load_transcript(second)]
    assert summary.text in texts  # earlier summaries stay verbatim
    assert any(t.startswith("[Summary #2") for t in texts)


def test_compact_langchain_dicts_in_dicts_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    messages = load_transcript(TOOL_TRAJECTORY)
    source = tmp_path / "lc.jsonl"
    source.write_text("".join(json.dumps(d) + "\n" for d in messages_to_dict(messages)))
    out_file = tmp_path / "out.jsonl"
    code, out, _ = run(
        capsys, "compact", source, "-o", out_file, "--archive", tmp_path / "a", "--thread-id", "t"
    )
    assert "langchain format" in out
    assert code == 0
    dicts = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert all(set(d) == {"type", "data"} for d in dicts)
    back = messages_from_dict(dicts)
    validate_history(back)
    assert any(kind_of(m) == KIND_SUMMARY for m in back)  # metadata survives this format
    assert _archived(tmp_path / "a", "t")


# --------------------------------------------------------------------------- errors


def write_lines(path: Path, *lines: Any) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


USER = {"role": "user", "content": "hi"}


@pytest.mark.parametrize("command", ["inspect", "compact"])
def test_missing_file(command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [command, tmp_path / "nope.jsonl"] + (
        ["-o", tmp_path / "o"] if command == "compact" else []
    )
    code, _, err = run(capsys, *argv)
    assert_one_line_error(code, err, "nope.jsonl: no such file")


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ('{"role": "assistant", "content": "x"', ":2: not valid JSON"),
        ("[1, 2]", ":2: expected a JSON object"),
        ({"role": "wizard", "content": "x"}, ":2: invalid openai message: unknown role 'wizard'"),
        ({"foo": 1}, ":2: not a message"),
        ({"type": "human", "data": {"content": "x"}}, ":2: a langchain message in a file"),
        (
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{bad"}}],
            },
            ":2: invalid openai message: tool_calls[0] (f) has arguments that are not valid JSON",
        ),
        ({"role": "tool", "content": "x"}, ":2: invalid openai message: a tool message needs"),
    ],
)
def test_malformed_line_names_its_line(
    line: Any, needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_lines(tmp_path / "bad.jsonl", USER, line)
    code, _, err = run(capsys, "inspect", path)
    assert_one_line_error(code, err, needle)


def test_empty_and_bad_json_list(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="is empty"):
        load_transcript(write_lines(tmp_path / "e.jsonl", ""))
    with pytest.raises(TranscriptError, match="empty JSON list"):
        load_transcript(write_lines(tmp_path / "e.json", "[]"))
    bad = tmp_path / "b.json"
    bad.write_text('[{"type": "human", "data": {"content": "x"}},\n {"type": "human", "data": 1}]')
    with pytest.raises(TranscriptError, match="item 2: invalid langchain message") as info:
        load_transcript(bad)
    assert info.value.line == 2


def test_invalid_history_offers_repair(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    orphan = {"role": "tool", "content": "r" * 300, "tool_call_id": "zz"}
    path = write_lines(tmp_path / "t.jsonl", USER, orphan, {"role": "assistant", "content": "ok"})
    code, _, err = run(capsys, "inspect", path)
    assert_one_line_error(code, err, "line 2:", "orphan result", "--repair")
    code, out, err = run(capsys, "inspect", path, "--repair", "--json")
    assert code == 0 and "--repair changed" in err and "line 2: dropped" in err
    assert json.loads(out)["messages"] == 2
    out_file = tmp_path / "o.jsonl"
    code, _, _ = run(capsys, "compact", path, "-o", out_file, "--repair", "--archive", tmp_path)
    assert code == 0
    validate_history(load_transcript(out_file))


def test_unknown_model_and_missing_provider_package(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_lines(tmp_path / "t.jsonl", USER)
    compact = ["compact", path, "-o", tmp_path / "o.jsonl", "--archive", tmp_path / "a"]
    code, _, err = run(capsys, *compact, "--model", "nosuch:thing")
    assert_one_line_error(code, err, "unknown model 'nosuch:thing'", "PROVIDER:NAME")
    code, _, err = run(capsys, "demo", "--model", "nosuchmodel", "--out", tmp_path / "d")
    assert_one_line_error(code, err, "unknown model 'nosuchmodel'")
    monkeypatch.setitem(sys.modules, "langchain_mistralai", None)
    code, _, err = run(capsys, *compact, "--model", "mistralai:mistral-small")
    assert_one_line_error(code, err, "provider package is missing", "langchain-mistralai")
    assert not (tmp_path / "o.jsonl").exists()


def test_base_url_needs_a_model_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "demo", "--base-url", "http://127.0.0.1:9/v1", "--out", tmp_path)
    assert_one_line_error(code, err, "--base-url needs --model")


def test_base_url_builds_an_openai_compatible_client(monkeypatch: pytest.MonkeyPatch) -> None:
    from langchain_openai import ChatOpenAI

    from langchain_compact.cli._common import load_chat_model

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = load_chat_model("gemma3-270m", base_url="http://127.0.0.1:9/v1")
    assert isinstance(model, ChatOpenAI)
    assert model.model_name == "gemma3-270m"
    assert model.openai_api_base == "http://127.0.0.1:9/v1"
    assert model.openai_api_key is not None
    assert model.openai_api_key.get_secret_value() == "not-needed"


def test_transcript_roundtrip_keeps_tool_names_out_of_openai_format(tmp_path: Path) -> None:
    messages = [
        HumanMessage("go"),
        AIMessage("", tool_calls=[{"name": "ls", "args": {"p": "."}, "id": "c1"}]),
        ToolMessage("a.txt", tool_call_id="c1"),
    ]
    path = dump_transcript(messages, tmp_path / "t.jsonl", "openai")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert rows[2] == {"role": "tool", "tool_call_id": "c1", "content": "a.txt"}
    back = load_transcript(path)
    assert isinstance(back[2], ToolMessage) and back[2].name == "ls"  # from its call
    assert [m.id for m in back] == ["line-1", "line-2", "line-3"]


def test_inspect_accepts_a_run_that_ends_mid_call(capsys: pytest.CaptureFixture[str]) -> None:
    """OpenHands ends with an unanswered `finish` call: pending, not broken."""
    path = TRAJECTORY_DIR / "openhands__ponyc-4595__llama-4-maverick.jsonl"
    last = json.loads(path.read_text().splitlines()[-1])
    assert last["role"] == "assistant" and last["tool_calls"]  # precondition
    code, out, err = run(capsys, "inspect", path, "--window", "8000", "--json")
    assert code == 0, err
    assert json.loads(out)["messages"] == len(path.read_text().splitlines())


# --------------------------------------------------------------------------- issue 12


def _refs(archive_dir: Path, thread: str) -> list[str]:
    return JsonlArchive(archive_dir).refs(thread_id=thread)


def _long_run(path: Path, *, extra: Any = ()) -> Path:
    """A tool-calling run long enough that compaction shrinks it."""
    lines: list[Any] = [{"role": "user", "content": "Task: fix the build (code ZX-41)."}]
    for k in range(8):
        call = {"id": f"c{k}", "type": "function"}
        call["function"] = {"name": "sh", "arguments": json.dumps({"cmd": f"make {k}"})}
        lines.append({"role": "assistant", "content": f"step {k}", "tool_calls": [call]})
        lines.append({"role": "tool", "tool_call_id": f"c{k}", "content": f"log {k} " * 400})
    return write_lines(path, *lines, *extra)


def test_compact_onto_its_own_input_with_a_lone_surrogate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 1: the output used to be a 0-byte file after a UnicodeEncodeError."""
    path = _long_run(tmp_path / "run.jsonl", extra=[{"role": "assistant", "content": "ok \ud800"}])
    assert "\\ud800" in path.read_text()  # written as a JSON escape, as a real tool would
    code, out, err = run(capsys, "compact", path, "-o", path, "--archive", tmp_path / "a")
    assert code == 0, err
    assert "lone surrogates" in err and "line 18" in err
    back = load_transcript(path)
    validate_history(back)
    assert back[-1].content == "ok \ud800"  # read back identically
    assert len(back) < 18 and "wrote" in out


def _fail_writes_under(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk under ``folder``: fsync of any file there fails with ENOSPC."""
    import errno
    import os

    real = os.fsync

    def fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(folder)):
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


def test_a_failed_write_leaves_the_input_intact_and_names_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Items 1 and 19: a full disk used to leave a truncated file, and say "(None)"."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    path = _long_run(data_dir / "run.jsonl")
    original = path.read_bytes()
    _fail_writes_under(data_dir, monkeypatch)
    code, _, err = run(capsys, "compact", path, "-o", path, "--archive", tmp_path / "a")
    assert_one_line_error(code, err, f"{path}: cannot write the output", "left as it was")
    assert "None" not in err
    assert path.read_bytes() == original
    assert [p.name for p in data_dir.iterdir()] == ["run.jsonl"]  # no temp file left


def test_a_full_archive_disk_names_the_folder_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _long_run(tmp_path / "run.jsonl")
    out_file = tmp_path / "out.jsonl"
    _fail_writes_under(tmp_path / "a", monkeypatch)
    code, _, err = run(capsys, "compact", path, "-o", out_file, "--archive", tmp_path / "a")
    assert_one_line_error(code, err, str(tmp_path / "a"), "No space left on device")
    assert "(None)" not in err
    assert not out_file.exists()
    assert _refs(tmp_path / "a", "run") == []


def test_a_failure_mid_compaction_leaves_no_archive_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 3: a failing compact used to leave archive records behind."""
    from langchain_compact.cli import _compact as cli_compact

    real = cli_compact.compact_history

    def fails_after_archiving(*args: Any, **kwargs: Any) -> Any:
        real(*args, **kwargs)
        raise RuntimeError("the summarizer went away")

    monkeypatch.setattr(cli_compact, "compact_history", fails_after_archiving)
    path = _long_run(tmp_path / "run.jsonl")
    code, _, err = run(capsys, "compact", path, "-o", tmp_path / "o.jsonl", "--archive", tmp_path)
    assert_one_line_error(code, err, "the summarizer went away")
    assert _refs(tmp_path, "run") == []
    assert [p.name for p in tmp_path.iterdir()] == ["run.jsonl"]  # no staging folder left


def test_compact_keeps_a_pending_call_at_the_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 3: a run that ends mid-call used to exit 2 after writing two archive records."""
    path = TRAJECTORY_DIR / "openhands__ponyc-4595__llama-4-maverick.jsonl"
    original = load_transcript(path)
    out_file = tmp_path / "o.jsonl"
    argv = ["compact", path, "-o", out_file, "--archive", tmp_path / "a", "--window", "16000"]
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    compacted = load_transcript(out_file)
    validate_history(compacted, allow_pending=True)
    assert len(compacted) < len(original) and "messages summarised by" in out
    assert compacted[-1].tool_calls == original[-1].tool_calls  # type: ignore[attr-defined]
    assert len(_refs(tmp_path / "a", path.stem)) == 2


def test_repair_re_pairs_a_reused_call_id_and_archives_what_it_rewrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 2: the second `c1` result used to be replaced by "interrupted", unarchived."""

    def call(name: str) -> dict[str, Any]:
        return {"id": "c1", "type": "function", "function": {"name": name, "arguments": "{}"}}

    path = write_lines(
        tmp_path / "dup.jsonl",
        USER,
        {"role": "assistant", "content": "", "tool_calls": [call("ls")]},
        {"role": "tool", "tool_call_id": "c1", "content": "first real result"},
        {"role": "assistant", "content": "", "tool_calls": [call("cat")]},
        {"role": "tool", "tool_call_id": "c1", "content": "second real result"},
        {"role": "assistant", "content": "done"},
    )
    out_file = tmp_path / "o.jsonl"
    argv = ["compact", path, "-o", out_file, "--archive", tmp_path / "a", "--repair"]
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert "line 4: renamed: tool call id 'c1' (cat) was used before" in err
    assert "line 5: re-paired" in err
    back = load_transcript(out_file)
    validate_history(back)
    texts = {m.text for m in back} | {m.text for m in _archived(tmp_path / "a", "dup")}
    assert {"first real result", "second real result"} <= texts
    assert not any("interrupted" in t for t in texts)
    assert "repair: 2 change(s)" in out
    assert any(
        m.id == "line-5" and m.tool_call_id == "c1" for m in _archived(tmp_path / "a", "dup")
    )  # type: ignore[attr-defined]


def test_repair_pairs_a_call_without_an_id_with_its_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    messages = [
        HumanMessage("go"),
        AIMessage("", tool_calls=[{"name": "ls", "args": {}, "id": None}]),
        ToolMessage("a.txt b.txt", tool_call_id="?"),
        AIMessage("done"),
    ]
    path = tmp_path / "noid.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in messages_to_dict(messages)))
    out_file = tmp_path / "o.jsonl"
    argv = ["compact", path, "-o", out_file, "--archive", tmp_path / "a", "--repair"]
    code, _, err = run(capsys, *argv)
    assert code == 0, err
    back = load_transcript(out_file)
    validate_history(back)
    assert [m.text for m in back if isinstance(m, ToolMessage)] == ["a.txt b.txt"]
    assert "line 3: re-paired" in err


def test_repair_of_a_lone_orphan_result_refuses_instead_of_writing_an_empty_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_lines(tmp_path / "o.jsonl", {"role": "tool", "content": "x", "tool_call_id": "z"})
    out_file = tmp_path / "out.jsonl"
    argv = ["compact", path, "-o", out_file, "--archive", tmp_path / "a", "--repair"]
    code, _, err = run(capsys, *argv)
    assert_one_line_error(code, err, "nothing is left after --repair", "nothing was written")
    assert not out_file.exists() and not (tmp_path / "a").exists()


def test_compact_does_not_write_a_bigger_history(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 19: a forced compaction under the trigger used to grow a short history."""
    turns = [{"role": r, "content": f"{r} {k}"} for k in range(4) for r in ("user", "assistant")]
    path = write_lines(tmp_path / "short.jsonl", *turns)
    before = path.read_bytes()
    out_file = tmp_path / "o.jsonl"
    argv = ["--archive", tmp_path / "a", "--keep-last", "2"]
    code, out, _ = run(capsys, "compact", path, "-o", out_file, *argv)
    assert code == 0
    assert "full compaction: not applied" in out and "would not make the history smaller" in out
    assert [m.text for m in load_transcript(out_file)] == [t["content"] for t in turns]
    assert "archive: nothing written" in out and not (tmp_path / "a").exists()
    code, out, _ = run(capsys, "compact", path, "-o", path, *argv)
    assert code == 0 and "nothing changed, the file was left as it was" in out
    assert path.read_bytes() == before


@pytest.mark.parametrize("char", ["\u2028", "\u2029", "\x85"])
def test_the_reader_reads_what_the_writer_wrote(
    char: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 16: splitlines() broke lines on U+2028 and friends inside JSON strings."""
    messages = [HumanMessage(f"a{char}b"), AIMessage(f"c{char}d")]
    for fmt in ("openai", "langchain"):
        path = dump_transcript(messages, tmp_path / f"{fmt}.jsonl", fmt)  # type: ignore[arg-type]
        assert [m.text for m in load_transcript(path)] == [f"a{char}b", f"c{char}d"]
        code, out, err = run(capsys, "inspect", path, "--json")
        assert code == 0, err
        assert json.loads(out)["messages"] == 2


def test_the_reader_accepts_crlf_line_ends(tmp_path: Path) -> None:
    path = tmp_path / "crlf.jsonl"
    path.write_bytes(
        b'{"role": "user", "content": "hi"}\r\n{"role": "assistant", "content": "yo"}\r\n'
    )
    assert [m.text for m in load_transcript(path)] == ["hi", "yo"]


def _imports(path: Path) -> set[str]:
    """The absolute modules ``path`` imports (``from a import b`` gives ``a`` and ``a.b``)."""
    import ast

    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_the_cli_lives_in_its_own_subpackage_and_the_library_never_imports_it() -> None:
    """The command line, the demo runner and the transcript I/O sit in ``cli/``; the library
    (``demo/`` included) depends on none of it: only ``__main__.py`` starts the command."""
    package = Path(__file__).resolve().parents[2] / "langchain_compact"
    cli_dir = package / "cli"
    flat = sorted(
        p.name
        for p in package.glob("*.py")
        if p.name.startswith(("_cli", "_demo_run", "_transcripts", "cli"))
    )
    assert flat == [], f"CLI modules outside cli/: {flat}"
    assert {"__init__.py", "_main.py", "_demo.py", "transcripts.py"} <= {
        p.name for p in cli_dir.glob("*.py")
    }
    offenders = sorted(
        str(p.relative_to(package))
        for p in package.rglob("*.py")
        if cli_dir not in p.parents
        and p.name != "__main__.py"
        and any(
            m == "langchain_compact.cli" or m.startswith("langchain_compact.cli.")
            for m in _imports(p)
        )
    )
    assert offenders == [], f"library modules importing the CLI: {offenders}"


def test_no_cli_name_shadows_a_library_name() -> None:
    """``cli._inspect.micro_compact`` used to shadow ``microcompact.micro_compact``."""
    import importlib
    import pkgutil

    import langchain_compact
    import langchain_compact.cli as cli_package

    def exported(package: Any, skip: str = "") -> dict[str, str]:
        names: dict[str, str] = {}
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if (skip and info.name.startswith(skip)) or info.name.endswith("__main__"):
                continue
            for name in getattr(importlib.import_module(info.name), "__all__", ()):
                names.setdefault(name, info.name)
        return names

    library = exported(langchain_compact, skip="langchain_compact.cli")
    cli = exported(cli_package)
    clashes = {name: (cli[name], library[name]) for name in cli.keys() & library.keys()}
    assert clashes == {}


def test_an_openai_transcript_gets_its_markers_back(tmp_path: Path) -> None:
    """The OpenAI format has no metadata: cleared results, cut results and summaries are
    recognised by their texts on import. A cut result's notice comes first, and the reader
    used to look for it only after a newline, so a cut result was read back as unmarked."""
    from langchain_compact.markers import KIND_CLEARED, KIND_TRUNCATED
    from langchain_compact.microcompact import clear_tool_results, truncate_large_tool_results

    def call(i: int) -> AIMessage:
        return AIMessage("", tool_calls=[{"name": "run", "args": {}, "id": f"c{i}"}])

    big = "\n".join(f"line {n}: value={n}" for n in range(2_000))
    history: list[BaseMessage] = [HumanMessage("Task: run it.")]
    for i in range(4):
        history += [call(i), ToolMessage(big, tool_call_id=f"c{i}", name="run")]
    history = truncate_large_tool_results(history, max_chars=5_000)
    history = clear_tool_results(history, keep=1, min_chars=10)
    summary = HumanMessage("[Merged summary of compactions 1-2.]\n\n- ran it")
    history.insert(1, summary)
    kinds = [kind_of(m) for m in history]
    assert kinds.count(KIND_CLEARED) == 2 and kinds.count(KIND_TRUNCATED) == 2
    dump_transcript(history, tmp_path / "t.jsonl", "openai")
    back = load_transcript(tmp_path / "t.jsonl")
    assert [kind_of(m) for m in back] == [None, KIND_SUMMARY, *kinds[2:]]
    assert back[1].response_metadata["langchain_compact"]["index"] == 2


# --------------------------------------------------------------------------- special files


def _device(tmp_path: Path) -> Path:
    """A character device to write to: a null device made in ``tmp_path`` (root), else
    ``/dev/null`` itself (never replaceable without root)."""
    node = tmp_path / "null-device"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, AttributeError, OSError):
        return Path(os.devnull)
    return node


@pytest.mark.skipif(os.name == "nt", reason="POSIX special files")
@pytest.mark.parametrize("kind", ["symlink", "fifo", "device"])
def test_compact_refuses_an_output_that_is_not_a_regular_file(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 3 of issue 21: ``-o`` replaced links, FIFOs and devices with a regular file."""
    path = _long_run(tmp_path / "run.jsonl")
    if kind == "symlink":
        target = tmp_path / "target.jsonl"
        target.write_text("keep me\n")
        out = tmp_path / "link.jsonl"
        out.symlink_to(target)
        needle, is_kind = "is a symbolic link", stat.S_ISLNK
    elif kind == "fifo":
        out = tmp_path / "fifo"
        os.mkfifo(out)
        needle, is_kind = "is a FIFO", stat.S_ISFIFO
    else:
        out = _device(tmp_path)
        needle, is_kind = "is a device file", stat.S_ISCHR
    code, _, err = run(capsys, "compact", path, "-o", out, "--archive", tmp_path / "a")
    assert_one_line_error(code, err, f"{out} {needle}", "regular file or a new path")
    assert len(err.strip().splitlines()) == 1
    assert is_kind(os.lstat(out).st_mode)
    assert not (tmp_path / "a").exists()  # refused before any work
    if kind == "symlink":
        assert (tmp_path / "target.jsonl").read_text() == "keep me\n"


def test_write_atomic_refuses_a_special_file_swapped_in_after_the_check(tmp_path: Path) -> None:
    from langchain_compact.cli.transcripts import write_atomic

    out = tmp_path / "link"
    out.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(TranscriptError, match="symbolic link"):
        write_atomic(out, b"x")
    assert out.is_symlink() and not (tmp_path / "elsewhere").exists()


def test_compact_refuses_a_1_gb_input_in_under_a_second(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 3: input had no size cap (/dev/zero reached 15 GB of memory)."""
    big = tmp_path / "big.jsonl"
    with open(big, "wb") as handle:  # sparse: 1 GB of size, no disk
        handle.truncate(1 << 30)
    started = time.perf_counter()
    code, _, err = run(capsys, "compact", big, "-o", tmp_path / "o.jsonl", "--archive", tmp_path)
    elapsed = time.perf_counter() - started
    assert_one_line_error(code, err, f"{big} is 1,073,741,824 bytes", "--max-input-bytes")
    assert elapsed < 1.0, elapsed
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_an_endless_device_input_is_refused_at_the_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.perf_counter()
    argv = ["compact", "/dev/zero", "-o", tmp_path / "o.jsonl", "--max-input-bytes", "4000000"]
    code, _, err = run(capsys, *argv)
    limit = "/dev/zero holds more than the input limit of 4,000,000"
    assert_one_line_error(code, err, limit, "--max-input-bytes")
    assert time.perf_counter() - started < 1.0


def test_the_input_cap_is_a_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _long_run(tmp_path / "run.jsonl")
    size = path.stat().st_size
    out = tmp_path / "o.jsonl"
    code, _, err = run(capsys, "inspect", path, "--max-input-bytes", size - 1)
    assert_one_line_error(code, err, f"over the input limit of {size - 1:,} bytes")
    argv = ["compact", path, "-o", out, "--archive", tmp_path / "a", "--max-input-bytes", size]
    code, _, err = run(capsys, *argv)
    assert code == 0, err


def test_compact_reads_stdin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 3: ``-`` (stdin) was not accepted."""
    data = _long_run(tmp_path / "run.jsonl").read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    out = tmp_path / "o.jsonl"
    code, stdout, err = run(capsys, "compact", "-", "-o", out, "--archive", tmp_path / "a")
    assert code == 0, err
    assert load_transcript(out) and "messages summarised by" in stdout
    assert _refs(tmp_path / "a", "stdin")  # archived under the thread "stdin"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    argv = ["compact", "-", "-o", out, "--max-input-bytes", "100"]
    code, _, err = run(capsys, *argv)
    limit = "<stdin> holds more than the input limit of 100 bytes"
    assert_one_line_error(code, err, limit, "--max-input-bytes")


@pytest.mark.parametrize("repair", [False, True], ids=["plain", "repair"])
def test_compact_on_every_transcript_is_quiet_and_reads_the_originals(
    repair: bool,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 20: ``compact`` on each shipped transcript writes nothing to stderr, and its
    summarizer reads the staged archive (it once logged 'could not read archived originals
    ...: No archive record ... for thread ...'); ``--repair`` logs no unprefixed duplicate."""
    paths = sorted(TRAJECTORY_DIR.glob("*.jsonl"))
    assert paths
    caplog.set_level("WARNING", logger="langchain_compact")
    for path in paths:
        argv = ["compact", path, "-o", tmp_path / f"{path.stem}.jsonl"]
        argv += ["--archive", tmp_path / "archive", *(["--repair"] if repair else [])]
        code, _out, err = run(capsys, *argv)
        assert code == 0, (path.name, err)
        assert err == "", (path.name, err)
    unread = [r.getMessage() for r in caplog.records if "could not read" in r.getMessage()]
    assert unread == []
