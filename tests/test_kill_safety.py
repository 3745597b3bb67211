"""Kill safety (docs/RELIABILITY.md): `tools.check.killtest` SIGKILLs `tabula match` and `tabula rl` twice each at
random moments on tiny workloads, reruns them, and checks that nothing finished was lost or corrupted and that no
process outlived a kill; and the resume bugs of `tabula rl` that the full runs found, reproduced from the files a kill
leaves.
"""
from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from tabula.tools.check import killtest

# Minutes of real work (whole runs, killed processes, long matches): CI runs it, `python3 -m pytest` leaves it out.
pytestmark = pytest.mark.slow

# Two seeded random players that sleep 0.1 s before each move and pass after 12 stones: a game takes at least 2.6 s on
# any machine, the 8 games (2 at a time) at least 10 s, so the kills (2 to 5 s after each start) land before the end.
# (Where a run still ends before its kill, killtest doubles --games and goes on: the kills always happen.)
FAKE = f"{sys.executable} {Path(__file__).resolve().parent / 'fake_gtp_engine.py'} --slow 0.1 --moves 12"
MATCH_WORKLOAD = ["--games", "8", "--size", "7", "--parallel", "2", "--names", "a", "b", "--scoring", "tromp-taylor",
                  "--engines", f"{FAKE} --seed 1", f"{FAKE} --seed 2"]
RL_WORKLOAD = ["--blocks", "1", "--filters", "8", "--size", "5", "--komi", "0.5", "--visits", "8",
               "--fast-visits", "0", "--games-per-generation", "2", "--min-positions", "8", "--train-steps", "2",
               "--batch", "8", "--gate-games", "2", "--gate-visits", "4", "--workers", "1", "--train-threads", "1",
               "--train-workers", "0"]


def killed_twice(capsys, target: str, out: Path, options: list[str], workload: list[str]) -> tuple[str, str]:
    """(summary line, whole output) of a killtest run with two kills that passed every check."""
    status = killtest.main([target, "--out", str(out), "--kills", "2", *options, "--", *workload])
    text = capsys.readouterr().out
    assert status == 0, text
    # the summary line; other lines starting "killtest" say that the workload was extended
    line = next(line for line in text.splitlines() if line.startswith("killtest ") and " kills, " in line)
    assert "2 kills" in line and "lost 0, corrupted 0, duplicated 0" in line and "leaked processes 0" in line, line
    assert len([kill for kill in text.splitlines() if kill.startswith("kill ")]) == 2
    return line, text


def test_match_survives_two_kills(tmp_path, capsys):
    line, _ = killed_twice(capsys, "match", tmp_path / "match", ["--seed", "3", "--window", "2", "5"], MATCH_WORKLOAD)
    assert re.search(r"final (\d+)/\1 games", line), line


def test_rl_loop_survives_two_kills(tmp_path, capsys):
    # --strict: the finished run also matches an uninterrupted one (no game, training chunk or gating game redone)
    line, _ = killed_twice(capsys, "rl", tmp_path / "rl", ["--seed", "2", "--generations", "1", "--window", "2", "8",
                                                           "--strict"], RL_WORKLOAD)
    assert re.search(r"final generation (\d+), ", line), line


def test_a_lost_game_and_a_changed_sgf_are_caught(tmp_path):
    """The checker itself: a finished game that disappears, or whose SGF changes, fails the comparison."""
    out = tmp_path / "m"
    (out / "games").mkdir(parents=True)
    target = killtest.MatchTarget(out, [])
    records = []
    for i, result in enumerate(("B+R", "W+R")):
        game = f"0-1-{i:04d}"
        records.append({"game": game, "result": result, "moves": 0, "sgf": f"games/{game}.sgf"})
        (out / "games" / f"{game}.sgf").write_text(f"(;FF[4]SZ[9]GN[{game}]RE[{result}])")
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records) + '{"game": "0-1-00')
    before = target.snapshot()
    assert before.counts["games"] == 2 and before.torn_lines == 1 and not before.bad
    (out / "results.jsonl").write_text(json.dumps(records[0]) + "\n" + json.dumps(records[0]) + "\n")
    (out / "games" / "0-1-0000.sgf").write_text("(;FF[4]SZ[9]GN[0-1-0000]RE[B+R];B[aa])")
    totals = killtest.Totals()
    lost, corrupted = killtest.compare(target, before, target.snapshot(), totals)
    # game 1's record and SGF lost; game 0's SGF changed, and no longer matches its record; game 0 twice
    assert (lost, corrupted, totals.duplicated) == (2, 2, 1), totals.problems


