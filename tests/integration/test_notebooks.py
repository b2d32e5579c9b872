"""Every notebook in notebooks/ runs top to bottom in a real Jupyter kernel (ipykernel, driven
by nbclient: the test extra installs both), with no cell raising."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

pytestmark = pytest.mark.slow  # a notebook runs a whole quick sweep (a minute or two on 2 cores)


def test_there_are_notebooks_to_run() -> None:
    assert NOTEBOOKS, "notebooks/ holds no .ipynb"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_in_a_real_kernel(path: Path, perfscout_home: Path) -> None:
    nbformat = pytest.importorskip("nbformat", reason="pip install 'perfscout[test]' (nbformat)")
    nbclient = pytest.importorskip("nbclient", reason="pip install 'perfscout[test]' (nbclient, ipykernel)")
    pytest.importorskip("ipykernel", reason="pip install 'perfscout[test]' (ipykernel)")
    nb = nbformat.read(path, as_version=4)
    # the kernel starts in this test's own folder (tracked files only, see tests/conftest.py)
    # and inherits PERFSCOUT_HOME: whatever the notebook writes lands there
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(Path.cwd())}})
    client.execute()  # raises CellExecutionError, with the cell and its traceback, on any error
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.get("execution_count") for c in code)
    errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    text = "".join(o.get("text", "") for c in code for o in c.get("outputs", []) if o.get("output_type") == "stream")
    if path.name == "quick_sweep.ipynb":
        assert "results in" in text and str(perfscout_home) in text  # the run went to the home
        assert (perfscout_home / "runs" / "quick-notebook" / "report.html").is_file()
        assert any("image/png" in o.get("data", {}) for c in code for o in c.get("outputs", []))
