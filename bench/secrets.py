"""Does a summary keep what the agent read? 25 build logs, one secret each, an 8k window.

``python -m bench.secrets`` writes ``bench/results/secrets.json`` and the table of
``docs/benchmarks.md`` ("What a summary is written from"; ``--docs`` rewrites it from the
file).

The workload (issue 30): an agent fetches 25 build logs, 3,000 to 8,000 characters each,
with one line ``IMPORTANT: SECRET-n=<10 hex digits>`` in the middle of each, in an 8,000-token
window, then answers. The agent model is scripted (one ``fetch_log`` call per log, then an
answer) and reports the exact o200k count of its input as usage. The summarizer model keeps
every fact it is shown: its reply to a summary request lists every ``SECRET-n=...`` line of
the request's text, plus a one-line summary. So a secret is lost only when no summary
request showed it to the summarizer (or a later step dropped it from the summary).

Systems (the same summarizer model for all):

* ``ours_graph``: ``create_compacting_agent(model, [fetch_log], summary_model=<summarizer>)``;
* ``ours_middleware``: ``create_agent`` with ``CompactionMiddleware(summary_model=...)``;
* ``ours_lcel``: ``compact_messages(summary_model=...)`` on the whole raw history before every
  call (the LCEL transformer);
* ``lc_summarization``: ``create_agent`` with langchain's ``SummarizationMiddleware(
  model=<summarizer>, trigger=("tokens", 6000), keep=("messages", 6))``.

Each of ours runs with a ``CompactionConfig(context_window=8000)`` and an in-memory store
archive; everything else is the default. Columns: secrets in the final context (the input of
the agent's last call, the answer), agent calls, the largest agent input and calls over the
window (exact o200k), summarizer calls, the largest summarizer input, summarizer calls over
the window.
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from langchain_core.callbacks import BaseCallbackHandler, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import tool
from pydantic import Field, SkipValidation

from bench.metrics import TruthCounter, message_texts

SYSTEMS = ("ours_graph", "ours_middleware", "ours_lcel", "lc_summarization")
LABELS = {
    "ours_graph": "langchain-compact (create_compacting_agent)",
    "ours_middleware": "langchain-compact (CompactionMiddleware)",
    "ours_lcel": "langchain-compact (compact_messages)",
    "lc_summarization": "langchain SummarizationMiddleware",
}
WINDOW = 8_000
LOGS = 25
TASK = "Fetch build logs 1 to {n} with fetch_log, one at a time, then report every secret."
SECRET_RE = re.compile(r"SECRET-(\d+)=([0-9a-f]{10})")
OUT = Path(__file__).resolve().parent / "results" / "secrets.json"
DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
COLUMNS = (
    "secrets_kept",
    "calls",
    "max_input",
    "over_window",
    "summarizer_calls",
    "max_summarizer_input",
    "summarizer_over_window",
)


def secret(n: int) -> str:
    """Log ``n``'s secret: 10 hex digits, the same on every run."""
    return f"{random.Random(f'secret-{n}').getrandbits(40):010x}"


