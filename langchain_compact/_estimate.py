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
  it (``,\\n``). These pieces are counted 3% high (rare words that o200k splits).
* **Whitespace**: a single space joins the word after it; any other run costs a token per
  stretch of one character, long stretches one per 100 spaces, 15 newlines or tabs, 4
  ``\\r\\n`` pairs, non-breaking spaces one per 5 and one more; a run repeating a unit of
  up to 4 characters at most a token per unit.
* **CJK, kana and hangul**: the longest match of up to three characters among the strings
  o200k encodes as one token (:mod:`langchain_compact._cjk_vocab`), a character outside them
  at its UTF-8 length less one, 5% more (the greedy match finds a few merges fewer or more
  than o200k does).
* **base64**: a run of 20 or more base64 characters mixing cases and digits costs 0.71 a
  character (o200k: 0.66 to 0.70); a hex-like id (8 or more letters and digits, 3 or more of
  them digits) 1 and 0.6 a character.
* **Other scripts' letters**: a token per 4 plus one a word (prose; random letters of these
  scripts run up to 2.5x over it, which the confirmation by tiktoken near the fit limit
  covers).
* **Emoji, other characters beyond the BMP and BMP pictographs**: 2 each; joiners and
  variation selectors 1. **Combining marks**: 2.1 each. **Control characters**: 2 each
  (o200k splits the ``[`` and the digits after an escape).
* **Other non-ASCII symbols** (CJK punctuation, arrows, box drawing): 1 each.
"""

from __future__ import annotations

import re

from langchain_compact._cjk_vocab import PAIRS, SINGLE, TRIPLES

__all__ = ["estimate", "pieces"]

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
_WHITESPACE_SEGMENT_RE = re.compile(r"(?:\r\n)+| +|\n+|\t+|\u00a0+|\s")
#: On an ASCII text (most tool output) the symbol and digit passes test each character
#: against a plain set of ASCII characters, the same characters ``_SYMBOL`` and ``\d`` take
#: there, instead of Unicode categories: the same matches in about half the time.
_ASCII_SYMBOL = r"[!-/:-@\[-^`{-~]"
_ASCII_DIGITS_RE = re.compile(r"[0-9][0-9]?[0-9]?")
_ASCII_SYMBOLS_RE = re.compile(rf"{_ASCII_SYMBOL}+")
_ASCII_JOINED_SYMBOL_RE = re.compile(rf"{_ASCII_SYMBOL}(?<![^\w\n]{_ASCII_SYMBOL})(?=[A-Za-z])")
#: Characters per extra token in a long stretch of one whitespace character.
_STRETCH = {" ": 100, "\n": 15, "\t": 15}
_LONG_RUN_RE = re.compile(r"[A-Za-z0-9+/]{8,}={0,2}")
_B64_TOKENS_PER_CHAR = 0.71
_HEX_TOKENS_PER_CHAR = 0.6

_CJK_CLASS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_RUN_RE = re.compile(f"[{_CJK_CLASS}]+")
#: The greedy match of o200k's strings finds a few merges fewer than o200k does, or more:
#: on generated and real prose it lands within 3% of o200k; 4% more keeps it above.
_CJK_SLACK = 1.05
#: Letters of other scripts (not ASCII, not CJK): a token per 4 plus one a word.
_OTHER_LETTERS_RE = re.compile(rf"[^\W\d_A-Za-z{_CJK_CLASS}]+")
_ASTRAL_RE = re.compile("[\U00010000-\U0010ffff\u2600-\u27bf\u2b00-\u2bff]")
_MARKS_RE = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")
_MARK_TOKENS = 2.1
_ASTRAL_TOKENS = 2

_SINGLE = frozenset(SINGLE)
_PAIRS = frozenset(PAIRS[i : i + 2] for i in range(0, len(PAIRS), 2))
_TRIPLES = frozenset(TRIPLES[i : i + 3] for i in range(0, len(TRIPLES), 3))

#: Sampling reads 8,192 characters of a long text, off by under 3% from reading it whole
#: on the transcripts' long results and on logs: ~0.5 ms a text instead of ~3 ms for
#: 50,000 characters (each regex pass of the estimate holds the interpreter).
SAMPLED_ABOVE = 16_384
_SAMPLES = 16
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
    """Tokens of ``text`` by its pieces; linear, mostly in C regex passes."""
    n = 0.0
    if len(text) >= 8 and _LONG_RUN_RE.search(text):
        runs: list[float] = []
        text = _LONG_RUN_RE.sub(lambda m: _long_run(m, runs), text)
        n += sum(runs)
    ascii_text = text.isascii()
    words = _WORD_RE.findall(text)
    n += len(words)
    digits = _ASCII_DIGITS_RE if ascii_text else _DIGITS_RE
    n += len(_INNER_CAP_RE.findall(text)) + len(digits.findall(text))
    if words and max(map(len, words)) > _LONG_WORD:
        for word in words:  # junk, hashes, repeated letters: o200k splits
            if len(word) > _LONG_WORD:
                n += len(word) / 2 - 1 - len(_INNER_CAP_RE.findall(word))
    n += len(_SPACE_DIGIT_RE.findall(text)) + _CONTROL_TOKENS * len(_CONTROL_RE.findall(text))
    if "_" in text:
        n += sum(1 if len(u) < 4 else _repeated(u) for u in _UNDERSCORES_RE.findall(text))
        n -= 0.7 * len(_JOINED_UNDERSCORE_RE.findall(text))
    n += sum(1 if len(run) == 1 else _whitespace(run) for run in _WHITESPACE_RE.findall(text))
    joined = _ASCII_JOINED_SYMBOL_RE if ascii_text else _JOINED_SYMBOL_RE
    n -= _JOINED * len(joined.findall(text)) + len(_SYMBOL_NEWLINE_RE.findall(text))
    if ascii_text:
        n += sum(
            (len(run) + 1) // 2 if len(run) < 4 else _symbols(run)
            for run in _ASCII_SYMBOLS_RE.findall(text)
        )
        return max(1, round(n * _ASCII_SLACK))
    n *= _ASCII_SLACK
    cjk = sum(_cjk(run) for run in _CJK_RUN_RE.findall(text))
    n += _CJK_SLACK * cjk
    for run in _OTHER_LETTERS_RE.findall(text):
        n += len(run) / 4 + 1
    astral = len(_ASTRAL_RE.findall(text))
    marks = len(_MARKS_RE.findall(text))
    for run in _SYMBOLS_RE.findall(text):
        if run.isascii():
            n += _symbols(run)
            continue
        ascii_part = sum(1 for ch in run if ch < "\x80")
        n += (ascii_part + 1) // 2
        n += len(run) - ascii_part  # a non-ASCII symbol costs 1 here
    # emoji, joiners and marks, counted as symbols above, at their own cost
    n += (_ASTRAL_TOKENS - 1) * astral + (_MARK_TOKENS - 1) * marks
    return max(1, round(n))


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
    """A long run of letters and digits priced whole and taken out of the text: base64
    (mixed case and digits, 20 characters or more) and hex-like ids (3 digits or more among
    letters); any other run (a word, an identifier, a path) stays."""
    run = match.group(0)
    if run.isalpha():
        return run
    digits = sum(ch.isdigit() for ch in run)
    if len(run) >= 20 and digits and run.lower() != run and run.upper() != run:
        runs.append(_B64_TOKENS_PER_CHAR * len(run))
        return " "
    if digits >= 3 and len(run) - digits >= 2 and run.isalnum():
        runs.append(1 + _HEX_TOKENS_PER_CHAR * len(run))
        return " "
    return run


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
    total = 0
    for segment in _WHITESPACE_SEGMENT_RE.findall(run):
        if segment[0] == "\u00a0":
            total += 1 + (len(segment) + 3) // 5
        elif segment[0] == "\r" and len(segment) > 1:
            total += 1 + (len(segment) // 2 - 1) // 4
        else:
            total += 1 + (len(segment) - 1) // _STRETCH.get(segment[0], 1)
    if len(run) >= 8:
        for unit in range(2, 5):
            if run[unit:] == run[:-unit]:  # periodic: it repeats its first ``unit`` chars
                return min(total, 1 + len(run) // unit)
    return total


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
