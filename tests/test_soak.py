"""The CI-sized versions of the soak and time-control runs of docs/RELIABILITY.md: Tabula's search with the
shipped 9x9 network against GNU Go, through `tools.check.soak` (faults, leaked processes, memory per game) and under a
clock it must never overrun."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tabula.tools.check import soak
from tabula.tools.compete.results import read_results

# Minutes of real work (whole runs, killed processes, long matches): CI runs it, `python3 -m pytest` leaves it out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable  # the interpreter running the tests (a virtual environment's), not whatever python3 is
TABULA = f"{PYTHON} -m tabula.gtp --visits 16 --threads 1"


@pytest.fixture(autouse=True)
def repo_on_path(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.chdir(ROOT)


def test_small_soak_passes_and_reports_memory(tmp_path, gnugo, capsys):
    out = tmp_path / "soak"
    status = soak.main(["--", "--out", str(out), "--games", "4", "--size", "9", "--parallel", "2",
                        "--referee", f"{gnugo} --mode gtp --chinese-rules", "--names", "tabula", "gnugo-1",
                        "--engines", TABULA, f"{gnugo} --mode gtp --level 1"])
    text = capsys.readouterr().out
    assert status == 0, text
    assert "4 games recorded of 4 scheduled (4 distinct)" in text and text.rstrip().endswith("PASS")
    assert "games ended by a fault (illegal move, crash, hang, bad reply, time): 0" in text
    assert "engine processes alive after the match: 0" in text
    records = read_results(out / "results.jsonl")
    tabula_memory = [r["memory_mb"]["black" if r["black"] == 0 else "white"] for r in records]
    assert all(20 < m["rss"] <= m["peak"] < 2000 for m in tabula_memory), tabula_memory
    assert len({r["pid"]["black" if r["black"] == 0 else "white"] for r in records}) == 2  # one per worker


def test_summary_fails_on_a_fault_and_names_the_game(tmp_path, capsys):
    out = tmp_path / "soak"
    out.mkdir()
    config = {"engines": ["a", "b"], "out": str(out), "names": ["a", "b"], "games": 2, "size": 9, "komi": 7.5,
              "handicap": 0, "handicap_mode": "fixed", "max_moves": 0,
              "time": {"system": "none", "main_s": 0.0, "period_s": 0.0, "stones": 0, "periods": 0, "grace_s": 0.5},
              "move_timeout_s": 0.0, "command_timeout_s": 30.0, "startup_timeout_s": 120.0, "scoring": "engines",
              "referee": "", "engine_scores": True, "superko": "positional", "parallel": 1, "gauntlet": False,
              "fixed_colors": False, "anchor": ""}
    (out / "config.json").write_text(json.dumps(config))
    base = {"pair": [0, 1], "round": 0, "moves": 10, "pid": {"black": None, "white": None},
            "memory_mb": {"black": {"rss": 50.0, "peak": 60.0}, "white": None}, "finished": "2026-11-22T00:00:00"}
    lines = [dict(base, game="0-1-0000", black=0, white=1, reason="two passes", fault=None),
             dict(base, game="0-1-0001", black=1, white=0, reason="illegal move", fault={"engine": 1})]
    (out / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert soak.main(["--summary", "--out", str(out)]) == 1
    text = capsys.readouterr().out
    assert "0-1-0001: illegal move" in text and text.rstrip().endswith("FAIL")


@pytest.mark.parametrize("clock", [
    ("--time-system", "absolute", "--main-time", "6"),
    ("--time-system", "byoyomi", "--main-time", "2", "--period-time", "1", "--periods", "3"),
    ("--time-system", "canadian", "--main-time", "2", "--period-time", "3", "--stones", "5"),
])
def test_no_loss_on_time_against_gnugo(tmp_path, gnugo, clock, capsys):
    # No visit limit: the search spends what the clock allows, so the time manager is what is tested.
    out = tmp_path / "time"
    status = soak.main(["--", "--out", str(out), "--games", "1", "--size", "9", "--parallel", "1",
                        "--max-moves", "40", "--scoring", "tromp-taylor", "--no-engine-scores", *clock,
                        "--names", "tabula", "gnugo-1",
                        "--engines", f"{PYTHON} -m tabula.gtp --visits 0 --threads 1", f"{gnugo} --mode gtp --level 1"])
    records = read_results(out / "results.jsonl")
    assert status == 0 and len(records) == 1
    assert all(r["fault"] is None and "time" not in r["reason"] for r in records), records
    for record in records:
        side = "black" if record["black"] == 0 else "white"
        assert record["timed_moves"][side] > 10  # it played on, and used its clock
    text = capsys.readouterr().out
    assert f"clock ({clock[1]}) of engine 0:" in text and "losses on time of engine 0: 0" in text
