"""The budget is the one place for sizes: architecture tests over the package's source.

Every module under ``langchain_compact/`` is parsed with :mod:`ast` (nothing of it is run).
:mod:`langchain_compact.budget` computes every size derived from the context window and
declares the defaults of the settings those sizes read; no other module multiplies or
divides the window (or a size the budget derived from it) or reads a ratio setting to
compute a size, and no default is declared twice (docs/design.md, "The budget").
"""

from __future__ import annotations

import ast
from dataclasses import MISSING, fields
from pathlib import Path

import langchain_compact
from langchain_compact.budget import Budget
from langchain_compact.config import CompactionConfig

PACKAGE = "langchain_compact"
ROOT = Path(langchain_compact.__file__).resolve().parent
BUDGET = ROOT / "budget.py"
CONFIG = ROOT / "config.py"
SOURCES: dict[Path, ast.Module] = {
    path: ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for path in sorted(ROOT.rglob("*.py"))
}

#: Names that hold the window, or a size the budget derived from it: multiplying or
#: dividing one of them derives a new size from the window.
WINDOW_NAMES = frozenset(
    {
        "context_window",
        "window",
        "fit",
        "trigger",
        "fit_tokens",
        "trigger_tokens",
        "micro_trigger_tokens",
        "micro_target_tokens",
        "prepare_tokens",
        "fold_tokens",
    }
)
SCALING = (ast.Mult, ast.Div, ast.FloorDiv, ast.Mod)

#: Functions that scale a window-derived size for another purpose than a size, and why.
NOT_SIZES = {
    ("cli/_report.py", "_bar"): "the column of the trigger on the demo's text bar",
}


def _walk(path: Path, tree: ast.AST) -> list[ast.AST]:
    """``ast.walk`` of ``tree`` without the functions of :data:`NOT_SIZES`."""
    where = path.relative_to(ROOT).as_posix()
    nodes: list[ast.AST] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef) and (where, node.name) in NOT_SIZES:
            continue
        nodes.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return nodes


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _mentions(node: ast.AST, names: frozenset[str] | None = None) -> str | None:
    """A window name (``names``) or a ``*_ratio`` setting read in ``node``, outside the
    arguments of calls (``len(window_text) * 2`` scales a length, not the window)."""
    stack = [node]
    while stack:
        each = stack.pop()
        name = _name(each)
        if name is not None and (name in (names or WINDOW_NAMES) or name.endswith("_ratio")):
            return name
        if isinstance(each, ast.Call):
            continue
        stack.extend(ast.iter_child_nodes(each))
    return None


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(ROOT.parent)}:{getattr(node, 'lineno', 0)}"


def window_scalings(trees: dict[Path, ast.Module]) -> list[str]:
    """Each place outside ``budget.py`` that derives a size from the window: a product,
    quotient or remainder with the window (or a size derived from it, :data:`WINDOW_NAMES`)
    or a ``*_ratio`` setting as an operand, and each ``*_ratio`` setting passed to a call
    other than the :class:`Budget` that holds it (``config._tokens(config.fold_ratio)``)."""
    found: list[str] = []
    for path, tree in trees.items():
        if path == BUDGET:
            continue
        for node in _walk(path, tree):
            if isinstance(node, ast.BinOp) and isinstance(node.op, SCALING):
                for side in (node.left, node.right):
                    name = _mentions(side)
                    if name is not None:
                        found.append(f"{_where(path, node)} scales {name}")
                        break
            elif isinstance(node, ast.Call) and _name(node.func) != "Budget":
                arguments = [*node.args, *(k.value for k in node.keywords)]
                for arg in arguments:
                    name = _name(arg)
                    if name is not None and name.endswith("_ratio"):
                        found.append(f"{_where(path, node)} passes {name}")
    return sorted(set(found), key=_by_place)


def _by_place(line: str) -> tuple[str, int]:
    path, _, rest = line.partition(":")
    return path, int(rest.split()[0])


