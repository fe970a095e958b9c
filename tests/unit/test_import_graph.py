"""The package's import graph: no cycles, no private names across modules, the adapters
apart from one another, the CLI apart.

Every module under ``langchain_compact/`` is parsed with :mod:`ast` (nothing is imported
except the package itself, for ``__all__``). A module's name is its dotted path; a package
is its ``__init__``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import langchain_compact

PACKAGE = "langchain_compact"
ROOT = Path(langchain_compact.__file__).resolve().parent
CLI = f"{PACKAGE}.cli"


def _module_name(path: Path) -> str:
    parts = [PACKAGE, *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}
TREES: dict[str, ast.Module] = {
    name: ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for name, path in MODULES.items()
}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


@dataclass(frozen=True)
class Import:
    """One imported thing: ``module`` (absolute), and ``name`` for ``from module import name``."""

    module: str
    name: str | None
    alias: str
    line: int


def _imports(node: ast.ImportFrom | ast.Import, importer: str) -> Iterator[Import]:
    if isinstance(node, ast.Import):
        for a in node.names:
            yield Import(a.name, None, a.asname or a.name.split(".")[0], node.lineno)
        return
    base = node.module or ""
    if node.level:  # relative: resolved against the importer's package
        parts = importer.split(".")
        if MODULES[importer].name != "__init__.py":
            parts = parts[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join([*parts, base] if base else parts)
    for a in node.names:
        yield Import(base, a.name, a.asname or a.name, node.lineno)


def _all_imports(tree: ast.Module, importer: str) -> Iterator[Import]:
    """Every import anywhere in the module (module level, functions, TYPE_CHECKING)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield from _imports(node, importer)


def _module_level_imports(body: list[ast.stmt], importer: str) -> Iterator[Import]:
    """Imports run when the module is imported.

    Excluded: ``if TYPE_CHECKING:`` blocks (never run) and imports inside functions (run on
    call, after every module is loaded, which is how a deliberate late import breaks a
    cycle). Imports in ``try``/``if``/``with`` blocks and class bodies at module level count.
    """
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield from _imports(node, importer)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        elif isinstance(node, ast.If):
            if not _is_type_checking(node):
                yield from _module_level_imports(node.body, importer)
            yield from _module_level_imports(node.orelse, importer)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                yield from _module_level_imports(block, importer)
            for handler in node.handlers:
                yield from _module_level_imports(handler.body, importer)
        elif isinstance(node, (ast.With, ast.ClassDef)):
            yield from _module_level_imports(node.body, importer)


def _targets(imp: Import) -> list[str]:
    """The package modules an import loads (by name; parent packages are not counted)."""
    if imp.name is not None and f"{imp.module}.{imp.name}" in MODULES:
        return [f"{imp.module}.{imp.name}"]  # `from pkg import submodule`
    return [imp.module] if imp.module in MODULES else []


def _graph() -> dict[str, set[str]]:
    return {
        name: {t for imp in _module_level_imports(tree.body, name) for t in _targets(imp)} - {name}
        for name, tree in TREES.items()
    }


def _full_graph() -> dict[str, set[str]]:
    """Every import, wherever it is: inside functions and under ``TYPE_CHECKING`` too."""
    return {
        name: {t for imp in _all_imports(tree, name) for t in _targets(imp)} - {name}
        for name, tree in TREES.items()
    }


GRAPH = f"{PACKAGE}.graph"
#: The three integrations over the core: each only translates the core's turn.
ADAPTERS = {"graph": GRAPH, "middleware": f"{PACKAGE}.middleware", "lcel": f"{PACKAGE}.lcel"}


def _within(module: str, root: str) -> bool:
    return module == root or module.startswith(f"{root}.")


def _adapter_of(module: str) -> str | None:
    return next((name for name, root in ADAPTERS.items() if _within(module, root)), None)


