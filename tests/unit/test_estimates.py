"""The estimate by content class and the calibration that never counts below the provider
(issue 28, items 2, 4 and 5; docs/design.md, "The count is never below the provider's").

Every expected count comes from tiktoken's ``o200k_base`` directly; the samples come from
``_content`` (generated per class, deterministic per seed).
"""

from __future__ import annotations

import json
import random
import re
import string
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import _generated
import pytest
import tiktoken
from _content import GENERATORS, sample
from _generated import Call, Scenario, Turn, run
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from langchain_compact import CompactionConfig
from langchain_compact.compaction import decide
from langchain_compact.core import Compactor
from langchain_compact.markers import KIND_SUMMARY, with_meta
from langchain_compact.tokens import approx_text, approximate_tokens, provision_tiktoken_cache

#: The most the estimate may run over o200k on each class (generated samples of 1,000 to
#: 20,000 characters). Prose and the classes the issue names stay within 12%; adversarial
#: classes (rows of non-breaking spaces) a little more.
UPPER = {
    "chinese": 1.10,
    "japanese": 1.12,
    "korean": 1.10,
    "english": 1.10,
    "code": 1.10,
    "paths": 1.13,
    "json": 1.10,
    "logs": 1.12,
    "base64": 1.10,
    "emoji": 1.10,
    "combining": 1.10,
    # a word glued to an escape code ("\\x1b[0mtask") is 2 tokens, priced so since the ASCII
    # vocabulary, besides the escape code's 2
    "control": 1.15,
    "nbsp_table": 1.20,
    "whitespace": 1.15,
    "whitespace_runs": 1.15,
    "russian": 1.10,
    "greek": 1.10,
    "arabic": 1.10,
    "hebrew": 1.10,
    "hindi": 1.10,
    "thai": 1.10,
    "cyrillic_random": 1.10,
    "greek_random": 1.10,
    "arabic_random": 1.10,
    "hebrew_random": 1.10,
    "thai_random": 1.10,
    "devanagari_random": 1.10,
    "latin_random": 1.10,
    "capitals_random": 1.10,
    "letters_random": 1.10,
    "cipher": 1.10,
    "mixed": 1.10,
    "symbols": 1.10,
    "symbol_blocks": 1.10,
}


@pytest.fixture(scope="module")
def o200k() -> tiktoken.Encoding:
    provision_tiktoken_cache()
    return tiktoken.get_encoding("o200k_base")


def true_tokens(enc: tiktoken.Encoding, text: str) -> int:
    return len(enc.encode_ordinary(text))


@pytest.mark.parametrize("kind", sorted(GENERATORS))
def test_the_estimate_bounds_o200k_from_above_on_every_class(
    kind: str, o200k: tiktoken.Encoding
) -> None:
    """Base64 ran at x0.76, emoji x0.43, combining marks x0.45, control characters x0.68,
    non-breaking-space tables x0.43 and whitespace runs x0.01 of o200k; Chinese prose x1.48."""
    worst_low, worst_high = 10.0, 0.0
    for seed in range(4):
        for chars in (1_000, 3_000, 20_000):
            text = sample(kind, seed, chars)
            ratio = approx_text(text) / true_tokens(o200k, text)
            worst_low, worst_high = min(worst_low, ratio), max(worst_high, ratio)
    report = f"{kind}: estimate / o200k from {worst_low:.3f} to {worst_high:.3f}"
    assert worst_low >= 1.0, report
    assert worst_high <= UPPER[kind], report


