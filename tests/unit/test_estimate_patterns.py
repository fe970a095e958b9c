"""The estimate's regex passes (:mod:`langchain_compact._estimate`) are written so the regex
engine skips ahead to where a match can start; each finds exactly what its plain form finds,
so the estimate counts the same (a speed change only, bench/results/perf_side_by_side.json).
"""

from __future__ import annotations

import random

import pytest
from _content import GENERATORS, sample

from langchain_compact import _estimate

_SYMBOL = rf"[^\w\s{_estimate._CONTROL}]"

#: Each pattern's plain form: what it matched before it was rewritten for speed.
PLAIN = {
    "_DIGITS_RE": r"\d{1,3}",
    "_JOINED_UNDERSCORE_RE": r"(?<!_)_(?=[A-Za-z])",
    "_JOINED_SYMBOL_RE": rf"(?<![^\w\n]){_SYMBOL}(?=[A-Za-z])",
    "_SYMBOL_NEWLINE_RE": rf"{_SYMBOL}\n(?!\n)",
    "_WHITESPACE_RE": r"\s{2,}|[^\S ]",
}

_TRICKY = [
    *"aZ_ _\n\n\t\r\n,.;:/\\()[]{}=+-*!?#@$%^&~`'\"0123456789",
    *"\u00a0\u3000中ひ한é\u0301😀\u200d\ufe0f\x1b\x00\x7f\x85\u2028→Ж٣\x1c",
]


def _texts() -> list[str]:
    texts = [sample(kind, seed, 2_000) for kind in sorted(GENERATORS) for seed in range(2)]
    rnd = random.Random(5)
    texts += ["".join(rnd.choice(_TRICKY) for _ in range(rnd.randint(1, 60))) for _ in range(3000)]
    return texts


@pytest.mark.parametrize("name", sorted(PLAIN))
def test_each_fast_pattern_matches_what_its_plain_form_matches(name: str) -> None:
    import re

    fast, plain = getattr(_estimate, name), re.compile(PLAIN[name])
    for text in _texts():
        spans = [m.span() for m in plain.finditer(text)]
        found = [m.span() for m in fast.finditer(text)]
        if name == "_SYMBOL_NEWLINE_RE":  # the fast form matches the line break alone
            spans = [(start + 1, end) for start, end in spans]
        assert found == spans, (name, text)


def test_long_words_are_the_words_longer_than_twelve_letters() -> None:
    import re

    plain = re.compile(r"[A-Za-z]{13,}")
    for text in _texts():
        words = _estimate._WORD_RE.findall(text)
        assert [w for w in words if len(w) > _estimate._LONG_WORD] == plain.findall(text)


#: The ASCII passes' plain forms: what they match on an ASCII text.
PLAIN_ASCII = {
    "_ASCII_DIGITS_RE": r"\d{1,3}",
    "_ASCII_SYMBOLS_RE": rf"{_SYMBOL}+",
    "_ASCII_JOINED_SYMBOL_RE": rf"(?<![^\w\n]){_SYMBOL}(?=[A-Za-z])",
}


def test_the_ascii_symbol_set_is_the_symbol_class_on_ascii() -> None:
    import re

    symbol, ascii_symbol = re.compile(_SYMBOL), re.compile(_estimate._ASCII_SYMBOL)
    for code in range(128):
        assert bool(symbol.fullmatch(chr(code))) == bool(ascii_symbol.fullmatch(chr(code))), code


@pytest.mark.parametrize("name", sorted(PLAIN_ASCII))
def test_each_ascii_pattern_matches_what_its_plain_form_matches_on_ascii(name: str) -> None:
    import re

    fast, plain = getattr(_estimate, name), re.compile(PLAIN_ASCII[name])
    rnd = random.Random(9)
    printable = [chr(c) for c in range(128)]
    texts = [t for t in _texts() if t.isascii()]
    texts += [
        "".join(rnd.choice(printable) for _ in range(rnd.randint(1, 80))) for _ in range(3000)
    ]
    for text in texts:
        assert [m.span() for m in fast.finditer(text)] == [
            m.span() for m in plain.finditer(text)
        ], (name, text)
