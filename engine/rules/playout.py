"""Random playouts: uniformly random legal moves that never fill the mover's own single-point eye.

Layer: above game. Used by the baseline ``RandomGoPicker``, by ``final_status_list`` (ownership estimates, dead
stones, seki), by the board benchmark, and (``LibertyStates``) by the pattern rollouts of ``engine.rollout``.
``rng`` is always a ``random.Random`` passed in by the caller. Playouts run on a copy of the raw ``Board`` with
simple ko only: superko is too rare in random games to be worth its cost, and the playout result is only an
estimate. Playouts never play a suicide, whatever the rules (``Rules.suicide``): like filling one's own eye, it is
a move no playout policy wants. ``random_move`` is the exception: it draws from the game's full legal moves.
"""
from __future__ import annotations

import random

import numpy as np

from tabula.engine.rules.board import NO_POINT, Board, IllegalMoveError
from tabula.engine.rules.coords import BLACK, EMPTY, PASS, WHITE
from tabula.engine.rules.enclosed import enclosed_kill
from tabula.engine.rules.game import GameState

DEFAULT_OWNERSHIP_PLAYOUTS = 64


def random_move(state: GameState, rng: random.Random) -> int:
    """A uniformly random legal move for the side to move (full rules, superko included) that does not fill its
    own single-point eye; PASS when there is none."""
    board = state.board
    color = state.to_move
    padded = board.geometry.padded
    candidates = [move for move in state.legal_moves(color) if not board.is_own_eye(padded[move], color)]
    if not candidates:
        return PASS
    return candidates[rng.randrange(len(candidates))]


class Playout:
    """One playout on ``board`` (changed in place): its empty points are kept as a list with swap-remove, so that
    no move scans the board. ``step`` plays one move."""

    __slots__ = ("board", "empties", "where")

    def __init__(self, board: Board):
        self.board = board
        color = board.color
        self.empties = [pad for pad in board.geometry.padded if color[pad] == EMPTY]
        self.where = [-1] * board.geometry.padded_len  # padded point -> index in empties
        for i, pad in enumerate(self.empties):
            self.where[pad] = i

    def _swap(self, i: int, j: int) -> None:
        empties, where = self.empties, self.where
        a, b = empties[i], empties[j]
        empties[i], empties[j] = b, a
        where[b], where[a] = i, j

    def step(self, color: int, rng: random.Random) -> int:
        """Play one random move for ``color``; returns the padded point, or NO_POINT for a pass."""
        board = self.board
        empties = self.empties
        rand = rng.random
        remaining = len(empties)
        while remaining > 0:
            j = int(rand() * remaining)
            remaining -= 1
            self._swap(j, remaining)  # move the candidate out of the untried part
            point = empties[remaining]
            if board.is_own_eye(point, color):
                continue
            try:
                new_hash, captured_roots = board.try_play(point, color)
            except IllegalMoveError:
                continue
            captured = board._commit(point, color, new_hash, captured_roots)
            # swap-remove the played point, then add the captured ones
            last = len(empties) - 1
            self._swap(self.where[point], last)
            empties.pop()
            self.where[point] = -1
            for stone in captured:
                self.where[stone] = len(empties)
                empties.append(stone)
            return point
        board.ko = NO_POINT
        return NO_POINT


_Playout = Playout  # the name tools/bench/board.py first imported


# Liberty states: each padded point's colour and, for a stone, its string's liberties counted 1, 2 or 3+ (the local
# pattern features of engine.rollout read them). Stones of one string always share one state.
STATE_EMPTY = 0
STATE_BLACK = 0  # + 1, 2, 3 liberties: states 1..3
STATE_WHITE = 3  # + 1, 2, 3 liberties: states 4..6
STATE_EDGE = 7


def stone_state(color: int, liberties: int) -> int:
    """The liberty state of a ``color`` stone whose string has ``liberties`` liberties."""
    return (STATE_BLACK if color == BLACK else STATE_WHITE) + (liberties if liberties < 3 else 3)


