"""redact_secrets / redact_messages: planted secrets go, ordinary text stays."""

from __future__ import annotations

import base64
import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_compact.markers import KIND_CLEARED, kind_of, with_meta
from langchain_compact.redaction import redact_messages, redact_secrets

_spec = importlib.util.spec_from_file_location(
    "redaction_corpus", Path(__file__).parent / "data" / "redaction_corpus.py"
)
assert _spec is not None and _spec.loader is not None
corpus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(corpus)

# Built by concatenation so no literal key-shaped string sits in the repository.
OPENAI = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
OPENAI_PROJ = "sk-proj-" + "Ab12_Cd34-Ef56Gh78Ij90Kl12Mn34"
ANTHROPIC = "sk-ant-api03-" + "x" * 40 + "-AA"
AWS = "AKIA" + "IOSFODNN7EXAMPLE"
GITHUB = "ghp_" + "a1B2" * 9
GITHUB_PAT = "github_pat_" + "11ABCDEFG0" * 4
SLACK = "xoxb-" + "123456789012-abcdefghijklmnop"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nq2w3e4r5t6\n-----END RSA PRIVATE KEY-----"

PLANTED = [
    (f"key is {OPENAI} ok", OPENAI, "openai_key"),
    (f"OPENAI_API_KEY={OPENAI_PROJ}", OPENAI_PROJ, "openai_key"),
    (f"ANTHROPIC_API_KEY='{ANTHROPIC}'", ANTHROPIC, "anthropic_key"),
    (f"aws_access_key_id = {AWS}", AWS, "aws_access_key"),
    (f"git clone https://{GITHUB}@github.com/x/y", GITHUB, "github_token"),
    (f"token {GITHUB_PAT}.", GITHUB_PAT, "github_token"),
    (f"SLACK={SLACK}", SLACK, "slack_token"),
    (
        "curl -H 'Authorization: Bearer eyJhbGciOi.J9abc_def-123'",
        "eyJhbGciOi.J9abc_def-123",
        "bearer_token",
    ),
    (f"id_rsa:\n{PEM}\nnext line", "MIIEowIBAAKCAQEA", "private_key"),
    ('DB_PASSWORD="correct horse battery"', "correct horse battery", "password"),
    ("password=hunter22;", "hunter22", "password"),
    ("config: {'api_key': 'abc123secret'}", "abc123secret", "api_key"),
    ("api-key: Zm9vYmFyYmF6", "Zm9vYmFyYmF6", "api_key"),
    ("client_secret = s3cr3t-value", "s3cr3t-value", "client_secret"),
    ("access_token: 9f8e7d6c5b4a", "9f8e7d6c5b4a", "access_token"),
]

ORDINARY = [
    "The password field is required; the API key lives in the vault.",
    "def login(password: str, api_key: Optional[str] = None) -> bool:",
    "password = os.environ['DB_PASSWORD']",
    "API_KEY=$OPENAI_API_KEY",
    "password: ********",
    "Use scikit-learn (sk-learn) for a risk-free task-abcdefghijklmnopqrstuvwxyz0.",
    "Password: \nflag{d316759c281bf925d600be698a4973d5}",
    "commit 0772c99cb290 fixed src/marshmallow/fields.py line 1474",
    "AKIA is a prefix; AKIA123 is too short.",
    "Bearer tokens are described in RFC 6750.",
    "中文内容：没有秘密。",
]


@pytest.mark.parametrize(("text", "secret", "kind"), PLANTED, ids=[p[2] for p in PLANTED])
def test_planted_secrets_are_replaced(text: str, secret: str, kind: str) -> None:
    redacted = redact_secrets(text)
    assert secret not in redacted
    assert f"[REDACTED:{kind}]" in redacted


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_untouched(text: str) -> None:
    assert redact_secrets(text) == text


def test_text_around_a_secret_is_kept() -> None:
    assert redact_secrets(f"before {OPENAI} after") == "before [REDACTED:openai_key] after"
    assert redact_secrets('"password": "p4ss", "user": "bob"') == (
        '"password": "[REDACTED:password]", "user": "bob"'
    )


@given(st.text(max_size=300))
def test_redaction_is_idempotent(text: str) -> None:
    once = redact_secrets(text)
    assert redact_secrets(once) == once


