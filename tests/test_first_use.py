"""What a new user meets first: `tabula --version`, `tabula gtp --help` grouped with every default, one stderr line
per move (the candidates at --verbose), and `tabula match` saying where its games go and how a game goes."""
from __future__ import annotations

from tabula.tools import cli


def test_version(capsys) -> None:
    assert cli.main(["--version"]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("tabula ") and out.split()[1][0].isdigit()
    assert "--version" in cli.usage()


def test_gtp_help_is_grouped_and_states_every_default(capsys) -> None:
    import pytest

    from tabula.gtp.__main__ import GROUPS, parse_args

    with pytest.raises(SystemExit):
        parse_args(["--help"])
    text = capsys.readouterr().out
    titles = [line[:-1] for line in text.splitlines() if line.endswith(":") and not line.startswith(" ")]
    assert titles[-len(GROUPS):] == list(GROUPS)
    options = text[text.index("playing:"):].split("\n  -")[1:]
    assert len(options) > 35
    undefaulted = [o.split()[0] for o in options if "default" not in o.lower()]
    assert undefaulted == [], undefaulted


def test_one_stderr_line_a_move_and_the_candidates_at_verbose(caplog) -> None:
    import logging

    import numpy as np

    from tabula.engine.config import SearchConfig
    from tabula.engine.net.evaluator import UniformEvaluator
    from tabula.engine.play.search_player import SearchPicker
    from tabula.engine.rules.game import GameState

    player = SearchPicker(UniformEvaluator(), SearchConfig(threads=1, visits=30), rng=np.random.default_rng(0))
    with caplog.at_level(logging.INFO, logger="tabula.search"):
        player.pick(GameState(5))
    [line] = caplog.text.strip().splitlines()
    assert "move 1:" in line and "after" in line and "winrate" in line
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="tabula.search"):
        player.pick(GameState(5))
    lines = [line for line in caplog.text.strip().splitlines() if "no full count" not in line]
    assert len(lines) > 2 and "visits" in lines[1] and "pv" in lines[1]


def test_match_reports_a_games_progress_every_few_seconds() -> None:
    from types import SimpleNamespace

    from tabula.tools.compete import match

    now = [0.0]
    lines: list[str] = []
    report = match._progress_reporter("0-1-0003", lines.append, clock=lambda: now[0])
    game = SimpleNamespace(log=[])
    for move in range(30):
        game.log.append((1 + move % 2, 0, 0.5, None, None))
        now[0] += 1.0
        report(game)
    assert len(lines) == 3 and lines[0] == "  0-1-0003: move 10, black 2 s, white 2 s"
