"""tabula arena: in-process games of gomoku between a network's search, pure MCTS and a random player."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tabula.engine.rules.gomoku import GomokuState
from tabula.tools.compete.arena import ArenaConfig, main, parse_player, play_game


@pytest.fixture(scope="module")
def tiny_gomoku_net(tmp_path_factory) -> Path:
    from tabula.engine.net.network import POOLED, NetSpec, export_onnx, random_network

    spec = NetSpec(blocks=1, filters=8, head=POOLED, head_channels=8, value_hidden=16, input_encoding="gomoku-4")
    path = tmp_path_factory.mktemp("net") / "tiny_gomoku.onnx"
    export_onnx(random_network(spec, seed=3), path, provenance="tests: random seed 3", board_sizes=[7])
    return path


def test_a_game_is_played_to_its_end_and_replays_from_its_seed(tiny_gomoku_net):
    config = ArenaConfig(players=(f"net:{tiny_gomoku_net}", "pure:50"), size=7, n_in_row=4, visits=16)
    record = play_game(config, 1)
    assert (record["black"], record["white"]) == (1, 0)  # odd games: the second player takes black
    assert record["winner"] in ("B", "W", "0") and record["moves"] >= 7
    assert play_game(config, 1)["sgf"] == record["sgf"]
    assert record["sgf"].startswith("(;GM[4]")


def test_the_command_alternates_colours_and_writes_games_and_results(tmp_path, capsys):
    out = tmp_path / "arena"
    assert main(["pure:200", "random", "--size", "7", "--n-in-row", "4", "--games", "4", "--out", str(out)]) == 0
    table = capsys.readouterr().out
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["black"] for r in records] == [0, 1, 0, 1]
    assert len(list((out / "games").glob("*.sgf"))) == 4
    assert "pure:200 scores" in table and "%" in table
    # pure MCTS with 200 playouts beats random play at four in a row on 7x7
    assert sum(r["winner"] == ("B" if r["black"] == 0 else "W") for r in records) >= 3


def test_bad_players_and_settings_are_clear_errors(tmp_path, capsys):
    for spec in ("pure:0", "pure:x", "net:", "alpha"):
        with pytest.raises(ValueError):
            parse_player(spec)
    with pytest.raises(SystemExit):
        main(["pure:10", "random", "--size", "4"])
    with pytest.raises(SystemExit):
        main([f"net:{tmp_path / 'missing.onnx'}", "random"])
    assert "no such network file" in capsys.readouterr().err


def test_the_network_picker_moves_for_the_side_to_move_only(tiny_gomoku_net):
    from tabula.tools.compete.arena import network_picker

    player = network_picker(str(tiny_gomoku_net), visits=8, c_puct=0.0, seed=1)
    state = GomokuState(7, n_in_row=4)
    move = player.pick(state)
    assert move in state.legal_moves()
    with pytest.raises(ValueError):
        state.with_to_move(3 - state.to_move)


def test_tabula_gomocup_plays_with_a_network(tiny_gomoku_net):
    """`tabula gomocup --player network --weights FILE`: the network's search behind the Gomocup protocol."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "tabula.tools.cli", "gomocup", "--player", "network", "--weights",
                           str(tiny_gomoku_net), "--visits", "16", "--seed", "2"],
                          input="START 7\nBEGIN\nTURN 0,0\nEND\n", capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    replies = done.stdout.split()
    assert replies[0] == "OK" and len(replies) == 3
    for reply in replies[1:]:
        x, y = map(int, reply.split(","))
        assert 0 <= x < 7 and 0 <= y < 7 and (x, y) != (0, 0)


def test_tabula_gomocup_plays_the_boards_its_network_does_not_with_pure_mcts(tiny_gomoku_net, caplog):
    """The network player routes each board: its network where the network plays the size (7x7 here), pure MCTS on
    others (a 9x9 or 15x15 tournament still gets moves), said once per size."""
    import logging
    import random

    from tabula.tools import gomocup

    config = gomocup.GomocupConfig(weights=str(tiny_gomoku_net), visits=8, playouts=20)
    player = gomocup.PICKERS[config.player](config, random.Random(1))
    assert config.player == "network" and isinstance(player, gomocup.BoardRouter)
    calls = []

    class Recorder:
        def __init__(self, name, picker):
            self.name, self.picker = name, picker

        def pick(self, state, budget_s=None):
            calls.append(self.name)
            return self.picker.pick(state, budget_s)

    player.network, player.fallback = Recorder("network", player.network), Recorder("fallback", player.fallback)
    with caplog.at_level(logging.WARNING, logger="tabula.gomocup"):
        for width, height in ((7, 7), (9, 9), (9, 9), (7, 9)):
            state = GomokuState(width, height, n_in_row=4)
            assert player.pick(state) in state.legal_moves()
    assert calls == ["network", "fallback", "fallback", "fallback"]
    assert sum("pure MCTS plays this" in r.message for r in caplog.records) == 2  # 9x9 once, 7x9 once


