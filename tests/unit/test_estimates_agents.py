"""The estimate by content class through every integration (issue 28, "Estimates by content"):
without usage reports, the first reduction fires within 10% of the configured trigger by the
true count, and no call goes out over the window.

Each case is a generated run (``_generated``: its scripted model, tools and o200k counter)
whose assistant reads one file per turn; every file is random content of one class (seeded,
``_content``), each about 3% of the window by o200k, until the results add up to more than
the window. The scripted model reports no usage, so every count the package makes of the
results is its estimate. Judged here with the run's own o200k count of the whole history the
call would have sent unreduced:

* **not early**: the first call whose input differs from the whole history (a result
  cleared, cut or summarised) comes when the whole history is at least 90% of the trigger
  (on 36065eb Chinese fired at 66% of it: the estimate ran 48% high);
* **not late**: the call before it, sent whole, was at most 10% over the trigger (base64,
  emoji and whitespace ran 24 to 99% low, and the first reduction came at or past the window);
* **no call over the window** by the run's o200k count.
"""

from __future__ import annotations

import functools
from pathlib import Path

import _generated
import pytest
from _content import sample
from _generated import Call, RunRecord, Scenario, Turn, count_call, run
from langchain_core.messages import BaseMessage, SystemMessage

from langchain_compact import CompactionConfig

#: The classes the issue names, then the scripts the estimate used to count 2.5x low
#: (random letters) or up to 2.9x high (prose: Hindi's vowel signs split every word),
#: terminal captures (mixed whitespace runs), non-ASCII symbols (a ``tree`` listing) and
#: every class glued together.
CLASSES = (
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
    "whitespace_runs",
    "russian",
    "greek",
    "arabic",
    "hebrew",
    "hindi",
    "thai",
    "cyrillic_random",
    "greek_random",
    "arabic_random",
    "latin_random",
    "cipher",
    "symbols",
    "mixed",
)
WINDOWS = (8_000, 16_000, 128_000)
INTEGRATIONS = ("graph", "middleware", "lcel")
#: Each result's share of the window by o200k: a step of 4% of the trigger.
STEP = 0.03
MARGIN = 0.10


@functools.lru_cache(maxsize=64)
def _chars_per_token(kind: str) -> float:
    text = sample(kind, 10_000, 6_000)
    return len(text) / _generated.text_tokens(text)


def _result(kind: str, seed: int, tokens: int) -> str:
    text = sample(kind, seed, max(50, round(tokens * _chars_per_token(kind))))
    return text


def scenario(kind: str, window: int, integration: str) -> Scenario:
    step = int(window * STEP)
    turns, total, i = [], 0, 0
    while total < 1.15 * window:
        result = _result(kind, i, step)
        call = Call("read_file", {"path": f"data/{kind}-{i}.txt"}, f"c{i}", result)
        turns.append(Turn(f"Reading part {i}.", (call,)))
        total += _generated.text_tokens(result) + 20
        i += 1
    return Scenario(
        seed=28_000 + window // 1000,
        shape=f"estimate-{kind}",
        window=window,
        integration=integration,
        task=f"Read every part of the {kind} data set and summarise what it holds.",
        tool_names=("read_file",),
        turns=(*turns, Turn("All parts read.")),
        final="done",
        archive_kind="store",
    )


def _key(message: BaseMessage) -> tuple[str | None, str]:
    return message.id, message.text


def whole_history(record: RunRecord, k: int) -> list[BaseMessage]:
    """The history call ``k`` would send unreduced: the task, then each earlier turn's reply
    and result, as the run produced them."""
    scenario = record.scenario
    out = [record.originals[f"task_{scenario.seed}"]]
    for j in range(k):
        out.append(record.originals[f"ai_{scenario.seed}_{j}"])
        out += [record.originals[f"res_{c.id}"] for c in scenario.turns[j].calls]
    return out


def first_reduction(record: RunRecord) -> tuple[int, list[int]]:
    """The index of the first call whose input is not the whole history, and the run's o200k
    count of the whole history (with the system prompt and tools) at every call."""
    system = [m for m in record.inputs[0] if isinstance(m, SystemMessage)]
    whole = []
    first = -1
    for k, inputs in enumerate(record.inputs):
        full = whole_history(record, k)
        whole.append(count_call([*system, *full], record.tools))
        sent = [_key(m) for m in inputs if not isinstance(m, SystemMessage)]
        if first < 0 and sent != [_key(m) for m in full]:
            first = k
    return first, whole


@pytest.mark.parametrize("integration", INTEGRATIONS)
@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("kind", CLASSES)
def test_the_first_reduction_fires_near_the_trigger_without_usage_reports(
    kind: str, window: int, integration: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_generated, "REPORT_USAGE", False)
    trigger = CompactionConfig(context_window=window).trigger_tokens
    assert trigger is not None
    record = run(scenario(kind, window, integration), tmp_path)
    assert record.error is None, record.error
    sizes = [count_call(inputs, record.tools) for inputs in record.inputs]
    first, whole = first_reduction(record)
    assert first > 0, f"{kind} at {window}: no reduction in {len(sizes)} calls, sizes {sizes}"
    report = (
        f"{kind} {integration} window {window}, trigger {trigger}: first reduction at call "
        f"{first}, whole history {whole[first]} ({whole[first] / trigger:.2f} of the trigger), "
        f"the call before it sent {whole[first - 1]} ({whole[first - 1] / trigger:.2f})"
    )
    assert whole[first] >= (1 - MARGIN) * trigger, "early: " + report
    assert whole[first - 1] <= (1 + MARGIN) * trigger, "late: " + report
    assert max(sizes) <= window, f"over the window: {max(sizes)} > {window}; " + report
