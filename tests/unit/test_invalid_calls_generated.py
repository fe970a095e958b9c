"""Generated histories with malformed calls, duplicate ids and id-less usage reports
(issue 31, must-show 2).

Each seed builds one history the way local models and hand-built transcripts make them:
``invalid_tool_calls`` (with or without an id) answered by langchain's error result or not
at all, call ids numbered per message (``call_0`` in every turn, or twice in one message)
answered once or twice, messages without ids, ``AIMessage`` usage reports, tool results of
every size, at a window from 2k to 16k tokens. Every model input the LCEL chain
(``compact_messages``) and the core (:class:`~langchain_compact.core.Compactor`) produce
must be valid for OpenAI's and Anthropic's payload rules, as their own converters send it
(:mod:`_payload`), and a second identical call never raises where the first did not.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from _payload import payload_problems
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.store.memory import InMemoryStore

from langchain_compact import CompactionConfig, ContextOverflowError, StoreArchive, compact_messages
from langchain_compact.core import Compactor

SEEDS = range(60)
WINDOWS = (2_000, 4_000, 8_000, 16_000)
WORDS = [
    *("build", "test", "deploy", "config", "error", "warning", "parser", "value", "step"),
    *("result", "file", "path", "module", "request", "token", "cache", "index", "table"),
    *("row", "column", "commit", "branch", "merge", "status", "ok", "failed"),
]


def _text(rng: random.Random, words: int) -> str:
    lines, line = [], []
    for _ in range(words):
        line.append(rng.choice(WORDS) if rng.random() < 0.8 else str(rng.randint(0, 99_999)))
        if len(line) >= 12:
            lines.append(" ".join(line))
            line = []
    lines.append(" ".join(line) or "done")
    return "\n".join(lines)


def _maybe_id(rng: random.Random, label: str) -> str | None:
    return label if rng.random() < 0.5 else None


def generate(seed: int) -> tuple[list[BaseMessage], int]:
    """A history and its window: deterministic per seed."""
    rng = random.Random(seed)
    window = rng.choice(WINDOWS)
    scheme = rng.choice(("unique", "per_message", "same_in_message"))
    out: list[BaseMessage] = []
    if rng.random() < 0.5:
        out.append(SystemMessage("You are a build agent.", id=_maybe_id(rng, "sys")))
    out.append(HumanMessage("Task: " + _text(rng, 30), id=_maybe_id(rng, "task")))
    chars = sum(len(m.text) for m in out)
    for t in range(rng.randint(2, 16)):
        calls, invalid = [], []
        for j in range(rng.choice((0, 1, 1, 1, 2, 3))):
            cid = {"unique": f"c{t}_{j}", "per_message": f"call_{j}", "same_in_message": "call_0"}
            calls.append({"name": "run", "args": {"cmd": _text(rng, 3)}, "id": cid[scheme]})
        for j in range(rng.choice((0, 0, 1, 1, 2))):
            cid = rng.choice((f"bad{t}_{j}", f"call_{len(calls) + j}", None))
            args = '{"cmd": "' + _text(rng, 2)
            invalid.append({"name": "run", "args": args, "id": cid, "error": None})
        usage = None
        if rng.random() < 0.6:  # a provider's report of this turn's input, roughly right
            tokens = int(chars / 4 * rng.uniform(0.8, 1.4)) + 200
            usage = {"input_tokens": tokens, "output_tokens": 30, "total_tokens": tokens + 30}
        text = _text(rng, rng.choice((0, 5, 40))) if rng.random() < 0.7 else ""
        if not (text or calls or invalid):
            text = "Thinking."
        out.append(
            AIMessage(
                text,
                tool_calls=calls,
                invalid_tool_calls=invalid,
                usage_metadata=usage,  # type: ignore[arg-type]
                id=_maybe_id(rng, f"a{t}"),
            )
        )
        for c in calls:
            for _ in range(rng.choice((0, 1, 1, 1, 1, 1, 1, 1, 1, 2))):
                size = rng.choice((5, 40, 200, 800, 2_000))
                out.append(
                    ToolMessage(
                        _text(rng, size),
                        tool_call_id=c["id"],
                        name="run",
                        id=_maybe_id(rng, f"r{t}_{len(out)}"),
                    )
                )
        for c in invalid:
            if c["id"] and rng.random() < 0.7:  # langchain's create_agent answer
                out.append(
                    ToolMessage(
                        f"Tool call run with id {c['id']} could not be executed - arguments "
                        "were malformed or truncated.",
                        tool_call_id=c["id"],
                        name="run",
                        status="error",
                        id=_maybe_id(rng, f"e{t}_{len(out)}"),
                    )
                )
        if rng.random() < 0.2:
            out.append(HumanMessage("Go on: " + _text(rng, 8), id=_maybe_id(rng, f"h{t}")))
        chars = sum(len(m.text) for m in out)
    return out, window


def _call(fn: Any, *args: Any) -> tuple[list[BaseMessage] | None, BaseException | None]:
    try:
        return list(fn(*args)), None
    except ContextOverflowError as exc:  # the history cannot fit: a legitimate answer
        return None, exc


def _check(what: str, results: list[tuple[list[BaseMessage] | None, BaseException | None]]) -> None:
    """Every output valid for both providers; no call after the first raises unless it did."""
    raised = results[0][1] is not None
    for k, (out, error) in enumerate(results, 1):
        assert raised or error is None, f"{what}: call {k} raised {error!r}, call 1 did not"
        if out is not None:
            assert payload_problems(out) == [], f"{what}: call {k}"


def _config(window: int) -> CompactionConfig:
    return CompactionConfig(context_window=window)


@pytest.mark.parametrize("seed", SEEDS)
def test_generated_history_reaches_the_model_valid_and_a_retry_never_raises(seed: int) -> None:
    history, window = generate(seed)
    chain = compact_messages(config=_config(window), archive=StoreArchive(InMemoryStore()))
    first = _call(chain.invoke, history)
    again = _call(chain.invoke, history)
    fed_back = _call(chain.invoke, first[0]) if first[0] is not None else first
    _check(f"seed {seed}, LCEL at {window}", [first, again, fed_back])
    core = Compactor(config=_config(window), archive=StoreArchive(InMemoryStore()))
    turns = [_call(lambda h: core.turn(h, "t").messages, history) for _ in range(2)]
    _check(f"seed {seed}, Compactor at {window}", turns)


def test_the_generator_covers_what_it_claims() -> None:
    seen: dict[str, int] = dict.fromkeys(
        (
            "answered malformed",
            "unanswered malformed",
            "id-less malformed",
            "duplicate in one message",
            "reused across messages",
            "id-less usage report",
        ),
        0,
    )
    for seed in SEEDS:
        history, _ = generate(seed)
        answered = {m.tool_call_id for m in history if isinstance(m, ToolMessage)}
        used: set[str] = set()
        for m in history:
            if not isinstance(m, AIMessage):
                continue
            ids = [c["id"] for c in m.tool_calls] + [c["id"] for c in m.invalid_tool_calls]
            for c in m.invalid_tool_calls:
                key = (
                    "id-less"
                    if not c["id"]
                    else "answered"
                    if c["id"] in answered
                    else "unanswered"
                )
                seen[f"{key} malformed"] += 1
            real = [i for i in ids if i]
            seen["duplicate in one message"] += len(real) > len(set(real))
            seen["reused across messages"] += bool(used & set(real))
            used |= set(real)
            seen["id-less usage report"] += m.id is None and m.usage_metadata is not None
    assert all(seen.values()), seen
