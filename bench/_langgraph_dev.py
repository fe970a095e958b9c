"""Run ``langgraph dev`` on a free loopback port (for the server tests and benchmarks).

``langgraph_dev(graphs, env=...)`` writes a ``langgraph.json`` into a temporary directory
(graphs given as absolute ``path.py:attr``), starts ``langgraph dev --no-browser --no-reload``
there in its own process group, waits until ``/ok`` answers, yields the base URL and stops the
server (SIGTERM, then SIGKILL after a bound) when the ``with`` block ends. Needs the ``serve``
extra: ``pip install "langchain-compact[serve]"``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path

from bench._llama import _free_port

REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_DIR = REPO_ROOT / "examples" / "server"
EXAMPLE_MODULE = EXAMPLE_DIR / "compacting_graphs.py"
START_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0


@dataclasses.dataclass(frozen=True)
class DevServer:
    url: str  # http://127.0.0.1:<port>
    port: int
    log_path: Path
    start_seconds: float

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError as exc:
            return f"<no log: {exc}>"


def _ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/ok", timeout=2) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _langgraph_cli() -> list[str]:
    exe = shutil.which("langgraph", path=str(Path(sys.executable).parent)) or shutil.which(
        "langgraph"
    )
    if exe is None:
        raise RuntimeError(
            'langgraph-cli is not installed: pip install "langchain-compact[serve]" '
            '(or "langgraph-cli[inmem]" langgraph-sdk)'
        )
    return [exe]


@contextlib.contextmanager
def langgraph_dev(
    graphs: Mapping[str, str],
    *,
    env: Mapping[str, str] | None = None,
    jobs: int = 10,
    workdir: Path | None = None,
    auth: str | None = None,
) -> Iterator[DevServer]:
    """Serve ``graphs`` (name -> ``/abs/path.py:attr``) with ``langgraph dev`` on loopback;
    ``auth`` (``/abs/path.py:attr`` of a ``langgraph_sdk.Auth``) turns on custom auth."""
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="lc-lgdev-")))
        config: dict[str, object] = {
            "dependencies": [str(REPO_ROOT), str(EXAMPLE_DIR)],
            "graphs": dict(graphs),
        }
        if auth is not None:
            config["auth"] = {"path": auth}
        (workdir / "langgraph.json").write_text(json.dumps(config, indent=2))
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        log_path = workdir / "langgraph-dev.log"
        child_env = {**os.environ, **(env or {})}
        pythonpath = [str(REPO_ROOT), str(EXAMPLE_DIR), child_env.get("PYTHONPATH", "")]
        child_env["PYTHONPATH"] = os.pathsep.join(p for p in pythonpath if p)
        child_env.setdefault("LANGSMITH_TRACING", "false")
        child_env.setdefault("LANGCHAIN_TRACING_V2", "false")
        cmd = [
            *_langgraph_cli(), "dev",
            "--no-browser", "--no-reload",
            "--host", "127.0.0.1", "--port", str(port),
            "--n-jobs-per-worker", str(jobs),
            "--config", str(workdir / "langgraph.json"),
        ]  # fmt: skip
        t0 = time.monotonic()
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                cmd,
                cwd=workdir,
                env=child_env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            server = DevServer(url, port, log_path, 0.0)
            try:
                while not _ok(url):
                    if proc.poll() is not None or time.monotonic() - t0 > START_TIMEOUT:
                        raise RuntimeError(f"langgraph dev did not start:\n{server.log_tail()}")
                    time.sleep(0.2)
                yield dataclasses.replace(server, start_seconds=time.monotonic() - t0)
            finally:
                _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's own process group, SIGKILL after ``STOP_TIMEOUT``."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, STOP_TIMEOUT), (signal.SIGKILL, STOP_TIMEOUT)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
