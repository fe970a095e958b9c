"""``CompactionMiddleware``: compaction for langchain v1 ``create_agent`` (docs/design.md, B6).

A thin adapter over :class:`~langchain_compact.core.Compactor`: one ``before_model`` hook
runs the core's turn (:meth:`~langchain_compact.core.Compactor.turn`) before every model
call: micro-compaction (old tool results cleared, oversized ones cut, originals archived
first), the routing decision, a full compaction when it is due, the check after it (the
next call must fit: stop when even the smallest context cannot, never loop) and the stop
message. The hook
only translates the :class:`~langchain_compact.core.Turn` into its return value, ending the
run with ``jump_to="end"`` on a stop. Custom stream events and state keys are the graph's.

Needs the ``agents`` extra (``pip install 'langchain-compact[agents]'``); the rest of the
package imports without it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Awaitable, Callable, Sequence
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
        hook_config,
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

    Before every model call: clear old tool results and cut oversized ones (same message
    ids, so they replace in place; originals archived first); if the usage-anchored context
    is over ``trigger_ratio * context_window``, replace the history by system messages +
    the pinned task + summaries + the kept tail. The run goes on whenever the next call fits
    the window, even above the trigger; only when even the smallest context cannot fit, or a
    limit is reached (``max_compactions``, thrash guard), does it append a message saying
    what is done and pending and end the run (``jump_to="end"``). Stale usage from before a
    compaction never triggers another one.

    Inside another graph (a supervisor's node, a ``Send`` target) the compacted list is kept
    under the private ``compaction_view`` key and handed to the model in ``wrap_model_call``;
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
        # Summaries being prepared in the background while the model works, by thread:
        # started in before_model, collected into state in after_model.
        self._jobs: dict[str, concurrent.futures.Future[Prepared | None]] = {}
        self._tasks: dict[str, asyncio.Task[Prepared | None]] = {}
        self._lock = threading.Lock()

    @property
    def core(self) -> Compactor:
        """The compaction core this middleware wraps."""
        return self._core

    @property
    def config(self) -> CompactionConfig:
        """The settings in use (``context_window`` resolved)."""
        return self._core.config

    # ------------------------------------------------------------------ hooks

    @hook_config(can_jump_to=["end"])
    def before_model(
        self, state: CompactionAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Micro-compact, then compact or stop if needed, before the model is called."""
        config = _run_config(runtime)
        thread_id = thread_id_of(config)
        owner = private_owner(config, self.config.share_compaction)
        turn = self.core.turn(
            self._view(state, owner),
            thread_id,
            prepared=state.get("prepared_summary"),
            run_config=config,
        )
        if turn.prepare:
            self._start(turn.messages, thread_id, state.get("prepared_summary"))
        return self._update(turn, owner, state["messages"])

    @hook_config(can_jump_to=["end"])
    async def abefore_model(
        self, state: CompactionAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of :meth:`before_model` (archive and summarizer I/O awaited)."""
        config = _run_config(runtime)
        thread_id = thread_id_of(config)
        owner = private_owner(config, self.config.share_compaction)
        turn = await self.core.aturn(
            self._view(state, owner),
            thread_id,
            prepared=state.get("prepared_summary"),
            run_config=config,
        )
        if turn.prepare:
            task = asyncio.get_running_loop().create_task(
                self.core.aprepare(list(turn.messages), thread_id, state.get("prepared_summary"))
            )
            self._tasks[thread_id] = task
        return self._update(turn, owner, state["messages"])

    def after_model(
        self, state: CompactionAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Collect a summary prepared during the model call into state (waiting for it only
        when it takes longer than the model did)."""
        with self._lock:
            job = self._jobs.pop(thread_id_of(_run_config(runtime)), None)
        if job is None:
            return None
        try:
            return self._collected(job.result())
        except Exception as exc:  # the trigger compacts on the spot instead
            logger.warning("preparing a summary failed (%s); the trigger will compact", exc)
            return None

    async def aafter_model(
        self, state: CompactionAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of :meth:`after_model`."""
        task = self._tasks.pop(thread_id_of(_run_config(runtime)), None)
        if task is None:
            return None
        try:
            return self._collected(await task)
        except Exception as exc:  # the trigger compacts on the spot instead
            logger.warning("preparing a summary failed (%s); the trigger will compact", exc)
            return None

    # ------------------------------------------------------------------ the provider's refusal

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any] | AIMessage],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """Call the model; when the provider refuses for length (langchain-core's
        ``ContextOverflowError``), reduce the request's messages with every reduction a
        turn has under the window the refusal teaches (:meth:`Compactor.overflow`, which
        records it on the history so later calls are estimated against it), retry once,
        and put the reduced history in state beside the reply. Raises this package's
        :class:`~langchain_compact.errors.ContextOverflowError` (a langchain-core one too)
        when every reduction is spent. Inside another graph the request's messages are the
        agent's private compacted view (docs/subagents.md)."""
        config = _run_config(request.runtime)
        owner, shared, request = self._viewed(request, config)
        try:
            return handler(request)
        except Exception as exc:
            if not is_provider_overflow(exc):
                raise
            turn = self.core.overflow(
                request.messages, thread_id_of(config), run_config=config, write_stop=False
            )
            retry = self._retry_request(request, turn, exc)
            return self._retried(handler(retry), turn, owner, shared)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any] | AIMessage]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """Async twin of :meth:`wrap_model_call`."""
        config = _run_config(request.runtime)
        owner, shared, request = self._viewed(request, config)
        try:
            return await handler(request)
        except Exception as exc:
            if not is_provider_overflow(exc):
                raise
            turn = await self.core.aoverflow(
                request.messages, thread_id_of(config), run_config=config, write_stop=False
            )
            retry = self._retry_request(request, turn, exc)
            return self._retried(await handler(retry), turn, owner, shared)

    # ------------------------------------------------------------------ inside another graph

    def _view(self, state: Any, owner: str | None) -> list[BaseMessage]:
        """What the turn reads: the state's messages, or inside another graph the private
        view followed by the shared messages added since."""
        view = view_of(state["messages"], state.get(VIEW_KEY), owner)
        return view if isinstance(view, list) else list(view)

    def _viewed(
        self, request: ModelRequest[Any], config: RunnableConfig
    ) -> tuple[str | None, list[BaseMessage], ModelRequest[Any]]:
        """The owner of the private view, the shared messages, and the request with the
        view as its messages (the same request at the top level)."""
        owner = private_owner(config, self.config.share_compaction)
        shared: list[BaseMessage] = list(request.messages)
        if owner is None:
            return None, shared, request
        state = request.state if isinstance(request.state, dict) else {}
        view = view_of(request.messages, state.get(VIEW_KEY), owner)
        if view is request.messages:
            return owner, shared, request
        messages: list[Any] = list(view)
        return owner, shared, request.override(messages=messages)

    @staticmethod
    def _retry_request(request: ModelRequest[Any], turn: Turn, exc: Exception) -> ModelRequest[Any]:
        if turn.outcome != "compacted":
            raise ContextOverflowError(turn.reason, messages=list(turn.messages)) from exc
        messages: list[Any] = list(turn.messages)
        return request.override(messages=messages)

    @staticmethod
    def _retried(
        response: ModelResponse[Any] | AIMessage,
        turn: Turn,
        owner: str | None = None,
        shared: Sequence[BaseMessage] = (),
    ) -> ExtendedModelResponse[Any]:
        """The retried reply, with the compacted history as a state update: the reply is
        added first (the agent's own update), then this one replaces every message by the
        new history followed by the reply again (same object, so one copy stays). Inside
        another graph the history is the private view of ``shared`` instead."""
        model_response = (
            ModelResponse(result=[response]) if isinstance(response, AIMessage) else response
        )
        history = turn.history if turn.history is not None else list(turn.messages)
        update: dict[str, Any] = dict(turn.keys())
        if owner is not None:
            update[VIEW_KEY] = view_record(history, owner, shared)
            return ExtendedModelResponse(
                model_response=model_response, command=Command(update=update)
            )
        update["messages"] = [
            RemoveMessage(id=REMOVE_ALL_MESSAGES),
            *history,
            *model_response.result,
        ]
        return ExtendedModelResponse(model_response=model_response, command=Command(update=update))

    # ------------------------------------------------------------------ preparing

    def _start(self, messages: list[BaseMessage], thread_id: str, before: Any = None) -> None:
        """Prepare the summary in a daemon thread (in a copy of this context, so the
        summarizer call keeps the run's callbacks and tags) while the model is called; a
        failure reaches after_model, which logs and drops it."""
        future = in_daemon_thread(
            "langchain-compact-prepare", self.core.prepare, list(messages), thread_id, before
        )
        with self._lock:
            self._jobs[thread_id] = future

    @staticmethod
    def _collected(record: Prepared | None) -> dict[str, Any]:
        return {"prepared_summary": record.as_dict() if record is not None else None}

    # ------------------------------------------------------------------ the turn's value

    @staticmethod
    def _update(turn: Turn, owner: str | None = None, shared: Sequence[BaseMessage] = ()) -> Update:
        """The :class:`Turn` as ``before_model``'s return value: its state keys, the
        messages it changed (placeholders replace by id; a new history replaces all; a stop
        message appends) and, on a stop, ``jump_to="end"``. Inside another graph
        (``owner``) the changed list is the private view of ``shared`` instead, and the
        shared list gets only a stop message."""
        update: Update = dict(turn.keys())
        messages: list[BaseMessage]
        if owner is not None:
            if turn.history is not None or turn.replaced:
                view = turn.history if turn.history is not None else turn.messages
                update[VIEW_KEY] = view_record(view, owner, shared)
            messages = []
        elif turn.history is not None:
            messages = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *turn.history]
        else:
            messages = list(turn.replaced.values())
        if turn.stop is not None:
            messages.append(turn.stop)
        if messages:
            update["messages"] = messages
        if turn.outcome == "stopped":
            update["jump_to"] = "end"
        return update
