"""Agent scenarios run through the real agent builders (not replays).

* :func:`twelve_turns`: a scripted model calls a tool 12 times (each result about 3,100
  tokens) and then answers, in an 8k window: through ``create_agent`` with
  ``CompactionMiddleware`` (ours), with ``SummarizationMiddleware`` and with deepagents'
  context middleware (:func:`bench.peers.deepagents_agent`), and through
  ``create_compacting_agent``. Did the run finish, how many model calls did it make, did a
  fresh result reach the model cut or cleared?
* :class:`ToolOnlyPolicy`: the dependent task's context-reading policy, but its tool calls
  carry only the step number, so each step's value appears only in that step's tool result
  (the model never restates it); the final answer must still list every value.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Sequence
from typing import Annotated, Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import Field, SkipValidation

from bench import harm, peers, workloads
from bench.metrics import TruthCounter
from langchain_compact import ExtractiveSummarizer

SCENARIO_TURNS = 12
SCENARIO_RESULT_TOKENS = 3_100
SCENARIO_WINDOW = 8_000
ANSWER = "DONE: read all pages"


# --------------------------------------------------------------------------- 12 turns


class ScriptedToolCaller(BaseChatModel):
    """Calls ``read_page(page=k)`` for k = 1..``turns``, then answers :data:`ANSWER`.

    Counts its own calls (it does not read its context), so it only measures whether the
    system under test lets the run go on. Usage is reported like a provider: o200k tokens of
    the input it received. ``recorder`` (shared by copies) gets every input.
    """

    turns: int = SCENARIO_TURNS
    truth: Annotated[Any, SkipValidation()] = None
    recorder: Annotated[list[list[BaseMessage]], SkipValidation()] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-tool-caller"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.recorder.append(list(messages))
        k = len(self.recorder)
        if k <= self.turns:
            call = {"name": "read_page", "args": {"page": k}, "id": f"page-{k}"}
            reply = AIMessage("", tool_calls=[call], id=f"scripted-{k}")
        else:
            reply = AIMessage(ANSWER, id=f"scripted-{k}")
        tokens_in, tokens_out = self.truth(messages), self.truth([reply])
        reply = reply.model_copy(
            update={
                "usage_metadata": {
                    "input_tokens": tokens_in,
                    "output_tokens": tokens_out,
                    "total_tokens": tokens_in + tokens_out,
                },
                "response_metadata": {"model_provider": "openai", "model_name": "scripted"},
            }
        )
        return ChatResult(generations=[ChatGeneration(message=reply)])


def page_text(
    page: int, truth: TruthCounter, *, kind: str = "log", tokens: int = SCENARIO_RESULT_TOKENS
) -> str:
    """A deterministic page of about ``tokens`` o200k tokens.

    ``kind="log"``: an English build log (about 4 characters a token, so over the package's
    5,000-character cut size); ``kind="dense"``: a base64 dump (about 1.5 characters a
    token, so a 3,100-token page stays under 5,000 characters and is never cut).
    """
    rng = random.Random(page)
    if kind == "log":
        lines = workloads._log(rng, tokens * 5, 0.0)
    elif kind == "dense":
        lines = [f"{i:04d} {base64.b64encode(rng.randbytes(48)).decode()}" for i in range(tokens)]
    else:
        raise ValueError(f"unknown page kind {kind!r}; use 'log' or 'dense'")
    out: list[str] = [f"page {page}"]
    used = truth.text(out[0])
    for line in lines:
        cost = truth.text(line) + 1
        if used + cost > tokens:
            break
        out.append(line)
        used += cost
    return "\n".join(out)


def _read_page_tool(truth: TruthCounter, kind: str) -> BaseTool:
    def read_page(page: int) -> str:
        return page_text(page, truth, kind=kind)

    return StructuredTool.from_function(
        read_page, name="read_page", description="Read one page of the build log."
    )


def _scenario_agent(name: str, model: Any, tools: list[BaseTool], truth: TruthCounter) -> Any:
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware

    from langchain_compact import CompactionConfig
    from langchain_compact.graph import create_compacting_agent
    from langchain_compact.middleware import CompactionMiddleware

    budget = peers.Budget(SCENARIO_WINDOW)
    config = CompactionConfig(context_window=SCENARIO_WINDOW)
    if name == "ours_graph":
        return create_compacting_agent(
            model,
            tools,
            config=config,
            archive=None,
            recall_tool=False,
            summarizer=ExtractiveSummarizer(),
        )
    if name == "ours_middleware":
        return create_agent(
            model, tools, middleware=[CompactionMiddleware(config=config, archive=None)]
        )
    if name == "lc_summarization":
        summary = peers.make_summary_model(budget, truth)
        middleware: Any = SummarizationMiddleware(
            model=summary, trigger=("tokens", budget.trigger), keep=("messages", 4)
        )
        return create_agent(model, tools, middleware=[middleware])
    if name == "deepagents":
        summary = peers.make_summary_model(budget, truth)
        return peers.deepagents_agent(budget, model, tools, summary)
    raise ValueError(f"unknown scenario system {name!r}")


SCENARIO_SYSTEMS = {
    "ours_graph": "langchain-compact create_compacting_agent",
    "ours_middleware": "create_agent + CompactionMiddleware",
    "lc_summarization": "create_agent + SummarizationMiddleware",
    "deepagents": "create_agent + deepagents SummarizationMiddleware",
}


def twelve_turns(truth: TruthCounter, *, turns: int = SCENARIO_TURNS) -> dict[str, Any]:
    """The 12-turn scenario for every system of :data:`SCENARIO_SYSTEMS`, with both page
    kinds (see :func:`page_text`)."""
    out: dict[str, Any] = {"turns": turns, "window": SCENARIO_WINDOW, "kinds": {}}
    for kind in ("dense", "log"):
        page = page_text(1, truth, kind=kind)
        per: dict[str, Any] = {
            "result_tokens": truth([ToolMessage(page, tool_call_id="x")]),
            "result_chars": len(page),
            "systems": {},
        }
        for name in SCENARIO_SYSTEMS:
            per["systems"][name] = _run_scenario(name, kind, truth, turns)
        out["kinds"][kind] = per
    return out


def _run_scenario(name: str, kind: str, truth: TruthCounter, turns: int) -> dict[str, Any]:
    recorder: list[list[BaseMessage]] = []
    model = ScriptedToolCaller(turns=turns, truth=truth, recorder=recorder)
    agent = _scenario_agent(name, model, [_read_page_tool(truth, kind)], truth)
    error = ""
    last = ""
    try:
        result = agent.invoke(
            {"messages": [HumanMessage("Read every page of the build log, then say DONE.")]},
            {"recursion_limit": 4 * turns + 20},
        )
        last = str(result["messages"][-1].content)
    except Exception as exc:  # a crash is a result too
        error = f"{type(exc).__name__}: {str(exc)[:160]}"
    view = harm.FirstView()
    trigger = peers.Budget(SCENARIO_WINDOW).trigger
    for k, model_input in enumerate(recorder[1:], start=1):
        fresh = ToolMessage(page_text(k, truth, kind=kind), tool_call_id=f"page-{k}")
        view.add(harm.first_view([fresh], model_input, truth=truth, trigger=trigger))
    sizes = [truth(m) for m in recorder]
    return {
        "model_calls": len(recorder),
        "finished": last == ANSWER,
        "outcome": error or ("finished" if last == ANSWER else f"stopped: {last[:120]}"),
        "peak_input": max(sizes, default=0),
        "over_window_calls": sum(s > SCENARIO_WINDOW for s in sizes),
        "fresh": view.as_dict(),
    }


# --------------------------------------------------------------------------- tool-only values


__all__ = [
    "ANSWER",
    "SCENARIO_SYSTEMS",
    "ScriptedToolCaller",
    "page_text",
    "probes",
    "twelve_turns",
]


# --------------------------------------------------------------------------- probes


def _probe_histories(truth: TruthCounter) -> dict[str, list[BaseMessage]]:
    """Two small histories in a 128k window: one 13,000-character file read, and six
    parallel results of a few thousand characters."""
    from langchain_core.messages import SystemMessage

    rng = random.Random(5)
    source = "\n".join(workloads._log(rng, 13_000, 0.0))[:13_000]
    head: list[BaseMessage] = [
        SystemMessage("You are a coding agent.", id="p-sys"),
        HumanMessage("Read the file and fix the failing test.", id="p-task"),
    ]
    one = [
        *head,
        AIMessage(
            "", id="p-a1", tool_calls=[{"name": "read_file", "args": {"path": "a.py"}, "id": "f1"}]
        ),
        ToolMessage(source, tool_call_id="f1", name="read_file", id="p-t1"),
        AIMessage("The bug is on the last line.", id="p-a2"),
    ]
    calls = [{"name": "read_file", "args": {"path": f"m{k}.py"}, "id": f"m{k}"} for k in range(6)]
    six = [*head, AIMessage("", id="p-b1", tool_calls=calls)]
    for k in range(6):
        text = "\n".join(workloads._log(random.Random(10 + k), 3_000, 0.0))
        six.append(ToolMessage(text, tool_call_id=f"m{k}", name="read_file", id=f"p-r{k}"))
    six.append(AIMessage("All six modules read.", id="p-b2"))
    return {"one 13,000-char file read": one, "6 parallel results": six}


PROBE_WINDOW = 128_000


def probes(truth: TruthCounter, replay: Any) -> dict[str, Any]:
    """Each system's first view of fresh results in the probe histories (``replay`` is
    :func:`bench.__main__.replay`, passed in to avoid an import cycle)."""
    out: dict[str, Any] = {"window": PROBE_WINDOW, "histories": {}}
    for label, history in _probe_histories(truth).items():
        per: dict[str, Any] = {}
        for name in peers.SYSTEMS:
            adapter = peers.make(name, peers.Budget(PROBE_WINDOW), truth)
            log = replay(adapter, history, truth=truth, window=PROBE_WINDOW)
            per[name] = log.extra["first_view"].as_dict()
        out["histories"][label] = per
    return out
