"""Pieces the ``langchain-compact`` subcommands share: errors, chat models, token counters."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

from langchain_core.messages import BaseMessage, HumanMessage

from langchain_compact.tokens import (
    TiktokenCounter,
    TokenCounter,
    TokenizerUnavailableWarning,
    approximate_tokens,
    provision_tiktoken_cache,
)

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

__all__ = [
    "CliError",
    "first_line",
    "load_chat_model",
    "message_tokens",
    "pick_counter",
]

MODEL_EXAMPLES = "e.g. openai:gpt-4o-mini or anthropic:claude-haiku-4-5"


class CliError(Exception):
    """An error the CLI reports as one line on stderr (exit code 2)."""


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's text (library errors can be long)."""
    for line in str(exc).splitlines():
        if line.strip():
            return line.strip()
    return type(exc).__name__


def load_chat_model(spec: str, *, base_url: str | None = None) -> BaseChatModel:
    """A chat model from ``PROVIDER:NAME`` (``init_chat_model``) or an OpenAI-compatible URL.

    With ``base_url``, ``spec`` is the model name sent to that server (``ChatOpenAI``, API
    key from ``OPENAI_API_KEY`` or ``"not-needed"``). Without langchain installed, only
    ``openai:`` models work (``langchain_openai.ChatOpenAI``).

    Raises:
        CliError: unknown model string, missing provider package, missing credentials.
    """
    try:
        if base_url:
            from langchain_openai import ChatOpenAI

            name = spec.removeprefix("openai:")
            key = os.environ.get("OPENAI_API_KEY") or "not-needed"
            return ChatOpenAI(model=name, base_url=base_url, api_key=key)  # type: ignore[arg-type]
        try:
            from langchain.chat_models import init_chat_model
        except ImportError:
            provider, _, name = spec.rpartition(":")
            if provider not in ("", "openai"):
                raise CliError(
                    f"--model {spec}: the {provider!r} provider needs langchain; install it "
                    "with: pip install 'langchain-compact[agents]' (or use an openai: model)"
                ) from None
            from langchain_openai import ChatOpenAI

            return ChatOpenAI(model=name)
        return init_chat_model(spec)
    except CliError:
        raise
    except ImportError as exc:
        raise CliError(
            f"--model {spec}: a provider package is missing: {first_line(exc)}"
        ) from None
    except ValueError as exc:
        raise CliError(
            f"unknown model {spec!r}: {first_line(exc)} Give it as PROVIDER:NAME "
            f"({MODEL_EXAMPLES}), or --base-url URL --model NAME for an OpenAI-compatible server"
        ) from None
    except Exception as exc:
        raise CliError(
            f"cannot create the chat model {spec!r}: {type(exc).__name__}: {first_line(exc)}"
        ) from None


def pick_counter() -> tuple[TokenCounter, str]:
    """``TiktokenCounter`` (o200k_base) if its files can be loaded offline, else the
    approximation; returns the counter and a label saying which."""
    if os.environ.get("TIKTOKEN_CACHE_DIR") is None:
        provision_tiktoken_cache()  # bpe-openai's copies, when installed; no network
    counter = TiktokenCounter("gpt-4o")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TokenizerUnavailableWarning)
        exact = counter.exact
    if exact:
        return counter, "tiktoken o200k_base (exact for OpenAI gpt-4o-family models)"
    return approximate_tokens, "approximate_tokens (tiktoken files unavailable; an estimate)"


def message_tokens(counter: TokenCounter, messages: Sequence[BaseMessage]) -> list[int]:
    """Tokens of each message alone, without the per-request reply priming, so the
    numbers of a history add up to its total."""
    probe = [HumanMessage("x")]
    priming = 2 * counter(probe) - counter(probe + probe)
    return [counter([m]) - priming for m in messages]