# -- resume bugs the full kill runs found in tools/learn/rl_loop.py (fixed), from the files a kill leaves -------------


@pytest.fixture(scope="module")
def one_generation(tmp_path_factory) -> tuple[Path, Path]:
    """(run directory, pristine copy of it): a 5x5 run after one whole generation (2 games, 2 training steps, 2
    gating games). A test restores the run from the copy in place (the trainer's config names its data by path)."""
    from tabula.tools.learn.rl_loop import Loop, RLConfig
    from tabula.tools.learn.selfplay import SelfPlayConfig

    base = tmp_path_factory.mktemp("rl")
    rl = RLConfig(blocks=1, filters=8, games_per_generation=2, window_games=10, min_positions=1, train_steps=2,
                  batch=8, warmup_steps=0, gate_games=2, gate_visits=4, resign_min_games=1, workers=1,
                  train_threads=1, train_workers=0, generations=1)
    selfplay = SelfPlayConfig(sizes=(5,), komi=0.5, visits=8, fast_visits=0, batch_size=4)
    Loop(str(base / "run"), rl, selfplay, log=lambda line: None).run()
    shutil.copytree(base / "run", base / "pristine")
    return base / "run", base / "pristine"


def killed_before_the_state_save(one_generation: tuple[Path, Path], keep_elo_line: bool,
                                 state_of_an_older_version: bool = False) -> Path:
    """The run as a SIGKILL leaves it after the last gating game (and, with ``keep_elo_line``, after elo.jsonl is
    appended) but before state.json moves to the next generation: state.json as it was during generation 1. Then
    the rerun. ``state_of_an_older_version``: state.json without ``train_generation``, as runs before it wrote."""
    from tabula.tools.learn.rl_loop import Loop, saved_config

    run, pristine = one_generation
    shutil.rmtree(run)
    shutil.copytree(pristine, run)
    state = json.loads((run / "state.json").read_text())
    rl, selfplay = saved_config(str(run))
    state.update(generation=1, best="nets/gen-0000.onnx", best_generation=0, best_elo=0.0,
                 selfplay_target=rl.games_per_generation, train_target=rl.train_steps)
    if state_of_an_older_version:
        del state["train_generation"]
    (run / "state.json").write_text(json.dumps(state))
    if not keep_elo_line:
        (run / "elo.jsonl").unlink()
    Loop(str(run), rl, selfplay, log=lambda line: None).run()  # the rerun (generations=1 is saved)
    return run


@pytest.mark.parametrize("older_state", [False, True], ids=["state", "state-without-train_generation"])
def test_a_kill_during_gating_adds_no_training_chunk(one_generation, older_state):
    from tabula.tools.learn.rl_loop import trained_steps

    run = killed_before_the_state_save(one_generation, keep_elo_line=False, state_of_an_older_version=older_state)
    assert trained_steps(str(run)) == 2  # as an uninterrupted run; the rerun used to train to 4
    elo = [json.loads(line) for line in (run / "elo.jsonl").read_text().splitlines()]
    assert elo[0]["steps"] == 2  # the evaluated gen-0001.onnx was exported at step 2


def test_a_kill_after_the_elo_line_records_it_once(one_generation):
    run = killed_before_the_state_save(one_generation, keep_elo_line=True)
    elo = [json.loads(line) for line in (run / "elo.jsonl").read_text().splitlines()]
    assert [h["generation"] for h in elo] == [1]


def test_a_record_appended_after_a_torn_line_starts_a_line_of_its_own(tmp_path):
    from tabula.tools.learn.plot import read_jsonl
    from tabula.tools.learn.rl_loop import _append_jsonl

    path = tmp_path / "elo.jsonl"
    _append_jsonl(str(path), {"generation": 1})
    with open(path, "ab") as handle:
        handle.write(b'{"generation": 2, "elo"')  # the kill
    _append_jsonl(str(path), {"generation": 2})
    assert [r["generation"] for r in read_jsonl(str(path))] == [1, 2]
