"""Every notebook executes (nbclient, kernel = this interpreter) against a tiny run, so none of
them can rot. The kernel spec is written into a temporary JUPYTER_PATH pointing at
``sys.executable``, so a clean clone needs no ``ipykernel install`` and no user kernel can
shadow the project's interpreter."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import nbformat
import pytest
from hydra import compose, initialize_config_dir
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
CONF = ROOT / "conf"
TINY = ["data=synthetic_tiny", "progress=false", "eval.n_resamples=200", "eval.modes=[fast]",
        "paths.output_dir=/unused", "paths.root_dir=/unused"]



def _run(preset: str, run_dir: Path, extra: list[str] = ()) -> Path:
    from experiments.run import run_experiment

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"experiment={preset}", *TINY, *extra])
    run_experiment(cfg, run_dir)
    return run_dir


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    return _run("smoke", tmp_path_factory.mktemp("nb-outputs") / "smoke" / "runs" / "r1")


@pytest.fixture(scope="module")
def kernel_env(tmp_path_factory):
    """``python3`` resolves to this interpreter (the project's .venv under ``make test``)."""
    from jupyter_client.kernelspec import KernelSpecManager

    root = tmp_path_factory.mktemp("jupyter")
    spec_dir = root / "kernels" / "python3"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "memory_core test kernel", "language": "python"}))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JUPYTER_PATH", str(root))
        mp.setenv("JUPYTER_RUNTIME_DIR", str(root / "runtime"))
        assert KernelSpecManager().get_kernel_spec("python3").argv[0] == sys.executable
        yield


def _execute(name: str, run_dir: Path) -> nbformat.NotebookNode:
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MEMORY_CORE_RUN_DIR", str(run_dir))
        NotebookClient(nb, kernel_name="python3", timeout=300,
                       resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    return nb


def _outputs(nb: nbformat.NotebookNode) -> tuple[list[str], int]:
    """(markdown / plain text shown, number of figures)."""
    texts, figures = [], 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            assert out.output_type != "error", f"{out.ename}: {out.evalue}"
            data = out.get("data", {})
            figures += "image/png" in data
            texts.append(data.get("text/markdown") or data.get("text/plain") or out.get("text", ""))
    return texts, figures


def test_notebooks_are_clean_and_parametrised():
    """Committed without outputs, with a tagged parameters cell reading MEMORY_CORE_RUN_DIR."""
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), path.name
        params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(params) == 1 and "MEMORY_CORE_RUN_DIR" in params[0].source, path.name
        assert not any(re.search(r"^\s*(def|class) ", c.source, re.M) for c in nb.cells
                       if c.cell_type == "code"), f"{path.name} holds library code"


@pytest.mark.model
def test_recall_notebook(tiny_run, kernel_env):
    texts, figures = _outputs(_execute("01_recall.ipynb", tiny_run))
    assert figures == 2  # recall@k curves, recall by category
    assert any(str(tiny_run) in t for t in texts)
    assert any("per category" in t for t in texts)


@pytest.mark.model
def test_thresholds_notebook(tiny_run, kernel_env):
    texts, figures = _outputs(_execute("02_thresholds.ipynb", tiny_run))
    assert figures == 2  # score histograms, min_score sweep
    assert not any("No store in this run" in t for t in texts)


@pytest.mark.model
def test_routing_notebook_without_routing(tiny_run, kernel_env):
    texts, figures = _outputs(_execute("03_routing.ipynb", tiny_run))
    assert any("No routing run yet" in t for t in texts)
    assert figures == 0


@pytest.mark.model
@pytest.mark.slow
def test_routing_notebook_on_a_routing_run(tmp_path, kernel_env):
    """A smoke-sized routing experiment (synthetic tiny world only): the notebook shows the
    routers' table, a reliability diagram and the cost chart."""
    run = _run("routing", tmp_path / "routing" / "runs" / "r1", ["eval.limit_queries=6"])
    routers = sorted(json.loads((run / "metrics.json").read_text())["routing"]["datasets"]
                     ["synthetic"]["routers"])
    texts, figures = _outputs(_execute("03_routing.ipynb", run))
    assert not any("No routing run yet" in t for t in texts)
    assert figures == 2  # reliability diagram, spaces searched
    shown = "\n".join(texts)
    assert all(r in shown for r in routers)

