"""`tabula match` end to end with the scriptable fake engine (faults, time, resume, parallel games, handicap,
round robin) and with GNU Go and Tabula where installed; plus the clock, score parsing and summary numbers."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sgfmill import sgf

from tabula.tools.compete.match import GAMES_LEFT, build_parser, config_from_args, main, run_match, schedule
from tabula.tools.compete.referee import Clock, parse_score
from tabula.tools.compete.results import read_results, summarise
from tabula.tools.compete.settings import ABSOLUTE, BYOYOMI, CANADIAN, MatchConfig, TimeControl

ROOT = Path(__file__).resolve().parents[1]
FAKE = f"{sys.executable} {ROOT / 'tests' / 'fake_gtp_engine.py'}"
TABULA = f"{sys.executable} -m tabula.gtp --player random"


@pytest.fixture(autouse=True)
def repo_on_path(monkeypatch):
    # The fake engine and `python -m tabula.gtp` import the engine package; the subprocesses inherit this.
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.chdir(ROOT)


def run(out: Path, *engines: str, games: int = 2, extra: tuple[str, ...] = (), probe: bool = False) -> int:
    """Runs `tabula match` in-process. Without ``probe`` the engines get labels from the command line rather than
    being started once to ask their names, which saves a start-up per engine."""
    names = () if probe else ("--names", *(f"Fake 1.0 [{i}]" for i in range(len(engines))))
    return main(["--out", str(out), "--games", str(games), "--size", "9", *extra, *engines, *names])


def results(out: Path) -> list[dict]:
    return sorted(read_results(out / "results.jsonl"), key=lambda record: record["game"])


# -- plain games, SGF, config, summary --------------------------------------------------------------------------


def test_tiny_match_writes_sgf_results_and_config(tmp_path, capsys):
    out = tmp_path / "m"
    assert run(out, f"{FAKE} --name Alpha --seed 1", f"{FAKE} --name Beta --seed 2", probe=True) == 0
    printed = capsys.readouterr().out
    records = results(out)
    assert [r["game"] for r in records] == ["0-1-0000", "0-1-0001"]
    assert [(r["black"], r["white"]) for r in records] == [(0, 1), (1, 0)]  # colours alternate
    for record in records:
        assert record["fault"] is None and record["winner"] in ("B", "W")
        assert record["reason"] == "two passes; scored by engines"
        assert record["scores"]["black_engine"] == record["scores"]["white_engine"] == record["result"]
        assert record["timed_moves"]["black"] >= 7  # 6 stones and a pass
        game = sgf.Sgf_game.from_bytes((out / record["sgf"]).read_bytes())
        root = game.get_root()
        assert game.get_size() == 9 and root.get("KM") == 7.5 and root.get("RE") == record["result"]
        assert {root.get("PB"), root.get("PW")} == {"Alpha 1.0", "Beta 1.0"}
        moves = [node.get_move() for node in game.get_main_sequence()[1:]]
        assert len(moves) == record["moves"] and moves[-1][1] is None and moves[-2][1] is None
        assert game.get_main_sequence()[1].get("C").endswith(" s")  # the time of each move
    config = json.loads((out / "config.json").read_text())
    assert config["names"] == ["Alpha 1.0", "Beta 1.0"] and config["size"] == 9
    assert "Alpha 1.0 vs Beta 1.0" in printed and "win rate" in printed and "ms/move" in printed


def test_move_limit_and_tromp_taylor_scoring(tmp_path):
    out = tmp_path / "m"
    run(out, f"{FAKE} --moves 50", f"{FAKE} --moves 50 --score B+999", games=1,
        extra=("--max-moves", "10", "--scoring", "tromp-taylor"))
    (record,) = results(out)
    assert record["moves"] == 10 and record["reason"] == "move limit 10; scored by tromp-taylor"
    assert record["scores"]["white_engine"] == "B+999"
    assert parse_score(record["result"]) == record["scores"]["tromp_taylor"]


def test_engines_that_disagree_fall_back_to_the_referee(tmp_path):
    out = tmp_path / "m"
    run(out, f"{FAKE} --score B+5", f"{FAKE} --score W+5", games=1, extra=("--referee", f"{FAKE} --score W+0.5",
                                                                         "--scoring", "engines"))
    (record,) = results(out)
    assert record["result"] == "W+0.5" and record["disagreement"]
    assert record["reason"].endswith("scored by referee (engines disagree)")
    assert record["scores"]["referee"] == "W+0.5"


# -- faults end the game, the match goes on ---------------------------------------------------------------------


@pytest.mark.parametrize("option, kind", [("--crash-at 2", "crash"), ("--malformed-at 2", "malformed"),
                                          ("--bad-vertex-at 2", "malformed"), ("--wrong-id-at 2", "malformed"),
                                          ("--illegal-at 3", "illegal")])
def test_faults_forfeit_and_the_match_goes_on(tmp_path, capsys, option, kind):
    out = tmp_path / "m"
    run(out, f"{FAKE} {option}", FAKE)
    records = results(out)
    assert len(records) == 2
    for record in records:
        faulty = "B" if record["black"] == 0 else "W"
        winner = "W" if faulty == "B" else "B"
        assert record["fault"]["engine"] == 0 and record["fault"]["kind"] == kind
        assert record["winner"] == winner and record["result"] == f"{winner}+F"
        sgf.Sgf_game.from_bytes((out / record["sgf"]).read_bytes())  # still a readable game
    if kind == "illegal":
        assert "is illegal (occupied); opponent also refused it" in records[0]["reason"]
    table = capsys.readouterr().out.split("ms/move")[1]
    row = next(line for line in table.splitlines() if line.startswith("Fake 1.0 [0]"))
    assert row.split()[4 + ["illegal", "crash", "hang", "malformed"].index(kind)] == "2"


def test_hang_is_a_forfeit_after_the_move_timeout(tmp_path):
    out = tmp_path / "m"
    run(out, FAKE, f"{FAKE} --hang-at 1", games=1, extra=("--move-timeout", "0.5"))
    (record,) = results(out)
    assert record["fault"]["kind"] == "hang" and record["result"] == "B+F"
    # The referee gave up after the 0.5 s move timeout, not after its untimed default of 60 s (or never).
    waited = re.fullmatch(r"no reply to genmove white in (\d+\.\d) s", record["fault"]["detail"])
    assert waited and float(waited.group(1)) < 60, record["fault"]


def test_resign(tmp_path):
    out = tmp_path / "m"
    run(out, f"{FAKE} --resign-at 2", FAKE, games=1)
    (record,) = results(out)
    assert record["result"] == "W+R" and record["reason"] == "black resigned" and record["fault"] is None


def test_opponent_refusing_a_legal_move_voids_the_game(tmp_path, capsys):
    out = tmp_path / "m"
    run(out, FAKE, f"{FAKE} --refuse-play", games=1)
    (record,) = results(out)
    assert record["winner"] is None and record["result"] == "Void" and record["disagreement"]
    assert "void (no result): 1" in capsys.readouterr().out


# -- time --------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_slow_engine_loses_on_time_and_is_told_its_clock(tmp_path):
    out = tmp_path / "m"
    run(out, f"{FAKE} --slow 0.3", FAKE, games=1,
        extra=("--time-system", "absolute", "--main-time", "1", "--grace", "0.1"))
    (record,) = results(out)
    assert record["result"] == "W+T" and record["fault"]["kind"] == "time"
    assert 3 <= record["timed_moves"]["black"] <= 4
    log = (out / "logs" / "engine0-w0.log").read_text()
    assert "time_settings 1 0 0" in log and "time_left black 1 0" in log and "time_left black 0 0" in log
    game = sgf.Sgf_game.from_bytes((out / record["sgf"]).read_bytes())
    assert game.get_root().get("TM") == 1
    assert 0 < game.get_main_sequence()[1].get("BL") < 1


@pytest.mark.slow  # a few seconds: the quick suite stays under 3 minutes
def test_an_untimed_engine_plays_past_the_clock_and_is_told_none(tmp_path):
    """GNU Go at a fixed level in a timed match: --untimed spares it the clock the other side plays on."""
    out = tmp_path / "m"
    run(out, f"{FAKE} --slow 0.3", FAKE, games=1,
        extra=("--time-system", "absolute", "--main-time", "1", "--grace", "0.1", "--untimed", "0"))
    (record,) = results(out)
    assert record["fault"] is None and record["timed_moves"]["black"] >= 7  # 2.1 s and more on a 1 s clock
    untimed, timed = ((out / "logs" / f"engine{i}-w0.log").read_text() for i in (0, 1))
    assert "time_settings" not in untimed and "time_left" not in untimed
    assert "time_settings 1 0 0" in timed and "time_left white" in timed
    assert json.loads((out / "config.json").read_text())["untimed"] == [0]


def test_untimed_names_an_engine_that_exists(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path / "m"), "--untimed", "2", FAKE, FAKE])
    assert "--untimed 2: engines are numbered 0 to 1" in capsys.readouterr().err


@pytest.mark.slow  # a few seconds: the quick suite stays under 3 minutes
def test_engine_silent_past_its_clock_loses_on_time(tmp_path):
    out = tmp_path / "m"
    run(out, FAKE, f"{FAKE} --slow 5", games=1,
        extra=("--time-system", "canadian", "--main-time", "0", "--period-time", "1", "--stones", "5",
               "--grace", "0.2"))
    (record,) = results(out)
    # "no move after": the referee stopped waiting at the clock's limit (1 s and the 0.2 s grace); a reply it had
    # waited 5 s for would read "move took 5.00 s".
    assert record["result"] == "B+T" and re.search(r"no move after \d+\.\d s, clock had 1\.0 s", record["reason"])


def test_clocks():
    absolute = Clock(TimeControl(ABSOLUTE, main_s=10, grace_s=0.5))
    assert absolute.spend(6) and absolute.limit_s() == 4 and absolute.time_left_args() == (4, 0)
    assert absolute.spend(4.4) and not Clock(TimeControl(ABSOLUTE, main_s=1, grace_s=0.5)).spend(1.6)

    canadian = Clock(TimeControl(CANADIAN, main_s=5, period_s=10, stones=2, grace_s=0))
    assert canadian.limit_s() == 15
    assert canadian.spend(7)  # 5 s of main time, then 2 s of the first period
    assert canadian.overtime and canadian.time_left_args() == (8, 1)
    assert canadian.spend(8) and canadian.time_left_args() == (10, 2)  # two stones played: the period resets
    assert not canadian.spend(10.5)

    byoyomi = Clock(TimeControl(BYOYOMI, main_s=0, period_s=5, periods=3, grace_s=0))
    assert byoyomi.limit_s() == 15
    assert byoyomi.spend(4) and byoyomi.time_left_args() == (5, 3)  # within one period: nothing used
    assert byoyomi.spend(7) and byoyomi.time_left_args() == (5, 2)  # outlasted one period
    assert byoyomi.spend(9.9) and byoyomi.time_left_args() == (5, 1)
    assert not byoyomi.spend(5.1)


def test_the_grace_is_forgiven_once_not_on_every_move():
    """A side at zero that keeps playing 0.3 s moves loses once they add up past the grace (a 9x9 match saw
    Tabula play 15 moves at WL[0] unflagged when each move had a grace of its own)."""
    absolute = Clock(TimeControl(ABSOLUTE, main_s=1, grace_s=0.5))
    assert absolute.spend(1.0) and absolute.time_left_args() == (0, 0)
    assert absolute.spend(0.3) and absolute.time_left_args() == (0, 0) and absolute.sgf_left() == (0.0, None)
    assert not absolute.spend(0.3)

    canadian = Clock(TimeControl(CANADIAN, main_s=0, period_s=1, stones=5, grace_s=0.5))
    assert canadian.spend(1.2) and canadian.time_left_args() == (0, 4)  # 0.2 s over, within the grace
    assert not canadian.spend(0.4)  # the same period: 0.6 s over in all


def test_byoyomi_uses_kgs_time_settings_where_known(tmp_path):
    out = tmp_path / "m"
    run(out, FAKE, f"{FAKE} --no-kgs", games=1,
        extra=("--time-system", "byoyomi", "--main-time", "60", "--period-time", "10", "--periods", "3"))
    assert "kgs-time_settings byoyomi 60 10 3" in (out / "logs" / "engine0-w0.log").read_text()
    assert "time_settings 60 10 1" in (out / "logs" / "engine1-w0.log").read_text()
    (record,) = results(out)
    assert record["fault"] is None


# -- resume, parallel, handicap, round robin --------------------------------------------------------------------


@pytest.mark.slow
def test_resume_skips_finished_games_and_survives_a_torn_line(tmp_path, capsys):
    out = tmp_path / "m"
    engines = (f"{FAKE} --seed 3", f"{FAKE} --seed 4")
    run(out, *engines, games=2)
    first = results(out)
    with open(out / "results.jsonl", "a") as handle:
        handle.write('{"game": "0-1-0002", "tor')  # the runner died while writing
    capsys.readouterr()
    run(out, *engines, games=4)
    assert "resuming: 2 games already played, 2 to play" in capsys.readouterr().out
    records = results(out)
    assert [r["game"] for r in records] == ["0-1-0000", "0-1-0001", "0-1-0002", "0-1-0003"]
    assert records[:2] == first
    assert main(["--out", str(out), "--summary"]) == 0
    assert "4 games" in capsys.readouterr().out


def test_a_kept_match_with_compressed_results_summarises_and_resumes(tmp_path, capsys):
    """docs/matches keeps results.jsonl xz-compressed: --summary reads it, and a resumed match plays only the games
    it lacks, appending plain lines beside it."""
    import lzma

    out = tmp_path / "m"
    engines = (f"{FAKE} --seed 3", f"{FAKE} --seed 4")
    run(out, *engines, games=2)
    first = results(out)
    plain = out / "results.jsonl"
    (out / "results.jsonl.xz").write_bytes(lzma.compress(plain.read_bytes()))
    plain.unlink()
    assert results(out) == first
    capsys.readouterr()
    assert main(["--out", str(out), "--summary"]) == 0
    assert "2 games" in capsys.readouterr().out
    run(out, *engines, games=3)
    assert "resuming: 2 games already played, 1 to play" in capsys.readouterr().out
    assert [r["game"] for r in results(out)] == ["0-1-0000", "0-1-0001", "0-1-0002"]
    assert [json.loads(line)["game"] for line in plain.read_text().splitlines()] == ["0-1-0002"]


def test_a_damaged_compressed_results_file_gives_its_whole_lines_with_a_warning(tmp_path, capsys):
    import lzma

    from tabula.tools.compete.results import read_jsonl_text

    lines = [json.dumps({"game": f"0-1-{i:04d}", "result": "B+R", "note": os.urandom(40).hex()}) for i in range(300)]
    whole = "".join(line + "\n" for line in lines)
    path = tmp_path / "results.jsonl"
    packed = lzma.compress(whole.encode())
    (tmp_path / "results.jsonl.xz").write_bytes(packed[: len(packed) // 2])  # cut short
    text = read_jsonl_text(path)
    kept = text.count("\n")
    assert 0 < kept < 300 and whole.startswith(text)  # whole lines, the first ones
    assert "not a whole xz file" in capsys.readouterr().err
    assert [r["game"] for r in read_results(path)] == [f"0-1-{i:04d}" for i in range(kept)]
    (tmp_path / "results.jsonl.xz").write_bytes(b"not xz at all")  # and the plain lines beside it still count
    path.write_text(lines[0] + "\n")
    assert read_jsonl_text(path) == lines[0] + "\n" and "not a whole xz file" in capsys.readouterr().err
    (tmp_path / "results.jsonl.xz").write_bytes(packed)  # xz -dk keeps both: read once, not twice
    path.write_text(whole)
    assert read_jsonl_text(path) == whole and capsys.readouterr().err == ""
    path.write_text(lines[0] + "\n")  # a kept match resumed: its new lines after the compressed ones
    assert read_jsonl_text(path) == whole + lines[0] + "\n"


def test_resume_refuses_a_different_match(tmp_path):
    out = tmp_path / "m"
    run(out, FAKE, FAKE, games=1)
    with pytest.raises(SystemExit):
        run(out, FAKE, FAKE, games=1, extra=("--komi", "6.5"))


@pytest.mark.slow  # a few seconds: the quick suite stays under 3 minutes
def test_killed_runner_resumes_without_duplicates(tmp_path):
    out = tmp_path / "m"
    command = [sys.executable, "-m", "tabula.tools.compete.match", "--out", str(out), "--games", "4", "--size", "9",
               "--names", "A", "B", "--", f"{FAKE} --slow 0.05", FAKE]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    runner = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(read_results(out / "results.jsonl")) < 2:
            time.sleep(0.05)
    finally:
        runner.send_signal(signal.SIGKILL)
        runner.wait()
    played = len(read_results(out / "results.jsonl"))
    assert 2 <= played < 4
    finished = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert finished.returncode == 0, finished.stderr
    assert f"resuming: {played} games already played" in finished.stdout
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    assert sorted(r["game"] for r in lines) == [f"0-1-{k:04d}" for k in range(4)]


def start_after_a_game(out: Path, games: int = 50) -> subprocess.Popen:
    """`tabula match` of ``games`` games in its own process, returned once its first game is recorded."""
    command = [sys.executable, "-m", "tabula.tools.compete.match", "--out", str(out), "--games", str(games),
               "--size", "9", "--names", "A", "B", "--", f"{FAKE} --slow 0.05", FAKE]
    runner = subprocess.Popen(command, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not read_results(out / "results.jsonl"):
        time.sleep(0.05)
    return runner


def test_sigterm_stops_cleanly(tmp_path):
    out = tmp_path / "m"
    runner = start_after_a_game(out)
    runner.send_signal(signal.SIGTERM)
    stdout, stderr = runner.communicate(timeout=20)
    assert runner.returncode == 130 and "rerun the same command to resume" in stderr
    assert "win rate" in stdout
    assert all(r["result"] != "Void" for r in read_results(out / "results.jsonl"))


@pytest.mark.slow
def test_max_minutes_starts_no_game_after_it_and_a_rerun_resumes(tmp_path, capsys):
    out = tmp_path / "m"
    # a game takes over 0.4 s (black's 7 genmoves of 0.06 s), so none starts after the first's 0.3 s have passed
    assert run(out, f"{FAKE} --slow 0.06", FAKE, games=3, extra=("--max-minutes", "0.005")) == GAMES_LEFT
    assert len(results(out)) == 1
    assert "--max-minutes are up: no game started after it, 2 left; rerun the same command" in capsys.readouterr().out
    assert run(out, f"{FAKE} --slow 0.06", FAKE, games=3) == 0
    assert [r["game"] for r in results(out)] == ["0-1-0000", "0-1-0001", "0-1-0002"]
    for bad in ("-1", "nan"):
        with pytest.raises(SystemExit):
            run(tmp_path / "bad", FAKE, FAKE, extra=("--max-minutes", bad))
    assert not (tmp_path / "bad").exists()  # refused before anything is written


def test_wind_down_lets_the_games_in_flight_finish(tmp_path):
    out = tmp_path / "m"
    config = config_from_args(build_parser().parse_args(
        ["--out", str(out), "--games", "4", "--size", "9", "--parallel", "2", f"{FAKE} --slow 0.05", FAKE,
         "--names", "A", "B"]))
    wind_down = threading.Event()
    lines = []

    def progress(line: str) -> None:
        lines.append(line)
        if line.startswith("0-1-0001:") and line.endswith("starts"):
            wind_down.set()  # both workers have a game in flight, neither has finished

    records = run_match(config, progress=progress, wind_down=wind_down)
    assert len(records) == 2 and all(r["fault"] is None and r["result"] != "Void" for r in records)
    assert lines[-1] == "told to wind down: no game started after it, 2 left; rerun the same command to resume"


@pytest.mark.slow
def test_sigusr1_finishes_the_games_in_flight_and_exits_cleanly(tmp_path):
    out = tmp_path / "m"
    runner = start_after_a_game(out)
    runner.send_signal(signal.SIGUSR1)
    stdout, stderr = runner.communicate(timeout=30)
    assert runner.returncode == GAMES_LEFT, stderr
    played = read_results(out / "results.jsonl")
    assert 1 <= len(played) < 50 and all(r["result"] != "Void" for r in played)
    assert "SIGUSR1: the games in flight finish" in stdout and f"{50 - len(played)} left" in stdout


def test_parallel_games_each_worker_owns_its_engines(tmp_path):
    out = tmp_path / "m"
    run(out, f"{FAKE} --slow 0.02", FAKE, games=4, extra=("--parallel", "2"))
    assert len(results(out)) == 4
    logs = {path.name for path in (out / "logs").iterdir()}
    assert {"engine0-w0.log", "engine0-w1.log", "engine1-w0.log", "engine1-w1.log"} <= logs


@pytest.mark.parametrize("mode", ["fixed", "free"])
def test_handicap(tmp_path, mode):
    out = tmp_path / "m"
    run(out, FAKE, FAKE, games=1, extra=("--handicap", "3", "--handicap-mode", mode, "--komi", "0.5"))
    (record,) = results(out)
    assert record["handicap"] == 3 and record["fault"] is None
    game = sgf.Sgf_game.from_bytes((out / record["sgf"]).read_bytes())
    root = game.get_root()
    assert root.get("HA") == 3 and len(root.get("AB")) == 3
    assert game.get_main_sequence()[1].get_move()[0] == "w"  # white moves first after the handicap


@pytest.mark.slow
def test_round_robin_with_ratings(tmp_path, capsys):
    out = tmp_path / "m"
    engines = [f"{FAKE} --name A", f"{FAKE} --name B --seed 5", f"{FAKE} --name C --seed 9"]
    main(["--out", str(out), "--games", "2", "--size", "9", "--engines", *engines, "--anchor", "C 1.0=1000"])
    printed = capsys.readouterr().out
    assert len(results(out)) == 6
    assert "C 1.0 fixed at 1000" in printed and "rank" in printed


def test_gauntlet_schedule():
    config = MatchConfig(engines=("a", "b", "c"), out="x", games=3, gauntlet=True)
    specs = schedule(config)
    assert [s.pair for s in specs] == [(0, 1), (0, 2)] * 3
    assert [(s.black, s.white) for s in specs[:4]] == [(0, 1), (0, 2), (1, 0), (2, 0)]


# -- numbers ---------------------------------------------------------------------------------------------------------


def test_parse_score():
    assert parse_score("B+3.5") == 3.5 and parse_score("W+12") == -12 and parse_score("0") == 0
    assert parse_score("w+0.5 (some comment)") == -0.5
    assert parse_score("B+R") is None and parse_score("") is None and parse_score(None) is None


def test_summary_numbers():
    config = MatchConfig(engines=("a", "b"), out="x", names=("A", "B"))
    def game(number: int, black: int, winner: str | None, result: str, fault=None) -> dict:
        return {"game": f"0-1-{number:04d}", "pair": [0, 1], "black": black, "white": 1 - black,
                "winner": winner, "result": result, "fault": fault, "disagreement": False,
                "time_s": {"black": 2.0, "white": 1.0}, "timed_moves": {"black": 10, "white": 10},
                "max_move_s": {"black": 0.5, "white": 0.2}}
    records = [game(0, 0, "B", "B+3.5"), game(1, 1, "W", "W+R"), game(2, 0, "W", "W+2.5"),
               game(3, 1, "B", "B+F", {"engine": 0, "kind": "illegal"}), game(4, 0, "B", "B+T"),
               game(5, 1, None, "Void")]
    text = summarise(config, records)
    assert "A as black: 2 wins, 1 losses; as white: 1 wins, 1 losses" in text
    assert "A: 3-2 (5 games): win rate 60.0% [23.1, 88.2], Elo +70 [-209, +350]" in text
    assert "void (no result): 1" in text and "black won 3 of 5 decided games" in text
    table = text.split("max s")[1].splitlines()
    row_a = next(line for line in table if line.startswith("A "))
    row_b = next(line for line in table if line.startswith("B "))
    # games, illegal crash hang malformed refused time, resigned, s/move, max s
    assert row_a.split()[1:] == ["6", "1", "0", "0", "0", "0", "0", "0", "150.0", "0.50"]
    assert row_b.split()[1:] == ["6", "0", "0", "0", "0", "0", "0", "1", "150.0", "0.50"]


def test_the_summary_counts_repeated_games():
    """Two deterministic engines replay one game again and again; the summary says how many were different."""
    from tabula.tools.compete.referee import moves_fingerprint
    config = MatchConfig(engines=("a", "b"), out="x", names=("A", "B"))
    first = moves_fingerprint([], [(1, 40), (2, 41)], "B+3.5")
    second = moves_fingerprint([], [(1, 40), (2, 42)], "B+3.5")
    assert first != second and first == moves_fingerprint([], [(1, 40), (2, 41)], "B+3.5")
    def game(number: int, sha1: str) -> dict:
        return {"game": f"0-1-{number:04d}", "pair": [0, 1], "black": 0, "white": 1, "winner": "B",
                "result": "B+3.5", "fault": None, "disagreement": False, "moves_sha1": sha1,
                "time_s": {"black": 1.0, "white": 1.0}, "timed_moves": {"black": 2, "white": 2},
                "max_move_s": {"black": 0.5, "white": 0.5}}
    assert "distinct games" not in summarise(config, [game(0, first), game(1, second)])
    assert "distinct games: 2 of 4" in summarise(config, [game(0, first), game(1, second), game(2, first),
                                                          game(3, first)])


# -- real engines ----------------------------------------------------------------------------------------------------


@pytest.mark.slow  # a few seconds: the quick suite stays under 3 minutes
def test_gnugo_tiny_match(tmp_path, gnugo, capsys):
    out = tmp_path / "m"
    engines = (f"{gnugo} --mode gtp --level 1", f"{gnugo} --mode gtp --level 2")
    run(out, *engines, games=2, extra=("--max-moves", "120", "--referee", f"{gnugo} --mode gtp --chinese-rules"),
        probe=True)
    records = results(out)
    assert len(records) == 2 and all(r["fault"] is None and r["winner"] for r in records)
    assert all(r["scores"]["referee"] for r in records)
    assert "GNU Go 3.8 [0] vs GNU Go 3.8 [1]" in capsys.readouterr().out


@pytest.mark.slow
def test_tabula_random_against_gnugo(tmp_path, gnugo):
    out = tmp_path / "m"
    # Cut short and counted by our rules: GNU Go's final_score on an unfinished game can take seconds.
    run(out, TABULA, f"{gnugo} --mode gtp --level 1", games=2, probe=True,
        extra=("--max-moves", "20", "--scoring", "tromp-taylor", "--no-engine-scores"))
    records = results(out)
    assert len(records) == 2 and all(r["fault"] is None for r in records), records
    assert records[0]["black_name"].startswith("Tabula")


# -- settings files ---------------------------------------------------------------------------------------------


def test_a_set_of_a_settings_file_plays_as_its_options_with_the_command_lines_on_top(tmp_path, capsys):
    settings = tmp_path / "mine.json"
    settings.write_text(json.dumps({"sets": {"quick": {
        "about": "two fake engines", "games": 5, "size": 9, "fixed-colors": True, "engine-scores": False,
        "names": ["a", "b"], "engines": [f"{{python}} {ROOT / 'tests' / 'fake_gtp_engine.py'} --seed 1",
                                         f"{{python}} {ROOT / 'tests' / 'fake_gtp_engine.py'} --seed 2"]}}}))
    assert main(["--settings", str(settings)]) == 0
    assert "quick          two fake engines" in capsys.readouterr().out
    out = tmp_path / "q"
    assert main(["--settings", str(settings), "--set", "quick", "--games", "1", "--out", str(out)]) == 0
    records = results(out)
    assert len(records) == 1 and records[0]["black"] == 0
    config = json.loads((out / "config.json").read_text())
    assert config["fixed_colors"] and not config["engine_scores"] and config["engines"][0].startswith(sys.executable)


@pytest.mark.parametrize("argv, message", [
    (["--settings", "no-such-set-file"], "no settings file 'no-such-set-file'"),
    (["--settings", "strength", "--set", "even7"], "no set 'even7'"),
    (["--set", "even9"], "--set needs --settings"),
])
def test_settings_errors_are_one_line(argv, message, capsys):
    with pytest.raises(SystemExit):
        main(argv)
    assert message in capsys.readouterr().err


def test_the_shipped_settings_files_name_only_options_that_exist():
    from tabula.tools.compete.match import SETS_DIR, build_parser, load_sets, settings_argv

    parser = build_parser()
    files = sorted(SETS_DIR.glob("*.json"))
    assert [f.stem for f in files] == ["resign", "strength"]
    for path in files:
        for name, options in load_sets(path).items():
            args = parser.parse_args(["--out", "x"] + settings_argv(parser, options))
            assert len(args.engines) == 2 and options["about"], (path, name)


def test_settings_placeholders_survive_paths_with_spaces(tmp_path, monkeypatch):
    import shlex
    import sys

    from tabula.tools.compete.match import build_parser, settings_argv

    folder = tmp_path / "my games"
    folder.mkdir()
    gnugo = folder / "gnugo"
    gnugo.write_text("#!/bin/sh\n")
    gnugo.chmod(0o755)
    monkeypatch.setenv("PATH", str(folder))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "my python" / "python3"))
    parser = build_parser()
    args = parser.parse_args(["--out", "x"] + settings_argv(parser, {"engines": ["{gnugo} --mode gtp",
                                                                                   "{python} -m tabula.gtp"]}))
    # the engines' command lines are split as a shell would (gtp_client): each path stays one word
    assert shlex.split(args.engines[0]) == [str(gnugo), "--mode", "gtp"]
    assert shlex.split(args.engines[1]) == [sys.executable, "-m", "tabula.gtp"]


def test_the_weights_placeholder_names_a_shipped_network_from_any_folder(tmp_path, monkeypatch):
    import shlex

    from tabula.tools.compete.match import settings_argv

    monkeypatch.chdir(tmp_path)
    parser = build_parser()
    args = parser.parse_args(["--out", "x"] + settings_argv(parser, {"engines": [
        "{python} -m tabula.gtp --weights {weights}/tabula-6x64-komi-lead-int8.onnx"]}))
    assert Path(shlex.split(args.engines[0])[-1]).is_file()


def test_the_sets_placeholder_names_a_shipped_opening_book_as_a_plain_path(tmp_path, monkeypatch):
    from tabula.tools.compete.match import SETS_DIR, load_sets, read_openings, settings_argv

    monkeypatch.chdir(tmp_path)
    parser = build_parser()
    options = load_sets(SETS_DIR / "strength.json")["vs-komi-lead9"]
    args = parser.parse_args(["--out", "x"] + settings_argv(parser, options))
    assert args.openings == str(SETS_DIR / "book9.txt")  # a file option: not shell-quoted
    lines = read_openings(args.openings, 9, 7.5, 0, "fixed")
    assert len(lines) == 50 and len(set(lines)) == 50 and all(len(line.split()) == 4 for line in lines)


# -- openings -------------------------------------------------------------------------------------------------------


def test_openings_are_played_out_once_with_each_colour(tmp_path):
    book = tmp_path / "openings.txt"
    book.write_text("# balanced lines\nE5 C3\n\nc7, g3 E3  # a comment\n")
    out = tmp_path / "m"
    run(out, f"{FAKE} --seed 1", f"{FAKE} --seed 2", games=4, extra=("--openings", str(book)))
    records = results(out)
    assert [r["opening"] for r in records] == [0, 0, 1, 1]
    assert [(r["black"], r["white"]) for r in records] == [(0, 1), (1, 0), (0, 1), (1, 0)]
    assert json.loads((out / "config.json").read_text())["openings"] == ["E5 C3", "C7 G3 E3"]
    for record, line in zip(records, (["e5", "c3"], ["e5", "c3"], ["c7", "g3", "e3"], ["c7", "g3", "e3"])):
        assert record["fault"] is None and record["winner"] in ("B", "W")
        sequence = sgf.Sgf_game.from_bytes((out / record["sgf"]).read_bytes()).get_main_sequence()[1:]
        colours = [node.get_move()[0] for node in sequence[:len(line)]]
        assert colours == ["bw"[i % 2] for i in range(len(line))]
        assert [node.get("C") for node in sequence[:len(line)]] == ["opening"] * len(line)
        assert sequence[len(line)].get("C").endswith(" s")  # the engines' own moves after it
        assert record["timed_moves"]["black"] + record["timed_moves"]["white"] == record["moves"] - len(line)


@pytest.mark.parametrize("text, message", [
    ("E5 E5\n", "line 1: white E5 is illegal"), ("E5 Z9\n", "'Z9' is not a vertex"),
    ("E5 pass\n", "no pass or resign"), ("# nothing\n", "no opening lines")])
def test_bad_openings_are_refused_before_any_game(tmp_path, capsys, text, message):
    book = tmp_path / "openings.txt"
    book.write_text(text)
    with pytest.raises(SystemExit):
        run(tmp_path / "m", FAKE, FAKE, games=2, extra=("--openings", str(book)))
    assert message in capsys.readouterr().err
    assert not (tmp_path / "m" / "results.jsonl").exists()
