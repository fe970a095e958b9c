"""Summarizers (docs/design.md, B5): sections and bounds, fidelity check, LLM call shape."""

from __future__ import annotations

import re
from typing import Any

import pytest
from _scenarios import ScriptedChatModel, play
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import FakeMessagesListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_compact import SummarizerError
from langchain_compact.budget import MIN_SUMMARY_TOKENS
from langchain_compact.demo import DependentTask
from langchain_compact.markers import KIND_CLEARED, KIND_SUMMARY, kind_of, with_meta
from langchain_compact.microcompact import clear_tool_results
from langchain_compact.summarizers import (
    DEFAULT_SUMMARY_PROMPT,
    SUMMARIZER_TAG,
    ExtractiveSummarizer,
    LLMSummarizer,
    Summarizer,
    fidelity_supplement,
)
from langchain_compact.tokens import approximate_tokens

SECTIONS = [
    "## 1. Goal and hard constraints",
    "## 2. Confirmed facts and data",
    "## 3. Decisions taken and why",
    "## 4. Status",
    "## 5. Other context",
]


def mixed_history() -> list[BaseMessage]:
    task = DependentTask(steps=4, payload_chars=1200)
    history = play(task, rounds=4)
    long_rules = (
        "Refactor the billing service. You must never change the public API. "
        "Keep the tests green at all times. " + "Background detail. " * 30
    )
    return [HumanMessage(long_rules, id="rules"), *history[1:]]


def cjk_history() -> list[BaseMessage]:
    msgs: list[BaseMessage] = [HumanMessage("任务：必须保留原始任务，不要删除日志。" * 40, id="h")]
    for k in range(1, 6):
        call = {"name": "read_log", "args": {"n": k}, "id": f"c{k}", "type": "tool_call"}
        msgs.append(AIMessage("", tool_calls=[call], id=f"a{k}"))
        body = "\n".join(f"日志第{i}行：模块加载完成，耗时很长很长很长" for i in range(30))
        msgs.append(ToolMessage(f"{body}\n结果：第{k}步完成", tool_call_id=f"c{k}", id=f"t{k}"))
    return msgs


def long_run(rounds: int) -> list[BaseMessage]:
    """``rounds`` distinct tool rounds (no two entries alike, so none is deduplicated)."""
    msgs: list[BaseMessage] = [HumanMessage("Audit every service. Never restart prod.", id="h")]
    for k in range(rounds):
        call = {"name": "check", "args": {"service": f"svc-{k}"}, "id": f"c{k}"}
        msgs.append(AIMessage(f"Checking svc-{k} next.", tool_calls=[call], id=f"a{k}"))
        body = f"svc-{k}: probing\n" + "detail line\n" * 5 + f"svc-{k}: healthy in {k * 3} ms"
        msgs.append(ToolMessage(body, tool_call_id=f"c{k}", name="check", id=f"t{k}"))
    return msgs


# --------------------------------------------------------------------------- extractive


@pytest.mark.parametrize("history", [mixed_history(), cjk_history()], ids=["ascii", "cjk"])
def test_extractive_has_the_five_sections_in_order(history: list[BaseMessage]) -> None:
    text = ExtractiveSummarizer().summarize(history, max_tokens=2000)
    positions = [text.find(s) for s in SECTIONS]
    assert all(p >= 0 for p in positions), positions
    assert positions == sorted(positions)
    assert isinstance(ExtractiveSummarizer(), Summarizer)


def test_extractive_keeps_constraints_calls_and_outcome_lines() -> None:
    history = mixed_history()
    text = ExtractiveSummarizer().summarize(history, max_tokens=2000)
    goal = text.split(SECTIONS[1])[0]
    assert "constraint: You must never change the public API." in goal
    task = DependentTask(steps=4, payload_chars=1200)
    for k, v in enumerate(task.expected_values(), 1):
        assert f"RESULT step={k} value={v}" in text
        assert f'"step": {k}' in text  # each call with its arguments
    assert "done: 4 tool call(s) returned" in text


async def test_extractive_is_deterministic() -> None:
    history = mixed_history()
    one = ExtractiveSummarizer().summarize(history, max_tokens=500)
    two = ExtractiveSummarizer().summarize([m.model_copy() for m in history], max_tokens=500)
    three = await ExtractiveSummarizer().asummarize(history, max_tokens=500)
    assert one == two == three