class LibertyStates:
    """A raw board (simple ko, changed in place) with the liberty state of every padded point kept up to date.

    ``states`` is a bytearray [padded_len] of STATE_* values. ``play`` costs the move plus a walk over each string
    whose liberty state changed (1, 2 and 3+ are told apart, so a long string with many liberties is never walked).
    """

    __slots__ = ("board", "states")

    def __init__(self, board: Board):
        self.board = board
        states = bytearray([STATE_EDGE]) * board.geometry.padded_len
        color, root, liberties = board.color, board.root, board.liberties
        for pad in board.geometry.padded:
            c = color[pad]
            states[pad] = STATE_EMPTY if c == EMPTY else stone_state(c, len(liberties[root[pad]]))
        self.states = states

    def copy(self) -> "LibertyStates":
        other = LibertyStates.__new__(LibertyStates)
        other.board = self.board.copy()
        other.states = self.states[:]
        return other

    def play(self, point: int, color: int) -> list[int]:
        """Play ``color`` at padded ``point`` (IllegalMoveError for occupied, simple ko, suicide); returns the
        captured padded points."""
        board = self.board
        states = self.states
        new_hash, captured_roots = board.try_play(point, color)
        neighbors = board.geometry.neighbors[point]
        board_color = board.color
        joined = {states[n] for n in neighbors if board_color[n] == color}
        captured = board._commit(point, color, new_hash, captured_roots)
        root, liberties = board.root, board.liberties
        own = stone_state(color, len(liberties[root[point]]))
        if joined and joined != {own}:
            self._set_string(point, own)  # a string it joined had another state
        else:
            states[point] = own
        other = 3 - color
        for n in neighbors:
            if board_color[n] == other:
                self._refresh(root[n], other)
        for stone in captured:
            states[stone] = STATE_EMPTY
        for stone in captured:
            for n in board.geometry.neighbors[stone]:
                if board_color[n] == color:
                    self._refresh(root[n], color)
        return captured

    def _refresh(self, string_root: int, color: int) -> None:
        state = stone_state(color, len(self.board.liberties[string_root]))
        if self.states[string_root] != state:
            self._set_string(string_root, state)

    def _set_string(self, point: int, state: int) -> None:
        states = self.states
        next_stone = self.board.next_stone
        states[point] = state
        stone = next_stone[point]
        while stone != point:
            states[stone] = state
            stone = next_stone[stone]


def playout(state: GameState, rng: random.Random, max_moves: int | None = None) -> Board:
    """Play random moves from ``state`` (which is not changed) until two passes in a row or ``max_moves``.

    Returns the final raw board. ``max_moves`` defaults to three times the number of points.
    """
    run = Playout(state.board.copy())
    limit = 3 * state.size * state.size if max_moves is None else max_moves
    color = state.to_move
    passes = 0
    for _ in range(limit):
        if run.step(color, rng) == NO_POINT:
            passes += 1
            if passes >= 2:
                break
        else:
            passes = 0
        color = 3 - color
    return run.board


def area_owners(board: Board) -> list[int]:
    """Tromp-Taylor owner of each flat point: BLACK, WHITE, or EMPTY for stones-free regions touching both."""
    owners = board.area_owners()
    return [owners[pad] for pad in board.geometry.padded]


def ownership(state: GameState, rng: random.Random, playouts: int = DEFAULT_OWNERSHIP_PLAYOUTS,
              max_moves: int | None = None) -> np.ndarray:
    """Mean Tromp-Taylor ownership over ``playouts`` random playouts: float32 [N*N] in [-1, 1], black's view
    (+1: black owns the point in every playout)."""
    total = np.zeros(state.size * state.size, dtype=np.float32)
    sign = np.array([0.0, 1.0, -1.0], dtype=np.float32)
    for _ in range(max(1, playouts)):
        owners = np.array(area_owners(playout(state, rng, max_moves)), dtype=np.int64)
        total += sign[owners]
    return total / max(1, playouts)


