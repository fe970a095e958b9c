"""redact_secrets: time on adversarial input, and the corpus score.

* ``pem_headers_10k``: 10,000 PEM ``BEGIN RSA PRIVATE KEY`` lines with no END line.
* ``rsa_headers_640kb``: 640 KB of RSA BEGIN headers on one line.
* ``typical_1mb``: 1 MB of ordinary tool output with a few secrets in it.
* ``corpus``: secrets caught and ordinary texts changed, on
  ``tests/unit/data/redaction_corpus.py``.

Times are the best of ``--repeat`` runs. Run: ``python -m bench.redaction`` (writes
``bench/results/redaction.json`` and prints it).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_compact.redaction import redact_secrets

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "redaction.json"
CORPUS = ROOT / "tests" / "unit" / "data" / "redaction_corpus.py"


def best_of(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return round(min(times), 3)


def corpus_score() -> dict[str, int]:
    spec = importlib.util.spec_from_file_location("redaction_corpus", CORPUS)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(CORPUS)
    corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(corpus)
    caught = sum(
        all(f not in redact_secrets(text) for f in fragments)
        for _, text, fragments in corpus.SECRETS
    )
    false_positives = sum(redact_secrets(text) != text for _, text in corpus.BENIGN)
    return {
        "secrets": len(corpus.SECRETS),
        "caught": caught,
        "ordinary": len(corpus.BENIGN),
        "false_positives": false_positives,
    }


def run(*, repeat: int = 3) -> dict[str, Any]:
    pem = "-----BEGIN RSA PRIVATE KEY-----\n" * 10_000
    rsa = "-----BEGIN RSA PRIVATE KEY-----" * (640 * 1024 // 31)
    line = "INFO worker-3 fetched shard 12/4096 (812 KiB) in 31 ms from https://cdn.example.com/a\n"
    typical = line * (1_000_000 // len(line)) + "password=hunter22x AKIA" + "IOSFODNN7EXAMPLE\n"
    return {
        "pem_headers_10k": {
            "chars": len(pem),
            "seconds": best_of(lambda: redact_secrets(pem), repeat),
        },
        "rsa_headers_640kb": {
            "chars": len(rsa),
            "seconds": best_of(lambda: redact_secrets(rsa), repeat),
        },
        "typical_1mb": {
            "chars": len(typical),
            "seconds": best_of(lambda: redact_secrets(typical), repeat),
        },
        "corpus": corpus_score(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per input (best kept)")
    results = run(repeat=parser.parse_args().repeat)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
