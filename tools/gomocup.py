"""`tabula gomocup`: freestyle gomoku (five or more in a row) over the Gomocup AI protocol (piskvork's pbrain
protocol, https://plastovicka.github.io/protocl2en.htm) on stdin/stdout.

Layer: tools (an entry point: it builds its config and player). The protocol is parsed by pure functions and one
``Brain`` whose commands are a table of small handlers; ``serve`` is the loop over stdin/stdout. stdout carries only
protocol replies, flushed after each line; logs go to stderr.

Coordinates: Gomocup's ``x,y`` count from 0, ``x`` the column from the left and ``y`` the row from the TOP; the
engine's moves are ``y' * width + x`` with ``y'`` from the BOTTOM (engine/rules/coords.py), so ``y' = height-1-y``.

What the brain answers (the protocol's words): a move as ``x,y`` (BEGIN, TURN, BOARD ... DONE, PLAY); ``OK`` (START,
RECTSTART, RESTART, TAKEBACK); ``ERROR message`` for a command understood but refused (an unsupported size or rule,
a bad coordinate, an occupied point, a command before START), the board kept as it was; ``UNKNOWN message`` for a
command it does not know; the ABOUT line; nothing for INFO and END.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import logging
import math
import random
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from tabula.engine.play.picker import MovePicker
from tabula.engine.play.pure_mcts import DEFAULT_PLAYOUTS, PureMctsPicker, RandomPicker
from tabula.engine.play.timecontrol import MAX_SECONDS, ClockState, TimeSettings, budget_s
from tabula.engine.rules.coords import BLACK, EMPTY, WHITE
from tabula.engine.rules.gomoku import MAX_SIDE, MIN_SIDE, GomokuState, IllegalMoveError

log = logging.getLogger("tabula.gomocup")

N_IN_ROW = 5  # Gomocup's freestyle: five or more in a row win
UNLIMITED_MS = 2_147_483_647  # the protocol's time_left when a match has no time limit
FREESTYLE = 0
RULE_BITS = {1: "exactly five in a row", 2: "continuous game", 4: "renju", 8: "caro"}
OWN_STONE, OPPONENT_STONE, WINNING_LINE = 1, 2, 3  # BOARD fields
ABOUT = {"name": "Tabula", "version": "", "author": "Tabula contributors", "country": "unknown"}  # version: installed


class ProtocolError(ValueError):
    """A command understood but refused: the brain answers ``ERROR <message>`` and keeps its board."""


# -- configuration and players ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GomocupConfig:
    """What ``tabula gomocup`` is started with; built from the command line only, here."""

    player: str = "network"  # --player: a key of PICKERS
    playouts: int = DEFAULT_PLAYOUTS  # pure MCTS playouts per move, at most (the clock may stop it sooner); also the
    # network player's on the boards its network does not play
    # network: gomoku ONNX files (tabula rl --game gomoku), each board size played by the first that plays it; none:
    # the shipped ones (DEFAULT_POINTER)
    weights: tuple[str, ...] = ()
    visits: int = 400  # network: visits a move, at most (the clock may stop it sooner)
    seed: int | None = None  # None: a fresh seed each run
    lag_buffer_s: float = 0.5  # kept back from every turn and from the match time for transport and start-up

    def __post_init__(self) -> None:
        # one file named as a string, or several in any sequence: a tuple, so that configs compare and hash
        object.__setattr__(self, "weights", ((self.weights,) if self.weights else ()) if isinstance(self.weights, str)
                           else tuple(self.weights))
        if self.player not in PICKERS:
            raise ValueError(f"unknown player {self.player!r}; choose from {', '.join(sorted(PICKERS))}")
        if self.playouts < 1:
            raise ValueError(f"--playouts must be at least 1, not {self.playouts}")
        if self.visits < 1:
            raise ValueError(f"--visits must be at least 1, not {self.visits}")
        if not (math.isfinite(self.lag_buffer_s) and 0.0 <= self.lag_buffer_s <= 60.0):
            raise ValueError(f"--lag-buffer must be within 0..60 seconds, not {self.lag_buffer_s}")


# --player name -> how to build its picker from the config and an rng. A new player is one more line here.
PICKERS: dict[str, Callable[[GomocupConfig, random.Random], MovePicker]] = {
    "pure": lambda config, rng: PureMctsPicker(playouts=config.playouts, rng=rng),
    "random": lambda config, rng: RandomPicker(rng),
    "network": lambda config, rng: _network_picker(config, rng),
}


DEFAULT_POINTER = "DEFAULT-gomoku"  # in the shipped weights folder: the gomoku networks played, one a line, in order


def shipped_weights() -> list[Path]:
    """The shipped gomoku networks, the files ``DEFAULT-gomoku`` names in the weights folder, in the order they
    are tried for a board size (NoNetworkError where it names none or a missing file)."""
    from tabula.engine.play.search_player import default_weights

    return default_weights(DEFAULT_POINTER)


class BoardRouter:
    """A ``MovePicker`` that plays each board with the network where it plays that size (a network with a fixed
    head plays one), else with the fallback (pure MCTS), saying so once per size on stderr: a manager's 15x15 or
    20x20 tournament still gets a player."""

    def __init__(self, network: MovePicker, sizes: tuple[int, ...] | None, fallback: MovePicker):
        self.network, self.sizes, self.fallback = network, sizes, fallback
        self._told: set[tuple[int, int]] = set()

    def plays(self, width: int, height: int) -> bool:
        return width == height and (self.sizes is None or width in self.sizes)

    def pick(self, state: GomokuState, budget_s: float | None = None) -> int:
        if self.plays(state.width, state.height):
            return self.network.pick(state, budget_s)
        if (state.width, state.height) not in self._told:
            self._told.add((state.width, state.height))
            log.warning("the networks play %s only: pure MCTS plays this %dx%d board",
                        ", ".join(f"{size}x{size}" for size in self.sizes or ()), state.width, state.height)
        return self.fallback.pick(state, budget_s)


def _network_picker(config: GomocupConfig, rng: random.Random) -> MovePicker:
    """The networks' search through the move picker tabula gtp uses (the search, then MoveDecider), on the
    boards they play, each size by the first network that plays it (a network trained for 9x9 before one that plays
    every size); pure MCTS with ``config.playouts`` on the others."""
    import numpy as np

    from tabula.engine.config import BATCHED_PLAYOUTS_PER_LEAF, SearchConfig
    from tabula.engine.net.evaluator import load_networks
    from tabula.engine.net.netfile import NetworkFileError
    from tabula.engine.play.search_player import best_move_picker

    seed = rng.getrandbits(63)
    paths = list(config.weights) or shipped_weights()
    evaluator, networks = load_networks(paths, np.random.SeedSequence(seed))
    for path, network in zip(paths, networks):
        if not network.encoding.accepts(GomokuState(9, 9, N_IN_ROW)):
            raise NetworkFileError(str(path), f"a network of another game (its input is {network.encoding.name}), "
                                              f"not of gomoku")
    # The plain exploration, as the gomoku networks were measured with (docs/STRENGTH.md): the variance scaling
    # was measured on Go only, and where a network's values agree (a uniform one, a drawn-looking position) it dives
    # into one line and can miss an immediate win (tests/test_gomoku_search.py). Likewise the batches they were
    # measured with (the batched rule): one leaf a thread was measured on Go only, and costs playouts a second under
    # Gomocup's clock.
    network = best_move_picker(evaluator, SearchConfig(visits=config.visits, cpuct_utility_stdev_scale=0.0,
                                                       playouts_per_leaf=BATCHED_PLAYOUTS_PER_LEAF), seed)
    return BoardRouter(network, evaluator.board_sizes, PureMctsPicker(playouts=config.playouts, rng=rng))


# -- pure parsing -------------------------------------------------------------------------------------------------

def split_command(line: str) -> tuple[str, str]:
    """``"turn 10,10\\r\\n"`` -> ``("TURN", "10,10")``: the verb upper-cased, the rest stripped."""
    verb, _, rest = line.strip().partition(" ")
    return verb.upper(), rest.strip()


def parse_int(text: str, what: str) -> int:
    text = text.strip()
    if not text or not (text.lstrip("+-").isdigit() and text.isascii()):
        raise ProtocolError(f"bad {what} {text!r}: not an integer")
    return int(text)


def parse_ints(text: str, count: int, what: str) -> list[int]:
    """``count`` comma-separated integers (spaces around them allowed), e.g. ``"10, 11"``."""
    parts = text.split(",")
    try:
        if len(parts) != count:
            raise ProtocolError("wrong count")
        return [parse_int(part, what) for part in parts]
    except ProtocolError:
        raise ProtocolError(f"bad {what} {text!r}: {count} comma-separated integers expected") from None


def parse_xy(text: str, width: int, height: int) -> tuple[int, int]:
    """``"x,y"`` on a ``width`` x ``height`` board, or ProtocolError naming what is wrong."""
    x, y = parse_ints(text, 2, "coordinates")
    if not (0 <= x < width and 0 <= y < height):
        raise ProtocolError(f"coordinates {x},{y} are off the {width}x{height} board")
    return x, y


def parse_board_line(text: str, width: int, height: int) -> tuple[int, int, int]:
    """A BOARD line ``"x,y,field"`` -> (x, y, field); field 1 is our stone, 2 the opponent's, 3 a continuous
    game's winning line (which freestyle does not have)."""
    x, y, field = parse_ints(text, 3, "BOARD line")
    if not (0 <= x < width and 0 <= y < height):
        raise ProtocolError(f"coordinates {x},{y} are off the {width}x{height} board")
    if field == WINNING_LINE:
        raise ProtocolError("field 3 (a continuous game's winning line) is not supported: Tabula plays single games")
    if field not in (OWN_STONE, OPPONENT_STONE):
        raise ProtocolError(f"bad field {field}: 1 (own stone) or 2 (opponent's stone) expected")
    return x, y, field


