"""The estimate's regex passes (:mod:`langchain_compact._estimate`) are written so the regex
engine skips ahead to where a match can start; each finds exactly what its plain form finds,
so the estimate counts the same (a speed change only, bench/results/perf_side_by_side.json).
An ASCII text is counted in byte passes instead, which must count what the regex passes count.
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


def _regex_pieces(text: str) -> int:
    """The estimate of an ASCII text by the regex passes every other text goes through."""
    n = 1.0 if text[-1:] == " " and text[-2:-1] not in _estimate._SPACE_CHARS else 0.0
    if len(text) >= 8:
        runs: list[float] = []
        text = _estimate._LONG_RUN_RE.sub(lambda m: _estimate._long_run(m, runs), text)
        n += sum(runs)
    n += _estimate._words_and_spacing(text)
    n += sum(
        (len(run) + 1) // 2 if len(run) < 4 else _estimate._symbols(run)
        for run in _estimate._SYMBOLS_RE.findall(text)
    )
    return max(1, round(n * _estimate._ASCII_SLACK))


_ASCII_ATOMS = [
    *map(chr, range(128)),
    *["12", "123", "1234", " 7", "  ", "   ", "\n\n", "\r\n", "\n    ", "\t\t", "__a"],
    *["a_b", "====", "abcdefgh", "AbCdEfGhIjKlMnOp", "deadbeef1234", "x" * 14, "-" * 5],
    *["[[", "::", "/usr", ".txt", ",\n", "a1b2c3d4e5f6g7h8i9j0K", "aB", "\x1b[", "\x1c\x1d"],
]


def test_the_ascii_classes_cover_each_ascii_character_once() -> None:
    classes = [
        _estimate._LETTERS,
        _estimate._DIGIT_CHARS,
        "_",
        _estimate._SYMBOL_CHARS,
        _estimate._SPACES,
        _estimate._CONTROLS,
    ]
    assert sorted("".join(classes)) == [chr(code) for code in range(128)]
    assert (
        "".join(ch for ch in map(chr, range(128)) if _estimate._SYMBOLS_RE.fullmatch(ch))
        == _estimate._SYMBOL_CHARS
    )


def test_the_byte_passes_count_what_the_regex_passes_count_on_ascii() -> None:
    """Every ASCII text is estimated by byte passes (``_estimate._ascii_pieces``); they must
    give what the regex passes give, piece for piece: generated samples of every class (their
    ASCII part), and random mixes of the characters and runs each pass tells apart."""
    rnd = random.Random(13)
    texts = [t for t in _texts() if t.isascii()]
    texts += ["".join(ch for ch in t if ch < "\x80") for t in _texts() if not t.isascii()]
    texts += [sample(kind, 3, 12_000).encode("ascii", "ignore").decode() for kind in GENERATORS]
    texts += [
        "".join(rnd.choice(_ASCII_ATOMS) for _ in range(rnd.randint(1, 60))) for _ in range(6000)
    ]
    for text in filter(None, texts):
        assert _estimate.pieces(text) == _regex_pieces(text), text
