"""Load the shared agent trajectories (OpenAI chat format) as LangChain messages.

The transcripts live beside the checkout in ``../shared/data/trajectories`` (see its README);
``LC_TRAJECTORY_DIR`` overrides the location. Every message gets a stable id
``f"{stem}-{i}"`` so tests can refer to messages across runs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_messages

TRAJECTORY_DIR = Path(
    os.environ.get(
        "LC_TRAJECTORY_DIR",
        Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories",
    )
)


def _to_langchain_dict(raw: dict[str, Any], message_id: str) -> dict[str, Any]:
    """Map one OpenAI chat message to the dict form ``convert_to_messages`` accepts."""
    out: dict[str, Any] = {
        "role": raw["role"],
        "content": raw.get("content") or "",
        "id": message_id,
    }
    if raw.get("tool_calls"):
        out["tool_calls"] = [
            {
                "id": call["id"],
                "name": call["function"]["name"],
                "args": json.loads(call["function"]["arguments"] or "{}"),
                "type": "tool_call",
            }
            for call in raw["tool_calls"]
        ]
    if raw.get("tool_call_id"):
        out["tool_call_id"] = raw["tool_call_id"]
    return out


def load_trajectory(path: str | os.PathLike[str]) -> list[BaseMessage]:
    """Return the transcript at ``path`` as messages with ids ``f"{stem}-{i}"``."""
    path = Path(path)
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    dicts = [
        _to_langchain_dict(json.loads(line), f"{path.stem}-{i}") for i, line in enumerate(lines)
    ]
    return convert_to_messages(dicts)


def all_trajectories() -> list[Path]:
    """Every ``*.jsonl`` transcript in :data:`TRAJECTORY_DIR`, sorted by name."""
    return sorted(TRAJECTORY_DIR.glob("*.jsonl"))
