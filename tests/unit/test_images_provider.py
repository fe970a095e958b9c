"""Issue 28, "Images at their real price": the image formula of the provider the model
belongs to, read from the chat model an integration is given (``_get_ls_params``, through
``bind_tools`` and the other wrappers), carried by the counter, and used alike by the
estimate and by the exact count that confirms it.

Two ways a single formula for every model goes wrong, each through the graph nodes, the
``create_agent`` middleware and LCEL, without usage reports (every image count is then the
package's own):

* **below the provider's**: a patch-priced OpenAI model (``gpt-4.1-mini``: 32-pixel patches
  times 1.62) pays 1,620 tokens for a 1280x800 screenshot, more than the 1,366 the largest of
  the tile and Anthropic formulas gives it. On a501e0a the package counted 1,366 and calls
  went out over the window (the generated runs below, windows 4k to 12k);
* **far above it**: ``detail="low"`` screenshots cost an OpenAI model 85 tokens each; counted
  at 1,366 the first reduction fired at a third of the trigger, clearing results that fit.

The provider's costs come from ``_image_oracle`` (written from the providers' documents,
independently of ``langchain_compact._images``); text is counted with tiktoken o200k.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Any

import pytest
from _image_oracle import (
    anthropic_cost,
    data_url,
    image_blocks,
    openai_cost,
    patch_cost,
    size_of,
)
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.exceptions import ContextOverflowError as CoreOverflow
from langchain_core.language_models import BaseChatModel, FakeListChatModel
from langchain_core.language_models.chat_models import LangSmithParams
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import InjectedToolCallId, StructuredTool
from pydantic import Field

from langchain_compact import CompactionConfig, ExtractiveSummarizer
from langchain_compact._images import LARGEST, OPENAI, pricing_of_model
from langchain_compact.tokens import (
    ApproximateCounter,
    TiktokenCounter,
    approximate_tokens,
    precise_counter,
    pricing_of,
    resolve_counter,
)

_TEXT = TiktokenCounter(encoding="o200k_base")
TURNS = 8
INTEGRATIONS = ("graph", "middleware", "lcel")


def test_patch_formula_matches_openais_example() -> None:
    assert patch_cost(1800, 2400, 1.0) == 1_452
    assert patch_cost(1024, 1024, 1.0) == 1_024


MODELS: dict[str, tuple[str, str]] = {
    # name the test uses -> (ls_provider, ls_model_name)
    "gpt-4.1-mini": ("openai", "gpt-4.1-mini"),
    "gpt-4o": ("openai", "gpt-4o"),
    "claude": ("anthropic", "claude-sonnet-4-5"),
}


def provider_image_cost(block: dict[str, Any], model: str) -> int:
    size = size_of(block)
    w, h = size if size else (None, None)
    detail = (block.get("image_url") or {}).get("detail") if "image_url" in block else None
    if model == "gpt-4.1-mini":
        return patch_cost(w, h, 1.62) if w and h else math.ceil(1_536 * 1.62)
    if model == "gpt-4o":
        return openai_cost(w, h, detail)
    return anthropic_cost(w, h)


def provider_count(messages: Sequence[BaseMessage], model: str) -> int:
    """The provider's count of an input: its text by o200k, its images by its formula."""
    total = 0
    for m in messages:
        if isinstance(m.content, str):
            total += _TEXT([m])
            continue
        text = [b for b in m.content if not (isinstance(b, dict) and "image" in str(b.get("type")))]
        total += _TEXT([m.model_copy(update={"content": text})])
        total += sum(provider_image_cost(b, model) for b in image_blocks(m.content))
    return total


class Shots:
    """The screenshot tool of one run: ``per_result`` 1280x800 PNGs a result at ``detail``."""

    def __init__(self, per_result: int, detail: str | None, rows: int = 60) -> None:
        self.per_result, self.detail, self.rows = per_result, detail, rows

    def content(self, step: int) -> list[Any]:
        image: dict[str, Any] = {"url": data_url("png", 1280, 800)}
        if self.detail:
            image["detail"] = self.detail
        text = f"step {step}: the page at /checkout/{step} loaded. " + "Seat map row. " * self.rows
        return [{"type": "text", "text": text}] + [
            {"type": "image_url", "image_url": image} for _ in range(self.per_result)
        ]

    def tool(self) -> StructuredTool:
        def screenshot(step: int, tool_call_id: Annotated[str, InjectedToolCallId]) -> ToolMessage:
            return ToolMessage(
                self.content(step), tool_call_id=tool_call_id, name="screenshot", id=f"s{step}"
            )

        return StructuredTool.from_function(
            screenshot, name="screenshot", description="Screenshots of the browser."
        )


