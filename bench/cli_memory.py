"""Peak memory and time of ``langchain-compact inspect`` on a 200,000-message transcript.

Writes a synthetic OpenAI-format JSONL (one task, then tool rounds) to a temporary folder,
runs the CLI in a child process and records its peak RSS (``ru_maxrss`` of the children) and
wall time in ``bench/results/cli_memory.json``. Before the linear extractive summarizer this
run was killed for memory at 23 GB.

Run: ``python -m bench.cli_memory`` (about 40 s on 2 cores).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MESSAGES = 200_000
OUT = Path(__file__).resolve().parent / "results" / "cli_memory.json"


def write_transcript(path: Path, messages: int = MESSAGES) -> int:
    """Write the transcript; returns its size in bytes."""
    with path.open("w", encoding="utf-8") as f:
        f.write(json.dumps({"role": "user", "content": "Task: inspect the repository."}) + "\n")
        for n in range(0, messages, 2):
            call = {
                "id": f"c{n}",
                "type": "function",
                "function": {"name": "run", "arguments": json.dumps({"cmd": f"ls {n}"})},
            }
            f.write(json.dumps({"role": "assistant", "content": "", "tool_calls": [call]}) + "\n")
            text = f"file_{n}.py\n" * 5
            f.write(json.dumps({"role": "tool", "tool_call_id": f"c{n}", "content": text}) + "\n")
    return path.stat().st_size


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.jsonl"
        size = write_transcript(path)
        started = time.perf_counter()
        run = subprocess.run(
            [sys.executable, "-m", "langchain_compact", "inspect", str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
        seconds = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    result = {
        "messages": MESSAGES + 1,
        "file_mb": round(size / 1e6, 1),
        "exit_code": run.returncode,
        "seconds": round(seconds, 1),
        "peak_rss_mb": round(peak_mb),
    }
    OUT.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result))
    return run.returncode


if __name__ == "__main__":
    raise SystemExit(main())
