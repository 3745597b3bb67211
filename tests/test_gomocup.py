"""`tabula gomocup` (tools/gomocup.py): the protocol's pure parts, a scripted session in-process and through a
subprocess, and a full game between two `tabula gomocup` processes driven by a small manager."""
from __future__ import annotations

import pathlib
import queue
import re
import subprocess
import sys
import threading

import pytest

from tabula.engine.play.pure_mcts import PureMctsPicker
from tabula.engine.rules.coords import BLACK, EMPTY, WHITE
from tabula.engine.rules.gomoku import GomokuState
from tabula.tools import gomocup
from tabula.tools.gomocup import Brain, Limits, ProtocolError

ROOT = pathlib.Path(__file__).resolve().parents[1]
MOVE = re.compile(r"^(\d+),(\d+)$")
HANG_GUARD_S = 60.0  # only a guard against a hung process; the tests count playouts, not seconds


# -- pure functions ------------------------------------------------------------------------------------------------

def test_commands_split_into_an_upper_case_verb_and_the_rest():
    assert gomocup.split_command("turn 10,10\r\n") == ("TURN", "10,10")
    assert gomocup.split_command("  INFO   timeout_turn 5000 ") == ("INFO", "timeout_turn 5000")
    assert gomocup.split_command("BEGIN") == ("BEGIN", "")


def test_coordinates_are_checked_and_mapped_from_the_top_left():
    assert gomocup.parse_xy("3,4", 15, 15) == (3, 4)
    assert gomocup.parse_xy(" 3 , 4 ", 15, 15) == (3, 4)
    for bad in ("3", "3,4,5", "a,b", "3.0,4", "", "-1,4", "15,0", "0,15", "３,4"):
        with pytest.raises(ProtocolError):
            gomocup.parse_xy(bad, 15, 15)
    # Gomocup's 0,0 is the top-left corner: the engine's top row (y from the bottom) and first column.
    assert gomocup.point_to_move(0, 0, 15, 15) == 14 * 15
    assert gomocup.point_to_move(14, 14, 15, 15) == 14
    assert gomocup.point_to_move(2, 1, 6, 8) == 6 * 6 + 2
    for move in range(6 * 8):
        assert gomocup.point_to_move(*gomocup.move_to_point(move, 6, 8), 6, 8) == move


def test_board_lines_name_their_field():
    assert gomocup.parse_board_line("10,11,2", 15, 15) == (10, 11, 2)
    for bad in ("10,11", "10,11,0", "10,11,4", "10,11,x", "20,1,1"):
        with pytest.raises(ProtocolError):
            gomocup.parse_board_line(bad, 15, 15)
    with pytest.raises(ProtocolError, match="continuous"):
        gomocup.parse_board_line("1,1,3", 15, 15)


def test_freestyle_is_the_only_rule_played():
    assert gomocup.rule_problem(0) is None
    assert "exactly five" in gomocup.rule_problem(1)
    assert "renju" in gomocup.rule_problem(4) and "continuous" in gomocup.rule_problem(6)
    assert "caro" in gomocup.rule_problem(8) and "unknown" in gomocup.rule_problem(16)


def test_about_names_the_engine():
    line = gomocup.about_line()
    assert re.fullmatch(r'name="Tabula", version="[^"]+", author="[^"]+", country="[^"]+"', line)


def test_the_move_budget_honours_the_turn_and_the_match_time():
    budget = gomocup.move_budget_s
    assert budget(Limits(), 0.0, 0, 15, 15, 0.5) is None  # nothing said: only the playout count limits
    assert budget(Limits(timeout_turn_ms=5000), 0.0, 0, 15, 15, 0.5) == pytest.approx(4.5)
    assert budget(Limits(timeout_turn_ms=1000), 0.0, 0, 15, 15, 0.5) == pytest.approx(0.75)  # a quarter kept
    assert budget(Limits(timeout_turn_ms=0), 0.0, 0, 15, 15, 0.5) == 0.0  # play as fast as possible
    unlimited = Limits(timeout_turn_ms=30000, time_left_ms=gomocup.UNLIMITED_MS)
    assert budget(unlimited, 0.0, 0, 15, 15, 0.5) == pytest.approx(29.5)
    short = budget(Limits(timeout_turn_ms=30000, time_left_ms=20000), 0.0, 10, 15, 15, 0.5)
    assert 0.0 < short < 2.0  # a share of 20 s over the moves to come
    assert budget(Limits(timeout_turn_ms=30000, time_left_ms=-5), 0.0, 10, 15, 15, 0.5) == 0.0
    # No time_left from the manager: the match time less what this brain has used.
    fresh = budget(Limits(timeout_match_ms=100_000), 0.0, 10, 15, 15, 0.5)
    used = budget(Limits(timeout_match_ms=100_000), 60.0, 10, 15, 15, 0.5)
    assert 0.0 < used < fresh


