"""The token estimate of a text without tokenizer files, by content class (docs/how-it-works.md,
"How text is estimated").

It counts the pieces o200k's pre-tokenizer and merges make of a text, class by class, each at
a cost that bounds what ``o200k_base`` pays for it from above and stays close to it, measured
on generated samples of every class (tests/unit/test_estimates.py): a call over the window is
an error, a reduction a little early only a cost. The classes:

* **ASCII words, numbers and symbols**: a word of up to 12 letters is a token, a longer run
  a token per 2 letters (junk, hashes, repeated letters), one more per inner capital; a digit
  group of up to 3 is a token, and a space before a number is one; a run of symbols costs a
  token per 2 (one repeated symbol a token per 16), a single symbol after a letter and before
  one mostly joins the word (``/usr``, ``(bar``, ``.txt``), a line break after a symbol joins
  it (``,\\n``). These pieces are counted 3% high (rare words that o200k splits). A word
  of up to 12 letters o200k has no token for (random letters, a cipher, a generated name),
  or such a piece of it between capitals, is the greedy longest match over o200k's strings
  of ASCII letters (``_ascii_vocab.zlib``, the first piece with the space before it), the
  tokens beyond one 15% more: a word of random letters is 2 to 6 tokens.
* **Whitespace**: a single space joins the word after it; a run of one or two kinds costs a
  token per stretch of one character, long stretches one per 100 spaces, 15 newlines or
  tabs, 4 ``\\r\\n`` pairs, non-breaking spaces one per 5 and one more; a run repeating a
  unit of up to 4 characters at most a token per unit; a run mixing three kinds or more
  (a terminal capture) the longest match over o200k's 434 whitespace strings, cut after
  its last line break as o200k's pre-tokenizer cuts it, 4% more.
* **CJK, kana and hangul**: the longest match of up to three characters among the strings
  o200k encodes as one token (:mod:`langchain_compact._cjk_vocab`), a character outside them
  at its UTF-8 length less one, 5% more (the greedy match finds a few merges fewer or more
  than o200k does).
* **base64**: a run of 20 or more base64 characters mixing cases and digits costs 0.71 a
  character (o200k: 0.66 to 0.70); a hex-like id (8 or more letters and digits, 3 or more of
  them digits) 1 and 0.6 a character.
* **Words of other scripts** (Cyrillic, Greek, Arabic, Hebrew, Devanagari, Thai, accented
  Latin, ...; letters with their script's combining marks and the space before them): the
  longest match among the 57,000 strings of these scripts o200k encodes as one token
  (``_script_vocab.zlib``, read the first time such a word is seen; a word o200k has whole
  is one token), a character outside them at its bytes, the first two merged (2; 3 in the
  blocks where o200k merges none: Yi, Cherokee; 4 beyond the BMP), 4% more. Prose and
  random letters alike land
  at 1.02 to 1.09 of o200k (a token per 4 letters ran 2.5x low on random Cyrillic and 2.8x
  high on Hindi, whose vowel signs split every word).
* **Emoji, other symbols beyond the BMP and BMP pictographs**: 2 each; joiners and
  variation selectors 1. **Combining marks**: 2.1 each. **Control characters**: 2 each
  (o200k splits the ``[`` and the digits after an escape).
* **Other non-ASCII symbols** (CJK punctuation, arrows, box drawing, math, private use):
  the longest match among o200k's strings of symbols (a rule of ``─`` is a token or two), a
  symbol outside them at its bytes, the first two merged (2; 3 in the blocks where o200k
  merges none), a space before a run it cannot merge with 1; 4% more.

A text over :data:`SAMPLED_ABOVE` characters is estimated from 32 slices of 512 characters.
"""

from __future__ import annotations

import functools
import re
import unicodedata
import zlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_compact._cjk_vocab import PAIRS, SINGLE, TRIPLES

__all__ = ["estimate", "load_tables", "pieces", "tables_loaded"]

