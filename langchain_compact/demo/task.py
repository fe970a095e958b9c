"""A long dependent task whose success proves no fact was lost (docs/origins.md, section 2).

Step ``k`` needs the value of step ``k-1``; the final report must list every value and start
with a constraint code stated only in the original task. Each tool call returns a large,
log-like payload that ends with ``RESULT step=K value=V``, so the context fills up quickly
and any value (or the task itself) that drops out of the context makes the run fail.
Everything is deterministic in ``seed``.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass

from langchain_core.tools import BaseTool, StructuredTool

from langchain_compact.errors import ConfigError

__all__ = ["DEFAULT_PAYLOAD_CHARS", "DEFAULT_STEPS", "DependentTask", "TaskVerdict"]

DEFAULT_STEPS = 14
"""Number of steps of the seed article's longer experiment; its shorter one has 7."""
DEFAULT_PAYLOAD_CHARS = 6000
"""Characters of log output each ``run_step`` call returns before its ``RESULT`` line."""

_CODE_RE = re.compile(r"(?=[A-Za-z_-]*\d)[A-Za-z0-9][A-Za-z0-9_-]{1,31}")
_REPORT_VALUE_RE = re.compile(r"\bstep\s+(\d+)\s*=\s*(\d+)", re.IGNORECASE)
_MODULES = ("core", "io", "net", "parser", "cache", "auth", "sched", "storage", "ui", "rpc")
_NAMES = ("encode", "flush", "retry", "resolve", "merge", "index", "render", "commit", "load")
_PACKAGES = ("urllib3", "pydantic", "orjson", "anyio", "httpcore", "numpy", "attrs", "idna")
_LINES = (
    "[{pct:3d}%] Building CXX object src/{mod}/{name}_{n}.cc.o",
    "tests/{mod}/test_{name}.py::test_{name}_{n} PASSED [{pct:3d}%]",
    "tests/{mod}/test_{name}.py::test_{name}_edge_{n} SKIPPED (requires GPU) [{pct:3d}%]",
    "WARNING {mod}: deprecated call {name}() in src/{mod}/{name}.py:{line}",
    "INFO {hh:02d}:{mm:02d}:{ss:02d}.{ms:03d} worker-{w} fetched shard {n}/{tot} ({kb} KiB)",
    "Collecting {pkg}=={major}.{minor}.{n}",
    "  Downloading {pkg}-{major}.{minor}.{n}-py3-none-any.whl ({kb} kB)",
    "ok {n} - {mod}.{name} # time={ms}ms",
    "GC pause {ms}ms, heap {kb}MB -> {line}MB (worker-{w})",
    "cache {mod}/{name}: miss, rebuilt in {ms} ms, key sha1:{hexa}",
    "警告：模块 {mod} 的缓存已过期，重新构建耗时 {ms} 毫秒",
    "信息：分片 {n}/{tot} 校验通过（{kb} KiB），工作进程 worker-{w}",
)
_CJK_LINES = 2  # the last two templates are Chinese; they are drawn less often


@dataclass(frozen=True, slots=True)
class TaskVerdict:
    """The outcome of :meth:`DependentTask.check`.

    Example:
        >>> DependentTask(steps=2).check("nothing").ok
        False
    """

    ok: bool
    """True when every value is reported correctly and the constraint code leads the text."""
    missing_steps: tuple[int, ...]
    """Steps with no ``step K = V`` line in the text."""
    wrong_steps: tuple[int, ...]
    """Steps reported with a value other than the expected one."""
    constraint_ok: bool
    """True when the text begins with ``REPORT <code>``."""
    reason: str
    """One human sentence saying why the run passed or failed."""


