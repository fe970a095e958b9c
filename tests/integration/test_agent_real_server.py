"""An agent loop with compaction against the real server (llama.cpp, gemma3-270m, ChatOpenAI).

One run, shared by the tests of this module (``agent_run``): a hand-built ``StateGraph``
(``agent`` <-> ``tools``) with ``add_compaction`` wired in, 20 model calls, each forced by
``tool_choice`` to call a tool that replays real tool outputs, so the history grows and
compacts several times. The agent node records, before each call, the predicted context size
of exactly what the model gets (``context_tokens``, anchored on the previous response's usage)
and purely local counts, and after it the ``prompt_tokens`` the server reported. The run
itself lives in ``bench/server_accounting.py`` (the benchmark quoted in the README is the
same code, with its own server); here it uses the session's ``llama_server`` fixture.

What this shows (the server's tokenizer is SentencePiece, not tiktoken):

* a full compaction is triggered by the usage the server reported (the decision's number is
  the last response's ``input + output`` tokens plus a local count of the one message after
  it), at a point where a purely local count of the history is still under the trigger;
* the loop continues after it: the model is called again on the compacted history, and the
  server bills a smaller prompt;
* over the 20 calls, the anchored prediction's median error is a fraction of the local
  count's. The anchor makes everything up to the previous response exact; the remaining error
  is the local count of the messages added since (one tool round trip here).

About 2 minutes on 2 busy cores (prompt evaluation runs at tens of tokens per second), hence
the raised per-test timeout: the shared run is paid for by the first test that uses it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from bench import _llama
from bench.server_accounting import (
    MAX_TOKENS,
    TASK,
    AgentRun,
    make_replay_tool,
    run_agent,
    summarize,
    table,
    usage_anchor,
)
from langchain_compact import (
    CompactionConfig,
    ExtractiveSummarizer,
    JsonlArchive,
    approximate_tokens,
    create_compacting_agent,
    make_recall_tool,
)
from langchain_compact.compaction import decide
from langchain_compact.history import last_boundary_index
from langchain_compact.markers import EVENT_KEY
from langchain_compact.tokens import report_scale

pytestmark = [pytest.mark.server, pytest.mark.timeout(600)]


def anchored(before: list[BaseMessage], index: int, reported: int) -> int:
    """The usage-anchored count of ``before``: the server's report at ``index``, plus the
    estimate of what came after it, scaled by the ratio the server showed on what its
    newest report added over the one before (``tokens.report_scale``: at least 1, so the
    count of a new result never falls below the server's way of counting such content)."""
    scale = report_scale(before, index, approximate_tokens, last_boundary_index(before))
    assert scale >= 1.0
    return reported + round(approximate_tokens(before[index + 1 :]) * scale)


CALLS = 20
THREAD = "accounting"  # run_agent's thread id: the archive namespace


@pytest.fixture(scope="module")
def archive_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("archive")


@pytest.fixture(scope="module")
def agent_run(llama_server: Any, archive_dir: Path) -> AgentRun:
    """The shared run: 20 forced tool calls through ``ChatOpenAI`` against the server."""
    model = _llama.chat_model(llama_server, max_tokens=MAX_TOKENS)
    return run_agent(model, calls=CALLS, archive_dir=archive_dir)


def test_compaction_on_reported_usage_and_the_loop_continues(
    agent_run: AgentRun, archive_dir: Path, record_property: Any
) -> None:
    run = agent_run
    compactions = [e for e in run.events if e["event"] == "compaction"]
    record_property("compactions", len(compactions))
    record_property("run_seconds", run.seconds)
    assert compactions, f"no compaction in {len(run.records)} calls\n{table(run)}"
    assert not [e for e in run.events if e["event"] == "stop"]
    assert run.final["compaction_count"] >= 1
    trigger = run.config.trigger_tokens
    assert trigger is not None

    # The decision was taken on reported usage: the state right before the first compaction
    # ends with the last response (usage reported by the server) and its tool result.
    first, before = compactions[0], run.before_compaction[0]
    anchor = usage_anchor(before)
    assert anchor is not None, "no response with usage_metadata before the compaction"
    index, reported = anchor
    assert isinstance(before[index], AIMessage)
    assert [type(m) for m in before[index + 1 :]] == [ToolMessage]
    decision = decide(before, config=run.config, tools=run.tools)
    assert decision.action == "compact"
    assert decision.tokens == first["tokens_before"] == anchored(before, index, reported)
    assert decision.tokens >= trigger
    # A purely local count (tool schemas included) differs: the decision used the server's
    # own count, not the estimate (which may land on either side of the trigger here).
    local = approximate_tokens(before, tools=run.tools)
    assert local != decision.tokens

    # The originals went to the archive before they were replaced.
    archive = JsonlArchive(archive_dir)
    assert first["archive_ref"] in archive.refs(thread_id=THREAD)
    archived = archive.read(first["archive_ref"], thread_id=THREAD)
    assert any(isinstance(m, ToolMessage) for m in archived)

    # The loop continued: the next model call went to the compacted history, and the server
    # billed a smaller prompt than the call before the compaction.
    at = first["at_call"]
    after = [r for r in run.records if r.call > at]
    assert after, "the model was not called after the compaction"
    assert after[0].after_compaction
    assert after[0].reported_input < run.records[at - 1].reported_input
    assert len(run.records) == CALLS
    messages = run.final["messages"]
    boundary = last_boundary_index(messages)
    assert boundary >= 0
    assert any(isinstance(m, AIMessage) and m.usage_metadata for m in messages[boundary + 1 :])


def test_predicted_context_size_against_reported_prompt_tokens(
    agent_run: AgentRun, record_property: Any
) -> None:
    run = agent_run
    print("\n" + table(run))
    assert len(run.records) >= 20
    assert all(r.reported_input > 0 for r in run.records)

    # The anchor is exact up to the previous response: every anchored call's prompt is at least
    # the anchor, and the error is confined to the messages added since.
    anchored_calls = [r for r in run.records if r.anchor_tokens is not None]
    assert len(anchored_calls) >= 12
    assert all(r.reported_input >= (r.anchor_tokens or 0) for r in anchored_calls)

    stats = summarize(run)["errors"]
    every, with_anchor = stats["all_calls"], stats["calls_with_usage_anchor"]
    for name in ("anchored", "local_approx", "local_tiktoken"):
        record_property(f"median_abs_error_{name}", every[name]["median_abs"])
        record_property(f"worst_abs_error_{name}", every[name]["worst_abs"])
    # Measured here: anchored ~10% median over all calls (~9% on calls with an anchor; the
    # calls right after a compaction have none), local counts 26-36%.
    assert with_anchor["anchored"]["median_abs"] < 0.15, with_anchor
    assert every["anchored"]["median_abs"] < 0.5 * every["local_approx"]["median_abs"], every
    assert every["anchored"]["median_abs"] < every["local_tiktoken"]["median_abs"], every
    # The worst anchored call is the second one (-24.7% measured): its tool result is counted
    # locally before any compaction has learned this server's ratio, and gemma's tokenizer
    # counts this content about 20-25% above o200k. The content-class estimate now errs less
    # on the whole list (worst local -19% to -21%), so the anchored worst is no longer under
    # the local worst; calibrating from the first usage report is left open in issue 28.
    # A bound, so a change that makes the anchored count worse fails here.
    assert every["anchored"]["worst_abs"] < 0.3, every


class ForcedToolChat(_llama.LlamaCppChatOpenAI):
    """The base model never picks a tool by itself: every ``bind_tools`` forces the first one."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        kwargs["tool_choice"] = _tool_name(tools[0])
        return super().bind_tools(tools, **kwargs)


def _tool_name(tool: Any) -> str:
    return str(getattr(tool, "name", None) or tool["function"]["name"])


def test_create_compacting_agent_compacts_on_reported_usage(
    llama_server: Any, tmp_path: Path, record_property: Any
) -> None:
    """The prebuilt agent (recall tool included) through ChatOpenAI: a usage-triggered
    compaction, then more model calls. The consumer ends the endless forced loop."""
    model = _llama.chat_model(llama_server, max_tokens=MAX_TOKENS, cls=ForcedToolChat)
    replay = make_replay_tool()
    config = CompactionConfig(
        context_window=1600,
        keep_last_n=2,
        summary_max_tokens=100,
        micro_exclude_tools=(replay.name,),
    )
    agent = create_compacting_agent(
        model,
        [replay],
        config=config,
        archive=JsonlArchive(tmp_path),
        system_prompt="Be brief.",
        summarizer=ExtractiveSummarizer(),
    )
    calls_after_compaction, model_calls = 0, 0
    compaction: dict[str, Any] | None = None
    before: list[BaseMessage] = []
    state: list[BaseMessage] = []
    for mode, chunk in agent.stream(
        {"messages": [HumanMessage(TASK)]},
        {"recursion_limit": 100, "configurable": {"thread_id": "prebuilt"}},
        stream_mode=["values", "updates", "custom"],
    ):
        if mode == "values":
            state = list(chunk["messages"])
        elif mode == "custom" and chunk[EVENT_KEY]["event"] == "compaction" and not compaction:
            compaction, before = chunk[EVENT_KEY], state
        elif mode == "updates" and "agent" in chunk:
            reply = chunk["agent"]["messages"][-1]
            assert isinstance(reply, AIMessage) and reply.usage_metadata, reply
            assert reply.tool_calls[0]["name"] == replay.name
            model_calls += 1
            calls_after_compaction += compaction is not None
            if calls_after_compaction >= 2 or model_calls >= 14:
                break  # ends the run: the forced loop would go on forever
    record_property("prebuilt_model_calls", model_calls)
    print(f"\nprebuilt agent: {model_calls} model calls, first compaction: {compaction}")
    assert compaction is not None, f"no compaction in {model_calls} model calls"
    anchor = usage_anchor(before)
    assert anchor is not None
    index, reported = anchor
    assert compaction["tokens_before"] == anchored(before, index, reported)
    assert compaction["tokens_before"] >= (config.trigger_tokens or 0)
    schemas = [replay, make_recall_tool(JsonlArchive(tmp_path))]  # what the model is bound with
    # The decision used the server's count (above), not a purely local one, which the
    # piece-based estimate puts on either side of it here.
    assert approximate_tokens(before, tools=schemas) != compaction["tokens_before"]
    assert calls_after_compaction >= 2, "the agent loop did not continue after compacting"
