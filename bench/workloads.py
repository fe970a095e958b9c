"""The benchmark's workloads, all deterministic.

* :func:`load_transcripts`: the shared agent transcripts (``../shared/data/trajectories``, else
  the subset in ``tests/data/trajectories``), replayed turn by turn.
* :func:`long_history`: transcripts concatenated to N messages (decision overhead at 50 /
  500 / 5,000 messages).
* :func:`synthetic_run`: a long agent run (>= 300 model calls) with large tool outputs,
  constraints stated once at the start, facts planted along the way (in user, assistant and
  tool messages) and Chinese content.
* :func:`chinese_texts`: the Chinese seed articles (``../shared/seeds``), for counting error.

``LC_TRAJECTORY_DIR`` and ``LC_SEEDS_DIR`` override the data locations.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)

_SHARED = Path(__file__).resolve().parents[2] / "shared"
_SUBSET = Path(__file__).resolve().parents[1] / "tests" / "data" / "trajectories"
_FULL = _SHARED / "data" / "trajectories"
# The full set when it is beside the checkout, else the subset the repository ships.
TRAJECTORY_DIR = Path(
    os.environ.get("LC_TRAJECTORY_DIR", _FULL if any(_FULL.glob("*.jsonl")) else _SUBSET)
)
SEEDS_DIR = Path(os.environ.get("LC_SEEDS_DIR", _SHARED / "seeds"))


# --------------------------------------------------------------------------- transcripts


def load_transcript(path: Path) -> list[BaseMessage]:
    """One transcript as messages with ids ``f"{stem}-{i}"``; tool results named after their
    call (as a LangGraph ``ToolNode`` names them)."""
    names: dict[str, str] = {}
    dicts: list[dict[str, Any]] = []
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    for i, line in enumerate(lines):
        raw = json.loads(line)
        d: dict[str, Any] = {
            "role": raw["role"],
            "content": raw.get("content") or "",
            "id": f"{path.stem}-{i}",
        }
        if raw.get("tool_calls"):
            d["tool_calls"] = []
            for call in raw["tool_calls"]:
                names[call["id"]] = call["function"]["name"]
                d["tool_calls"].append(
                    {
                        "id": call["id"],
                        "name": call["function"]["name"],
                        "args": json.loads(call["function"]["arguments"] or "{}"),
                        "type": "tool_call",
                    }
                )
        if raw.get("tool_call_id"):
            d["tool_call_id"] = raw["tool_call_id"]
            d["name"] = names.get(raw["tool_call_id"], "tool")
        dicts.append(d)
    return list(convert_to_messages(dicts))


def load_transcripts(limit: int | None = None) -> dict[str, list[BaseMessage]]:
    """Every transcript of :data:`TRAJECTORY_DIR` by file stem (sorted; ``limit`` first)."""
    paths = sorted(TRAJECTORY_DIR.glob("*.jsonl"))
    if not paths:
        raise FileNotFoundError(
            f"no transcripts in {TRAJECTORY_DIR}; put ../shared beside the checkout or set "
            "LC_TRAJECTORY_DIR"
        )
    if limit is not None:
        paths = paths[:limit]
    return {p.stem: load_transcript(p) for p in paths}


def call_points(messages: Sequence[BaseMessage]) -> list[int]:
    """Indices of the assistant messages: each is one model call of the replay."""
    return [i for i, m in enumerate(messages) if isinstance(m, AIMessage) and i > 0]


def original_task(messages: Sequence[BaseMessage]) -> str:
    """The first user message (the task), for the task-retention check."""
    for m in messages:
        if isinstance(m, HumanMessage):
            return str(m.content)
    return ""


def original_task_id(messages: Sequence[BaseMessage]) -> str | None:
    """The id of the first user message (the task)."""
    for m in messages:
        if isinstance(m, HumanMessage):
            return m.id
    return None


def long_history(transcripts: dict[str, list[BaseMessage]], n: int) -> list[BaseMessage]:
    """At least ``n`` messages: transcripts concatenated (repeated as needed) behind the first
    one's system message, with fresh message and tool-call ids (unique across transcripts
    and laps: providers' ids are, and a reused one is a broken pairing the package repairs)."""
    pool = [
        (t, m)
        for t, msgs in enumerate(transcripts.values())
        for m in msgs
        if not isinstance(m, SystemMessage)
    ]
    first = next(iter(transcripts.values()))
    out: list[BaseMessage] = [m for m in first[:1] if isinstance(m, SystemMessage)]
    lap = 0
    while len(out) < n:
        for t, m in pool:
            k = len(out)
            update: dict[str, Any] = {"id": f"h{k}"}
            if isinstance(m, AIMessage) and m.tool_calls:
                update["tool_calls"] = [{**c, "id": f"{c['id']}~{lap}.{t}"} for c in m.tool_calls]
            if isinstance(m, ToolMessage):
                update["tool_call_id"] = f"{m.tool_call_id}~{lap}.{t}"
            out.append(m.model_copy(update=update))
        lap += 1
    return out


