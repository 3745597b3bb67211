"""tools/gpu_session.sh, the script a session with a GPU runs, still runs: both parts, on tiny networks (QUICK=1),
as on the lent machine without sgfmill (its GPU paths report themselves unavailable on a machine without a GPU)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# Minutes of real work (whole runs, killed processes, long matches): CI runs it, `python3 -m pytest` leaves it out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("part", ["1", "2"])
def test_each_part_of_the_gpu_session_runs_every_step(tmp_path, part):
    no_sgfmill = tmp_path / "site" / "sgfmill"
    no_sgfmill.mkdir(parents=True)
    (no_sgfmill / "__init__.py").write_text("raise ImportError('no sgfmill on the lent GPU machine')\n")
    env = {**os.environ, "QUICK": "1", "OUT": str(tmp_path / "out"), "NETS": str(tmp_path / "nets"),
           "WHEELS": str(tmp_path / "no-wheels"),  # none carried, whatever this checkout's .whl/ holds
           "PYTHONPATH": str(no_sgfmill.parent),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run(["bash", str(ROOT / "tools" / "gpu_session.sh"), part], env=env, check=True, timeout=300,
                   capture_output=True)
    log = (tmp_path / "out" / f"part{part}.log").read_text()
    steps = re.split(r"^\$ ", log, flags=re.M)[1:]
    python_steps = [s for s in steps if s.startswith("python3 ")]
    assert len(python_steps) == {"1": 12, "2": 9}[part]  # a fresh machine: both export
    for step in python_steps:
        assert "# skipped: the part" not in step, step
        if step.startswith("python3 -m tabula.tools.cli gtp"):  # it needs sgfmill: without the wheel it fails, alone
            assert "ImportError" in step and "# exit status 1" in step, step
        else:
            assert "# exit status" not in step, step
    assert log.endswith(f"# part {part} done\n")
    if part == "1":
        assert "# torch-cuda-fp16: not available here" in log or "torch-cuda-fp16 " in log
        assert len(re.findall(r"playouts/s, best round", log)) == 3
    else:
        assert len(re.findall(r"efficiency = playouts/s / best raw", log)) == 6
