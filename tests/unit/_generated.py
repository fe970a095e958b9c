"""Generated agent runs (issue 19, "Generated scenarios"): every shape of work, every window.

``generate(seed)`` picks a **shape** of work (what fills the context), a **window** (2k to 1M
tokens, log-uniform), a number of turns and an **integration** (the graph, the ``create_agent``
middleware or the LCEL transformer). ``run(scenario, tmp)`` drives it with a scripted chat
model that replays the generated assistant turns, reports usage the way a provider does
(counted with :func:`count_call`) and records every input it receives. ``check(record)``
judges the run with invariants computed here, independently of the package: its own
``o200k_base`` counter with a fixed per-message overhead, its own pairing check, its own idea
of the smallest context a run needs. Nothing in this module calls the package to judge.

Everything is deterministic per seed. Sizes are fractions of the window, capped in absolute
size so that a run stays fast: at large windows the caps bind, and those runs check that a
roomy context is left alone.
"""

from __future__ import annotations

import json
import math
import random
import tempfile
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

from _image_oracle import costs, detail_of, encoded, image_blocks, size_of
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import SkipValidation

from langchain_compact import ExtractiveSummarizer

SHAPES = (
    "assistant_text",  # the assistant's own long text per turn, small results
    "tool_args",  # write_file(path, content) with ~10k characters of code, short results
    "tiny_results",  # many turns of tiny results
    "huge_result",  # one result of up to 7x the window
    "parallel",  # parallel tool-call batches
    "cjk",  # Chinese text in results, task and assistant turns
    "human_obs",  # a text-command agent: tool output comes back as HumanMessages
    "images",  # human observations with image content blocks (screenshots)
    "tool_results",  # the classic shape: medium tool results
)
INTEGRATIONS = ("graph", "middleware", "lcel")
MIN_WINDOW, MAX_WINDOW = 2_000, 1_000_000
BANDS = ((2_000, "2k-8k"), (8_000, "8k-32k"), (32_000, "32k-128k"), (128_000, "128k-1M"))

#: Fixed overhead the counter adds per message (role and framing), per tool call (framing)
#: and per request (reply priming). An image costs what the larger of OpenAI's and
#: Anthropic's formulas says (``_image_oracle``): the provider is not named, so the package
#: must not count it below either (its ``detail: low`` lowers OpenAI's price only).
PER_MESSAGE = 4
PER_TOOL_CALL = 4
PER_REQUEST = 3
#: The room the package states for the reply: a twentieth of the window, at most 4,096.
REPLY_RESERVE_CAP = 4_096
#: What the smallest context allows for a condensed summary: a tenth of the window, at most
#: 2,000 tokens (the package's bound on one summary).
SUMMARY_CAP = 2_000
#: A digest of a result, or a stub of a call's arguments, in the smallest context (tokens).
DIGEST_TOKENS = 600
STUB_TOKENS = 60
#: Conservative margin: a run "must finish" only when its smallest context fits in this share
#: of the window; otherwise it "may stop".
MARGIN = 0.9
REPORT_USAGE = True

SYSTEM_PROMPT = (
    "You are a careful software agent. Work step by step, use the tools you are given, keep "
    "the user's constraints, and report the final result in one short paragraph."
)
STOP_KIND = "stop"
META_KEY = "langchain_compact"


def band_of(window: int) -> str:
    name = BANDS[0][1]
    for low, label in BANDS:
        if window >= low:
            name = label
    return name


