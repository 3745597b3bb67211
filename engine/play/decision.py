"""The one place a search's result becomes the move played: temperature, passing and resignation.

Layer: above search and playout, below the players (``search_player`` for GTP, ``tools/selfplay`` for self-play and
gating), which all decide through ``MoveDecider`` as Minigo's MCTSPlayer and Leela Zero's ``UCTSearch::think`` do.
The player keeps what surrounds a decision: the clock (``engine.play.player``) and kgs-genmove_cleanup's choice of
moves (``engine.play.search_player``).
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from tabula.engine.config import PlayConfig
from tabula.engine.play.judging import count_without
from tabula.engine.play.result import SearchResult
from tabula.engine.rules import playout
from tabula.engine.rules.coords import BLACK, EMPTY, PASS, RESIGN, WHITE
from tabula.engine.rules.game import TERRITORY, GameState
from tabula.engine.rules.interface import has_pass

PASS_CHECK_PLAYOUTS = 24  # random playouts behind the dead-stone-aware count checked before passing (~0.05 s 19x19)
SETTLED_OWNERSHIP = 0.5  # see settled_points()
# An enclosed region's mean ownership for its colour above which only_dame_left() calls it territory: random playouts
# own a 36-point 9x9 territory behind an eyeless wall 0.28 to 0.7 on average (40 seeds of 24 playouts), a region
# the opponent can take from outside is below 0.
ENCLOSED_OWNERSHIP = 0.2
# After the opponent's pass, a move inside settled territory gives way to an open point whose winrate is at most this
# far below it (winrate, [0, 1]).
OPEN_MOVE_MARGIN = 0.05


def pass_rules(state: GameState, result: SearchResult, move: int, priors: dict[int, float] | None = None,
               lead: float | None = None) -> int:
    """Pass to end a won game after the opponent's pass; never pass into a lost count.

    ``lead``: our lead if the game ended now (default: the Tromp-Taylor count, as self-play scores games).
    ``priors`` (move -> root prior) choose among the non-eye legal moves when the search offers nothing but a pass;
    without them the first such move is taken.
    """
    color = state.to_move
    score = state.area_score() * (1.0 if color == BLACK else -1.0) if lead is None else lead
    if opponent_passed(state) and score > 0:
        return PASS
    if move == PASS and score < 0:
        others = [c.move for c in result.candidates if c.move != PASS]
        if others:
            return others[0]
        board = state.board
        padded = board.geometry.padded
        fallback = [m for m in state.legal_moves() if not board.is_own_eye(padded[m], color)]
        if fallback:
            return max(fallback, key=lambda m: priors.get(m, 0.0)) if priors else fallback[0]
    return move


def opponent_passed(state: GameState) -> bool:
    """Whether the last move was the opponent's pass (the side to move may end the game by passing)."""
    return bool(state.moves) and state.moves[-1] == (3 - state.to_move, PASS)


def settled_points(state: GameState, owned: np.ndarray) -> np.ndarray:
    """bool [N*N]: the empty points inside one side's territory as a referee would count now. The stones that
    ``owned`` (black's-view ownership) calls dead are taken off; then a point is settled when its empty region
    touches stones of one colour only and ``owned`` gives it to that colour too (at least ``SETTLED_OWNERSHIP``),
    so that a region whose walls are still in doubt does not count. Dead stones are taken off first because a
    territory with the opponent's dead stones in it is still territory: playing there is a point lost under
    territory counting all the same (a 9x9 game against GNU Go saw ten such stones after its pass)."""
    dead = playout.dead_stones(state, owned)
    owners = (state.without_stones(dead) if dead else state).board.area_owners()
    settled = np.zeros(state.size * state.size, dtype=bool)
    board = state.board
    for flat, pad in enumerate(board.geometry.padded):
        if board.color[pad] != EMPTY:
            continue
        if owners[pad] == BLACK:
            settled[flat] = owned[flat] >= SETTLED_OWNERSHIP
        elif owners[pad] == WHITE:
            settled[flat] = owned[flat] <= -SETTLED_OWNERSHIP
    return settled


def referee_count(state: GameState, owned: np.ndarray) -> float:
    """The count under ``state.rules`` (black's view, komi included) after a referee takes off the stones that
    ``owned`` calls dead, the empty points of a seki counting for nobody where the rules say so."""
    return count_without(state, playout.dead_stones(state, owned))