# Each pattern below is one C regex pass over the text; they are written so the regex engine
# can skip ahead to where a match can start (a literal or a character class first, what
# comes before checked by a lookbehind after it), which finds the same matches as the
# plain forms (``(?<!_)_(?=...)``, ``\s{2,}|[^\S ]``) up to several times faster
# (tests/unit/test_estimate_patterns.py holds both).
_WORD_RE = re.compile(r"[A-Za-z]+")
#: A run of more than 12 letters (few common words are longer) costs a token per 2: the
#: words of ``_WORD_RE`` longer than 12.
_LONG_WORD = 12
_INNER_CAP_RE = re.compile(r"[a-z][A-Z]")
_DIGITS_RE = re.compile(r"\d\d?\d?")  # a group of 1 to 3 digits
_SPACE_DIGIT_RE = re.compile(r" \d")
_UNDERSCORES_RE = re.compile(r"_+")
#: An underscore not after another, before a letter.
_JOINED_UNDERSCORE_RE = re.compile(r"_(?<!__)(?=[A-Za-z])")
#: Symbols: neither word characters, nor whitespace, nor control characters.
_CONTROL = "\x00-\x08\x0e-\x1b\x7f-\x9f"
_SYMBOL = rf"[^\w\s{_CONTROL}]"
_SYMBOLS_RE = re.compile(rf"{_SYMBOL}+")
_SPACED_SYMBOLS_RE = re.compile(rf" ?{_SYMBOL}+")
#: One symbol after a word character, a line break or nothing, before a letter: it joins
#: the word (o200k: ``/usr``, ``(bar``, ``.txt``), mostly (``/``, ``target``): 3/4 of a token.
_JOINED_SYMBOL_RE = re.compile(rf"{_SYMBOL}(?<![^\w\n]{_SYMBOL})(?=[A-Za-z])")
_JOINED = 0.8
#: A line break right after a symbol joins it (o200k: ``,\n``, `` [\n``): the line break
#: matched, the symbol before it checked.
_SYMBOL_NEWLINE_RE = re.compile(rf"\n(?<={_SYMBOL}\n)(?!\n)")
#: The ASCII pieces find a few tokens fewer than o200k on some prose (rare words split).
_ASCII_SLACK = 1.03
_CONTROL_RE = re.compile(f"[{_CONTROL}]")
#: A control character and the symbol after it (``\\x1b[``, ``[?``): o200k splits them.
_CONTROL_TOKENS = 2
#: Whitespace that costs a token: anything but a single space (a run of two or more, or one
#: character other than a space).
_WHITESPACE_RE = re.compile(r"[^\S ]\s*| \s+")
_SPACE_CHARS = frozenset(" \t\n\r\u00a0")
_WHITESPACE_SEGMENT_RE = re.compile(r"(?:\r\n)+| +|\n+|\t+|\u00a0+|\s")
#: Characters per extra token in a long stretch of one whitespace character.
_STRETCH = {" ": 100, "\n": 15, "\t": 15}
#: The greedy match over o200k's whitespace strings finds a few tokens fewer than o200k.
_WHITESPACE_SLACK = 1.04
_LONG_RUN_RE = re.compile(r"[A-Za-z0-9+/]{8,}={0,2}")
_B64_TOKENS_PER_CHAR = 0.71
_HEX_TOKENS_PER_CHAR = 0.6

_CJK_CLASS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_RUN_RE = re.compile(f"[{_CJK_CLASS}]+")
#: The greedy match of o200k's strings finds a few merges fewer than o200k does, or more:
#: on generated and real prose it lands within 3% of o200k; 4% more keeps it above.
_CJK_SLACK = 1.05
#: Letters of other scripts (not ASCII, not CJK) that no script word below took (astral
#: letters): a token per 4 plus one a word.
_OTHER_LETTERS_RE = re.compile(rf"[^\W\d_A-Za-z{_CJK_CLASS}]+")
#: The combining marks priced one by one (``_MARKS_RE``: accents stacked on Latin letters).
_LOOSE_MARKS = "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"


def _script_marks() -> str:
    """A character class of the BMP's combining marks that belong to a script's words
    (Devanagari vowel signs, Thai tone marks, Arabic harakat, Hebrew points): o200k's
    pre-tokenizer keeps them in the word (``\\p{M}``), Python's ``\\w`` does not."""
    loose = re.compile(f"[{_LOOSE_MARKS}]")
    codes = [
        c
        for block in (range(0x0300, 0x2000), range(0xA640, 0xAC00), range(0xFB1E, 0xFB1F))
        for c in block
        if unicodedata.category(chr(c))[0] == "M" and not loose.match(chr(c))
    ]
    ranges: list[list[int]] = []
    for c in codes:
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    return "".join(f"\\u{a:04x}-\\u{b:04x}" for a, b in ranges)