class BrowserModel(BaseChatModel):
    """Asks for a screenshot each turn, then answers; counts and refuses as ``model``'s
    provider does; reports no usage (every count is the package's own)."""

    model: str = "gpt-4o"
    window: int = 8_000
    turns: int = TURNS
    shots: Any = None
    inputs: list[list[BaseMessage]] = Field(default_factory=list)
    sizes: list[int] = Field(default_factory=list)
    refused: list[int] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "browser-fake"

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        provider, name = MODELS[self.model]
        return LangSmithParams(ls_provider=provider, ls_model_name=name, ls_model_type="chat")

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        tokens = provider_count(messages, self.model)
        if tokens > self.window:
            self.refused.append(tokens)
            raise CoreOverflow(f"prompt is too long: {tokens} tokens > {self.window} maximum")
        self.inputs.append(list(messages))
        self.sizes.append(tokens)
        step = len(self.sizes)
        if step <= self.turns:
            calls = [{"name": "screenshot", "args": {"step": step}, "id": f"c{step}"}]
            msg = AIMessage("", tool_calls=calls, id=f"ai_{step}")
        else:
            msg = AIMessage("done", id="ai_end")
        return ChatResult(generations=[ChatGeneration(message=msg)])


def run(integration: str, model: BrowserModel, tmp_path: Any) -> list[BaseMessage]:
    tool = model.shots.tool()
    config = CompactionConfig(context_window=model.window)
    task = HumanMessage("Buy the cheapest flight.", id="task")
    if integration == "graph":
        from langchain_compact.graph import create_compacting_agent

        agent = create_compacting_agent(
            model, [tool], config=config, archive=None, summarizer=ExtractiveSummarizer()
        )
        return list(agent.invoke({"messages": [task]})["messages"])
    if integration == "middleware":
        from langchain.agents import create_agent

        from langchain_compact.middleware import CompactionMiddleware

        middleware = CompactionMiddleware(
            config=config, model=model, archive=None, summarizer=ExtractiveSummarizer()
        )
        agent = create_agent(model=model, tools=[tool], middleware=[middleware])
        return list(agent.invoke({"messages": [task]})["messages"])
    from langchain_compact import JsonlArchive, compact_messages

    chain = compact_messages(
        config=config,
        model=model,
        archive=JsonlArchive(tmp_path),
        summarizer=ExtractiveSummarizer(),
    ) | model.bind_tools([tool])
    history: list[BaseMessage] = [task]
    while True:
        reply = chain.invoke(history)
        history.append(reply)
        if not reply.tool_calls:
            return history
        history += [tool.invoke({**c, "type": "tool_call"}) for c in reply.tool_calls]


# ------------------------------------------------------------------- the model's pricing


class _Named(FakeListChatModel):
    provider: str = ""
    name_: str = ""

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        return LangSmithParams(ls_provider=self.provider, ls_model_name=self.name_)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self.bind(tools=list(tools), **kwargs)  # a RunnableBinding, as real models do


@pytest.mark.parametrize(
    ("provider", "name", "kind", "multiplier"),
    [
        ("openai", "gpt-4o", "openai", 1.0),
        ("openai", "gpt-4.1-mini", "openai-patch", 1.62),
        ("openai", "o4-mini-2025-04-16", "openai-patch", 1.72),
        ("azure", "my-deployment", "openai", 1.0),
        ("anthropic", "claude-sonnet-4-5", "anthropic", 1.0),
        ("bedrock", "anthropic.claude-3-5-sonnet-20240620-v1:0", "anthropic", 1.0),
        ("ollama", "llava:13b", "largest", 1.0),
        ("google_genai", "gemini-2.5-flash", "largest", 1.0),
    ],
)
def test_the_pricing_follows_the_models_provider(
    provider: str, name: str, kind: str, multiplier: float
) -> None:
    model = _Named(responses=["ok"], provider=provider, name_=name)
    for wrapped in (
        model,
        model.bind_tools([]),
        model.bind(stop=["x"]),
        model.with_retry(),
        model.with_config(tags=["t"]).with_retry(),
        model.with_fallbacks([FakeListChatModel(responses=["ok"])]),
    ):
        pricing = pricing_of_model(wrapped)
        assert (pricing.kind, pricing.multiplier) == (kind, multiplier), type(wrapped).__name__


def test_a_model_that_names_nothing_is_priced_at_the_largest() -> None:
    assert pricing_of_model(FakeListChatModel(responses=["ok"])) == LARGEST
    assert pricing_of_model(None) == LARGEST


