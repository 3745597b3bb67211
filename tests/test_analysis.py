"""Analysis commands: output parsed by a parser written from Sabaki's spec and Leela Zero's line format."""
from __future__ import annotations

import dataclasses
import re
import threading
import time

import numpy as np
import pytest

from tabula.engine.config import EngineConfig, NetConfig, PlayConfig, SearchConfig
from tabula.engine.play.player import Player
from tabula.engine.play.search_player import SearchPicker
from tabula.engine.rules.coords import BLACK, parse_vertex
from tabula.gtp.__main__ import load_extensions
from tabula.gtp.analysis import install_pondering, parse_analyze_args
from tabula.gtp.commands import Session
from tabula.gtp.protocol import GtpError
from tests.conftest import FakeClock, make_session
from tests.test_search import ClockedEvaluator, LeadEvaluator, ScoreEvaluator

VERTEX = re.compile(r"^(pass|[A-HJ-Z]([1-9]|1[0-9]|2[0-5]))$", re.IGNORECASE)


def parse_info_line(line: str) -> list[dict]:
    """Sabaki's grammar: ``info <keyvalue>... pv <vertex>... (info <keyvalue>... pv <vertex>...)...``, where a
    keyvalue is two non-whitespace strings and winrate is an integer (percent × 100) or a float in [0, 1]."""
    words = line.split()
    assert words and words[0] == "info", line
    moves: list[dict] = []
    i = 0
    while i < len(words):
        assert words[i] == "info"
        i += 1
        entry: dict = {}
        while words[i] != "pv":
            key, value = words[i], words[i + 1]
            assert key not in entry
            entry[key] = value
            i += 2
        i += 1
        pv = []
        while i < len(words) and words[i] != "info":
            assert VERTEX.match(words[i]), words[i]
            pv.append(words[i])
            i += 1
        entry["pv"] = pv
        assert {"move", "visits", "winrate"} <= set(entry), entry
        assert VERTEX.match(entry["move"])
        assert int(entry["visits"]) >= 0
        winrate = entry["winrate"]
        assert 0 <= (float(winrate) if "." in winrate else int(winrate) / 10000) <= 1
        moves.append(entry)
    return moves


def search_session(size: int = 9, evaluator=None, clock=time.monotonic, **search) -> Session:
    """A session whose search player uses ``evaluator`` (default: ScoreEvaluator, a little slow) and times its
    searches by ``clock``."""
    load_extensions()
    settings = dict(threads=1, visits=60)
    settings.update({k: v for k, v in search.items() if k != "ponder"})
    config = dataclasses.replace(EngineConfig(board_size=size), search=SearchConfig(**settings),
                                 play=PlayConfig(ponder=search.get("ponder", False)))
    evaluator = evaluator if evaluator is not None else ScoreEvaluator(delay_s=0.001)
    picker = SearchPicker(evaluator, config.search, rng=np.random.default_rng(0), play=config.play,
                                clock=clock)
    return Session(player=Player(picker, size=size), config=config)


def complete_info_lines(out: list[str]) -> int:
    """Info lines written so far, a line still being written not counted."""
    return sum(line.startswith("info") for line in "".join(out).split("\n")[:-1])


def stream(session: Session, line: str, seconds: float = 0.0, info_lines: int = 0) -> list[str]:
    """Run a streaming command, send 'the next input line' once it has written ``info_lines`` info lines (counted,
    so that a loaded machine only makes the test slower) and ``seconds`` have passed; return the reply's lines."""
    out: list[str] = []
    thread = threading.Thread(target=session.handle, args=(line, out.append))
    thread.start()
    time.sleep(seconds)
    waited = 0
    while complete_info_lines(out) < info_lines and thread.is_alive() and waited < 6000:  # 60 s: a guard
        time.sleep(0.01)
        waited += 1
    session.interrupt.set()
    thread.join(10)
    assert not thread.is_alive()
    return "".join(out).split("\n")


def check_lz_lines(lines: list[str]) -> list[list[dict]]:
    assert lines[0] == "=" and lines[-2:] == ["", ""]
    parsed = [parse_info_line(line) for line in lines[1:-2]]
    for moves in parsed:
        assert [int(m["order"]) for m in moves] == list(range(len(moves)))
        for m in moves:
            assert set(m) == {"move", "visits", "winrate", "prior", "lcb", "order", "pv"}
            assert all(s.isdigit() for s in (m["winrate"], m["prior"], m["lcb"], m["visits"]))
            assert m["pv"][0] == m["move"]
    return parsed