#: A word of another script (Cyrillic, Greek, Arabic, Hebrew, Devanagari, Thai, accented
#: Latin, ...): letters and its marks, at least one of them neither ASCII nor CJK, with the
#: space before it (o200k's words carry it).
_SCRIPT_CHAR = rf"[^\W\d_\x00-\x7f{_CJK_CLASS}]|[{_script_marks()}]"
_SCRIPT_WORD_RE = re.compile(
    rf" ?(?:[A-Za-z]|{_SCRIPT_CHAR})*(?:{_SCRIPT_CHAR})(?:[A-Za-z]|{_SCRIPT_CHAR})*"
)
#: The greedy longest match finds 0.97 to 1.01 of o200k's tokens on these words (generated
#: prose and random letters of every script in tests/unit/_content.py).
_SCRIPT_SLACK = 1.04
_SCRIPT_VOCAB_FILE = Path(__file__).with_name("_script_vocab.zlib")
#: o200k's one-token strings of ASCII letters, a leading space kept (``bench/script_vocab.py``).
_ASCII_VOCAB_FILE = Path(__file__).with_name("_ascii_vocab.zlib")
#: The pieces o200k's pre-tokenizer cuts a run of ASCII letters into: capitals then small
#: letters (``XMLHttp``, ``Request``), or capitals alone (``EOY``).
_CASE_PIECE_RE = re.compile(r"[A-Z]*[a-z]+|[A-Z]+")
#: The greedy match finds fewer tokens than o200k's merges on random letters (5 to 12%).
_UNKNOWN_SLACK = 1.15
_ASTRAL_RE = re.compile("[\U00010000-\U0010ffff\u2600-\u27bf\u2b00-\u2bff]")
_MARKS_RE = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")
#: A combining mark is 1 to 2 o200k tokens: 2.1 each lands 1.04 to 1.06 of o200k on the
#: generated samples (docs/how-it-works.md, "How text is estimated").
_MARK_TOKENS = 2.1
#: Runs of non-ASCII symbols by :func:`_symbol_run` land 0.99 to 1.02 of o200k on random
#: runs of each block (box drawing, arrows, math operators, private use, Braille): 4% more.
_SYMBOL_SLACK = 1.04
_ASTRAL_TOKENS = 2

_SINGLE = frozenset(SINGLE)
_PAIRS = frozenset(PAIRS[i : i + 2] for i in range(0, len(PAIRS), 2))
_TRIPLES = frozenset(TRIPLES[i : i + 3] for i in range(0, len(TRIPLES), 3))

#: Sampling reads 32 slices of 512 characters of a long text (16,384 in all, as much as a
#: text read whole): on texts of 20,000 to 60,000 characters of every class in
#: tests/unit/_content.py it lands 0.9% to 12% over o200k (16 slices landed 1.4% under on
#: text that mixes languages, emoji and code, and on whitespace-heavy output), ~1 ms a text
#: whatever its size (each regex pass of the estimate holds the interpreter).
SAMPLED_ABOVE = 16_384
_SAMPLES = 32
_SAMPLE_CHARS = 512


def estimate(text: str) -> int:
    """Tokens of ``text`` by its pieces (see the module). A text longer than
    :data:`SAMPLED_ABOVE` characters is estimated from evenly spaced slices and scaled, so
    the cost of one text is bounded whatever its size."""
    if len(text) > SAMPLED_ABOVE:
        step = len(text) // _SAMPLES
        slices = [text[i * step : i * step + _SAMPLE_CHARS] for i in range(_SAMPLES)]
        counted = sum(pieces(s) for s in slices)  # each alone: a run stays what it is
        return max(1, round(counted * len(text) / sum(len(s) for s in slices)))
    return pieces(text)


def pieces(text: str) -> int:
    """Tokens of ``text`` by its pieces; linear, mostly in C regex passes (byte passes on an
    ASCII text, :func:`_ascii_pieces`)."""
    # a single space at the end joins no word: o200k makes it a token
    n = 1.0 if text[-1:] == " " and text[-2:-1] not in _SPACE_CHARS else 0.0
    if not text.isascii() and _SCRIPT_WORD_RE.search(text):
        n += _SCRIPT_SLACK * sum(_script_word(word) for word in _SCRIPT_WORD_RE.findall(text))
        text = _SCRIPT_WORD_RE.sub("", text)
    if text.isascii():
        return max(1, round(_ascii_pieces(text, n) * _ASCII_SLACK))
    if len(text) >= 8 and _LONG_RUN_RE.search(text):
        runs: list[float] = []
        text = _LONG_RUN_RE.sub(lambda m: _long_run(m, runs), text)
        n += sum(runs)
    n += _words_and_spacing(text)
    n *= _ASCII_SLACK
    cjk = sum(_cjk(run) for run in _CJK_RUN_RE.findall(text))
    n += _CJK_SLACK * cjk
    for run in _OTHER_LETTERS_RE.findall(text):
        n += len(run) / 4 + 1
    astral = len(_ASTRAL_RE.findall(text))
    marks = len(_MARKS_RE.findall(text))
    for run in _SPACED_SYMBOLS_RE.findall(text):
        if run.isascii():
            n += _symbols(run.lstrip(" "))
            continue
        n += _SYMBOL_SLACK * _symbol_run(run)  # with the space before it: o200k may split
    # emoji, joiners and marks, counted as symbols above, at their own cost
    n += (_ASTRAL_TOKENS - 1) * astral + (_MARK_TOKENS - 1) * marks
    return max(1, round(n))


