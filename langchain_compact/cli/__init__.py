"""The ``langchain-compact`` command line: ``demo``, ``inspect FILE`` and ``compact FILE``.

The command depends on the library, never the reverse: no module outside this package
imports from it. :mod:`langchain_compact.cli.transcripts` reads and writes transcript files
(OpenAI chat JSONL, or LangChain message dicts).
"""

from langchain_compact.cli._main import build_parser, main

__all__ = ["build_parser", "main"]
