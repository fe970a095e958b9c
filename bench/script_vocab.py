"""Write ``langchain_compact/_script_vocab.zlib``: the strings of letters and marks of every
script but ASCII-only and CJK (Cyrillic, Greek, Arabic, Hebrew, Devanagari, Thai, accented
Latin, ...) that ``o200k_base`` encodes as one token, with the leading space where o200k has
one, then its strings of whitespace (434: mixed runs of spaces, tabs, line breaks), joined by
NUL characters, and last the blocks of code points where o200k spends three tokens on a
letter it has no token for; compressed with zlib (about 57,000 strings, 170 kB).

``approximate_tokens`` reads them (lazily, the first time a text holds such a word) to count
these scripts without tokenizer files: greedy longest match over these strings
(``_estimate._script_word``; tests/unit/test_estimates.py checks the result against o200k on
generated prose and random letters of each script).

It also writes ``langchain_compact/_ascii_vocab.zlib``: o200k's one-token strings of ASCII
letters, with the leading space where o200k has one (about 86,000). ``approximate_tokens``
prices an ASCII word o200k has no token for by the greedy longest match over them
(``_estimate._ascii_word``): a word of random letters is 2 to 6 tokens, not the one a word
of English is.

Run: ``python -m bench.script_vocab`` (needs tiktoken's o200k_base).
"""

from __future__ import annotations

import re
import unicodedata
import zlib
from collections.abc import Iterator
from pathlib import Path

import tiktoken

from langchain_compact.tokens import provision_tiktoken_cache

CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
#: The last entry: this mark, then :func:`three_token_blocks`.
BLOCKS_MARK = "\x01"
TARGET = Path(__file__).resolve().parents[1] / "langchain_compact" / "_script_vocab.zlib"
ASCII_TARGET = TARGET.with_name("_ascii_vocab.zlib")


def strings() -> list[str]:
    """o200k's one-token strings of letters and marks (a leading space kept), each holding a
    character that is neither ASCII nor CJK, its strings of whitespace, its strings of
    symbols of the BMP holding a non-ASCII one (box drawing, arrows, punctuation), and every
    other non-ASCII character it has a token for alone."""
    found = set()
    for text in token_texts("utf-8"):
        if text.isspace() or (len(text) == 1 and not text.isascii()):
            found.add(text)  # whitespace, and any other character that is a token alone
            continue
        word = text[1:] if text.startswith(" ") else text
        if not word or word.isascii() or CJK.search(word):
            continue
        if all(unicodedata.category(ch)[0] in "LM" for ch in word):
            found.add(text)
        elif all(
            not ch.isspace() and ch <= "\uffff" and unicodedata.category(ch)[0] not in "LMN"
            for ch in word
        ):
            found.add(text)  # a run of symbols (``────``, ``…``, ``→``)
    return sorted(found)


def ascii_strings() -> list[str]:
    """o200k's one-token strings of ASCII letters, a leading space kept."""
    return sorted(t for t in token_texts("ascii") if (t[1:] if t[:1] == " " else t).isalpha())


def token_texts(encoding: str) -> Iterator[str]:
    """The text of each of o200k's tokens that decodes in ``encoding``."""
    provision_tiktoken_cache()
    enc = tiktoken.get_encoding("o200k_base")
    for rank in range(enc.n_vocab):
        try:
            yield enc.decode_single_token_bytes(rank).decode(encoding)
        except (KeyError, UnicodeDecodeError):
            continue


def three_token_blocks() -> str:
    """The blocks of 64 code points (one first two UTF-8 bytes) of the BMP in which o200k
    splits a character it has no token for into three tokens (elsewhere two: its first
    two bytes merge), as one character each: ``chr(0x1000 + code_point // 64)``."""
    enc = tiktoken.get_encoding("o200k_base")
    blocks = set()
    for code in range(0x800, 0x10000):
        ch = chr(code)
        if 0xD800 <= code < 0xE000:
            continue
        if len(enc.encode_ordinary(ch)) > 2:
            blocks.add(code >> 6)
    return "".join(chr(0x1000 + b) for b in sorted(blocks))


def main() -> None:
    found = strings()
    found.append(BLOCKS_MARK + three_token_blocks())
    TARGET.write_bytes(zlib.compress("\0".join(found).encode("utf-8"), 9))
    print(TARGET, len(found), TARGET.stat().st_size)
    ascii_found = ascii_strings()
    ASCII_TARGET.write_bytes(zlib.compress("\0".join(ascii_found).encode("ascii"), 9))
    print(ASCII_TARGET, len(ascii_found), ASCII_TARGET.stat().st_size)


if __name__ == "__main__":
    main()