def check_size(width: int, height: int) -> None:
    if not (MIN_SIDE <= width <= MAX_SIDE and MIN_SIDE <= height <= MAX_SIDE):
        raise ProtocolError(f"unsupported size {width}x{height}: Tabula plays boards from {MIN_SIDE}x{MIN_SIDE} to "
                            f"{MAX_SIDE}x{MAX_SIDE}")


def point_to_move(x: int, y: int, width: int, height: int) -> int:
    """Gomocup (x from the left, y from the top) -> the engine's flat move (y from the bottom)."""
    return (height - 1 - y) * width + x


def move_to_point(move: int, width: int, height: int) -> tuple[int, int]:
    row, x = divmod(move, width)
    return x, height - 1 - row


def format_point(x: int, y: int) -> str:
    return f"{x},{y}"


def rule_problem(rule: int) -> str | None:
    """Why ``INFO rule`` value ``rule`` is a game Tabula does not play, or None for freestyle (0)."""
    if rule == FREESTYLE:
        return None
    names = [name for bit, name in RULE_BITS.items() if rule & bit]
    if rule & ~sum(RULE_BITS):
        names.append("unknown bits")
    return (f"rule {rule} ({', '.join(names)}) is not supported: Tabula plays freestyle gomoku, five or more in a "
            "row win (rule 0)")


