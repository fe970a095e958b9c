"""Write ``langchain_compact/_script_vocab.zlib``: the strings of letters and marks of every
script but ASCII-only and CJK (Cyrillic, Greek, Arabic, Hebrew, Devanagari, Thai, accented
Latin, ...) that ``o200k_base`` encodes as one token, with the leading space where o200k has
one, then its strings of whitespace (434: mixed runs of spaces, tabs, line breaks), joined by
NUL characters and compressed with zlib (about 57,000 strings, 170 kB).

``approximate_tokens`` reads them (lazily, the first time a text holds such a word) to count
these scripts without tokenizer files: greedy longest match over these strings
(``_estimate._script_word``; tests/unit/test_estimates.py checks the result against o200k on
generated prose and random letters of each script).

Run: ``python -m bench.script_vocab`` (needs tiktoken's o200k_base).
"""

from __future__ import annotations

import re
import unicodedata
import zlib
from pathlib import Path

import tiktoken

from langchain_compact.tokens import provision_tiktoken_cache

CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
TARGET = Path(__file__).resolve().parents[1] / "langchain_compact" / "_script_vocab.zlib"


def strings() -> list[str]:
    """o200k's one-token strings of letters and marks (a leading space kept), each holding a
    character that is neither ASCII nor CJK, and its strings of whitespace."""
    provision_tiktoken_cache()
    enc = tiktoken.get_encoding("o200k_base")
    found = set()
    for rank in range(enc.n_vocab):
        try:
            text = enc.decode_single_token_bytes(rank).decode("utf-8")
        except (KeyError, UnicodeDecodeError):
            continue
        if text.isspace():
            found.add(text)
            continue
        word = text[1:] if text.startswith(" ") else text
        if not word or word.isascii() or CJK.search(word):
            continue
        if all(unicodedata.category(ch)[0] in "LM" for ch in word):
            found.add(text)
    return sorted(found)


def main() -> None:
    found = strings()
    TARGET.write_bytes(zlib.compress("\0".join(found).encode("utf-8"), 9))
    print(TARGET, len(found), TARGET.stat().st_size)


if __name__ == "__main__":
    main()
