"""Plumbing tests: ChatOpenAI through a real OpenAI-compatible server (llama-cpp-python).

What the compaction package relies on, checked against a real HTTP server with a real
tokenizer: usage numbers are exact and stable, tool schemas / tool calls / tool results are
billed as prompt tokens, the output cap works, streaming works.

The model is a 270M base model: its text is not judged here, only the plumbing.
Fixtures (conftest.py): ``llama_server``, ``chat_model``, ``make_chat_model``.
"""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool

pytestmark = pytest.mark.server

SYSTEM = SystemMessage("You are a terse assistant.")
COUNT = HumanMessage("Count from 1 to 50: 1, 2, 3,")


@tool
def get_weather(city: str, unit: str = "celsius") -> str:
    """Get the current weather for a city, in the given unit (celsius or fahrenheit)."""
    return f"12 degrees {unit} in {city}"


def _usage(msg: BaseMessage) -> dict[str, Any]:
    assert isinstance(msg, AIMessage)
    assert msg.usage_metadata is not None, "server response carried no usage"
    return dict(msg.usage_metadata)


def _rendered_prompt_tokens(llama_server: Any, messages: list[dict[str, Any]]) -> int:
    """Render the server's chat template and count its tokens with the server's tokenizer."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    prompt = (
        ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        .from_string(llama_server.chat_template)
        .render(
            messages=[*messages, {"role": "assistant", "content": ""}],
            bos_token="",  # /extras/tokenize adds the BOS token itself
            eos_token="<eos>",
        )
    )
    request = urllib.request.Request(
        f"http://127.0.0.1:{llama_server.port}/extras/tokenize",
        data=json.dumps({"input": prompt}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as resp:
        return len(json.load(resp)["tokens"])


def test_usage_metadata_is_real_and_exact(
    llama_server: Any, make_chat_model: Any, record_property: Any
) -> None:
    record_property("server_start_seconds", round(llama_server.start_seconds, 2))
    model = make_chat_model(max_tokens=4)
    msg = model.invoke([SYSTEM, COUNT])
    usage = _usage(msg)
    assert usage["output_tokens"] > 0
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert msg.response_metadata["finish_reason"] in {"stop", "length"}
    # Exact: the server bills the rendered chat template, token for token.
    expected = _rendered_prompt_tokens(
        llama_server,
        [{"role": "system", "content": SYSTEM.content}, {"role": "user", "content": COUNT.content}],
    )
    assert usage["input_tokens"] == expected

    filler = " ".join(f"fact{i}=value{i * 7}" for i in range(60))
    longer = model.invoke([SYSTEM, HumanMessage(f"{COUNT.content} {filler}")])
    assert _usage(longer)["input_tokens"] >= usage["input_tokens"] + 120


def test_prompt_tokens_are_stable(make_chat_model: Any) -> None:
    model = make_chat_model(max_tokens=2)
    messages = [SYSTEM, HumanMessage("Summarise: order #4711 shipped to /srv/data on 2024-05-01.")]
    first = _usage(model.invoke(messages))["input_tokens"]
    model.invoke([HumanMessage("something else entirely, to change the server's cached prefix")])
    again = [_usage(model.invoke(messages))["input_tokens"] for _ in range(2)]
    assert again == [first, first]


def test_output_cap_via_extra_body(make_chat_model: Any) -> None:
    model = make_chat_model(max_tokens=8)
    assert model.extra_body == {"max_tokens": 8}
    msg = model.invoke([COUNT])
    assert _usage(msg)["output_tokens"] == 8
    assert msg.response_metadata["finish_reason"] == "length"


def test_max_completion_tokens_alone_does_not_cap(make_chat_model: Any) -> None:
    """Why the cap goes through extra_body: ChatOpenAI(max_tokens=N) is ignored by the server.

    ``max_completion_tokens=3`` is what ``ChatOpenAI(max_tokens=3)`` sends; the body's
    ``max_tokens=24`` keeps the run bounded. If this fails, the server started honouring
    ``max_completion_tokens`` and ``build_chat_model`` can use ``max_tokens=`` directly.
    """
    model = make_chat_model(max_tokens=24, max_completion_tokens=3)
    payload = model._get_request_payload([COUNT])
    assert payload["max_completion_tokens"] == 3
    assert payload["extra_body"] == {"max_tokens": 24}
    msg = model.invoke([COUNT])
    assert _usage(msg)["output_tokens"] > 3


def test_tool_schemas_are_billed_as_prompt_tokens(make_chat_model: Any) -> None:
    model = make_chat_model(max_tokens=2)
    plain = _usage(model.invoke([SYSTEM, COUNT]))["input_tokens"]
    with_tools = _usage(model.bind_tools([get_weather]).invoke([SYSTEM, COUNT]))["input_tokens"]
    schema_chars = len(json.dumps(get_weather.tool_call_schema.model_json_schema()))
    # The schema is rendered into the prompt: a character estimate of the messages alone
    # would miss all of it.
    assert with_tools - plain >= schema_chars // 8
    assert with_tools > plain + 30


def test_forced_tool_call_round_trip_bills_tool_results(make_chat_model: Any) -> None:
    """tool_choice=<name> makes the server grammar-constrain a real tool call."""
    model = make_chat_model(max_tokens=48).bind_tools([get_weather], tool_choice="get_weather")
    question = HumanMessage("What is the weather in Paris?")
    call_msg = model.invoke([question])
    assert isinstance(call_msg, AIMessage)
    assert len(call_msg.tool_calls) == 1
    call = call_msg.tool_calls[0]
    assert call["name"] == "get_weather"
    assert isinstance(call["args"].get("city"), str)
    before = _usage(call_msg)["input_tokens"]

    result = ToolMessage("x" * 10 + " result row " * 40, tool_call_id=call["id"], name=call["name"])
    free_model = make_chat_model(max_tokens=2).bind_tools([get_weather])
    after_msg = free_model.invoke([question, call_msg, result])
    after = _usage(after_msg)["input_tokens"]
    # The tool call and the ~500-char result are in the prompt the server billed.
    assert after >= before + 80


def test_streaming(make_chat_model: Any) -> None:
    chunks = list(make_chat_model(max_tokens=12).stream([COUNT]))
    assert len(chunks) > 2
    assert all(isinstance(c, AIMessageChunk) for c in chunks)
    merged = chunks[0]
    for c in chunks[1:]:
        merged = merged + c
    assert merged.content
    assert merged.response_metadata.get("finish_reason") in {"stop", "length"}
    # llama-cpp-python's server ignores stream_options.include_usage: streamed responses carry
    # no usage at all, so anything that streams (e.g. LangGraph stream_mode="messages") must
    # fall back to local counting. If this starts failing the server began reporting usage.
    assert merged.usage_metadata is None


async def test_async_invoke_and_stream(make_chat_model: Any) -> None:
    model = make_chat_model(max_tokens=6)
    msg = await model.ainvoke([COUNT])
    assert _usage(msg)["output_tokens"] == 6
    parts = [c.content async for c in model.astream([COUNT])]
    assert "".join(str(p) for p in parts) == msg.content


def test_concurrent_requests_queue_not_interrupt(make_chat_model: Any) -> None:
    """--interrupt_requests false: a batch is served one by one, every answer complete."""
    model = make_chat_model(max_tokens=5)
    t0 = time.monotonic()
    outs = model.batch([[COUNT], [HumanMessage("List three colours: red,")]] * 2)
    assert time.monotonic() - t0 < 280
    for out in outs:
        assert _usage(out)["output_tokens"] >= 1
        assert out.response_metadata["finish_reason"] in {"stop", "length"}