def installed_version() -> str:
    try:
        return importlib.metadata.version("tabula")
    except importlib.metadata.PackageNotFoundError:  # a checkout that was never installed
        return "unknown"


def about_line(fields: dict[str, str] = ABOUT) -> str:
    """The ABOUT answer: ``name="Tabula", version="...", ...`` (keyword, equals sign, quoted value)."""
    fields = dict(fields, version=fields.get("version") or installed_version())
    return ", ".join(f'{key}="{value}"' for key, value in fields.items())


@dataclass
class Limits:
    """What INFO has said so far; None where the manager has said nothing. Times in milliseconds, as sent."""

    timeout_turn_ms: int | None = None  # 0: play as fast as possible
    timeout_match_ms: int | None = None  # 0: no limit
    time_left_ms: int | None = None  # sent before every move when the match is timed; UNLIMITED_MS: no limit
    max_memory_bytes: int | None = None  # 0: no limit
    game_type: int | None = None  # 0 human opponent, 1 brain, 2 tournament, 3 network tournament
    rule: int = FREESTYLE
    folder: str | None = None


INT_INFO_KEYS = {"timeout_turn": "timeout_turn_ms", "timeout_match": "timeout_match_ms", "time_left": "time_left_ms",
                 "max_memory": "max_memory_bytes", "game_type": "game_type", "rule": "rule"}