@pytest.mark.parametrize(
    ("name", "bound"),
    [
        ("ascii", 40),
        ("ascii", 150),
        ("ascii", 300),
        ("ascii", 600),
        ("ascii", 2000),
        ("cjk", 40),
        ("cjk", 150),
        ("cjk", 300),
        ("cjk", 600),
        ("cjk", 2000),
    ],
)
def test_extractive_respects_its_bound(name: str, bound: int) -> None:
    history = mixed_history() if name == "ascii" else cjk_history()
    text = ExtractiveSummarizer().summarize(history, max_tokens=bound)
    assert text
    assert approximate_tokens([HumanMessage(text)]) <= bound


def test_extractive_says_what_it_omitted() -> None:
    history = mixed_history() * 6
    text = ExtractiveSummarizer().summarize(history, max_tokens=300)
    assert "older entries omitted; archived" in text


def test_extractive_at_the_smallest_bound_keeps_the_values_whole() -> None:
    # The README's first snippet without tiktoken's files: a compaction squeezed to the
    # smallest bound summarised three run_step rounds (two results cleared before). Every
    # section's first entry did not fit, and the text was cut at the bound, mid-fact:
    # "run_step [call_step_16_...]: RESULT", the goal's filler line and no value at all.
    # The calls and status go first; the facts' call-id tags go before the values.
    task = DependentTask(steps=3)
    span = clear_tool_results(play(task, rounds=3)[1:], keep=0)
    assert [kind_of(m) for m in span if isinstance(m, ToolMessage)][:2] == [KIND_CLEARED] * 2
    text = ExtractiveSummarizer().summarize(span, max_tokens=MIN_SUMMARY_TOKENS)
    assert approximate_tokens([HumanMessage(text)]) <= MIN_SUMMARY_TOKENS
    for k, v in enumerate(task.expected_values(), 1):
        assert f"RESULT step={k} value={v}" in text, text
    assert not re.search(r"RESULT\s*$", text, re.M), text  # no fact line cut short
    # A larger bound keeps the sections and the tags, as before.
    roomy = ExtractiveSummarizer().summarize(span, max_tokens=400)
    assert "## 4. Status" in roomy and "[call_" in roomy


# --------------------------------------------------------------------------- fidelity


def test_fidelity_supplement_lists_missing_details_with_context() -> None:
    span: list[BaseMessage] = [
        HumanMessage(
            "Fix ticket QX-4821 in /srv/app/billing.py, see https://ci.example.com/run/77"
        ),
        AIMessage(
            "",
            tool_calls=[{"name": "grep", "args": {"pattern": "port 50123"}, "id": "c1"}],
        ),
        ToolMessage("header\nbody\nexit code 137 after 12.5 s", tool_call_id="c1", name="grep"),
    ]
    summary = "Working on QX-4821."
    text = fidelity_supplement(span, summary)
    assert text.startswith("## Supplement: details the summary left out (verbatim)")
    lines = text.splitlines()[1:]
    items = [ln[2:].split(": ", 1)[0] for ln in lines]
    assert "QX-4821" not in items, "already in the summary"
    for item in ["/srv/app/billing.py", "https://ci.example.com/run/77", "50123", "137", "12.5"]:
        assert item in items, item
    context = dict(ln[2:].split(": ", 1) for ln in lines)
    assert "exit code 137" in context["137"]
    assert "Fix ticket" in context["/srv/app/billing.py"]
    complete = summary + " /srv/app/billing.py https://ci.example.com/run/77 50123 137 12.5"
    assert fidelity_supplement(span, complete) == ""


def test_fidelity_supplement_is_bounded() -> None:
    span = [HumanMessage(" ".join(f"id-{i:05d} value {10_000 + i}" for i in range(200)))]
    text = fidelity_supplement(span, "nothing", max_items=10)
    assert len(text.splitlines()) == 1 + 10 + 1
    assert "more details: ask recall_archived" in text.splitlines()[-1]


# --------------------------------------------------------------------------- LLM summarizer


class _Tags(BaseCallbackHandler):
    def __init__(self) -> None:
        self.tags: list[list[str]] = []

    def on_chat_model_start(self, *args: Any, tags: list[str] | None = None, **kw: Any) -> None:
        self.tags.append(list(tags or []))