def chinese_texts() -> dict[str, str]:
    """The Chinese seed articles by file name."""
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(SEEDS_DIR.glob("*.txt"))}


# --------------------------------------------------------------------------- synthetic run


@dataclass
class SyntheticRun:
    """A scripted long agent run and what it must keep."""

    messages: list[BaseMessage]
    constraints: list[str]
    """Constraint lines stated once, in the first user message."""
    facts: list[dict[str, Any]] = field(default_factory=list)
    """Planted facts: ``{"value", "where" (user/assistant/tool), "call", "text"}``."""

    @property
    def calls(self) -> int:
        return len(call_points(self.messages))


CONSTRAINTS = (
    "Never run database migrations against the production cluster pg-prod-7.",
    "All amounts in the final report must be in EUR, rounded to cents.",
    "Do not open more than 3 pull requests at the same time.",
    "所有运行日志必须保留在 /var/log/agent-run 目录下，不得删除。",
)

_LOG_EN = (
    "[{p:3d}%] Building CXX object src/{mod}/{fn}_{n}.cc.o",
    "tests/{mod}/test_{fn}.py::test_{fn}_{n} PASSED [{p:3d}%]",
    "WARNING {mod}: deprecated call {fn}() in src/{mod}/{fn}.py:{line}",
    "INFO worker-{w} fetched shard {n}/{tot} ({kb} KiB) in {ms} ms",
    "GC pause {ms}ms, heap {kb}MB -> {line}MB (worker-{w})",
    '  File "src/{mod}/{fn}.py", line {line}, in {fn}',
    "Collecting {pkg}=={a}.{b}.{n}",
    "ok {n} - {mod}.{fn} # time={ms}ms",
)
_LOG_ZH = (
    "警告：模块 {mod} 的缓存已过期，重新构建耗时 {ms} 毫秒",
    "信息：分片 {n}/{tot} 校验通过（{kb} KiB），工作进程 worker-{w}",
    "错误：调用 {fn}() 超时，第 {n} 次重试将在 {ms} 毫秒后进行",
    "提示：测试用例 test_{fn}_{n} 已跳过（需要 GPU）",
)
_MODS = ("core", "io", "net", "parser", "cache", "auth", "sched", "storage", "billing", "rpc")
_FNS = ("encode", "flush", "retry", "resolve", "merge", "index", "render", "commit", "load")
_PKGS = ("urllib3", "pydantic", "orjson", "anyio", "httpcore", "numpy", "attrs", "idna")
_TOOLS = ("run_tests", "build", "read_log", "grep_repo", "query_metrics")


def _log(rng: random.Random, chars: int, zh_share: float) -> list[str]:
    lines: list[str] = []
    size = 0
    while size < chars:
        table = _LOG_ZH if rng.random() < zh_share else _LOG_EN
        line = rng.choice(table).format(
            p=rng.randint(0, 100),
            mod=rng.choice(_MODS),
            fn=rng.choice(_FNS),
            n=rng.randint(1, 999),
            line=rng.randint(10, 2400),
            w=rng.randint(1, 8),
            tot=rng.randint(999, 4096),
            kb=rng.randint(4, 9000),
            ms=rng.randint(1, 999),
            pkg=rng.choice(_PKGS),
            a=rng.randint(0, 3),
            b=rng.randint(0, 40),
        )
        lines.append(line)
        size += len(line) + 1
    return lines


