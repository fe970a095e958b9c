"""Load the agent trajectories (OpenAI chat format) as LangChain messages.

Where the transcripts are, first match wins: ``LC_TRAJECTORY_DIR``; the full set of 36
beside the checkout in ``../shared/data/trajectories`` (CI has it); else the subset this
repository ships in ``tests/data/trajectories`` (see its README for licence and attribution).
Tests that need the full set carry the ``full_transcripts`` marker and are skipped, with
:data:`FULL_TRANSCRIPTS_REASON`, when only the subset is there (``tests/conftest.py``).
Every message gets a stable id ``f"{stem}-{i}"`` so tests can refer to messages across runs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_messages

SHARED_TRAJECTORY_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories"
"""The full set, beside the checkout (CI)."""
SUBSET_TRAJECTORY_DIR = Path(__file__).resolve().parent / "data" / "trajectories"
"""The subset the repository ships."""
FULL_SET_SIZE = 36
FULL_TRANSCRIPTS_REASON = (
    f"needs the {FULL_SET_SIZE} transcripts in ../shared/data/trajectories (or "
    "LC_TRAJECTORY_DIR); the repository ships a subset in tests/data"
)


def _trajectory_dir() -> Path:
    override = os.environ.get("LC_TRAJECTORY_DIR")
    if override:
        return Path(override)
    if any(SHARED_TRAJECTORY_DIR.glob("*.jsonl")):
        return SHARED_TRAJECTORY_DIR
    return SUBSET_TRAJECTORY_DIR


TRAJECTORY_DIR = _trajectory_dir()
SEEDS_DIR = Path(
    os.environ.get("LC_SEEDS_DIR", Path(__file__).resolve().parents[2] / "shared" / "seeds")
)
"""The three Chinese articles the design started from: not redistributed with the package."""
SEED_ARTICLES_REASON = (
    "needs the 3 seed articles in ../shared/seeds (or LC_SEEDS_DIR); they are not "
    "redistributed with the repository"
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


def has_full_set() -> bool:
    """Whether :data:`TRAJECTORY_DIR` holds the full set of transcripts."""
    return len(all_trajectories()) >= FULL_SET_SIZE


def has_seed_articles() -> bool:
    """Whether :data:`SEEDS_DIR` holds the three seed articles."""
    return len(list(SEEDS_DIR.glob("*.txt"))) >= 3
