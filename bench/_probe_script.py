"""The scripted long run of ``bench/probes.py``: planted facts, probe questions, exact checks.

One run is a task stated once (with hard constraints), then a generator of agent turns whose
tool calls and tool results are scripted (the agent model is never asked to act, only to
answer the probes). The facts are planted in the first turns, before any compaction:

* ``recall``: a value inside a long log result (``BUILD_ID=<10 hex digits>``);
* ``files``: a ``write_file`` and an ``edit_file`` call with their paths (created / edited);
* ``next_step``: the next step of the plan, stated by the user;
* ``decision``: a decision and its reason, stated in an assistant message;
* ``constraints``: the hard constraints of the task ("never modify tests/", ...).

After them come long filler logs (no fact in them), so the systems compact again and again.
Every answer is checked by regex against the planted values: no LLM judge.

:class:`FactKeepingSummarizer` (the ``--fake`` summarizer) keeps every fact line it is shown;
:class:`FactReader` (the ``--fake`` agent model) answers a probe with every fact line of its
context, i.e. a model that reads its context perfectly: with both, a score measures only
what the system kept.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field, SkipValidation

from bench.metrics import message_texts

KINDS = ("recall", "files", "next_step", "decision", "constraints")

SYSTEM_PROMPT = "You are a coding agent working in the shop-api repository. Use the tools."

#: (name, the sentence stated once in the task, regex an answer must match).
CONSTRAINTS = (
    ("tests", "Never modify anything under tests/.", r"tests/"),
    ("eur", "All prices must be in EUR.", r"\bEUR\b"),
    ("force_push", "Do not force-push to the release branch.", r"force[- ]?push"),
)

_MODULES = ("convert", "rates", "money", "currency", "fx_table", "quote")
_EDITED = ("cart", "invoice", "checkout_view", "totals", "basket", "receipt")
_SCRIPTS = ("migrate_v3", "backfill_rates", "reindex_orders", "seed_catalog", "sync_ledger")
_CHOICES = (
    ("Redis", "the rates API allows only 100 requests per hour", r"100 requests"),
    ("SQLite", "the container has no network access at build time", r"network access"),
    ("an LRU cache", "the rates change only once a day", r"once a day"),
)

PROBES = {
    "recall": "What was the BUILD_ID in the CI build log? Reply with the value only.",
    "files": (
        "Which files have you changed so far in this task, and how? One line per file: "
        "<path>: created or edited."
    ),
    "next_step": "What is the next step of the plan? Reply in one line.",
    "decision": "What did you decide for the rate cache, and why? Reply in one line.",
    "constraints": "List every hard constraint stated in the task, one per line.",
}

#: Lines that carry a planted fact (what the fake summarizer keeps and the fake reader reads).
FACT_LINE = re.compile(
    r"BUILD_ID=\w+|\b(?:created|edited) [\w/.\-]+\.py\b[^\n]*|Next step of the plan:[^\n]*"
    r"|Decision:[^\n]*|Never modify[^\n]*|All prices[^\n]*|Do not force-push[^\n]*"
)


@dataclass(frozen=True)
class Plant:
    """The planted values of one run."""

    build_id: str
    created: str
    edited: str
    script: str
    choice: str
    reason: str
    reason_re: str

    @classmethod
    def draw(cls, rng: random.Random) -> Plant:
        choice, reason, reason_re = rng.choice(_CHOICES)
        return cls(
            build_id="".join(rng.choice("0123456789abcdef") for _ in range(10)),
            created=f"src/pricing/{rng.choice(_MODULES)}.py",
            edited=f"src/checkout/{rng.choice(_EDITED)}.py",
            script=rng.choice(_SCRIPTS),
            choice=choice,
            reason=reason,
            reason_re=reason_re,
        )


def task_text() -> str:
    lines = "\n".join(f"- {sentence}" for _, sentence, _ in CONSTRAINTS)
    return (
        "Task: move the checkout service to the new pricing API, module by module.\n"
        f"Hard constraints for the whole task:\n{lines}"
    )


# --------------------------------------------------------------------------- the checker


def _line_with(answer: str, path: str, verbs: str) -> bool:
    return any(
        path in line and re.search(verbs, line, re.IGNORECASE) for line in answer.splitlines()
    )


def check(kind: str, answer: str, plant: Plant) -> dict[str, bool]:
    """Which items of probe ``kind`` the answer states (exact: substring / regex)."""
    if kind == "recall":
        return {"build_id": plant.build_id in answer.lower()}
    if kind == "files":
        return {
            "created": _line_with(answer, plant.created, r"creat|new|wrote|writ|add"),
            "edited": _line_with(answer, plant.edited, r"edit|modif|chang|updat"),
        }
    if kind == "next_step":
        return {"script": plant.script in answer}
    if kind == "decision":
        return {
            "choice": plant.choice.lower() in answer.lower(),
            "reason": re.search(plant.reason_re, answer, re.IGNORECASE) is not None,
        }
    if kind == "constraints":
        return {
            name: re.search(rx, answer, re.IGNORECASE) is not None for name, _, rx in CONSTRAINTS
        }
    raise ValueError(f"unknown probe kind {kind!r}; choose from {KINDS}")


# --------------------------------------------------------------------------- the script


_NOISE = (
    "{t} INFO worker-{w} compiled package pkg_{n} in {ms} ms",
    "{t} DEBUG cache hit ratio {r}% for shard {w}",
    "{t} INFO step {n}/400 finished, {ms} ms, exit 0",
    "{t} WARN slow request to /health took {ms} ms",
    "{t} INFO uploaded artifact chunk {n} ({ms} KiB)",
)


def _log(rng: random.Random, chars: int, planted: str | None = None) -> str:
    lines: list[str] = []
    size = 0
    while size < chars:
        t = f"12:{rng.randrange(60):02d}:{rng.randrange(60):02d}"
        line = rng.choice(_NOISE).format(
            t=t, w=rng.randrange(8), n=rng.randrange(1000), ms=rng.randrange(5, 900),
            r=rng.randrange(100),
        )  # fmt: skip
        lines.append(line)
        size += len(line) + 1
    if planted is not None:
        lines.insert(len(lines) // 2, planted)
    return "\n".join(lines)


def _call(name: str, args: dict[str, Any], i: int, text: str = "") -> AIMessage:
    return AIMessage(text, tool_calls=[{"name": name, "args": args, "id": f"call_{i}"}])


def _result(content: str, name: str, i: int) -> ToolMessage:
    return ToolMessage(content, tool_call_id=f"call_{i}", name=name)


Turn = tuple[AIMessage, list[BaseMessage]]
"""The agent's scripted reply and what arrives after it (tool results, maybe a user line)."""


