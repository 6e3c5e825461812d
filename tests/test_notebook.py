"""The worked-analysis notebook runs top to bottom without error, on this interpreter."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "analyze_run.ipynb"


def test_analyze_notebook_executes(tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    # A first cell that reports the kernel's interpreter: it must be this venv's python.
    nb.cells.insert(0, nbformat.v4.new_code_cell("import sys; print(sys.executable)"))
    # jupyter_client replaces the kernelspec's "python" with sys.executable of this process.
    client = NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    assert nb.cells[0].outputs[0]["text"].strip() == sys.executable
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors == []
    images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) == 1


def test_analyze_notebook_uses_only_public_api():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    imports = re.findall(r"^\s*(?:from|import)\s+(sentinel[\w.]*)", code, re.M)
    assert imports and set(imports) <= {"sentinel", "sentinel.analyze"}, imports
    assert not re.search(r"sentinel\.analyze\.\w+\.", code), "the notebook reaches into sentinel.analyze's modules"
    # A walkthrough, not a script: it explains more than it runs.
    prose = sum(len(c.source) for c in nb.cells if c.cell_type == "markdown")
    assert prose > len(code)