# -- a scripted session in-process ---------------------------------------------------------------------------------

def brain(fake_clock, playouts: int = 50, seed: int = 1) -> Brain:
    return Brain(PureMctsPicker(playouts=playouts, rng=seed, clock=fake_clock), clock=fake_clock)


def position(b: Brain) -> tuple:
    return (bytes(b.state.grid), list(b.state.moves), b.state.to_move)


def stone(b: Brain, x: int, y: int) -> int:
    return b.state.color_at(gomocup.point_to_move(x, y, b.state.width, b.state.height))


def free_point(b: Brain) -> tuple[int, int]:
    return next((x, y) for y in range(b.state.height) for x in range(b.state.width) if stone(b, x, y) == EMPTY)


def one_move(replies: list[str]) -> tuple[int, int]:
    assert len(replies) == 1 and MOVE.match(replies[0]), replies
    x, y = map(int, replies[0].split(","))
    return x, y


def test_a_scripted_session_answers_every_command(fake_clock):
    b = brain(fake_clock)
    assert b.handle("ABOUT")[0].startswith('name="Tabula"')
    assert b.handle("BEGIN")[0].startswith("ERROR no board")  # before START
    for line in ("INFO timeout_turn 5000", "INFO timeout_match 300000", "INFO max_memory 83886080",
                 "INFO game_type 1", "INFO rule 0", "INFO folder /tmp/x", "INFO evaluate 3,3", "INFO time_left x",
                 "INFO something_new 7", ""):
        assert b.handle(line) == []
    assert b.limits == Limits(timeout_turn_ms=5000, timeout_match_ms=300000, max_memory_bytes=83886080,
                              game_type=1, rule=0, folder="/tmp/x")
    assert b.handle("START 30")[0].startswith("ERROR unsupported size")
    assert b.handle("START x")[0].startswith("ERROR")
    assert b.handle("START 15") == ["OK"]

    x, y = one_move(b.handle("BEGIN"))  # we open, as black
    assert stone(b, x, y) == BLACK
    ox, oy = (x + 1) % 15, y
    x2, y2 = one_move(b.handle(f"TURN {ox},{oy}"))
    assert stone(b, ox, oy) == WHITE and stone(b, x2, y2) == BLACK
    kept = position(b)
    for bad in (f"TURN {ox},{oy}", f"TURN {x},{y}", "TURN 15,3", "TURN -1,3", "TURN 3", "TURN a,b", "TURN"):
        assert b.handle(bad)[0].startswith("ERROR"), bad
        assert position(b) == kept
    assert b.handle(f"TURN {ox},{oy}") == [f"ERROR TURN {ox},{oy}: illegal move (occupied)"]
    unknown = b.handle("FLY 3,3")
    assert unknown[0].startswith("UNKNOWN") and position(b) == kept
    assert b.handle("DONE")[0].startswith("ERROR") and position(b) == kept

    # TAKEBACK our last stone: our turn again, and PLAY imposes our move and echoes it.
    assert b.handle(f"TAKEBACK {x2},{y2}") == ["OK"] and b.state.to_move == BLACK
    px, py = free_point(b)
    assert b.handle(f"PLAY {px},{py}") == [f"{px},{py}"] and stone(b, px, py) == BLACK
    assert b.handle(f"PLAY {ox},{oy}")[0].startswith("ERROR")
    assert b.handle(f"TAKEBACK {px},{py}") == ["OK"]
    assert b.handle(f"TAKEBACK {ox},{oy}") == ["OK"]
    assert b.state.moves == [(BLACK, gomocup.point_to_move(x, y, 15, 15))] and b.state.to_move == WHITE
    assert b.handle(f"TAKEBACK {ox},{oy}")[0].startswith("ERROR")

    assert b.handle("RESTART") == ["OK"] and b.state.moves == []
    assert b.handle("RECTSTART 12,9") == ["OK"] and (b.state.width, b.state.height) == (12, 9)
    assert b.handle("RECTSTART 4,9")[0].startswith("ERROR")
    assert b.handle("START 15") == ["OK"]

    # BOARD ... DONE: opponent one stone ahead, so we are white; the answer is a move on a free point.
    for line in ("BOARD", "7,7,2", "8,8,1", "7,8,2"):
        assert b.handle(line) == []
    x3, y3 = one_move(b.handle("DONE"))
    assert stone(b, 7, 7) == BLACK and stone(b, 8, 8) == WHITE and stone(b, x3, y3) == WHITE
    kept = position(b)
    for block in (["BOARD", "7,7,1", "7,7,2", "DONE"], ["BOARD", "7,7,3", "DONE"], ["BOARD", "20,1,1", "DONE"],
                  ["BOARD", "nonsense", "DONE"], ["SWAP2BOARD", "7,7", "DONE"]):
        replies = [reply for line in block for reply in b.handle(line)]
        assert len(replies) == 1 and replies[0].startswith("ERROR"), block
        assert position(b) == kept

    # An unsupported rule is refused at the next move, with the board kept; freestyle plays again.
    assert b.handle("INFO rule 1") == []
    fx, fy = free_point(b)
    assert b.handle(f"TURN {fx},{fy}")[0].startswith("ERROR rule 1 (exactly five in a row)")
    assert b.handle("BEGIN")[0].startswith("ERROR rule 1")
    assert position(b) == kept
    assert b.handle("INFO rule 0") == []
    one_move(b.handle(f"TURN {fx},{fy}"))

    assert b.handle("END") == [] and b.finished


