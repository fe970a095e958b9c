"""Run every tutorial notebook top to bottom, offline, in a real Jupyter kernel.

Each ``notebooks/*.ipynb`` runs with nbclient in the ``python3`` kernel, with the notebooks
folder as its working directory; there is no skip list. A notebook passes when no cell raised,
and, if it draws with matplotlib, when at least one cell produced an ``image/png`` output.

The kernel is a separate process, so pytest's ``filterwarnings = error`` does not reach the
notebook code: a warning there is printed to the cell's stderr, not raised. This process only runs
the Jupyter client (nbclient, jupyter_client, pyzmq), which emits no warnings with the versions
the ``test`` extra installs; if a new version does, filter that one warning here, narrowly.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
KERNEL = "python3"
CELL_TIMEOUT = 120  # seconds per cell
NOTEBOOK_BUDGET = 60  # seconds per notebook, kernel start included


def _kernel_command() -> str:
    """The interpreter the ``python3`` kernel runs; fails with the fix when there is none."""
    try:
        spec = KernelSpecManager().get_kernel_spec(KERNEL)
    except NoSuchKernel:
        pytest.fail(
            f"No Jupyter kernel named {KERNEL!r}: the notebooks cannot run. Install ipykernel "
            "into this environment (pip install -e '.[test]', or pip install ipykernel); if "
            f"jupyter still cannot find it, run: python -m ipykernel install --user --name "
            f"{KERNEL}",
            pytrace=False,
        )
    # jupyter_client runs a spec whose command is plain "python" with this interpreter.
    return sys.executable if spec.argv[0] in ("python", "python3") else spec.argv[0]


def _plots(nb: nbformat.NotebookNode) -> bool:
    return any(cell.cell_type == "code" and "matplotlib" in cell.source for cell in nb.cells)


def _pngs(nb: nbformat.NotebookNode) -> int:
    return sum(
        "image/png" in output.get("data", {})
        for cell in nb.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
    )


def _errors(nb: nbformat.NotebookNode) -> list[str]:
    return [
        f"cell {i}: {output.get('ename')}: {output.get('evalue')}"
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]


def test_notebooks_exist() -> None:
    assert NOTEBOOKS, f"no notebooks found in {NOTEBOOK_DIR}"


@pytest.mark.timeout(CELL_TIMEOUT * 3)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path: Path) -> None:
    interpreter = _kernel_command()
    nb = nbformat.read(path, as_version=4)
    assert all(not cell.get("outputs") for cell in nb.cells if cell.cell_type == "code"), (
        f"{path.name} is committed with outputs; clear them before committing"
    )
    client = NotebookClient(
        nb,
        timeout=CELL_TIMEOUT,
        kernel_name=KERNEL,
        resources={"metadata": {"path": str(NOTEBOOK_DIR)}},
    )
    started = time.monotonic()
    try:
        client.execute()
    except CellExecutionError as exc:
        pytest.fail(
            f"{path.name} failed in kernel {KERNEL!r} ({interpreter}):\n{exc}", pytrace=False
        )
    elapsed = time.monotonic() - started

    assert not _errors(nb), f"{path.name}: {_errors(nb)}"
    if _plots(nb):
        assert _pngs(nb), f"{path.name} uses matplotlib but produced no image/png output"
    assert elapsed < NOTEBOOK_BUDGET, (
        f"{path.name} took {elapsed:.0f} s (budget {NOTEBOOK_BUDGET} s)"
    )
