"""Self-play games and the RL loop: targets and pruning, one tiny loop iteration on 5×5 (self-play → train →
gate), resuming after an interruption, the same games on a local Ray instance, and the Elo plot."""
from __future__ import annotations

import dataclasses
import json
import os

import numpy as np
import pytest

from tabula.engine.data.replay import ReplaySampler, ReplayStore, game_files, read_game
from tabula.engine.net.evaluator import UniformEvaluator
from tabula.engine.play.decision import pass_rules
from tabula.engine.play.result import Candidate
from tabula.engine.rules.coords import PASS
from tabula.engine.rules.game import GameState, Rules
from tabula.tools.learn.selfplay import (
    GatingTask,
    LocalWorkers,
    NetBlob,
    SelfPlayConfig,
    SelfPlayTask,
    play_gating_game,
    play_selfplay_game,
    prune_target,
    selfplay_tasks,
    visit_target,
)

SIZE = 5
FAST = SelfPlayConfig(sizes=(SIZE,), komi=0.5, visits=12, fast_visits=4, full_fraction=0.5, temperature_moves=4,
                      batch_size=4, max_moves_factor=2.0)


@pytest.fixture(scope="module")
def tiny_net(tmp_path_factory) -> str:
    """1 block × 8 filters, agz head for 5×5, the trainer's own initialisation."""
    import torch

    from tabula.engine.net.network import NetSpec, TabulaNet, export_onnx

    torch.manual_seed(1)
    path = str(tmp_path_factory.mktemp("net") / "tiny5.onnx")
    export_onnx(TabulaNet(NetSpec(blocks=1, filters=8, board_size=SIZE)).eval(), path, "tests")
    return path


def candidate(move: int, visits: int, value: float, prior: float) -> Candidate:
    return Candidate(move=move, visits=visits, value=value, prior=prior, lcb=value, pv=[move])


def test_prune_target_removes_exploration_visits():
    # N = 99 visits, √N = 9.95; the best move's score U = 0.2 + 1.5·0.3·9.95/61 = 0.2734.
    best = candidate(0, 60, 0.2, 0.3)
    noisy = candidate(1, 12, -0.9, 0.5)  # a large (noised) prior explains half its visits: 1.5·0.5·9.95/1.173 - 1
    solid = candidate(2, 24, 0.25, 0.1)  # nearly as good as the best: its visits are earned and kept
    lucky = candidate(3, 3, -0.5, 0.02)  # would not have been visited at all: dropped
    pruned = prune_target([best, noisy, solid, lucky], c_puct=1.5)
    assert pruned == {0: 60, 1: 6, 2: 24}
    moves, visits = visit_target([best, noisy, solid, lucky], SIZE, 1.5, prune=False)
    assert moves.tolist() == [0, 2, 1, 3] and visits.tolist() == [60, 24, 12, 3]
    moves, _ = visit_target([candidate(PASS, 3, 0.0, 1.0)], SIZE, 1.5, prune=True)
    assert moves.tolist() == [SIZE * SIZE]


def test_pass_rules(board_from_ascii):
    from tabula.engine.play.result import SearchResult
    from tabula.engine.rules.coords import BLACK, WHITE

    state = board_from_ascii("""
        . O . . .
        O O . . .
        . . . . .
        . . . . X
        . . . X .
    """, to_move=BLACK, komi=0.5)
    result = SearchResult(move=PASS, candidates=[candidate(PASS, 9, -0.9, 0.5), candidate(12, 3, -0.95, 0.1)],
                          root_visits=13, playouts=12, elapsed_s=0.0, batches=1, evaluated=12, cache_hits=0,
                          collisions=0, reused_visits=0, stopped_early=False)
    assert pass_rules(state, result, PASS) == 12  # behind in the count: play on
    state.to_move = WHITE
    assert pass_rules(state, result, PASS) == PASS  # ahead: passing is fine
    state.play(PASS, WHITE)
    assert pass_rules(state, result, 12) == 12  # white passed but black is behind: no pass to end the game
    state.play(12, BLACK)
    assert pass_rules(state, result, 7) == 7  # white is ahead but black did not pass: play on