def test_resolve_counter_prices_the_packages_counters_only() -> None:
    gpt = _Named(responses=["ok"], provider="openai", name_="gpt-4o")
    assert resolve_counter(approximate_tokens, gpt) == ApproximateCounter(OPENAI)
    assert resolve_counter(approximate_tokens, None) is approximate_tokens
    assert resolve_counter(approximate_tokens, FakeListChatModel(responses=["x"])) is (
        approximate_tokens
    )
    plain = TiktokenCounter(encoding="o200k_base")
    priced = resolve_counter(plain, gpt)
    assert isinstance(priced, TiktokenCounter) and priced.pricing == OPENAI
    assert plain.pricing == LARGEST, "the user's counter itself is left as it was"
    claude = TiktokenCounter("claude-sonnet-4-5")  # the user named a model: theirs wins
    assert resolve_counter(claude, gpt) is claude

    def mine(messages: Sequence[BaseMessage]) -> int:
        return len(messages)

    assert resolve_counter(mine, gpt) is mine


def test_the_confirming_count_prices_images_as_the_estimate_does() -> None:
    low = {"type": "image_url", "image_url": {"url": data_url("png", 1280, 800), "detail": "low"}}
    message = HumanMessage([{"type": "text", "text": "look"}, low])
    estimate = ApproximateCounter(OPENAI)
    exact = precise_counter(pricing_of(estimate))
    assert exact is not None and exact.pricing == OPENAI
    assert exact([message]) - exact([HumanMessage("look")]) == 85
    assert estimate([message]) - estimate([HumanMessage("look")]) == 85
    base = precise_counter()
    assert base is not None and base.pricing == LARGEST
    assert base([message]) - base([HumanMessage("look")]) == max(85, anthropic_cost(1280, 800))


# ------------------------------------------------------------------------------ the runs


def _checked(model: BrowserModel, history: list[BaseMessage]) -> None:
    assert model.refused == [], f"calls over the {model.window}-token window: {model.refused}"
    assert history[-1].text == "done"
    for step, seen in enumerate(model.inputs[1:], start=1):  # the newest screenshots whole
        newest = [m for m in seen if isinstance(m, ToolMessage) and m.id == f"s{step}"]
        assert newest and newest[0].content == model.shots.content(step), f"call {step + 1}"


GENERATED = [
    (integration, window, per_result)
    for integration in INTEGRATIONS
    for window in range(4_000, 12_001, 1_000)
    for per_result in (1, 2, 3)
]


@pytest.mark.parametrize(("integration", "window", "per_result"), GENERATED)
def test_a_patch_priced_model_never_goes_over_the_window(
    integration: str, window: int, per_result: int, tmp_path: Any
) -> None:
    """On a501e0a (every image at the largest of the tile and Anthropic formulas, 1,366 a
    1280x800 screenshot, where gpt-4.1-mini pays 1,620) 23 of these 45 runs sent a call over
    the window."""
    if per_result * patch_cost(1280, 800, 1.62) + 500 > window * 0.6:
        pytest.skip("one result alone does not leave room for the task and a reply")
    model = BrowserModel(model="gpt-4.1-mini", window=window, shots=Shots(per_result, None))
    _checked(model, run(integration, model, tmp_path))


def _whole(model: BrowserModel, seen: list[BaseMessage]) -> int:
    """The provider's count of ``seen`` with every cleared screenshot result put back whole."""
    restored = [
        m.model_copy(update={"content": model.shots.content(int(str(m.id)[1:]))})
        if isinstance(m, ToolMessage) and str(m.id).startswith("s")
        else m
        for m in seen
    ]
    return provider_count(restored, model.model)


@pytest.mark.parametrize("integration", INTEGRATIONS)
def test_low_detail_screenshots_do_not_fire_the_first_reduction_early(
    integration: str, tmp_path: Any
) -> None:
    """gpt-4o, three ``detail="low"`` screenshots a result (85 tokens each): the first call
    whose input differs from the whole history comes when the whole history, by OpenAI's
    count, is at least 90% of the trigger. On a501e0a (1,366 an image) it came at about a
    third of it."""
    model = BrowserModel(model="gpt-4o", window=16_000, turns=14, shots=Shots(3, "low", 280))
    _checked(model, run(integration, model, tmp_path))
    trigger = CompactionConfig(context_window=model.window).trigger_tokens
    assert trigger is not None
    for seen in model.inputs:
        whole = _whole(model, seen)
        if provider_count(seen, model.model) < whole:  # the first reduced call
            assert whole >= 0.9 * trigger, f"first reduction at {whole} of a {trigger} trigger"
            break
    else:
        pytest.fail("the run never reduced its context: make the run longer")
