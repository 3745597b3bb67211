"""tools/gpu_session.sh, the one script a session with a GPU runs: mostly `tabula distill` (a teacher packed for the
trip and unpacked there, a tabula-v2 student trained and brought back, going on from the kept run), then a short
bench of the student. Checked with QUICK=1 on this machine (a tiny random teacher, the GPU paths reporting
themselves unavailable), also without sgfmill as on the lent machine, and cut short by its budget; that what
travels fits the device tool's 64 MiB. Also what earlier sessions measured with it: `tabula train --synthetic`,
the FLOP count and peaks that MFU is computed from."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tabula.engine.net.network import NetSpec, TabulaNet  # noqa: E402
from tabula.tools.bench.net import bf16_peak_tflops, forward_flops  # noqa: E402
from tabula.tools.learn import distill  # noqa: E402
from tabula.tools.learn import train as train_module  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "gpu_session.sh"
TRAVEL_LIMIT = 64 * 2 ** 20  # the device tool's: tracked files, untracked ones not ignored, and what is carried
PACKED_TEACHER = 18_100_000  # g170e-b15c192 as fp16_pack writes it (float16, xz-compressed), rounded up
CARRIED_WHEEL = 32_768  # sgfmill's wheel, carried in .whl
# The tool counts more than the files' bytes (docs/BENCHMARKS.md, "To measure on a GPU machine"): the test counts
# each file rounded up to 4 KiB, as du does, which matched what it let through and what it refused.
BLOCK = 4096
KEPT_RUN = 12_000_000  # a kept 8x96 run: its checkpoint halved (tools/learn/halve.py) and metrics, rounded up


def run_session(tmp_path: Path, out: str = "out", sgfmill: bool = True, **env_changes: str) -> tuple[str, list[dict]]:
    """Run the script with QUICK=1 (without sgfmill, as on the lent machine when no wheel is carried); returns its
    log and results."""
    env = {**os.environ, "QUICK": "1", "TIME_SCALE": "3",  # limits are for a GPU machine; this one may be busy
           "OUT": str(tmp_path / out), "WORK": str(tmp_path / "work"),
           "KEPT": str(tmp_path / "no-kept-run"),  # whatever this checkout's weights/training/distill holds
           "WHEELS": str(tmp_path / "no-wheels"),  # none carried, whatever this checkout's .whl/ holds
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **env_changes}
    if not sgfmill:
        no_sgfmill = tmp_path / "site" / "sgfmill"
        no_sgfmill.mkdir(parents=True)
        (no_sgfmill / "__init__.py").write_text("raise ImportError('no sgfmill on the lent GPU machine')\n")
        env["PYTHONPATH"] = str(no_sgfmill.parent)
    subprocess.run(["bash", str(SCRIPT)], env=env, check=True, timeout=3000, capture_output=True)
    log = (tmp_path / out / "gpu_session.log").read_text()
    results = [json.loads(line) for line in (tmp_path / out / "results.jsonl").read_text().splitlines()]
    return log, results


def python_steps(log: str) -> list[str]:
    return [s for s in re.split(r"^\$ ", log, flags=re.M)[1:] if s.startswith("python3 ")]


def metrics(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_the_gpu_session_trains_a_student_and_goes_on_from_the_kept_run(tmp_path):
    log, results = run_session(tmp_path)
    steps = python_steps(log)
    # env, the random teacher's export, its packing and unpacking, the random start's export, distill, the
    # checkpoint halved, bench net of the teacher and of the student, bench search twice
    assert len(steps) == 11
    for step in steps:
        assert "# exit status" not in step and "# skipped" not in step, step
    assert re.search(r"# done in \d+ s\n$", log)
    assert "fp16_pack unpack" in log and "--student-encoding tabula-v2" in log and "--label-workers 2" in log
    env = next(r for r in results if r["what"] == "env")
    if not env["cuda"]:
        assert "# torch-cuda-fp16: not available here" in log
    (distilled,) = [r for r in results if r["what"] == "distill"]
    assert distilled["teacher"] == "teacher-random.onnx" and distilled["resumed"] is False
    assert distilled["last_chunk"]["labelled"] > 0 and distilled["last_chunk"]["step"] > 0
    out = tmp_path / "out"
    for name in ("checkpoint.pt", "model.onnx", "metrics.jsonl", "config.json"):
        assert (out / f"distill-{name}").exists()
    # halved, as the kept run is committed (a whole 8x96 checkpoint is over the 16 MiB a file that comes back)
    weights = torch.load(out / "distill-checkpoint.pt", map_location="cpu", weights_only=True)["state_dict"]
    assert {t.dtype for t in weights.values() if t.is_floating_point()} == {torch.float16}
    config = json.loads((out / "distill-config.json").read_text())
    assert config["student_encoding"] == "tabula-v2" and config["label_workers"] == 2
    assert {r["what"] for r in results} >= {"net", "search", "search-instant"}
    # a new run starts from a network of the student's trunk (today's network on a GPU) through --init
    (distill_step,) = [step for step in steps if step.startswith("python3 -m tabula.tools.cli distill")]
    assert "# a new run, started from" in log and "--init " in distill_step.splitlines()[0]
    nets = [r["weights"] for r in results if r["what"] == "net"]
    assert len(nets) == 2 and nets[0].endswith("teacher-random.onnx") and nets[1].endswith("distill/model.onnx")
    assert all(r["weights"].endswith("distill/model.onnx") for r in results if r["what"] == "search")
    failed = {r["command"].split()[0] for r in results if r["what"] == "step" and r["rc"] != 0}
    assert failed <= {"nvidia-smi"}  # absent from a machine without a GPU
    assert len(list(out.iterdir())) <= 8  # the device tool brings back 8 files at most

    # The next CPU session keeps what came back; the next GPU session goes on from it, with its settings.
    kept = tmp_path / "kept"
    kept.mkdir()
    for name in ("checkpoint.pt", "config.json", "metrics.jsonl"):
        shutil.copyfile(out / f"distill-{name}", kept / name)
    before = metrics(kept / "metrics.jsonl")
    log, results = run_session(tmp_path, out="out2", KEPT=str(kept))
    assert "# going on from the kept run" in log and "--steps-per-chunk 3" in log and "--init" not in log
    assert f"resuming {tmp_path / 'work' / 'distill'} at chunk {before[-1]['chunk']}, step {before[-1]['step']}" \
        in log
    after = metrics(tmp_path / "out2" / "distill-metrics.jsonl")
    assert after[: len(before)] == before and after[-1]["chunk"] > before[-1]["chunk"]
    assert after[len(before)]["step"] > before[-1]["step"]
    (distilled,) = [r for r in results if r["what"] == "distill"]
    assert distilled["resumed"] is True


@pytest.mark.slow
def test_the_gpu_session_without_sgfmill_fails_only_the_distill_step(tmp_path):
    log, results = run_session(tmp_path, sgfmill=False)
    assert "# no sgfmill (carry .whl)" in log and re.search(r"# done in \d+ s\n$", log)
    for step in python_steps(log):
        if step.startswith("python3 -m tabula.tools.cli distill"):
            assert "# exit status 1" in step and "ImportError" in step, step
        else:
            assert "# exit status" not in step, step
    assert not [r for r in results if r["what"] == "distill"]


@pytest.mark.slow
def test_a_session_cut_short_by_its_budget_keeps_what_it_measured(tmp_path):
    log, results = run_session(tmp_path, BUDGET="12", TIME_SCALE="1")
    assert "# skipped: the session's 12 s are spent" in log and re.search(r"# done in \d+ s\n$", log)
    assert results[1]["what"] == "env"  # after nvidia-smi's step
    skipped = [r for r in results if r.get("skipped")]
    assert skipped and all(r["what"] == "step" for r in skipped)


def test_the_session_is_one_part_with_distill_first_and_the_bench_after():
    script = SCRIPT.read_text()
    assert "BUDGET:-530" in script and "usage:" not in script  # one part: nothing to choose
    order = ["step 20 nvidia-smi -L", 'fp16_pack unpack "$packed"', '"${cli[@]}" distill',
             '"${cli[@]}" bench net "$teacher"', '"${cli[@]}" bench net "$student_net"', '"${cli[@]}" bench search']
    positions = [script.index(marker) for marker in order]
    assert positions == sorted(positions)
    assert "timeout_s 580" in script and 'carry [".whl", "runs/teacher"]' in script


def test_a_resumed_gpu_run_takes_every_fixed_setting_of_the_kept_run():
    script = SCRIPT.read_text()
    taken = re.search(r'for name in \(("student_arch".*?)\):', script, flags=re.S).group(1)
    names = set(re.findall(r'"(\w+)"', taken))
    fields = set(distill.DistillConfig.__dataclass_fields__)
    assert names <= fields
    # init: only a run without a checkpoint reads it; the teacher is fixed by its network, which the script checks
    assert set(distill.FIXED_ON_RESUME) - names == {"init"} and "teacher" not in distill.FIXED_ON_RESUME


def resume_check(config: dict, teacher: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    """The script's check of the kept run (its Python between ``<<'EOF'`` and ``EOF``) on ``config`` and a teacher
    file, run as the script runs it; returns the finished process."""
    code = re.search(r"resume-refused\" <<'EOF'\n(.*?)\nEOF\n", SCRIPT.read_text(), flags=re.S).group(1)
    (tmp_path / "config.json").write_text(json.dumps(config))
    return subprocess.run([sys.executable, "-", str(tmp_path / "config.json"), str(teacher)], input=code, text=True,
                          capture_output=True, cwd=ROOT)


@pytest.mark.slow
def test_the_gpu_session_goes_on_from_the_kept_run_only_with_its_teachers_network(tiny_aux_onnx, tiny_onnx,
                                                                                  tmp_path):
    from tabula.tools.learn.teacher import teacher_identity

    kept = {"teacher": "/cpu/machine/teacher.onnx", "teacher_network": teacher_identity(str(tiny_aux_onnx)),
            "student_arch": "6x64", "student_encoding": "tabula-v2", "batch": 256, "freeze_batchnorm": True,
            "lr_drops": "30200:0.0003"}
    same = resume_check(kept, tiny_aux_onnx, tmp_path)
    assert same.returncode == 0 and same.stdout.split() == ["--student-arch", "6x64", "--student-encoding", "tabula-v2",
                                                            "--batch", "256", "--freeze-batchnorm", "--lr-drops",
                                                            "30200:0.0003"]
    # its focus records (Tabula's games, in the tree) go along where they are here; missing ones are left out
    focused = resume_check({**kept, "focus_records": "docs/matches/handicap7/games.tar.xz,runs/not-here.tar.xz",
                            "focus_positions": 1024, "focus_per_game": 16, "handicap_bonuses": "0,N,N-1"},
                           tiny_aux_onnx, tmp_path)
    assert focused.stdout.split()[-8:] == ["--focus-records", "docs/matches/handicap7/games.tar.xz",
                                           "--focus-positions", "1024", "--focus-per-game", "16",
                                           "--handicap-bonuses", "0,N,N-1"]
    unfrozen = resume_check({**kept, "freeze_batchnorm": False, "lr_drops": ""}, tiny_aux_onnx, tmp_path)
    assert "--freeze-batchnorm" not in unfrozen.stdout and "--lr-drops" not in unfrozen.stdout
    other = resume_check(kept, tiny_onnx, tmp_path)
    assert other.returncode != 0 and "a new run" in other.stderr
    # a kept run from before teacher_network: by the files' names, an int8 export the same teacher
    old = {"teacher": "/m/g170e-b15c192-s1.bin.gz", "batch": 256}
    assert resume_check(old, tmp_path / "g170e-b15c192-s1-int8.onnx", tmp_path).returncode == 0
    assert resume_check(old, tmp_path / "b10c384-int8.onnx", tmp_path).returncode != 0


def test_what_travels_to_the_gpu_machine_fits_with_the_packed_teacher():
    """The tracked tree, the packed b15c192 teacher, sgfmill's wheel and the kept run (tracked once committed) fit
    the device tool's 64 MiB."""
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    sizes = {name: -(-os.path.getsize(ROOT / name) // BLOCK) * BLOCK for name in names.decode().split("\0")
             if name and os.path.isfile(ROOT / name)}
    kept = sum(size for name, size in sizes.items() if name.startswith("weights/training/distill/"))
    tracked = sum(sizes.values()) - kept
    assert tracked + max(kept, KEPT_RUN) + PACKED_TEACHER + CARRIED_WHEEL < TRAVEL_LIMIT, \
        f"the tracked tree is {tracked:,} bytes, the kept run {kept:,}"


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