@dataclass(frozen=True, slots=True)
class DependentTask:
    """A chain of ``steps`` tool calls where each needs the previous result.

    Example:
        >>> task = DependentTask(steps=3, seed=1, payload_chars=0)
        >>> values = task.expected_values()
        >>> len(values)
        3
        >>> report = f"REPORT {task.code}\\n" + "\\n".join(
        ...     f"step {k} = {v}" for k, v in enumerate(values, 1))
        >>> task.check(report).ok
        True
    """

    steps: int = DEFAULT_STEPS
    """Number of dependent steps (>= 1)."""
    seed: int = 7
    """Seed for the starting value, the step values, the code and the log payloads."""
    payload_chars: int = DEFAULT_PAYLOAD_CHARS
    """Approximate size of each tool result's log text (>= 0; 0 gives only the RESULT line)."""
    constraint_code: str | None = None
    """Code the report must begin with (``REPORT <code>``); ``None`` derives one from ``seed``."""

    def __post_init__(self) -> None:
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 1:
            raise ConfigError(f"steps must be an integer >= 1, got {self.steps!r}")
        if isinstance(self.payload_chars, bool) or not isinstance(self.payload_chars, int):
            raise ConfigError(f"payload_chars must be an integer >= 0, got {self.payload_chars!r}")
        if self.payload_chars < 0:
            raise ConfigError(f"payload_chars must be an integer >= 0, got {self.payload_chars}")
        code = self.constraint_code
        if code is not None and not _CODE_RE.fullmatch(code):
            raise ConfigError(
                "constraint_code must be 2-32 letters, digits, '-' or '_', start with a letter"
                f" or digit and contain a digit (e.g. 'QX-4821'), got {code!r}"
            )

    @property
    def code(self) -> str:
        """The constraint code: ``constraint_code`` or one derived from ``seed``."""
        if self.constraint_code is not None:
            return self.constraint_code
        h = _digest("code", self.seed)
        letters = "ABCDEFGHJKLMNPQRSTUVWXYZ"
        first, second = letters[h % 24], letters[(h // 24) % 24]
        return f"{first}{second}-{1000 + (h // 576) % 9000}"

    @property
    def starting_value(self) -> int:
        """The value step 1 receives as ``previous`` (5 digits)."""
        return 10_000 + _digest("start", self.seed) % 90_000

    def step_value(self, step: int, previous: int) -> int:
        """Return ``run_step(step, previous)``'s value (5-6 digits), right or wrong input."""
        return 10_000 + _digest("value", self.seed, step, previous) % 990_000

    def expected_values(self) -> list[int]:
        """Return the correct values of steps ``1..steps``."""
        values, previous = [], self.starting_value
        for step in range(1, self.steps + 1):
            previous = self.step_value(step, previous)
            values.append(previous)
        return values

    def prompt(self) -> str:
        """Return the user's original task text.

        Example:
            >>> "Total steps: 2" in DependentTask(steps=2).prompt()
            True
        """
        n = self.steps
        return (
            f"Original task: a {n}-step dependent computation.\n"
            f"Total steps: {n}\n"
            f"Starting value: {self.starting_value}\n"
            "Rule: for step k, call run_step(step=k, previous=<value of step k-1>); step 1 uses"
            " the starting value as previous. Each call prints a long log that ends with the"
            " line `RESULT step=<k> value=<v>`.\n"
            f"Hard constraint: the final report must begin with `REPORT {self.code}` and then"
            f" list every step's value as `step K = V`, one line per step, steps 1 to {n}."
        )

    def tools(self) -> list[BaseTool]:
        """Return the task's tools: ``run_step(step, previous)``.

        Example:
            >>> tool = DependentTask(steps=2, payload_chars=0).tools()[0]
            >>> tool.invoke({"step": 3, "previous": 1}).startswith("ERROR")
            True
        """

        def run_step(step: int, previous: int) -> str:
            if step < 1 or step > self.steps:
                return (
                    f"ERROR: step {step} is out of range; this task has steps 1-{self.steps}."
                    f" Call run_step with 1 <= step <= {self.steps}."
                )
            return self._log(step, previous)

        description = (
            "Run one step of the dependent task. `step` is the step number (1-based);"
            " `previous` is the value of step-1 (the starting value for step 1). Prints the"
            " build/test log and ends with `RESULT step=<step> value=<value>`."
        )
        return [StructuredTool.from_function(run_step, name="run_step", description=description)]

    def check(self, final_text: str) -> TaskVerdict:
        """Judge the agent's final answer against the expected values and the constraint.

        Example:
            >>> DependentTask(steps=2).check("BLOCKED: lost it").reason
            'no final report: the agent said: BLOCKED: lost it'
        """
        expected = self.expected_values()
        reported: dict[int, set[int]] = {}
        for match in _REPORT_VALUE_RE.finditer(final_text):
            reported.setdefault(int(match.group(1)), set()).add(int(match.group(2)))
        missing = tuple(k for k in range(1, self.steps + 1) if k not in reported)
        wrong = tuple(
            k
            for k in range(1, self.steps + 1)
            if k in reported and reported[k] != {expected[k - 1]}
        )
        head = f"REPORT {self.code}"
        text = final_text.lstrip()
        after = text[len(head) : len(head) + 1]
        constraint_ok = text.startswith(head) and not (after.isalnum() or after in ("-", "_"))
        ok = not missing and not wrong and constraint_ok
        reason = self._reason(text, missing, wrong, constraint_ok, reported)
        return TaskVerdict(ok, missing, wrong, constraint_ok, reason)

    def _reason(
        self,
        text: str,
        missing: tuple[int, ...],
        wrong: tuple[int, ...],
        constraint_ok: bool,
        reported: dict[int, set[int]],
    ) -> str:
        if not missing and not wrong and constraint_ok:
            return f"all {self.steps} step values are correct and the report begins with the code"
        if not reported and text.startswith("BLOCKED"):
            return f"no final report: the agent said: {text.strip()}"
        parts = []
        if missing:
            parts.append(f"{_plural(missing)} missing from the final report")
        if wrong:
            expected = self.expected_values()
            k = wrong[0]
            got = ", ".join(str(v) for v in sorted(reported[k]))
            parts.append(
                f"{_plural(wrong)} reported with wrong values (step {k}: got {got},"
                f" expected {expected[k - 1]})"
            )
        if not constraint_ok:
            parts.append(f"the report does not begin with `REPORT {self.code}`")
        return "; ".join(parts)

    def _log(self, step: int, previous: int) -> str:
        rng = random.Random(_digest("log", self.seed, step, previous))
        result = f"RESULT step={step} value={self.step_value(step, previous)}"
        if not self.payload_chars:
            return result
        lines = [f"$ ./ci/run.sh --job {step} --of {self.steps} --worker {rng.randint(1, 8)}"]
        size = len(lines[0]) + 1 + len(result)
        while size < self.payload_chars:
            plain = len(_LINES) - _CJK_LINES
            index = rng.randrange(len(_LINES)) if rng.random() < 0.12 else rng.randrange(plain)
            line = _LINES[index].format(
                pct=rng.randint(0, 100),
                mod=rng.choice(_MODULES),
                name=rng.choice(_NAMES),
                pkg=rng.choice(_PACKAGES),
                n=rng.randint(1, 999),
                line=rng.randint(10, 2400),
                hh=rng.randint(0, 23),
                mm=rng.randint(0, 59),
                ss=rng.randint(0, 59),
                ms=rng.randint(0, 999),
                w=rng.randint(1, 8),
                tot=rng.randint(999, 4096),
                kb=rng.randint(4, 9000),
                major=rng.randint(0, 3),
                minor=rng.randint(0, 40),
                hexa=f"{rng.getrandbits(40):010x}",
            )
            lines.append(line)
            size += len(line) + 1
        if size > self.payload_chars and len(lines) > 1:
            lines.pop()
        lines.append(result)
        return "\n".join(lines)


def format_steps(steps: Iterable[int]) -> str:
    """Render step numbers compactly: ``[1, 2, 3, 5]`` -> ``'1-3, 5'``."""
    ordered = sorted(set(steps))
    spans: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        spans.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ", ".join(spans)


def _plural(steps: tuple[int, ...]) -> str:
    return f"step {steps[0]}" if len(steps) == 1 else f"steps {format_steps(steps)}"


def _digest(*parts: object) -> int:
    data = ":".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big")
