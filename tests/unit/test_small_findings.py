"""The smaller findings of issue 21 item 7: clear errors for wrong inputs, a clear recall
answer for a bad page, a loose archive root tightened, and the redaction gaps.

(``micro_compact``'s idempotence is in ``test_microcompact.py``.)
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.store.memory import InMemoryStore

from langchain_compact import CompactionConfig
from langchain_compact.archive import JsonlArchive, StoreArchive, make_recall_tool
from langchain_compact.errors import CompactionError, ConfigError
from langchain_compact.lcel import compact_messages
from langchain_compact.redaction import redact_messages, redact_secrets

CONFIG = CompactionConfig(context_window=4000)


def tool_loop() -> list[BaseMessage]:
    """A history well over a 4,000-token window: compaction digests and summarises."""
    messages: list[BaseMessage] = [HumanMessage("task " * 50, id="h")]
    for k in range(10):
        call = {"name": "sh", "args": {}, "id": f"c{k}"}
        messages += [
            AIMessage("s", tool_calls=[call], id=f"a{k}"),
            ToolMessage("out " * 1_200, tool_call_id=f"c{k}", id=f"t{k}"),
        ]
    return [*messages, AIMessage("ok", id="last")]


class NotASummarizer:
    pass


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda: compact_messages(5, config=CONFIG), "takes a list of messages"),
        (lambda: compact_messages({"role": "user"}, config=CONFIG), "takes a list of messages"),
        (
            lambda: compact_messages(
                tool_loop(), config=CompactionConfig(context_window=4000, redactor=lambda t: None)
            ),
            "redactor",
        ),
        (
            lambda: compact_messages(
                tool_loop(), config=CompactionConfig(context_window=4000, digest=lambda t: 5)
            ),
            "digest",
        ),
        (lambda: compact_messages(tool_loop(), config="big"), "config"),
        (lambda: compact_messages(tool_loop(), config=CONFIG, counter=lambda m: "9"), "counter"),
        (lambda: compact_messages(tool_loop(), config=CONFIG, counter=lambda m: None), "counter"),
        (lambda: compact_messages(tool_loop(), config=CONFIG, summarizer=len), "summarizer"),
        (
            lambda: compact_messages(tool_loop(), config=CONFIG, summarizer=NotASummarizer()),
            "summarizer",
        ),
        (lambda: compact_messages(tool_loop(), config=CONFIG, tools=5), "tools"),
        (lambda: compact_messages(tool_loop(), config=CONFIG, archive="x"), "archive"),
        (lambda: compact_messages(tool_loop(), config=CONFIG, thread_id=7), "thread_id"),
        (lambda: compact_messages(tool_loop(), config=CONFIG, bogus=1), "'bogus'"),
        (lambda: CompactionConfig(pin_original_task="no"), "pin_original_task"),
        (lambda: CompactionConfig(pin_original_task=0), "pin_original_task"),
        (lambda: redact_messages([HumanMessage("x")], lambda t: 3), "redactor"),  # type: ignore[arg-type, return-value]
    ],
)
def test_a_wrong_input_is_a_package_error_naming_it(call: Any, needle: str) -> None:
    """34 of 135 fuzzed calls used to raise a bare TypeError (or AttributeError), and
    pin_original_task accepted anything."""
    with pytest.raises(CompactionError, match=needle) as info:
        call()
    assert isinstance(info.value, (ConfigError, ValueError))


def test_a_bad_recall_page_gets_a_clear_answer() -> None:
    tool = make_recall_tool(StoreArchive(InMemoryStore()))
    config = {"configurable": {"thread_id": "t"}}
    for page in (0, -3, "two"):
        answer = tool.invoke({"query": "x", "page": page}, config)
        assert "invalid arguments" in answer and "page" in answer, answer
        assert "whole number from 1" in answer
    answer = tool.invoke({"query": 5}, config)
    assert "query" in answer and "invalid arguments" in answer


@pytest.mark.skipif(os.name == "nt", reason="POSIX modes")
def test_a_loose_archive_root_is_tightened_to_0700(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    root.mkdir()
    os.chmod(root, 0o777)
    JsonlArchive(root).write([HumanMessage("hi")], thread_id="t", reason="r")
    assert stat.S_IMODE(os.stat(root).st_mode) == 0o700


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("key sk-abcdefghijklmnopqrstuvwxyz0123456789abcd end", "key [REDACTED:openai_key] end"),
        ("sk-proj-abcdefghijklmnopqrstuvwx1234", "[REDACTED:openai_key]"),
        ("https://user:password@host", "https://user:[REDACTED:url_password]@host"),
        (
            "git clone https://deploy:password@github.com/a/b.git",
            "git clone https://deploy:[REDACTED:url_password]@github.com/a/b.git",
        ),
        ("token=3f9a1c0b7d2e4f6a8b9c0d1e2f3a4b5c", "token=[REDACTED:token]"),
        ("curl -d token=0123456789abcdef0123", "curl -d token=[REDACTED:token]"),
    ],
)
def test_redaction_catches_these_secrets(text: str, redacted: str) -> None:
    assert redact_secrets(text) == redacted
    assert redact_secrets(redacted) == redacted


@pytest.mark.parametrize(
    "text",
    [
        "password = ?",
        "secret_key: 512 bits",
        "WHERE password = :pw",
        "the password must be 32 characters long",
        "sk-build-dependencies",
        "max_token=4096",
        "token = 12",
        "https://user:$PASSWORD@host",
        "https://user:{password}@host",
    ],
)
def test_redaction_leaves_these_alone(text: str) -> None:
    assert redact_secrets(text) == text