@pytest.mark.parametrize(
    "unit", [" \n", "\t\n", " \t", "  \n", "\r\n", " ", "\n", "\t", "\u00a0", "\n\n "]
)
def test_runs_of_whitespace_are_not_free(unit: str, o200k: tiktoken.Encoding) -> None:
    """20,000 characters of whitespace counted 115 tokens where o200k makes up to 8,092."""
    text = unit * (20_000 // len(unit))
    true = true_tokens(o200k, text)
    assert true <= approx_text(text) <= 5 * true + 10, (unit, true, approx_text(text))


@pytest.mark.parametrize("symbol", list(string.punctuation))
def test_runs_of_one_symbol_are_bounded(symbol: str, o200k: tiktoken.Encoding) -> None:
    """A run of one repeated symbol was a token per 16: 1,000 ``[`` counted 63 where o200k
    makes 500, 1,000 underscores 1 where it makes 250 (a hostile page, an ASCII-art log)."""
    for n in (4, 7, 50, 333, 1_000, 5_000):
        text = symbol * n
        true = true_tokens(o200k, text)
        assert true <= approx_text(text) <= 4 * true + 2, (symbol, n, true, approx_text(text))


@pytest.mark.parametrize("alphabet", [" \n", " \n\t", " \n\t\r", " \u00a0", " \n\u00a0\t\r"])
def test_random_whitespace_is_bounded(alphabet: str, o200k: tiktoken.Encoding) -> None:
    rng = random.Random(alphabet)
    text = "".join(rng.choice(alphabet) for _ in range(5_000))
    assert approx_text(text) >= true_tokens(o200k, text)


def test_chinese_prose_is_estimated_within_ten_percent(o200k: tiktoken.Encoding) -> None:
    """913 against o200k's 618 on a page of Chinese prose: clearing started at 50-60% of the
    window instead of the 75% trigger."""
    for seed in range(6):
        text = sample("chinese", seed, 2_000)
        true = true_tokens(o200k, text)
        assert true <= approx_text(text) <= 1.10 * true, (seed, true, approx_text(text))


#: The classes the issue names for "the first reduction fires within 10% of the trigger".
TRIGGER_CLASSES = (
    "chinese",
    "japanese",
    "korean",
    "code",
    "paths",
    "json",
    "logs",
    "base64",
    "emoji",
    "whitespace",
)


def _true_context(enc: tiktoken.Encoding, messages: list) -> int:
    """The cookbook's count written here: 3 per message, the role, the texts, the ids."""
    n = 3
    for m in messages:
        n += 3 + true_tokens(enc, {"human": "user", "ai": "assistant"}.get(m.type, m.type))
        n += true_tokens(enc, m.text)
        if isinstance(m, ToolMessage):
            n += true_tokens(enc, m.tool_call_id) + true_tokens(enc, m.name or "")
        for call in getattr(m, "tool_calls", None) or []:
            n += 3 + true_tokens(enc, call["id"]) + true_tokens(enc, call["name"])
            n += true_tokens(enc, '{"path": "f"}')
    return n


@pytest.mark.parametrize("kind", TRIGGER_CLASSES)
def test_without_usage_reports_the_first_reduction_fires_near_the_trigger(
    kind: str, o200k: tiktoken.Encoding
) -> None:
    """A history of tool results of one class grows one result at a time, no usage reports:
    the first turn the decision is not "continue" is one where the true size is within 10%
    of the trigger (above it by less than one result, below it by at most 10%)."""
    config = CompactionConfig(context_window=32_000)
    trigger = config.trigger_tokens
    assert trigger is not None
    history: list = [HumanMessage("read the files and report", id="task")]
    for i in range(200):
        call = {"name": "read", "args": {"path": "f"}, "id": f"c{i}", "type": "tool_call"}
        history.append(AIMessage("", tool_calls=[call], id=f"a{i}"))
        text = sample(kind, i, 1_500)
        history.append(ToolMessage(text, tool_call_id=f"c{i}", name="read", id=f"r{i}"))
        if decide(history, config=config).action != "continue":
            break
    else:
        pytest.fail("no reduction in 200 results")
    true = _true_context(o200k, history)
    step = _true_context(o200k, history[-2:]) - 3
    estimate = approximate_tokens(history)
    assert 0.9 * trigger <= true <= trigger + step, (kind, true, trigger, estimate)


# --------------------------------------------------------------------------- item 2


def _terminal(i: int) -> str:
    prompt = "\x1b[?2004h\x1b[0;32mroot@box\x1b[0m:\x1b[1;34m/work\x1b[0m# \x1b[?2004l\r\n"
    return prompt * 4 + f"exit code {i % 2}\n"


def _find_output(chars: int) -> str:
    """``find / -type f -name "*.txt"`` on a real machine: package directories with
    versions, about 3 characters per o200k token."""
    rng = random.Random(28)
    dirs = ["usr", "share", "doc", "lib", "python3", "dist-packages", "licenses", "opt", "etc"]
    syllables = ["lib", "gn", "xt", "zo", "qa", "per", "ux", "vk", "mb", "rt", "ot", "fy"]
    lines, size = [], 0
    while size < chars:
        package = "".join(rng.choice(syllables) for _ in range(rng.randint(2, 4)))
        version = f"{rng.randint(0, 9)}.{rng.randint(0, 40)}.{rng.randint(0, 99)}"
        parts = [rng.choice(dirs) for _ in range(rng.randint(2, 4))]
        name = rng.choice(["README", "LICENSE", "NEWS", "top_level", "entry_points"])
        lines.append("/" + "/".join(parts) + f"/{package}-{version}/{name}.txt")
        size += len(lines[-1]) + 1
    return "\n".join(lines)[:chars]


def _find_scenario(integration: str) -> Scenario:
    small = tuple(
        Turn(f"step {i}", (Call("run", {"cmd": f"ls {i}"}, f"s{i}", _terminal(i)),))
        for i in range(5)
    )
    find = Call("run", {"cmd": 'find / -type f -name "*.txt"'}, "find", _find_output(46_600))
    return Scenario(
        seed=2_800,
        shape="item2",
        window=14_686,
        integration=integration,
        task="List the text files on this machine and say how many there are.",
        tool_names=("run",),
        turns=(*small, Turn("listing", (find,)), Turn("counting")),
        final="done",
        archive_kind="store",
    )


#: A terminal escape sequence: the provider's tokenizer has one token for each.
_ESCAPE_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def lean_count(messages: Sequence[BaseMessage], tools: Sequence[Any]) -> int:
    """A provider whose chat template is lighter than OpenAI's and whose tokenizer has a
    token for each terminal escape sequence: o200k tokens of each message's text (an escape
    sequence one token) and tool-call arguments, no per-message framing, no ids. On the
    small terminal results it reports about half the cookbook count; on file paths, o200k's."""
    n = _generated.tools_tokens(tools)
    for m in messages:
        text = _ESCAPE_RE.sub("\x1b", _generated.content_text(m.content))
        n += _generated.text_tokens(text)
        for call in getattr(m, "tool_calls", None) or []:
            n += _generated.text_tokens(json.dumps(call["args"], ensure_ascii=False))
    return n


class LeanModel(_generated.ScriptedModel):
    """The generated runs' scripted model, reporting usage as :func:`lean_count` does."""

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        result = super()._generate(messages, *args, **kwargs)
        reply = result.generations[0].message
        used = lean_count(messages, self.state.tools)
        usage = {"input_tokens": used, "output_tokens": 5, "total_tokens": used + 5}
        message = reply.model_copy(update={"usage_metadata": usage})
        return ChatResult(generations=[ChatGeneration(message=message)])


@pytest.mark.parametrize("integration", ["graph", "middleware", "lcel"])
def test_a_ratio_learned_on_small_results_never_sends_a_large_one_over_the_window(
    integration: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five small results (terminal escape codes, an exit code), then 52,654 characters of
    file paths (about 17,800 o200k tokens) in a 14,686-token window, usage reported on every
    reply: the ratio learned on the small messages scaled the large result's count below the
    window and the graph sent 18,206 tokens."""
    monkeypatch.setattr(_generated, "ScriptedModel", LeanModel)
    scenario = _find_scenario(integration)
    record = run(scenario, tmp_path)
    assert record.error is None, record.error
    sizes = [lean_count(inputs, record.tools) for inputs in record.inputs]
    assert sizes and max(sizes) <= scenario.window, sizes


def test_a_scaled_estimate_near_the_fit_limit_is_confirmed_before_the_call_goes(
    o200k: tiktoken.Encoding,
) -> None:
    """The newest compaction stored a scale of 0.7 (learned where the estimate ran high);
    a base64 result after it is estimated tightly, so scaled it counts under the trigger
    while its true size is over the fit limit. Before the call goes out, tiktoken confirms
    an estimate within 30% of the fit limit, and the higher exact count decides."""
    config = CompactionConfig(context_window=16_000)
    fit = config.fit_tokens
    assert fit is not None and config.trigger_tokens is not None
    summary = with_meta(
        HumanMessage("Summary of the earlier work: the files were listed.", id="s1"),
        kind=KIND_SUMMARY,
        index=1,
        kept_ids=[],
        calibration=0.7,
        overhead=0,
        tokens_after=40,
    )
    blob = sample("base64", 3, 22_000)
    call = {"name": "read", "args": {"path": "blob.b64"}, "id": "c1", "type": "tool_call"}
    history = [
        HumanMessage("Decode the blob.", id="task"),
        summary,
        AIMessage("", tool_calls=[call], id="a1"),
        ToolMessage(blob, tool_call_id="c1", name="read", id="r1"),
    ]
    true = _true_context(o200k, history)
    assert true > fit, (true, fit)
    scaled = decide(history, config=config)
    assert scaled.tokens < config.trigger_tokens  # the scaled estimate alone lets it go
    decision = Compactor(config=config, archive=None).decide(history)
    assert decision.action != "continue", decision
    assert decision.tokens >= true - 50