def move_budget_s(limits: Limits, used_s: float, move_number: int, width: int, height: int,
                  lag_buffer_s: float) -> float | None:
    """Seconds the coming move's search may take (None: no limit): within the turn's limit less a lag buffer, and
    within a share of the match time left, as GTP's absolute time control shares its main time (timecontrol.py).

    Args:
        used_s: time this brain has spent on its moves this game, for the match time when the manager sends
            ``timeout_match`` but no ``time_left``.
        move_number: stones on the board (both colours).
    """
    budgets = []
    if limits.timeout_turn_ms is not None:
        turn_s = max(0, limits.timeout_turn_ms) / 1000.0
        # A short turn (Gomocup's fastgame has 5 s) keeps at least three quarters of it.
        budgets.append(max(0.0, turn_s - min(lag_buffer_s, 0.25 * turn_s)))
    if limits.time_left_ms is not None and limits.time_left_ms < UNLIMITED_MS:
        left_s = limits.time_left_ms / 1000.0
    elif limits.time_left_ms is None and limits.timeout_match_ms:
        left_s = limits.timeout_match_ms / 1000.0 - used_s
    else:
        left_s = None
    if left_s is not None and left_s < MAX_SECONDS:
        left_s = max(0.0, left_s)
        side = max(1, round(math.sqrt(width * height)))
        match = budget_s(TimeSettings.absolute(left_s), ClockState(main_left_s=left_s), move_number, side,
                         lag_buffer_s)
        if match is not None:
            budgets.append(match)
    return min(budgets) if budgets else None


# -- the brain ----------------------------------------------------------------------------------------------------

Handler = Callable[["Brain", str], list[str]]
COMMANDS: dict[str, Handler] = {}


def command(verb: str) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        COMMANDS[verb] = handler
        return handler
    return register