class Lowest:
    """A stand-in player: the lowest free flat point (the bottom row first, Gomocup's y = height - 1)."""

    def pick(self, state, budget_s=None):
        return state.legal_moves()[0]


def test_a_game_that_is_over_is_answered_with_an_error(fake_clock):
    b = Brain(Lowest(), clock=fake_clock)
    b.handle("START 9")
    lines = ["BOARD"] + [f"{x},0,2" for x in range(4)] + [f"{x},8,1" for x in range(3)] + ["DONE"]
    replies = [reply for line in lines for reply in b.handle(line)]
    assert replies == ["3,8"]  # the opponent has a stone more, so we are white; Lowest does not block
    assert b.handle("TURN 4,0") == ["ERROR the game is over (black has five in a row): there is no move to make"]
    assert stone(b, 4, 0) == BLACK  # the opponent's move stays: it is the game's last
    kept = position(b)
    assert b.handle("TURN 5,5")[0].startswith("ERROR TURN 5,5: illegal move (game over)") and position(b) == kept
    lines = ["BOARD"] + [f"{x},0,1" for x in range(5)] + [f"{x},8,2" for x in range(5)] + ["DONE"]
    replies = [reply for line in lines for reply in b.handle(line)]
    assert replies[0].startswith("ERROR BOARD:") and position(b) == kept


def test_time_limits_reach_the_player(fake_clock):
    budgets = []

    class Recorder:
        def pick(self, state, budget_s=None):
            budgets.append(budget_s)
            return state.legal_moves()[0]

    b = Brain(Recorder(), lag_buffer_s=0.5, clock=fake_clock)
    b.handle("START 15")
    b.handle("BEGIN")
    b.handle("INFO timeout_turn 2000")
    b.handle("TURN 7,7")
    b.handle("INFO time_left 1000")
    b.handle("TURN 7,8")
    assert budgets[0] is None and budgets[1] == pytest.approx(1.5) and 0.0 <= budgets[2] < 0.5


def test_an_internal_error_is_answered_and_the_brain_lives_on(fake_clock):
    class Broken:
        def pick(self, state, budget_s=None):
            raise RuntimeError("boom")

    b = Brain(Broken(), clock=fake_clock)
    b.handle("START 15")
    assert b.handle("BEGIN") == ["ERROR internal error: RuntimeError: boom"]
    assert b.handle("ABOUT")[0].startswith("name=") and b.state.moves == []


# -- through subprocesses ------------------------------------------------------------------------------------------