def test_llm_summarizer_temperature_zero_bound_and_nostream_tag() -> None:
    fake = ScriptedChatModel(replies=[AIMessage("## 1. Goal\nship it")], temperature=0.9)
    summarizer = LLMSummarizer(fake)
    handler = _Tags()
    from langchain_core.runnables import RunnableLambda

    # Called inside a parent run so the callback sees the summarizer call's tags.
    def call(_: object) -> str:
        return summarizer.summarize(mixed_history(), max_tokens=321)

    RunnableLambda(call).invoke(None, {"callbacks": [handler]})
    assert fake.log.temperatures == [0]
    assert fake.log.max_tokens == [321]
    assert fake.temperature == 0.9, "the user's model is not changed"
    assert any("nostream" in t and SUMMARIZER_TAG in t for t in handler.tags)


def test_llm_summarizer_works_with_models_without_those_fields() -> None:
    fake = FakeMessagesListChatModel(responses=[AIMessage("summary text")])
    assert LLMSummarizer(fake).summarize([HumanMessage("hi")], max_tokens=100) == "summary text"


def test_llm_summarizer_default_request_is_instructions_plus_transcript() -> None:
    fake = ScriptedChatModel(replies=[AIMessage("ok summary")])
    history = mixed_history()
    LLMSummarizer(fake).summarize(history, max_tokens=200)
    (sent,) = fake.log.inputs
    assert [type(m) for m in sent] == [SystemMessage, HumanMessage]
    assert sent[0].content == DEFAULT_SUMMARY_PROMPT.replace("{max_tokens}", "200")
    assert "<conversation>" in sent[1].text and "run_step" in sent[1].text


def test_llm_summarizer_fork_mode_reuses_the_prefix_and_asks_last() -> None:
    fake = ScriptedChatModel(replies=[AIMessage("forked summary")])
    tools = DependentTask(steps=2).tools()
    history = mixed_history()
    summarizer = LLMSummarizer(fake, fork=True, tools=tools, system_prompt="You are the agent.")
    assert summarizer.summarize(history, max_tokens=300) == "forked summary"
    (sent,) = fake.log.inputs
    assert isinstance(sent[0], SystemMessage) and sent[0].content == "You are the agent."
    assert sent[1:-1] == history, "the agent's history verbatim, as the cached prefix"
    assert isinstance(sent[-1], HumanMessage)
    assert "Summarize the conversation above now" in sent[-1].text
    assert "## 1. Goal and hard constraints" in sent[-1].text
    assert [[t.name for t in ts] for ts in fake.log.bound_tools] == [["run_step"]]


@pytest.mark.parametrize(
    ("reply", "match"),
    [
        (AIMessage("", tool_calls=[{"name": "run_step", "args": {}, "id": "x"}]), "tool call"),
        (AIMessage("   "), "empty text"),
        (AIMessage("word " * 2000), "over its bound"),
    ],
)
async def test_llm_summarizer_refuses_bad_replies(reply: AIMessage, match: str) -> None:
    summarizer = LLMSummarizer(GenericFakeChatModel(messages=iter([reply, reply])))
    with pytest.raises(SummarizerError, match=match):
        summarizer.summarize([HumanMessage("hi")], max_tokens=100)
    with pytest.raises(SummarizerError, match=match):
        await summarizer.asummarize([HumanMessage("hi")], max_tokens=100)


# --------------------------------------------------------------------------- scale


def _measured_chars(history: list[BaseMessage], monkeypatch: pytest.MonkeyPatch) -> int:
    """Characters the extractive summarizer hands to the token counter for ``history``."""
    import langchain_compact._render as render_module
    import langchain_compact.summarizers as summarizers_module

    seen = [0]

    def counting(messages: list[BaseMessage], **kw: Any) -> int:
        seen[0] += sum(len(m.text) for m in messages)
        return approximate_tokens(messages, **kw)

    for module in (render_module, summarizers_module):
        monkeypatch.setattr(module, "approximate_tokens", counting, raising=False)
    ExtractiveSummarizer().summarize(history, max_tokens=300)
    return seen[0]


def test_extractive_measures_a_linear_amount_of_text(monkeypatch: pytest.MonkeyPatch) -> None:
    # Structural, not timed: the old fitting loop re-rendered and re-measured the whole
    # summary once per dropped entry, so doubling the history quadrupled the text measured.
    chars_small = _measured_chars(long_run(300), monkeypatch)
    chars_double = _measured_chars(long_run(600), monkeypatch)
    assert chars_double <= 2.5 * chars_small, (chars_small, chars_double)