def string_ownership(state: GameState, owned: np.ndarray,
                     strings: list[list[int]] | None = None) -> list[tuple[list[int], float]]:
    """Each string's flat points and its stones' mean ownership from its own colour's view (> 0: it lives); all of
    ``state``'s strings, or the given ones (``owned`` may then be a map of another position).

    ``owned``: float [N*N], black's view, as ``ownership`` returns."""
    board = state.board
    geometry = board.geometry
    if strings is None:
        strings, done = [], set()
        for pad in geometry.padded:
            if board.color[pad] != EMPTY and board.root[pad] not in done:
                done.add(board.root[pad])
                strings.append([geometry.flat[p] for p in board.string_stones(pad)])
    judged = []
    for stones in strings:
        mean = float(np.mean(owned[stones]))
        judged.append((stones, mean if board.color[geometry.padded[stones[0]]] == BLACK else -mean))
    return judged


def dead_stones(state: GameState, owned: np.ndarray) -> list[int]:
    """Flat points of stones whose string is, on average over its stones, owned by the opponent.

    ``owned``: float [N*N], black's view, as ``ownership`` returns. Whole strings are judged together so that
    a string is never half dead.
    """
    return sorted(p for stones, mean in string_ownership(state, owned) if mean < 0.0 for p in stones)


def seki_stones(state: GameState, dead: list[int]) -> list[int]:
    """Flat points of live stones in seki, judged in the final position with ``dead`` stones removed.

    A string is in seki when it has fewer than two eyes (empty regions bordered by its colour only), touches an
    empty point, shared with such an opponent string, that neither colour can fill without losing the race (after
    filling, the filler's string would have no more liberties than the opponent string beside it), and the opponent
    can fill none of its other liberties outside its eyes without losing the race either: a string the opponent can
    approach from another side is only short of liberties, not in seki. Its opponent in the seki must qualify too.
    Nor is it a seki where stones enclosed in a group's only liberties kill it by a sacrifice
    (``engine.rules.enclosed``): the enclosed stones live and the group dies.
    Neutral points between groups with two eyes, and the ordinary dame of a game not yet played out, are not seki.
    """
    board = state.board.copy()
    geometry = board.geometry
    for flat in dead:
        board.color[geometry.padded[flat]] = EMPTY
    cleaned = _rebuild(board)
    color = cleaned.color
    neighbors = geometry.neighbors
    region_of, region_colors = _empty_regions(cleaned)

    def eyes(root: int, string_color: int) -> int:
        regions = {region_of[lib] for lib in cleaned.liberties[root]}
        return sum(1 for r in regions if region_colors[r] == string_color)

    loses: dict[tuple[int, int], bool] = {}

    def filler_loses(pad: int, filler: int) -> bool:
        if (pad, filler) not in loses:
            loses[pad, filler] = _loses_race(cleaned, pad, filler)
        return loses[pad, filler]

    candidates: set[int] = set()  # roots of strings beside a point neither colour can fill
    for pad in geometry.padded:
        if color[pad] != EMPTY:
            continue
        roots = {cleaned.root[n] for n in neighbors[pad] if color[n] in (BLACK, WHITE)}
        weak = {root: color[root] for root in roots if eyes(root, color[root]) < 2}
        if {BLACK, WHITE} - set(weak.values()):
            continue
        if filler_loses(pad, BLACK) and filler_loses(pad, WHITE):
            candidates.update(weak)
    candidates = {root for root in candidates
                  if all(region_colors[region_of[lib]] == color[root] or filler_loses(lib, 3 - color[root])
                         for lib in cleaned.liberties[root])}
    read: set[int] = set()  # stones enclosed in a group's only liberties may kill it by a sacrifice
    for root in sorted(candidates):
        if root in candidates and root not in read:
            killed = enclosed_kill(cleaned, root, read)
            if killed:
                candidates -= killed
    while True:  # each string keeps an opponent in seki beside it (sharing a liberty)
        kept = {root for root in candidates
                if any(cleaned.root[n] in candidates and color[n] == 3 - color[root]
                       for lib in cleaned.liberties[root] for n in neighbors[lib])}
        if kept == candidates:
            break
        candidates = kept
    if candidates:
        candidates |= _living_by_seki(cleaned, candidates, region_of, region_colors)
    return sorted(geometry.flat[p] for root in candidates for p in cleaned.string_stones(root))