def test_lz_analyze_streams_lines_until_input():
    # the search's clock moves 0.01 s an evaluation: an interval is 10 evaluations, so that a loaded machine cannot
    # make two lines in a row show the same visits
    clock = FakeClock()
    session = search_session(evaluator=ClockedEvaluator(ScoreEvaluator(delay_s=0.001), clock, 0.01), clock=clock)
    session.dispatch("play b E5")
    lines = stream(session, "lz-analyze w 10", info_lines=3)
    parsed = check_lz_lines(lines)
    assert len(parsed) >= 2
    totals = [sum(int(m["visits"]) for m in moves) for moves in parsed]
    assert all(a < b for a, b in zip(totals, totals[1:])), totals  # every line has searched further
    assert len(session.player.state.moves) == 1  # analysis plays nothing


def test_sabaki_analyze_and_ids():
    session = search_session()
    lines = stream(session, "7 analyze B 10", info_lines=1)
    assert lines[0] == "=7"
    check_lz_lines(["="] + lines[1:])


def test_genmove_analyze_ends_with_play_and_plays_it():
    session = search_session(visits=150)
    reply = session.dispatch("lz-genmove_analyze b 1")
    lines = reply.split("\n")
    assert lines[0] == "=" and lines[-2:] == ["", ""]
    assert lines[-3].startswith("play ")
    vertex = lines[-3].split()[1]
    for line in lines[1:-3]:
        parse_info_line(line)
    assert session.player.state.moves[-1][1] == parse_vertex(vertex, 9)


def test_genmove_analyze_interrupted_still_answers_with_a_move(fake_clock):
    # No visit limit: a 5 s default budget, on a search clock that stands still, so the input alone can end it
    # (``stream`` fails if the command is still running 10 s after the input).
    session = search_session(visits=0, clock=fake_clock)
    lines = stream(session, "genmove_analyze w 5", 0.3)
    assert lines[0] == "=" and lines[-3].startswith("play ")
    assert len(session.player.state.moves) == 1


def test_analysis_argument_errors():
    session = search_session()
    assert session.dispatch("lz-analyze b 10 extra") == "? syntax error\n\n"
    assert session.dispatch("lz-analyze -5") == "? syntax error\n\n"
    random_session = make_session(size=9)
    assert random_session.dispatch("lz-analyze 10").startswith("? analysis needs the search player")


def test_parse_analyze_args():
    assert parse_analyze_args((), 1) == (1, 1.0)
    assert parse_analyze_args(("w",), 1) == (2, 1.0)
    assert parse_analyze_args(("50",), 1) == (1, 0.5)
    assert parse_analyze_args(("B", "interval", "25", "minmoves", "3"), 2) == (1, 0.25)
    with pytest.raises(GtpError):
        parse_analyze_args(("interval",), 1)


def test_gogui_analyze_commands_and_views():
    session = search_session(size=7)
    listed = session.dispatch("gogui-analyze_commands")
    assert listed.startswith("= ")
    commands = listed[2:].strip().split("\n")
    for entry in commands:
        kind, label, command = entry.split("/")
        assert kind in ("dboard", "gfx", "var") and label and command in session.table
    assert session.dispatch("gogui-interrupt") == "=\n\n"
    policy = session.dispatch("tabula-policy")
    rows = [r for r in policy[2:].strip().split("\n") if r]
    assert len(rows) == 7 and all(len(r.split()) == 7 for r in rows)
    assert abs(sum(float(x) for r in rows for x in r.split()) - 1.0) < 0.05
    visits = session.dispatch("tabula-visits")
    assert re.match(r"^= INFLUENCE( [A-HJ-T]\d+ [01]\.\d\d)+\nLABEL( [A-HJ-T]\d+ \d+)+\n\n$", visits), visits
    assert re.match(r"^= LABEL( [A-HJ-T]\d+ \d+)+\nSQUARE [A-HJ-T]\d+\n\n$", session.dispatch("tabula-winrate"))
    assert re.match(r"^= b [A-HJ-T]\d+( [bw] ([A-HJ-T]\d+|pass))*\n\n$", session.dispatch("tabula-pv"))


