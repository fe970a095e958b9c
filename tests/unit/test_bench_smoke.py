"""Smoke test: the benchmark runner works end to end on tiny workloads (``--quick``).

Keeps ``bench/`` from rotting: every workload, every system adapter (the peers in their
real packages), the metrics, the markdown, the plot and the README section are exercised.
Skipped when the benchmark's extra dependencies or the shared transcripts are missing.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

pytest.importorskip("langchain.agents.middleware")
pytest.importorskip("matplotlib")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    pytest.importorskip("langmem")
pytest.importorskip("deepagents")

from bench import workloads

pytestmark = pytest.mark.skipif(
    not any(workloads.TRAJECTORY_DIR.glob("*.jsonl")),
    reason=f"no shared transcripts in {workloads.TRAJECTORY_DIR}",
)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    from bench.__main__ import run

    out = tmp_path_factory.mktemp("bench")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = run(quick=True, out_dir=out)
    return results, out


def test_quick_run_writes_every_output(quick_run: tuple[dict, Path]) -> None:
    _, out = quick_run
    assert json.loads((out / "latest.json").read_text(encoding="utf-8"))["meta"]["quick"]
    md = (out / "latest.md").read_text(encoding="utf-8")
    assert "Decision overhead" in md and "Dependent task" in md
    assert (out / "context.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_system_is_measured_everywhere(quick_run: tuple[dict, Path]) -> None:
    from bench.peers import SYSTEMS

    results, _ = quick_run
    for name in SYSTEMS:
        assert results["overhead"]["median_ms"][name]
        for per_window in results["transcripts"].values():
            assert per_window[name]["scripted_calls"] > 0
        assert results["synthetic"]["systems"][name]["context_per_call"]
        for per_window in results["dependent"]["windows"].values():
            assert per_window[name]["calls"] > 0
    assert set(results["counting"]["counters"]) >= {"approximate_tokens", "TiktokenCounter"}


def test_readme_section_is_generated_from_results(quick_run: tuple[dict, Path]) -> None:
    from bench.report import readme_section

    results, _ = quick_run
    text = readme_section(results)
    assert text.startswith("## Benchmark")
    assert "python -m bench" in text and "context.png" in text
    assert "Where a peer wins" in text and "Closing note" in text


def test_metrics_flag_provider_rule_breaks() -> None:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    from bench.metrics import TruthCounter, cache_split, violations

    call = {"name": "ls", "args": {}, "id": "c1", "type": "tool_call"}
    broken = [
        ToolMessage("orphan", tool_call_id="zz"),
        HumanMessage("hi"),
        SystemMessage("late"),
        AIMessage("", tool_calls=[call]),
        HumanMessage("next"),
    ]
    assert violations(broken) == {
        "empty_input": 0,
        "orphan_tool_results": 1,
        "dangling_tool_calls": 1,
        "system_mid_list": 1,
        "first_not_user": 1,
    }
    ok = [SystemMessage("s"), HumanMessage("go"), AIMessage("", tool_calls=[call])]
    ok.append(ToolMessage("out", tool_call_id="c1"))
    assert not any(violations(ok).values())
    assert violations([SystemMessage("s")])["empty_input"] == 1
    truth = TruthCounter()
    cached, fresh = cache_split(ok[:2], ok, truth)
    assert cached == truth.message(ok[0]) + truth.message(ok[1])
    assert cached + fresh == truth(ok)


def test_quick_run_reports_the_do_no_harm_columns(quick_run: tuple[dict, Path]) -> None:
    from bench.peers import SYSTEMS
    from bench.report import readme_section

    results, out = quick_run
    for per_window in results["transcripts"].values():
        for name in SYSTEMS:
            a = per_window[name]
            assert a["fresh"]["results"] >= a["fresh"]["hidden"] >= a["fresh"]["hidden_would_fit"]
            assert a["stopped_next_fits"] <= a["stopped_runs"]
            assert a["stopped_before_first_call"] <= a["stopped_runs"]
            assert a["task_head_tail_kept"] <= a["runs_with_calls"] <= a["runs"]
            assert 0 <= a["grown_compactions"] <= a["compactions"]
            if name.startswith("ours"):  # issue 20: never larger than it found it
                assert a["grown_compactions"] == 0, (name, a["grown_compactions"])
    assert set(results["scenario"]["kinds"]) == {"dense", "log"}
    for per in results["scenario"]["kinds"].values():
        assert all(a["model_calls"] > 0 for a in per["systems"].values())
    assert "ours_default" in results["dependent_tool_only"]["systems"]
    for per in results["probes"]["histories"].values():
        assert {a["results"] for a in per.values()} in ({1}, {6})
    text = readme_section(results)
    md = (out / "latest.md").read_text(encoding="utf-8")
    needles = ("Do no harm", "hidden / fresh", "next call fits", "12-turn", "tool results")
    for needle in (*needles, "grew the context / compactions"):
        assert needle in text and needle in md


def _batch(n: int, chars: int) -> list:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    calls = [{"name": "read", "args": {"i": k}, "id": f"c{k}"} for k in range(n)]
    head = [SystemMessage("sys", id="s"), HumanMessage("the task", id="t")]
    head.append(AIMessage("", tool_calls=calls, id="a"))
    return head + [ToolMessage(f"r{k} " + "x" * chars, tool_call_id=f"c{k}") for k in range(n)]


def test_first_view_tells_whole_cut_cleared_and_dropped_apart() -> None:
    from langchain_core.messages import ToolMessage

    from bench.harm import first_view
    from bench.metrics import TruthCounter

    truth = TruthCounter()
    sent = _batch(4, 2000)
    fresh = sent[3:]
    whole = first_view(fresh, sent, truth=truth, trigger=10_000)
    assert (whole.results, whole.hidden) == (4, 0)
    shown = list(sent)
    shown[3] = ToolMessage("[cleared]", tool_call_id="c0")  # cleared
    shown[4] = ToolMessage(fresh[1].content[:100], tool_call_id="c1")  # cut
    del shown[5]  # dropped
    view = first_view(fresh, shown, truth=truth, trigger=10_000)
    assert (view.hidden, view.cut_or_cleared, view.dropped) == (3, 2, 1)
    assert view.hidden_would_fit == 3
    tight = first_view(fresh, shown, truth=truth, trigger=truth(shown))
    assert tight.hidden == 3 and tight.hidden_would_fit == 0


def test_fresh_results_count_observations_only_for_text_command_agents() -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    from bench.harm import fresh_results, has_native_tool_calls

    batch = _batch(2, 10)
    assert has_native_tool_calls(batch)
    assert len(fresh_results(batch, text_commands=False, task_id="t")) == 2
    text_agent = [HumanMessage("task", id="t"), AIMessage("ls"), HumanMessage("a.py b.py", id="o")]
    assert not has_native_tool_calls(text_agent)
    got = fresh_results(text_agent, text_commands=True, task_id="t")
    assert [m.id for m in got] == ["o"]
    assert fresh_results(text_agent, text_commands=False, task_id="t") == []


def test_task_head_and_tail_both_required() -> None:
    from langchain_core.messages import HumanMessage

    from bench.harm import task_head_tail_kept

    task = "HEAD " + "middle words " * 100 + " TAIL"
    assert task_head_tail_kept([HumanMessage(task)], task)
    assert task_head_tail_kept([HumanMessage(task[:220] + " ... " + task[-220:])], task)
    assert not task_head_tail_kept([HumanMessage(task[:300])], task)
    assert not task_head_tail_kept([HumanMessage(task[-300:])], task)


def test_next_call_fits_counts_the_reply() -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    from bench.harm import next_call_fits
    from bench.metrics import TruthCounter

    truth = TruthCounter()
    history = [HumanMessage("word " * 500)]
    reply = AIMessage("answer " * 50)
    size = truth(history) + truth([reply])
    assert next_call_fits(history, reply, truth=truth, window=size)
    assert not next_call_fits(history, reply, truth=truth, window=size - 1)


def test_tool_only_policy_never_restates_a_value() -> None:
    from langchain_compact.demo import (
        ContextReadingPolicy,
        DependentTask,
        ToolOnlyPolicy,
        tool_only_tools,
    )

    task = DependentTask(steps=2, payload_chars=0)
    tools = tool_only_tools(task)
    model = ToolOnlyPolicy(inner=ContextReadingPolicy()).bind_tools(tools)
    first = model.invoke(task.prompt())
    assert first.tool_calls[0]["args"] == {"step": 1}
    out = tools[0].invoke({"step": 1})
    assert f"value={task.expected_values()[0]}" in out


def test_fresh_input_splits_into_new_content_and_content_re_sent_after_a_break() -> None:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from bench.metrics import CallLog, TruthCounter

    truth = TruthCounter()
    call = {"name": "read", "args": {}, "id": "c1", "type": "tool_call"}
    task, ask = HumanMessage("task"), AIMessage("", tool_calls=[call])
    result = ToolMessage("x " * 300, tool_call_id="c1")
    log = CallLog(window=8000, truth=truth)
    log.record([task], hook_seconds=0.0, compacted=False)
    log.record([task, ask, result], hook_seconds=0.0, compacted=False)
    summary = HumanMessage("summary of the work so far")
    log.record([summary, ask, result], hook_seconds=0.0, compacted=True)  # the prefix broke
    s = log.summary()
    overhead = truth([task]) - truth.message(task)  # per call, never cached
    assert log.new == [
        truth([task]),
        truth.message(ask) + truth.message(result) + overhead,
        truth.message(summary) + overhead,
    ]
    re_sent = truth.message(ask) + truth.message(result)  # sent before, after the break
    assert s["fresh_tokens"] - s["new_tokens"] == re_sent


def test_a_summary_prepared_for_a_later_trigger_is_not_counted_as_a_compaction() -> None:
    from bench import peers
    from bench.metrics import TruthCounter
    from langchain_compact.markers import newest_boundary

    truth = TruthCounter()
    adapter = peers.make("ours", peers.Budget(8000), truth)
    run = workloads.synthetic_run(calls=60, facts=4)
    points, last, prepared_only = workloads.call_points(run.messages), 0, 0
    compactions = 0
    for i in points:
        res = adapter.prepare(run.messages[last:i])
        assert not res.stopped
        compactions += res.compacted
        if res.summarizer and not res.compacted:
            prepared_only += 1  # the summarizer ran beside the call, nothing was compacted
        adapter.observe(peers.with_usage(run.messages[i], res.model_input, truth))
        last = i + 1
    assert prepared_only >= 1 and compactions >= 1
    assert compactions == peers.compactions_in(res.model_input)
    assert newest_boundary(res.model_input)[0] >= 0


def test_lcel_refusal_ends_the_replay_as_a_stop() -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    from bench.__main__ import replay
    from bench.metrics import TruthCounter
    from bench.peers import Budget, make
    from langchain_compact.errors import CompactionError

    class Refuses:
        def invoke(self, messages: list) -> list:
            raise CompactionError("the next call cannot fit the window")

    truth = TruthCounter()
    adapter = make("ours_lcel", Budget(4000), truth)
    adapter.runnable = Refuses()  # type: ignore[attr-defined]
    log = replay(adapter, [HumanMessage("task"), AIMessage("ok")], truth=truth, window=4000)
    assert log.stopped and "cannot fit" in log.stop_reason
    assert log.extra["stop_next_fits"] and not log.context


@pytest.mark.parametrize("window", [4_000, 8_000])
def test_the_values_only_tool_results_held_task_finishes_as_the_bench_runs_it(window: int) -> None:
    """The bench's dependent task with each value only in its step's tool result (issue 9),
    at its full size: 14 steps of 6,000 characters, usage in o200k tokens, the bench's
    summary model. In the 4k window the compacted history sits at the fit limit; a
    supplement dropped before the earlier summaries were merged lost a value here."""
    from bench.__main__ import dependent_bench
    from bench.metrics import TruthCounter

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = dependent_bench(
            [window],
            ["ours", "ours_lcel"],
            TruthCounter(),
            steps=14,
            payload_chars=6000,
            tool_only=True,
        )
    for name, result in out["windows"][str(window)].items():
        assert result["finished"], (name, result["verdict"])


def test_deepagents_is_a_peer_with_a_row_in_every_table(quick_run: tuple[dict, Path]) -> None:
    """deepagents runs in every workload and gets the same columns as every peer, with
    values its own hooks produced: in the 4k window it summarised (its history offloaded
    to the backend) and kept every call under the window."""
    from bench import report, report_harm
    from bench.scenarios import SCENARIO_SYSTEMS

    results, out = quick_run
    assert "deepagents" in results["config"]["systems"]
    assert results["meta"]["versions"]["deepagents"] != "not installed"
    small = results["transcripts"]["4000"]["deepagents"]
    peer = results["transcripts"]["4000"]["lc_summarization"]
    assert set(small) == set(peer)
    assert small["calls"] == small["scripted_calls"] > 0
    assert small["summarizer_calls"] > 0 and small["compactions"] > 0
    assert small["over_window_calls"] == 0 and small["invalid_calls"] == 0
    assert 0 < small["cost_usd"] < peer["cost_usd"] * 10
    synthetic = results["synthetic"]["systems"]["deepagents"]
    assert synthetic["summarizer_calls"] > 0 and synthetic["peak_context"] <= 4000
    assert "deepagents" in SCENARIO_SYSTEMS
    for per in results["scenario"]["kinds"].values():
        assert per["systems"]["deepagents"]["model_calls"] > 0
    for key in ("dependent", "dependent_tool_only"):
        assert "deepagents" in results[key]["systems"]
    md = (out / "latest.md").read_text(encoding="utf-8")
    text = report.readme_section(results)
    tables = [
        report.overhead_table(results),
        report.transcripts_table(results, "4000"),
        report.synthetic_table(results),
        report.dependent_table(results),
        report_harm.fresh_table(results),
        report_harm.stops_table(results),
        report_harm.cache_table(results),
        report_harm.uncached_table(results),
        report_harm.overview_table(results),
        report_harm.probe_table(results),
    ]
    for table in tables:
        rows = [line for line in table.splitlines() if line.startswith("| deepagents |")]
        assert len(rows) == 1, table
        header = table.splitlines()[0]
        assert rows[0].count("|") == header.count("|")
        assert "n/a" not in rows[0]  # a summarising peer: every column applies
        assert rows[0] in md or rows[0] in text


def test_deepagents_evicts_a_large_tool_result_and_offloads_what_it_summarises() -> None:
    """The replay adapter runs deepagents' own hooks: a tool result over 80,000 characters
    reaches the model as a preview with the path it was written to, and a compaction writes
    the summarised history to the backend and names its file in the summary message."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    from bench.__main__ import replay
    from bench.metrics import TruthCounter
    from bench.peers import Budget, make

    truth = TruthCounter()
    call = {"name": "run_shell", "args": {"cmd": "make"}, "id": "c1", "type": "tool_call"}
    big = "build step 12345 finished with status=0\n" * 2500  # 100,000 characters
    history = [
        SystemMessage("You are a build agent.", id="s"),
        HumanMessage("Run the build and report the failing step.", id="t"),
        AIMessage("", tool_calls=[call], id="a1"),
        ToolMessage(big, tool_call_id="c1", id="r1"),
        AIMessage("No step failed.", id="a2"),
    ]
    adapter = make("deepagents", Budget(8000), truth)
    log = replay(adapter, history, truth=truth, window=8000)
    assert not log.stopped and len(log.context) == 2
    sent = log.last_input[-1]
    assert isinstance(sent, ToolMessage) and "/large_tool_results/c1" in str(sent.content)
    assert truth([sent]) < 2000 and not log.summarizer_calls
    assert "/large_tool_results/c1" in adapter.files  # type: ignore[attr-defined]

    adapter = make("deepagents", Budget(4000), truth)
    run = workloads.synthetic_run(calls=30, facts=3)
    log = replay(adapter, run.messages, truth=truth, window=4000)
    assert log.summarizer_calls and not log.summary()["over_window_calls"]
    paths = [p for p in adapter.files if p.startswith("/conversation_history/")]  # type: ignore[attr-defined]
    assert len(paths) == 1
    summary = next(m for m in log.last_input if "has been summarized" in str(m.content))
    assert paths[0] in str(summary.content)