def _words_and_spacing(text: str) -> float:
    """The tokens of ``text``'s words, digits, underscores and whitespace, less the symbols
    that join a word or a line break (counted with the symbols after)."""
    words = _WORD_RE.findall(text)
    n: float = len(words) + _unknown_words(words)
    n += len(_INNER_CAP_RE.findall(text)) + len(_DIGITS_RE.findall(text))
    if words and max(map(len, words)) > _LONG_WORD:
        for word in words:  # junk, hashes, repeated letters: o200k splits
            if len(word) > _LONG_WORD:
                n += len(word) / 2 - 1 - len(_INNER_CAP_RE.findall(word))
    n += len(_SPACE_DIGIT_RE.findall(text)) + _CONTROL_TOKENS * len(_CONTROL_RE.findall(text))
    if "_" in text:
        n += sum(1 if len(u) < 4 else _repeated(u) for u in _UNDERSCORES_RE.findall(text))
        n -= 0.7 * len(_JOINED_UNDERSCORE_RE.findall(text))
    n += sum(1 if len(run) == 1 else _whitespace(run) for run in _WHITESPACE_RE.findall(text))
    joined = len(_JOINED_SYMBOL_RE.findall(text))
    return n - _JOINED * joined - len(_SYMBOL_NEWLINE_RE.findall(text))


#: The longest run of one repeated ASCII symbol o200k encodes as a token, as far as
#: ``ceil(n / L) + 1`` still bounds its count of every run of 1 to 400 (measured with
#: tiktoken): rules (``-``, ``=``, ``*``) merge long, brackets and quotes hardly at all (a run
#: of 1,000 ``[`` is 500 tokens, not the 63 a token per 16 gave).
_REPEAT_RUN = {
    "!": 14, '"': 4, "#": 22, "$": 4, "%": 12, "&": 2, "'": 4, "(": 4, ")": 4, "*": 64,
    "+": 12, ",": 4, "-": 64, ".": 42, "/": 20, ":": 12, ";": 12, "<": 8, "=": 64, ">": 8,
    "?": 8, "@": 6, "[": 2, "\\": 4, "]": 2, "^": 6, "_": 24, "`": 2, "{": 2, "|": 4,
    "}": 2, "~": 12,
}  # fmt: skip


