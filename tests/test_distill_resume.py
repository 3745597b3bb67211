"""`tabula distill` killed at any moment: the checkpoint is whole (old or new), what a killed run did after it is
dropped and done again, the resumed run trains as an uninterrupted one bit for bit, and label workers that ignore
the stop are killed within the bound."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")

from tabula.tools.learn import distill  # noqa: E402
from tests.test_distill import run_config  # noqa: E402

QUIET = dict(log=lambda *_: None)


def same_training(a_path, b_path) -> None:
    a = torch.load(a_path, weights_only=True)
    b = torch.load(b_path, weights_only=True)
    assert (a["step"], a["chunk"]) == (b["step"], b["chunk"])
    for name, tensor in a["state_dict"].items():
        assert torch.equal(tensor, b["state_dict"][name]), name
    for key, state in a["optimizer"]["state"].items():
        for name, tensor in state.items():
            assert torch.equal(tensor, b["optimizer"]["state"][key][name]), name
    assert torch.equal(a["torch_rng"], b["torch_rng"])


def metrics_chunks(run) -> list[int]:
    return [json.loads(line)["chunk"] for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_a_failed_checkpoint_write_leaves_the_last_one_and_the_run_resumes(tiny_aux_onnx, tmp_path, monkeypatch):
    run = tmp_path / "run"
    distill.distill(run_config(tiny_aux_onnx, run, chunks=1), **QUIET)
    real_save = torch.save

    def broken_save(obj, handle, *args, **kwargs):  # half a file, then the disk fails (or the process dies)
        real_save(obj, handle, *args, **kwargs)
        handle.truncate(handle.tell() // 2)
        raise OSError("no space left on device")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError, match="no space"):
        distill.distill(run_config(tiny_aux_onnx, run, chunks=2), **QUIET)
    monkeypatch.undo()
    state = torch.load(run / "checkpoint.pt", weights_only=True)  # the chunk before, whole
    assert (state["chunk"], state["step"]) == (1, 2)
    assert not [p.name for p in run.iterdir() if ".tmp" in p.name]
    assert metrics_chunks(run) == [1, 2]  # the failed chunk's line, not yet counted...
    assert (run / "labels" / "chunk-000001-9x9.npz").exists()  # ...and its labels
    result = distill.distill(run_config(tiny_aux_onnx, run, chunks=2), **QUIET)
    assert (result["chunk"], result["step"]) == (2, 4)
    assert metrics_chunks(run) == [1, 2]  # the chunk done again, counted once


def test_a_checkpoint_after_every_chunk(tiny_aux_onnx, tmp_path, monkeypatch):
    saved = []
    real = distill.trainer.atomic_torch_save

    def counting(state, path):
        saved.append((state["chunk"], state["step"]))
        real(state, path)

    monkeypatch.setattr(distill.trainer, "atomic_torch_save", counting)
    distill.distill(run_config(tiny_aux_onnx, tmp_path / "run", chunks=2), **QUIET)
    assert saved == [(1, 2), (2, 4), (2, 4)]  # each chunk's, then the stop's
    saved.clear()
    distill.distill(run_config(tiny_aux_onnx, tmp_path / "rare", chunks=2, checkpoint_minutes=60), **QUIET)
    assert saved == [(2, 4)]
    with pytest.raises(SystemExit):
        distill.parse_args(["--teacher", str(tiny_aux_onnx), "--run", str(tmp_path / "r"),
                            "--checkpoint-minutes", "-1"])


def test_what_a_killed_run_did_after_its_checkpoint_is_dropped(tmp_path):
    labels = tmp_path / "labels"
    labels.mkdir()
    for name in ("chunk-000000-9x9.npz", "chunk-000001-9x9.npz", "chunk-000001-19x19.npz", "chunk-000002-9x9.npz",
                 "chunk-000001-9x9.npz.tmp123.npz", "notes.npz"):
        (labels / name).write_bytes(b"x")
    (tmp_path / "checkpoint.pt.tmp99").write_bytes(b"half")
    rows = [{"chunk": 1, "step": 2}, {"chunk": 2, "step": 3}, {"chunk": 2, "step": 4}, {"chunk": 3, "step": 4},
            {"chunk": 3, "step": 6}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"chunk": 3, "st')
    distill.discard_unsaved(str(tmp_path), chunk=2, step=4)  # the checkpoint: chunk 1 (of 0, 1) trained to step 4
    assert sorted(p.name for p in labels.iterdir()) == ["chunk-000000-9x9.npz", "chunk-000001-19x19.npz",
                                                        "chunk-000001-9x9.npz", "notes.npz"]
    assert not (tmp_path / "checkpoint.pt.tmp99").exists()
    kept = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert kept == rows[:3]


def test_a_label_worker_that_ignores_the_stop_is_killed_within_the_bound():
    import multiprocessing

    pool = multiprocessing.get_context("spawn").Pool(2, initializer=signal.signal,
                                                      initargs=(signal.SIGTERM, signal.SIG_IGN))
    workers = list(pool._pool)
    assert pool.apply(os.getpid, ()) in {w.pid for w in workers}  # started
    pool.apply_async(time.sleep, (60,))  # busy, and deaf to SIGTERM
    time.sleep(0.2)
    started = time.monotonic()
    assert distill.close_pool(pool, grace=0.5) is False  # had to kill
    assert time.monotonic() - started < 0.5 + 2.5
    assert all(w.exitcode is not None for w in workers)
    assert not [p for p in multiprocessing.active_children() if p in workers]


@pytest.mark.slow
def test_a_run_killed_mid_chunk_resumes_from_the_last_checkpoint_exactly(tiny_aux_onnx, tmp_path):
    run = tmp_path / "run"
    command = [sys.executable, "-m", "tabula.tools.learn.distill", "--teacher", str(tiny_aux_onnx), "--run", str(run),
               "--student-arch", "1x8", "--sizes", "9", "--selfplay-games", "3", "--keep", "0.5",
               "--steps-per-chunk", "2", "--batch", "8", "--threads", "1", "--teacher-threads", "1", "--no-export",
               "--chunks", "1000"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    checkpoint = run / "checkpoint.pt"
    try:
        deadline = time.monotonic() + 120
        while not checkpoint.exists() or torch.load(checkpoint, weights_only=True)["chunk"] < 2:
            assert process.poll() is None, process.stderr.read().decode()
            assert time.monotonic() < deadline, "no checkpoint after two chunks"
            time.sleep(0.02)
        time.sleep(0.05)  # into the next chunk, labelling or training
    finally:
        process.kill()  # SIGKILL: nothing runs after it
        process.wait()
    assert process.returncode == -signal.SIGKILL
    at_kill = torch.load(checkpoint, weights_only=True)
    assert at_kill["chunk"] < 1000 and at_kill["step"] == 2 * at_kill["chunk"]  # a chunk's end
    chunks = at_kill["chunk"] + 2
    result = distill.distill(run_config(tiny_aux_onnx, run, chunks=chunks), **QUIET)
    assert (result["chunk"], result["step"]) == (chunks, 2 * chunks)
    assert metrics_chunks(run) == list(range(1, chunks + 1))  # no chunk counted twice
    distill.distill(run_config(tiny_aux_onnx, tmp_path / "whole", chunks=chunks), **QUIET)
    same_training(tmp_path / "whole" / "checkpoint.pt", checkpoint)


@pytest.mark.slow
def test_sigterm_while_workers_label_stops_at_once_with_the_checkpoint_and_student(tiny_aux_onnx, tmp_path):
    run = tmp_path / "run"
    command = [sys.executable, "-m", "tabula.tools.learn.distill", "--teacher", str(tiny_aux_onnx), "--run", str(run),
               "--student-arch", "1x8", "--sizes", "9", "--selfplay-games", "40000", "--label-workers", "2",
               "--steps-per-chunk", "2", "--batch", "8", "--threads", "1", "--teacher-threads", "1"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        lines = []
        while not lines or "in 2 worker processes" not in lines[-1]:  # the workers have started and are named
            lines.append(process.stdout.readline())
            assert lines[-1], "".join(lines)
        time.sleep(1.0)  # the workers are labelling chunk 0
        assert process.poll() is None
        stopped = time.monotonic()
        process.send_signal(signal.SIGTERM)
        rest = process.communicate(timeout=60)[0]
    finally:
        process.kill()
    assert process.returncode == 0, rest
    assert time.monotonic() - stopped < 30
    assert "checkpoint at chunk 0, step 0 (out of time)" in rest and "exported" in rest
    assert torch.load(run / "checkpoint.pt", weights_only=True)["chunk"] == 0  # the abandoned chunk not counted
    assert (run / "model.onnx").exists() and not list((run / "labels").iterdir())


def test_a_halved_checkpoint_is_half_the_bytes_and_the_run_goes_on_from_it(tiny_aux_onnx, tmp_path):
    from tabula.tools.learn import halve

    config = dict(ema_decay=0.99)
    distill.distill(run_config(tiny_aux_onnx, tmp_path / "run", chunks=1, **config), **QUIET)
    kept = tmp_path / "kept" / "checkpoint.pt"
    assert halve.main([str(tmp_path / "run" / "checkpoint.pt"), str(kept)]) == 0
    before, after = os.path.getsize(tmp_path / "run" / "checkpoint.pt"), os.path.getsize(kept)
    assert after < 0.6 * before
    exact = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)
    small = torch.load(kept, weights_only=True)
    for part in ("state_dict", "ema_state_dict"):
        for name, tensor in exact[part].items():
            if tensor.is_floating_point():
                assert small[part][name].dtype == torch.float16
                assert torch.allclose(small[part][name].float(), tensor, rtol=1e-3, atol=1e-4), name
    for key, moments in exact["optimizer"]["state"].items():
        assert torch.equal(small["optimizer"]["state"][key]["step"], moments["step"])  # the step count exact
        nonzero = moments["exp_avg_sq"] != 0
        assert (small["optimizer"]["state"][key]["exp_avg_sq"][nonzero] != 0).all()  # no moment flushed to zero
    from tabula.engine.net.network import load_checkpoint
    student = load_checkpoint(kept)  # tabula export and the evaluator read it as any checkpoint
    assert all(p.dtype == torch.float32 for p in student.parameters())
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    os.replace(kept, resumed / "checkpoint.pt")  # a new machine: the halved checkpoint alone
    result = distill.distill(run_config(tiny_aux_onnx, resumed, chunks=2, **config), **QUIET)
    assert result["chunk"] == 2 and result["step"] == 4
    state = torch.load(resumed / "checkpoint.pt", weights_only=True)
    assert all(t.dtype == torch.float32 for t in state["ema_state_dict"].values() if t.is_floating_point())
    assert all(t.dtype == torch.float32 for s in state["optimizer"]["state"].values() for t in s.values())
    for name, data in (("missing.pt", None), ("text.pt", b"hello\n"), ("onnx.pt", b"\x08\x07\x12\x07pytorch")):
        if data is not None:
            (tmp_path / name).write_bytes(data)
        assert halve.main([str(tmp_path / name), str(tmp_path / "out.pt")]) == 1
    torch.save({"a": torch.zeros(2)}, tmp_path / "other.pt")
    assert halve.main([str(tmp_path / "other.pt"), str(tmp_path / "out.pt")]) == 1
    assert not (tmp_path / "out.pt").exists()