class Brain:
    """The protocol's state: the board (None before START), the limits INFO gave, the player, and a multi-line
    block (BOARD or SWAP2BOARD) being read. ``handle`` takes one input line and returns the reply lines."""

    def __init__(self, player: MovePicker, lag_buffer_s: float = GomocupConfig.lag_buffer_s,
                 clock: Callable[[], float] = time.monotonic, n_in_row: int = N_IN_ROW):
        self.player = player
        self.lag_buffer_s = lag_buffer_s
        self.clock = clock
        self.n_in_row = n_in_row
        self.state: GomokuState | None = None
        self.limits = Limits()
        self.used_s = 0.0  # spent on our moves since START or RESTART
        self.block: tuple[str, list[str]] | None = None  # (verb, lines) of a BOARD / SWAP2BOARD being read
        self.started_s = 0.0  # when the command being answered arrived (a block: its first line)
        self.finished = False  # END was received

    def handle(self, line: str) -> list[str]:
        """The reply lines to one input line; never raises (an unexpected error answers ``ERROR internal error``,
        with the traceback on stderr)."""
        text = line.strip()
        if not text:
            return []
        try:
            if self.block is not None:
                return self._block_line(text)
            self.started_s = self.clock()
            verb, rest = split_command(text)
            handler = COMMANDS.get(verb)
            if handler is None:
                return [f"UNKNOWN command {verb!r} is not part of the Gomocup protocol this brain speaks"]
            return handler(self, rest)
        except ProtocolError as error:
            return [f"ERROR {error}"]
        except Exception as error:  # the brain must outlive any bug: answer, log, keep serving
            traceback.print_exc(file=sys.stderr)
            return [f"ERROR internal error: {type(error).__name__}: {error}"]

    def _block_line(self, text: str) -> list[str]:
        verb, lines = self.block
        word = text.upper()
        if word == "END":
            self.block = None
            return end(self, "")
        if word != "DONE":
            lines.append(text)
            return []
        self.block = None
        if verb == "SWAP2BOARD":
            raise ProtocolError("swap2 openings are not supported: Tabula plays freestyle gomoku")
        return self._board_done(lines)

    # -- helpers of the handlers --------------------------------------------------------------------------------

    def require_state(self) -> GomokuState:
        if self.state is None:
            raise ProtocolError("no board yet: send START [size] (or RECTSTART [width],[height]) first")
        return self.state

    def require_rule(self) -> None:
        problem = rule_problem(self.limits.rule)
        if problem is not None:
            raise ProtocolError(problem)

    def new_game(self, width: int, height: int) -> None:
        self.state = GomokuState(width, height, self.n_in_row)
        self.used_s = 0.0

    def our_move(self) -> list[str]:
        """Choose, play and answer the side to move's move (ours)."""
        state = self.require_state()
        value = state.terminal_value()
        if value is not None:
            winner = "black" if state.winner == BLACK else "white"
            outcome = "a draw, the board is full" if value == 0 else f"{winner} has five in a row"
            raise ProtocolError(f"the game is over ({outcome}): there is no move to make")
        budget = move_budget_s(self.limits, self.used_s, len(state.moves), state.width, state.height,
                               self.lag_buffer_s)
        if budget is not None:
            budget = max(0.0, budget - (self.clock() - self.started_s))  # reading the command counts too
        move = self.player.pick(state, budget)
        state.play(move)
        elapsed = self.clock() - self.started_s
        self.used_s += elapsed
        x, y = move_to_point(move, state.width, state.height)
        log.info("move %d: %d,%d in %.3f s (budget %s)", len(state.moves), x, y, elapsed,
                 "none" if budget is None else f"{budget:.3f} s")
        return [format_point(x, y)]

    def point(self, text: str) -> int:
        """The engine move of ``"x,y"`` on the current board (ProtocolError when it is bad or off the board)."""
        state = self.require_state()
        x, y = parse_xy(text, state.width, state.height)
        return point_to_move(x, y, state.width, state.height)

    def play_checked(self, move: int, verb: str, text: str) -> None:
        try:
            self.require_state().play(move)
        except IllegalMoveError as error:
            raise ProtocolError(f"{verb} {text}: illegal move ({error.reason})") from None

    def _board_done(self, lines: list[str]) -> list[str]:
        """BOARD ... DONE: the position from the lines, then our move. A bad line refuses the whole BOARD and
        keeps the board as it was."""
        old = self.require_state()
        self.require_rule()
        width, height = old.width, old.height
        own: list[int] = []
        theirs: list[int] = []
        seen: set[int] = set()
        for number, text in enumerate(lines, 1):
            try:
                x, y, field = parse_board_line(text, width, height)
            except ProtocolError as error:
                raise ProtocolError(f"BOARD line {number} {text!r}: {error}; board unchanged") from None
            move = point_to_move(x, y, width, height)
            if move in seen:
                raise ProtocolError(f"BOARD line {number} {text!r}: {x},{y} is occupied; board unchanged")
            seen.add(move)
            (own if field == OWN_STONE else theirs).append(move)
        # Black moved first: with as many stones each we are black, one fewer and we are white. The manager may
        # send the stones in any order (freestyle), so each colour's are played in the order given, alternately.
        ours = WHITE if len(theirs) > len(own) else BLACK
        black, white = (own, theirs) if ours == BLACK else (theirs, own)
        state = GomokuState(width, height, self.n_in_row)
        order = []
        for i in range(max(len(black), len(white))):
            order += [(BLACK, black[i])] if i < len(black) else []
            order += [(WHITE, white[i])] if i < len(white) else []
        for color, move in order:
            if state.winner is not None:
                raise ProtocolError("BOARD: the position already has five in a row; board unchanged")
            state.play(move, color)
        state.to_move = ours
        if state.terminal_value() is not None:
            raise ProtocolError("BOARD: the game in this position is over; board unchanged")
        self.state = state
        return self.our_move()