def test_selfplay_game_with_uniform_evaluator():
    task = SelfPlayTask(NetBlob("uniform", b""), FAST, seed=3, resign_threshold=0.0, resign_enabled=True,
                        size=SIZE)
    game, sgf = play_selfplay_game(task, evaluator=UniformEvaluator())
    assert len(game.targets) == len(game.values) == len(game.moves) > 0
    assert 0 < game.num_targets < len(game.moves)  # half the moves searched in full
    state = GameState(SIZE, Rules(komi=FAST.komi))
    for (color, move), target in zip(game.moves, game.targets):
        if target is not None:
            assert target[1].sum() > 0 and np.all(target[1] > 0)
            legal = set(state.legal_moves()) | {SIZE * SIZE}
            assert set(target[0].tolist()) <= legal
        state.play(move, color)
    assert game.result.startswith(("B+", "W+")) and b"RE[" in sgf


def test_a_counted_selfplay_game_gives_the_auxiliary_heads_exact_targets_under_every_symmetry(tmp_path):
    """Self-play counts Tromp-Taylor: the final board's area owners and margin are the targets of the ownership and
    score heads, and the opponent's next move that of the reply head. Drawn by ReplaySampler, each target turns
    with the planes under the same symmetry; a resigned game has no score or ownership target."""
    from tabula.engine.net.features import symmetry_tables, transform_planes

    task = SelfPlayTask(NetBlob("uniform", b""), FAST, seed=3, resign_threshold=0.0, resign_enabled=True,
                        size=SIZE)
    game, _ = play_selfplay_game(task, evaluator=UniformEvaluator())
    record = game.record()
    final = GameState(SIZE, Rules(komi=FAST.komi))
    for color, move in game.moves:
        final.play(move, color)
    assert record.margin == final.area_score() and record.ownership.shape == (SIZE * SIZE,)
    assert (record.margin > 0) == game.result.startswith("B+")
    resigned = dataclasses.replace(game, result="W+R", winner=2).record()
    assert resigned.ownership is None and resigned.margin != resigned.margin  # NaN

    with ReplayStore(str(tmp_path / "replay"), 10) as store:
        store.append(game)
        store.append(dataclasses.replace(game, result="W+R", winner=2))
        sampler = ReplaySampler(store.paths())
    positions = np.arange(sampler.num_targets)
    plain = sampler.batch(np.random.default_rng(0), 0, symmetries=False, positions=positions)
    turned = sampler.batch(np.random.default_rng(0), 0, symmetries=True, positions=positions)
    half = game.num_targets
    assert np.all(plain.ownership_weight[:half] == 1) and np.all(plain.ownership_weight[half:] == 0)
    assert np.all(plain.score_weight[:half] == 1) and np.all(plain.score_weight[half:] == 0)
    assert np.all(np.abs(plain.score[:half]) == abs(record.margin)) and plain.reply_weight.sum() > 0
    inverse = symmetry_tables(SIZE)[1]
    for row in range(len(positions)):
        matches = [s for s in range(8)
                   if np.array_equal(transform_planes(plain.planes[row:row + 1], np.array([s]))[0], turned.planes[row])]
        owners = plain.ownership[row].reshape(1, 1, SIZE, SIZE)
        assert any(np.array_equal(transform_planes(owners, np.array([s])).reshape(-1), turned.ownership[row])
                   and inverse[s, plain.reply[row]] == turned.reply[row] for s in matches)


def test_selfplay_resigns_below_threshold():
    task = SelfPlayTask(NetBlob("uniform", b""), FAST, seed=3, resign_threshold=0.99, resign_enabled=True,
                        size=SIZE)
    game, _ = play_selfplay_game(task, evaluator=UniformEvaluator())
    assert game.result.endswith("+R")
    assert len(game.moves) <= SIZE * SIZE // 4 + 2 * FAST.resign_consecutive


