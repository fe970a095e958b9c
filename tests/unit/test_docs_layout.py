"""The module tables of docs/how-it-works.md and docs/design.md describe the package as it is
laid out."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "langchain_compact"


def _modules() -> tuple[set[str], set[str]]:
    public: set[str] = set()
    private: set[str] = set()
    for path in PACKAGE.glob("*.py"):
        if path.name in ("__init__.py", "__main__.py"):
            continue
        (private if path.name.startswith("_") else public).add(path.name)
    public |= {f"{p.name}/" for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    return public, private


def _named(text: str) -> set[str]:
    """Module names a table cell quotes: `name.py` or `name/`."""
    return set(re.findall(r"`(_?[a-z_]+\.py|[a-z_]+/)`", text))


def test_the_how_it_works_table_lists_every_public_module_and_no_missing_one() -> None:
    page = (ROOT / "docs" / "how-it-works.md").read_text(encoding="utf-8")
    table = page[page.index("| module | owns |") :]
    table = table[: table.index("\n\n")]
    public, _private = _modules()
    named = _named(table)
    assert public <= named, f"docs/how-it-works.md module table misses {sorted(public - named)}"
    stale = {n for n in named if not (PACKAGE / n.rstrip("/")).exists()} - {"examples/", "server/"}
    assert not stale, (
        f"docs/how-it-works.md module table names modules that do not exist: {sorted(stale)}"
    )


def test_docs_design_lists_every_module_public_and_private() -> None:
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    public, private = _modules()
    named = _named(design)
    assert public <= named, f"docs/design.md misses {sorted(public - named)}"
    assert private <= named, f"docs/design.md misses {sorted(private - named)}"
    files = {p.name for p in PACKAGE.rglob("*.py")}
    stale = {n for n in named if n.endswith(".py") and n not in files}
    assert not stale, f"docs/design.md names modules that do not exist: {sorted(stale)}"