def test_extractive_drops_the_same_entries_as_one_at_a_time_fitting() -> None:
    # The reference is the old algorithm (drop, re-render, re-measure), on a small input.
    from langchain_compact._render import fit_sections

    def reference(sections: list[tuple[str, list[str]]], bound: int) -> str:
        sections = [(t, list(items)) for t, items in sections]
        dropped = {t: 0 for t, _ in sections}

        def render() -> str:
            parts = []
            for title, items in sections:
                shown = items[:1]
                if dropped[title]:
                    shown.append(f"({dropped[title]} older entries omitted; archived)")
                parts.append(f"## {title}\n" + "\n".join(f"- {i}" for i in shown + items[1:]))
            return "\n".join(parts)

        text = render()
        while approximate_tokens([HumanMessage(text)]) > bound:
            shrinkable = [(t, items) for t, items in sections if len(items) > 1]
            assert shrinkable
            title, items = max(shrinkable, key=lambda s: sum(len(i) for i in s[1]))
            del items[1]
            dropped[title] += 1
            text = render()
        return text

    sections = [
        (f"{n}. section", [f"entry {n}.{i} " + "word " * ((i * 7 + n) % 13) for i in range(40)])
        for n in range(1, 6)
    ]
    sections[2][1].extend("长的中文条目" * (i % 5 + 1) for i in range(30))
    # 145: just over the smallest rendering (every section down to its first entry and the
    # omitted line), as 120 was under 3.6 characters per token; that rendering is 141
    # tokens by the piece-based estimate, so a lower bound leaves the reference nothing to
    # drop.
    for bound in (145, 250, 400, 700, 1200):
        copy = [(t, list(items)) for t, items in sections]
        assert fit_sections(copy, bound) == reference(sections, bound), bound


# --------------------------------------------------------------------------- non-text blocks

PNG_B64 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5E"
    "rkJggg=="
)
PAYLOAD = PNG_B64 * 200  # ~20 KB of base64 that must never reach a prompt


def image_history() -> list[BaseMessage]:
    return [
        HumanMessage(
            content=[
                {"type": "text", "text": "Why does this chart dip?"},
                {"type": "image_url", "image_url": {"url": "https://cdn.example.com/q3.png"}},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PAYLOAD}"}},
            ],
            id="h1",
        ),
        AIMessage(
            "",
            tool_calls=[{"name": "fetch_report", "args": {"q": 3}, "id": "c1"}],
            id="a1",
        ),
        ToolMessage(
            content=[
                {"type": "text", "text": "report attached"},
                {"type": "file", "file_id": "file-7Qx2", "filename": "q3.pdf"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/jpeg", "data": PAYLOAD},
                },
            ],
            tool_call_id="c1",
            name="fetch_report",
            id="t1",
        ),
        AIMessage("The dip is the outage of week 32.", id="a2"),
    ]


def test_extractive_summary_keeps_image_and_file_references() -> None:
    text = ExtractiveSummarizer().summarize(image_history(), max_tokens=2000)
    assert "[image: https://cdn.example.com/q3.png]" in text
    assert "[image: data URL, image/png, " in text and "KB, sha256 " in text
    assert "[file: q3.pdf, file id file-7Qx2]" in text
    assert "[image: inline, image/jpeg, " in text
    assert PNG_B64[:40] not in text, "no base64 payload in a summary"


def test_llm_summarizer_prompt_references_images_without_payloads() -> None:
    fake = ScriptedChatModel(replies=[AIMessage("ok summary")])
    LLMSummarizer(fake).summarize(image_history(), max_tokens=200)
    (sent,) = fake.log.inputs
    prompt = sent[1].text
    assert "[image: https://cdn.example.com/q3.png]" in prompt
    assert "[file: q3.pdf, file id file-7Qx2]" in prompt
    assert "[image: data URL, image/png, " in prompt
    assert PNG_B64[:40] not in prompt


