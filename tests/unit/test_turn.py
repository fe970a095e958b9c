"""The turn as one value: ``Compactor.turn`` / ``aturn`` return a ``Turn`` that the graph,
the middleware and LCEL only translate (docs/design.md, Layers)."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_compact import CompactionConfig
from langchain_compact.core import Compactor, Pending, Turn
from langchain_compact.errors import ArchiveError, CompactionError
from langchain_compact.markers import KIND_STOP, kind_of


def _history(turns: int, chars: int = 1_300, start: int = 0) -> list[BaseMessage]:
    out: list[BaseMessage] = (
        [HumanMessage("Task: read and report.", id="task")] if not start else []
    )
    for i in range(start, start + turns):
        call = {"name": "read", "args": {"n": i}, "id": f"c{i}"}
        out.append(AIMessage("", tool_calls=[call], id=f"a{i}"))
        out.append(ToolMessage("x " * chars, tool_call_id=f"c{i}", name="read", id=f"r{i}"))
    return out


def _core(**config: Any) -> Compactor:
    return Compactor(config=CompactionConfig(context_window=8_000, **config))


def _shape(turn: Turn) -> tuple[Any, ...]:
    return (
        turn.outcome,
        turn.transition,
        {i: m.id for i, m in turn.replaced.items()},
        [m.id for m in turn.messages],
        turn.reason,
        _events(turn.events),
    )


def _events(events: Any) -> list[dict[str, Any]]:
    return [{k: v for k, v in e.items() if k != "pause_seconds"} for e in events]


def test_under_the_trigger_the_turn_continues_with_the_list_as_it_is() -> None:
    history = _history(2)
    turn = _core().turn(history, "t")
    assert turn.outcome == "continue" and turn.transition == "continue"
    assert turn.messages is history and not turn.replaced and turn.history is None
    assert turn.keys() == {"transition": "continue"} and turn.events == ()


def test_micro_compaction_names_what_it_replaces_by_position_with_the_same_ids() -> None:
    history = _history(6)
    turn = _core().turn(history, "t")
    assert (turn.outcome, turn.transition) == ("continue", "micro_compacted")
    assert {i: m.id for i, m in turn.replaced.items()} == {2: "r0", 4: "r1"}
    assert all(turn.messages[i] is m for i, m in turn.replaced.items())
    assert [e["event"] for e in turn.events] == ["micro_compaction"]


def test_a_compaction_gives_the_new_history_its_report_and_the_state_keys() -> None:
    turn = _core().turn(_history(12), "t")
    assert turn.outcome == "compacted" and turn.history is turn.messages
    assert turn.report is not None and turn.report["index"] == 1
    assert turn.keys() == {
        "transition": "compacted",
        "compaction_count": 1,
        "last_compaction": turn.report,
        "prepared_summary": None,
    }
    assert [e["event"] for e in turn.events] == ["micro_compaction", "compaction"]


def _over_the_limit() -> tuple[Compactor, list[BaseMessage]]:
    first = _core().turn(_history(12), "t")
    assert first.history is not None
    calls = [{"name": "read", "args": {"n": k}, "id": f"p{k}"} for k in range(2)]
    batch = [
        ToolMessage("y " * 4_000, tool_call_id=f"p{k}", name="read", id=f"q{k}") for k in range(2)
    ]
    unread = [AIMessage("", tool_calls=calls, id="ap"), *batch]  # too big to clear, unread
    return _core(max_compactions=1), [*first.history, *_history(6, start=12), *unread]


def test_a_stop_carries_its_message_and_reason_unless_the_host_cannot_stop() -> None:
    core, history = _over_the_limit()
    turn = core.turn(history, "t")
    assert (turn.outcome, turn.transition) == ("stopped", "stopped")
    assert "max_compactions=1" in turn.reason
    assert turn.stop is not None and kind_of(turn.stop) == KIND_STOP
    assert turn.keys()["stop_reason"] == turn.reason
    assert turn.events[-1] == {"event": "stop", "reason": turn.reason}
    quiet = core.turn(history, "t", write_stop=False)
    assert quiet.stop is None and quiet.reason == turn.reason
    assert "stop" not in [e["event"] for e in quiet.events]


def test_aturn_is_the_same_turn() -> None:
    for history in (_history(2), _history(6), _history(12)):
        sync, async_ = _core().turn(history, "t"), asyncio.run(_core().aturn(history, "t"))
        assert _shape(sync) == _shape(async_)


def test_the_stages_compose_into_the_turn() -> None:
    """What the graph runs node by node is the turn the middleware gets in one call."""
    history = _history(12)
    core = _core()
    cleared = core.clear(history, "t")
    decision, prepare = core.route(cleared.messages)
    assert decision.action == "compact" and not prepare
    done = core.compaction(cleared.messages, "t")
    assert core.after_step(done.messages, done.transition) == "continue"
    whole = _core().turn(history, "t")
    assert [m.id for m in done.messages] == [m.id for m in whole.messages]
    assert _events([*cleared.events, *done.events]) == _events(whole.events)


def test_a_pending_summary_is_taken_only_when_the_turn_compacts() -> None:
    taken: list[int] = []

    def take() -> None:
        taken.append(1)

    running = Pending(take=take, running=True)
    core = _core(prepare=True)
    assert not core.turn(_history(2), "t", prepared=running).prepare
    assert taken == []
    assert core.turn(_history(12), "t", prepared=running).outcome == "compacted"
    assert taken == [1]


class _FullArchive:
    """An archive that takes micro-compaction's originals but fails a compaction's."""

    def write(self, messages: Any, *, reason: str, **kwargs: Any) -> str:
        if reason.startswith("compaction"):
            raise ArchiveError("disk full")
        return "ref-1"


def test_a_failed_compaction_stops_with_its_error() -> None:
    core = Compactor(config=CompactionConfig(context_window=8_000), archive=_FullArchive())  # type: ignore[arg-type]
    turn = core.turn(_history(12), "t")
    assert isinstance(turn.error, CompactionError) and "disk full" in str(turn.error)
    assert (turn.outcome, turn.transition) == ("stopped", "stopped")
    assert turn.reason == str(turn.error) and turn.stop is not None
