"""``CompactionMiddleware``: compaction for langchain v1 ``create_agent`` (docs/design.md, B6).

A thin adapter over :class:`~langchain_compact.core.Compactor` with one hook,
``wrap_model_call``: before every model call it runs the core's turn
(:meth:`~langchain_compact.core.Compactor.turn`) on the request's messages: micro-compaction
(old tool results cleared, oversized ones cut, originals archived first), the routing
decision, a full compaction when it is due, the check after it (the next call must fit:
stop when even the smallest context cannot, never loop) and the stop message. The model is
called with the turn's messages, and what the turn changed goes into state beside the
reply as one ``Command`` (on a stop, the stop message is the reply and the model is not
called). One hook and no node of its own: ``before_model`` and ``after_model`` hooks would
each add a graph node to every turn (about 0.4 ms of LangGraph's own work a turn each,
``python -m bench.agent_cost --systems none empty_before empty_after empty_wrap``).
Custom stream events and state keys are the graph's.

Needs the ``agents`` extra (``pip install 'langchain-compact[agents]'``); the rest of the
package imports without it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime
from langgraph.types import Command

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ExtendedModelResponse,
        ModelRequest,
        ModelResponse,
    )
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "langchain_compact.middleware needs langchain v1 (langchain.agents.create_agent); "
        "install it with: pip install 'langchain-compact[agents]'"
    ) from exc

from langchain_compact._defaults import DEFAULT_ARCHIVE, DefaultArchiveFlag, resolve_context_window
from langchain_compact._nested import VIEW_KEY, private_owner, view_of, view_record
from langchain_compact._ops import in_daemon_thread
from langchain_compact._prepare import Prepared
from langchain_compact.config import CompactionConfig
from langchain_compact.core import CompactionKeys, Compactor, Turn, thread_id_of
from langchain_compact.errors import ContextOverflowError, is_provider_overflow
from langchain_compact.summarizers import Summarizer, resolve_summarizer
from langchain_compact.tokens import TokenCounter, approximate_tokens, resolve_counter

if TYPE_CHECKING:
    from langchain_compact.archive import TranscriptArchive
    from langchain_compact.memory import CompactionMemory

__all__ = ["CompactionAgentState", "CompactionMiddleware"]

logger = logging.getLogger("langchain_compact")

Update = dict[str, Any]


class CompactionAgentState(AgentState[Any], CompactionKeys):
    """``create_agent``'s state plus the keys compaction writes
    (:class:`~langchain_compact.core.CompactionKeys`, the graph's too; all optional)."""


def _run_config(runtime: Runtime[Any] | None) -> RunnableConfig:
    """The run's config, for the archive's thread id (``configurable.thread_id``)."""
    try:
        from langgraph.config import get_config

        return get_config()
    except RuntimeError:  # called outside a run, or Python 3.10 in an async task
        info = getattr(runtime, "execution_info", None)
        thread_id = getattr(info, "thread_id", None)
        return {"configurable": {"thread_id": thread_id}} if thread_id else {}


class CompactionMiddleware(AgentMiddleware[CompactionAgentState, Any, Any]):
    """Keeps a ``create_agent`` agent inside its context window; stops instead of looping.

    Around every model call (``wrap_model_call``, the only hook: no graph node of its own):
    clear old tool results and cut oversized ones (same message ids, so they replace in
    place; originals archived first); if the usage-anchored context is over
    ``trigger_ratio * context_window``, replace the history by system messages + the pinned
    task + summaries + the kept tail. The model is called with the result, and the changes
    go into state beside its reply. The run goes on whenever the next call fits the window,
    even above the trigger; only when even the smallest context cannot fit, or a limit is
    reached (``max_compactions``, thrash guard), is the model not called: the reply is a
    message saying what is done and pending, which ends the run. Stale usage from before a
    compaction never triggers another one.

    Inside another graph (a supervisor's node, a ``Send`` target) the compacted list is kept
    under the private ``compaction_view`` key and handed to the model;
    the shared ``messages`` get only the agent's own new messages, so the parent's history
    keeps what it had (``CompactionConfig.share_compaction``; docs/subagents.md).

    Args:
        config: Settings; ``context_window`` defaults to ``model.profile["max_input_tokens"]``.
        summarizer: Wins when given. Otherwise, with ``model`` (or ``summary_model``), an
            :class:`~langchain_compact.summarizers.LLMSummarizer` over that model: one
            model call per compaction, prepared beside the agent's call; without a model,
            :class:`~langchain_compact.summarizers.ExtractiveSummarizer` (offline,
            deterministic), which is also the fallback when the model fails.
        archive: Where cleared and compacted originals go before they are replaced; the
            thread is the run's ``configurable.thread_id``. By default the agent's store
            (``create_agent(store=...)``) when it has one, else JSONL files under
            ``config.archive_dir`` (:class:`~langchain_compact.archive.DefaultArchive`);
            ``None``: nothing is archived.
        model: The agent's chat model: its profile gives the context window, and it writes
            the summaries unless ``summary_model`` or ``summarizer`` is given.
        counter: Local token counter for messages after the newest usage report.
        tools: The agent's tools (their schemas count while no usage report exists yet).
        memory: Also keep the pinned task and newest summary in a store (per user or
            project) after each compaction; see :mod:`langchain_compact.memory`.
        summary_model: The chat model that writes the summaries instead of ``model``
            (e.g. a cheaper one).

    Raises:
        ConfigError: when neither ``config`` nor ``model``'s profile gives a context window.

    Example:
        >>> from langchain.agents import create_agent
        >>> from langchain_compact import CompactionConfig
        >>> from langchain_compact.demo import ContextReadingPolicy, DependentTask
        >>> task = DependentTask(steps=30)
        >>> agent = create_agent(
        ...     model=ContextReadingPolicy(),
        ...     tools=task.tools(),
        ...     middleware=[CompactionMiddleware(config=CompactionConfig(context_window=4000))],
        ... )
        >>> out = agent.invoke({"messages": [("user", task.prompt())]})
        >>> task.check(out["messages"][-1].text).ok, out["compaction_count"] >= 1
        (True, True)
    """

    state_schema = CompactionAgentState

    def __init__(
        self,
        *,
        config: CompactionConfig | None = None,
        summarizer: Summarizer | None = None,
        archive: TranscriptArchive | DefaultArchiveFlag | None = DEFAULT_ARCHIVE,
        model: BaseChatModel | None = None,
        counter: TokenCounter = approximate_tokens,
        tools: Sequence[Any] | None = None,
        memory: CompactionMemory | None = None,
        summary_model: BaseChatModel | None = None,
    ) -> None:
        super().__init__()
        self._core = Compactor(
            config=resolve_context_window(config or CompactionConfig(), model),
            summarizer=resolve_summarizer(summarizer, model, summary_model),
            archive=archive,
            counter=resolve_counter(counter, model),
            tools=tools,
            memory=memory,
        )

    @property
    def core(self) -> Compactor:
        """The compaction core this middleware wraps."""
        return self._core

    @property
    def config(self) -> CompactionConfig:
        """The settings in use (``context_window`` resolved)."""
        return self._core.config

    # ------------------------------------------------------------------ the one hook

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any] | AIMessage],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """Run the core's turn on the request's messages (micro-compaction, the decision, a
        full compaction when due, the check after it), call the model with the turn's
        messages, and put what the turn changed in state beside the reply (one
        ``Command``: :meth:`_answer`). On a stop the model is not called: the stop message
        is the reply, and with no tool call in it the agent ends. Past the prepare point a
        summary is prepared in a daemon thread during the model call and collected into
        state after it. When the provider refuses for length (langchain-core's
        ``ContextOverflowError``), the turn's messages are reduced with every reduction a
        turn has under the window the refusal teaches (:meth:`Compactor.overflow`, which
        records it on the history so later calls are estimated against it) and the call
        is retried once; this package's
        :class:`~langchain_compact.errors.ContextOverflowError` (a langchain-core one too)
        is raised when every reduction is spent. Inside another graph the turn reads and
        writes the agent's private compacted view (docs/subagents.md)."""
        call = self._call(request)
        turn = self.core.turn(
            call.view, call.thread_id, prepared=call.prepared, run_config=call.config
        )
        if turn.stop is not None:
            return self._answer(turn.stop, call, turn)
        job = (
            in_daemon_thread(
                "langchain-compact-prepare",
                self.core.prepare,
                list(turn.messages),
                call.thread_id,
                call.prepared,
            )
            if turn.prepare
            else None
        )
        messages: list[Any] = list(turn.messages)
        try:
            response = handler(request.override(messages=messages))
        except Exception as exc:
            if not is_provider_overflow(exc):
                raise
            retried = self.core.overflow(
                turn.messages, call.thread_id, run_config=call.config, write_stop=False
            )
            response = handler(self._retry_request(request, retried, exc))
            return self._answer(response, call, turn, retried, self._collected(job))
        return self._answer(response, call, turn, None, self._collected(job))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any] | AIMessage]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """:meth:`wrap_model_call` with the turn's I/O awaited and the summary prepared in
        a task beside the model call (cancelled when the call fails)."""
        call = self._call(request)
        turn = await self.core.aturn(
            call.view, call.thread_id, prepared=call.prepared, run_config=call.config
        )
        if turn.stop is not None:
            return self._answer(turn.stop, call, turn)
        task = (
            asyncio.get_running_loop().create_task(
                self.core.aprepare(list(turn.messages), call.thread_id, call.prepared)
            )
            if turn.prepare
            else None
        )
        messages: list[Any] = list(turn.messages)
        try:
            try:
                response = await handler(request.override(messages=messages))
            except Exception as exc:
                if not is_provider_overflow(exc):
                    raise
                retried = await self.core.aoverflow(
                    turn.messages, call.thread_id, run_config=call.config, write_stop=False
                )
                response = await handler(self._retry_request(request, retried, exc))
                return self._answer(response, call, turn, retried, await self._awaited(task))
        except BaseException:
            if task is not None:
                task.cancel()
            raise
        return self._answer(response, call, turn, None, await self._awaited(task))

    # ------------------------------------------------------------------ the turn's input

    def _call(self, request: ModelRequest[Any]) -> _Call:
        """What the turn runs on: the run's config and thread, the request's messages (the
        shared list) and, inside another graph, the owner of the private view and the view
        the turn reads (the view followed by the shared messages added since)."""
        config = _run_config(request.runtime)
        owner = private_owner(config, self.config.share_compaction)
        state = request.state if isinstance(request.state, dict) else {}
        shared: list[BaseMessage] = list(request.messages)
        view = view_of(shared, state.get(VIEW_KEY), owner)
        return _Call(
            config=config,
            thread_id=thread_id_of(config),
            owner=owner,
            shared=shared,
            view=view if isinstance(view, list) else list(view),
            prepared=state.get("prepared_summary"),
        )

    @staticmethod
    def _retry_request(request: ModelRequest[Any], turn: Turn, exc: Exception) -> ModelRequest[Any]:
        if turn.outcome != "compacted":
            raise ContextOverflowError(turn.reason, messages=list(turn.messages)) from exc
        messages: list[Any] = list(turn.messages)
        return request.override(messages=messages)

    # ------------------------------------------------------------------ preparing

    @staticmethod
    def _collected(job: concurrent.futures.Future[Prepared | None] | None) -> Update:
        """The summary prepared during the model call as a state update (waiting for it
        only when it takes longer than the model did); nothing when none was prepared or
        preparing failed (the trigger then compacts on the spot)."""
        if job is None:
            return {}
        try:
            return _prepared(job.result())
        except Exception as exc:
            logger.warning("preparing a summary failed (%s); the trigger will compact", exc)
            return {}

    @staticmethod
    async def _awaited(task: asyncio.Task[Prepared | None] | None) -> Update:
        """:meth:`_collected` for the async path's task."""
        if task is None:
            return {}
        try:
            return _prepared(await task)
        except Exception as exc:
            logger.warning("preparing a summary failed (%s); the trigger will compact", exc)
            return {}

    # ------------------------------------------------------------------ the turn's value

    @staticmethod
    def _answer(
        response: ModelResponse[Any] | AIMessage,
        call: _Call,
        turn: Turn,
        retried: Turn | None = None,
        prepared: Update | None = None,
    ) -> ExtendedModelResponse[Any]:
        """The reply (the model's, or the stop message) with what the turn changed as one
        state update: its state keys (then a retry's, then a prepared summary), and the
        messages. The agent adds the reply first; a new history (a compaction's, or a
        retry's after a refusal) then replaces every message and is followed by the reply
        again (the same object, so one copy stays); placeholders replace by id. Inside
        another graph the changed list is the private view of the shared one instead,
        which gets only the reply."""
        model_response = (
            ModelResponse(result=[response]) if isinstance(response, AIMessage) else response
        )
        update: Update = dict(turn.keys())
        history = turn.history
        if retried is not None:
            update.update(retried.keys())
            history = retried.history if retried.history is not None else list(retried.messages)
        update.update(prepared or {})
        if call.owner is not None:
            if history is not None or turn.replaced:
                view = history if history is not None else turn.messages
                update[VIEW_KEY] = view_record(view, call.owner, call.shared)
        elif history is not None:
            update["messages"] = [
                RemoveMessage(id=REMOVE_ALL_MESSAGES),
                *history,
                *model_response.result,
            ]
        elif turn.replaced:
            update["messages"] = list(turn.replaced.values())
        return ExtendedModelResponse(model_response=model_response, command=Command(update=update))


@dataclass(frozen=True, slots=True)
class _Call:
    """One model call's input to the turn (:meth:`CompactionMiddleware._call`)."""

    config: RunnableConfig
    thread_id: str
    owner: str | None
    shared: list[BaseMessage]
    view: list[BaseMessage]
    prepared: Any


def _prepared(record: Prepared | None) -> Update:
    return {"prepared_summary": record.as_dict() if record is not None else None}