def _crossings(trees: dict[str, ast.Module]) -> list[str]:
    """Imports from one adapter into another (the module named, or the one a name is taken
    from; the package ``__init__`` that re-exports them all is not an adapter)."""
    found: list[str] = []
    for name, tree in trees.items():
        own = _adapter_of(name)
        if own is None:
            continue
        for imp in _all_imports(tree, name):
            for target in {imp.module, *_targets(imp)}:
                other = _adapter_of(target)
                if other is not None and other != own:
                    found.append(f"{name}:{imp.line} imports {target}")
    return sorted(set(found))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_helpers_see_what_they_should() -> None:
    """The parser finds the modules and the edges the checks below rely on."""
    graph = _graph()
    assert f"{PACKAGE}.archive" in MODULES and PACKAGE in MODULES
    assert f"{PACKAGE}.errors" in graph[f"{PACKAGE}.archive"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    sample = ast.parse(
        "from langchain_compact import _archive_files as files, tokens as t\n"
        "from langchain_compact.tokens import _check_message\n"
        "import langchain_compact.tokens\n"
        "def f():\n"
        "    from .errors import _hidden\n"
        "    return t._approx_text, langchain_compact.tokens._x, files.read_jsonl, t.__name__\n"
    )
    assert _private_crossings({f"{PACKAGE}.archive": sample}) == [
        f"{PACKAGE}.archive:2 imports _check_message from {PACKAGE}.tokens",
        f"{PACKAGE}.archive:5 imports _hidden from {PACKAGE}.errors",
        f"{PACKAGE}.archive:6 uses t._approx_text ({PACKAGE}.tokens)",
        f"{PACKAGE}.archive:6 uses langchain_compact.tokens._x ({PACKAGE}.tokens)",
    ]


def test_no_import_cycles_between_package_modules() -> None:
    """Module-level imports only: TYPE_CHECKING blocks and function-local imports excluded."""
    assert _cycles(_graph()) == []


def test_no_import_cycle_at_all_counting_late_and_type_checking_imports() -> None:
    """No circle even through an import inside a function or under ``TYPE_CHECKING``: a
    late import that breaks a cycle at load time still ties the two modules together."""
    full = _full_graph()
    assert _graph()[f"{PACKAGE}.core"] <= full[f"{PACKAGE}.core"]
    assert f"{PACKAGE}.archive" in full[f"{PACKAGE}.core"]  # under TYPE_CHECKING there
    assert _cycles(full) == []


def test_the_adapters_import_nothing_of_one_another() -> None:
    """The graph nodes, the middleware and the LCEL transformer each translate the core's
    turn; none imports another (so the middleware and LCEL import nothing from graph/)."""
    sample = {
        f"{PACKAGE}.lcel": ast.parse(
            "from langchain_compact.graph.nodes import CompactionNodes\n"
            "def f():\n"
            "    from langchain_compact import middleware\n"
        )
    }
    assert _crossings(sample) == [
        f"{PACKAGE}.lcel:1 imports {PACKAGE}.graph.nodes",
        f"{PACKAGE}.lcel:3 imports {PACKAGE}.middleware",
    ]
    assert _crossings(TREES) == []
    for adapter in ("middleware", "lcel"):
        name = ADAPTERS[adapter]
        modules = {imp.module for imp in _all_imports(TREES[name], name)}
        assert not any(_within(m, GRAPH) for m in modules), (adapter, sorted(modules))


def test_the_defaults_module_is_a_leaf() -> None:
    """``_defaults`` (the context window from the model, the archive's folder) imports only
    ``errors``, which imports nothing of the package: config, archive and every adapter can
    take them from it."""
    full = _full_graph()
    assert full[f"{PACKAGE}._defaults"] <= {f"{PACKAGE}.errors"}
    assert full[f"{PACKAGE}.errors"] == set()


BUDGET = f"{PACKAGE}.budget"

#: The settings and numbers that say when a compaction runs: outside ``budget`` no module
#: compares a count with one of them (the decision, its limits, the check after a
#: compaction, whether to prepare, are functions of ``budget``).
WHEN_NAMES = frozenset(
    {
        "trigger",
        "trigger_tokens",
        "prepare_tokens",
        "fold_tokens",
        "cooldown_turns",
        "max_compactions",
        "thrash_limit",
        "refill_streak",
        "turns_since",
    }
)

#: Where a count is compared with the trigger for another purpose, and why: a module, or a
#: module and one of its top-level functions.
WHEN_ELSEWHERE = {
    (f"{CLI}._compact", None): "the CLI's report labels a compaction forced under the trigger",
    (f"{CLI}._inspect", None): "the CLI's inspection shows whether the trigger would fire",
    (f"{PACKAGE}.microcompact", None): "the clearing ladder keeps one result over the trigger "
    "(the reduction ladder, issue 32's second bullet, owns it)",
    (f"{PACKAGE}._compaction_phases", "fit_next_call"): "a compaction slims its own draft's "
    "tail when the draft is over the trigger: how it compacts, not when",
}


def _reads_when(node: ast.Compare) -> bool:
    """A comparison (``x is None`` aside) that reads one of :data:`WHEN_NAMES` or a name
    holding ``trigger`` (``effective_trigger(...)``, ``local_trigger``)."""
    if all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
        return False
    read = {
        n.id if isinstance(n, ast.Name) else n.attr
        for side in (node.left, *node.comparators)
        for n in ast.walk(side)
        if isinstance(n, (ast.Name, ast.Attribute))
    }
    return bool(read & WHEN_NAMES) or any("trigger" in name for name in read)


def _when_comparisons(trees: dict[str, ast.Module]) -> list[str]:
    """Each comparison of a count with a "when" setting outside ``budget`` (and
    :data:`WHEN_ELSEWHERE`)."""
    found: list[str] = []
    for name, tree in trees.items():
        if name == BUDGET or (name, None) in WHEN_ELSEWHERE:
            continue
        for top in tree.body:
            if (name, getattr(top, "name", None)) in WHEN_ELSEWHERE:
                continue
            found += [
                f"{name}:{node.lineno} {ast.unparse(node)}"
                for node in ast.walk(top)
                if isinstance(node, ast.Compare) and _reads_when(node)
            ]
    return found


def test_when_and_how_much_is_a_leaf() -> None:
    """``budget`` (every size, the turn's numbers, the decisions over them) imports nothing
    of the package, late or for type checking: every layer can ask it, and its tests are
    tables of numbers."""
    assert _full_graph()[BUDGET] == set()


def test_when_compaction_runs_is_decided_in_the_budget_alone() -> None:
    """Changing when compaction triggers touches one module: nowhere else is a count
    compared with the trigger, the cooldown, the cap or the thrash guard."""
    assert _when_comparisons(TREES) == []


def test_the_check_finds_a_trigger_compared_outside_the_budget() -> None:
    tree = ast.parse("def due(tokens, config):\n    return tokens >= config.trigger_tokens\n")
    raised = ast.parse("def due(n, m, c):\n    return n < effective_trigger(m, c)\n")
    ok = ast.parse("def known(config):\n    return config.trigger_tokens is None\n")
    trees = {f"{PACKAGE}.x": tree, f"{PACKAGE}.y": ok, f"{PACKAGE}.z": raised}
    assert _when_comparisons(trees) == [
        f"{PACKAGE}.x:2 tokens >= config.trigger_tokens",
        f"{PACKAGE}.z:2 n < effective_trigger(m, c)",
    ]


def _private_crossings(trees: dict[str, ast.Module]) -> list[str]:
    problems: list[str] = []
    for name, tree in trees.items():
        modules: dict[str, str] = {}  # local name -> package module it refers to
        for imp in _all_imports(tree, name):
            if not imp.module.startswith(PACKAGE):
                continue
            if imp.name is None:  # import langchain_compact.x [as y]
                if imp.alias != imp.module.split(".")[0]:
                    modules[imp.alias] = imp.module
                continue
            full = f"{imp.module}.{imp.name}"
            if full in MODULES:  # a (possibly private) module: fine
                modules[imp.alias] = full
            elif _is_private(imp.name):
                problems.append(f"{name}:{imp.line} imports {imp.name} from {imp.module}")
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _is_private(node.attr)):
                continue
            owner = _dotted(node.value)
            module = modules.get(owner, owner) if owner else None
            if module in MODULES and f"{module}.{node.attr}" not in MODULES and module != name:
                problems.append(f"{name}:{node.lineno} uses {owner}.{node.attr} ({module})")
    return problems


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else None
    return None


