"""Placeholder: replaced by the structured digest module (head + tail + key lines here)."""

from __future__ import annotations

from langchain_compact._render import key_lines


def structured_digest(text: str, *, max_chars: int, header_note: str = "") -> str:
    """Head + tail + key lines of ``text`` in at most ``max_chars`` characters."""
    if len(text) <= max_chars:
        return text
    keys = key_lines(text, limit=5, width=120)
    middle = "\n[... key lines: " + " | ".join(keys) + "]\n" if keys else "\n[...]\n"
    room = max(0, max_chars - len(middle))
    head = text[: room // 2]
    tail = text[len(text) - (room - room // 2) :] if room - room // 2 else ""
    return (head + middle + tail)[:max_chars]
