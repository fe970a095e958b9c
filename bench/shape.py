"""``python -m bench.shape``: the package's shape, at a base commit and at the working tree.

One command, the figures issue 32 asks for (must-shows 3 and 6), side by side:

- the library's line count (every line of ``langchain_compact/**/*.py``, and radon's source
  lines: neither blank nor comment nor docstring);
- module-level numeric constants (a top-level ``NAME = 4_096`` or ``NAME: int = 2 * 1024``:
  a number, or arithmetic over numbers) and inline numbers in function bodies (every int or
  float literal inside a ``def``, its defaults included; ``0`` and ``1`` counted apart, they
  are rarely a choice);
- ``radon cc`` cyclomatic complexity: the highest per module, the highest in the engine, and
  every function above 15 (methods as ``Class.method``, closures as ``outer.inner``; radon
  does not add a closure's complexity to its function's);
- the ``ContextVar`` count;
- the sync/async twin pairs in ``core.py``: methods ``x`` and ``ax`` of one class whose bodies,
  ``await`` and the ``a`` prefix of the names they call removed, are at least 80% alike. A
  pair that only drives one generator of steps (``return drive(steps)`` and ``return await
  adrive(steps)``, at most a line naming ``steps`` before) is the one body, not a twin.

The **engine** is the package minus the text parsers and formats and the front ends:
:data:`NOT_ENGINE` names them (``radon cc`` over the rest is the command in
docs/development.md). Usage: ``python -m bench.shape [--base REV] [--out FILE]`` (base
default ``318e965``, main before issue 32's refactors); writes ``bench/results/shape.json``
and ``bench/results/shape.md``.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import subprocess
import sys
import tarfile
import tempfile
import tokenize
from io import BytesIO
from pathlib import Path
from typing import Any

from radon.complexity import cc_visit
from radon.raw import analyze

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "langchain_compact"
BASE = "318e965"
#: Complexity above which a function is listed.
LISTED_ABOVE = 15
#: Twin pairs: bodies at least this alike (difflib ratio over the normalised source).
TWIN_RATIO = 0.8

#: Not the engine. Text parsers and formats: the digest's parsers and section writers, the
#: secret patterns and redaction, the token estimate's text scanner and its CJK vocabulary, the
#: image header reader and price formulas. Front ends: the command line (its transcript
#: readers are formats too) and the demo agent, which call the engine and are not called by it.
NOT_ENGINE = (
    "_digest_parse.py",
    "_digest_sections.py",
    "digest.py",
    "_secret_patterns.py",
    "redaction.py",
    "_estimate.py",
    "_cjk_vocab.py",
    "_images.py",
    "cli/",
    "demo/",
)


def is_engine(module: str) -> bool:
    """Whether ``module`` (a path relative to the package, ``core.py``, ``cli/_main.py``) is
    part of the engine."""
    return not any(module.startswith(x) if x.endswith("/") else module == x for x in NOT_ENGINE)


def functions(source: str) -> list[tuple[str, int, int]]:
    """``(name, first line, complexity)`` of every function, method and closure in
    ``source`` (radon's blocks; a class's own figure, the sum of its methods', is left out)."""
    out: list[tuple[str, int, int]] = []

    def walk(block: Any, prefix: str) -> None:
        name = prefix + block.fullname
        out.append((name, block.lineno, block.complexity))
        for c in block.closures:
            walk(c, name + ".")

    for b in cc_visit(source):
        if not hasattr(b, "methods"):  # a class: radon lists its methods apart too
            walk(b, "")
    return out


def _is_number(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp):
        return _is_number(node.operand)
    if isinstance(node, ast.BinOp):
        return _is_number(node.left) and _is_number(node.right)
    return False


def numbers(tree: ast.Module) -> tuple[list[str], int, int]:
    """Module-level numeric constants (names), and the inline numbers in function bodies:
    ``(names, all, other than 0 and 1)``."""
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and _is_number(node.value):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif (
            isinstance(node, ast.AnnAssign)
            and node.value is not None
            and _is_number(node.value)
            and isinstance(node.target, ast.Name)
        ):
            names.append(node.target.id)
    seen: set[int] = set()
    total = trivial = 0
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(fn):
            if id(node) in seen or not isinstance(node, ast.Constant):
                continue
            seen.add(id(node))  # a closure's numbers are counted once
            v = node.value
            if isinstance(v, int | float) and not isinstance(v, bool):
                total += 1
                trivial += v in (0, 1)
    return names, total, total - trivial


def _normalised(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    body = ast.Module(body=fn.body[1:] if ast.get_docstring(fn) else fn.body, type_ignores=[])
    text = ast.unparse(body).replace("await ", "")
    return " ".join(w[1:] if w.startswith("a") and len(w) > 1 else w for w in text.split())


def _drives(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether ``fn`` only drives a generator of steps: its body (after the docstring) is
    ``[return] drive(...)`` or ``[return] await adrive(...)``, at most one assignment
    before."""
    body = fn.body[1:] if ast.get_docstring(fn) else fn.body
    if not body or len(body) > 2 or (len(body) == 2 and not isinstance(body[0], ast.Assign)):
        return False
    last = body[-1]
    if not isinstance(last, ast.Return | ast.Expr) or last.value is None:
        return False
    call = last.value.value if isinstance(last.value, ast.Await) else last.value
    return (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id in ("drive", "adrive")
    )


def twins(tree: ast.Module) -> list[dict[str, Any]]:
    """The sync/async twin pairs of ``tree``'s classes (see the module docstring)."""
    out = []
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        defs = {
            n.name: n for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        for name, fn in defs.items():
            twin = defs.get("a" + name.lstrip("_")) if not name.startswith("_") else None
            twin = twin or (defs.get("_a" + name[1:]) if name.startswith("_") else None)
            if twin is None or not isinstance(twin, ast.AsyncFunctionDef):
                continue
            if _drives(fn) and _drives(twin):  # one generator body, driven both ways
                continue
            ratio = difflib.SequenceMatcher(None, _normalised(fn), _normalised(twin)).ratio()
            if ratio >= TWIN_RATIO:
                out.append({"pair": f"{cls.name}.{name}/{twin.name}", "ratio": round(ratio, 2)})
    return out


def measure(root: Path) -> dict[str, Any]:
    """The shape of the package under ``root`` (a checkout's root)."""
    pkg = root / PACKAGE
    lines = sloc = 0
    constants: dict[str, list[str]] = {}
    inline = inline_nontrivial = context_vars = 0
    per_module: dict[str, int] = {}
    above: list[dict[str, Any]] = []
    engine_max: tuple[int, str] = (0, "")
    core_twins: list[dict[str, Any]] = []
    for path in sorted(pkg.rglob("*.py")):
        module = path.relative_to(pkg).as_posix()
        source = path.read_text(encoding="utf-8")
        lines += source.count("\n")
        sloc += analyze(source).sloc
        tree = ast.parse(source)
        names, total, nontrivial = numbers(tree)
        if names:
            constants[module] = names
        inline += total
        inline_nontrivial += nontrivial
        context_vars += sum(
            isinstance(n, ast.Call)
            and getattr(n.func, "id", getattr(n.func, "attr", None)) == "ContextVar"
            for n in ast.walk(tree)
        )
        if module == "core.py":
            core_twins = twins(tree)
        fns = functions(source)
        if not fns:
            continue
        per_module[module] = max(c for _, _, c in fns)
        for name, line, c in fns:
            if c > LISTED_ABOVE:
                above.append(
                    {
                        "function": f"{module}:{name}",
                        "line": line,
                        "complexity": c,
                        "engine": is_engine(module),
                    }
                )
            if is_engine(module) and c > engine_max[0]:
                engine_max = (c, f"{module}:{name}")
    above.sort(key=lambda r: (-r["complexity"], r["function"]))
    return {
        "lines": lines,
        "sloc": sloc,
        "module_numeric_constants": sum(map(len, constants.values())),
        "module_numeric_constant_names": constants,
        "inline_numbers": inline,
        "inline_numbers_not_0_or_1": inline_nontrivial,
        "engine_max_complexity": engine_max[0],
        "engine_max_function": engine_max[1],
        "package_max_complexity": max(per_module.values()),
        "max_complexity_per_module": per_module,
        "functions_above_15": above,
        "engine_functions_above_15": sum(r["engine"] for r in above),
        "context_vars": context_vars,
        "core_twin_pairs": core_twins,
    }


def _comments(source: str) -> dict[int, tuple[bool, str]]:
    """Line -> (whether the comment is the line's only content, its text without ``#``)."""
    out: dict[int, tuple[bool, str]] = {}
    lines = source.splitlines()
    for tok in tokenize.generate_tokens(iter(source.splitlines(keepends=True)).__next__):
        if tok.type == tokenize.COMMENT:
            row, col = tok.start
            alone = not lines[row - 1][:col].strip()
            out[row] = (alone, tok.string.lstrip("#").lstrip(":").strip())
    return out


def _constant_nodes(tree: ast.Module) -> list[tuple[int, list[str], ast.expr]]:
    """``(index in the body, names, value)`` of each module-level numeric constant."""
    out = []
    for k, node in enumerate(tree.body):
        if isinstance(node, ast.Assign) and _is_number(node.value):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            out.append((k, names, node.value))
        elif (
            isinstance(node, ast.AnnAssign)
            and node.value is not None
            and _is_number(node.value)
            and isinstance(node.target, ast.Name)
        ):
            out.append((k, [node.target.id], node.value))
    return out


def constant_reasons(source: str) -> list[tuple[str, str, str]]:
    """``(name, value, reason)`` of each module-level numeric constant of ``source``. The
    reason is the code's own: the comment block right above it, else its trailing comment,
    else the docstring right after it, else the comment above the run of assignments it
    belongs to; ``""`` when the code gives none."""
    tree = ast.parse(source)
    comments = _comments(source)
    out = []
    for k, names, value in _constant_nodes(tree):
        node = tree.body[k]
        above: list[str] = []
        row = node.lineno - 1
        while row in comments and comments[row][0]:
            above.insert(0, comments[row][1])
            row -= 1
        reason = " ".join(above)
        end = node.end_lineno or node.lineno
        if not reason and end in comments and not comments[end][0]:
            reason = comments[end][1]
        after = tree.body[k + 1] if k + 1 < len(tree.body) else None
        if (
            not reason
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            reason = " ".join(after.value.value.split())
        j = k
        while not reason and j > 0:  # the run of assignments it belongs to
            prev = tree.body[j - 1]
            if not isinstance(prev, ast.Assign | ast.AnnAssign) or (
                (prev.end_lineno or prev.lineno) != tree.body[j].lineno - 1
            ):
                break
            j -= 1
            row = tree.body[j].lineno - 1
            lead: list[str] = []
            while row in comments and comments[row][0]:
                lead.insert(0, comments[row][1])
                row -= 1
            reason = "(its group's comment) " + " ".join(lead) if lead else ""
        shown = ast.get_source_segment(source, value) or ""
        out += [(name, shown, reason) for name in names]
    return out


DOCS = ROOT / "docs" / "design.md"
_OPEN = "<!-- bench.shape: constants -->"
_CLOSE = "<!-- /bench.shape: constants -->"


def constants_table(pkg: Path) -> str:
    """The table of every module-level numeric constant with its reason (docs/design.md)."""
    rows = ["| module | constant | value | why |", "|---|---|---|---|"]
    for path in sorted(pkg.rglob("*.py")):
        module = path.relative_to(pkg).as_posix()
        for name, value, reason in constant_reasons(path.read_text(encoding="utf-8")):
            why = reason.replace("|", "\\|") or "(the code gives no reason yet)"
            rows.append(f"| `{module}` | `{name}` | `{value}` | {why} |")
    return "\n".join(rows)


def write_docs(pkg: Path = ROOT / PACKAGE, docs: Path = DOCS) -> None:
    """Rewrite the constants table between its markers in docs/design.md."""
    text = docs.read_text(encoding="utf-8")
    head, _, rest = text.partition(_OPEN)
    _, _, tail = rest.partition(_CLOSE)
    docs.write_text(f"{head}{_OPEN}\n{constants_table(pkg)}\n{_CLOSE}{tail}", encoding="utf-8")


def _checkout(rev: str, into: Path) -> str:
    """Extract ``rev``'s package into ``into``; its full hash."""
    full = subprocess.run(
        ["git", "rev-parse", rev], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()
    tar = subprocess.run(
        ["git", "archive", full, PACKAGE], cwd=ROOT, check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(tar)) as t:
        t.extractall(into, filter="data")
    return full


_ROWS = (
    ("library lines", "lines"),
    ("source lines (radon sloc)", "sloc"),
    ("module-level numeric constants", "module_numeric_constants"),
    ("inline numbers in function bodies", "inline_numbers"),
    ("... other than 0 and 1", "inline_numbers_not_0_or_1"),
    ("highest complexity, engine", "engine_max_complexity"),
    ("highest complexity, package", "package_max_complexity"),
    ("engine functions above 15", "engine_functions_above_15"),
    ("ContextVar", "context_vars"),
)


def markdown(base: dict[str, Any], head: dict[str, Any], base_rev: str, head_rev: str) -> str:
    """The summary table, and the functions above 15 at the head."""
    out = [
        f"# Package shape: {base_rev[:7]} (before) and {head_rev} (after)",
        "",
        "`python -m bench.shape`; the engine is the package minus "
        + ", ".join(f"`{x}`" for x in NOT_ENGINE)
        + ".",
        "",
        "| figure | before | after |",
        "|---|---:|---:|",
    ]
    out += [f"| {label} | {base[key]} | {head[key]} |" for label, key in _ROWS]
    out.append(
        f"| sync/async twins in core.py | {len(base['core_twin_pairs'])} "
        f"| {len(head['core_twin_pairs'])} |"
    )
    out += [
        "",
        "## Functions above 15 (after)",
        "",
        "| function | engine | before | after |",
        "|---|---|---:|---:|",
    ]
    before = {r["function"]: r["complexity"] for r in base["functions_above_15"]}
    for r in head["functions_above_15"]:
        was = before.get(r["function"], "")
        out.append(
            f"| `{r['function']}` | {'yes' if r['engine'] else 'no'} | {was} | {r['complexity']} |"
        )
    gone = sorted(set(before) - {r["function"] for r in head["functions_above_15"]})
    if gone:
        out += ["", "Above 15 before, not after: " + ", ".join(f"`{g}`" for g in gone) + "."]
    out += ["", "## Sync/async twins in core.py (after)", ""]
    out += [f"- `{t['pair']}` ({t['ratio']})" for t in head["core_twin_pairs"]] or ["none"]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.shape", description=__doc__)
    parser.add_argument("--base", default=BASE, help="the commit to compare with")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "shape.json"))
    parser.add_argument(
        "--docs", action="store_true", help="also rewrite docs/design.md's constants table"
    )
    args = parser.parse_args(argv)
    if args.docs:
        write_docs()
    with tempfile.TemporaryDirectory() as tmp:
        base_rev = _checkout(args.base, Path(tmp))
        base = measure(Path(tmp))
    head_rev = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", PACKAGE], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    head_rev += "+changes" if dirty else ""
    head = measure(ROOT)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "not_engine": list(NOT_ENGINE),
        "before": {"rev": base_rev, **base},
        "after": {"rev": head_rev, **head},
    }
    out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    md = markdown(base, head, base_rev, head_rev)
    out.with_suffix(".md").write_text(md, encoding="utf-8")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
