"""`python3 -m tabula.tools.check.handicap_curves`: the handicap sets' win rates read from match directories as
`tabula match` writes them, GNU Go's forfeits counted apart, bad specs refused, and the curves drawn."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tabula.tools.check.handicap_curves import DEFAULT_SETS, main, parse_spec, read_set


def write_match(directory: Path, names: list[str], games: list[tuple[str, str | None]]) -> str:
    """A match directory: the first engine black in every game, each game (winner, fault)."""
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps({"names": names, "handicap": 7}))
    lines = [json.dumps({"game": f"0-1-{i:04d}", "black": 0, "white": 1, "winner": winner, "fault": fault,
                         "handicap": 7}) for i, (winner, fault) in enumerate(games)]
    (directory / "results.jsonl").write_text("\n".join(lines) + "\n" + '{"game": "torn')
    return str(directory)


def test_wins_are_counted_from_the_named_engines_side_with_forfeits_apart(tmp_path):
    directory = write_match(tmp_path / "m", ["gnugo-10", "tabula"],
                            [("W", None), ("B", None), ("W", "crash"), ("B", None), ("W", None)])
    found = read_set("visits", 400, "400", directory)
    assert (found.games, found.won, found.forfeits, found.stones) == (5, 3, 1, 7)
    rate, low, high = found.rate()
    assert rate == pytest.approx(0.6) and low < 0.6 < high
    assert found.rate(without_forfeits=True)[0] == pytest.approx(0.5)
    assert read_set("visits", 400, "400", directory, player="gnugo-10").won == 2
    with pytest.raises(ValueError, match="no engine named"):
        read_set("visits", 400, "400", directory, player="leela")
    assert read_set("visits", 400, "400", str(tmp_path / "absent")) is None


def test_specs_are_checked_and_the_defaults_parse():
    assert parse_spec("visits:1600:1,600 visits:docs/x") == ("visits", 1600.0, "1,600 visits", "docs/x")
    for bad in ("visits:1600:docs/x", "visits:many:label:docs/x", "visits::label:docs/x"):
        with pytest.raises(ValueError):
            parse_spec(bad)
    assert all(parse_spec(spec) for spec in DEFAULT_SETS)


def test_the_command_prints_the_table_draws_the_curves_and_refuses_bad_specs(tmp_path, capsys):
    a = write_match(tmp_path / "a", ["gnugo-10", "tabula"], [("W", None), ("B", None)])
    b = write_match(tmp_path / "b", ["gnugo-10", "tabula"], [("W", None), ("W", None), ("B", None)])
    out = tmp_path / "curves.png"
    assert main([f"visits:400:400 visits:{a}", f"visits:1600:1,600 visits:{b}", f"stones:7:7 stones:{a}",
                 f"visits:100:100 visits:{tmp_path / 'absent'}", "--plot", str(out)]) == 0
    captured = capsys.readouterr()
    assert "| visits | 1,600 visits (b) | 7 | 3 | 2 | 66.7% [" in captured.out
    assert "absent: no results, left out" in captured.err
    assert "7 stones, all 2 sets: 3 of 5, 60.0% [" in captured.out  # a counted once, for all its panels
    assert out.stat().st_size > 1000
    assert main([f"visits:100:100:{tmp_path / 'absent'}"]) == 1
    with pytest.raises(SystemExit):
        main(["visits:x:400:somewhere"])
