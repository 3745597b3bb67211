"""Sabaki's GTP controller (@sabaki/gtp 3.0.0, in Node) drives `python -m tabula.gtp`: the attach sequence, board sync
with komi before boardsize and pipelined plays, undo to a fork, genmove, error replies and quit (sabaki.js, random
player); and, with the search player on a tiny random network, analysis as Sabaki reads it (sabaki_analysis.js):
``analyze B 10`` and ``lz-analyze 10`` streamed through the library's subscribers and stopped by the next command,
and ``genmove_analyze`` whose ``play`` line Sabaki takes as the move; and, with a tiny network that has score and
ownership heads, KataGo's ``kata-analyze ... ownership true`` and ``kata-genmove_analyze`` (sabaki_kata.js).

Needs node and `npm install` in tests/clients (node_modules is not in git); skipped otherwise.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SCRIPT = HERE / "sabaki.js"
ANALYSIS_SCRIPT = HERE / "sabaki_analysis.js"
PACKAGE = HERE / "node_modules" / "@sabaki" / "gtp" / "package.json"
VISITS = 200  # genmove_analyze's search must outlast a few 2-centisecond reports (50 visits end within 0.1 s)

pytestmark = [
    pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed"),
    pytest.mark.skipif(not PACKAGE.exists(), reason="run `npm install` in tests/clients for @sabaki/gtp"),
    pytest.mark.skipif(not (ROOT / "gtp" / "__main__.py").exists(), reason="no gtp/__main__.py yet"),
]


def run_node(script: Path, *args: str) -> list[str]:
    """Runs a client script from the repository root; returns its "ok ..." lines after checking it passed."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    completed = subprocess.run(["node", str(script), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                               timeout=120)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    lines = completed.stdout.splitlines()
    assert lines and all(line.startswith("ok ") for line in lines), completed.stdout
    return lines


def test_sabaki_controller_drives_tabula():
    lines = run_node(SCRIPT, sys.executable, "-m", "tabula.gtp", "--player", "random")
    assert "ok synced a forked history (undo, then play)" in lines


def test_a_first_genmove_as_sabaki_makes_it():
    """first_genmove.js, the new user's trial of docs/CLIENTS.md: attach, a new 19x19 game, Generate Move."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    completed = subprocess.run(["node", str(HERE / "first_genmove.js"), sys.executable, "-m", "tabula.gtp",
                                "--player", "random", "--seed", "1"], cwd=ROOT, env=env, capture_output=True,
                               text=True, timeout=120)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "] name: Tabula" in completed.stdout and "synced: boardsize 19" in completed.stdout
    move = completed.stdout.split("genmove B: ")[1].split()[0]
    assert move[0] in "ABCDEFGHJKLMNOPQRST" and 1 <= int(move[1:]) <= 19, completed.stdout


def random_network(tmp_path_factory, name: str, *options: str) -> Path:
    """A network of 1 block × 8 filters with random weights, written by `tabula export --random` with ``options``."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is needed to export a network")
    path = tmp_path_factory.mktemp("sabaki") / name
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    completed = subprocess.run([sys.executable, "-m", "tabula.tools.cli", "export", "--random", "--blocks", "1",
                                "--filters", "8", "--seed", "1", *options, str(path)],
                               cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0 and path.exists(), completed.stdout + completed.stderr
    return path


@pytest.fixture(scope="module")
def tiny_net(tmp_path_factory) -> Path:
    """A 19×19 agz network."""
    return random_network(tmp_path_factory, "tiny.onnx")


@pytest.mark.slow
def test_sabaki_reads_analysis(tiny_net):
    engine = [sys.executable, "-m", "tabula.gtp", "--player", "search", "--weights", str(tiny_net),
              "--visits", str(VISITS), "--threads", "1"]
    lines = run_node(ANALYSIS_SCRIPT, str(VISITS), *engine)
    text = "\n".join(lines)
    for expected in ["ok name stopped the analysis and got its own reply: Tabula",
                     "ok 'command-sent' subscribe() saw the same lines as the reply",
                     "ok no output 300 ms after the analysis was stopped",
                     "ok protocol_version stopped lz-analyze and got its own reply: 2",
                     "ok syncing the game with the engine move sends no command"]:
        assert expected in lines, text
    for prefix in ["ok analyze B 10: visits grow", "ok genmove_analyze W 2 ends with play ",
                   "ok the state tracker recorded W ", "ok lz-analyze 10: visits grow"]:
        assert any(line.startswith(prefix) for line in lines), text


KATA_SCRIPT = HERE / "sabaki_kata.js"


@pytest.fixture(scope="module")
def tiny_aux_net(tmp_path_factory) -> Path:
    """A size-independent network with score and ownership heads."""
    return random_network(tmp_path_factory, "tiny_aux.onnx", "--head", "pooled", "--aux", "--board-sizes", "9,13,19")


@pytest.mark.slow
def test_kata_analyze_with_ownership_through_sabakis_controller(tiny_aux_net):
    engine = [sys.executable, "-m", "tabula.gtp", "--player", "search", "--weights", str(tiny_aux_net),
              "--visits", "200", "--threads", "1"]
    lines = run_node(KATA_SCRIPT, "9", *engine)
    text = "\n".join(lines)
    assert "ok every line ends with ownership: 81 values in [-1, 1]" in lines, text
    assert any(line.startswith("ok kata-genmove_analyze B 5 ends with play ") for line in lines), text
