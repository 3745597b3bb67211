"""KaTrain's own engine driver (katrain.core.engine.KataGoEngine, KaTrain 1.20.0) drives ``tabula analysis``
headless through its custom-command backend: four positions of a 9x9 game analysed with ownership and policy, the
answers read back through KaTrain's GameNode (katrain_driver.py).

KaTrain is a kivy GUI and is not installed with Tabula: the test runs the driver with the Python that
TABULA_KATRAIN_PYTHON names (default /tmp/ktvenv/bin/python), one into which `pip install katrain==1.20.0` went,
and is skipped where there is none.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest_network import tiny_aux_onnx  # noqa: F401  (fixture)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
KATRAIN_PYTHON = os.environ.get("TABULA_KATRAIN_PYTHON", "/tmp/ktvenv/bin/python")


def _katrain_importable() -> bool:
    if not os.path.isfile(KATRAIN_PYTHON):
        return False
    probe = subprocess.run([KATRAIN_PYTHON, "-c", "import katrain.core.engine"], capture_output=True, timeout=60,
                           env={**os.environ, "KIVY_NO_ARGS": "1", "KIVY_NO_WINDOW": "1", "KIVY_NO_CONSOLELOG": "1"})
    return probe.returncode == 0


@pytest.mark.slow
def test_katrain_engine_driver_reads_tabula_analysis(tiny_aux_onnx):  # noqa: F811
    if not _katrain_importable():  # probed here, not at collection: the quick suite never pays for it
        pytest.skip(f"no KaTrain at {KATRAIN_PYTHON}")
    command = [sys.executable, "-m", "tabula.tools.cli", "analysis", "--weights", str(tiny_aux_onnx), "--seed", "1"]
    process = subprocess.run([KATRAIN_PYTHON, str(HERE / "katrain_driver.py"), *command], capture_output=True,
                             text=True, timeout=300, cwd=ROOT)
    assert process.returncode == 0, process.stderr[-2000:]
    report = json.loads(process.stdout.strip().splitlines()[-1])
    assert report["finished"] and not report["errors"]
    for node in report["nodes"]:
        assert node["complete"] and node["visits"] == 24
        assert 0.0 <= node["winrate"] <= 1.0 and isinstance(node["score"], float)
        assert node["candidates"] and node["ownership"] == 81 and node["policy"] == 82