def _region(state: GameState, point: int) -> list[int]:
    """Padded points of the empty region of the empty flat ``point``."""
    board = state.board
    color = board.color
    neighbors = board.geometry.neighbors
    start = board.geometry.padded[point]
    region, seen = [start], {start}
    for pad in region:
        for neighbor in neighbors[pad]:
            if color[neighbor] == EMPTY and neighbor not in seen:
                seen.add(neighbor)
                region.append(neighbor)
    return region


def _touches(state: GameState, pad: int) -> int:
    """The colours (a BLACK|WHITE mask) of the stones beside the padded point ``pad``."""
    color = state.board.color
    mask = 0
    for neighbor in state.board.geometry.neighbors[pad]:
        if color[neighbor] in (BLACK, WHITE):
            mask |= color[neighbor]
    return mask


def might_be_settled(state: GameState, move: int) -> bool:
    """A cheap look before ``only_dame_left``: whether ``move``'s empty region reaches one colour only (territory)
    or every point of it touches both colours (dame, which no stone turns into anyone's territory)."""
    touches = [_touches(state, pad) for pad in _region(state, move)]
    reaches = 0
    for mask in touches:
        reaches |= mask
    return reaches in (BLACK, WHITE) or all(mask == BLACK | WHITE for mask in touches)


def only_dame_left(state: GameState, owned: np.ndarray) -> bool:
    """Whether the game is settled for territory counting. In the position without the stones ``owned`` calls dead
    no live string is in atari, and every empty region is territory (it reaches one colour only, and ``owned``
    gives it to that colour, at least ``ENCLOSED_OWNERSHIP`` on average over the region) or dame (every point of
    it touches both colours, so that filling it turns no point into anyone's territory)."""
    dead = playout.dead_stones(state, owned)
    cleaned = state.without_stones(dead) if dead else state
    board = cleaned.board
    if any(len(liberties) == 1 for liberties in board.liberties.values()):
        return False
    flat = board.geometry.flat
    done: set[int] = set()
    for pad in board.geometry.padded:
        if board.color[pad] != EMPTY or pad in done:
            continue
        region = _region(cleaned, flat[pad])
        done.update(region)
        touches = [_touches(cleaned, point) for point in region]
        reaches = 0
        for mask in touches:
            reaches |= mask
        if reaches in (BLACK, WHITE):
            mean = float(np.mean(owned[[flat[point] for point in region]])) * (1.0 if reaches == BLACK else -1.0)
            if mean < ENCLOSED_OWNERSHIP:
                return False
        elif not all(mask == BLACK | WHITE for mask in touches):
            return False
    return True


def _beside_short_string(state: GameState, move: int) -> bool:
    """Whether ``move`` touches a string of either colour with two liberties or fewer: it may capture, save or
    connect (a move inside one's own territory that a shortage of liberties makes necessary)."""
    board = state.board
    pad = board.geometry.padded[move]
    return any(board.color[n] in (BLACK, WHITE) and len(board.liberties[board.root[n]]) <= 2
               for n in board.geometry.neighbors[pad])


@dataclass
class Decision:
    """A decided move (a point, PASS or RESIGN) and the search's value of the position for the mover, in [-1, 1]."""

    move: int
    value: float


