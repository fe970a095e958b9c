"""Token-counting benchmark (docs/design.md, B1, B3).

``run()`` returns a JSON-able dict with three sections:

* ``per_turn``: median seconds per agent turn to count a growing history of 50 / 500 / 5,000
  messages with a warm :class:`~langchain_compact.tokens.TiktokenCounter` (one new message per
  turn), against re-counting the whole history with langchain-core's
  ``count_tokens_approximately`` and against raw tiktoken re-encoding every text each turn.
  Histories concatenate the 36 shared transcripts with fresh ids (``repeated`` texts, which the
  counter's text-keyed cache can share) and a variant where every text is made unique.
* ``counting_error``: ``approximate_tokens`` and ``count_tokens_approximately`` against an
  o200k count written from tiktoken directly (the OpenAI cookbook formula), on the Chinese seed
  articles and on the English transcripts.
* ``microcompaction``: tokens freed per transcript by ``clear_tool_results`` with default
  settings (keep 3, min_chars 100), measured with ``TiktokenCounter`` before and after.
* ``estimate``: per content class of ``tests/unit/_content.py``, the estimate over o200k and
  its cost in microseconds per 1,000 characters (``_estimate.estimate``, its word cache
  cleared before each text: every text is new, as an uncounted message is).

Run: ``python -m bench.counting`` (prints the JSON). ``python -m bench.counting --estimate-against
REV`` runs only the ``estimate`` section, for this checkout's ``_estimate.py`` and for the one
at git revision ``REV`` side by side in one process, and writes
``bench/results/estimate_side_by_side.json``. Needs ``../shared`` beside the checkout
(``LC_TRAJECTORY_DIR`` / ``LC_SEEDS_DIR`` override) and tiktoken's files (provisioned from
``bpe-openai`` if installed). About 30 s.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import tiktoken
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from bench.workloads import SEEDS_DIR, load_transcripts
from langchain_compact import _estimate as _estimate_module_default
from langchain_compact.microcompact import clear_tool_results
from langchain_compact.tokens import TiktokenCounter, approximate_tokens, provision_tiktoken_cache

SIZES = (50, 500, 5_000)
TURNS = {50: 20, 500: 10, 5_000: 3}  # timed turns per size (keeps the run well under 60 s)
_ROLE = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


# --- data -----------------------------------------------------------------------------------


def _texts(message: BaseMessage) -> list[str]:
    texts = [message.content if isinstance(message.content, str) else str(message.content)]
    if message.name:
        texts.append(message.name)
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            texts += [call["name"], json.dumps(call["args"], ensure_ascii=False)]
    return texts


def reference_count(messages: Sequence[BaseMessage], enc: tiktoken.Encoding) -> int:
    """OpenAI cookbook count written from tiktoken: 3 + role + values per message, +3 priming."""
    total = 3 if messages else 0
    for m in messages:
        total += 3 + len(enc.encode_ordinary(_ROLE[m.type]))
        total += sum(len(enc.encode_ordinary(t)) for t in _texts(m))
        total += 1 if m.name else 0
        total += 3 * len(getattr(m, "tool_calls", None) or [])
    return total


def build_history(
    transcripts: dict[str, list[BaseMessage]], n: int, *, unique: bool
) -> list[BaseMessage]:
    """``n`` messages: the transcripts concatenated (repeated as needed), fresh ids and call ids."""
    pool = [m for msgs in transcripts.values() for m in msgs]
    out: list[BaseMessage] = []
    lap = 0
    while len(out) < n:
        for m in pool:
            if len(out) == n:
                break
            k = len(out)
            update: dict[str, Any] = {"id": f"h{k}"}
            if unique:
                update["content"] = f"[{k}] {m.content}"
            if isinstance(m, AIMessage) and m.tool_calls:
                update["tool_calls"] = [{**c, "id": f"{c['id']}~{lap}"} for c in m.tool_calls]
            if isinstance(m, ToolMessage):
                update["tool_call_id"] = f"{m.tool_call_id}~{lap}"
            out.append(m.model_copy(update=update))
        lap += 1
    return out


# --- (a) per-turn cost ----------------------------------------------------------------------


def _median_seconds(fn: Callable[[int], object], ks: Sequence[int]) -> float:
    times = []
    for k in ks:
        start = time.perf_counter()
        fn(k)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def per_turn(transcripts: dict[str, list[BaseMessage]]) -> dict[str, Any]:
    enc = tiktoken.get_encoding("o200k_base")
    result: dict[str, Any] = {}
    for variant in ("repeated", "unique"):
        rows = {}
        for n in SIZES:
            history = build_history(transcripts, n, unique=variant == "unique")
            turns = TURNS[n]
            ks = list(range(n - turns + 1, n + 1))  # history lengths after each timed turn
            counter = TiktokenCounter()
            start = time.perf_counter()
            counter(history[: ks[0] - 1])  # the turns before: the counter has seen them
            cold = time.perf_counter() - start

            def raw(k: int, h: list[BaseMessage] = history) -> int:
                return sum(len(enc.encode_ordinary(t)) for m in h[:k] for t in _texts(m))

            def tik(k: int, h: list[BaseMessage] = history, c: TiktokenCounter = counter) -> int:
                return c(h[:k])

            def core(k: int, h: list[BaseMessage] = history) -> int:
                return count_tokens_approximately(h[:k])

            t_counter = _median_seconds(tik, ks)
            t_core = _median_seconds(core, ks)
            t_raw = _median_seconds(raw, ks)
            rows[str(n)] = {
                "turns_timed": turns,
                "tiktoken_counter_s": t_counter,
                "count_tokens_approximately_s": t_core,
                "raw_tiktoken_reencode_s": t_raw,
                "approx_over_counter": t_core / t_counter,
                "raw_over_counter": t_raw / t_counter,
                "counter_first_count_s": cold,
                "history_chars": sum(len(t) for m in history for t in _texts(m)),
            }
        result[variant] = rows
    return result


# --- (b) counting error ---------------------------------------------------------------------


def _err(value: int, ref: int) -> float:
    return (value - ref) / ref


def counting_error(transcripts: dict[str, list[BaseMessage]]) -> dict[str, Any]:
    from langchain_core.messages import HumanMessage

    enc = tiktoken.get_encoding("o200k_base")
    seeds = {}
    for path in sorted(SEEDS_DIR.glob("*.txt")):
        msgs = [HumanMessage(path.read_text(encoding="utf-8"))]
        ref = reference_count(msgs, enc)
        ours, core = approximate_tokens(msgs), count_tokens_approximately(msgs)
        seeds[path.stem] = {
            "o200k": ref,
            "approximate_tokens": ours,
            "count_tokens_approximately": core,
            "approximate_tokens_err": _err(ours, ref),
            "count_tokens_approximately_err": _err(core, ref),
        }
    per = {}
    for name, msgs in transcripts.items():
        ref = reference_count(msgs, enc)
        per[name] = (
            ref,
            _err(approximate_tokens(msgs), ref),
            _err(count_tokens_approximately(msgs), ref),
        )
    ref_total = sum(reference_count(m, enc) for m in transcripts.values())
    ours_total = sum(approximate_tokens(m) for m in transcripts.values())
    core_total = sum(count_tokens_approximately(m) for m in transcripts.values())
    exact_total = sum(TiktokenCounter()(m) for m in transcripts.values())
    return {
        "chinese_seeds": seeds,
        "transcripts": {
            "o200k": ref_total,
            "approximate_tokens_err": _err(ours_total, ref_total),
            "count_tokens_approximately_err": _err(core_total, ref_total),
            "tiktoken_counter_err": _err(exact_total, ref_total),
            "approximate_tokens_max_abs_err_per_file": max(abs(e) for _, e, _ in per.values()),
            "count_tokens_approximately_max_abs_err_per_file": max(
                abs(e) for _, _, e in per.values()
            ),
            "approximate_tokens_mean_abs_err_per_file": statistics.mean(
                abs(e) for _, e, _ in per.values()
            ),
            "count_tokens_approximately_mean_abs_err_per_file": statistics.mean(
                abs(e) for _, _, e in per.values()
            ),
        },
    }


# --- (c) micro-compaction -------------------------------------------------------------------


def microcompaction(transcripts: dict[str, list[BaseMessage]]) -> dict[str, Any]:
    counter = TiktokenCounter()
    rows = {}
    for name, msgs in transcripts.items():
        if not any(isinstance(m, ToolMessage) for m in msgs):
            continue  # no native tool calls: observations are user messages
        out = clear_tool_results(msgs, counter=counter)
        changed = [(a, b) for a, b in zip(msgs, out, strict=True) if a is not b]
        before, after = counter(msgs), counter(out)
        rows[name] = {
            "tokens_before": before,
            "tokens_after": after,
            "saved": before - after,
            "saved_ratio": (before - after) / before,
            "results_cleared": len(changed),
            "clears_that_grew": sum(counter([b]) > counter([a]) for a, b in changed),
        }
    total_before = sum(r["tokens_before"] for r in rows.values())
    total_saved = sum(r["saved"] for r in rows.values())
    return {
        "per_transcript": rows,
        "total": {
            "transcripts": len(rows),
            "tokens_before": total_before,
            "saved": total_saved,
            "saved_ratio": total_saved / total_before,
            "results_cleared": sum(r["results_cleared"] for r in rows.values()),
            "clears_that_grew": sum(r["clears_that_grew"] for r in rows.values()),
        },
    }


# --- (d) the estimate by content class --------------------------------------------------


def _clear_estimate_caches(module: Any) -> None:
    for name in ("_script_word", "_ascii_word", "_greedy_whitespace", "_symbol_run", "_symbol"):
        cached = getattr(module, name, None)
        if cached is not None and hasattr(cached, "cache_clear"):
            cached.cache_clear()


def _estimate_row(module: Any, texts: list[str], enc: tiktoken.Encoding) -> dict[str, Any]:
    texts = [t for t in texts if t]
    true = [len(enc.encode_ordinary(t)) for t in texts]
    ratios = [module.estimate(t) / max(1, n) for t, n in zip(texts, true, strict=True)]
    chars = sum(len(t) for t in texts)
    times = []
    for _ in range(3):
        _clear_estimate_caches(module)
        start = time.perf_counter()
        for text in texts:
            module.estimate(text)
        times.append(time.perf_counter() - start)
    return {
        "estimate_over_o200k_min": min(ratios),
        "estimate_over_o200k_max": max(ratios),
        "estimate_over_o200k_total": sum(module.estimate(t) for t in texts) / sum(true),
        "us_per_1k_chars": min(times) / chars * 1e9,
    }


#: The estimate module :func:`estimate_by_class` measures (:func:`estimate_side_by_side` swaps
#: in another revision's).
_estimate_module: list[Any] = [_estimate_module_default]


def estimate_by_class(transcripts: dict[str, list[BaseMessage]] | None = None) -> dict[str, Any]:
    """Per content class (five texts of 8,000 characters each) and over every text of the
    transcripts: the estimate over o200k and its cost, its caches cleared first (every text
    new, as an uncounted message is; the fastest of three passes)."""
    import sys
    from pathlib import Path

    _estimate = _estimate_module[0]
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))
    from _content import GENERATORS, sample

    enc = tiktoken.get_encoding("o200k_base")
    _estimate.estimate("warm: слово ─ \u2028 \t\n xqzv")  # the tables load once per process
    rows = {
        kind: _estimate_row(_estimate, [sample(kind, seed, 8_000) for seed in range(5)], enc)
        for kind in sorted(GENERATORS)
    }
    if transcripts:
        texts = [t for msgs in transcripts.values() for m in msgs for t in _texts(m)]
        rows["transcripts"] = _estimate_row(_estimate, texts, enc)
    return rows


def run() -> dict[str, Any]:
    """Run all three sections; returns a JSON-able dict (see the module docstring)."""
    provision_tiktoken_cache()
    start = time.perf_counter()
    transcripts = load_transcripts()
    result = {
        "per_turn": per_turn(transcripts),
        "counting_error": counting_error(transcripts),
        "microcompaction": microcompaction(transcripts),
        "estimate": estimate_by_class(transcripts),
    }
    result["seconds"] = time.perf_counter() - start
    return result


def estimate_side_by_side(rev: str) -> dict[str, Any]:
    """The ``estimate`` section for ``_estimate.py`` at git revision ``rev`` and for this
    checkout's, in one process (the older module loaded from ``git show``): the ratios over
    o200k must be equal, the cost is what changed."""
    import importlib.util
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    from langchain_compact import _estimate

    root = Path(__file__).resolve().parents[1]
    source = subprocess.run(
        ["git", "show", f"{rev}:langchain_compact/_estimate.py"],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "_estimate_at_rev.py"
        path.write_text(source, encoding="utf-8")
        spec = importlib.util.spec_from_file_location("_estimate_at_rev", path)
        assert spec is not None and spec.loader is not None
        older = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = older
        spec.loader.exec_module(older)
    older._SCRIPT_VOCAB_FILE = _estimate._SCRIPT_VOCAB_FILE  # type: ignore[attr-defined]
    transcripts = load_transcripts()
    rows: dict[str, Any] = {}
    for name, module in ((rev, older), ("this checkout", _estimate)):
        original = _estimate_module[0]
        _estimate_module[0] = module
        try:
            rows[name] = estimate_by_class(transcripts)
        finally:
            _estimate_module[0] = original
    return rows


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.counting", description=__doc__)
    parser.add_argument("--estimate-against", metavar="REV")
    args = parser.parse_args()
    provision_tiktoken_cache()
    if args.estimate_against:
        result = estimate_side_by_side(args.estimate_against)
        out = Path(__file__).resolve().parent / "results" / "estimate_side_by_side.json"
        out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(json.dumps(result, indent=1))
    else:
        print(json.dumps(run(), indent=2))
