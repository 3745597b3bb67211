"""Rollouts: positions played to the end with moves sampled from the rollout policy, then scored by area.

Layer: rollout. Many positions are played at once, in lockstep: each move of every board costs one Python move on
its ``LibertyStates`` board, and the pattern weights of all the boards' points come from a few numpy operations
shared by the whole batch, so a batch of 64 costs far less than 64 single rollouts. Rules as in
``engine.rules.playout``: the raw board with simple ko (superko is too rare to matter and costs a history), never
the mover's own single-point eye, never suicide; a side with no candidate left passes, two passes in a row or
``max_moves`` end the game, and the final board is counted Tromp-Taylor with the game's komi. A search in a hurry
passes ``cancelled``: checked before every move of the batch, it ends the batch, and every result of a batch cut
short is NaN (on 19×19 a batch plays for a few hundred milliseconds, past a 1 s byo-yomi period's budget). The
rollouts that had ended by then are the batch's shortest games: keeping only theirs would bias the batch.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from tabula.engine.rollout.patterns import (
    NEAR_BUCKET,
    NUM_CODES,
    OFFSET_BITS,
    liberties_after,
    padded_codes,
    pattern_geometry,
    response_codes,
    state_grids,
)
from tabula.engine.rollout.policy import RolloutPolicy
from tabula.engine.rules.board import NO_POINT, Board
from tabula.engine.rules.coords import BLACK, PASS
from tabula.engine.rules.game import GameState
from tabula.engine.rules.playout import STATE_EMPTY, LibertyStates


def _envelope(policy: RolloutPolicy, boards: Sequence[LibertyStates], colors: Sequence[int], previous: np.ndarray,
              own_previous: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(float64 [B, padded_len] exp(logit) of each point, 0 where it may not play or off the board, and at AMBIGUOUS
    points an upper bound; int32 [B, padded_len] the policy tables' index of each point's pattern). Moves are padded
    points, NO_POINT for none or a pass: its neighbourhood is all NO_POINT, whose weight stays 0."""
    geometry = pattern_geometry(boards[0].board.size)
    grids = state_grids(boards)
    white = np.asarray(colors) != BLACK
    codes = padded_codes(grids, geometry)
    codes += (white * NUM_CODES).astype(np.int32)[:, None]  # the tables' index: mover * NUM_CODES + code
    weights = policy.pattern_exp[codes].astype(np.float64)
    weights *= grids == STATE_EMPTY
    for row, run in enumerate(boards):
        board = run.board
        if board.ko != NO_POINT and board.ko_color == colors[row]:
            weights[row, board.ko] = 0.0
    rows = np.arange(len(boards))[:, None]
    near = geometry.near_padded
    weights[rows, near[own_previous]] *= policy.distance_own_exp[NEAR_BUCKET]
    weights[rows, near[previous]] *= policy.distance_previous_exp[NEAR_BUCKET]
    keys = response_codes(grids, geometry, white, previous)[:, None] << OFFSET_BITS | np.arange(12)
    table = policy.response_keys
    if len(table):
        at = np.minimum(np.searchsorted(table, keys), len(table) - 1)
        factors = np.where(table[at] == keys, policy.response_exp[at], policy.unknown_response_exp)
    else:
        factors = np.full(keys.shape, policy.unknown_response_exp)
    weights[rows, near[previous, :12]] *= factors
    return weights, codes


def _exact_factor(policy: RolloutPolicy, run: LibertyStates, color: int, point: int, code: int) -> float:
    """What an AMBIGUOUS point's upper bound must be multiplied by to make it exact (``point`` padded)."""
    factor = policy.self_atari_exp if liberties_after(run, point, color) == 1 else \
        policy.save_atari_exp if policy.own_in_atari[code] else 1.0
    return factor / policy.ambiguous_bound[code]


def _padded_moves(moves: Sequence[int] | np.ndarray, size: int) -> np.ndarray:
    padded = pattern_geometry(size).padded
    moves = np.asarray(moves, dtype=np.int64)
    return np.where(moves >= 0, padded[np.maximum(moves, 0)], NO_POINT)