# -- the handlers -------------------------------------------------------------------------------------------------

@command("START")
def start(brain: Brain, rest: str) -> list[str]:
    size = parse_int(rest, "board size")
    check_size(size, size)
    brain.new_game(size, size)
    return ["OK"]


@command("RECTSTART")
def rectstart(brain: Brain, rest: str) -> list[str]:
    width, height = parse_ints(rest, 2, "board size")
    check_size(width, height)
    brain.new_game(width, height)
    return ["OK"]


@command("RESTART")
def restart(brain: Brain, rest: str) -> list[str]:
    state = brain.require_state()
    brain.new_game(state.width, state.height)
    return ["OK"]


@command("BEGIN")
def begin(brain: Brain, rest: str) -> list[str]:
    brain.require_state()
    brain.require_rule()
    return brain.our_move()


@command("TURN")
def turn(brain: Brain, rest: str) -> list[str]:
    """The opponent's move, then ours. Once the opponent's stone is in, it stays, even when it ends the game."""
    brain.require_state()
    brain.require_rule()
    brain.play_checked(brain.point(rest), "TURN", rest)
    return brain.our_move()


@command("PLAY")
def play(brain: Brain, rest: str) -> list[str]:
    """The manager imposes our move (its answer to a SUGGEST): play it and echo it."""
    state = brain.require_state()
    move = brain.point(rest)
    brain.play_checked(move, "PLAY", rest)
    return [format_point(*move_to_point(move, state.width, state.height))]


@command("BOARD")
def board(brain: Brain, rest: str) -> list[str]:
    brain.require_state()
    brain.block = ("BOARD", [])
    return []


@command("SWAP2BOARD")
def swap2board(brain: Brain, rest: str) -> list[str]:
    brain.block = ("SWAP2BOARD", [])  # read to its DONE so that its lines are not taken for commands
    return []


@command("DONE")
def done(brain: Brain, rest: str) -> list[str]:
    raise ProtocolError("DONE without a BOARD before it")


@command("TAKEBACK")
def takeback(brain: Brain, rest: str) -> list[str]:
    """Take the stone at x,y off (normally the last one played); the colour that played it moves next."""
    state = brain.require_state()
    move = brain.point(rest)
    color = state.color_at(move)
    if color == EMPTY:
        raise ProtocolError(f"TAKEBACK {rest}: there is no stone there")
    if state.last_move == move:
        state.undo()
        return ["OK"]
    rebuilt = GomokuState(state.width, state.height, brain.n_in_row)
    for stone_color, stone in state.moves:
        if stone != move:
            rebuilt.play(stone, stone_color)
    rebuilt.to_move = color
    brain.state = rebuilt
    return ["OK"]


