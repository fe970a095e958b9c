"""The engine's cyclomatic complexity is a ratchet (issue 32, must-show 3).

radon's API over every module of the engine (the package minus the text parsers and formats
and the front ends, ``bench.shape.NOT_ENGINE``; the same figures as ``python -m bench.shape``
and the ``radon cc`` command in docs/development.md): no function may be above
:data:`CEILING`, except the ones :data:`ABOVE` names, each at most at the figure it had when
this test was written. A function made simpler may lower its figure (or leave the table when it
reaches the ceiling); a new function above the ceiling, or a named one grown, fails. Outside the
engine, nothing above :data:`PACKAGE_CEILING` but the ones named.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("radon")

from bench.shape import DOCS, constants_table, functions, is_engine

PACKAGE = Path(__file__).resolve().parents[2] / "langchain_compact"

#: The highest complexity of an engine function not named in :data:`ABOVE`.
CEILING = 15
#: Engine functions above the ceiling, and the most each may reach (none left: issue 32).
ABOVE: dict[str, int] = {}
#: The highest complexity anywhere in the package (text parsers and front ends included) but
#: the ones named in :data:`PACKAGE_ABOVE`.
PACKAGE_CEILING = 25
PACKAGE_ABOVE: dict[str, int] = {}


def over(
    sources: dict[str, str], ceiling: int, above: dict[str, int], *, engine: bool
) -> list[str]:
    """Every function of ``sources`` (module path -> source) in the engine (or outside it,
    ``engine=False``) above its ceiling: ``above``'s figure for the ones it names, else
    ``ceiling``."""
    out = []
    for module, source in sorted(sources.items()):
        if is_engine(module) != engine:
            continue
        for name, line, complexity in functions(source):
            key = f"{module}:{name}"
            if complexity > above.get(key, ceiling):
                out.append(
                    f"{key} (line {line}): complexity {complexity}, "
                    f"at most {above.get(key, ceiling)}"
                )
    return out


def _package() -> dict[str, str]:
    return {
        p.relative_to(PACKAGE).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(PACKAGE.rglob("*.py"))
    }


def test_no_engine_function_above_its_ceiling() -> None:
    assert over(_package(), CEILING, ABOVE, engine=True) == []


def test_nothing_in_the_package_above_25() -> None:
    assert over(_package(), PACKAGE_CEILING, PACKAGE_ABOVE, engine=False) == []
    # nor in the engine (issue 32, must-show 3: nowhere above 25)
    assert over(_package(), PACKAGE_CEILING, {}, engine=True) == []


_BRANCHY = "def f(x):\n" + "".join(f"    if x == {n}:\n        return {n}\n" for n in range(16))


def test_the_ratchet_catches_a_new_function_above_the_ceiling() -> None:
    # complexity 17: one path and 16 branches
    found = over({"core.py": _BRANCHY}, CEILING, ABOVE, engine=True)
    assert found == ["core.py:f (line 1): complexity 17, at most 15"]
    # a closure and a method are functions too
    nested = "class C:\n    def m(self):\n        " + _BRANCHY.replace("\n", "\n        ")
    found = over({"history.py": nested}, CEILING, ABOVE, engine=True)
    assert found == ["history.py:C.m.f (line 3): complexity 17, at most 15"]
    # outside the engine, the package's ceiling
    assert over({"cli/x.py": _BRANCHY}, CEILING, ABOVE, engine=True) == []
    assert over({"cli/x.py": _BRANCHY}, 16, {}, engine=False) != []


def test_the_ratchet_catches_a_named_function_grown() -> None:
    grown = _BRANCHY.replace("def f(", "def _broken_until(")
    found = over({"history.py": grown}, CEILING, {"history.py:_broken_until": 16}, engine=True)
    assert found == ["history.py:_broken_until (line 1): complexity 17, at most 16"]


def test_every_module_level_number_is_named_in_the_design_with_its_reason() -> None:
    # must-show 6: the table in docs/design.md, "Numbers in the code", is the code's
    table = constants_table(PACKAGE)
    assert table.count("\n") > 100
    assert table in DOCS.read_text(encoding="utf-8"), (
        "docs/design.md's constants table is stale: run python -m bench.shape --docs"
    )


def test_no_sync_async_twin_pair_is_left_in_the_core() -> None:
    # must-show 3: every sync/async pair of core.py drives one generator of steps
    import ast

    from bench.shape import twins

    found = twins(ast.parse((PACKAGE / "core.py").read_text(encoding="utf-8")))
    assert found == [], f"twin pairs with copied bodies: {found}"


def test_the_twin_check_catches_a_copied_body() -> None:
    import ast

    from bench.shape import twins

    copied = (
        "class C:\n"
        "    def turn(self, m):\n        x = self.clear(m)\n        return self.route(x)\n"
        "    async def aturn(self, m):\n        x = await self.aclear(m)\n"
        "        return self.route(x)\n"
    )
    assert [t["pair"] for t in twins(ast.parse(copied))] == ["C.turn/aturn"]
    driven = (
        "class C:\n"
        "    def turn(self, m):\n        return drive(self.turn_steps(m))\n"
        "    async def aturn(self, m):\n        return await adrive(self.turn_steps(m))\n"
    )
    assert twins(ast.parse(driven)) == []
