"""The benchmark commands still run (on tiny budgets; their figures are measured by hand, not by tests)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from tabula.tools.bench import net as bench_net
from tabula.tools.bench import search as bench_search


def test_bench_net_compares_onnxruntime_and_torch_on_the_cpu(tiny_onnx, capsys):
    assert bench_net.main([str(tiny_onnx), "--batches", "1,4", "--threads", "1", "--seconds", "0.02",
                           "--rounds", "1", "--paths", "onnx-fp32,torch-fp32", "--accuracy-positions", "8"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"onnx-fp32\s+t=1\s+\d+\s+\d+", out) and re.search(r"torch-fp32\s+t=1\s+\d+\s+\d+", out)


def test_bench_net_measures_the_shipped_default_with_its_komi_plane(capsys):
    """The default network reads 19 planes (the komi's too): the bench encodes with the network's own encoding, and
    compares its int8 file as this CPU's kernels compute it (the engine's check_int8 is off here)."""
    assert bench_net.main(["weights/tabula-6x64-komi-lead.onnx", "--int8", "weights/tabula-6x64-komi-lead-int8.onnx",
                           "--batches", "1", "--threads", "1", "--seconds", "0.02", "--rounds", "1",
                           "--paths", "onnx-fp32,onnx-int8", "--accuracy-positions", "8", "--games", ""]) == 0
    out = capsys.readouterr().out
    assert "0.330 GFLOP per position" in out and "onnx-int8 vs onnx-fp32 on 8 positions" in out


def test_bench_net_measures_the_size_asked_of_a_network_for_every_size(tiny_pooled_onnx, capsys):
    """A network for 9, 13 and 19 is measured on 19x19 unless --size says otherwise; a size it does not play is a
    clear error."""
    args = ["--batches", "1", "--threads", "1", "--seconds", "0.02", "--rounds", "1", "--paths", "onnx-fp32",
            "--accuracy-positions", "8"]
    assert bench_net.main([str(tiny_pooled_onnx), *args]) == 0
    assert ", 19x19\n" in capsys.readouterr().out
    assert bench_net.main([str(tiny_pooled_onnx), *args, "--size", "9"]) == 0
    assert ", 9x9\n" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="does not play 7x7"):
        bench_net.main([str(tiny_pooled_onnx), *args, "--size", "7"])


def test_bench_net_skips_a_gpu_path_this_machine_cannot_run_and_measures_the_rest(tiny_onnx, capsys, monkeypatch):
    def no_gpu(path, fp32, max_batch):
        raise RuntimeError("torch sees no CUDA device\n(more detail)")

    monkeypatch.setattr(bench_net, "gpu_runner", no_gpu)  # as on CI; on a GPU machine the real one might succeed
    assert bench_net.main([str(tiny_onnx), "--batches", "1", "--threads", "1", "--seconds", "0.02", "--rounds", "1",
                           "--paths", "onnx-fp32,torch-cuda-fp16", "--accuracy-positions", "8"]) == 0
    out = capsys.readouterr().out
    assert "# torch-cuda-fp16: not available here: torch sees no CUDA device\n" in out
    assert re.search(r"onnx-fp32\s+t=1\s+\d+", out) and not re.search(r"torch-cuda-fp16\s+t=1", out)


def test_bench_net_drops_a_gpu_path_that_fails_while_measuring_and_keeps_its_figures_so_far(tiny_onnx, capsys,
                                                                                              monkeypatch):
    def fails_beyond_batch_1(path, fp32, max_batch):
        def run(planes):
            if len(planes) > 1:
                raise RuntimeError("CUDA out of memory\n(details)")
            return cpu(planes)
        return run

    cpu = bench_net.OnnxEvaluator(str(tiny_onnx), symmetry="identity", provider="cpu", log=None).run
    monkeypatch.setattr(bench_net, "gpu_runner", fails_beyond_batch_1)
    assert bench_net.main([str(tiny_onnx), "--batches", "1,4", "--threads", "1", "--seconds", "0.02", "--rounds", "1",
                           "--paths", "onnx-fp32,torch-cuda-fp16", "--accuracy-positions", "8"]) == 0
    out = capsys.readouterr().out
    assert "# torch-cuda-fp16: failed at batch 4, dropped: CUDA out of memory\n" in out
    assert re.search(r"torch-cuda-fp16 t=1 +[1-9]\d* +0\n", out)  # batch 1 measured, batch 4 not
    assert re.search(r"onnx-fp32\s+t=1\s+\d+\s+\d+", out)


def test_bench_net_refuses_an_unknown_path(tiny_onnx, capsys):
    with pytest.raises(SystemExit) as exit_:
        bench_net.main([str(tiny_onnx), "--paths", "onnx-fp32,onnx-gpu"])
    assert exit_.value.code == 2 and "unknown path 'onnx-gpu'" in capsys.readouterr().err


def test_bench_search_reports_efficiency(tiny_onnx, capsys):
    assert bench_search.main([str(tiny_onnx), "--moves", "1", "--playouts", "24", "--threads", "1", "--batch-size", "4",
                              "--seconds", "0.05", "--rounds", "1", "--provider", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "on CPUExecutionProvider" in out and re.search(r"efficiency = playouts/s / best raw at batch \d+ +\d", out)


def test_bench_search_with_an_instant_network_replays_the_recorded_outputs(tiny_onnx, capsys):
    assert bench_search.main([str(tiny_onnx), "--moves", "2", "--playouts", "32", "--threads", "1", "--batch-size", "4",
                              "--rounds", "2", "--instant-network"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"playouts/s, best round +\d+", out)
    # one search thread: the replay grows exactly the recorded tree
    assert re.search(r"had not seen: 0 in 128 playouts", out)
    split = re.search(r"descent ([\d.]+), evaluator ([\d.]+) .*expansion and backup (-?[\d.]+)", out)
    assert split and float(split.group(1)) > 0 and float(split.group(2)) > 0


@pytest.mark.parametrize("module", [bench_net, bench_search], ids=["net", "search"])
def test_a_bench_on_a_missing_file_says_so_in_one_line(tmp_path, module):
    with pytest.raises(SystemExit) as exit_:
        module.main([str(tmp_path / "missing.onnx")])
    assert re.fullmatch(r"tabula bench (net|search): .*missing\.onnx: no such file", str(exit_.value))


def test_bench_search_on_a_provider_this_machine_lacks_says_so_in_one_line(tiny_onnx):
    with pytest.raises(SystemExit) as exit_:
        bench_search.main([str(tiny_onnx), "--provider", "tensorrt"])
    assert str(exit_.value).startswith("tabula bench search: onnxruntime provider 'tensorrt' is not available here")


def test_bench_search_plays_on_the_board_the_network_plays(capsys):
    """A 9×9 network is benchmarked on 9×9 (it used to be asked for 19×19 positions and fail)."""
    assert bench_search.main(["weights/tabula-4x32-rl9d.onnx", "--moves", "1", "--playouts", "24", "--threads", "1",
                              "--batch-size", "4", "--seconds", "0.05", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "self-play on 9x9" in out and re.search(r"playouts/s +\d", out)


@pytest.mark.slow
def test_bench_search_compares_rollout_mixes_in_one_run(tmp_path, capsys):
    """--rollout-mix 0 0.5: each λ's playouts/s and its ratio to the first, on the board --size asks for, from a
    position --opening moves in."""
    from tabula.engine.rollout.policy import RolloutWeights

    path = str(tmp_path / "rollout.npz")
    RolloutWeights(np.zeros(0, np.int32), np.zeros(0, np.float32), np.zeros(0, np.int64),
                   np.zeros(0, np.float32), self_atari=-2.0).save(path)
    assert bench_search.main(["weights/tabula-6x64-anysize.onnx", "--size", "7", "--opening", "4", "--moves", "1",
                              "--playouts", "16", "--threads", "1", "--batch-size", "4", "--rounds", "1",
                              "--rollout-mix", "0", "0.5", "--rollout-weights", path]) == 0
    out = capsys.readouterr().out
    assert "self-play on 7x7" in out and "from move 4" in out
    assert re.search(r"λ = 0 +playouts/s +[\d.]+ +ratio to λ = 0 1\.000", out)
    assert re.search(r"λ = 0\.5 +playouts/s +[\d.]+ +ratio to λ = 0 [\d.]+", out)
    with pytest.raises(SystemExit):
        bench_search.main(["weights/tabula-6x64-anysize.onnx", "--rollout-mix", "1.5"])


def test_bench_rollout_reports_moves_per_second(tmp_path, capsys):
    from tabula.engine.rollout.policy import RolloutWeights
    from tabula.tools.bench import rollout as bench_rollout

    path = str(tmp_path / "rollout.npz")
    RolloutWeights(np.zeros(0, np.int32), np.zeros(0, np.float32), np.zeros(0, np.int64),
                   np.zeros(0, np.float32), self_atari=-2.0).save(path)
    assert bench_rollout.main(["--weights", path, "--sizes", "5", "--batches", "1", "4", "--seconds", "0.01",
                               "--opening", "3"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert [row[:2] for row in rows] == [["5", "1"], ["5", "4"], ["5", "-"]]
    assert all(float(row[4]) > 0 for row in rows)


def test_bench_rollout_on_a_missing_file_says_so_in_one_line(tmp_path):
    from tabula.tools.bench import rollout as bench_rollout

    with pytest.raises(SystemExit, match=r"tabula bench rollout: .*missing\.npz"):
        bench_rollout.main(["--weights", str(tmp_path / "missing.npz")])


@pytest.mark.slow  # a few seconds: the quick suite stays under 3 minutes
def test_bench_movetime_times_each_engines_moves_against_the_period(capsys, monkeypatch):
    """Two scripted engines take turns: one answers at once, one sleeps 0.6 s a move against a 0.3 s period. Each
    passes from its third move on, so 4 moves a round take each engine through a restart from the empty board."""
    import sys
    from pathlib import Path

    from tabula.tools.bench import movetime as bench_movetime

    root = Path(__file__).resolve().parent.parent
    monkeypatch.setenv("PYTHONPATH", str(root))
    fake = f"{sys.executable} {root / 'tests' / 'fake_gtp_engine.py'} --moves 2"
    assert bench_movetime.main(["--engines", fake, f"{fake} --slow 0.6", "--size", "9", "--moves", "4",
                                "--rounds", "2", "--period-time", "0.3"]) == 0
    fast, slow = capsys.readouterr().out.splitlines()
    assert fast.startswith(f"{fake}: 8 moves,") and fast.endswith("past the 0.3 s period: 0")
    assert slow.startswith(f"{fake} --slow 0.6: 8 moves,") and slow.endswith("past the 0.3 s period: 8")


def test_bench_movetime_on_an_engine_that_cannot_start_says_so_in_one_line(capsys):
    from tabula.tools.bench import movetime as bench_movetime

    assert bench_movetime.main(["--engines", "/nonexistent/engine --gtp", "--moves", "1", "--rounds", "1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tabula bench movetime: ") and "/nonexistent/engine" in err and err.count("\n") == 1


def _game_archive(path, games: int, moves: int) -> None:
    """A tar.xz of ``games`` random 19x19 games of ``moves`` moves, and one 9x9 game (never sampled)."""
    import io
    import random
    import tarfile

    from tabula.engine.rules.game import GameState
    from tabula.engine.rules.playout import random_move
    from tabula.engine.rules.sgf import write_sgf

    with tarfile.open(path, "w:xz") as tar:
        for number, size in enumerate([19] * games + [9]):
            rng = random.Random(number)
            state = GameState(size)
            for _ in range(moves):
                state.play(random_move(state, rng))
            data = write_sgf(state)
            info = tarfile.TarInfo(f"games/{number}.sgf")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_positions_come_from_the_games_named_by_the_engines_sgf_reader_else_from_random_games(tmp_path):
    """One helper for `tabula export`'s int8 calibration, `bench net` and `bench visits`: real 19x19 games where
    some are named, read by engine.rules.sgf, else random games at the same move numbers; no default archive."""
    from tabula.tools.learn.export import positions, sgf_positions

    archive = tmp_path / "games.tar.xz"
    _game_archive(archive, games=3, moves=30)
    found = sgf_positions(6, seed=1, games=str(tmp_path / "*.tar.xz"), per_game=2, moves=range(10, 21))
    assert len(found) == 6 and all(s.size == 19 and 10 <= len(s.moves) <= 20 for s in found)
    last_game = sgf_positions(100, seed=1, games=str(archive), per_game=100, skip_games=2)
    assert sorted(len(s.moves) for s in last_game) == list(range(1, 31))  # the position after each of its moves
    assert [len(s.moves) for s in positions(19, 5, seed=1, games=str(archive), per_game=1, moves=range(30, 31))] \
        == [30, 30, 30]  # three 19x19 games, one position each
    made = positions(19, 4, seed=1, moves=range(10, 21))  # no games named: random games
    assert len(made) == 4 and all(10 <= len(s.moves) <= 20 for s in made)
    with pytest.raises(FileNotFoundError, match="no game archives named"):
        positions(19, 4, seed=1, source="sgf")


def test_bench_visits_runs_on_the_games_named(tiny_onnx, tmp_path, capsys):
    from tabula.tools.bench import visits as bench_visits

    archive = tmp_path / "games.tar.xz"
    _game_archive(archive, games=2, moves=20)
    assert bench_visits.main([str(tiny_onnx), "--visits", "8", "--positions", "2", "--games", str(archive)]) == 0
    assert "one leaf at a time" in capsys.readouterr().out
    assert bench_visits.main([str(tiny_onnx), "--visits", "8", "--positions", "3", "--games", str(archive),
                              "--moves", "15-20"]) == 0
    out = capsys.readouterr().out
    assert "after moves 15-20" in out and " all " in out  # and one column per side to move among the positions
    for bad in ("0-5", "9-3", "ten"):
        with pytest.raises(SystemExit):
            bench_visits.main([str(tiny_onnx), "--moves", bad])
    assert "expected" in capsys.readouterr().err