def test_pondering_is_installed_only_when_asked():
    session = search_session()
    install_pondering(session)
    assert session.idle_task is None
    pondering = search_session(ponder=True)
    install_pondering(pondering)
    interrupt = threading.Event()
    threading.Timer(0.2, interrupt.set).start()
    pondering.idle_task(interrupt)
    assert pondering.player.picker.search.tree.root.visits > 1


def test_genmove_analyze_with_the_next_command_already_waiting_still_says_its_move():
    # Pipelined input: the interrupt is set before the search starts; the reply must still end with "play".
    session = search_session(visits=40)
    out: list[str] = []
    session.interrupt.set()
    session.handle("genmove_analyze b 1", out.append)
    lines = "".join(out).split("\n")
    assert lines[0] == "=" and lines[-3].startswith("play ") and lines[-2:] == ["", ""]
    assert session.player.state.moves[-1][1] == parse_vertex(lines[-3].split()[1], 9)


# -- kata-analyze: KataGo's format, score lead and ownership --------------------------------------------------------

KATA_KEYS = ["move", "visits", "utility", "winrate", "scoreMean", "scoreStdev", "scoreLead", "prior", "lcb", "order"]


class BottomRowEvaluator(LeadEvaluator):
    """Black leads by 4.5; black owns the bottom row (y = 0) for sure and nothing else is decided."""

    def evaluate(self, states):
        evaluation = super().evaluate(states)
        size = states[0].size
        owned = np.zeros((len(states), size * size), np.float32)
        owned[:, :size] = 1.0
        sign = np.array([1.0 if s.to_move == BLACK else -1.0 for s in states], np.float32)
        evaluation.ownership = owned * sign[:, None]
        return evaluation


def lead_session(size: int = 9, **search) -> Session:
    return search_session(size, BottomRowEvaluator(4.5, 0.0), **search)


def parse_kata_line(line: str, size: int) -> tuple[list[dict], list[float] | None]:
    """KataGo's grammar: ``info KEY VALUE ... pv V ...`` per move, then optionally ``ownership`` and N*N floats."""
    ownership = None
    if " ownership " in f" {line} ":
        line, _, values = f" {line} ".partition(" ownership ")
        ownership = [float(v) for v in values.split()]
        assert len(ownership) == size * size and all(-1.0 <= v <= 1.0 for v in ownership)
    moves = parse_info_line(line.strip())
    for m in moves:
        assert [k for k in m if k != "pv"] == KATA_KEYS, m
        assert 0.0 <= float(m["winrate"]) <= 1.0 and 0.0 <= float(m["prior"]) <= 1.0
        assert -1.0 <= float(m["utility"]) <= 1.0 and float(m["scoreStdev"]) >= 0.0
    return moves, ownership


def test_kata_analyze_reports_score_lead_and_ownership_from_the_side_to_moves_view():
    session = lead_session()
    session.dispatch("play b E5")
    lines = stream(session, "kata-analyze w interval 10 ownership true", info_lines=1)
    assert lines[0] == "=" and lines[-2:] == ["", ""] and len(lines) >= 4
    moves, ownership = parse_kata_line(lines[-3], 9)
    assert moves and ownership is not None
    for m in moves:
        assert float(m["scoreLead"]) == pytest.approx(-4.5, abs=0.01)  # white to move trails by 4.5
        assert m["scoreMean"] == m["scoreLead"]
    # KataGo's order: the top row (A9..J9) first, the bottom row (A1..J1) last; white's view of black's row
    assert ownership[:9] == [0.0] * 9 and ownership[-9:] == [-1.0] * 9


def test_kata_analyze_without_ownership_maxmoves_and_unknown_keys():
    session = lead_session()
    lines = stream(session, "kata-analyze b 10 maxmoves 2 ownershipStdev true pvVisits true avoid w D4 1 "
                   "minmoves 5", info_lines=1)
    assert lines[0] == "="
    for line in lines[1:-2]:
        moves, ownership = parse_kata_line(line, 9)
        assert ownership is None and 1 <= len(moves) <= 2
        assert all(float(m["scoreLead"]) == pytest.approx(4.5, abs=0.01) for m in moves)


