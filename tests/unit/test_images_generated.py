"""Issue 28, must show 2: generated runs with images of random formats, sizes, details and
block shapes, in tool results, in a human message in the middle of the run and in the task,
at windows from 4k to 200k tokens, through the graph nodes, the middleware and LCEL.

The fake provider counts every input with both providers' formulas (``_image_oracle``; text
with tiktoken o200k and OpenAI's published framing, ``_generated``), refuses an input over the
window by its own provider's count, and reports usage by it (in half of the runs). Checked
on every run: no call over the window by the provider's count, and without usage reports by
either provider's count (a refused call counts as one over the window), and every image
reaches the model whole on the first call after the message holding it was produced (the
newest images are never cleared or digested unread).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import pytest
from _generated import PER_REQUEST, image_tokens, message_tokens, prose, tools_tokens
from _image_oracle import FORMATS, FORMS, block, content_image_costs, costs
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.exceptions import ContextOverflowError as CoreOverflow
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from pydantic import SkipValidation

from langchain_compact import CompactionConfig, ExtractiveSummarizer

SEEDS = range(30)
INTEGRATIONS = ("graph", "middleware", "lcel")
PROVIDERS = ("openai", "anthropic")
MIN_WINDOW, MAX_WINDOW = 4_000, 200_000


def provider_count(messages: Sequence[BaseMessage], tools: Sequence[Any]) -> dict[str, int]:
    """Each provider's count of one call: text and framing as OpenAI's cookbook counts them,
    images by each provider's formula, tool schemas."""
    base = PER_REQUEST + tools_tokens(tools) if tools else PER_REQUEST
    total = {p: base for p in PROVIDERS}
    for m in messages:
        # message_tokens counts each image at the larger price: taken back here.
        text = message_tokens(m) - image_tokens(m.content)
        images = content_image_costs(m.content)
        for p in PROVIDERS:
            total[p] += text + images[p]
    return total


def _images(m: BaseMessage) -> list[Any]:
    if isinstance(m.content, str):
        return []
    return [b for b in m.content if isinstance(b, dict) and "image" in str(b.get("type"))]


# ----------------------------------------------------------------------------- scenario


@dataclass
class Scenario:
    seed: int
    window: int
    integration: str
    provider: str
    usage: bool
    task: Any
    middle: Any
    """The human message sent after the first part of the run (text and images)."""
    results: list[Any]
    first: int
    """How many of ``results`` the first part reads; the rest come after ``middle``."""

    def describe(self) -> str:
        return (
            f"seed {self.seed}: {self.integration}, window {self.window}, {self.provider}"
            f"{' with usage' if self.usage else ''}, {len(self.results)} results"
        )


#: Block shapes in tool results: LangGraph's ``ToolNode`` turns a result holding a Responses
#: ``input_image`` block into its JSON text, so that shape goes in human messages only.
RESULT_FORMS = tuple(f for f in FORMS if f != "input_image")


def _images_within(
    rng: random.Random, room: int, most: int, forms: Sequence[str] = FORMS
) -> list[dict[str, Any]]:
    """Up to ``most`` random images whose largest price together stays within ``room``."""
    out: list[dict[str, Any]] = []
    spent = 0
    for _ in range(most):
        fmt, form = rng.choice(FORMATS), rng.choice(forms)
        w, h = rng.randint(16, 3_000), rng.randint(16, 3_000)
        if fmt.startswith("webp-vp8") and fmt != "webp-vp8x":
            w, h = min(w, 16_383), min(h, 16_383)
        detail = rng.choice([None, "low", "high", "auto"])
        price = max(costs(w, h, detail).values())
        if spent + price > room:
            continue
        spent += price
        out.append(block(form, fmt, w, h, detail))
    return out