def test_the_check_finds_a_window_scaled_outside_the_budget() -> None:
    """The check itself: each way main 318e965 derived a size outside the budget is found."""
    sample = ast.parse(
        "limit = int(config.context_window * config.large_result_ratio)\n"
        "budget = int(config.summary_budget_ratio * (window or 0))\n"
        "fold = config._tokens(config.fold_ratio)\n"
        "room = fit - fixed - min(config.summary_max_tokens, fit // 10)\n"
        "cap = context_window // 20\n"
        "n = len(window_text) * 2\n"  # a length: not the window
        "keys = [config.summary_budget_ratio, config.context_window]\n"  # read, not sized
        "rooms = Budget(window=w, trigger_ratio=config.trigger_ratio)\n"  # the budget's own
    )
    where = ROOT / "sample.py"
    assert window_scalings({where: sample}) == [
        f"{PACKAGE}/sample.py:1 scales context_window",
        f"{PACKAGE}/sample.py:2 scales summary_budget_ratio",
        f"{PACKAGE}/sample.py:3 passes fold_ratio",
        f"{PACKAGE}/sample.py:4 scales fit",
        f"{PACKAGE}/sample.py:5 scales context_window",
    ]


def test_no_module_but_the_budget_derives_a_size_from_the_window() -> None:
    assert window_scalings(SOURCES) == []


def test_the_budget_is_a_leaf() -> None:
    """``budget`` imports nothing of the package, so every layer can ask it."""
    imports = [
        node for node in ast.walk(SOURCES[BUDGET]) if isinstance(node, (ast.Import, ast.ImportFrom))
    ]
    names = [
        alias.name if isinstance(node, ast.Import) else f"{'.' * node.level}{node.module}"
        for node in imports
        for alias in (node.names if isinstance(node, ast.Import) else node.names[:1])
    ]
    assert not [n for n in names if n.startswith((PACKAGE, "."))], names


def _public_rules() -> list[str]:
    tree = SOURCES[BUDGET]
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Budget")
    return [
        n.name for n in cls.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")
    ]