@given(st.text(alphabet=st.characters(blacklist_characters="=:"), max_size=200))
def test_text_without_separators_or_prefixes_is_kept(text: str) -> None:
    # No assignment separator and no token prefix -> nothing can match.
    prefixes = ("sk", "AKIA", "ASIA", "gh", "xox", "Bearer", "-----", "eyJ", "AIza", "hf_", "rk_")
    if any(p in text for p in prefixes):
        return
    assert redact_secrets(text) == text


def test_redact_messages_keeps_identity_and_redacts_all_text() -> None:
    ai = AIMessage(
        content=[
            {"type": "text", "text": f"using {OPENAI}"},
            {"type": "image_url", "image_url": {"url": "x"}},
        ],
        id="a1",
        name="agent",
        tool_calls=[
            {"name": "http", "args": {"headers": {"auth": f"Bearer {GITHUB}"}, "n": 3}, "id": "c1"}
        ],
        additional_kwargs={
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "http", "arguments": f'{{"k": "{GITHUB}"}}'},
                }
            ]
        },
        response_metadata={"model_name": "m"},
    )
    tool = with_meta(
        ToolMessage(f"export AWS={AWS}", tool_call_id="c1", name="http", id="t1", status="error"),
        kind=KIND_CLEARED,
    )
    human = HumanMessage(f"my password=hunter22 and {SLACK}", id="h1")
    system = SystemMessage("You are helpful.", id="s1")
    originals = [system, human, ai, tool]
    snapshot = [m.model_copy(deep=True) for m in originals]

    out = redact_messages(originals)

    assert originals == snapshot  # inputs untouched
    assert [m.id for m in out] == ["s1", "h1", "a1", "t1"]
    assert [type(m) for m in out] == [type(m) for m in originals]
    assert out[0] == system
    assert out[1].content == "my password=[REDACTED:password] and [REDACTED:slack_token]"
    red_ai = out[2]
    assert isinstance(red_ai, AIMessage)
    assert red_ai.name == "agent" and red_ai.response_metadata == {"model_name": "m"}
    assert red_ai.content[0] == {"type": "text", "text": "using [REDACTED:openai_key]"}
    assert red_ai.content[1] == ai.content[1]
    assert red_ai.tool_calls[0]["id"] == "c1"
    assert red_ai.tool_calls[0]["args"] == {
        "headers": {"auth": "Bearer [REDACTED:github_token]"},
        "n": 3,
    }
    assert GITHUB not in str(red_ai.additional_kwargs)
    red_tool = out[3]
    assert isinstance(red_tool, ToolMessage)
    assert (red_tool.tool_call_id, red_tool.name, red_tool.status) == ("c1", "http", "error")
    assert red_tool.content == "export AWS=[REDACTED:aws_access_key]"
    assert kind_of(red_tool) == KIND_CLEARED


def test_redact_messages_takes_any_redactor() -> None:
    out = redact_messages(
        [HumanMessage("Alice met Bob", id="h")], lambda s: s.replace("Bob", "[B]")
    )
    assert out[0].content == "Alice met [B]" and out[0].id == "h"


# --------------------------------------------------------------------------- corpus


@pytest.mark.parametrize(
    ("name", "text", "fragments"), corpus.SECRETS, ids=[r[0] for r in corpus.SECRETS]
)
def test_corpus_secret_is_caught(name: str, text: str, fragments: list[str]) -> None:
    redacted = redact_secrets(text)
    assert "[REDACTED:" in redacted
    for fragment in fragments:
        assert fragment not in redacted, redacted


@pytest.mark.parametrize(("name", "text"), corpus.BENIGN, ids=[r[0] for r in corpus.BENIGN])
def test_corpus_ordinary_text_is_kept(name: str, text: str) -> None:
    assert redact_secrets(text) == text


def test_corpus_report() -> None:
    caught = sum(
        all(f not in redact_secrets(t) for f in fragments) for _, t, fragments in corpus.SECRETS
    )
    false_positives = sum(redact_secrets(t) != t for _, t in corpus.BENIGN)
    report = (
        f"caught {caught}/{len(corpus.SECRETS)} secrets, "
        f"false positives {false_positives}/{len(corpus.BENIGN)} ordinary texts"
    )
    print(report)
    assert (caught, false_positives) == (len(corpus.SECRETS), 0), report