def move_weights(policy: RolloutPolicy, boards: Sequence[LibertyStates], colors: Sequence[int],
                 previous: np.ndarray, own_previous: np.ndarray) -> np.ndarray:
    """float64 [B, N*N]: exp(logit) of every point for each board's mover, 0 where it may not play (occupied, own
    eye, suicide, ko). Moves are flat ints, -1 for none or a pass. Equal to ``exp(policy.logits(features(...)))``."""
    size = boards[0].board.size
    weights, codes = _envelope(policy, boards, colors, _padded_moves(previous, size),
                               _padded_moves(own_previous, size))
    rows, points = np.nonzero(policy.ambiguous[codes] & (weights > 0))
    for row, point in zip(rows.tolist(), points.tolist()):
        weights[row, point] *= _exact_factor(policy, boards[row], colors[row], point, int(codes[row, point]))
    return weights[:, pattern_geometry(size).padded]


def sample_moves(weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """int64 [B]: a column drawn from each row of ``weights`` [B, K] in proportion, -1 for a row of zeros."""
    count, points = weights.shape
    cumulative = np.cumsum(weights.ravel())  # one search over all rows: row r's draws lie between its ends
    ends = cumulative[points - 1:: points]
    starts = np.concatenate([[0.0], ends[:-1]])
    totals = ends - starts
    drawn = starts + rng.random(count) * totals
    choice = np.searchsorted(cumulative, drawn, side="right") - np.arange(count) * points
    stale = (choice >= points) | (choice < 0)  # a draw that rounded onto its row's end
    if stale.any():
        choice[stale] = points - 1 - np.argmax(weights[stale][:, ::-1] > 0, axis=1)
    return np.where(totals > 0, choice, -1)


def draw_moves(policy: RolloutPolicy, boards: Sequence[LibertyStates], colors: Sequence[int], previous: np.ndarray,
               own_previous: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """int64 [B]: a padded point drawn for each board's mover from ``move_weights``, -1 to pass (no candidate
    left). ``previous``/``own_previous``: padded points, NO_POINT for none or a pass.

    Adaptive rejection: an AMBIGUOUS point (a string of two liberties beside it) is counted exactly only when it is
    drawn from its upper bound; it is kept with probability exact/bound, else made exact and the row drawn again.
    The draws follow ``move_weights`` exactly, at a fraction of its cost."""
    weights, codes = _envelope(policy, boards, colors, previous, own_previous)
    choice = sample_moves(weights, rng)
    ambiguous = policy.ambiguous
    for row in np.flatnonzero(choice >= 0).tolist():
        point = int(choice[row])
        resolved: set[int] = set()
        while point >= 0 and point not in resolved and ambiguous[codes[row, point]]:
            factor = _exact_factor(policy, boards[row], colors[row], point, int(codes[row, point]))
            if rng.random() < factor:
                break
            resolved.add(point)
            weights[row, point] *= factor
            point = int(sample_moves(weights[row: row + 1], rng)[0])
        choice[row] = point
    return choice


def play_out(states: Sequence[GameState], policy: RolloutPolicy, rng: np.random.Generator,
             max_moves: int | None = None) -> tuple[list[Board], np.ndarray]:
    """(the final raw boards, int64 [B] the moves each rollout played, passes included) of rollouts from ``states``
    (one size; not changed). ``max_moves`` per rollout defaults to three times the number of points."""
    boards, played, _ = _play_out(states, policy, rng, max_moves, None)
    return boards, played


def _play_out(states: Sequence[GameState], policy: RolloutPolicy, rng: np.random.Generator, max_moves: int | None,
              cancelled: Callable[[], bool] | None) -> tuple[list[Board], np.ndarray, bool]:
    """``play_out``, and whether ``cancelled`` (None: never) stopped the batch before every rollout had ended."""
    if not states:
        return [], np.zeros(0, dtype=np.int64), False
    size = states[0].size
    if any(state.size != size for state in states):
        raise ValueError("rollouts of one batch must share a board size")
    limit = 3 * size * size if max_moves is None else max_moves
    boards = [LibertyStates(state.board.copy()) for state in states]
    colors = [state.to_move for state in states]
    previous = _padded_moves([_move_ago(state, 1) for state in states], size)
    own_previous = _padded_moves([_move_ago(state, 2) for state in states], size)
    passes = [state.passes for state in states]
    played = np.zeros(len(states), dtype=np.int64)
    active = [i for i in range(len(states)) if passes[i] < 2]
    stopped = False
    for _ in range(limit):
        if not active:
            break
        if cancelled is not None and cancelled():
            stopped = True
            break
        index = np.array(active)
        moves = draw_moves(policy, [boards[i] for i in active], [colors[i] for i in active], previous[index],
                           own_previous[index], rng)
        played[index] += 1
        still = []
        for i, move in zip(active, moves.tolist()):
            if move < 0:
                boards[i].board.ko = NO_POINT
                passes[i] += 1
                move = NO_POINT
            else:
                boards[i].play(move, colors[i])
                passes[i] = 0
            own_previous[i] = previous[i]
            previous[i] = move
            colors[i] = 3 - colors[i]
            if passes[i] < 2:
                still.append(i)
        active = still
    return [run.board for run in boards], played, stopped


def rollouts(states: Sequence[GameState], policy: RolloutPolicy, rng: np.random.Generator,
             max_moves: int | None = None, cancelled: Callable[[], bool] | None = None) -> np.ndarray:
    """float32 [B]: each rollout's result z from its starting position's side to move: +1 a win, -1 a loss, 0 a
    draw (an integer komi). The search's ``value`` means the same. All NaN when ``cancelled`` stopped the batch
    before its every game had ended."""
    boards, _, stopped = _play_out(states, policy, rng, max_moves, cancelled)
    if stopped:
        return np.full(len(states), np.nan, dtype=np.float32)
    results = np.zeros(len(states), dtype=np.float32)
    for i, (state, board) in enumerate(zip(states, boards)):
        black, white = board.area_score()
        score = black - white - state.rules.komi  # black's view
        results[i] = np.sign(score) if state.to_move == BLACK else -np.sign(score)
    return results


def rollout(state: GameState, policy: RolloutPolicy, rng: np.random.Generator, max_moves: int | None = None) -> float:
    """One rollout from ``state``: z in {-1, +1} (0 for a draw) from the side to move's view."""
    return float(rollouts([state], policy, rng, max_moves)[0])


DEFAULT_OWNERSHIP_ROLLOUTS = 128  # as PlayConfig.ownership_rollouts, which the engine passes


def ownership(state: GameState, policy: RolloutPolicy, rng: np.random.Generator,
              count: int = DEFAULT_OWNERSHIP_ROLLOUTS, max_moves: int | None = None) -> np.ndarray:
    """Mean Tromp-Taylor ownership over ``count`` rollouts from ``state``: float32 [N*N] in [-1, 1], black's view
    (+1: black owns the point at the end of every rollout), as ``engine.rules.playout.ownership`` gives for
    random playouts. A game that ended by two passes is played on: judging its dead stones means playing the
    captures that the passes left out."""
    if count < 1:
        raise ValueError(f"ownership needs at least one rollout, not {count}")
    start = state.copy()
    start.passes = 0
    boards, _ = play_out([start] * count, policy, rng, max_moves)
    sign = np.array([0.0, 1.0, -1.0], dtype=np.float32)
    geometry = boards[0].geometry
    total = np.zeros(len(geometry.padded), dtype=np.float32)
    for board in boards:
        total += sign[np.asarray(board.area_owners())[geometry.padded]]
    return total / count


class PolicyRollouts:
    """``rollouts`` with the policy bound: what the search calls for its leaves (``engine.play.search.Rollout``)."""

    def __init__(self, policy: RolloutPolicy):
        self.policy = policy

    @classmethod
    def load(cls, path: str) -> "PolicyRollouts":
        """From a weights file; ``RolloutPolicyError`` (a ValueError) says what is wrong with an unusable one."""
        return cls(RolloutPolicy.load(path))

    def __call__(self, states: Sequence[GameState], rng: np.random.Generator,
                 cancelled: Callable[[], bool] | None = None) -> np.ndarray:
        return rollouts(states, self.policy, rng, cancelled=cancelled)

    def ownership(self, state: GameState, rng: np.random.Generator,
                  count: int = DEFAULT_OWNERSHIP_ROLLOUTS) -> np.ndarray:
        """``ownership`` with the policy bound."""
        return ownership(state, self.policy, rng, count)


def _move_ago(state: GameState, age: int) -> int:
    """The flat move played ``age`` plies ago, -1 for a pass or none."""
    if len(state.moves) < age:
        return -1
    move = state.moves[-age][1]
    return move if move != PASS else -1


__all__ = ["move_weights", "sample_moves", "draw_moves", "play_out", "rollouts", "rollout", "ownership",
           "PolicyRollouts", "DEFAULT_OWNERSHIP_ROLLOUTS"]
