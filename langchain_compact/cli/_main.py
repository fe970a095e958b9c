"""The ``langchain-compact`` command: ``demo``, ``inspect FILE`` and ``compact FILE``.

``demo`` runs a long dependent task offline with a scripted model that can only continue
from what its context still shows, so compaction that loses a fact fails visibly;
``--strategy truncate`` runs the same task with plain truncation for comparison.
``inspect`` shows where a transcript's tokens go; ``compact`` compacts one.

Example:
    >>> build_parser().parse_args(["demo", "--strategy", "truncate"]).strategy
    'truncate'
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from langchain_compact import __version__
from langchain_compact.cli._common import CliError, first_line, pick_counter
from langchain_compact.cli._demo import DEMO_STEPS, DEMO_WINDOW
from langchain_compact.cli.transcripts import DEFAULT_MAX_INPUT_BYTES, TranscriptError
from langchain_compact.config import CompactionConfig
from langchain_compact.errors import CompactionError

__all__ = ["build_parser", "main"]

PROG = "langchain-compact"
DEFAULT_INSPECT_WINDOW = 128_000
EXIT_ERROR = 2


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {value}")
    return value


#: The smallest ``--window`` the commands accept: below it a window cannot hold a system
#: prompt, the task, a summary and one tool result (a typo such as ``--window 10`` meant
#: 10,000 or a window in thousands; docs/cli.md).
MIN_WINDOW = 1_000


def _window(text: str) -> int:
    value = _positive(text)
    if value < MIN_WINDOW:
        raise argparse.ArgumentTypeError(
            f"{value} tokens is below the smallest window the commands accept ({MIN_WINDOW:,}); "
            "pass the model's context window in tokens, e.g. --window 8000 (not in thousands)"
        )
    return value


def _add_model_flags(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--model",
        metavar="PROVIDER:NAME",
        help=f"{what} with a real chat model via init_chat_model (e.g. openai:gpt-4o-mini); "
        "with --base-url, the model name the server serves",
    )
    parser.add_argument(
        "--base-url",
        metavar="URL",
        help="an OpenAI-compatible endpoint (ChatOpenAI; key from OPENAI_API_KEY, else "
        "'not-needed'), e.g. http://127.0.0.1:8080/v1",
    )


def _add_max_input(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-input-bytes",
        type=_positive,
        default=DEFAULT_MAX_INPUT_BYTES,
        metavar="N",
        help=f"refuse a transcript over N bytes ({DEFAULT_MAX_INPUT_BYTES:,}, 256 MiB)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``langchain-compact`` command."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Context compaction for LangChain / LangGraph agents: see it work "
        "(demo), see where a transcript's tokens go (inspect), compact one (compact).",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser(
        "demo",
        help="run a long dependent task offline, compacted (or truncated), and show the tokens",
        description="Run a long dependent task (each step needs the previous step's value; "
        "the report must begin with a code stated only in the original task) with a scripted "
        "model that can only continue from what its context still shows. Shows a line per "
        "model turn as it runs (or, with --view table, a per-turn table at the end), a PNG "
        "plot (DIR/context-STRATEGY.png) and a verdict. Exit code 0 if the task finished, "
        "1 if not.",
    )
    demo.add_argument(
        "--steps",
        type=_positive,
        default=DEMO_STEPS,
        help=f"steps of the task ({DEMO_STEPS})",
    )
    demo.add_argument(
        "--window",
        type=_window,
        default=DEMO_WINDOW,
        help=f"context window in tokens ({DEMO_WINDOW})",
    )
    demo.add_argument(
        "--strategy",
        choices=("compact", "truncate"),
        default="compact",
        help="compact (default) or plain truncation (trim_messages) at the same budget",
    )
    demo.add_argument(
        "--out",
        metavar="DIR",
        default="demo-out",
        help="where the plot, the archive and the SQLite checkpoints go (./demo-out)",
    )
    demo.add_argument(
        "--view",
        choices=("live", "table"),
        default="live",
        help="live: a line per model turn as it runs (default); table: a per-turn table with "
        "a token bar, printed at the end",
    )
    demo.add_argument("--seed", type=int, default=7, help="task seed (7)")
    _add_model_flags(demo, "run the task")

    inspect = sub.add_parser(
        "inspect",
        help="show where a transcript's tokens go and what compaction would do",
        description="Read a transcript (OpenAI chat JSONL, or LangChain messages_to_dict "
        "dicts as JSONL or a JSON list) and show its tokens by role, by tool and the "
        "largest messages, and what micro-compaction and a full compaction would do.",
    )
    inspect.add_argument("file", metavar="FILE", help="transcript to inspect ('-': stdin)")
    inspect.add_argument(
        "--window",
        type=_window,
        default=DEFAULT_INSPECT_WINDOW,
        help=f"context window in tokens ({DEFAULT_INSPECT_WINDOW:,})",
    )
    inspect.add_argument("--keep-last", type=_positive, default=None, help="messages kept (4)")
    inspect.add_argument("--top", type=int, default=5, help="largest messages to list (5)")
    inspect.add_argument("--json", action="store_true", help="print the report as JSON")
    inspect.add_argument("--repair", action="store_true", help="repair broken tool pairing")
    _add_max_input(inspect)

    compact = sub.add_parser(
        "compact",
        help="compact a transcript file",
        description="Micro-compact and then fully compact a transcript once (compact_history), "
        "even under the trigger, but never into a bigger history: a full compaction that would "
        "not make it smaller is not applied. Writes the result in the input's format (JSONL; a "
        "JSON list if OUT ends in .json) and the removed originals to the archive. Nothing is "
        "written unless every step worked: archive records go into place first, then OUT is "
        "replaced atomically (OUT may be FILE itself).",
    )
    compact.add_argument("file", metavar="FILE", help="transcript to compact ('-': stdin)")
    compact.add_argument("-o", "--output", metavar="OUT", required=True, help="output file")
    compact.add_argument(
        "--window",
        type=_window,
        default=DEFAULT_INSPECT_WINDOW,
        help=f"context window in tokens, for the summary budget ({DEFAULT_INSPECT_WINDOW:,})",
    )
    compact.add_argument(
        "--keep-last", type=_positive, default=None, help="messages kept verbatim (4)"
    )
    compact.add_argument(
        "--archive", metavar="DIR", default=".memory", help="archive folder (.memory)"
    )
    compact.add_argument("--thread-id", help="archive thread (default: the input file's name)")
    compact.add_argument("--repair", action="store_true", help="repair broken tool pairing")
    compact.add_argument(
        "--focus",
        metavar="TEXT",
        default=None,
        help="what the summary keeps first: its first section lists the facts about TEXT",
    )
    _add_max_input(compact)
    _add_model_flags(compact, "summarise")
    return parser


# --------------------------------------------------------------------------- commands


def _config(args: argparse.Namespace) -> CompactionConfig:
    extra = {"keep_last_n": args.keep_last} if args.keep_last else {}
    return CompactionConfig(context_window=args.window, **extra)


def _note(line: str) -> None:
    print(f"{PROG}: note: {line}", file=sys.stderr)


def _inspect(args: argparse.Namespace) -> int:
    from langchain_compact.cli._compact import load_valid
    from langchain_compact.cli._inspect import analyse, render_inspect

    transcript = load_valid(
        args.file, repair=args.repair, say=_note, max_bytes=args.max_input_bytes
    ).transcript
    counter, label = pick_counter()
    report = analyse(
        transcript,
        config=_config(args),
        counter=counter,
        counter_label=label,
        top=args.top,
        source=args.file,
    )
    print(json.dumps(report, indent=2, ensure_ascii=False) if args.json else render_inspect(report))
    return 0


def _compact(args: argparse.Namespace) -> int:
    from langchain_compact.cli._compact import run_compact

    return run_compact(args)


def _demo(args: argparse.Namespace) -> int:
    from langchain_compact.cli._demo import DemoOptions, DemoTurn, run_demo
    from langchain_compact.cli._report import (
        fit,
        plot_context,
        plot_path,
        progress_lines,
        turn_table,
        verdict_lines,
    )

    def say(line: str) -> None:
        for part in fit(line):
            print(part, flush=True)

    def live(turn: DemoTurn) -> None:
        for line in progress_lines(turn):
            print(line, flush=True)

    options = DemoOptions(
        out_dir=Path(args.out),
        steps=args.steps,
        window=args.window,
        strategy=args.strategy,
        model=args.model,
        base_url=args.base_url,
        seed=args.seed,
    )
    result = run_demo(options, on_turn=live if args.view == "live" else None, say=say)
    print()
    if args.view == "table":
        print(turn_table(result))
        print()
    try:
        say(f"plot: {plot_context(result, plot_path(options.out_dir, options.strategy))}")
    except ImportError:
        say(
            "plot: skipped, matplotlib is not installed (pip install 'langchain-compact[demo]' "
            f"to get {plot_path(Path('DIR'), options.strategy)})"
        )
    if result.archive_dir is not None:
        say(f"archive: {result.archive_dir} (thread {result.thread_id})")
    say(f"checkpoints: {result.checkpoints}")
    for line in verdict_lines(result):
        say(line)
    return 0 if result.verdict.ok else 1


_COMMANDS = {"demo": _demo, "inspect": _inspect, "compact": _compact}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 demo task failed, 2 error).

    Errors print one line, ``langchain-compact: error: ...``, on stderr (no traceback;
    set ``LANGCHAIN_COMPACT_DEBUG=1`` to re-raise them).
    """
    args = build_parser().parse_args(argv)
    try:
        return _COMMANDS[args.command](args)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `langchain-compact demo | head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except Exception as exc:
        if os.environ.get("LANGCHAIN_COMPACT_DEBUG"):
            raise
        if isinstance(exc, (CliError, TranscriptError, CompactionError)):
            message = str(exc)
        elif isinstance(exc, OSError):
            message = f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": ")
        else:
            message = f"{type(exc).__name__}: {first_line(exc)}"
        print(f"{PROG}: error: {' '.join(message.split())}", file=sys.stderr)
        return EXIT_ERROR
