"""tabula resign: resignation calibrated from matches played with resignation off, per size, even and handicap."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tabula.engine.play.decision import resign_threshold_factor
from tabula.engine.rules.coords import BLACK, WHITE
from tabula.tools.compete.resign_calibration import main, played_games, trigger
from tabula.tools.compete.search_log import SearchedMove, read_log

NETWORK_LINE = "tabula: network tabula-6x64-anysize-int8.onnx (6x64 pooled, 2-25, int8) on CPUExecutionProvider\n"


def searched(number: int, vertex: str, winrate: float, best: str = "") -> str:
    """A search's log lines as tabula gtp writes them; ``best``: another candidate listed first."""
    lines = [f"tabula.search: move {number}: {vertex} after 100 playouts (100 visits, 0 reused) in 0.10 s, "
             f"1000 playouts/s, batch 7.0, cache hits 0, nodes 100"]
    if best:
        lines.append(f"     {best}     60 visits  {100 * winrate + 5:5.1f}% (lcb  50.0%) prior  10.0%  pv {best}")
    lines.append(f"     {vertex}     40 visits  {100 * winrate:5.1f}% (lcb  50.0%) prior  10.0%  pv {vertex}")
    return "\n".join(lines) + "\n"


def write_match(out: Path, games: list[tuple[str, list[float], str]], size: int = 9, handicap: int = 0,
                first: int = 0) -> Path:
    """A match of a Tabula engine (engine 0, black in every game) and another engine. ``games``: (name, engine 0's
    winrate for each of its moves, result); ``first``: the index of the first game (each game's moves differ)."""
    (out / "games").mkdir(parents=True)
    (out / "logs").mkdir()
    log, results = NETWORK_LINE, []
    for g, (name, winrates, result) in enumerate(games):
        points = [(i + 3 * (g + first)) % (size * size) for i in range(2 * len(winrates))]  # each game's own moves
        moves = "".join(f";{'B' if i % 2 == 0 else 'W'}[{chr(97 + p % size)}{chr(97 + p // size)}]"
                        for i, p in enumerate(points))
        (out / "games" / f"{name}.sgf").write_text(f"(;FF[4]GM[1]SZ[{size}]KM[7.5]RE[{result}]{moves})")
        for k, winrate in enumerate(winrates):
            vertex = "ABCDEFGHJKLMNOPQRST"[points[2 * k] % size] + str(size - points[2 * k] // size)
            log += searched(2 * k + 1, vertex, winrate)
        log += NETWORK_LINE  # the next game's engine starts again
        results.append({"game": name, "black": 0, "white": 1, "winner": result[0], "result": result,
                        "handicap": handicap, "fault": None})
    (out / "logs" / "engine0-w0.log").write_text(log)
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results))
    (out / "config.json").write_text(json.dumps({"size": size, "engines": ["tabula gtp", "other"]}))
    return out


def test_the_log_gives_each_move_the_winrate_of_the_move_played(tmp_path):
    path = tmp_path / "engine0-w0.log"
    path.write_text(NETWORK_LINE + searched(1, "C3", 0.61, best="D4") + searched(3, "pass", 0.2)
                    + "tabula.search: move 5: E5 after 1 playouts (1 visits, 0 reused) in 0.01 s, x\n")
    [run] = read_log(path)
    assert [(m.move, m.winrate) for m in run] == [("C3", pytest.approx(0.61)), ("pass", pytest.approx(0.2)),
                                                   ("E5", None)]


def test_the_trigger_is_the_lowest_threshold_that_keeps_the_game():
    moves = [SearchedMove(2 * i + 1, "C3", 0, 0.1, w) for i, w in enumerate([0.9, 0.5, 0.2, 0.3, 0.25, 0.6, 0.1])]
    # the first quarter of 9x9 (20 moves) never judges: only with after=0 do the runs of three count
    assert trigger(moves, 9, 0, BLACK, 3, 0.25) == 1.0
    assert trigger(moves, 9, 0, BLACK, 3, 0.0) == pytest.approx(0.3)  # the run 0.2, 0.3, 0.25
    assert trigger(moves, 9, 0, BLACK, 1, 0.0) == pytest.approx(0.1)


def test_white_in_a_handicap_game_is_judged_against_the_lowered_threshold():
    moves = [SearchedMove(n, "C3", 0, 0.1, 0.1) for n in (2, 4, 6)]
    factors = [resign_threshold_factor(played, 81, 4, WHITE) for played in (1, 3, 5)]
    assert factors[0] < factors[1] < factors[2] < 1  # lowest first: the run's judged winrate is 0.1 / factors[0]
    assert trigger(moves, 9, 4, WHITE, 3, 0.0) == pytest.approx(0.1 / factors[0])
    assert trigger(moves, 9, 0, WHITE, 3, 0.0) == pytest.approx(0.1)