def script(plant: Plant, rng: random.Random, *, log_chars: int = 4000) -> Iterator[Turn]:
    """The scripted turns: the planted facts first, then filler logs forever."""
    yield (
        _call("read_log", {"name": "ci-build"}, 0, "Reading the CI build log first."),
        [_result(_log(rng, log_chars, f"BUILD_ID={plant.build_id}"), "read_log", 0)],
    )
    yield (
        _call(
            "write_file", {"path": plant.created, "content": "def convert(x):\n    return x\n"}, 1
        ),
        [_result(f"created {plant.created} (2 lines)", "write_file", 1)],
    )
    yield (
        _call(
            "edit_file", {"path": plant.edited, "old": "total(x)", "new": "total(convert(x))"}, 2
        ),
        [
            _result(f"edited {plant.edited}: 1 occurrence replaced", "edit_file", 2),
            HumanMessage(
                f"Next step of the plan: run scripts/{plant.script}.py --dry-run before "
                "touching the database."
            ),
        ],
    )
    yield (
        _call(
            "read_log",
            {"name": "rates-api"},
            3,
            f"Decision: use {plant.choice} for the rate cache, because {plant.reason}.",
        ),
        [_result(_log(rng, log_chars), "read_log", 3)],
    )
    i = 4
    while True:
        chars = rng.randrange(log_chars // 2, log_chars * 3 // 2)
        yield (
            _call("read_log", {"name": f"job-{i}"}, i, f"Checking job-{i}."),
            [_result(_log(rng, chars), "read_log", i)],
        )
        i += 1


def opening() -> list[BaseMessage]:
    return [SystemMessage(SYSTEM_PROMPT), HumanMessage(task_text())]


def probe_input(model_input: Sequence[BaseMessage], kind: str) -> list[BaseMessage]:
    """The compacted context the system would send, with the probe question as a user turn."""
    return [*model_input, HumanMessage(f"Question (answer from the conversation): {PROBES[kind]}")]


# --------------------------------------------------------------------------- fake models


def fact_lines(messages: Sequence[BaseMessage]) -> list[str]:
    """Every planted-fact line of ``messages`` (tool calls read as what they did)."""
    found: dict[str, None] = {}
    for message in messages:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                path = call["args"].get("path")
                if call["name"] in ("write_file", "edit_file") and isinstance(path, str):
                    verb = "created" if call["name"] == "write_file" else "edited"
                    found.setdefault(f"{verb} {path}")
        for text in message_texts(message):
            for match in FACT_LINE.finditer(text):
                found.setdefault(match.group(0).strip())
    return list(found)


class FactKeepingSummarizer(BaseChatModel):
    """A summarizer model that keeps every fact line it is shown (``--fake``). ``log`` holds
    ``(input_chars, output_chars, seconds)`` per call, as the bench adapters read it."""

    provider: str = "openai"
    log: Annotated[list[tuple[int, int, float]], SkipValidation()] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "fact-keeping-summarizer"

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = self.provider
        return params

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        lines = fact_lines(messages)
        text = "Summary:\n" + ("\n".join(f"- {line}" for line in lines) or "- nothing")
        reply = AIMessage(text, response_metadata={"model_provider": self.provider})
        self.log.append((sum(len(str(m.content)) for m in messages), len(text), 0.0))
        return ChatResult(generations=[ChatGeneration(message=reply)])


class FactReader(BaseChatModel):
    """The ``--fake`` agent model: answers with every fact line of its context except the
    question (a model that reads its whole context perfectly)."""

    @property
    def _llm_type(self) -> str:
        return "fact-reader"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        text = "\n".join(fact_lines(messages[:-1])) or "I do not know."
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])


class LoggedChatModel(BaseChatModel):
    """A real chat model as the shared summarizer, logging ``(input_chars, output_chars,
    seconds)`` per call (what the bench adapters read to see a summarizer call)."""

    inner: Annotated[BaseChatModel, SkipValidation()]
    log: Annotated[list[tuple[int, int, float]], SkipValidation()] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return f"logged-{self.inner._llm_type}"

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        return self.inner._get_ls_params(stop=stop, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        t0 = time.perf_counter()
        reply = self.inner.invoke(messages, stop=stop, **kwargs)
        size = sum(len(str(m.content)) for m in messages)
        self.log.append((size, len(str(reply.content)), time.perf_counter() - t0))
        return ChatResult(generations=[ChatGeneration(message=reply)])
