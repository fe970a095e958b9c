"""No hidden state in the package (issue 32, "Hidden state"): no context variable, and no
module-level cache keyed by object identity.

What a step runs under (the turn's events, the focus, the learned window) is passed down
explicitly (``core.TurnContext``); a memo keyed by ``id(...)`` belongs to an object that
owns it (``lcel._Digests``, one per ``MessageCompactor``), not to a module, where it would
be shared by every compactor of the process.

Every module under ``langchain_compact/`` is parsed with :mod:`ast`; nothing is imported but
the package itself (for its path).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import langchain_compact

ROOT = Path(langchain_compact.__file__).resolve().parent
PACKAGE_DIR = ROOT.parent

#: Mapping types a module-level cache can be made of.
_MAPPINGS = frozenset(
    {"dict", "OrderedDict", "defaultdict", "WeakKeyDictionary", "WeakValueDictionary"}
)
#: Methods that read or write a mapping by key (the key is their first argument).
_KEYED = frozenset({"get", "setdefault", "pop", "__getitem__", "__setitem__", "__contains__"})

#: Module-level identity-keyed caches still standing, with why (none: history_facts' memo is
#: a ``_scan.FactsMemo`` the compactor keeps per thread; this list is checked to be up to
#: date, so a new one is seen).
KNOWN: dict[tuple[str, str], str] = {}


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        yield rel, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _called_name(node: ast.AST) -> str | None:
    """``f`` of a call ``f(...)`` or ``module.f(...)``."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def context_variables(tree: ast.Module) -> list[int]:
    """Lines that make a ``ContextVar`` or import the class."""
    lines = []
    for node in ast.walk(tree):
        if _called_name(node) == "ContextVar":
            lines.append(node.lineno)  # type: ignore[attr-defined]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module == "contextvars"
            and any(a.name == "ContextVar" for a in node.names)
        ):
            lines.append(node.lineno)
    return lines


def _module_mappings(tree: ast.Module) -> dict[str, int]:
    """Module-level names bound to a new mapping (``{}``, ``dict()``, ``OrderedDict()``,
    a ``WeakKeyDictionary()`` ...): name -> line."""
    found: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if isinstance(value, ast.Dict) or _called_name(value) in _MAPPINGS:
            for target in targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node.lineno
    return found


def _has_id_call(node: ast.AST, identity: set[str]) -> bool:
    """Whether ``node`` holds a call to ``id(...)`` or a name bound to one."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == "id":
            return True
        if isinstance(sub, ast.Name) and sub.id in identity:
            return True
    return False


def _identity_names(scope: ast.AST) -> set[str]:
    """Names a scope binds to an expression holding ``id(...)`` (one level of flow)."""
    names: set[str] = set()
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign) and _has_id_call(node.value, set()):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def identity_keyed_caches(tree: ast.Module) -> dict[str, int]:
    """Module-level mappings read or written with a key made from ``id(...)``, and every
    module-level weak-keyed mapping: name -> line of the first such use."""
    mappings = _module_mappings(tree)
    found: dict[str, int] = {}
    for node in tree.body:
        if (
            isinstance(node, (ast.Assign, ast.AnnAssign))
            and node.value is not None
            and _called_name(node.value) == "WeakKeyDictionary"
        ):
            for name, line in mappings.items():
                if line == node.lineno:
                    found[name] = line
    scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for scope in scopes:
        identity = _identity_names(scope)
        for node in ast.walk(scope):
            name, key = None, None
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
                name, key = node.value.id, node.slice
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.attr in _KEYED
                and node.args
            ):
                name, key = node.func.value.id, node.args[0]
            elif (
                isinstance(node, ast.Compare)
                and len(node.comparators) == 1
                and isinstance(node.ops[0], (ast.In, ast.NotIn))
                and isinstance(node.comparators[0], ast.Name)
            ):
                name, key = node.comparators[0].id, node.left
            if name in mappings and key is not None and _has_id_call(key, identity):
                found.setdefault(name, node.lineno)  # type: ignore[attr-defined]
    return found


def test_no_module_defines_a_context_variable() -> None:
    offenders = {rel: lines for rel, tree in _modules() if (lines := context_variables(tree))}
    assert not offenders, (
        f"context variables (hidden state: pass it down, core.TurnContext): {offenders}"
    )


def test_no_module_level_cache_is_keyed_by_object_identity() -> None:
    found = {
        (rel, name): line
        for rel, tree in _modules()
        for name, line in identity_keyed_caches(tree).items()
    }
    unknown = {k: v for k, v in found.items() if k not in KNOWN}
    assert not unknown, (
        "module-level caches keyed by id(...) (shared by every compactor of the process: "
        f"give them an owner, as lcel._Digests): {unknown}"
    )
    gone = set(KNOWN) - set(found)
    assert not gone, f"no longer identity-keyed caches: remove them from KNOWN: {gone}"


def test_the_checks_find_what_they_look_for() -> None:
    source = """
import weakref
from contextvars import ContextVar
from collections import OrderedDict
_VAR = ContextVar("x", default=None)
_BY_ID = {}
_BY_FIRST: OrderedDict[int, list] = OrderedDict()
_WEAK = weakref.WeakKeyDictionary()
_BY_TEXT = {}
def f(message, items):
    _BY_ID[id(message)] = 1
    key = id(items[0])
    _BY_FIRST.get(key)
    return _BY_TEXT.get((len(message), hash(message)))
"""
    tree = ast.parse(source)
    assert context_variables(tree) == [3, 5]
    assert identity_keyed_caches(tree) == {"_BY_ID": 11, "_BY_FIRST": 13, "_WEAK": 8}