def test_tasks_reserve_calibration_games():
    config = dataclasses.replace(FAST, no_resign_fraction=0.25)
    tasks = selfplay_tasks(NetBlob("n", b""), config, 400, seed=1, first=0, resign_threshold=0.1)
    share = np.mean([not t.resign_enabled for t in tasks])
    assert 0.18 < share < 0.32
    assert len({t.seed for t in tasks}) == 400
    again = selfplay_tasks(NetBlob("n", b""), config, 2, seed=1, first=399, resign_threshold=0.1)
    assert again[0].seed == tasks[399].seed  # a resumed run continues the same sequence


def test_tasks_take_the_sizes_in_turn_by_their_number():
    config = dataclasses.replace(FAST, sizes=(5, 7, 7))  # a size given twice gets twice the games
    tasks = selfplay_tasks(NetBlob("n", b""), config, 6, seed=1, first=4, resign_threshold=0.0)
    assert [t.size for t in tasks] == [7, 7, 5, 7, 7, 5]  # game k plays sizes[k % 3], from game 4 on
    assert SelfPlayConfig.from_dict(dataclasses.asdict(config)) == config  # config.json keeps a list
    old = {k: v for k, v in dataclasses.asdict(FAST).items() if k != "sizes"}
    assert SelfPlayConfig.from_dict({**old, "size": 9}).sizes == (9,)  # a config.json from before sizes
    with pytest.raises(ValueError, match="from 2 to 25"):
        SelfPlayConfig(sizes=())


def test_gating_game(tiny_net):
    net = NetBlob.load(tiny_net)
    result = play_gating_game(GatingTask(net, net, 2, FAST, visits=6, seed=5, size=SIZE, index=3))
    assert result["game"] == 3 and result["candidate_color"] == 2 and result["winner"] in (0, 1, 2)


def loop_configs(**rl_changes):
    from tabula.tools.learn.rl_loop import RLConfig

    rl = RLConfig(blocks=1, filters=8, games_per_generation=2, window_games=10, min_positions=1, train_steps=2,
                  batch=8, warmup_steps=0, gate_games=2, gate_visits=4, resign_min_games=1, workers=1,
                  train_threads=1, train_workers=0, **rl_changes)
    return rl, FAST


@pytest.mark.slow
def test_one_loop_iteration_then_resume(tiny_net, tmp_path):
    from tabula.tools.learn.rl_loop import ELO, STATE, Loop, read_jsonl, trained_steps

    directory = str(tmp_path / "run")
    rl, selfplay = loop_configs(generations=1)
    state = Loop(directory, rl, selfplay, log=lambda line: None).run()
    assert state["generation"] == 2
    with ReplayStore(os.path.join(directory, "replay"), 10, writable=False) as store:
        assert store.total == 2
        assert ReplaySampler(store.paths()).num_targets > 0
    assert len(os.listdir(os.path.join(directory, "sgf"))) == 2
    assert trained_steps(directory) == 2
    assert os.path.exists(os.path.join(directory, "nets", "gen-0001.onnx"))
    history = read_jsonl(os.path.join(directory, ELO))
    assert len(history) == 1 and history[0]["wins"] + history[0]["losses"] + history[0]["draws"] == 2

    # Interrupted in the second generation after one game: the rerun finishes it without losing or repeating games.
    loop = Loop(directory, rl, selfplay, log=lambda line: None)
    loop.stopping = lambda: len(game_files(os.path.join(directory, "replay"))) >= 3
    state = loop.run()
    assert state["generation"] == 2
    with ReplayStore(os.path.join(directory, "replay"), 10, writable=False) as store:
        assert store.total == 3
    state = Loop(directory, rl, selfplay, log=lambda line: None).run()
    assert state["generation"] == 3
    with ReplayStore(os.path.join(directory, "replay"), 10, writable=False) as store:
        assert store.total == 4
        assert [read_game(p).net for p in store.paths()][:2] == ["gen-0000.onnx"] * 2
    assert trained_steps(directory) == 4
    with open(os.path.join(directory, STATE)) as handle:
        assert json.load(handle)["generation"] == 3
    assert len(read_jsonl(os.path.join(directory, ELO))) == 2