def build_log(n: int) -> str:
    """Build log ``n``: 3,000 to 8,000 characters of build output with the secret line in the
    middle."""
    rng = random.Random(f"log-{n}")
    size = rng.randint(3_000, 8_000)
    steps = ("compile", "link", "test", "package", "lint", "fetch", "cache")
    lines: list[str] = []
    while sum(len(x) + 1 for x in lines) < size:
        i = len(lines)
        step = rng.choice(steps)
        lines.append(
            f"[{10 + i // 60:02d}:{i % 60:02d}:{rng.randint(0, 59):02d}] {step} "
            f"module_{rng.randint(1, 400)} ok ({rng.randint(1, 999)} ms)"
        )
    lines.insert(len(lines) // 2, f"IMPORTANT: SECRET-{n}={secret(n)}")
    return f"build log {n}\n" + "\n".join(lines)


def secrets_in(messages: Sequence[BaseMessage]) -> set[int]:
    """The logs whose secret (the right value) ``messages`` hold."""
    text = "\n".join(t for m in messages for t in message_texts(m))
    return {int(n) for n, value in SECRET_RE.findall(text) if value == secret(int(n))}


def fetch_log_tool() -> Any:
    @tool
    def fetch_log(n: int) -> str:
        """Fetch build log number n."""
        return build_log(n)

    return fetch_log


class LogAgent(BaseChatModel):
    """The scripted agent: ``fetch_log(1)`` .. ``fetch_log(logs)``, then an answer listing
    the secrets its input holds. Records the o200k count and the secrets of every input."""

    logs: int = LOGS
    truth: Annotated[Any, SkipValidation()] = None
    inputs: Annotated[list[tuple[int, set[int]]], SkipValidation()] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "bench-log-agent"

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = "openai"
        return params

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, Any]:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        tokens = self.truth(messages)
        found = secrets_in(messages)
        self.inputs.append((tokens, found))
        n = len(self.inputs)
        usage = {"input_tokens": tokens, "output_tokens": 12, "total_tokens": tokens + 12}
        meta = {"model_provider": "openai"}
        if n <= self.logs:
            call = {"name": "fetch_log", "args": {"n": n}, "id": f"call_{n}"}
            reply = AIMessage(
                "", tool_calls=[call], usage_metadata=usage, response_metadata=meta, id=f"a{n}"
            )
        else:
            listed = ", ".join(f"SECRET-{k}" for k in sorted(found))
            reply = AIMessage(
                f"Secrets found: {listed or 'none'}.",
                usage_metadata=usage,
                response_metadata=meta,
                id=f"a{n}",
            )
        return ChatResult(generations=[ChatGeneration(message=reply)])


class SecretKeeper(BaseChatModel):
    """The summarizer model that keeps every fact it is shown: its reply lists every
    ``SECRET-n=...`` line of the request's text, and one line of summary. Records the o200k
    count of every request."""

    truth: Annotated[Any, SkipValidation()] = None
    inputs: Annotated[list[int], SkipValidation()] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "bench-secret-keeper"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.inputs.append(self.truth(messages))
        text = "\n".join(t for m in messages for t in message_texts(m))
        found = dict.fromkeys(f"IMPORTANT: SECRET-{n}={v}" for n, v in SECRET_RE.findall(text))
        summary = "Summary: the agent is fetching build logs one by one; secrets so far:\n"
        reply = AIMessage(summary + "\n".join(f"- {line}" for line in found))
        return ChatResult(generations=[ChatGeneration(message=reply)])


