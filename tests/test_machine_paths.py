"""The study's runner saves an executed page without this machine's paths
(runner.without_machine_paths): an installed package's warning, the cache, the checkout, the
home and the scratch folder are rewritten relative to their roots, images are left alone, and
the page checker (pages.machine_paths) then finds nothing."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from activation_wave.core.paths import REPO_ROOT
from activation_wave.study import pages as P
from activation_wave.study.runner import without_machine_paths


def test_an_executed_page_is_saved_without_machine_paths(tmp_path, monkeypatch):
    monkeypatch.setenv("WAVE_CACHE", str(tmp_path / "cache"))
    venv = REPO_ROOT / ".venv/lib/python3.11/site-packages"
    lines = [f"{venv}/tqdm/auto.py:21: TqdmWarning: IProgress not found\n",
             f"tiny: 8 records, 3 MiB at {tmp_path / 'cache'}/capture/tiny-1\n",
             f"{REPO_ROOT}/lib/activation_wave/draft/experiment.py:176: UserWarning: other weights\n",
             f"wrote {Path.home()}/notes.txt and {tempfile.gettempdir()}/scratch.json\n"]
    png = "iVBORw0KGgo/tmp/AAAA"  # base64 may spell anything; images are not text
    nb = {"cells": [{"cell_type": "code", "source": "run()", "metadata": {}, "execution_count": 1, "outputs": [
        {"output_type": "stream", "name": "stderr", "text": lines},
        {"output_type": "error", "ename": "E", "evalue": "", "traceback": [f"File {REPO_ROOT}/lib/x.py, line 3"]},
        {"output_type": "display_data", "metadata": {}, "data": {"image/png": png, "text/plain": [f"<Figure at {venv}>"]}}]}],
          "metadata": {"papermill": {"input_path": str(REPO_ROOT / "build/notebooks/01.ipynb"),
                                     "parameters": {"results_root": str(REPO_ROOT / "data/results")}}},
          "nbformat": 4, "nbformat_minor": 5}
    out = json.loads(without_machine_paths(json.dumps(nb).encode()))
    text = out["cells"][0]["outputs"][0]["text"]
    assert text[0].startswith("tqdm/auto.py:21: TqdmWarning")
    assert text[1].endswith("MiB at <cache>/capture/tiny-1\n")
    assert text[2].startswith("lib/activation_wave/draft/experiment.py:176")
    assert text[3] == "wrote ~/notes.txt and <tmp>/scratch.json\n"
    assert out["cells"][0]["outputs"][1]["traceback"] == ["File lib/x.py, line 3"]
    assert out["cells"][0]["outputs"][2]["data"]["image/png"] == png
    assert out["metadata"]["papermill"]["input_path"] == "build/notebooks/01.ipynb"
    assert out["metadata"]["papermill"]["parameters"]["results_root"] == "data/results"
    del out["cells"][0]["outputs"][2]["data"]["image/png"]
    assert P.machine_paths(json.dumps(out)) == []