@pytest.mark.slow  # a few seconds: the quick suite stays under 3 minutes
def test_a_kept_run_resumes_on_a_new_machine_with_a_refilled_window(tiny_net, tmp_path, capsys):
    """`--keep` holds what resumes the run (settings, state, logs, the trainer's checkpoint, the best network) and
    not its training data; a run directory that lost everything is restored from it, self-play refills the window
    with games numbered on from the old ones, and training continues from the kept checkpoint."""
    from tabula.tools.learn.rl_loop import ELO, main, read_jsonl, trained_steps

    keep, first, second = tmp_path / "keep", tmp_path / "machine-1", tmp_path / "machine-2"
    options = ["--blocks", "1", "--filters", "8", "--size", str(SIZE), "--komi", "0.5", "--visits", "12",
               "--fast-visits", "4", "--full-fraction", "0.5", "--batch-size", "4", "--games-per-generation", "2",
               "--window-games", "10", "--min-positions", "1", "--train-steps", "2", "--batch", "8",
               "--warmup-steps", "0", "--gate-games", "2", "--gate-visits", "4", "--train-threads", "1",
               "--train-workers", "0", "--generations", "1", "--keep", str(keep)]
    assert main(["--dir", str(first), *options]) == 0
    kept = sorted(str(p.relative_to(keep)) for p in keep.rglob("*") if p.is_file())
    best = json.loads((keep / "state.json").read_text())["best"]
    assert kept == sorted(["config.json", "state.json", "elo.jsonl", "gating.jsonl", "train/checkpoint.pt", best])

    assert main(["--dir", str(second), *options]) == 0
    err = capsys.readouterr().err
    assert f"restored the run kept in {keep}" in err
    assert "the replay window is empty after 2 games issued (a new machine?): self-play refills it with 8 games" in err
    with ReplayStore(str(second / "replay"), 10, writable=False) as store:
        # four generations' games, numbered on from the lost ones: no game number, so no seed, twice
        assert [number for number, _ in game_files(store.directory)] == list(range(2, 10))
    assert trained_steps(str(second)) == 4  # the kept checkpoint's 2 steps, then this generation's
    assert [h["generation"] for h in read_jsonl(str(second / ELO))] == [1, 2]
    assert json.loads((keep / "state.json").read_text())["generation"] == 3

    # The first machine comes back with its older run: it must not overwrite the newer one kept.
    with pytest.raises(SystemExit, match="keeps a run ahead of the one in"):
        main(["--dir", str(first), *options])


def test_a_restore_drops_log_lines_the_kept_state_never_reached(tmp_path):
    """A kill while keeping can leave the Elo and gating logs a generation ahead of the kept state (they are copied
    first): the restore drops those lines, so that the gate is played again rather than its decision trusted."""
    from tabula.tools.learn.rl_loop import CONFIG, ELO, GATING, STATE, RLConfig, read_jsonl, restore_kept_run

    keep, directory = tmp_path / "keep", tmp_path / "run"
    keep.mkdir()
    (keep / CONFIG).write_text(json.dumps({"rl": dataclasses.asdict(RLConfig()),
                                           "selfplay": dataclasses.asdict(SelfPlayConfig())}))
    (keep / STATE).write_text(json.dumps({"generation": 3, "best": "nets/gen-0001.onnx", "tasks_issued": 150}))
    (keep / ELO).write_text("".join(json.dumps({"generation": g, "accepted": True}) + "\n" for g in (1, 2, 3)))
    (keep / GATING).write_text("".join(json.dumps({"generation": g, "game": i}) + "\n"
                                       for g in (2, 3) for i in range(2)))
    assert restore_kept_run(str(directory), str(keep))
    assert [line["generation"] for line in read_jsonl(str(directory / ELO))] == [1, 2]
    assert [line["generation"] for line in read_jsonl(str(directory / GATING))] == [2, 2]
    assert json.loads((directory / STATE).read_text())["generation"] == 3
    assert not restore_kept_run(str(directory), str(keep))  # the same run, not behind: resumed as it is
    (keep / CONFIG).write_text(json.dumps({"rl": dataclasses.asdict(RLConfig(filters=16)),
                                           "selfplay": dataclasses.asdict(SelfPlayConfig())}))
    with pytest.raises(SystemExit, match="keeps another run than the one in"):
        restore_kept_run(str(directory), str(keep))