def test_partial_values_are_redacted_whole() -> None:
    assert redact_secrets("password = my secret phrase") == "password = [REDACTED:password]"
    assert redact_secrets("password = my secret phrase # old one") == (
        "password = [REDACTED:password] # old one"
    )
    assert redact_secrets("run --password=Hunter2x now") == "run --password=[REDACTED:password] now"


# --------------------------------------------------------------------------- linear time

ADVERSARIAL = textwrap.dedent(
    """
    from langchain_compact.redaction import redact_secrets
    units = [
        "-----BEGIN RSA PRIVATE KEY-----\\n",  # 10,000 of these took 17.6 s before
        "-----BEGIN RSA PRIVATE KEY-----",  # 640 KB of these took 73 s before
        'password="',
        "password = a b c d ",
        "mysql -u x ",
        "https://u:",
        "Cookie: a=b; ",
    ]
    for unit in units:
        redact_secrets(unit * (1_500_000 // len(unit)))
    print("done")
    """
)


def test_redaction_is_linear_on_adversarial_input() -> None:
    # A hang check, not a speed check: about 10 s of work for linear patterns on a slow
    # machine, many minutes for the old quadratic ones (1.5 MB each). The bound is generous.
    try:
        proc = subprocess.run(
            [sys.executable, "-c", ADVERSARIAL], capture_output=True, text=True, timeout=240
        )
    except subprocess.TimeoutExpired:
        pytest.fail("redact_secrets is super-linear on adversarial input")
    assert proc.returncode == 0 and proc.stdout.strip() == "done", proc.stderr


# --------------------------------------------------------------------------- message fields

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4).decode()


def test_every_message_field_is_redacted_and_payloads_are_kept() -> None:
    signed = "https://b.s3.amazonaws.com/a.png?X-Amz-Signature=" + "9f2c" * 16
    text_data = "data:text/plain;base64," + base64.b64encode(f"token {GITHUB}".encode()).decode()
    thinking = {"type": "thinking", "thinking": f"use {OPENAI}", "signature": "Ek" + "A" * 60}
    ai = AIMessage(
        content=[
            thinking,
            {"type": "image_url", "image_url": {"url": signed}},
            {"type": "image", "base64": PNG, "mime_type": "image/png"},
            {"type": "file", "url": text_data},
        ],
        additional_kwargs={"reasoning_content": f"the key is {OPENAI}"},
        response_metadata={"model_name": "m", "debug": {"echo": "password=hunter22x"}},
        id="a1",
    )
    tool = ToolMessage(
        "ok",
        tool_call_id="c1",
        artifact={"raw": [f"AWS={AWS}"], "status": 200},
        id="t1",
    )
    red_ai, red_tool = redact_messages([ai, tool])
    assert isinstance(red_ai, AIMessage) and isinstance(red_tool, ToolMessage)
    blob = str(red_ai.model_dump()) + str(red_tool.model_dump())
    for secret in (OPENAI, "9f2c9f2c9f2c", "hunter22x", AWS):
        assert secret not in blob, secret
    assert GITHUB not in base64.b64decode(red_ai.content[3]["url"].split(",", 1)[1]).decode()
    assert red_ai.content[0]["signature"] == thinking["signature"], "signatures stay valid"
    assert red_ai.content[2]["base64"] == PNG, "binary payloads are not touched"
    assert red_ai.additional_kwargs["reasoning_content"] == "the key is [REDACTED:openai_key]"
    assert red_ai.response_metadata["model_name"] == "m"
    assert red_tool.artifact == {"raw": ["AWS=[REDACTED:aws_access_key]"], "status": 200}


@pytest.mark.parametrize(
    "text",
    [
        "run mysql -u root -pcache = value",
        "aws_session_token=abc123xyz789 = s3cr3t-value",
        "note [REDACTED:x]mysqldump --password=Hunter2x appdb",
        "SECRET_KEY=django-abc123[REDACTED:x] = other",
    ],
)
def test_redaction_is_idempotent_next_to_markers(text: str) -> None:
    once = redact_secrets(text)
    assert "[REDACTED:" in once and redact_secrets(once) == once
    assert "Hunter2x" not in once