def test_the_table_calibrates_from_the_winners_and_counts_the_big_losses_it_resigns(tmp_path, capsys):
    late = [0.5] * 11  # 11 moves of black's: runs judged from move 21 (the 11th of its moves) on
    games = [(f"0-1-{i:04d}", late + [0.9, 0.9, 0.9], "B+5.5") for i in range(18)]
    games += [("0-1-0018", late + [0.08, 0.07, 0.09], "B+0.5"),  # a winner that would resign under 0.09
              ("0-1-0019", late + [0.04, 0.03, 0.03], "W+35.5"),  # a big loss, resigned under 0.04
              ("0-1-0020", late + [0.4, 0.4, 0.4], "W+25.5")]  # a big loss, resigned under 0.4
    out = write_match(tmp_path / "cal-9", games)
    found = played_games(out, 3, 0.25)
    assert len(found) == 21 and sum(g.won for g in found) == 19
    assert main([str(out), "--min-games", "10", "--max-false-positive", "0.1", "--ceiling", "0.5"]) == 0
    table = capsys.readouterr().out.splitlines()
    row = table[1].split()
    assert row[:4] == ["9", "even", "19", "2"]
    # 10% of 19 winners: one may resign; the threshold is the second-lowest trigger, 0.9 capped at the 0.5 ceiling
    assert float(row[-3]) == 0.5 and row[-2] == "5.3%" and row[-1] == "2/2"
    assert table[-1] == "to ship: tabula export --resign-winrate 9:0.5 NET.onnx"
    for ceiling in ("-0.1", "1", "nan"):
        with pytest.raises(SystemExit):
            main([str(out), "--ceiling", ceiling])


def test_a_directory_that_is_no_match_is_a_clear_error(tmp_path, capsys):
    assert main([str(tmp_path)]) == 2
    assert "not a tabula match directory" in capsys.readouterr().err


def test_the_kept_extract_stands_for_the_logs_and_a_resumed_match_adds_its_new_games(tmp_path):
    """search_log --write OUT/searched keeps each searched move's winrate: without the logs (a new machine) the
    calibration reads the same games from it; logs of games played since add to it, and win where both have one."""
    import shutil

    from tabula.tools.compete.search_log import SEARCHED_DIR, assign, read_written, searched_moves, write

    late = [0.5] * 11
    games = [(f"0-1-{i:04d}", late + [w, w, w], "B+5.5" if w > 0.1 else "W+30.5")
             for i, w in enumerate([0.9, 0.3, 0.08, 0.02])]
    out = write_match(tmp_path / "cal-9", games)
    write(searched_moves(out)[0], out / SEARCHED_DIR)  # what search_log OUT --write OUT/searched does
    assert read_written(out / SEARCHED_DIR) == assign(out)[0]  # winrates and all, to the 4 digits written
    before = sorted(played_games(out, 3, 0.25), key=lambda g: g.game)

    shutil.rmtree(out / "logs")  # another machine: the games and the extract, no logs
    assert sorted(played_games(out, 3, 0.25), key=lambda g: g.game) == before
    assert main([str(out), "--min-games", "1"]) == 0

    # resumed there: a new game's log, the earlier games from the extract
    newer = write_match(tmp_path / "newer", [("0-1-0004", late + [0.6, 0.6, 0.6], "B+2.5")], first=4)
    shutil.copytree(newer / "logs", out / "logs")
    shutil.copy(newer / "games" / "0-1-0004.sgf", out / "games")
    with open(out / "results.jsonl", "a") as handle:
        handle.write((newer / "results.jsonl").read_text())
    assigned, _ = searched_moves(out)
    assert sorted(assigned[0]) == [f"0-1-{i:04d}" for i in range(5)]
    assert len(played_games(out, 3, 0.25)) == 5


def test_a_bad_line_in_the_extract_is_a_clear_error(tmp_path):
    from tabula.tools.compete.search_log import read_written

    (tmp_path / "engine0.txt").write_text("0-1-0000 1 D4 100 0.1 0.5\n0-1-0000 three D5\n")
    with pytest.raises(ValueError, match="engine0.txt:2"):
        read_written(tmp_path)


def test_engine_picks_one_network_of_a_match_between_two(tmp_path, capsys):
    """Both engines Tabula's (a new network against the default): --engine NAME calibrates the named one alone;
    without it the two are pooled, with a note; a name the match lacks is a clear error."""
    import shutil

    late = [0.5] * 11
    out = write_match(tmp_path / "two", [(f"0-1-{i:04d}", late + [0.9, 0.9, 0.9], "B+5.5") for i in range(3)])
    shutil.copy(out / "logs" / "engine0-w0.log", out / "logs" / "engine1-w0.log")  # white searched the same way
    config = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps(dict(config, names=["new", "old"], engines=["tabula gtp"] * 2)))
    both = played_games(out, 3, 0.25)
    assert {g.engine for g in both} == {0, 1}
    assert {g.engine for g in played_games(out, 3, 0.25, ["old"])} == {1}
    assert all(g.won for g in played_games(out, 3, 0.25, ["new"]))
    assert {g.engine for g in played_games(out, 3, 0.25, ["new", "tabula"])} == {0}  # names of other matches too
    assert main([str(out), "--min-games", "1", "--engine", "new"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines()[1].split()[:4] == ["9", "even", "3", "0"] and "pooled" not in captured.err
    assert main([str(out), "--min-games", "1"]) == 0
    assert "pooled" in capsys.readouterr().err
    assert main([str(out), "--engine", "gnugo"]) == 2
    assert "no engine named 'gnugo'" in capsys.readouterr().err
    assert main([str(out), "--min-games", "1", "--engine", "new", "--engine", "tabula"]) == 0