def test_resume_refuses_other_settings(tmp_path):
    from tabula.tools.learn.rl_loop import settle_config

    rl, selfplay = loop_configs(generations=1)
    directory = str(tmp_path / "run")
    os.makedirs(directory)

    settle_config(directory, rl, selfplay)
    settle_config(directory, dataclasses.replace(rl, workers=2, max_minutes=5.0), selfplay)  # allowed
    with pytest.raises(SystemExit):
        settle_config(directory, dataclasses.replace(rl, filters=16), selfplay)


def test_an_old_single_size_config_resumes(tmp_path):
    """A run directory whose config.json names one ``size`` (before ``sizes``) resumes with its saved settings, and
    with ``--size`` given again; the rewritten file names ``sizes``."""
    from tabula.tools.learn.rl_loop import CONFIG, saved_config, settle_config

    rl, selfplay = loop_configs(generations=1)
    directory = tmp_path / "run"
    directory.mkdir()
    old = {k: v for k, v in dataclasses.asdict(selfplay).items() if k != "sizes"}
    (directory / CONFIG).write_text(json.dumps({"rl": dataclasses.asdict(rl), "selfplay": {**old, "size": SIZE}}))
    saved_rl, saved_selfplay = saved_config(str(directory))
    assert saved_selfplay == selfplay and saved_selfplay.sizes == (SIZE,)
    settle_config(str(directory), saved_rl, saved_selfplay)
    assert json.loads((directory / CONFIG).read_text())["selfplay"]["sizes"] == [SIZE]
    settle_config(str(directory), rl, dataclasses.replace(selfplay, sizes=(SIZE,)))  # `--size 5` again: the same
    with pytest.raises(SystemExit, match="other sizes"):
        settle_config(str(directory), rl, dataclasses.replace(selfplay, sizes=(SIZE, 7)))


def test_several_sizes_need_the_pooled_head(tmp_path, capsys):
    from tabula.tools.learn.rl_loop import main

    directory = tmp_path / "run"
    with pytest.raises(SystemExit, match="--sizes 5,7 needs the pooled head") as refused:
        main(["--dir", str(directory), "--sizes", "5,7", "--blocks", "1", "--filters", "8"])
    assert isinstance(refused.value.code, str)  # printed as the message, without a traceback
    assert not (directory / "config.json").exists() and not (directory / "nets").exists()
    with pytest.raises(SystemExit):
        main(["--dir", str(directory), "--size", "5", "--sizes", "5,7"])
    assert "give one of them" in capsys.readouterr().err