def _budget_names(tree: ast.Module) -> set[str]:
    """Names a module binds to a :class:`Budget`: assigned ``config.budget`` or
    ``Budget(...)`` (also as one branch of ``x if c else y``), or annotated ``Budget``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _is_budget(node.value, names):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif (
            isinstance(node, ast.arg)
            and node.annotation is not None
            and "Budget" in ast.unparse(node.annotation)
        ):
            names.add(node.arg)
    return names


def _is_budget(node: ast.AST, names: set[str]) -> bool:
    if isinstance(node, ast.IfExp):
        return _is_budget(node.body, names) or _is_budget(node.orelse, names)
    if isinstance(node, ast.BoolOp):
        return any(_is_budget(v, names) for v in node.values)
    if isinstance(node, ast.Call):
        return _name(node.func) == "Budget"
    return (isinstance(node, ast.Attribute) and node.attr == "budget") or (
        isinstance(node, ast.Name) and (node.id in names or node.id == "Budget")
    )


def rules_asked(trees: dict[Path, ast.Module]) -> set[str]:
    """The attributes read of a :class:`Budget` outside ``budget.py`` (``config.budget.fold``,
    ``rooms.tail(...)``, ``Budget.crowded(...)``), and the rules the budget's own rules read
    (``self.trigger``)."""
    asked: set[str] = set()
    for path, tree in trees.items():
        names = _budget_names(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            owner = node.value
            if path == BUDGET:
                if isinstance(owner, ast.Name) and owner.id == "self":
                    asked.add(node.attr)
            elif _is_budget(owner, names):
                asked.add(node.attr)
    return asked


def test_every_rule_of_the_budget_is_used() -> None:
    """A rule nothing asks is a size computed somewhere else (main 318e965 left
    ``task_max``, ``large_result``, ``summaries`` and ``room`` unused and computed them
    inline)."""
    asked = rules_asked(SOURCES)
    assert [r for r in _public_rules() if r not in asked] == []


# ---------------------------------------------------------------------- defaults declared once


def _literal(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float))


def _module_defaults(trees: dict[Path, ast.Module]) -> dict[str, list[str]]:
    """``DEFAULT_*`` name -> where a literal is assigned to it (module level)."""
    found: dict[str, list[str]] = {}
    for path, tree in trees.items():
        for node in tree.body:
            target = node.targets[0] if isinstance(node, ast.Assign) else None
            if isinstance(node, ast.AnnAssign):
                target = node.target
            value = getattr(node, "value", None)
            named = isinstance(target, ast.Name) and target.id.startswith("DEFAULT_")
            if named and isinstance(value, ast.Constant) and isinstance(target, ast.Name):
                found.setdefault(target.id, []).append(_where(path, node))
    return found


def _field_defaults(tree: ast.Module, cls: str) -> dict[str, ast.expr]:
    """A dataclass's ``field: type = default`` lines: field -> the default's expression."""
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls).body
    return {
        n.target.id: n.value
        for n in body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.value is not None
    }


def declared_twice(trees: dict[Path, ast.Module]) -> list[str]:
    """Each default declared in two places: a ``DEFAULT_*`` constant assigned a value in
    two modules; a setting :class:`Budget` and :class:`CompactionConfig` share whose
    default either class writes as a number, or the two name differently; a config
    default's number written again as the default of a function's parameter named for the
    setting (``keep_chars=2000`` beside ``large_tool_result_keep_chars``); a ``DEFAULT_*``
    constant nothing reads (its value is then written where it is used: main 318e965's
    ``DEFAULT_REPLY_RESERVE_CAP`` beside ``min(4_096, ...)``)."""
    problems = [
        f"{name} assigned at {', '.join(places)}"
        for name, places in _module_defaults(trees).items()
        if len(places) > 1
    ]
    budget, config = trees[BUDGET], trees[CONFIG]
    ours, theirs = _field_defaults(budget, "Budget"), _field_defaults(config, "CompactionConfig")
    for name in sorted(set(ours) & set(theirs)):
        a, b = ours[name], theirs[name]
        if isinstance(a, ast.Constant) and a.value is None:
            continue
        if _literal(a) or _literal(b):
            problems.append(f"{name}: Budget says {ast.unparse(a)}, the config {ast.unparse(b)}")
        elif ast.unparse(a) != ast.unparse(b):
            problems.append(f"{name}: Budget reads {ast.unparse(a)}, the config {ast.unparse(b)}")
    # A config field's number repeated as a parameter default of a function whose parameter
    # is named for it (``keep_chars=2000`` beside ``large_tool_result_keep_chars``).
    numbers = {
        f.name: f.default
        for f in fields(CompactionConfig)
        if f.default is not MISSING and type(f.default) in (int, float) and f.default
    }
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            a = node.args
            positional = [*a.posonlyargs, *a.args]
            with_default = positional[len(positional) - len(a.defaults) :]
            pairs = list(zip(with_default, a.defaults, strict=True))
            keywords = zip(a.kwonlyargs, a.kw_defaults, strict=True)
            pairs += [(k, d) for k, d in keywords if d is not None]
            for arg, default in pairs:
                if not _literal(default):
                    continue
                value = default.value  # type: ignore[attr-defined]
                for field_name, number in numbers.items():
                    named = "_" in arg.arg and field_name.endswith(arg.arg)
                    if named and value == number:
                        problems.append(
                            f"{_where(path, node)} {node.name}({arg.arg}={value!r}) repeats "
                            f"the default of {field_name}"
                        )
    read = _reads(trees)
    for name, places in sorted(_module_defaults(trees).items()):
        if name not in read:
            problems.append(f"{name} ({places[0]}) is read nowhere")
    return problems


def _reads(trees: dict[Path, ast.Module]) -> set[str]:
    """Names read (``ast.Load``) anywhere in the package."""
    return {
        n.id
        for tree in trees.values()
        for n in ast.walk(tree)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }


def test_each_default_is_declared_once() -> None:
    assert declared_twice(SOURCES) == []


def test_the_config_defaults_are_the_budgets() -> None:
    """The settings the budget reads default alike in both (one declaration, read twice)."""
    config = {f.name: f.default for f in fields(CompactionConfig)}
    shared = [f for f in fields(Budget) if f.name in config]
    assert len(shared) == 10
    for f in shared:
        assert config[f.name] == f.default, f.name
    assert CompactionConfig(context_window=128_000).budget == Budget(window=128_000)


def test_every_rule_has_its_row_in_the_design() -> None:
    """docs/design.md ("The budget") gives each rule its value and its reason, one row each."""
    text = (ROOT.parent / "docs" / "design.md").read_text(encoding="utf-8")
    section = text.split("## The budget\n", 1)[1].split("\n## ", 1)[0]
    rows = {
        line.split("|")[1].strip().strip("`").split("(")[0]
        for line in section.splitlines()
        if line.startswith("| `")
    }
    assert sorted(set(_public_rules()) - rows) == []
    assert sorted(rows - set(_public_rules())) == []