def _living_by_seki(board: Board, seki: set[int], region_of: dict[int, int], region_colors: list[int]) -> set[int]:
    """Roots of the strings whose eyes are shared with strings in ``seki`` (roots): an empty region of one colour
    bordered by several of its strings is an eye of each only while all of them live, so a string left with fewer
    than two eyes of its own when those shared with seki strings are set aside lives or dies with the seki, as a
    referee judges it. Repeated, since such a string may share its other eye with the next one."""
    color = board.color
    neighbors = board.geometry.neighbors
    borders: dict[int, set[int]] = {}  # region of one colour -> the roots of its strings
    for pad, region in region_of.items():
        if region_colors[region] in (BLACK, WHITE):
            borders.setdefault(region, set()).update(board.root[n] for n in neighbors[pad]
                                                      if color[n] in (BLACK, WHITE))
    living = set(seki)
    while True:
        added = set()
        for region, roots in borders.items():
            if not roots & living:
                continue
            for root in roots - living:
                eyes = {region_of[lib] for lib in board.liberties[root] if region_colors[region_of[lib]] == color[root]}
                if sum(1 for r in eyes if not borders[r] & living) < 2:
                    added.add(root)
        if not added:
            return living - seki
        living |= added


def _empty_regions(board: Board) -> tuple[dict[int, int], list[int]]:
    """Empty regions: padded point -> region number, and each region's bordering colours (a BLACK|WHITE mask)."""
    color = board.color
    neighbors = board.geometry.neighbors
    region_of: dict[int, int] = {}
    region_colors: list[int] = []
    for pad in board.geometry.padded:
        if color[pad] != EMPTY or pad in region_of:
            continue
        number = len(region_colors)
        region_of[pad] = number
        stack = [pad]
        reaches = 0
        while stack:
            point = stack.pop()
            for neighbor in neighbors[point]:
                c = color[neighbor]
                if c == EMPTY and neighbor not in region_of:
                    region_of[neighbor] = number
                    stack.append(neighbor)
                elif c in (BLACK, WHITE):
                    reaches |= c
        region_colors.append(reaches)
    return region_of, region_colors


def _loses_race(board: Board, pad: int, color: int) -> bool:
    """Whether ``color`` filling ``pad`` is suicide, self-atari, or leaves its string with no more liberties than
    an opponent string beside it (which then moves first and wins the race)."""
    trial = board.copy()
    try:
        trial.play(pad, color)
    except IllegalMoveError:
        return True
    own = len(trial.string_liberties(pad))
    if own <= 1:
        return True
    other = 3 - color
    return any(trial.color[n] == other and own <= len(trial.string_liberties(n))
               for n in trial.geometry.neighbors[pad])


def _rebuild(board: Board) -> Board:
    """A board with the same stones, strings rebuilt from scratch (after stones were removed by hand)."""
    fresh = Board(board.size)
    for pad in board.geometry.padded:
        c = board.color[pad]
        if c in (BLACK, WHITE):
            try:
                fresh.place_setup_stone(pad, c)
            except IllegalMoveError:
                # A stone with no liberties cannot be placed on its own; it stays off the board.
                pass
    return fresh


def cleanup_move(state: GameState, color: int, owned: np.ndarray, rng: random.Random) -> int:
    """A move that helps remove the opponent's dead stones: a random legal liberty of a dead opponent string
    (not an own eye), else a random legal non-eye move; PASS when no dead opponent stones remain or no move."""
    board = state.board
    geometry = board.geometry
    other = 3 - color
    dead = [p for p in dead_stones(state, owned) if state.color_at(p) == other]
    if not dead:
        return PASS
    liberties: set[int] = set()
    for flat in dead:
        liberties.update(geometry.flat[p] for p in board.string_liberties(geometry.padded[flat]))
    candidates = [m for m in sorted(liberties)
                  if state.legal(m, color) and not board.is_own_eye(geometry.padded[m], color)]
    if not candidates:
        candidates = [m for m in state.legal_moves(color) if not board.is_own_eye(geometry.padded[m], color)]
    if not candidates:
        return PASS
    return candidates[rng.randrange(len(candidates))]


__all__ = ["Playout", "LibertyStates", "stone_state", "STATE_EMPTY", "STATE_EDGE", "random_move", "playout",
           "area_owners", "ownership", "string_ownership", "dead_stones", "seki_stones", "cleanup_move",
           "DEFAULT_OWNERSHIP_PLAYOUTS"]