@pytest.mark.slow  # a few seconds: the quick suite stays under 3 minutes
def test_two_sizes_in_one_run_then_resume(tmp_path):
    """One pooled network with its auxiliary heads plays 5×5 and 7×7 in turn: the window holds games of both, the
    trainer trains on both (score and ownership targets included), gating plays both and records each, the log
    says games and black's wins per size, and a resumed run continues the cycle of sizes."""
    from tabula.tools.learn.rl_loop import ELO, Loop, read_jsonl

    directory = str(tmp_path / "run")
    rl, selfplay = loop_configs(generations=1, head="pooled", aux=True)
    rl = dataclasses.replace(rl, games_per_generation=3, gate_games=4)
    selfplay = dataclasses.replace(selfplay, sizes=(SIZE, 7))
    lines: list[str] = []
    state = Loop(directory, rl, selfplay, log=lines.append).run()
    assert state["generation"] == 2
    history = read_jsonl(os.path.join(directory, ELO))
    assert set(history[0]["by_size"]) == {"5", "7"}
    assert [r["wins"] + r["losses"] + r["draws"] for r in history[0]["by_size"].values()] == [2, 2]
    window = history[0]["window"]
    assert [window[s]["games"] for s in ("5", "7")] == [2, 1] and window["5"]["positions"] > 0
    assert any("5x5 " in line and "7x7 " in line for line in lines if "scored" in line)
    status = next(line for line in lines if line.startswith("tabula rl: gen 2:"))
    assert "5x5: 2 games" in status and "7x7: 1 games" in status and "black won" in status

    # Stopped after one game of the next generation: game 3 is the cycle's next, 7x7.
    loop = Loop(directory, rl, selfplay, log=lambda line: None)
    loop.stopping = lambda: len(game_files(os.path.join(directory, "replay"))) >= 4
    loop.run()
    with ReplayStore(os.path.join(directory, "replay"), 10, writable=False) as store:
        assert [read_game(p).size for p in store.paths()] == [5, 7, 5, 7]


def test_local_workers_in_process(tiny_net):
    net = NetBlob.load(tiny_net)
    tasks = selfplay_tasks(net, FAST, 2, seed=2, first=0, resign_threshold=0.0)
    results = list(LocalWorkers(1).map_unordered(play_selfplay_game, tasks))
    assert len(results) == 2 and all(g.net == "tiny5.onnx" for g, _ in results)


@pytest.fixture
def ray_workers(monkeypatch):
    """Ray started here as `tabula rl --ray --workers 2` starts it (2 CPUs, no dashboard), without usage reports
    over the network, and shut down whatever the test does."""
    ray = pytest.importorskip("ray")
    from tabula.tools.learn.selfplay import RayWorkers

    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    workers = RayWorkers(processes=2)
    try:
        yield workers
    finally:
        workers.close()
        ray.shutdown()


@pytest.mark.slow  # starting a local Ray instance takes most of a minute on 2 cores
def test_ray_local_instance(tiny_net, ray_workers):
    net = NetBlob.load(tiny_net)
    tasks = selfplay_tasks(net, FAST, 2, seed=2, first=0, resign_threshold=0.0)
    games = [g for g, _ in ray_workers.map_unordered(play_selfplay_game, tasks)]
    assert len(games) == 2 and all(g.num_targets > 0 and g.net == "tiny5.onnx" for g in games)
    assert ray_workers.describe() == "Ray started here, 2 CPUs"