def reply_reserve(window: int) -> int:
    return min(REPLY_RESERVE_CAP, window // 20)


# ----------------------------------------------------------------------------- counting


@lru_cache(maxsize=1)
def _encoding() -> Any:
    import tiktoken

    return tiktoken.get_encoding("o200k_base")


_TEXT_CACHE: dict[str, int] = {}


def text_tokens(text: str) -> int:
    n = _TEXT_CACHE.get(text)
    if n is None:
        n = len(_encoding().encode_ordinary(text))
        if len(_TEXT_CACHE) > 50_000:
            _TEXT_CACHE.clear()
        _TEXT_CACHE[text] = n
    return n


def content_text(content: Any) -> str:
    """The text of a message content (string or blocks), images left out."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "\n".join(parts)


def images_in(content: Any) -> int:
    if isinstance(content, str):
        return 0
    return sum(
        1
        for b in content or []
        if isinstance(b, dict) and b.get("type") in ("image_url", "image", "input_image")
    )


def image_tokens(content: Any) -> int:
    """The images of a content, each at the larger of the two providers' prices."""
    if isinstance(content, str):
        return 0
    total = 0
    for b in image_blocks(content):
        size = size_of(b) or (None, None)
        total += max(costs(size[0], size[1], detail_of(b)).values())
    return total


def message_tokens(message: BaseMessage) -> int:
    n = PER_MESSAGE + text_tokens(content_text(message.content))
    n += image_tokens(message.content)
    if isinstance(message, ToolMessage):
        n += text_tokens(message.tool_call_id) + text_tokens(message.name or "")
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            n += PER_TOOL_CALL + text_tokens(call["name"]) + text_tokens(call.get("id") or "")
            n += text_tokens(json.dumps(call["args"], ensure_ascii=False))
    return n


_SCHEMA_CACHE: dict[tuple[tuple[str, str], ...], int] = {}


def tools_tokens(tools: Sequence[Any]) -> int:
    key = tuple((str(getattr(t, "name", t)), str(getattr(t, "description", ""))) for t in tools)
    if key not in _SCHEMA_CACHE:
        schemas = [convert_to_openai_tool(t) for t in tools]
        _SCHEMA_CACHE[key] = text_tokens(json.dumps(schemas, ensure_ascii=False)) if tools else 0
    return _SCHEMA_CACHE[key]


def count_call(messages: Sequence[BaseMessage], tools: Sequence[Any]) -> int:
    """Tokens of one model call: every message, the tool schemas, the reply priming."""
    return PER_REQUEST + sum(message_tokens(m) for m in messages) + tools_tokens(tools)


# ----------------------------------------------------------------------------- text


_VOCAB = (
    "the service request handler returns a cached value when the index is warm and otherwise "
    "reads the table from disk builds the plan checks each constraint and writes a report "
    "about latency errors retries memory usage queue depth and the state of every worker"
)
_WORDS = tuple(_VOCAB.split())
_CJK = (
    "我们需要检查服务的状态并记录每一个错误然后重新启动工作进程数据库连接超时用户请求失败"
    "配置文件已经更新缓存命中率下降内存使用增加队列长度超过阈值日志显示任务完成部署成功"
)


def prose(rng: random.Random, tokens: int, tag: str) -> str:
    """English-like text of about ``tokens`` tokens, in lines, each line distinct."""
    lines, n = [], 0
    i = 0
    while n < tokens:
        words = rng.choices(_WORDS, k=rng.randint(8, 16))
        line = f"{tag} {i}: " + " ".join(words) + f" ({rng.randint(100, 99_999)})."
        lines.append(line)
        n += len(words) + 6
        i += 1
    return "\n".join(lines)


def code(rng: random.Random, chars: int, module: str) -> str:
    lines, size, i = [f"# module {module}", "import os", ""], 0, 0
    while size < chars:
        k = rng.randint(2, 97)
        block = [
            f"def {module}_handler_{i}(request, limit={k}):",
            f"    items = load_items(request, table='t_{module}_{i}', limit=limit)",
            f"    return [item for item in items if item.score > {rng.randint(1, 999)}]",
            "",
        ]
        lines += block
        size += sum(len(x) + 1 for x in block)
        i += 1
    return "\n".join(lines)


def log(rng: random.Random, tokens: int, name: str) -> str:
    lines = [f"== {name}: START job {rng.randint(1000, 9999)} =="]
    n, i = 0, 0
    while n < tokens:
        level = rng.choices(("INFO", "WARN", "ERROR"), (20, 2, 1))[0]
        lines.append(
            f"2026-03-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d} {level} "
            f"worker-{rng.randint(1, 8)} item={rng.randint(1, 10**6)} took={rng.randint(1, 900)}ms"
        )
        n += 27
        i += 1
    lines.append(f"== {name}: END status=done lines={i} checksum={rng.randint(10**7, 10**8)} ==")
    return "\n".join(lines)


def cjk(rng: random.Random, tokens: int, tag: str) -> str:
    lines, n, i = [], 0, 0
    while n < tokens:
        k = rng.randint(12, 30)
        lines.append(f"{tag}{i}：" + "".join(rng.choices(_CJK, k=k)) + "。")
        n += int(k * 0.9) + 4
        i += 1
    return "\n".join(lines)


def _png(rng: random.Random) -> str:
    """A small screenshot: a PNG of 32 to 400 pixels a side (at most 214 tokens an image)."""
    return encoded("png", rng.randint(32, 400), rng.randint(32, 400))


# ----------------------------------------------------------------------------- scenario


@dataclass(frozen=True)
class Call:
    name: str
    args: dict[str, Any]
    id: str
    result: str


@dataclass(frozen=True)
class Turn:
    """One assistant turn: its text, its tool calls (with their results) and, for
    text-command agents, the observation the environment sends back as a human message."""

    text: str
    calls: tuple[Call, ...] = ()
    observation: Any = None


@dataclass(frozen=True)
class Scenario:
    seed: int
    shape: str
    window: int
    integration: str
    task: str
    tool_names: tuple[str, ...]
    turns: tuple[Turn, ...]
    final: str
    archive_kind: str

    @property
    def band(self) -> str:
        return band_of(self.window)

    @property
    def observes(self) -> bool:
        return self.shape in ("human_obs", "images")

    def describe(self) -> str:
        return f"seed={self.seed} {self.shape} {self.integration} window={self.window}"


def _frac(rng: random.Random, window: int, low: float, high: float, cap: int) -> int:
    return max(20, min(cap, int(window * rng.uniform(low, high))))


def generate(
    seed: int,
    *,
    shape: str | None = None,
    window: int | None = None,
    integration: str | None = None,
    share: float | None = None,
) -> Scenario:
    """The scenario of ``seed``: shape and integration cycle with the seed (so any 27
    consecutive seeds cover every pair), window and sizes are drawn from it.

    ``shape``, ``window`` and ``integration`` pin those choices (the rest is still drawn from
    the seed); ``share`` pins the size of what fills the context, without the caps that keep
    generated runs fast: the assistant text per turn or the file written per call as a share
    of the window, or the huge result as a multiple of it."""
    rng = random.Random(seed)
    shape = shape or SHAPES[seed % len(SHAPES)]
    integration = integration or INTEGRATIONS[(seed // len(SHAPES)) % len(INTEGRATIONS)]
    drawn = int(math.exp(rng.uniform(math.log(MIN_WINDOW), math.log(MAX_WINDOW))))
    window = window or drawn
    w = window
    turns: list[Turn] = []
    task = "Task: go through the project step by step and report what you found."
    tools: tuple[str, ...] = ()

    def cid(i: int, j: int = 0) -> str:
        return f"call_{seed}_{i}_{j}"

    if shape == "assistant_text":
        tools = ("search",)
        drawn_share = rng.uniform(0.2, 0.6)  # an agent whose turns are of a similar size
        part, cap = (share, 10**9) if share else (drawn_share, 12_000)
        for i in range(rng.randint(4, 9)):
            text = prose(rng, _frac(rng, w, part * 0.8, part * 1.2, cap), f"plan {i}")
            result = f"3 hits for step {i}: docs/step_{i}.md, src/step_{i}.py, notes/{i}.txt"
            turns.append(Turn(text, (Call("search", {"query": f"step {i}"}, cid(i), result),)))
    elif shape == "tool_args":
        tools = ("write_file",)
        drawn_share = rng.uniform(0.15, 0.7)  # files of a similar size
        for i in range(rng.randint(3, 8)):
            most = rng.randint(8_000, 48_000) if share is None else 10**9
            part = drawn_share if share is None else share
            chars = min(most, int(w * 3 * part * rng.uniform(0.8, 1.2)))
            body = code(rng, max(200, chars), f"m{i}")
            path = f"src/pkg/module_{i}.py"
            args = {"path": path, "content": body}
            result = f"wrote {len(body)} bytes to {path}"
            turns.append(Turn(f"Writing {path}.", (Call("write_file", args, cid(i), result),)))
    elif shape == "tiny_results":
        tools = ("run",)
        for i in range(rng.randint(8, 14)):
            calls = tuple(
                Call(
                    "run", {"cmd": f"check {i}.{j}"}, cid(i, j), f"ok {i}.{j}: {rng.randint(1, 99)}"
                )
                for j in range(rng.randint(1, 2))
            )
            turns.append(Turn(f"Step {i}.", calls))
    elif shape == "huge_result":
        tools = ("run", "read_log")
        n = rng.randint(3, 6)
        big = rng.randrange(n)
        for i in range(n):
            if i == big:
                ratio = rng.uniform(1.5, 7.0)
                tokens = min(60_000, int(w * ratio)) if share is None else int(w * share)
                result = log(rng, tokens, "build.log")
                call = Call("read_log", {"name": "build.log"}, cid(i), result)
            else:
                result = prose(rng, _frac(rng, w, 0.01, 0.06, 800), f"out {i}")
                call = Call("run", {"cmd": f"make step{i}"}, cid(i), result)
            turns.append(Turn(f"Step {i}: reading the output.", (call,)))
    elif shape == "parallel":
        tools = ("read_file",)
        for i in range(rng.randint(2, 5)):
            calls = tuple(
                Call(
                    "read_file",
                    {"path": f"src/f{i}_{j}.py"},
                    cid(i, j),
                    code(rng, 4 * _frac(rng, w, 0.02, 0.12, 2_500), f"f{i}_{j}"),
                )
                for j in range(rng.randint(2, 8))
            )
            turns.append(Turn(f"Reading batch {i}.", calls))
    elif shape == "cjk":
        tools = ("read_file",)
        task = "任务：逐个检查项目文件，记录每个错误，最后给出简短的报告。"
        for i in range(rng.randint(3, 7)):
            result = cjk(rng, _frac(rng, w, 0.1, 0.5, 4_000), f"文件{i}")
            text = cjk(rng, _frac(rng, w, 0.01, 0.06, 600), f"计划{i}")
            turns.append(Turn(text, (Call("read_file", {"path": f"文档/{i}.md"}, cid(i), result),)))
    elif shape == "human_obs":
        task = "Task: you drive a terminal. Reply with one shell command per turn."
        for i in range(rng.randint(4, 10)):
            obs = "$ output\n" + log(rng, _frac(rng, w, 0.1, 0.6, 6_000), f"cmd{i}")
            turns.append(Turn(f"```bash\nmake step{i} && tail build_{i}.log\n```", (), obs))
    elif shape == "images":
        task = "Task: you operate a desktop app from screenshots. Reply with one action per turn."
        for i in range(rng.randint(3, 8)):
            text = prose(rng, _frac(rng, w, 0.05, 0.5, 3_000), f"screen {i}")
            blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
            for _ in range(rng.randint(1, 2)):
                url = "data:image/png;base64," + _png(rng)
                blocks.append({"type": "image_url", "image_url": {"url": url, "detail": "low"}})
            turns.append(
                Turn(f"click(x={rng.randint(0, 800)}, y={rng.randint(0, 600)})", (), blocks)
            )
    else:  # tool_results
        tools = ("read_file",)
        for i in range(rng.randint(4, 10)):
            result = code(rng, 3 * _frac(rng, w, 0.1, 0.5, 6_000), f"r{i}")
            turns.append(
                Turn(
                    f"Reading file {i}.", (Call("read_file", {"path": f"r{i}.py"}, cid(i), result),)
                )
            )
    archive_kind = "jsonl" if rng.random() < 0.5 else "store"
    return Scenario(
        seed=seed,
        shape=shape,
        window=window,
        integration=integration,
        task=task,
        tool_names=tools,
        turns=tuple(turns),
        final=f"FINAL REPORT {seed}: all {len(turns)} steps done.",
        archive_kind=archive_kind,
    )


# ----------------------------------------------------------------------------- fakes


@dataclass
class ModelState:
    """Shared by every copy of one scripted model: replies, cursor, inputs and tools seen."""

    replies: list[AIMessage]
    cursor: int = 0
    inputs: list[list[BaseMessage]] = field(default_factory=list)
    tools: list[Any] = field(default_factory=list)


class ScriptedModel(BaseChatModel):
    """Replays the scenario's assistant turns in order, reports usage the way a provider does
    (input counted with :func:`count_call`, tools included) and records every input."""

    state: Annotated[ModelState, SkipValidation()]

    @property
    def _llm_type(self) -> str:
        return "generated-scripted-model"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, Any]:
        self.state.tools = list(tools)
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        state = self.state
        state.inputs.append(list(messages))
        if state.cursor >= len(state.replies):
            raise RuntimeError("the scripted model was called after its last turn")
        reply = state.replies[state.cursor]
        state.cursor += 1
        used = count_call(messages, state.tools)
        out = message_tokens(reply)
        usage = {"input_tokens": used, "output_tokens": out, "total_tokens": used + out}
        message = reply.model_copy(update={"usage_metadata": usage}) if REPORT_USAGE else reply
        return ChatResult(generations=[ChatGeneration(message=message)])


def replies_of(scenario: Scenario) -> list[AIMessage]:
    out = []
    for i, turn in enumerate(scenario.turns):
        calls = [
            {"name": c.name, "args": c.args, "id": c.id, "type": "tool_call"} for c in turn.calls
        ]
        out.append(AIMessage(turn.text, tool_calls=calls, id=f"ai_{scenario.seed}_{i}"))
    out.append(AIMessage(scenario.final, id=f"ai_{scenario.seed}_final"))
    return out


_TOOL_DOCS = {
    "search": "Search the project for a query; returns matching paths.",
    "write_file": "Write content to the file at path (created or replaced).",
    "run": "Run a shell command and return its output.",
    "read_log": "Read a log file by name.",
    "read_file": "Read the file at path.",
}


def make_tools(scenario: Scenario) -> list[BaseTool]:
    """The scenario's tools: each returns the generated result of the call it answers, as a
    ToolMessage with a known id (``res_<call id>``)."""
    results = {c.id: c.result for t in scenario.turns for c in t.calls}

    def answer(name: str, tool_call_id: str) -> ToolMessage:
        return ToolMessage(
            results[tool_call_id], tool_call_id=tool_call_id, name=name, id=f"res_{tool_call_id}"
        )

    def search(query: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> ToolMessage:
        return answer("search", tool_call_id)

    def write_file(
        path: str, content: str, tool_call_id: Annotated[str, InjectedToolCallId]
    ) -> ToolMessage:
        return answer("write_file", tool_call_id)

    def run(cmd: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> ToolMessage:
        return answer("run", tool_call_id)

    def read_log(name: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> ToolMessage:
        return answer("read_log", tool_call_id)

    def read_file(path: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> ToolMessage:
        return answer("read_file", tool_call_id)

    funcs: dict[str, Callable[..., ToolMessage]] = {
        "search": search,
        "write_file": write_file,
        "run": run,
        "read_log": read_log,
        "read_file": read_file,
    }
    return [
        StructuredTool.from_function(funcs[n], name=n, description=_TOOL_DOCS[n])
        for n in scenario.tool_names
    ]


# ----------------------------------------------------------------------------- running


@dataclass
class RunRecord:
    scenario: Scenario
    inputs: list[list[BaseMessage]]
    tools: list[Any]
    finished: bool
    stopped: bool
    error: str | None
    archive: Any
    thread_id: str
    originals: dict[str, BaseMessage]
    """Every message the run produced (task, observations, replies, results), by id."""
    warned: list[str] = field(default_factory=list)


def _archive(scenario: Scenario, tmp: Path) -> Any:
    from langgraph.store.memory import InMemoryStore

    from langchain_compact import JsonlArchive, StoreArchive

    if scenario.archive_kind == "jsonl":
        return JsonlArchive(tmp / f"archive-{scenario.seed}")
    return StoreArchive(InMemoryStore())


def _is_stop(message: BaseMessage) -> bool:
    meta = (getattr(message, "response_metadata", None) or {}).get(META_KEY)
    return isinstance(meta, dict) and meta.get("kind") == STOP_KIND


def run(scenario: Scenario, tmp: Path | None = None) -> RunRecord:
    """Drive ``scenario`` through its integration; never raises (an error is recorded)."""
    from langchain_compact import CompactionConfig

    tmp = tmp or Path(tempfile.mkdtemp(prefix="gen-"))
    state = ModelState(replies=replies_of(scenario))
    model = ScriptedModel(state=state)
    tools = make_tools(scenario)
    archive = _archive(scenario, tmp)
    thread = f"gen-{scenario.seed}"
    config = CompactionConfig(context_window=scenario.window)
    task = HumanMessage(scenario.task, id=f"task_{scenario.seed}")
    originals: dict[str, BaseMessage] = {str(task.id): task}
    observations = [
        HumanMessage(t.observation, id=f"obs_{scenario.seed}_{i}")
        for i, t in enumerate(scenario.turns)
        if t.observation is not None
    ]
    for m in [*observations, *replies_of(scenario)]:
        originals[str(m.id)] = m
    for t in scenario.turns:
        for c in t.calls:
            originals[f"res_{c.id}"] = ToolMessage(
                c.result, tool_call_id=c.id, name=c.name, id=f"res_{c.id}"
            )
    error: str | None = None
    stopped = False
    final: BaseMessage | None = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if scenario.integration == "lcel":
                final, stopped = _run_lcel(scenario, model, tools, config, archive, thread, task)
            else:
                final, stopped = _run_agent(
                    scenario, model, tools, config, archive, thread, task, observations
                )
        except Exception as exc:  # recorded as a violation by check()
            error = f"{type(exc).__name__}: {exc}"[:500]
    finished = (
        error is None
        and not stopped
        and final is not None
        and final.text == scenario.final
        and state.cursor == len(state.replies)
    )
    return RunRecord(
        scenario=scenario,
        inputs=state.inputs,
        tools=state.tools,
        finished=finished,
        stopped=stopped,
        error=error,
        archive=archive,
        thread_id=thread,
        originals=originals,
        warned=[str(w.message)[:200] for w in caught],
    )


def _run_agent(
    scenario: Scenario,
    model: ScriptedModel,
    tools: list[BaseTool],
    config: Any,
    archive: Any,
    thread: str,
    task: HumanMessage,
    observations: list[HumanMessage],
) -> tuple[BaseMessage | None, bool]:
    from langgraph.checkpoint.memory import InMemorySaver

    # A command agent is invoked once per observation, on one thread: it needs a checkpointer.
    saver = InMemorySaver() if observations else None
    if scenario.integration == "graph":
        from langchain_compact import create_compacting_agent

        agent: Any = create_compacting_agent(
            model,
            tools,
            config=config,
            archive=archive,
            system_prompt=SYSTEM_PROMPT,
            checkpointer=saver,
            summarizer=ExtractiveSummarizer(),
        )
    else:
        from langchain.agents import create_agent

        from langchain_compact.middleware import CompactionMiddleware

        middleware = CompactionMiddleware(config=config, archive=archive, tools=tools)
        agent = create_agent(
            model=model,
            tools=tools,
            system_prompt=SYSTEM_PROMPT,
            middleware=[middleware],
            checkpointer=saver,
        )
    run_config = {"configurable": {"thread_id": thread}, "recursion_limit": 10_000}
    final: BaseMessage | None = None
    for message in [task, *observations]:  # one invoke per observation for command agents
        out = agent.invoke({"messages": [message]}, run_config)
        final = out["messages"][-1]
        if any(_is_stop(m) for m in out["messages"]):
            return final, True
    return final, False


def _run_lcel(
    scenario: Scenario,
    model: ScriptedModel,
    tools: list[BaseTool],
    config: Any,
    archive: Any,
    thread: str,
    task: HumanMessage,
) -> tuple[BaseMessage | None, bool]:
    from langchain_compact import MessageCompactor
    from langchain_compact.errors import ContextOverflowError

    compactor = MessageCompactor(config=config, archive=archive, thread_id=thread, tools=tools)
    bound = model.bind_tools(tools) if tools else model
    by_name = {t.name: t for t in tools}
    history: list[BaseMessage] = [SystemMessage(SYSTEM_PROMPT, id="system"), task]
    for i in range(len(scenario.turns) + 1):
        try:
            seen = compactor(history)
        except ContextOverflowError:
            return history[-1], True
        reply = bound.invoke(seen)
        history.append(reply)
        if i == len(scenario.turns):
            break
        turn = scenario.turns[i]
        for call in reply.tool_calls:
            history.append(by_name[call["name"]].invoke({**call, "type": "tool_call"}))
        if turn.observation is not None:
            history.append(HumanMessage(turn.observation, id=f"obs_{scenario.seed}_{i}"))
    return history[-1], False


# ----------------------------------------------------------------------------- invariants


@dataclass(frozen=True)
class Violation:
    seed: int
    shape: str
    integration: str
    window: int
    invariant: str
    detail: str
    call: int | None = None

    @property
    def band(self) -> str:
        return band_of(self.window)

    def as_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "shape": self.shape,
            "integration": self.integration,
            "window": self.window,
            "band": self.band,
            "invariant": self.invariant,
            "call": self.call,
            "detail": self.detail,
        }

    def __str__(self) -> str:
        at = f" call {self.call}" if self.call is not None else ""
        return (
            f"seed={self.seed} {self.shape}/{self.integration} window={self.window}{at}: "
            f"{self.invariant}: {self.detail}"
        )


def pairing_problems(messages: Sequence[BaseMessage]) -> list[str]:
    """Every AIMessage tool call (``tool_calls`` and ``invalid_tool_calls``) answered by a
    ToolMessage before the next non-tool message; no orphan or duplicate ToolMessage; no id
    twice in one message; a system message only at the start."""
    problems: list[str] = []
    open_ids: set[str] = set()
    answered: set[str] = set()
    for i, m in enumerate(messages):
        if isinstance(m, ToolMessage):
            if m.tool_call_id not in open_ids:
                problems.append(f"orphan ToolMessage {m.tool_call_id!r} at {i}")
            open_ids.discard(m.tool_call_id)
            answered.add(m.tool_call_id)
            continue
        if open_ids:
            problems.append(f"tool calls {sorted(open_ids)} unanswered before message {i}")
            open_ids = set()
        if isinstance(m, SystemMessage) and any(
            not isinstance(p, SystemMessage) for p in messages[:i]
        ):
            problems.append(f"system message at {i}, after other messages")
        if isinstance(m, AIMessage):
            for c in m.tool_calls:
                if not isinstance(c.get("args"), dict):
                    problems.append(f"tool call {c.get('id')!r} at {i} has non-dict args")
            # a malformed call is sent as a tool call too (langchain-openai), so it needs its
            # result; and one message's call ids are distinct (Anthropic)
            ids = [str(c.get("id")) for c in [*m.tool_calls, *m.invalid_tool_calls]]
            if len(set(ids)) < len(ids):
                problems.append(f"duplicate tool call ids at {i}: {sorted(ids)}")
            open_ids.update(ids)
    if open_ids:
        problems.append(f"tool calls {sorted(open_ids)} unanswered at the end")
    return problems


def empty_problems(messages: Sequence[BaseMessage]) -> list[str]:
    problems = []
    for i, m in enumerate(messages):
        text = content_text(m.content).strip()
        if isinstance(m, AIMessage):
            if not text and not m.tool_calls:
                problems.append(f"empty AIMessage without tool calls at {i}")
        elif not text and not images_in(m.content):
            problems.append(f"empty {m.type} message at {i}")
        if not isinstance(m.content, str):
            for b in m.content:
                if isinstance(b, dict) and b.get("type") == "text" and not str(b.get("text", "")):
                    problems.append(f"empty text block in {m.type} message at {i}")
    return problems


_CONVERTED: dict[tuple[Any, ...], str | None] = {}


def _fingerprint(value: Any) -> int:
    """A hash of a content or an argument value (a string's hash is cached by Python)."""
    if isinstance(value, str):
        return hash(value)
    if isinstance(value, dict):
        return hash(tuple((k, _fingerprint(v)) for k, v in sorted(value.items())))
    if isinstance(value, (list, tuple)):
        return hash(tuple(_fingerprint(v) for v in value))
    return hash(repr(value))


def _calls_fingerprint(message: BaseMessage) -> int:
    calls = getattr(message, "tool_calls", None) or []
    return hash(tuple((c.get("id"), c.get("name"), _fingerprint(c.get("args"))) for c in calls))


def conversion_problems(messages: Sequence[BaseMessage]) -> list[str]:
    """What ``langchain_openai`` cannot convert (each distinct message converted once)."""
    from langchain_openai.chat_models.base import _convert_message_to_dict

    problems = []
    for i, m in enumerate(messages):
        key = (type(m).__name__, m.id, _fingerprint(m.content), _calls_fingerprint(m))
        if key not in _CONVERTED:
            if len(_CONVERTED) > 20_000:
                _CONVERTED.clear()
            try:
                _convert_message_to_dict(m)
                _CONVERTED[key] = None
            except Exception as exc:
                _CONVERTED[key] = f"{type(exc).__name__}: {exc}"
        problem = _CONVERTED[key]
        if problem is not None:
            problems.append(f"message {i} ({m.type}) does not convert: {problem}"[:200])
    return problems


def _first_last(text: str) -> tuple[str, str]:
    lines = [x for x in text.splitlines() if x.strip()]
    return (lines[0].strip(), lines[-1].strip()) if lines else ("", "")


@dataclass(frozen=True)
class Budget:
    """The smallest context of each model call, computed from the run's own pieces."""

    fixed: int  # system prompt, tool schemas, the task, request priming
    summary: int
    reserve: int
    newest: tuple[int, ...]  # the newest turn before call k, reduced (0 for the first call)
    newest_ai: tuple[int, ...]  # only its assistant message, arguments stubbed

    def smallest(self, k: int) -> int:
        return self.fixed + self.summary + self.newest[k] + self.reserve


def budget(record: RunRecord) -> Budget:
    s = record.scenario
    fixed = count_call([SystemMessage(SYSTEM_PROMPT), HumanMessage(s.task)], record.tools)
    newest, newest_ai = [0], [0]
    for turn in s.turns:
        ai = PER_MESSAGE + text_tokens(turn.text)
        ai += sum(PER_TOOL_CALL + text_tokens(c.name) + STUB_TOKENS for c in turn.calls)
        rest = sum(
            min(
                message_tokens(ToolMessage(c.result, tool_call_id=c.id, name=c.name)), DIGEST_TOKENS
            )
            for c in turn.calls
        )
        if turn.observation is not None:
            obs = HumanMessage(turn.observation)
            rest += min(message_tokens(obs), DIGEST_TOKENS + image_tokens(obs.content))
        newest.append(ai + rest)
        newest_ai.append(ai)
    w = s.window
    return Budget(
        fixed, min(SUMMARY_CAP, w // 10), reply_reserve(w), tuple(newest), tuple(newest_ai)
    )


def must_finish(record: RunRecord) -> bool:
    """The smallest context of every call fits (with a margin): the run must finish."""
    b = budget(record)
    limit = MARGIN * record.scenario.window
    return all(b.smallest(k) <= limit for k in range(len(b.newest)))


def _same(a: BaseMessage, b: BaseMessage) -> bool:
    if a.content != b.content:
        return False
    if isinstance(a, AIMessage) and isinstance(b, AIMessage):
        return [(c["id"], c["args"]) for c in a.tool_calls] == [
            (c["id"], c["args"]) for c in b.tool_calls
        ]
    return True


def check(record: RunRecord) -> list[Violation]:
    """Every invariant violation of one run."""
    s = record.scenario
    out: list[Violation] = []

    def bad(invariant: str, detail: str, call: int | None = None) -> None:
        out.append(Violation(s.seed, s.shape, s.integration, s.window, invariant, detail, call))

    if record.error is not None:
        bad("crashed", record.error)
    b = budget(record)
    # 1. no call over the window; 2. no invalid provider input
    for k, seen in enumerate(record.inputs):
        tokens = count_call(seen, record.tools)
        if tokens > s.window:
            bad("over_window", f"{tokens} tokens sent to a {s.window}-token window", k)
        problems = pairing_problems(seen) + empty_problems(seen) + conversion_problems(seen)
        if problems:
            bad("invalid_input", "; ".join(problems[:3]), k)
    # 3. the run finishes whenever the smallest context fits
    if not record.finished and record.error is None and must_finish(record):
        how = "stopped" if record.stopped else "did not finish"
        worst = max(b.smallest(k) for k in range(len(b.newest)))
        bad(
            "stopped_but_fits",
            f"{how} after {len(record.inputs)} of {len(s.turns) + 1} calls; smallest "
            f"context {worst} <= {MARGIN} x {s.window}",
        )
    # 4. an unread result (a tool result, or a command agent's observation) reaches the model
    # whole when it fits, else as a digest with its first and last lines using its share
    for k, seen in enumerate(record.inputs):
        if k == 0 or k - 1 >= len(s.turns):
            continue
        _check_unread(record, b, k, seen, bad)
    # 5. every original removed from the context is recallable by id
    missing: dict[str, BaseMessage] = {}
    for k, seen in enumerate(record.inputs):
        present = {str(m.id): m for m in seen if m.id}
        texts = {content_text(m.content) for m in seen}
        for oid in _produced_before(record, k):
            original = record.originals[oid]
            shown = present.get(oid)
            if shown is not None and _same(shown, original):
                continue
            verbatim = content_text(original.content) in texts
            if shown is None and not isinstance(original, AIMessage) and verbatim:
                continue  # kept verbatim under another id (a pinned task)
            missing[oid] = original
    for oid, original in missing.items():
        problem = _recall_problem(record, oid, original)
        if problem:
            bad("not_recallable", problem)
    return out


def _unread_batch(
    record: RunRecord, k: int, seen: Sequence[BaseMessage]
) -> list[tuple[str, BaseMessage, BaseMessage | None]]:
    """(name, original, what call ``k`` showed of it) for what turn ``k - 1`` brought back."""
    s = record.scenario
    turn = s.turns[k - 1]
    by_call = {m.tool_call_id: m for m in seen if isinstance(m, ToolMessage)}
    by_id = {str(m.id): m for m in seen if m.id}
    out: list[tuple[str, BaseMessage, BaseMessage | None]] = [
        (c.id, record.originals[f"res_{c.id}"], by_call.get(c.id)) for c in turn.calls
    ]
    if turn.observation is not None:
        oid = f"obs_{s.seed}_{k - 1}"
        out.append((oid, record.originals[oid], by_id.get(oid)))
    return out


def _check_unread(
    record: RunRecord,
    b: Budget,
    k: int,
    seen: Sequence[BaseMessage],
    bad: Callable[[str, str, int | None], None],
) -> None:
    batch = _unread_batch(record, k, seen)
    if not batch:
        return
    s = record.scenario
    whole = sum(message_tokens(original) for _, original, _ in batch)
    room = s.window - b.reserve - b.fixed - b.newest_ai[k]
    fits = whole <= room - b.summary
    got = 0
    for name, original, shown in batch:
        if shown is None:
            bad("unread_missing", f"{name} is not in the input", k)
            continue
        got += message_tokens(shown)
        if shown.content == original.content:
            continue
        if fits:
            bad(
                "unread_not_whole",
                f"{name} ({message_tokens(original)} tokens, batch {whole}) fits in "
                f"{room - b.summary} but reached the model as {message_tokens(shown)} tokens",
                k,
            )
            continue
        text = content_text(shown.content)
        first, last = _first_last(content_text(original.content))
        if first not in text or last not in text:
            which = "first" if first not in text else "last"
            bad("unread_digest_lines", f"the digest of {name} lacks its {which} line", k)
    if not fits and got < min(whole, room // 4):
        bad(
            "unread_digest_short",
            f"an unread batch of {whole} tokens reached the model as {got} tokens, under a "
            f"quarter of the {room} tokens left after the fixed parts",
            k,
        )


def _produced_before(record: RunRecord, k: int) -> Iterable[str]:
    """Ids of the originals that existed before model call ``k``."""
    s = record.scenario
    yield f"task_{s.seed}"
    for i, turn in enumerate(s.turns[: max(0, k)]):
        yield f"ai_{s.seed}_{i}"
        for c in turn.calls:
            yield f"res_{c.id}"
        if turn.observation is not None:
            yield f"obs_{s.seed}_{i}"


def _recall_problem(record: RunRecord, oid: str, original: BaseMessage) -> str | None:
    archive, thread = record.archive, record.thread_id
    try:
        if isinstance(original, ToolMessage):
            hits = archive.search(thread_id=thread, tool_call_id=original.tool_call_id, limit=50)
        else:
            hits = archive.search(thread_id=thread, message_id=oid, limit=50)
    except Exception as exc:
        return f"{oid}: archive search failed: {type(exc).__name__}: {exc}"[:300]
    if any(_same(h.message, original) for h in hits):
        return None
    what = "not archived" if not hits else f"{len(hits)} hit(s), none equal to the original"
    return f"{type(original).__name__} {oid} was removed from the context and is {what}"


def run_and_check(seed: int, tmp: Path | None = None) -> tuple[RunRecord, list[Violation]]:
    record = run(generate(seed), tmp)
    return record, check(record)