def synthetic_run(calls: int = 320, *, seed: int = 11, facts: int = 12) -> SyntheticRun:
    """A release-engineering agent run with ``calls`` model calls.

    Each model call is an assistant tool call answered by a large log (1,500 to 9,000
    characters, about 15% of the lines Chinese; every fifth log mostly Chinese). Every 40
    calls the user adds a short instruction (every other one in Chinese); every 9 calls the
    assistant writes a short progress note. ``facts`` facts with unique values are planted
    evenly between call 10 and call ``calls - 15``, rotating between a user message, an
    assistant note and a line in the middle of a tool output.
    """
    rng = random.Random(seed)
    constraints = list(CONSTRAINTS)
    task = (
        "Task: prepare release 4.2 of the billing service. Run the test suites module by "
        "module, fix or quarantine failures, rebuild the artifacts and write a final report "
        "with the cost of the CI minutes used.\nHard constraints (stated once):\n"
        + "\n".join(constraints)
    )
    messages: list[BaseMessage] = [
        SystemMessage(
            "You are a release-engineering agent. Use the tools to build, test and inspect "
            "the repository. Be precise; report numbers exactly.",
            id="syn-sys",
        ),
        HumanMessage(task, id="syn-task"),
    ]
    plant_at = {round(10 + k * (calls - 25) / max(1, facts - 1)): k for k in range(facts)}
    planted: list[dict[str, Any]] = []
    for call in range(1, calls + 1):
        k = plant_at.get(call)
        where = ("user", "assistant", "tool")[k % 3] if k is not None else None
        value = f"FX-{rng.randint(10000, 99999)}" if k is not None else ""
        if k is not None and k % 4 == 3:
            value = f"银河-{rng.randint(1000, 9999)}"
        if call % 40 == 0 or where == "user":
            if where == "user":
                text = (
                    f"备注：请记住，本次发布的审批编号是 {value}，最终报告里要引用。"
                    if k is not None and k % 2
                    else f"For later: the change-approval ticket for this release is {value}; "
                    "quote it in the final report."
                )
                planted.append({"value": value, "where": "user", "call": call, "text": text})
            elif (call // 40) % 2:
                text = "请继续，先处理 billing 模块的失败用例，然后再重新构建。"
            else:
                text = "Keep going; prioritise the flaky network tests before rebuilding."
            messages.append(HumanMessage(text, id=f"syn-u{call}"))
        content = ""
        if where == "assistant":
            content = (
                f"Noted: the root cause of the flaky retry test is a clock skew bug; the "
                f"tracking id is {value}."
            )
            planted.append({"value": value, "where": "assistant", "call": call, "text": content})
        elif call % 9 == 0:
            content = f"Progress: {call} steps done; continuing with the next module."
        tool = _TOOLS[call % len(_TOOLS)]
        mod = _MODS[call % len(_MODS)]
        cid = f"syn-call-{call}"
        messages.append(
            AIMessage(
                content,
                id=f"syn-a{call}",
                tool_calls=[
                    {
                        "name": tool,
                        "args": {"module": mod, "run": call},
                        "id": cid,
                        "type": "tool_call",
                    }
                ],
            )
        )
        zh_share = 0.7 if call % 5 == 0 else 0.15
        lines = _log(rng, rng.randint(1_500, 9_000), zh_share)
        if where == "tool":
            fact_line = f"NOTE artifact signing key id for this build: {value}"
            lines.insert(len(lines) // 2, fact_line)
            planted.append({"value": value, "where": "tool", "call": call, "text": fact_line})
        lines.append(f"EXIT status={rng.choice((0, 0, 0, 1))} run={call} module={mod}")
        messages.append(
            ToolMessage("\n".join(lines), tool_call_id=cid, name=tool, id=f"syn-t{call}")
        )
    messages.append(HumanMessage("Now write the final report.", id="syn-final"))
    messages.append(AIMessage("(final report)", id="syn-a-final"))
    return SyntheticRun(messages=messages, constraints=constraints, facts=planted)