class MoveDecider:
    """Turns search results into moves for one game at a time.

    Fixed: ``config`` (PlayConfig), ``rng`` (temperature draws), ``playout_rng`` (the referee-aware counts).
    Per game: how many of each colour's moves in a row looked hopeless. A game whose move number goes down (a new
    game, an undo) starts the counts again.
    """

    def __init__(self, config: PlayConfig, rng: np.random.Generator, playout_rng: random.Random | None = None):
        self.config = config
        self.rng = rng
        self.playout_rng = playout_rng or random.Random(int(rng.integers(1 << 62)))
        self._hopeless = {BLACK: 0, WHITE: 0}
        self._last_move_number = -1
        self._resign_winrate = config.resign_winrate

    def decide(self, state: GameState, result: SearchResult, priors: dict[int, float] | None = None,
               resign_winrate: float | None = None, count: float | None = None) -> Decision:
        """The move for the side to move in ``state``, from ``result`` (a search of ``state``). ``priors``
        (move -> root prior) pick a move when the pass rules refuse the search's pass and it offers nothing else.
        ``resign_winrate``: this move's threshold where it is not the configuration's (the network's own).
        ``count``: where the caller made one, the count a referee would make now (black's view, komi included, the
        dead stones judged in full as ``final_score`` judges them); after the opponent's pass it stands in for the
        quick estimate of ``PASS_CHECK_PLAYOUTS`` random playouts, which kills a group living in seki or by a shared
        liberty."""
        self._resign_winrate = self.config.resign_winrate if resign_winrate is None else resign_winrate
        self._new_game_check(state)
        config = self.config
        value = result.candidates[0].value if result.candidates else 0.0
        move = result.move
        if len(state.moves) < config.temperature_moves:
            move = self.sample(result, config.temperature)
        if has_pass(state):  # passing and counting are Go's; a game without a pass plays the search's move
            move = self._pass_rules(state, result, move, priors, count)
        if move == RESIGN or (result.candidates and self._should_resign(state, value)):
            move = RESIGN
        return Decision(move, value)

    def sample(self, result: SearchResult, temperature: float) -> int:
        """A root move drawn in proportion to visits^(1/temperature); temperature 0 is the search's own move."""
        candidates = [c for c in result.candidates if c.visits > 0]
        if not candidates or temperature <= 0:
            return result.move
        visits = np.array([c.visits for c in candidates], dtype=np.float64)
        weights = (visits / visits.max()) ** (1.0 / temperature)  # scaled first: no overflow at a low temperature
        weights /= weights.sum()
        return candidates[int(self.rng.choice(len(candidates), p=weights))].move

    def _new_game_check(self, state: GameState) -> None:
        if len(state.moves) < self._last_move_number:
            self._hopeless = {BLACK: 0, WHITE: 0}
        self._last_move_number = len(state.moves)

    def _pass_rules(self, state: GameState, result: SearchResult, move: int,
                    priors: dict[int, float] | None, count: float | None = None) -> int:
        """``pass_rules``; with ``referee_aware``, with the count that a referee removing dead stones would make.

        A Tromp-Taylor count calls our dead stones alive: a weak network that passes while it leads by that count
        lets the opponent kill everything (a 9x9 match saw B+73.5 after white passed at move 18 "ahead"). So
        before passing, the lead is also estimated from random-playout ownership (after the opponent's pass, by
        ``count`` where the caller made one), and the smaller lead decides.

        After the opponent's pass, a move on a point that is already settled (inside either side's territory,
        dead stones taken off: ``settled_points``) changes nothing under area counting and costs a point under
        territory counting (KGS, OGS's Japanese rules, GNU Go as referee). Such a move gives way to the search's
        best move on a point still open that the search rates about as well (``OPEN_MOVE_MARGIN``); where there is
        none, to a pass, or to a resignation where the count says the game is lost, the search rates its move under
        50% and resigning is allowed at this point of the game. And after the opponent's pass, behind
        by the referee-aware count, when no move the search tried has a chance (``_hopeless_after``), it passes (or
        resigns) at once: GNU Go's territory count saw 10 stones played into its area in a lost 9x9 game.

        Under territory scoring the counts are the rules' (territory and prisoners, ``GameState.score``), and a move
        on a dame or inside settled territory gives way to a pass, opponent's pass or not, when that is all the game
        has left (``only_dame_left``) and the count is ours: a stone in one's own territory costs a point, and no
        rule asks for the dame to be filled. A move beside a string short of liberties is left alone (it may be the
        defence that filled dame made necessary)."""
        if not self.config.referee_aware:
            return pass_rules(state, result, move, priors)
        color = state.to_move
        passed = opponent_passed(state)
        sign = 1.0 if color == BLACK else -1.0
        territory = state.rules.scoring == TERRITORY
        counted = lead = (state.score() if territory else state.area_score()) * sign
        owned = None
        estimated = lead
        if (move == PASS and lead >= 0) or passed:
            owned = playout.ownership(state, self.playout_rng, PASS_CHECK_PLAYOUTS)
            if passed and count is not None:
                # the game ends if we pass: worth the full judgement (a 13x13 game against GNU Go was lost from
                # W+15.5 when 24 playouts killed a group with one eye and a shared liberty, docs/STRENGTH.md)
                estimated = count * sign
            else:
                estimated = (referee_count(state, owned) if territory
                             else float(owned.sum()) - state.counted_komi) * sign
            lead = min(lead, estimated)
        move = pass_rules(state, result, move, priors, lead=lead)
        # Where only the opponent's dead stones make the plain count a loss, removing them is what moves are for.
        cleaning_up = counted < 0 < estimated
        if territory and move not in (PASS, RESIGN) and not cleaning_up and not _beside_short_string(state, move) \
                and (owned is not None or might_be_settled(state, move)):
            if owned is None:
                owned = playout.ownership(state, self.playout_rng, PASS_CHECK_PLAYOUTS)
            if only_dame_left(state, owned) and referee_count(state, owned) * sign > 0:
                return PASS
        if not passed or move in (PASS, RESIGN) or cleaning_up:
            return move
        ending = RESIGN if lead < 0 and self._may_resign(state) else PASS
        if lead < 0 and self._hopeless_after(result):
            return ending
        settled = settled_points(state, owned)
        if not settled[move]:
            return move
        # an open point only where the search rates it about as well: the first open candidate can be a
        # self-atari the search tried and rejected (a 13-stone group given away at 0.71 against 0.98)
        chosen = next((c.winrate for c in result.candidates if c.move == move), 0.0)
        open_moves = [c.move for c in result.candidates if c.move != PASS and not settled[c.move]
                      and c.winrate >= chosen - OPEN_MOVE_MARGIN]
        if open_moves:
            return open_moves[0]
        # resign only where the search too calls the game lost; a pass lets the referee's count decide
        return ending if chosen < 0.5 else PASS

    def _hopeless_after(self, result: SearchResult) -> bool:
        """Whether every move but a pass that the search tried is below ``lost_winrate``.

        The pass itself is left out: the search scores a game ended by two passes with Tromp-Taylor, which counts
        our dead stones as alive, so a pass can look won when the referee-aware lead says it is lost. A network
        whose value says nothing (about 50% everywhere) never makes a position hopeless, and the game goes on."""
        tried = [c.winrate for c in result.candidates if c.move != PASS and c.visits > 0]
        return bool(tried) and max(tried) < self.config.lost_winrate

    def _may_resign(self, state: GameState) -> bool:
        """Whether resigning is on and the game is past its first ``resign_after`` share of the board's points."""
        area = state.size * state.size
        return self._resign_winrate > 0 and len(state.moves) >= int(self.config.resign_after * area)

    def _should_resign(self, state: GameState, value: float) -> bool:
        """Leela Zero's rule, made patient: the winrate under the threshold for ``resign_consecutive`` moves in a
        row, never in the first ``resign_after`` of the board's points, and a lower threshold as white in handicap
        games."""
        config = self.config
        color = state.to_move
        if self._resign_winrate <= 0:
            return False
        area = state.size * state.size
        moves = len(state.moves)
        if not self._may_resign(state):
            self._hopeless[color] = 0
            return False
        handicap = getattr(state, "handicap", 0)  # Go's handicap stones; other games have none
        threshold = self._resign_winrate * resign_threshold_factor(moves, area, handicap, color)
        winrate = (value + 1.0) / 2.0
        self._hopeless[color] = self._hopeless[color] + 1 if winrate < threshold else 0
        return self._hopeless[color] >= config.resign_consecutive


def resign_threshold_factor(moves: int, area: int, handicap: int, color: int) -> float:
    """What the resignation threshold is multiplied by after ``moves`` moves on a board of ``area`` points: 1, but
    for white in a handicap game, whose network is pessimistic early, 1 / (1 + handicap) at first, blended to 1 by
    60% of the board's points in moves. (tabula resign calibrates with the same rule.)"""
    if handicap <= 0 or color != WHITE:
        return 1.0
    blend = min(1.0, moves / (0.6 * area))
    return blend + (1.0 - blend) / (1 + handicap)


__all__ = ["MoveDecider", "resign_threshold_factor", "Decision", "pass_rules", "opponent_passed", "settled_points",
           "PASS_CHECK_PLAYOUTS"]
