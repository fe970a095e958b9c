"""``python -m bench.depth``: how deep the package's calls go (issue 32, must-show 1).

A profiler hook (``sys.setprofile``) follows one ``CompactionMiddleware.wrap_model_call`` call
(the middleware's one hook)
and records the chain of the package's own frames under it at two moments:

* **the first changed message**: the first time a package function makes a changed copy of
  a message (``BaseMessage.model_copy`` called from package code), measured twice: on a
  history whose read results are each over the large-result size (digested) and on one
  whose results are under it (a batch clears them);
* **the summarizer's model call**: the first time a package function calls a chat model
  (``BaseChatModel.invoke``), with preparing off so the summary is written on the turn's
  thread.

A chain counts the package frames strictly below ``wrap_model_call`` down to the one that made
the change or the call, each named; the sans-IO drivers (``drive``/``adrive``) are counted
as calls like any other. The scenario: ``create_agent``'s middleware hook called directly
(around a model that answers at once) on
a state of a task and eight 1,500-token tool results in an 8,000-token window (the first
turn digests the read ones), on one of ten 700-token results (a batch clears the oldest),
then on a state that needs a full compaction with an
``LLMSummarizer`` over a fake chat model.

Usage: ``python -m bench.depth [--out FILE]`` (default ``bench/results/depth.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import FrameType
from typing import Any, ClassVar

from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.language_models import BaseChatModel, FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_compact import CompactionConfig, LLMSummarizer
from langchain_compact.middleware import CompactionMiddleware

OUT = Path(__file__).parent / "results" / "depth.json"
PACKAGE = "/langchain_compact/"
_COPY = BaseMessage.model_copy.__code__
_INVOKE = BaseChatModel.invoke.__code__
#: The middleware's hook the chains are counted from.
HOOK = "CompactionMiddleware.wrap_model_call"


def _name(frame: FrameType) -> str:
    code = frame.f_code
    return getattr(code, "co_qualname", code.co_name)


def chains(call: Any) -> dict[str, list[str]]:
    """Run ``call()`` under the hook; the package chains below ``wrap_model_call`` at the first
    message copy and the first chat-model call (missing when it never happened)."""
    found: dict[str, list[str]] = {}

    def package_chain(frame: FrameType | None) -> list[str]:
        names: list[str] = []
        while frame is not None:
            name = _name(frame)
            if name.endswith(HOOK) and PACKAGE in frame.f_code.co_filename:
                return list(reversed(names))
            if PACKAGE in frame.f_code.co_filename:
                names.append(name)
            frame = frame.f_back
        return []

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        caller = frame.f_back
        if caller is None or PACKAGE not in caller.f_code.co_filename:
            return
        if frame.f_code is _COPY and "changed" not in found:
            chain = package_chain(caller)
            if chain:
                found["changed"] = chain
        elif frame.f_code is _INVOKE and "model" not in found:
            chain = package_chain(caller)
            if chain:
                found["model"] = chain

    sys.setprofile(hook)
    try:
        call()
    finally:
        sys.setprofile(None)
    return found


def _history(results: int, chars: int) -> list[BaseMessage]:
    out: list[BaseMessage] = [HumanMessage("Fix the failing build; keep the API stable.", id="t")]
    for i in range(results):
        call = {"name": "read", "args": {"path": f"src/m{i}.py"}, "id": f"c{i}"}
        out.append(AIMessage("", tool_calls=[call], id=f"a{i}"))
        body = "\n".join(f"line {k}: value_{i}_{k} = {k * 7}" for k in range(chars // 28))
        out.append(ToolMessage(body, tool_call_id=f"c{i}", name="read", id=f"r{i}"))
    out.append(AIMessage("Reading the next file.", id="a_last"))
    return out


def _hook(middleware: CompactionMiddleware, state: dict[str, Any]) -> Any:
    """``middleware``'s hook on ``state``, around a model that answers at once."""
    request: Any = ModelRequest(
        model=FakeListChatModel(responses=["ok"]),
        messages=list(state["messages"]),
        state=state,
        runtime=_Runtime(),
    )
    return middleware.wrap_model_call(request, lambda r: ModelResponse(result=[AIMessage("ok")]))


class _Runtime:
    config: ClassVar[dict[str, Any]] = {"configurable": {"thread_id": "depth"}}
    context = None
    store = None
    stream_writer = None
    previous = None


def measure() -> dict[str, Any]:
    window = 8_000
    clearing = CompactionMiddleware(config=CompactionConfig(context_window=window), archive=None)
    state: dict[str, Any] = {"messages": _history(8, 1_500 * 4)}
    changed = chains(lambda: _hook(clearing, state))
    # Results under the large-result size: the first change is a batch's cleared result.
    batch: dict[str, Any] = {"messages": _history(10, 700 * 4)}
    cleared = chains(lambda: _hook(clearing, batch))
    model = FakeListChatModel(responses=["## Summary\nRead m0..m7; the build still fails."] * 20)
    compacting = CompactionMiddleware(
        config=CompactionConfig(
            context_window=window, prepare=False, keep_last_n=2, summarizer_timeout=None
        ),
        summarizer=LLMSummarizer(model),
        archive=None,
    )
    full: dict[str, Any] = {"messages": _history(3, 2_600 * 4)}
    summarised = chains(lambda: _hook(compacting, full))
    out: dict[str, Any] = {}
    measured = (
        ("first_changed_message", changed),
        ("first_cleared_result", cleared),
        ("summarizer_model_call", summarised),
    )
    for key, found in measured:
        chain = found.get("model" if key == "summarizer_model_call" else "changed", [])
        out[key] = {"calls": len(chain), "chain": chain}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.depth", description=__doc__)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    result = measure()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    for key, row in result.items():
        print(f"{key}: {row['calls']} calls: {' -> '.join(row['chain'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