def test_plot_draws_an_rl_runs_elo(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from tabula.tools.learn import plot

    history = [{"generation": 1, "games": 50, "steps": 100, "score": 0.7, "elo": 147.0, "accepted": True},
               {"generation": 2, "games": 100, "steps": 200, "score": 0.4, "elo": 77.0, "accepted": False},
               {"generation": 3, "games": 150, "steps": 300, "score": 0.6, "elo": 217.0, "accepted": True}]
    with open(tmp_path / "elo.jsonl", "w") as handle:
        handle.writelines(json.dumps(h) + "\n" for h in history)
        handle.write('{"generation": 4, "ga')  # a line cut short by a kill
    assert plot.main([str(tmp_path)]) == 0
    out = tmp_path / "elo.png"
    assert out.stat().st_size > 1000 and out.read_bytes().startswith(b"\x89PNG")
    assert f"wrote {out}" in capsys.readouterr().out


def test_plot_draws_the_learning_curve_with_the_arenas_against_the_hours_the_run_ran(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from tabula.tools.learn import plot

    start = 1_000_000.0
    times = [start + 60, start + 120, start + 180, start + 7380, start + 7440]  # stopped for two hours
    run = tmp_path / "run"
    run.mkdir()
    with open(run / "elo.jsonl", "w") as handle:
        handle.writelines(json.dumps({"generation": g + 1, "games": 50 * (g + 1), "elo": 50.0 * g, "time": t,
                                      "accepted": g % 2 == 0}) + "\n" for g, t in enumerate(times))
    hours = plot.running_hours(plot.read_jsonl(str(run / "elo.jsonl")), gap_minutes=10)
    # minutes 1, 2, 3, then the two-hour stop counted as one median step (1 minute), then one more minute
    assert [round(hours[g] * 60, 6) for g in range(6)] == [0, 1, 2, 3, 4, 5]
    arenas = []
    for generation, opponent, winners in ((1, "pure:100", "BWW"), (5, "pure:100", "BBW"), (3, "random", "BW")):
        arena = tmp_path / f"arena-{generation}-{opponent}"
        arena.mkdir()
        (arena / "config.json").write_text(json.dumps({"players": [f"net:x/gen-{generation:04d}.onnx", opponent]}))
        with open(arena / "results.jsonl", "w") as handle:  # the network is black in even games
            handle.writelines(json.dumps({"game": i, "black": i % 2, "winner": w}) + "\n"
                              for i, w in enumerate(winners))
        arenas.append(str(arena))
    assert plot.read_arena(arenas[0]) == {"generation": 1, "opponent": "pure:100", "points": 2.0, "games": 3}
    assert plot.read_arena(str(run)) is None
    assert plot.main([str(run), "--arena", *arenas, str(run)]) == 0
    out = run / "curve.png"
    captured = capsys.readouterr()
    assert out.read_bytes().startswith(b"\x89PNG") and f"wrote {out}" in captured.out
    assert f"{run} left out" in captured.err  # the run directory given as an arena is said to be no arena
    with pytest.raises(SystemExit):
        plot.main([str(tmp_path / "nothing"), "--arena", arenas[0]])


def test_plot_refuses_a_directory_without_logs(tmp_path, capsys):
    from tabula.tools.learn import plot

    assert plot.main([str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert "neither metrics.jsonl" in error and "elo.jsonl" in error and "Traceback" not in error


def one_generation_from(start: str, directory) -> list[str]:
    """`tabula rl`'s arguments for one quick generation on 5x5 that starts from the network ``start``."""
    return ["--dir", str(directory), "--start-from", start, "--size", str(SIZE), "--komi", "0.5",
            "--visits", "12", "--fast-visits", "4", "--full-fraction", "0.5", "--batch-size", "4",
            "--games-per-generation", "2", "--window-games", "10", "--min-positions", "1",
            "--train-steps", "2", "--batch", "8", "--warmup-steps", "0", "--gate-games", "2",
            "--gate-visits", "4", "--workers", "1", "--train-threads", "1", "--train-workers", "0",
            "--generations", "1"]


def test_a_run_can_start_from_a_trained_network(tiny_net, tmp_path, capsys):
    from tabula.tools.learn.rl_loop import INIT_CHECKPOINT, adopt_start_network, main

    # The network's own architecture wins over the command line's defaults.
    rl, selfplay = loop_configs(generations=1)
    assert adopt_start_network(dataclasses.replace(rl, blocks=6, filters=64, start_from=tiny_net), (SIZE,)).filters == 8
    with pytest.raises(SystemExit, match="the run plays 9x9"):
        adopt_start_network(dataclasses.replace(rl, start_from=tiny_net), (9,))
    with pytest.raises(SystemExit, match="no such file"):
        adopt_start_network(dataclasses.replace(rl, start_from=str(tmp_path / "missing.onnx")), (SIZE,))

    directory = tmp_path / "run"
    assert main(one_generation_from(tiny_net, directory)) == 0
    with open(tiny_net, "rb") as source:
        assert (directory / "nets" / "gen-0000.onnx").read_bytes() == source.read()
    saved = json.loads((directory / "config.json").read_text())["rl"]
    assert (saved["blocks"], saved["filters"], saved["start_from"]) == (1, 8, tiny_net)
    assert (directory / INIT_CHECKPOINT).exists()
    assert "starting from the weights of" in capsys.readouterr().err
    assert (directory / "nets" / "gen-0001.onnx").exists()


@pytest.mark.slow
def test_a_run_can_start_from_a_network_for_every_size_and_keeps_its_extra_heads(tmp_path, capsys):
    """A pooled network with score and ownership heads (as the shipped one) and the small-board value term continues
    by self-play on a board size it lists: the run takes its head, the trainer its weights, and the next generation
    keeps the extra outputs and the term."""
    import torch

    from tabula.engine.net.evaluator import OnnxEvaluator
    from tabula.engine.net.network import NetSpec, TabulaNet, export_onnx
    from tabula.tools.learn.rl_loop import adopt_start_network, check_sizes, main

    torch.manual_seed(2)
    start = str(tmp_path / "pooled.onnx")
    export_onnx(TabulaNet(NetSpec(blocks=1, filters=8, head="pooled", aux=True, small_board_value=True)).eval(),
                start, "tests", board_sizes=[SIZE, 9, 19])
    rl, _ = loop_configs(generations=1)
    adopted = adopt_start_network(dataclasses.replace(rl, start_from=start), (SIZE,))
    assert (adopted.head, adopted.aux, adopted.filters, adopted.small_board_value) == ("pooled", True, 8, True)
    with pytest.raises(SystemExit, match="the run plays 5x5, 7x7"):  # every size is checked, not the first
        adopt_start_network(dataclasses.replace(rl, start_from=start), (SIZE, 7))
    plain = str(tmp_path / "plain.onnx")  # asked for the term, a start without it is refused, not run without it
    export_onnx(TabulaNet(NetSpec(blocks=1, filters=8, head="pooled")).eval(), plain, "tests", board_sizes=[SIZE])
    with pytest.raises(SystemExit, match="add-small-board-value"):
        adopt_start_network(dataclasses.replace(rl, start_from=plain, small_board_value=True), (SIZE,))
    with pytest.raises(SystemExit, match="needs the pooled head"):
        check_sizes(dataclasses.replace(rl, head="agz", small_board_value=True), loop_configs()[1])

    directory = tmp_path / "run"
    assert main(one_generation_from(start, directory)) == 0
    assert "starting from the weights of" in capsys.readouterr().err
    saved = json.loads((directory / "config.json").read_text())["rl"]
    assert (saved["head"], saved["aux"], saved["small_board_value"]) == ("pooled", True, True)
    evaluator = OnnxEvaluator(directory / "nets" / "gen-0001.onnx", symmetry="identity", log=None)
    assert json.loads(evaluator.metadata["architecture"])["small_board_value"]
    evaluation = evaluator.evaluate([GameState(SIZE)])
    assert evaluation.ownership is not None and evaluation.ownership.shape == (1, SIZE * SIZE)


def test_the_loop_anchors_its_window_with_the_records_it_is_given(tmp_path):
    from tabula.engine.data.replay import AnchoredSampler, MixedSizeSampler
    from tabula.engine.data.shards import write_shard
    from tabula.tools.learn.rl_loop import RLConfig, window_sampler
    from tests.records_helpers import learnable_records
    from tests.test_replay import make_game

    for name in ("train-0000.tshard", "train-0001.tshard"):
        write_shard(str(tmp_path / name), learnable_records(2, moves=30))
    assert window_sampler(RLConfig()) is MixedSizeSampler
    assert window_sampler(RLConfig(anchor_data=str(tmp_path))) is MixedSizeSampler  # no share: no anchor
    make = window_sampler(RLConfig(anchor_data=str(tmp_path), anchor_fraction=0.25, anchor_shards=1))
    with ReplayStore(str(tmp_path / "window"), window=0) as store:
        store.append(make_game(0, size=5))
        sampler = make(store.paths())
    assert isinstance(sampler, AnchoredSampler) and sampler.anchor.num_games == 2  # the first shard only
    os.makedirs(tmp_path / "empty")
    with pytest.raises(SystemExit, match="no train"):
        window_sampler(RLConfig(anchor_data=str(tmp_path / "empty"), anchor_fraction=0.25))