class BrainProcess:
    """A `tabula gomocup` subprocess: lines in, reply lines out (MESSAGE and DEBUG lines set aside)."""

    def __init__(self, *flags: str):
        self.process = subprocess.Popen([sys.executable, "-m", "tabula.tools.cli", "gomocup", *flags], cwd=ROOT,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        text=True, bufsize=1)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\r\n"))
        self.lines.put(None)

    def send(self, line: str) -> None:
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def reply(self) -> str:
        while True:
            line = self.lines.get(timeout=HANG_GUARD_S)
            assert line is not None, "the brain exited"
            if not line.startswith(("MESSAGE", "DEBUG")):
                return line

    def ask(self, line: str) -> str:
        self.send(line)
        return self.reply()

    def end(self) -> int:
        self.send("END")
        self.process.stdin.close()
        return self.process.wait(timeout=HANG_GUARD_S)


@pytest.mark.slow
def test_a_scripted_session_through_the_command_line():
    script = ["ABOUT", "START 15", "INFO timeout_turn 5000", "INFO rule 0", "TURN 7,7", "TURN 7,7", "TURN 3,99",
              "HELLO", "RESTART", "BOARD", "7,7,1", "8,7,2", "DONE", "TAKEBACK 8,7", "RESTART", "BEGIN", "END",
              "ABOUT"]  # nothing after END is read
    out = subprocess.run([sys.executable, "-m", "tabula.tools.cli", "gomocup", "--playouts", "50", "--seed", "3"],
                         cwd=ROOT, input="\r\n".join(script) + "\r\n", capture_output=True, text=True,
                         timeout=HANG_GUARD_S)
    assert out.returncode == 0, out.stderr
    replies = out.stdout.splitlines()
    assert len(replies) == 11, replies
    assert replies[0].startswith('name="Tabula"') and replies[1] == "OK"
    assert MOVE.match(replies[2]) and replies[2] != "7,7"
    assert replies[3] == "ERROR TURN 7,7: illegal move (occupied)"
    assert replies[4].startswith("ERROR") and replies[5].startswith("UNKNOWN") and replies[6] == "OK"
    assert MOVE.match(replies[7]) and replies[8:10] == ["OK", "OK"] and MOVE.match(replies[10])


def test_bad_flags_are_refused():
    out = subprocess.run([sys.executable, "-m", "tabula.tools.cli", "gomocup", "--playouts", "0"], cwd=ROOT,
                         capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert out.returncode == 2 and "playouts" in out.stderr


@pytest.mark.parametrize("players", [("pure", "pure"), ("pure", "random")])
def test_a_full_game_between_two_processes(players):
    """A small manager: START 9 to both, BEGIN to the first, then each move passed on as TURN to the other, every
    move checked legal, until five in a row or a full board."""
    first, second = (BrainProcess("--player", player, "--playouts", "30", "--seed", str(seed))
                     for seed, player in enumerate(players))
    try:
        state = GomokuState(9, n_in_row=5)
        assert first.ask("START 9") == "OK" and second.ask("START 9") == "OK"
        for brain_ in (first, second):
            brain_.send("INFO timeout_turn 10000")
            brain_.send("INFO rule 0")
        reply = first.ask("BEGIN")
        mover, other = first, second
        while True:
            match = MOVE.match(reply)
            assert match, reply
            x, y = int(match[1]), int(match[2])
            state.play(gomocup.point_to_move(x, y, 9, 9))  # raises on an illegal move
            if state.terminal_value() is not None:
                break
            mover, other = other, mover
            reply = mover.ask(f"TURN {x},{y}")
        assert state.winner in (BLACK, WHITE) or state.terminal_value() == 0.0
        assert len(state.moves) >= 9
    finally:
        codes = [first.end(), second.end()]
    assert codes == [0, 0]


def test_takeback_of_an_earlier_stone_rebuilds_the_game(fake_clock):
    b = brain(fake_clock)
    b.handle("START 9")
    for line in ("BOARD", "4,4,2", "5,5,1", "3,3,2", "DONE"):
        replies = b.handle(line)
    x, y = one_move(replies)  # we are white
    assert b.handle("TAKEBACK 4,4") == ["OK"]
    assert stone(b, 4, 4) == EMPTY and stone(b, 3, 3) == BLACK and stone(b, x, y) == WHITE
    assert b.state.to_move == BLACK and len(b.state.moves) == 3