@command("INFO")
def info(brain: Brain, rest: str) -> list[str]:
    """Never answered (the manager does not read replies to INFO): a bad or unknown key is logged and ignored;
    an unsupported rule is refused at the next move."""
    key, _, value = rest.partition(" ")
    key, value = key.lower(), value.strip()
    if key in INT_INFO_KEYS:
        try:
            setattr(brain.limits, INT_INFO_KEYS[key], parse_int(value, f"INFO {key}"))
        except ProtocolError as error:
            log.warning("ignored: %s", error)
            return []
        if key == "rule" and rule_problem(brain.limits.rule):
            log.warning("%s", rule_problem(brain.limits.rule))
    elif key == "folder":
        brain.limits.folder = value
    elif key != "evaluate":  # evaluate is for debug builds and must not be answered on stdout
        log.info("ignored unknown INFO %s", key)
    return []


@command("ABOUT")
def about(brain: Brain, rest: str) -> list[str]:
    return [about_line()]


@command("END")
def end(brain: Brain, rest: str) -> list[str]:
    brain.finished = True
    return []


# -- the loop -----------------------------------------------------------------------------------------------------

def serve(brain: Brain, stdin: TextIO, stdout: TextIO) -> None:
    """Answer the lines of ``stdin`` until END or the end of input, flushing every reply line."""
    while not brain.finished:
        line = stdin.readline()
        if not line:
            return
        for reply in brain.handle(line):
            stdout.write(reply + "\n")
            stdout.flush()


def parse_args(argv: list[str]) -> GomocupConfig:
    defaults = GomocupConfig()
    parser = argparse.ArgumentParser(prog="tabula gomocup",
                                     description="Play freestyle gomoku (five or more in a row) over the Gomocup AI "
                                                 "protocol on stdin/stdout; logs go to stderr.")
    parser.add_argument("--player", default=defaults.player, choices=sorted(PICKERS),
                        help="network: the search over --weights (pure MCTS on boards the network does not play); "
                             "pure: UCT with random rollouts (the AlphaZero chapter's pure MCTS); random: a uniformly "
                             "random move (default: %(default)s)")
    parser.add_argument("--weights", action="append", default=[],
                        help="a gomoku ONNX network, for --player network; repeat it for several, each board size "
                             "played by the first that plays it (default: the shipped ones)")
    parser.add_argument("--visits", type=int, default=defaults.visits,
                        help="the network's visits a move, at most (default: %(default)s)")
    parser.add_argument("--playouts", type=int, default=defaults.playouts,
                        help="pure MCTS playouts per move, at most; the time limits may stop it sooner "
                             "(default: %(default)s)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: fresh each run)")
    parser.add_argument("--lag-buffer", type=float, default=defaults.lag_buffer_s,
                        help="seconds kept back from each turn (at most a quarter of it) and from the match time "
                             "(default: %(default)s)")
    parser.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, stream=sys.stderr, format="%(name)s: %(message)s")
    try:
        config = GomocupConfig(player=args.player, playouts=args.playouts, weights=tuple(args.weights),
                               visits=args.visits, seed=args.seed, lag_buffer_s=args.lag_buffer)
    except ValueError as error:
        parser.error(str(error))
    for path in config.weights:
        if not Path(path).is_file():
            parser.error(f"--weights {path}: no such file")
    return config


def main(argv: list[str] | None = None) -> int:
    config = parse_args(sys.argv[1:] if argv is None else argv)
    rng = random.Random(config.seed)
    from tabula.engine.net.netfile import NetworkFileError
    from tabula.engine.play.search_player import NoNetworkError

    try:
        player = PICKERS[config.player](config, rng)
    except (NoNetworkError, NetworkFileError) as error:
        print(f"tabula gomocup: {error}", file=sys.stderr)
        return 2
    brain = Brain(player, lag_buffer_s=config.lag_buffer_s)
    log.info("tabula gomocup: %s", config)
    serve(brain, sys.stdin, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