def test_tabula_gomocup_plays_each_board_with_the_first_network_that_plays_it(tiny_gomoku_net, tmp_path,
                                                                              monkeypatch):
    """Several networks (the shipped 9x9 one and one for every size): a board size goes to the first that plays it,
    a size none plays to pure MCTS; both from the command line and from the shipped list."""
    import random

    from tabula.engine.net.network import POOLED, NetSpec, export_onnx, random_network
    from tabula.tools import gomocup

    spec = NetSpec(blocks=1, filters=8, head=POOLED, head_channels=8, value_hidden=16, input_encoding="gomoku-4")
    every = tmp_path / "every.onnx"
    export_onnx(random_network(spec, seed=4), every, provenance="tests: random seed 4", board_sizes=[7, 9])
    config = gomocup.parse_args(["--weights", str(tiny_gomoku_net), "--weights", str(every), "--visits", "8",
                                 "--playouts", "20", "--seed", "1"])
    assert config.weights == (str(tiny_gomoku_net), str(every))
    player = gomocup.PICKERS[config.player](config, random.Random(1))
    assert player.sizes == (7, 9)
    evaluator = player.network.search.evaluator
    first, second = evaluator.networks
    assert evaluator.network_for(7) is first and evaluator.network_for(9) is second
    for width, height in ((7, 7), (9, 9), (11, 11), (7, 9)):
        state = GomokuState(width, height, n_in_row=4)
        assert player.pick(state) in state.legal_moves()
    # the shipped list may name several too, tried in its order
    from tabula.engine.play import search_player

    shipped = tmp_path / "shipped"
    shipped.mkdir()
    for path in (tiny_gomoku_net, every):
        (shipped / path.name).write_bytes(path.read_bytes())
    (shipped / gomocup.DEFAULT_POINTER).write_text(f"# 7x7 first\n{tiny_gomoku_net.name}\n{every.name}\n")
    monkeypatch.setattr(search_player, "WEIGHTS_DIR", shipped)
    default = gomocup.PICKERS["network"](gomocup.GomocupConfig(visits=8, playouts=20), random.Random(1))
    assert default.sizes == (7, 9) and [Path(n.path).name for n in default.network.search.evaluator.networks] == [
        tiny_gomoku_net.name, every.name]
    assert gomocup.GomocupConfig(weights=str(every)).weights == (str(every),)  # one file as a string
    assert gomocup.GomocupConfig(weights=[str(every)]).weights == (str(every),)
    with pytest.raises(SystemExit):
        gomocup.parse_args(["--weights", str(every), "--weights", str(tmp_path / "missing.onnx")])


@pytest.mark.slow
def test_tabula_gomocup_without_a_shipped_network_says_so(monkeypatch, tmp_path, capsys):
    from tabula.engine.play import search_player
    from tabula.tools import gomocup

    monkeypatch.setattr(search_player, "WEIGHTS_DIR", tmp_path)
    assert gomocup.main(["--seed", "1"]) == 2
    assert f"no shipped default ({tmp_path / gomocup.DEFAULT_POINTER} is missing)" in capsys.readouterr().err
    (tmp_path / gomocup.DEFAULT_POINTER).write_text("# the network\nmissing.onnx\n")
    assert gomocup.main(["--seed", "1"]) == 2
    assert f"the shipped default network {tmp_path / 'missing.onnx'} is missing" in capsys.readouterr().err
    for name in ("one.onnx", "two.onnx"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / gomocup.DEFAULT_POINTER).write_text("one.onnx\ntwo.onnx\n")  # the first, empty, is refused
    assert gomocup.main(["--seed", "1"]) == 2
    assert "one.onnx" in capsys.readouterr().err
    (tmp_path / "broken.onnx").write_bytes(b"not a network")
    (tmp_path / gomocup.DEFAULT_POINTER).write_text("broken.onnx\n")
    assert gomocup.main(["--seed", "1"]) == 2
    assert "tabula gomocup:" in capsys.readouterr().err
    # a Go network is refused at start, not at the first move
    go_network = Path(__file__).resolve().parents[1] / "weights" / "tabula-6x64-anysize-int8.onnx"
    assert gomocup.main(["--seed", "1", "--weights", str(go_network)]) == 2
    assert "a network of another game" in capsys.readouterr().err


def test_tabula_gomocup_plays_the_shipped_network_by_default():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "tabula.tools.cli", "gomocup", "--visits", "8", "--seed", "4"],
                          input="START 9\nBEGIN\nSTART 15\nBEGIN\nEND\n", capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    # 9x9 by its own network, 15x15 by the one for every size: no board falls back to pure MCTS
    assert "tabula-gomoku9-4x32.onnx" in done.stderr and "tabula-gomoku-any-4x32.onnx" in done.stderr
    assert "pure MCTS" not in done.stderr
    replies = done.stdout.split()
    assert replies[0] == replies[2] == "OK" and len(replies) == 4
    assert all(0 <= int(v) < 9 for v in replies[1].split(",")) and all(0 <= int(v) < 15 for v in replies[3].split(","))