def _repeated(run: str) -> int:
    """Tokens of a run of one repeated ASCII symbol (``_REPEAT_RUN``)."""
    return -(-len(run) // _REPEAT_RUN.get(run[0], 2)) + 1


def _symbols(run: str) -> int:
    """Tokens of a run of ASCII symbols: one per 2, a run of one repeated symbol by how
    long a run of it o200k merges (``_REPEAT_RUN``)."""
    if len(run) >= 4 and run.count(run[0]) == len(run):
        return _repeated(run)
    return (len(run) + 1) // 2


def _long_run(match: re.Match[str], runs: list[float]) -> str:
    """A long run of letters and digits priced whole and taken out of the text (replaced by
    a space; its price appended to ``runs``), or left as it is (:func:`_long_run_price`)."""
    run = match.group(0)
    price = _long_run_price(run)
    if price is None:
        return run
    runs.append(price)
    return " "


def _long_run_price(run: str) -> float | None:
    """The tokens of a long run of letters and digits priced whole: base64 (mixed case and
    digits, 20 characters or more) and hex-like ids (3 digits or more among letters); any
    other run (a word, an identifier, a path) is ``None``: it stays in the text."""
    if run.isalpha():
        return None
    digits = sum(ch.isdigit() for ch in run)
    if len(run) >= 20 and digits and run.lower() != run and run.upper() != run:
        return _B64_TOKENS_PER_CHAR * len(run)
    if digits >= 3 and len(run) - digits >= 2 and run.isalnum():
        return 1 + _HEX_TOKENS_PER_CHAR * len(run)
    return None


# ------------------------------------------------------------------ ASCII text in byte passes
#
# Most tool output is ASCII. There the estimate counts the same pieces as the regex passes
# above count on any text, in byte passes: the text translated to one letter per character
# class (``bytes.translate``), each piece counted where one class follows another
# (``bytes.count``: a word starts where a letter follows anything else), and only the runs
# that need a look (long words, whitespace runs of two or more, symbol runs of four or more,
# long runs of letters and digits) found by regexes that begin with a literal over the
# classes. The result equals the regex passes' on every ASCII text
# (tests/unit/test_estimate_patterns.py) in a third to two thirds of the time
# (``python -m bench.counting --estimate-against REV``).

_ASCII = [chr(code) for code in range(128)]


def _chars(pattern: str | re.Pattern[str]) -> str:
    """The ASCII characters ``pattern`` matches on their own."""
    return "".join(ch for ch in _ASCII if re.fullmatch(pattern, ch))


_LETTERS, _DIGIT_CHARS, _SYMBOL_CHARS = _chars(_WORD_RE), _chars(r"\d"), _chars(_SYMBOL)
_SPACES = _chars(r"\s")  # the space, line breaks, tabs, ``\x0b``-``\x0c``, ``\x1c``-``\x1f``
_CONTROLS = _chars(_CONTROL_RE)


def _classes(marks: dict[str, str]) -> bytes:
    """A ``bytes.translate`` table: each character of a key to its mark, the others to ``.``."""
    table = bytearray(b"." * 256)
    for chars, mark in marks.items():
        for ch in chars:
            table[ord(ch)] = ord(mark)
    return bytes(table)


#: Letters ``a``, symbols ``s``, what a joined symbol may follow (a word character or a line
#: break) ``w``, the rest (other whitespace, control characters) ``x``.
_JOIN_CLASSES = _classes(
    {
        _LETTERS: "a",
        _SYMBOL_CHARS: "s",
        _DIGIT_CHARS + "_\n": "w",
        _SPACES.replace("\n", "") + _CONTROLS: "x",
    }
)
_CASE_CLASSES = _classes({_chars("[a-z]"): "l", _chars("[A-Z]"): "U"})
#: Letters kept, every other byte a space: ``split()`` then gives the words of ``_WORD_RE``.
_LETTERS_ONLY = bytes(b if chr(b) in _LETTERS else 0x20 for b in range(256))
_DIGIT_CLASSES = _classes({_DIGIT_CHARS: "d", " ": " "})
#: Whitespace but the space ``n``, control characters ``c``.
_SPACE_CLASSES = _classes({_SPACES.replace(" ", ""): "n", _CONTROLS: "c"})
_WHITESPACE_CLASSES = _classes({_SPACES: "w"})
_RUN_CLASSES = _classes({_chars("[A-Za-z0-9+/]"): "b", "=": "="})
#: The runs of the classes above that need a look (``_LONG_RUN_RE``, words of ``_WORD_RE``
#: longer than ``_LONG_WORD``, whitespace runs of two or more, symbol runs of four or more):
#: each written as a literal, so the regex engine searches for it.
_CLASS_LONG_RUN = re.compile(rb"bbbbbbbbb*={0,2}")
_CLASS_LONG_WORD = re.compile(b"a" * (_LONG_WORD + 1) + b"a*")
_CLASS_WHITESPACE_RUN = re.compile(rb"ww+")
_CLASS_SYMBOL_RUN = re.compile(rb"ssss+")


def _ascii_pieces(text: str, n: float) -> float:
    """``n`` plus the tokens of the pieces of ``text``, an ASCII text, before the ASCII
    slack: what the regex passes count (long runs, :func:`_words_and_spacing`, symbol runs),
    in byte passes."""
    raw = text.encode("ascii")
    if len(text) >= 8:
        runs: list[float] = []
        text = _ascii_long_runs(text, raw, runs)
        if runs:  # priced runs were taken out: the text changed
            n += sum(runs)
            raw = text.encode("ascii")
    join = raw.translate(_JOIN_CLASSES)
    n += _ascii_words_and_spacing(text, raw, join)
    return n + _ascii_symbols(text, join)


def _ascii_long_runs(text: str, raw: bytes, runs: list[float]) -> str:
    """``text`` (``raw``: its bytes) with its long runs of letters and digits priced whole
    replaced by a space (their prices appended to ``runs``), as ``_LONG_RUN_RE.sub`` with
    :func:`_long_run`."""
    kept: list[str] = []
    at = 0
    for match in _CLASS_LONG_RUN.finditer(raw.translate(_RUN_CLASSES)):
        start, end = match.span()
        price = _long_run_price(text[start:end])
        if price is not None:
            runs.append(price)
            kept += (text[at:start], " ")
            at = end
    return "".join([*kept, text[at:]]) if kept else text


def _ascii_words_and_spacing(text: str, raw: bytes, join: bytes) -> float:
    """:func:`_words_and_spacing` of an ASCII text (``raw``, its classes ``join``)."""
    case = raw.translate(_CASE_CLASSES)
    # a word starts at a letter after anything else, or at the start
    n: float = join.count(b"sa") + join.count(b"wa") + join.count(b"xa") + (join[:1] == b"a")
    n += _unknown_ascii_words(raw)
    # digit groups of up to 3: a run of L digits is L // 3 groups of 3 (``D``) and one more
    # if digits are left (a ``d`` before what ends the run)
    digits = raw.translate(_DIGIT_CLASSES)
    groups = digits.replace(b"ddd", b"D")
    n += case.count(b"lU") + (
        groups.count(b"D") + groups.count(b"d.") + groups.count(b"d ") + groups.endswith(b"d")
    )
    for match in _CLASS_LONG_WORD.finditer(join):  # junk, hashes, repeated letters: o200k splits
        start, end = match.span()
        n += (end - start) / 2 - 1 - case.count(b"lU", start, end)
    spaces = raw.translate(_SPACE_CLASSES)
    n += digits.count(b" d") + _CONTROL_TOKENS * spaces.count(b"c")
    if "_" in text:
        n += sum(1 if len(u) < 4 else _repeated(u) for u in _UNDERSCORES_RE.findall(text))
        n -= 0.7 * len(_JOINED_UNDERSCORE_RE.findall(text))
    # whitespace: a token per character that is not a space on its own, runs of two or
    # more by :func:`_whitespace`
    alone = spaces.count(b"n")
    runs = 0
    for match in _CLASS_WHITESPACE_RUN.finditer(raw.translate(_WHITESPACE_CLASSES)):
        run = text[match.start() : match.end()]
        alone -= len(run) - run.count(" ")
        runs += _whitespace(run)
    n += runs + alone
    # a symbol joins the letter after it unless what comes before it is neither a word
    # character nor a line break (``_JOINED_SYMBOL_RE``)
    joined = join.count(b"sa") - join.count(b"ssa") - join.count(b"xsa")
    return n - _JOINED * joined - len(_SYMBOL_NEWLINE_RE.findall(text))


def _ascii_symbols(text: str, join: bytes) -> int:
    """The tokens of an ASCII text's symbol runs (``join``: its classes): a token per 2, a
    run of four or more of one repeated symbol by :func:`_repeated`."""
    pairs = join.replace(b"ss", b"S")  # a run of L symbols: L // 2 pairs and one left if odd
    total = pairs.count(b"S") + pairs.count(b"s")
    for match in _CLASS_SYMBOL_RUN.finditer(join):
        run = text[match.start() : match.end()]
        if run.count(run[0]) == len(run):
            total += _repeated(run) - (len(run) + 1) // 2
    return total


def _whitespace(run: str) -> int:
    """Tokens of a run of whitespace (not a single space): a token per stretch of one
    character, long stretches more (``_STRETCH``), non-breaking spaces a token per 5 and one
    more, ``\\r\\n`` pairs a token per 4; a run that repeats a unit of up to 4 characters
    (``"  \\n"`` times 100) at most a token per unit."""
    first = run[0]
    if len(run) == 1:
        return 1
    if first == "\n" and run[1] == " " and run.count(" ") == len(run) - 1:
        return 2 + (len(run) - 2) // 100  # a line break and its indentation
    if run.count(first) == len(run) and first in _STRETCH:
        return 1 + (len(run) - 1) // _STRETCH[first]
    periodic = 0
    if len(run) >= 8:
        for unit in range(2, 5):
            if run[unit:] == run[:-unit]:  # periodic: it repeats its first ``unit`` chars
                periodic = 1 + len(run) // unit
                break
    if not periodic and len(run) > 3 and len(set(run)) > 2:  # a mixture of 3 kinds or more
        return round(_WHITESPACE_SLACK * _greedy_whitespace(run) + 0.49)
    total = 0
    for segment in _WHITESPACE_SEGMENT_RE.findall(run):
        if segment[0] == "\u00a0":
            total += 1 + (len(segment) + 3) // 5
        elif segment[0] == "\r" and len(segment) > 1:
            total += 1 + (len(segment) // 2 - 1) // 4
        else:
            total += 1 + (len(segment) - 1) // _STRETCH.get(segment[0], 1)
    return min(total, periodic) if periodic else total


def _cjk(run: str) -> int:
    """Tokens of a run of CJK, kana or hangul: the longest of o200k's one-token strings of
    up to three characters at each step, a character outside them at its UTF-8 length less
    one."""
    n, i, end = 0, 0, len(run)
    while i < end:
        if run[i : i + 3] in _TRIPLES:
            i += 3
        elif run[i : i + 2] in _PAIRS:
            i += 2
        else:
            ch = run[i]
            n += 0 if ch in _SINGLE else len(ch.encode()) - 2
            i += 1
        n += 1
    return n


@functools.lru_cache(maxsize=1)
def _script_vocab() -> tuple[frozenset[str], dict[str, int]]:
    vocab, longest, _ = _script_data()
    return vocab, longest


@functools.lru_cache(maxsize=1)
def _script_data() -> tuple[frozenset[str], dict[str, int], frozenset[int]]:
    """o200k's one-token strings of other scripts and of whitespace (``bench/script_vocab.py``)
    and, by their first three characters, the longest of them (a string of three characters
    or more that starts no longer one: two); then the blocks of 64 code points where o200k
    splits a character it has no token for in three."""
    strings = zlib.decompress(_SCRIPT_VOCAB_FILE.read_bytes()).decode("utf-8").split("\0")
    blocks = frozenset(ord(ch) - 0x1000 for ch in strings.pop()[1:])
    return frozenset(strings), _longest_by_start(strings), blocks


def _longest_by_start(strings: list[str]) -> dict[str, int]:
    """The length of the longest of ``strings`` by their first three characters (a string
    of three characters or more that starts no longer one: two), so a greedy match tries
    only the lengths some string reaches."""
    longest: dict[str, int] = {}
    for s in strings:
        if len(s) > longest.get(s[:3], 2):
            longest[s[:3]] = len(s)
    return longest


def _unknown_words(words: list[str]) -> float:
    """The tokens beyond one a piece (a word, and one more per inner capital, as the passes
    count them) of the words of up to ``_LONG_WORD`` letters that o200k has no token for:
    random letters (a cipher, generated names) are 2 to 6 tokens a word, not one. A word
    o200k has whole, with or without the space before it, adds nothing; a set difference
    finds the others."""
    unknown = set(words).difference(_ascii_vocab()[1])
    return _priced(unknown, words, str) if unknown else 0


def _unknown_ascii_words(raw: bytes) -> float:
    """:func:`_unknown_words` of an ASCII text's bytes: its words split out in C (every byte
    but a letter made a space) and looked up as bytes, so prose pays two C passes."""
    words = raw.translate(_LETTERS_ONLY).split()
    unknown = set(words).difference(_ascii_vocab()[3])
    return _priced(unknown, words, bytes.decode) if unknown else 0


def _priced(unknown: set[Any], words: list[Any], text: Callable[[Any], str]) -> float:
    """The tokens :func:`_ascii_word` adds for the ``unknown`` among ``words`` (``text``: a
    word as a str), each as often as it occurs, 15% more (:data:`_UNKNOWN_SLACK`)."""
    counts: Counter[Any] | None = None
    extra = 0
    for word in unknown:
        more = _ascii_word(text(word)) if len(word) <= _LONG_WORD else 0
        if more:
            counts = Counter(words) if counts is None else counts
            extra += more * counts[word]
    return _UNKNOWN_SLACK * extra


@functools.lru_cache(maxsize=8_192)
def _ascii_word(word: str) -> int:
    """The tokens beyond one a piece of an ASCII word o200k has no token for: each piece
    (:data:`_CASE_PIECE_RE`) it has no token for is the longest of its strings at each step,
    the first with the space before it (most words follow one)."""
    vocab, known, longest, _ = _ascii_vocab()
    extra = 0
    for k, piece in enumerate(_CASE_PIECE_RE.findall(word)):
        if piece in known:
            continue
        text = " " + piece if k == 0 else piece
        n, i, end = 0, 0, len(text)
        while i < end:
            size = min(longest.get(text[i : i + 3], 2), end - i)
            while size > 1 and text[i : i + size] not in vocab:
                size -= 1
            i += size
            n += 1
        extra += n - 1
    return extra


def load_tables() -> None:
    """Read the table every ASCII text's estimate looks words up in (o200k's ASCII words,
    about 20 ms once per process), so no estimate made on an event loop reads a file:
    ``tokens.load_tokenizers`` calls it, in a worker thread on the async paths."""
    _ascii_vocab()


def tables_loaded() -> bool:
    """Whether :func:`load_tables` has read its table."""
    return _ascii_vocab.cache_info().currsize > 0


@functools.lru_cache(maxsize=1)
def _ascii_vocab() -> tuple[frozenset[str], frozenset[str], dict[str, int], frozenset[bytes]]:
    """o200k's one-token strings of ASCII letters (a leading space kept), the words among
    them as a text holds them (without the space), the longest of them by their start
    (:func:`_longest_by_start`), and the words again as bytes."""
    strings = zlib.decompress(_ASCII_VOCAB_FILE.read_bytes()).decode("ascii").split("\0")
    words = frozenset(s.lstrip(" ") for s in strings)
    bwords = frozenset(w.encode("ascii") for w in words)
    return frozenset(strings), words, _longest_by_start(strings), bwords


@functools.lru_cache(maxsize=4_096)
def _greedy_whitespace(run: str) -> int:
    """Tokens of a mixed run of whitespace: o200k's pre-tokenizer cuts it after its last
    line break; in each piece the longest of o200k's whitespace strings at each step."""
    vocab, prefixes = _whitespace_vocab()
    cut = max(run.rfind("\n"), run.rfind("\r")) + 1
    n = 0
    for piece in (run[:cut], run[cut:]):
        i, end = 0, len(piece)
        while i < end:
            size, j = 1, i + 1
            while j < end and piece[i : j + 1] in prefixes:
                j += 1
                if piece[i:j] in vocab:
                    size = j - i
            if size == 1 and piece[i] not in vocab:
                n += len(piece[i].encode()) - 1
            i += size
            n += 1
    return n


@functools.lru_cache(maxsize=1)
def _whitespace_vocab() -> tuple[frozenset[str], frozenset[str]]:
    """o200k's whitespace strings and every prefix of them."""
    vocab = frozenset(s for s in _script_vocab()[0] if s.isspace())
    return vocab, frozenset(s[:k] for s in vocab for k in range(1, len(s) + 1))


@functools.lru_cache(maxsize=8_192)
def _script_word(word: str) -> int:
    """Tokens of a word of another script (with the space before it): the longest of o200k's
    strings at each step (a word o200k has whole is one), a run of ASCII letters one, a
    character outside them two (o200k splits its bytes in two; a space before it joins
    them), three in the blocks where o200k merges none of its bytes (Yi, Cherokee,
    Mongolian), four beyond the BMP."""
    vocab, longest, blocks = _script_data()
    if word in vocab:
        return 1
    n, i, end = 0, 0, len(word)
    while i < end:
        size = min(longest.get(word[i : i + 3], 2), end - i)
        while size > 1 and word[i : i + size] not in vocab:
            size -= 1
        ch = word[i]
        if size == 1 and ch not in vocab:
            if ch == " " and i + 1 < end and word[i + 1] not in vocab:
                i += 1  # the space joins the first byte of the unknown character after it
                continue
            if ch < "\x80":  # a run of ASCII letters (or the space): a token
                j = i + 1
                while j < end and "A" <= word[j] <= "z":
                    j += 1
                size = j - i
            else:  # a character o200k has no token for: its bytes, the first two merged
                code = ord(ch)
                n += 3 if code > 0xFFFF else 2 if (code >> 6) in blocks else 1
        i += size
        n += 1
    return n


@functools.lru_cache(maxsize=4_096)
def _symbol(ch: str) -> int:
    """Tokens of a non-ASCII character outside words: one where o200k has a token for it
    (CJK punctuation, common arrows; emoji and marks are priced on top of this, see
    :func:`pieces`), else its bytes with the first two merged (two; three in the blocks
    where o200k merges none: private use, Braille, CJK radicals)."""
    if ch in _script_data()[0] or _ASTRAL_RE.match(ch) or _MARKS_RE.match(ch):
        return 1
    code = ord(ch)
    return 2 if code < 0x800 or (code >> 6) not in _script_data()[2] else 3


@functools.lru_cache(maxsize=4_096)
def _symbol_run(run: str) -> int:
    """Tokens of a run of symbols holding a non-ASCII one: the longest of o200k's strings of
    symbols at each step (``────────`` is a token or two, not eight), a character outside
    them by :func:`_symbol` (an ASCII one: one)."""
    vocab, longest, _ = _script_data()
    n, i, end = 0, 0, len(run)
    spaced = run[0] == " " and end > 1
    body = run[1:] if spaced else run
    if _symbol_starts().isdisjoint(body):  # no string of symbols starts here: one by one
        n = sum(1 if ch < "\x80" else _symbol(ch) for ch in body)
        first = body[0]
        if spaced and run[:2] not in vocab and _symbol(first) == 1:
            n += 0 if _ASTRAL_RE.match(first) or _MARKS_RE.match(first) else 1
        return n
    if run[0] == " " and end > 1 and run[:2] not in vocab and _symbol(run[1]) != 1:
        i = 1  # the space joins the first byte of a character o200k splits
    if run[0] == " " and end > 1 and (_ASTRAL_RE.match(run[1]) or _MARKS_RE.match(run[1])):
        i = 1  # emoji and marks are priced on their own (see :func:`pieces`)
    while i < end:
        size = min(longest.get(run[i : i + 3], 2), end - i)
        while size > 1 and run[i : i + size] not in vocab:
            size -= 1
        n += 1 if size > 1 or run[i] < "\x80" else _symbol(run[i])
        i += size
    return n


@functools.lru_cache(maxsize=1)
def _symbol_starts() -> frozenset[str]:
    """The characters that begin one of o200k's strings of two symbols or more (a space
    among them: `` →``)."""
    vocab = _script_data()[0]
    return frozenset(
        s[0] for s in vocab if len(s) > 1 and not s.isspace() and not any(c.isalpha() for c in s)
    )