def generate(seed: int) -> Scenario:
    rng = random.Random(seed)
    # Stratified over the seeds: the windows cover 4k to 200k evenly on a log scale.
    where = (seed % len(SEEDS) + rng.random()) / len(SEEDS)
    window = int(MIN_WINDOW * (MAX_WINDOW / MIN_WINDOW) ** where)
    text_cap = min(20_000, window // 4)

    def content(tag: str, share: float, room: float, most: int, forms: Sequence[str]) -> list[Any]:
        tokens = max(20, min(text_cap, int(window * rng.uniform(0.01, share))))
        text = {"type": "text", "text": prose(rng, tokens, tag)}
        return [text, *_images_within(rng, int(window * room), most, forms)]

    task = [{"type": "text", "text": "Task: book the cheapest flight, step by step."}]
    if rng.random() < 0.6:
        task += _images_within(rng, window // 10, 1)
    results = [content(f"page {i}", 0.2, 0.3, 3, RESULT_FORMS) for i in range(rng.randint(4, 9))]
    return Scenario(
        seed=seed,
        window=window,
        integration=INTEGRATIONS[seed % 3],
        provider=rng.choice(PROVIDERS),
        usage=rng.random() < 0.5,
        task=task,
        middle=content("the user's new page", 0.05, 0.2, 2, FORMS),
        results=results,
        first=rng.randint(2, len(results) - 1),
    )


# ----------------------------------------------------------------------------- the provider


@dataclass
class Log:
    produced: list[tuple[str, Any]] = field(default_factory=list)
    """``(id, content)`` of each message with images, in the order it was produced."""
    seen_upto: int = 0
    """How many of ``produced`` an earlier call already had to show."""
    counts: list[dict[str, int]] = field(default_factory=list)
    refused: list[int] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    cursor: int = 0
    tools: list[Any] = field(default_factory=list)


class Provider(BaseChatModel):
    """Replays the run's replies; counts, refuses and reports as ``provider`` does."""

    scenario: Annotated[Scenario, SkipValidation()]
    log: Annotated[Log, SkipValidation()]

    @property
    def _llm_type(self) -> str:
        return "generated-image-provider"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        self.log.tools = list(tools)
        return self

    def _reply(self, k: int) -> AIMessage:
        s = self.scenario
        first = s.first
        if k < first:
            step = k
        elif k == first:
            return AIMessage("first part done", id="ai_part1")
        elif k <= len(s.results):
            step = k - 1
        else:
            return AIMessage("booked", id="ai_final")
        call = {"name": "page", "args": {"step": step}, "id": f"c{step}", "type": "tool_call"}
        return AIMessage("", tool_calls=[call], id=f"ai_{step}")

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        log, s = self.log, self.scenario
        counted = provider_count(messages, log.tools)
        if counted[s.provider] > s.window:
            log.refused.append(counted[s.provider])
            raise CoreOverflow(f"input of {counted[s.provider]} tokens over {s.window}")
        log.counts.append(counted)
        by_id = {m.id: m for m in messages}
        for mid, content in log.produced[log.seen_upto :]:
            seen = by_id.get(mid)
            if seen is None or seen.content != content:
                log.lost.append(f"call {len(log.counts)}: the images of {mid} did not reach it")
        log.seen_upto = len(log.produced)
        reply = self._reply(log.cursor)
        log.cursor += 1
        if s.usage:
            used = counted[s.provider]
            reply = reply.model_copy(
                update={
                    "usage_metadata": {
                        "input_tokens": used,
                        "output_tokens": 5,
                        "total_tokens": used + 5,
                    }
                }
            )
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _tool(scenario: Scenario, log: Log) -> BaseTool:
    def page(step: int, tool_call_id: Annotated[str, InjectedToolCallId]) -> ToolMessage:
        content = scenario.results[step]
        if _images(ToolMessage(content, tool_call_id="x")):
            log.produced.append((f"res_{step}", content))
        return ToolMessage(content, tool_call_id=tool_call_id, name="page", id=f"res_{step}")

    return StructuredTool.from_function(page, name="page", description="Open page step.")


def _human(content: Any, mid: str, log: Log) -> HumanMessage:
    message = HumanMessage(content, id=mid)
    if _images(message):
        log.produced.append((mid, content))
    return message


def run(scenario: Scenario, tmp: Path) -> Log:
    from langchain_compact import JsonlArchive

    log = Log()
    model = Provider(scenario=scenario, log=log)
    tool = _tool(scenario, log)
    config = CompactionConfig(context_window=scenario.window)
    archive = JsonlArchive(tmp)
    task = _human(scenario.task, "task", log)
    if scenario.integration == "lcel":
        from langchain_compact import compact_messages

        chain = compact_messages(config=config, archive=archive) | model.bind_tools([tool])
        history: list[BaseMessage] = [task]
        while True:
            reply = chain.invoke(history)
            history.append(reply)
            if reply.id == "ai_final":
                break
            if reply.id == "ai_part1":
                history.append(_human(scenario.middle, "middle", log))
            history += [tool.invoke(c) for c in reply.tool_calls]
        return log
    from langgraph.checkpoint.memory import InMemorySaver

    if scenario.integration == "graph":
        from langchain_compact import create_compacting_agent

        agent: Any = create_compacting_agent(
            model,
            [tool],
            config=config,
            archive=archive,
            checkpointer=InMemorySaver(),
            summarizer=ExtractiveSummarizer(),
        )
    else:
        from langchain.agents import create_agent

        from langchain_compact.middleware import CompactionMiddleware

        agent = create_agent(
            model=model,
            tools=[tool],
            middleware=[CompactionMiddleware(config=config, archive=archive)],
            checkpointer=InMemorySaver(),
        )
    run_config = {"configurable": {"thread_id": f"img-{scenario.seed}"}, "recursion_limit": 200}
    agent.invoke({"messages": [task]}, run_config)
    agent.invoke({"messages": [_human(scenario.middle, "middle", log)]}, run_config)
    return log


@pytest.mark.parametrize("seed", SEEDS)
def test_generated_images_never_go_over_the_window(seed: int, tmp_path: Path) -> None:
    scenario = generate(seed)
    log = run(scenario, tmp_path)
    problems = [f"refused at {n} tokens (window {scenario.window})" for n in log.refused]
    # With usage reports the package follows the provider that reports (another provider's
    # count of the same call may be larger); without, it knows no provider: both counts hold.
    judged = [scenario.provider] if scenario.usage else list(PROVIDERS)
    for i, counted in enumerate(log.counts, start=1):
        for provider in judged:
            n = counted[provider]
            if n > scenario.window:
                problems.append(f"call {i}: {n} tokens by {provider}'s count")
    problems += log.lost
    assert not problems, scenario.describe() + "\n" + "\n".join(problems)
    assert log.cursor == len(scenario.results) + 2, f"{scenario.describe()}: did not finish"