def test_identical_payloads_get_identical_references() -> None:
    from langchain_compact._render import block_reference

    one = block_reference({"type": "image", "base64": PAYLOAD, "mime_type": "image/png"})
    two = block_reference({"type": "image", "base64": PAYLOAD, "mime_type": "image/png"})
    other = block_reference({"type": "image", "base64": PAYLOAD[:-4], "mime_type": "image/png"})
    assert one == two != other
    assert block_reference({"type": "text", "text": "x"}) is None
    assert block_reference({"type": "audio_clip"}) == "[audio_clip block]"


# ----------------------------------------------------------------- hard constraints kept

SUBTASK = (
    "Original task: a 20-step dependent computation.\nTotal steps: 20\nStarting value: 43414\n"
    "Rule: for step k, call run_step(step=k, previous=<value of step k-1>); step 1 uses the "
    "starting value as previous. Each call prints a long log that ends with the line "
    "`RESULT step=<k> value=<v>`.\nHard constraint: the final report must begin with "
    "`REPORT QH-2853` and then list every step's value as `step K = V`, one line per step, "
    "steps 1 to 20."
)
CONSTRAINT = (
    "Hard constraint: the final report must begin with `REPORT QH-2853` and then list every "
    "step's value as `step K = V`, one line per step, steps 1 to 20."
)


def _worked(task: str, steps: int, first: int = 1) -> list[BaseMessage]:
    msgs: list[BaseMessage] = [HumanMessage(task, id="sub")]
    for k in range(first, first + steps):
        call = {"name": "run_step", "args": {"step": k, "previous": 43414}, "id": f"c{k}"}
        msgs.append(AIMessage("", tool_calls=[call], id=f"a{k}"))
        log = "log line\n" * 30 + f"RESULT step={k} ticket=QX-{k * 1111}"
        msgs.append(ToolMessage(log, tool_call_id=f"c{k}", name="run_step", id=f"t{k}"))
    return msgs


@pytest.mark.parametrize("bound", [80, 120, 200])
def test_a_tight_summary_keeps_every_constraint_sentence_whole(bound: int) -> None:
    """The goal section goes last: the other sections' entries go first, and the user's
    clipped words are cut shorter, but the constraint sentence stays whole (it was dropped,
    and the user's words cut mid-sentence, when the summary was tight)."""
    text = ExtractiveSummarizer().summarize(_worked(SUBTASK, 3), max_tokens=bound)
    assert "constraint: " + CONSTRAINT in text
    assert approximate_tokens([HumanMessage(text)]) <= bound


def test_a_constraint_sentence_is_never_clipped() -> None:
    long_rule = (
        "You must write the report to /srv/out/report.md with one line per service, naming "
        + ", ".join(f"service-{k}" for k in range(40))
        + ", and never restart any of them."
    )
    task = "Audit the fleet. " + "Background detail. " * 25 + long_rule
    text = ExtractiveSummarizer().summarize(_worked(task, 2), max_tokens=2000)
    assert "constraint: " + long_rule in text


def test_a_merge_keeps_the_constraints_of_the_summaries_it_merges() -> None:
    """A dense merge drops facts before the goal section's lines, and never a constraint."""
    summarizer = ExtractiveSummarizer()
    first = summarizer.summarize(_worked(SUBTASK, 3), max_tokens=2000)
    later = [summarizer.summarize(_worked("", 8, first)[1:], max_tokens=2000) for first in (4, 12)]
    summaries = [
        with_meta(HumanMessage(t, id=f"s{i}"), kind=KIND_SUMMARY)
        for i, t in enumerate([first, *later])
    ]
    merged = summarizer.summarize(summaries, max_tokens=120)
    assert CONSTRAINT in merged
    assert "older entries omitted" in merged  # facts went instead


def test_constraints_past_the_bound_go_whole_oldest_first_and_the_bound_holds() -> None:
    msgs: list[BaseMessage] = []
    for k in range(300):
        rule = f"You must never touch shard {k}."
        msgs += [HumanMessage(f"Request {k}: " + "Background detail. " * 25 + rule)]
        msgs.append(AIMessage(f"ok {k}"))
    text = ExtractiveSummarizer().summarize(msgs, max_tokens=200)
    assert approximate_tokens([HumanMessage(text)]) <= 200
    assert "constraint: You must never touch shard 299." in text  # the newest stays
    assert "older entries omitted; archived" in text
    kept = [ln for ln in text.splitlines() if ln.startswith("- constraint: ")]
    assert kept and all(ln.endswith(".") for ln in kept)  # none cut mid-sentence