def test_no_private_name_crosses_a_module_boundary() -> None:
    """No ``from langchain_compact.x import _name`` and no ``module._name`` on a package module.

    A private *module* (``_archive_files``) with public names is fine.
    """
    assert _private_crossings(TREES) == []


def test_no_module_rewrites_its_types_module() -> None:
    """Public types are defined where they are public: nothing assigns ``__module__``."""
    rewrites = [
        f"{name}:{node.lineno}"
        for name, tree in TREES.items()
        for node in ast.walk(tree)
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Attribute) and target.attr == "__module__"
    ]
    assert rewrites == []


def test_the_library_does_not_import_the_cli() -> None:
    """Only the CLI subpackage (and ``__main__``) may import ``langchain_compact.cli``."""
    library = [
        name
        for name in TREES
        if name != f"{PACKAGE}.__main__" and name != CLI and not name.startswith(f"{CLI}.")
    ]
    offenders = [
        f"{name}:{imp.line}"
        for name in library
        for imp in _all_imports(TREES[name], name)
        if any(t == CLI or t.startswith(f"{CLI}.") for t in [*_targets(imp), imp.module])
    ]
    assert offenders == []


def test_the_top_level_surface_is_small() -> None:
    assert len(langchain_compact.__all__) < 25
    assert len(set(langchain_compact.__all__)) == len(langchain_compact.__all__)
