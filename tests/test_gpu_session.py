"""tools/gpu_session.sh, the one script a session with a GPU runs, and what it relies on: it still runs every step
on tiny networks (QUICK=1) as on the lent machine without sgfmill (the GPU paths report themselves unavailable on
a machine without a GPU), what it measured stays when its budget cuts it short, `tabula train --synthetic` trains
without shards, and the FLOP count and peaks that MFU is computed from."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tabula.engine.net.network import NetSpec, TabulaNet  # noqa: E402
from tabula.tools.bench.net import bf16_peak_tflops, forward_flops  # noqa: E402
from tabula.tools.learn import train as train_module  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "gpu_session.sh"


def run_session(tmp_path: Path, sgfmill: bool = True, **env_changes: str) -> tuple[str, list[dict]]:
    """Run the script with QUICK=1 (without sgfmill, as on the lent machine when no wheel is carried); returns its
    log and results."""
    env = {**os.environ, "QUICK": "1", "TIME_SCALE": "5",  # limits are for a GPU machine; this one may be busy
           "OUT": str(tmp_path / "out"), "WORK": str(tmp_path / "work"),
           "WHEELS": str(tmp_path / "no-wheels"),  # none carried, whatever this checkout's .whl/ holds
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **env_changes}
    if not sgfmill:
        no_sgfmill = tmp_path / "site" / "sgfmill"
        no_sgfmill.mkdir(parents=True)
        (no_sgfmill / "__init__.py").write_text("raise ImportError('no sgfmill on the lent GPU machine')\n")
        env["PYTHONPATH"] = str(no_sgfmill.parent)
    subprocess.run(["bash", str(SCRIPT)], env=env, check=True, timeout=3000, capture_output=True)
    log = (tmp_path / "out" / "gpu_session.log").read_text()
    results = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    return log, results


def needs_sgfmill(step: str) -> bool:
    """tabula gtp and tabula train import it (through the game records), and the MFU step reads the training's
    figures: without the wheel these steps fail, and only these."""
    command = step.split("\n")[0]
    return command.startswith(("python3 -m tabula.tools.cli gtp", "python3 -m tabula.tools.cli train",
                               "python3 -m tabula.tools.cli distill")) \
        or (command.startswith("python3 - ") and command.split()[2].endswith("/train"))


@pytest.mark.slow
@pytest.mark.parametrize("sgfmill", [True, False], ids=["with-sgfmill", "without-sgfmill"])
def test_the_gpu_session_runs_every_step_in_one_part(tmp_path, sgfmill):
    log, results = run_session(tmp_path, sgfmill=sgfmill)
    steps = re.split(r"^\$ ", log, flags=re.M)[1:]
    python_steps = [s for s in steps if s.startswith("python3 ")]
    # env, the distill teacher's export and distill, bench net x3, search x2 + the default network's + 2 + 2 and the
    # instant network's, export x2, train and its MFU, gtp x2, pytest
    assert len(python_steps) == 21
    for step in python_steps:
        assert "# skipped" not in step, step
        if not sgfmill and needs_sgfmill(step):
            assert "# exit status 1" in step and ("ImportError" in step or "no training figures" in step), step
        else:
            assert "# exit status" not in step, step
    assert re.search(r"# done in \d+ s\n$", log)
    if not sgfmill:
        assert "# no sgfmill (carry .whl)" in log
        return
    kinds = [r["what"] for r in results]
    env = results[kinds.index("env")]
    if not env["cuda"]:  # this machine: every GPU path says so, in one line each
        for path in ("torch-cuda-fp16", "torch-cuda-bf16", "torch-cuda-fp32", "onnx-tensorrt", "onnx-cuda"):
            assert f"# {path}: not available here" in log
    net = {r["path"]: r for r in results if r["what"] == "net"}
    assert {"onnx-fp32", "onnx-int8"} <= set(net) and net["onnx-int8"]["best_positions_per_s"] > 0
    assert net["onnx-int8"]["gflop_per_position"] > 0.3  # the shipped 6x64 on 19x19
    searches = [r for r in results if r["what"] == "search"]
    assert len(searches) == 7 and any(r["weights"].endswith("-int8.onnx") for r in searches)  # the default's too
    assert kinds.count("search-instant") == 1 and kinds.count("net-accuracy") >= 1
    assert all(r["playouts_per_s"] > 0 for r in results if r["what"] == "search")
    (trained,) = [r for r in results if r["what"] == "train"]
    assert trained["samples_per_s"] > 0 and trained["gflop_per_sample"] > 0 and trained["device"] == "cpu"
    failed = {r["command"].split()[0] for r in results if r["what"] == "step" and r["rc"] != 0}
    assert failed <= {"nvidia-smi"}  # absent from a machine without a GPU
    assert (tmp_path / "out" / "train-metrics.jsonl").exists()
    (distilled,) = [r for r in results if r["what"] == "distill"]
    assert distilled["last_chunk"]["labelled"] > 0 and distilled["last_chunk"]["step"] > 0
    for name in ("checkpoint.pt", "metrics.jsonl", "model.onnx"):
        assert (tmp_path / "out" / f"distill-{name}").exists()
    assert len(list((tmp_path / "out").iterdir())) <= 8  # the device tool brings back 8 files at most


@pytest.mark.slow
def test_a_session_cut_short_by_its_budget_keeps_what_it_measured(tmp_path):
    log, results = run_session(tmp_path, BUDGET="12", TIME_SCALE="1")
    assert "# skipped: the session's 12 s are spent" in log and re.search(r"# done in \d+ s\n$", log)
    assert results[1]["what"] == "env"  # after nvidia-smi's step
    skipped = [r for r in results if r.get("skipped")]
    assert skipped and all(r["what"] == "step" for r in skipped)


def test_the_session_is_one_part_with_its_steps_in_order_of_importance():
    script = SCRIPT.read_text()
    assert "BUDGET:-480" in script and "usage:" not in script  # one part: nothing to choose
    order = ["nvidia-smi -L", "distill --teacher", "bench net \"$net6\"", "search \"$search6\"",
             "export_net \"${mid[@]}\"", '"${cli[@]}" train --synthetic', "search \"$net\" $core_big",
             "gtp --weights", "pytest -m gpu", "grid[@]"]
    positions = [script.index(marker) for marker in order]
    assert positions == sorted(positions)


def test_synthetic_training_needs_no_shards(tmp_path):
    config = train_module.TrainConfig(data="", out=str(tmp_path / "run"), synthetic=9, blocks=1, filters=8, steps=6,
                                      batch=8, optimizer="adamw", workers=0, threads=1, precision="fp32",
                                      val_positions=0, log_every=2, export=False)
    assert train_module.train(config, log=lambda *_: None)["step"] == 6
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [2, 4, 6] and all(r["samples_per_s"] > 0 for r in rows)


def test_synthetic_batches_are_random_positions_fixed_by_seed_and_step():
    sampler = train_module.SyntheticSampler(9)
    first, again, other = (sampler.batch_for_step(1, s, 4) for s in (3, 3, 4))
    assert first.planes.shape == (4, 18, 9, 9) and first.planes.dtype == np.float32
    assert np.array_equal(first.planes, again.planes) and not np.array_equal(first.planes, other.planes)
    assert np.all(first.planes[:, 16:18].sum(axis=1) == 1)  # one side to move
    assert first.policy.max() <= 81 and set(np.unique(first.value)) <= {-1.0, 1.0}


def test_tabula_train_takes_data_or_synthetic():
    with pytest.raises(SystemExit):
        train_module.parse_args(["--out", "/tmp/x"])
    with pytest.raises(SystemExit):
        train_module.parse_args(["--out", "/tmp/x", "--synthetic", "1"])
    assert train_module.parse_args(["--out", "/tmp/x", "--synthetic", "19"]).synthetic == 19


def test_forward_flops_are_the_layers_multiply_adds_twice():
    points = 19 * 19
    tower = 2 * 9 * 128 * 128 * points * 20 + 2 * 9 * 18 * 128 * points
    head = 2 * 128 * 2 * points + 2 * (2 * points) * (points + 1) + 2 * 128 * points + 2 * points * 256 + 2 * 256
    assert forward_flops(TabulaNet(NetSpec(blocks=10, filters=128)).eval(), 19) == tower + head


def test_bf16_peaks_by_device_name():
    assert bf16_peak_tflops("NVIDIA H100 80GB HBM3") == 989.4 == bf16_peak_tflops("NVIDIA H200")
    assert bf16_peak_tflops("NVIDIA H100 PCIe") == 756.0
    assert bf16_peak_tflops("Tesla T4") is None