def test_kata_analyze_argument_errors():
    session = lead_session()
    for bad in ("kata-analyze b -5", "kata-analyze b 10 ownership maybe", "kata-analyze b 10 maxmoves x",
                "kata-analyze b interval"):
        assert session.dispatch(bad) == "? syntax error\n\n", bad
    assert make_session(size=9).dispatch("kata-analyze 10").startswith("? analysis needs the search player")


def test_kata_genmove_analyze_ends_with_play():
    session = lead_session(visits=80)
    lines = session.dispatch("kata-genmove_analyze b 1 ownership true").split("\n")
    assert lines[0] == "=" and lines[-3].startswith("play ")
    moves, ownership = parse_kata_line(lines[-4], 9)
    assert moves and ownership[-9:] == [1.0] * 9  # black to move owns its row
    assert len(session.player.state.moves) == 1


def test_sabaki_analyze_lines_carry_score_lead_where_the_network_has_one():
    lines = stream(lead_session(), "analyze b 10", info_lines=1)
    for line in lines[1:-2]:
        for m in parse_info_line(line):
            assert float(m["scoreLead"]) == pytest.approx(4.5, abs=0.01) and m["winrate"].isdigit()
    # lz-analyze stays Leela Zero's format (Lizzie), and networks without a score head send no scoreLead
    check_lz_lines(stream(lead_session(), "lz-analyze b 10", info_lines=1))
    check_lz_lines(stream(search_session(), "analyze b 10", info_lines=1))


@pytest.mark.slow
def test_kata_analyze_with_a_network_that_has_score_and_ownership_heads(tiny_aux_onnx):
    """The whole path from the ONNX outputs: symmetries undone on the ownership, black's view in the tree."""
    load_extensions()
    config = EngineConfig(board_size=9, player="search", seed=5,
                          search=SearchConfig(threads=1, visits=40),
                          net=NetConfig(weights=(str(tiny_aux_onnx),)))
    session = Session(player=Player.from_config(config), config=config)
    lines = session.dispatch("kata-genmove_analyze b 1 ownership true").split("\n")
    moves, ownership = parse_kata_line(lines[-4], 9)
    assert moves and len(set(ownership)) > 1
    assert all(abs(float(m["scoreLead"])) < 400 for m in moves)


def test_gogui_score_lead_and_ownership_views():
    session = lead_session()
    assert "gfx/Score lead/tabula-score-lead" in session.dispatch("gogui-analyze_commands")
    reply = session.dispatch("tabula-score-lead")
    assert reply.startswith("= LABEL ") and "\nSQUARE " in reply
    labels = reply.split("\n")[0].split()[2:]
    assert labels and all(float(v) == pytest.approx(4.5, abs=0.05) for v in labels[1::2])
    words = session.dispatch("tabula-ownership").split()
    assert words[:2] == ["=", "INFLUENCE"] and len(words[2:]) == 2 * 81
    values = dict(zip(words[2::2], map(float, words[3::2])))
    assert values["A1"] == 1.0 and values["J1"] == 1.0 and values["E5"] == 0.0  # black's row, black positive
    plain = search_session()  # a network without the heads says so
    assert plain.dispatch("tabula-ownership") == "? the network has no ownership head\n\n"
    assert plain.dispatch("tabula-score-lead") == "? the network has no score head\n\n"


@pytest.mark.slow
def test_kata_analyze_with_a_katago_model_file(tmp_path, monkeypatch):
    """A KataGo ``.bin.gz`` as users bring it (here a small random one of our writer's): converted on first use, its
    score lead and ownership reach kata-analyze, KataGo's row order and the side to move's view."""
    pytest.importorskip("torch")
    import os

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "katago", "random-v15.bin.gz")
    load_extensions()
    config = EngineConfig(board_size=9, player="search", seed=5, search=SearchConfig(threads=1, visits=24),
                          net=NetConfig(weights=(source,)))
    session = Session(player=Player.from_config(config), config=config)
    session.dispatch("play b E5")
    lines = session.dispatch("kata-genmove_analyze w 1 ownership true").split("\n")
    assert lines[-3].startswith("play ")
    moves, ownership = parse_kata_line(lines[-4], 9)
    assert moves and len(set(ownership)) > 1
    leads = {float(m["scoreLead"]) for m in moves}
    assert all(abs(lead) < 200 for lead in leads) and len(leads) > 1
    raw = session.dispatch("kata-raw-nn 0")
    assert raw.startswith("= ") and "whiteLead" in raw and "whiteOwnership" in raw