class _Events(BaseCallbackHandler):
    """The package's events of a run (``on_custom_event`` named ``langchain_compact``)."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        if name == "langchain_compact" and isinstance(data, dict):
            self.seen.append(data)


def _ours_config() -> Any:
    from langchain_compact import CompactionConfig

    return CompactionConfig(context_window=WINDOW)


def _archive() -> Any:
    from langgraph.store.memory import InMemoryStore

    from langchain_compact.archive import StoreArchive

    return StoreArchive(InMemoryStore())


def run(system: str, *, logs: int = LOGS) -> dict[str, Any]:
    """One run of ``system`` on the workload; its row."""
    truth = TruthCounter()
    agent_model = LogAgent(logs=logs, truth=truth)
    summ = SecretKeeper(truth=truth)
    tools = [fetch_log_tool()]
    task = HumanMessage(TASK.format(n=logs), id="task")
    events = _Events()
    run_config: Any = {
        "configurable": {"thread_id": f"secrets-{system}"},
        "recursion_limit": 10 * logs + 50,
        "callbacks": [events],
    }
    if system == "ours_graph":
        from langchain_compact import create_compacting_agent

        agent = create_compacting_agent(
            agent_model,
            tools,
            config=_ours_config(),
            summary_model=summ,
            archive=_archive(),
            recall_tool=False,
        )
        agent.invoke({"messages": [task]}, run_config)
    elif system == "ours_middleware":
        from langchain.agents import create_agent

        from langchain_compact import CompactionMiddleware

        middleware = CompactionMiddleware(
            config=_ours_config(), summary_model=summ, archive=_archive()
        )
        agent = create_agent(agent_model, tools, middleware=[middleware])
        agent.invoke({"messages": [task]}, run_config)
    elif system == "ours_lcel":
        from langchain_compact import compact_messages

        chain = compact_messages(config=_ours_config(), summary_model=summ, archive=_archive())
        history: list[BaseMessage] = [task]
        for _ in range(logs + 1):
            sent = chain.invoke(history, run_config)
            reply = agent_model.invoke(sent)
            history.append(reply)
            for call in reply.tool_calls:
                history.append(ToolMessage(build_log(call["args"]["n"]), tool_call_id=call["id"]))
    elif system == "lc_summarization":
        from langchain.agents import create_agent
        from langchain.agents.middleware import SummarizationMiddleware

        middleware = SummarizationMiddleware(
            model=summ, trigger=("tokens", 6_000), keep=("messages", 6)
        )
        agent = create_agent(agent_model, tools, middleware=[middleware])
        agent.invoke({"messages": [task]}, run_config)
    else:
        raise ValueError(f"unknown system {system!r}; one of {SYSTEMS}")
    final_tokens, final_secrets = agent_model.inputs[-1]
    compactions = [e for e in events.seen if e.get("event") == "compaction"]
    return {
        "system": system,
        "label": LABELS[system],
        "logs": logs,
        "secrets_kept": len(final_secrets),
        "calls": len(agent_model.inputs),
        "max_input": max(t for t, _ in agent_model.inputs),
        "over_window": sum(t > WINDOW for t, _ in agent_model.inputs),
        "summarizer_calls": len(summ.inputs),
        "max_summarizer_input": max(summ.inputs, default=0),
        "summarizer_over_window": sum(t > WINDOW for t in summ.inputs),
        "compactions": len(compactions),
        "final_input": final_tokens,
    }


START_MARK = "<!-- secrets:start (generated from bench/results/secrets.json: bench/secrets.py) -->"
END_MARK = "<!-- secrets:end -->"


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The table ``docs/benchmarks.md`` shows for ``rows``."""
    head = (
        "| system | secrets in the final context | agent calls | largest agent input "
        "| calls over the window | summarizer calls | largest summarizer input |\n"
        "|---|---|---|---|---|---|---|\n"
    )
    body = "".join(
        f"| {r['label']} | {r['secrets_kept']}/{r['logs']} | {r['calls']} | "
        f"{r['max_input']:,} | {r['over_window']} agent, {r['summarizer_over_window']} "
        f"summarizer | {r['summarizer_calls']} | {r['max_summarizer_input']:,} |\n"
        for r in rows
    )
    return head + body


def docs_section(rows: Sequence[dict[str, Any]]) -> str:
    """The generated part of ``docs/benchmarks.md``'s "What a summary is written from"."""
    return f"{START_MARK}\n{table(rows)}{END_MARK}"


def write_docs(rows: Sequence[dict[str, Any]], path: Path = DOCS) -> None:
    """Rewrite the generated table in ``path`` (between the two marks)."""
    text = path.read_text(encoding="utf-8")
    head, _, rest = text.partition(START_MARK)
    _, _, tail = rest.partition(END_MARK)
    if not rest:
        raise ValueError(f"{path} has no {START_MARK!r} mark; add the section first")
    path.write_text(head + docs_section(rows) + tail, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.secrets", description=__doc__)
    parser.add_argument("--logs", type=int, default=LOGS)
    parser.add_argument("--systems", nargs="*", default=list(SYSTEMS), choices=SYSTEMS)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--docs", action="store_true", help="only rewrite the docs table from --out"
    )
    args = parser.parse_args(argv)
    if args.docs:
        write_docs(json.loads(args.out.read_text(encoding="utf-8"))["rows"])
        return 0
    rows = [run(s, logs=args.logs) for s in args.systems]
    for r in rows:
        print(json.dumps(r))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    payload = {"window": WINDOW, "rows": rows}
    args.out.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    if args.out == OUT:
        write_docs(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
