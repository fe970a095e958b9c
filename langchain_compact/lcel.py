"""`compact_messages`: compaction as a message preprocessor for LCEL chains (B7).

``prompt | compact_messages(config=...) | model``. The transformer is stateless over its
input: each call receives the whole raw history. To summarise a growing history once per
span instead of once per call, every compaction it performs is memoised under a digest of
the raw messages it replaced; the next call replays the longest memoised prefix and only
compacts what is new (a second boundary on top of the first, never a re-summary).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, convert_to_messages
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda

from langchain_compact.compaction import CompactionResult, acompact_history, compact_history, decide
from langchain_compact.config import CompactionConfig
from langchain_compact.errors import ConfigError, ContextOverflowError, InvalidHistoryError
from langchain_compact.graph.nodes import resolve_context_window
from langchain_compact.markers import get_meta, with_meta
from langchain_compact.microcompact import micro_compact
from langchain_compact.redaction import maybe_redact
from langchain_compact.summarizers import ExtractiveSummarizer, Summarizer
from langchain_compact.tokens import TokenCounter, approximate_tokens, context_tokens

if TYPE_CHECKING:
    from langchain_compact.archive import TranscriptArchive

__all__ = ["MessageCompactor", "compact_messages"]

logger = logging.getLogger("langchain_compact")


# id(message) -> (weak reference, id of its content, digest). A growing raw history passes
# the same message objects call after call, so each is serialised and hashed once; the
# weak reference and the content identity guard against reused ids and reassigned content.
_DIGESTS: dict[int, tuple[weakref.ref[BaseMessage], int, bytes]] = {}
_DIGESTS_MAX = 200_000
_DIGESTS_LOCK = threading.Lock()


def _message_digest(message: BaseMessage) -> bytes:
    entry = _DIGESTS.get(id(message))
    if entry is not None and entry[0]() is message and entry[1] == id(message.content):
        return entry[2]
    calls = message.tool_calls if isinstance(message, AIMessage) else []
    payload = [message.type, message.content, getattr(message, "tool_call_id", None), calls]
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).digest()
    with _DIGESTS_LOCK:
        if len(_DIGESTS) >= _DIGESTS_MAX:
            _DIGESTS.clear()
        _DIGESTS[id(message)] = (weakref.ref(message), id(message.content), digest)
    return digest


def _prefix_digests(messages: Sequence[BaseMessage]) -> list[str]:
    """``out[i]`` identifies ``messages[:i]`` (``out[0]`` is the empty prefix)."""
    out = [""]
    h = hashlib.sha256()
    for m in messages:
        h.update(_message_digest(m))
        out.append(h.copy().hexdigest())
    return out


class MessageCompactor:
    """The stateful core behind :func:`compact_messages` (its memo of compactions).

    Call it (or :meth:`acompact`) with a message list; use :meth:`as_runnable` in a chain.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> compactor = MessageCompactor(config=CompactionConfig(context_window=400, keep_last_n=2))
        >>> history = [HumanMessage("Task: say hi ten times", id="t")]
        >>> history += [AIMessage("hi " * 40, id=f"a{i}") for i in range(10)]
        >>> out = compactor(history)
        >>> len(out) < len(history), out[0].content == history[0].content
        (True, True)
    """

    def __init__(
        self,
        *,
        config: CompactionConfig | None = None,
        summarizer: Summarizer | None = None,
        archive: TranscriptArchive | None = None,
        thread_id: str = "default",
        model: BaseChatModel | None = None,
        counter: TokenCounter = approximate_tokens,
        tools: Sequence[Any] | None = None,
        max_memo: int = 256,
        on_overflow: Literal["raise", "pass"] = "raise",
    ) -> None:
        if on_overflow not in ("raise", "pass"):
            raise ConfigError(f"on_overflow={on_overflow!r} is not allowed: use 'raise' or 'pass'.")
        self.on_overflow = on_overflow
        self.config = resolve_context_window(config or CompactionConfig(), model)
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer()
        self.archive = archive
        self.thread_id = thread_id
        self.counter = counter
        self.tools = list(tools) if tools else None
        self.max_memo = max_memo
        # digest of the raw prefix -> compacted replacement of that prefix
        self._memo: OrderedDict[str, list[BaseMessage]] = OrderedDict()
        # digest of a raw message -> the cleared / cut version this compactor made of it
        self._cleared: dict[str, BaseMessage] = {}
        self._lock = threading.Lock()
        self.compactions = 0

    # ------------------------------------------------------------------ pure parts

    @staticmethod
    def _coerce(messages: Any) -> list[BaseMessage]:
        if isinstance(messages, PromptValue):
            return messages.to_messages()
        if isinstance(messages, (str, bytes, BaseMessage)):
            raise InvalidHistoryError(
                f"compact_messages takes a list of messages (or a prompt value), not a "
                f"{type(messages).__name__}; wrap a single message in a list: [message]."
            )
        items = list(messages)
        try:
            return list(convert_to_messages(items))
        except (ValueError, TypeError, NotImplementedError) as exc:
            for i, item in enumerate(items):  # name the message that cannot be converted
                try:
                    convert_to_messages([item])
                except (ValueError, TypeError, NotImplementedError):
                    raise InvalidHistoryError(
                        f"messages[{i}] is not a message langchain can read "
                        f"({type(item).__name__}: {str(item)[:80]}); pass BaseMessage objects, "
                        "(role, content) tuples or dicts with 'role' and 'content'.",
                        index=i,
                    ) from exc
            raise

    def _thread(self, config: RunnableConfig | None) -> str:
        """The run's ``configurable.thread_id`` (so recall finds what this run archived),
        else the compactor's ``thread_id``."""
        configurable = (config or {}).get("configurable") or {}
        return str(configurable.get("thread_id") or self.thread_id)

    def _tokens(self, msgs: list[BaseMessage]) -> int:
        # A chain's replies describe the compacted copy the chain sent, not this raw list:
        # a usage report anchors only when it can describe the list at hand.
        return context_tokens(msgs, counter=self.counter, tools=self.tools, verify_anchor=True)

    def _replay(self, raw: list[BaseMessage]) -> tuple[list[BaseMessage], list[str], int]:
        digests = _prefix_digests(raw)
        with self._lock:
            for cut in range(len(raw), 0, -1):
                replacement = self._memo.get(digests[cut])
                if replacement is not None:
                    self._memo.move_to_end(digests[cut])
                    return [*replacement, *raw[cut:]], digests, cut
        return list(raw), digests, 0

    def _micro(self, messages: list[BaseMessage]) -> tuple[list[BaseMessage], list[BaseMessage]]:
        # Clearing is monotonic, as in graph state: a result this compactor cleared or cut
        # in an earlier call stays so (the raw input still has it whole). Those earlier
        # changes were already in the input the newest usage report describes, so they carry
        # no usage credit; only what changes in this call is archived and credited.
        keys = [_message_digest(m).hex() for m in messages]
        with self._lock:
            before = [self._cleared.get(k, m) for k, m in zip(keys, messages, strict=True)]
        out = micro_compact(
            before,
            self.config,
            archived=self.archive is not None,
            counter=self.counter,
            tools=self.tools,
            verify_anchor=True,
        )
        fresh: list[BaseMessage] = []
        with self._lock:
            for key, raw, prev, after in zip(keys, messages, before, out, strict=True):
                if after is prev:
                    continue
                self._cleared[key] = with_meta(after, usage_anchor=None)
                if prev is raw:  # first change of this original: archive it
                    fresh.append(raw)
        return out, maybe_redact(fresh, self.config.redactor)

    def _remember(
        self,
        raw: list[BaseMessage],
        digests: list[str],
        result_messages: list[BaseMessage],
        tail_len: int,
    ) -> None:
        cut = len(raw) - tail_len
        with self._lock:
            self._memo[digests[cut]] = result_messages[: len(result_messages) - tail_len]
            while len(self._memo) > self.max_memo:
                self._memo.popitem(last=False)

    # ------------------------------------------------------------------ sync / async

    def _prepare(
        self, messages: Any
    ) -> tuple[list[BaseMessage], list[str], list[BaseMessage], list[BaseMessage]]:
        raw = self._coerce(messages)
        msgs, digests, _ = self._replay(raw)
        msgs, originals = self._micro(msgs)
        return raw, digests, msgs, originals

    def _archived_micro(
        self, msgs: list[BaseMessage], originals: list[BaseMessage], ref: str
    ) -> list[BaseMessage]:
        return self._tag(msgs, originals, ref)

    def _needs_compaction(self, msgs: list[BaseMessage]) -> bool:
        decision = decide(
            msgs,
            config=self.config,
            counter=self.counter,
            tools=self.tools,
            tokens=self._tokens(msgs),
        )
        if decision.action == "stop":
            self._overflow(decision.reason, msgs)
        if decision.action == "compact":
            self.compactions += 1
            return True
        return False

    def _overflow(self, reason: str, msgs: list[BaseMessage]) -> None:
        """A chain cannot be stopped: raise (default) or log and pass the history on."""
        if self.on_overflow == "raise":
            raise ContextOverflowError(reason, messages=list(msgs))
        logger.warning("compact_messages: %s; passing the history on (on_overflow='pass')", reason)

    def _checked(self, msgs: list[BaseMessage]) -> list[BaseMessage]:
        """After a compaction: the next call must fit the window (minus the reply reserve)."""
        fit = self.config.fit_tokens
        tokens = self._tokens(msgs)
        if fit is not None and tokens > fit:
            self._overflow(
                f"the context is still {tokens} tokens after compacting, more than the {fit} "
                "that fit the window with room for the reply",
                msgs,
            )
        return msgs

    def _compact_kwargs(self, thread_id: str) -> dict[str, Any]:
        return {
            "summarizer": self.summarizer,
            "config": self.config,
            "archive": self.archive,
            "thread_id": thread_id,
            "counter": self.counter,
            "tools": self.tools,
        }

    def _compacted(
        self, raw: list[BaseMessage], digests: list[str], result: CompactionResult
    ) -> list[BaseMessage]:
        if result.summary is not None:
            self._remember(raw, digests, result.messages, self._tail_len(result.messages))
        return result.messages

    def __call__(self, messages: Any, config: RunnableConfig | None = None) -> list[BaseMessage]:
        thread_id = self._thread(config)
        raw, digests, msgs, originals = self._prepare(messages)
        if originals and self.archive is not None:
            ref = self.archive.write(originals, thread_id=thread_id, reason="micro-compaction")
            msgs = self._archived_micro(msgs, originals, ref)
        if not self._needs_compaction(msgs):
            return msgs
        result = compact_history(msgs, **self._compact_kwargs(thread_id))
        return self._checked(self._compacted(raw, digests, result))

    async def acompact(
        self, messages: Any, config: RunnableConfig | None = None
    ) -> list[BaseMessage]:
        """Async twin of calling the compactor."""
        thread_id = self._thread(config)
        raw, digests, msgs, originals = self._prepare(messages)
        if originals and self.archive is not None:
            ref = await self.archive.awrite(
                originals, thread_id=thread_id, reason="micro-compaction"
            )
            msgs = self._archived_micro(msgs, originals, ref)
        if not self._needs_compaction(msgs):
            return msgs
        result = await acompact_history(msgs, **self._compact_kwargs(thread_id))
        return self._checked(self._compacted(raw, digests, result))

    @staticmethod
    def _tail_len(messages: list[BaseMessage]) -> int:
        for i in range(len(messages) - 1, -1, -1):
            if get_meta(messages[i]).get("kind") == "summary":
                return len(messages) - i - 1
        return 0

    @staticmethod
    def _tag(msgs: list[BaseMessage], originals: list[BaseMessage], ref: str) -> list[BaseMessage]:
        ids = {m.id for m in originals if m.id is not None}
        return [with_meta(m, archive_ref=ref) if m.id in ids and get_meta(m) else m for m in msgs]

    def as_runnable(self) -> Runnable[Any, list[BaseMessage]]:
        """This compactor as a ``Runnable`` (sync and async)."""
        return RunnableLambda(self.__call__, afunc=self.acompact, name="compact_messages")


@overload
def compact_messages(messages: None = None, **opts: Any) -> Runnable[Any, list[BaseMessage]]: ...
@overload
def compact_messages(
    messages: Sequence[BaseMessage] | PromptValue, **opts: Any
) -> list[BaseMessage]: ...


def compact_messages(
    messages: Sequence[BaseMessage] | PromptValue | None = None, **opts: Any
) -> list[BaseMessage] | Runnable[Any, list[BaseMessage]]:
    """Compact a message list, or build a Runnable that does, for LCEL chains.

    With ``messages``: returns the compacted list (one-shot; nothing is memoised across
    calls). Without: returns a Runnable that keeps a memo of its compactions, so a chain
    called with an ever-growing history summarises each span once. Options are those of
    :class:`MessageCompactor` (``config``, ``summarizer``, ``archive``, ``thread_id``,
    ``model``, ``counter``, ``tools``).

    Example:
        >>> from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
        >>> prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history")])
        >>> chain = prompt | compact_messages(config=CompactionConfig(context_window=8000))
        >>> [m.type for m in chain.invoke({"history": [("user", "hi")]})]
        ['human']
    """
    compactor = MessageCompactor(**opts)
    if messages is None:
        return compactor.as_runnable()
    return compactor(messages)
