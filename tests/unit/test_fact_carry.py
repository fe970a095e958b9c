"""Facts that only a tool result held survive clearing, compaction and summary merges."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from langchain_compact import CompactionConfig, compact_messages
from langchain_compact._facts import FACTS_MARK, condense_summary, placeholder_facts, with_facts
from langchain_compact.compaction import compact_history
from langchain_compact.markers import KIND_CLEARED, KIND_SUMMARY, get_meta, with_meta
from langchain_compact.summarizers import ExtractiveSummarizer, dense_merge, fidelity_supplement
from langchain_compact.tokens import approximate_tokens


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


class FillingSummarizer:
    """An LLM stand-in: up to 6 lines that carry data from each message, as many as fit its
    bound, newest kept (merging long summaries, it writes up to the bound)."""

    def summarize(self, messages: Sequence[BaseMessage], *, max_tokens: int) -> str:
        lines = [
            ln
            for m in messages
            for ln in [ln.strip() for ln in m.text.splitlines() if any(c.isdigit() for c in ln)][
                -6:
            ]
        ]
        out: list[str] = []
        for line in reversed(lines):
            if approximate_tokens([HumanMessage("\n".join([line, *out]))]) > max_tokens:
                break
            out.insert(0, line)
        return "\n".join(out) or "nothing."

    async def asummarize(self, messages: Sequence[BaseMessage], *, max_tokens: int) -> str:
        return self.summarize(messages, max_tokens=max_tokens)


def tool_round(k: int) -> list[BaseMessage]:
    fact = f"NOTE artifact signing key id for this build: FX-{10000 + k}"
    return [
        AIMessage(
            "", id=f"a{k}", tool_calls=[{"name": "build", "args": {"run": k}, "id": f"c{k}"}]
        ),
        ToolMessage(noisy_log(fact), tool_call_id=f"c{k}", name="build", id=f"t{k}"),
    ]


def test_merges_are_dense_so_they_are_rare_and_keep_every_key_fact() -> None:
    config = CompactionConfig(context_window=4000, keep_last_n=2, summary_max_tokens=500)
    budget = int(config.summary_budget_ratio * 4000)
    history: list[BaseMessage] = [HumanMessage("Task: build every module.", id="task")]
    results = []
    for k in range(1, 25):
        history = [*history, *tool_round(k)]
        result = compact_history(history, summarizer=FillingSummarizer(), config=config)
        if result.reason == "compacted":
            results.append(result)
            history = result.messages
    merges = [r for r in results if r.merged]
    assert len(results) >= 20 and merges, "precondition: many compactions, some merges"
    # A merge that refilled the summary budget would be due again at the next compaction.
    assert len(merges) <= len(results) // 3, f"{len(merges)} merges in {len(results)}"
    for result in merges:
        merged = next(m for m in result.messages if get_meta(m).get("merged_from"))
        assert approximate_tokens([merged]) <= budget // 2
    text = "\n".join(m.text for m in history)
    lost = [k for k in range(1, 23) if f"FX-{10000 + k}" not in text]
    assert not lost, f"signing key ids of builds {lost} lost"


def summary_of(k: int) -> BaseMessage:
    facts = "\n".join(
        f"- run_step: RESULT step={s} value={700000 + s}\n"
        f"- /auth/flush.py: WARNING auth: deprecated call flush() in src/auth/flush.py:{s}"
        for s in range(4 * k, 4 * k + 4)
    )
    calls = "\n".join(f'- called run_step({{"step": {s}}})' for s in range(4 * k, 4 * k + 4))
    text = (
        f"[Summary #{k + 1} of the earlier conversation.]\n\n## 1. Goal and hard constraints\n"
        f"- no new goal or constraint stated\n## 2. Confirmed facts and data\n{facts}\n"
        f"## 3. Decisions taken and why\n{calls}\n## 4. Status\n- done: 4 tool call(s)"
    )
    return with_meta(HumanMessage(text, id=f"s{k}"), kind=KIND_SUMMARY)


def test_an_extractive_merge_drops_calls_and_log_lines_before_any_fact() -> None:
    summaries = [summary_of(k) for k in range(6)]
    merged = ExtractiveSummarizer().summarize(summaries, max_tokens=330)
    assert approximate_tokens([HumanMessage(merged)]) <= 330
    lost = [s for s in range(24) if f"value={700000 + s}" not in merged]
    assert not lost, f"values of steps {lost} lost"
    assert "older entries omitted" in merged, "calls and log lines made room"


def test_condense_summary_flattens_dedupes_and_drops_by_rank() -> None:
    text = (
        "## Facts\n- - - order_id = QX-4821\n- 4821: order_id = QX-4821\n"
        "- total = 1234\n- WARNING core: slow call in src/core/load.py:120\n"
        '- called lookup({"id": 4821})\n- (3 older entries omitted; archived)\n'
        "- facts kept: EXIT status=0 | The user must never refund twice.\n"
        "## Other\n- none recorded"
    )
    full = condense_summary(text, 500)
    assert full.splitlines() == [
        "## Facts",
        "- order_id = QX-4821",
        "- total = 1234",
        "- WARNING core: slow call in src/core/load.py:120",
        '- called lookup({"id": 4821})',
        "- EXIT status=0",
        "- The user must never refund twice.",
        "- (3 older entries omitted; archived)",
    ]
    # Over a soft bound only calls and other data lines go; the key facts stay.
    soft = condense_summary(text, 500, soft_tokens=10)
    assert "called" not in soft and "WARNING" not in soft
    for kept in ("QX-4821", "total = 1234", "EXIT status=0", "must never refund"):
        assert kept in soft
    assert "(5 older entries omitted; archived)" in soft
    # Tighter, key = value facts go before ids and constraints. (40: room for the two
    # rank-0 lines and the omitted line as the piece-based estimate counts them, which
    # costs the id line more than the old 3.6 characters per token did; 34 was that
    # room before.)
    tight = condense_summary(text, 40, soft_tokens=10)
    assert approximate_tokens([HumanMessage(tight)]) - approximate_tokens([HumanMessage("")]) <= 40
    assert "QX-4821" in tight and "must never refund" in tight and "total" not in tight


def test_a_dense_merge_brings_back_a_value_only_a_dropped_call_held() -> None:
    kept = "RESULT step=1 value=766457 | WARNING net: deprecated call in src/net/encode.py:1178"
    summaries = [
        with_meta(HumanMessage(f"- facts kept: {kept}", id="s1"), kind=KIND_SUMMARY),
        with_meta(
            HumanMessage('- called run_step({"previous": 766457})', id="s2"), kind=KIND_SUMMARY
        ),
    ]
    # The summarizer kept the value only inside the call, which the dense merge drops.
    merged = dense_merge(summaries, '- called run_step({"previous": 766457})', 300, soft_tokens=4)
    assert "RESULT step=1 value=766457" in merged
    assert "called run_step" not in merged and "WARNING" not in merged


def test_a_dense_merge_checks_facts_against_what_the_final_text_keeps() -> None:
    noise = " | ".join(
        f"WARNING {m}: deprecated call in src/{m}/encode.py:{1100 + i}"
        for i, m in enumerate(["net", "auth", "core", "io", "rpc", "sched"])
    )
    summaries = [
        with_meta(
            HumanMessage(f"- facts kept: RESULT step=1 value=766457 | {noise}", id="s1"),
            kind=KIND_SUMMARY,
        ),
    ]
    # The call fits the soft bound on its own, but the log lines the fidelity check adds
    # push it out: the value must come back as its fact line all the same.
    call = '- called run_step({"previous": 766457})'
    merged = dense_merge(summaries, call, 300, soft_tokens=40)
    assert "RESULT step=1 value=766457" in merged


def test_a_value_counts_as_kept_only_with_its_key() -> None:
    """``"previous": 674004`` in a later call does not say which step produced 674004: the
    fact line ``RESULT step=7 value=674004`` comes back verbatim."""
    span = [
        ToolMessage("log ...\nRESULT step=7 value=674004", tool_call_id="c7"),
        ToolMessage("log ...\nRESULT step=8 value=11968", tool_call_id="c8"),
    ]
    summary = '- called run_step({"step": 8, "previous": 674004})\n- RESULT step=8 value=11968'
    supplement = fidelity_supplement(span, summary)
    assert "RESULT step=7 value=674004" in supplement
    assert "11968" not in supplement  # kept with its key
    # the same value kept with its key is not repeated
    assert fidelity_supplement(span, summary + "\n- RESULT step=7 value=674004") == ""


def test_a_tool_outcome_labelled_with_its_call_ranks_as_the_fact_it_holds() -> None:
    """The extractive summarizer writes ``run_step [call_7]: RESULT step=7 value=674004``;
    condensing must rank it as the ``key = value`` fact it is, not as a log line that goes
    with the calls."""
    text = (
        "## Facts\n"
        + "".join(f"- run_step [call_{k}]: RESULT step={k} value={700000 + k}\n" for k in range(6))
        + "".join(f'- called run_step({{"step": {k}, "previous": {k}}})\n' for k in range(6))
        + "- WARNING retry in src/ci/run.py:42\n"
    )
    soft = condense_summary(text, 500, soft_tokens=20)
    for k in range(6):
        assert f"RESULT step={k} value={700000 + k}" in soft
    assert "called" not in soft and "WARNING" not in soft


class BriefSummarizer(BaseChatModel):
    """A chat model that, like an LLM with a bounded summary, keeps the first two and the
    newest twenty ``RESULT step=K value=V`` lines it is shown and nothing else."""

    @property
    def _llm_type(self) -> str:
        return "brief"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        text = "\n".join(m.text for m in messages)
        found = list(dict.fromkeys(re.findall(r"RESULT step=\d+ value=\d+", text)))
        kept = found[:2] + found[2:][-20:]
        reply = AIMessage("\n".join(f"- {line}" for line in kept) or "- nothing yet")
        return ChatResult(generations=[ChatGeneration(message=reply)])


class ExcerptSummarizer(BaseChatModel):
    """A chat model that answers with excerpts of what it is shown, as an extractive LLM
    summary would: the first three and the newest twenty-five lines that carry data (tool
    outcomes, the facts a placeholder kept, warnings with their paths)."""

    @property
    def _llm_type(self) -> str:
        return "excerpt"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        lines = [
            line.strip()
            for m in messages
            for line in m.text.splitlines()
            if re.search(r"RESULT step=|facts kept:|WARNING ", line)
        ]
        lines = list(dict.fromkeys(lines))
        kept = lines[:3] + lines[3:][-25:]
        reply = AIMessage("\n".join(f"- {line.lstrip('- ')}" for line in kept) or "- nothing")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def test_a_compaction_of_a_long_span_in_a_large_window_carries_every_fact() -> None:
    """128k window, a 150-step dependent task (about 1,600 tokens a step): the first
    compaction folds in about 128 turns. Their summary keeps 22 values; the fidelity
    supplement brings back the rest (it used to stop at 60 items, and the run ended
    BLOCKED with 44 values gone from the context)."""
    from langgraph.checkpoint.memory import InMemorySaver

    from langchain_compact import LLMSummarizer, create_compacting_agent
    from langchain_compact.demo import ContextReadingPolicy, DependentTask
    from langchain_compact.markers import EVENT_KEY

    task = DependentTask(steps=150)
    agent = create_compacting_agent(
        ContextReadingPolicy(),
        task.tools(),
        config=CompactionConfig(context_window=128_000),
        summarizer=LLMSummarizer(BriefSummarizer()),
        checkpointer=InMemorySaver(),
    )
    run = {"configurable": {"thread_id": "long"}, "recursion_limit": 1_000}
    compactions, state = 0, {}
    for mode, chunk in agent.stream(
        {"messages": [HumanMessage(task.prompt(), id="task")]},
        run,
        stream_mode=["custom", "values"],
    ):
        if mode == "custom":
            compactions += chunk[EVENT_KEY].get("event") == "compaction"
        else:
            state = chunk
    assert compactions >= 1
    assert task.check(state["messages"][-1].text).ok, state["messages"][-1].text[:200]


def test_a_fact_inside_a_dropped_line_survives_condensing() -> None:
    """The line that states a fact whole may be a call or a placeholder's wording, which go
    first under a tight bound: the fact keeps its own line (it used to be removed as
    contained in the longer line, and then went with it)."""
    text = "\n".join(
        [
            "- [tool result run_step (call_8)] $ ./ci/run.sh --job 8 RESULT step=8 value=11968",
            "- RESULT step=8 value=11968",
            *(
                f"- WARNING io: deprecated call flush() in src/io/flush.py:{100 + i}"
                for i in range(30)
            ),
        ]
    )
    dense = condense_summary(text, 120, soft_tokens=60)
    assert "RESULT step=8 value=11968" in dense
    assert "[tool result run_step" not in dense


def test_a_value_a_placeholder_kept_outranks_paths_from_log_lines() -> None:
    """Summaries carry a cleared result's kept facts as ``facts kept: A | B | C``. A merge's
    fidelity check reads them one fact at a time: the computed value is a ``key = value``
    fact (it was judged on the whole line, prefix included, and lost to a hundred paths
    from warning lines), and each item is quoted with its own fact, not its neighbours."""
    warnings = " | ".join(
        f"WARNING io: deprecated call flush() in src/io{i}/flush.py:{100 + i}" for i in range(60)
    )
    summary = with_meta(
        HumanMessage(f"[Summary #1]\n- facts kept: RESULT step=8 value=11968 | {warnings}"),
        kind=KIND_SUMMARY,
    )
    supplement = fidelity_supplement([summary], "RESULT step=1 value=766457", max_tokens=120)
    lines = supplement.splitlines()
    assert lines[1] == "- 11968: RESULT step=8 value=11968"
    assert all(len(line) < 120 for line in lines)


@pytest.mark.parametrize("window", [16_000, 32_000])
@pytest.mark.parametrize("via", ["graph", "middleware", "lcel"])
def test_the_dependent_task_keeps_every_value_through_summary_merges(via: str, window: int) -> None:
    """Several compactions and merges of summaries that each keep only some values: the
    fidelity checks carry the rest, through every integration."""
    from langgraph.checkpoint.memory import InMemorySaver

    from langchain_compact import CompactionMiddleware, LLMSummarizer, create_compacting_agent
    from langchain_compact.demo import ContextReadingPolicy, DependentTask

    task = DependentTask(steps=window // 300)
    config = CompactionConfig(context_window=window)
    summarizer = LLMSummarizer(ExcerptSummarizer())
    policy, tools = ContextReadingPolicy(), task.tools()
    if via == "graph":
        agent = create_compacting_agent(
            policy, tools, config=config, summarizer=summarizer, checkpointer=InMemorySaver()
        )
    elif via == "middleware":
        agents = pytest.importorskip("langchain.agents")
        middleware = CompactionMiddleware(config=config, summarizer=summarizer)
        agent = agents.create_agent(policy, tools, middleware=[middleware])
    else:
        # A plain tool-calling loop whose model node sends the chain's compacted copy.
        from bench.peers import _react_graph

        compactor = compact_messages(config=config, summarizer=summarizer)
        agent = _react_graph(policy, tools, compactor.invoke)
    out = agent.invoke(
        {"messages": [HumanMessage(task.prompt(), id="task")]},
        {"configurable": {"thread_id": via}, "recursion_limit": 2_000},
    )
    verdict = task.check(out["messages"][-1].text)
    assert verdict.ok, out["messages"][-1].text[:200]
