"""KataGo's V7 network inputs (model versions 8 to 17) for a Go ``GameState``: 22 spatial and 19 global features,
computed as KataGo's ``NNInputs::fillRowV7`` computes them, and the ``katago-v7`` encoding's single input of 41 planes.

Layer: net (numpy only; reads engine.rules). Planes are indexed ``[feature, y, x]`` in Tabula's flat point order
(``y = 0`` the bottom row, GTP row 1; KataGo's y runs from the top, so KataGo's network sees these planes mirrored
top to bottom, and a network graph that wants KataGo's own orientation flips the rows itself).

Spatial features (``pla`` the side to move, ``opp`` the other):
 0 on board (all ones: the board is exactly N x N); 1, 2 pla's and opp's stones; 3, 4, 5 stones of strings with 1,
 2, 3 liberties; 6 the simple ko point and the points positional/situational superko bans; 7, 8 encore ko features
 (always 0: GTP play never enters KataGo's encore); 9..13 the last five moves, newest first, while their colours
 alternate back from opp; 14 stones of strings with one or two liberties that a ladder captures; 15, 16 the same one
 and two moves ago; 17 the moves that ladder-capture opp's two-liberty strings; 18, 19 pla's and opp's area (pass-
 alive stones and territory, and every other stone and single-colour region, by Benson's algorithm) under area
 scoring; 20, 21 second-encore stones (always 0).
Global features: 0..4 which of the last five moves were passes; 5 pla's komi / 20 (komi, the handicap bonus, and under
territory scoring one point per stone played, as KataGo folds them in); 6, 7 the ko rule; 8 multi-stone suicide; 9
territory scoring; 10, 11 the seki tax and the group tax; 12, 13 encore; 14 whether a pass would end the phase; 15,
16 playout doubling advantage (0); 17 button (0); 18 a triangle wave of komi's parity under area scoring.

History follows KataGo's BoardHistory as GTP drives it (preventCleanupPhase, multiple starting black moves counted as
handicap): friendly-pass rules (Chinese, AGA...) hide the history after one pass, a finished game shows one move, a
position asked for the colour that just moved is seen with no history (KataGo clears it for ``kata-raw-nn``).
Not followed: KataGo's no-result on a thrice-repeated position under simple ko (a long cycle without passes), and the
node budget of its ladder search is spent in another move order (it decides only searches of 25,000 moves).

Cost: the ladder searches run in Python on Tabula's strings, the pass-alive areas on bit sets (Python integers, a
bit per padded point: regions grow by shifts). Ladder results are cached by position (stones and ko point), so that
a child in the search finds its parent's ladders (features 15, 16) already read, and by string: each string's
reading is kept with its footprint, the points whose stones it may have looked at (``_footprint``), and a position
with the same stones there (a sibling or child in the search, the move played elsewhere) takes it without reading.
The superko bans are computed once per position for the search's table key and the features (``_bans``). The
caches are bounded and thread-safe enough for the evaluator's threads (dict operations under the GIL).
"""
from __future__ import annotations

import math
from operator import itemgetter
from typing import Sequence

import numpy as np

from tabula.engine.net.features import transform_planes
from tabula.engine.rules.board import EDGE, NO_POINT, Board, Geometry, IllegalMoveError
from tabula.engine.rules.coords import BLACK, EMPTY, PASS, WHITE
from tabula.engine.rules.game import AREA, POSITIONAL, SIMPLE_KO, SITUATIONAL, TAX_SEKI, TERRITORY, GameState

INPUT_ENCODING = "katago-v7"
NUM_SPATIAL = 22
NUM_GLOBAL = 19
NUM_PLANES = NUM_SPATIAL + NUM_GLOBAL  # 41: the globals as constant planes after the spatial ones
KOMI_CLIP_RADIUS = 20.0
LADDER_NODE_BUDGET = 25000
_CACHE_LIMIT = 20000  # positions per cache before it is emptied


def features(state: GameState) -> tuple[np.ndarray, np.ndarray]:
    """(spatial float32 [22, N, N], global float32 [19]) of one position, from the side to move's view."""
    size = state.size
    spatial = np.zeros((NUM_SPATIAL, size * size), dtype=np.float32)
    glob = np.zeros(NUM_GLOBAL, dtype=np.float32)
    _fill(state, spatial, glob)
    return spatial.reshape(NUM_SPATIAL, size, size), glob


def encode_batch(states: Sequence[GameState], symmetries: np.ndarray | None = None) -> np.ndarray:
    """float32 [B, 41, N, N]: the 22 spatial features then the 19 globals as constant planes, each position seen
    under its symmetry (int [B], engine.net.features' numbering) or as it is."""
    if not states:
        raise ValueError("encode_batch needs at least one position")
    size = states[0].size
    count = len(states)
    out = np.zeros((count, NUM_PLANES, size * size), dtype=np.float32)
    glob = np.zeros(NUM_GLOBAL, dtype=np.float32)
    for i, state in enumerate(states):
        if state.size != size:
            raise ValueError(f"positions of sizes {size} and {state.size} in one batch")
        glob[:] = 0.0
        _fill(state, out[i, :NUM_SPATIAL], glob)
        out[i, NUM_SPATIAL:] = glob[:, None]
    planes = out.reshape(count, NUM_PLANES, size, size)
    if symmetries is not None:
        planes = transform_planes(planes, np.asarray(symmetries))
    return planes


def encode(state: GameState) -> np.ndarray:
    """float32 [41, N, N] for one position."""
    return encode_batch([state])[0]


# -- the whole row -------------------------------------------------------------------------------------------------


def _fill(state: GameState, spatial: np.ndarray, glob: np.ndarray) -> None:
    """Fill ``spatial`` (float32 [22, N*N], zeros) and ``glob`` (float32 [19], zeros) for ``state``."""
    board = state.board
    geometry = board.geometry
    size = geometry.size
    padded = geometry.padded_array
    rules = state.rules
    pla = state.to_move
    opp = 3 - pla
    moves = state.moves
    start = history_start(state)
    cleared = start == len(moves)
    suicide = bool(getattr(rules, "suicide", False))

    # Features 0..5: board, stones, liberties.
    colors = np.frombuffer(board.color, dtype=np.int8)[padded]
    spatial[0] = 1.0
    spatial[1] = colors == pla
    spatial[2] = colors == opp
    strings = board.liberties
    liberty_count = np.zeros(geometry.padded_len, dtype=np.int32)
    liberty_count[np.fromiter(strings.keys(), dtype=np.int64, count=len(strings))] = \
        np.fromiter(map(len, strings.values()), dtype=np.int32, count=len(strings))
    libs_at = liberty_count[np.asarray(board.root, dtype=np.int64)[padded]]  # 0 at empty points (root NO_POINT)
    spatial[3] = libs_at == 1
    spatial[4] = libs_at == 2
    spatial[5] = libs_at == 3

    # Feature 6: ko and superko bans.
    flat = geometry.flat
    ko = NO_POINT if cleared else board.ko
    if ko != NO_POINT:
        spatial[6, flat[ko]] = 1.0
    if not cleared and rules.superko != SIMPLE_KO:
        banned = _bans(state, ko)
        if banned and start > 0:
            # KataGo's history restarted at an out-of-turn move: only the positions since then count (replayed,
            # so only where the whole game's positions ban something)
            banned = _superko_banned(state, ko, _seen_since(state, start))
        for point in banned:
            spatial[6, point] = 1.0

    # Features 18, 19: area under area scoring (territory scoring shows it only in the encore).
    self_komi = _self_komi(state, start)
    if rules.scoring == AREA:
        area = _area(board, suicide, rules.tax == TAX_SEKI)
        spatial[18] = area == pla
        spatial[19] = area == opp

    # History: how many of the last moves the network sees.
    history = _History(state, start)
    amount = min(history.max_turns, history.valid_turns)
    included = 0
    for back in range(1, min(amount, 5) + 1):
        color, move = moves[-back]
        if color != (opp if back % 2 == 1 else pla):
            break
        included = back
        if move == PASS:
            glob[back - 1] = 1.0
        else:
            spatial[8 + back, move] = 1.0

    # Features 14..17: ladders now, one and two moves ago.
    laddered, working = _ladders(bytes(board.color), NO_POINT if cleared else board.ko, board)
    spatial[14, laddered] = 1.0
    spatial[17, working[opp]] = 1.0
    previous = _recent_ladders(state, 1, start) if included >= 1 else laddered
    spatial[15, previous] = 1.0
    spatial[16, _recent_ladders(state, 2, start) if included >= 2 else previous] = 1.0

    # Globals.
    area_points = np.float32(size * size)
    self_komi = np.float32(min(max(self_komi, -area_points - np.float32(KOMI_CLIP_RADIUS)),
                               area_points + np.float32(KOMI_CLIP_RADIUS)))
    glob[5] = self_komi / np.float32(20.0)
    if rules.superko == POSITIONAL:
        glob[6], glob[7] = 1.0, 0.5
    elif rules.superko == SITUATIONAL:
        glob[6], glob[7] = 1.0, -0.5
    glob[8] = 1.0 if suicide else 0.0
    glob[9] = 1.0 if rules.scoring == TERRITORY else 0.0
    glob[10] = 1.0 if rules.tax == TAX_SEKI else 0.0
    glob[14] = 1.0 if history.pass_ends_phase else 0.0
    if rules.scoring == AREA:
        glob[18] = komi_wave(self_komi, size)


def komi_wave(self_komi: np.float32, size: int) -> float:
    """KataGo's triangle wave of the komi against the board's parity: rising where a draw becomes possible."""
    two = np.float32(2.0)
    if (size * size) % 2 == 0:
        floor = np.float32(math.floor(self_komi / two)) * two
    else:
        floor = np.float32(math.floor((self_komi - np.float32(1.0)) / two)) * two + np.float32(1.0)
    delta = min(max(float(self_komi - floor), 0.0), 2.0)
    if delta < 0.5:
        return delta
    if delta < 1.5:
        return 1.0 - delta
    return delta - 2.0


# -- komi ----------------------------------------------------------------------------------------------------------


def history_start(state: GameState) -> int:
    """Where KataGo's move history starts in ``state.moves``, as GTP and ``kata-raw-nn`` drive it: a move by the
    colour that moved before it clears the history (the position then is the new starting position), and a
    position asked for the colour that just moved has no history at all (``len(moves)``)."""
    moves = state.moves
    if moves and moves[-1][0] == state.to_move:
        return len(moves)
    if len(moves) > 2:
        # Colours that alternate throughout (the usual game) have no such move: checked in C, not move by move.
        evens = set(map(itemgetter(0), moves[::2]))
        odds = set(map(itemgetter(0), moves[1::2]))
        if len(evens) == 1 and len(odds) == 1 and evens != odds:
            return 0
    for index in range(len(moves) - 1, 0, -1):
        if moves[index][0] == moves[index - 1][0]:
            return index
    return 0


def _self_komi(state: GameState, start: int) -> np.float32:
    """What KataGo's ``currentSelfKomi`` gives the side to move: komi, the handicap bonus and, under territory
    scoring, one point for white per black stone played and back (KataGo's "chilling"), negated for black."""
    rules = state.rules
    board = state.board
    white = np.float32(0.0)
    if rules.scoring == TERRITORY:
        # Stones played by each side = stones on the board now + stones of that colour taken off - setup stones; the
        # setup stones count as played too, so black's minus white's is the board's count plus the prisoners.
        colors = board.color
        black_prisoners, white_prisoners = state.prisoners  # stones captured by black (white's), by white (black's)
        white = np.float32(colors.count(BLACK) - colors.count(WHITE) + white_prisoners - black_prisoners)
    white = white + np.float32(_handicap_bonus(state, start))
    white = white + np.float32(rules.komi)
    return white if state.to_move == WHITE else -white


def _handicap_bonus(state: GameState, start: int) -> int:
    """KataGo's white handicap bonus: for N handicap stones, N (Chinese) or N-1 (AGA) points. KataGo counts the black
    stones of the starting position (``history_start``'s) when it has no white stones, and (as GTP sets it up) black's
    opening moves before white's first move, recounted at each black move until white has moved."""
    bonus_rule = state.rules.white_handicap_bonus
    if bonus_rule == "0":
        return 0
    if start == 0:
        setup_white = any(color == WHITE for color, _ in state.setup)
        setup_black = sum(1 for color, _ in state.setup if color == BLACK)
    else:
        colors = state.board.color if start == len(state.moves) else _colors_after(state, start)
        setup_white = colors.count(WHITE) > 0
        setup_black = colors.count(BLACK)
    moves = state.moves[start:]
    stones = _handicap_count(setup_white, setup_black, moves[:0])
    for index, (color, move) in enumerate(moves):
        if color == WHITE and move != PASS:
            break
        if color == BLACK:
            stones = _handicap_count(setup_white, setup_black, moves[: index + 1])
    return _bonus(bonus_rule, stones)


def _handicap_count(setup_white: bool, setup_black: int, moves: list[tuple[int, int]]) -> int:
    """KataGo's computeNumHandicapStones over ``moves`` (its move history at the time)."""
    black_moves = 0
    for index, (color, move) in enumerate(moves):
        if color != BLACK:
            if index + 1 < len(moves) and moves[index + 1][0] != BLACK:
                black_moves = 0
                break
            if move == PASS:
                continue
            break
        if move != PASS:
            black_moves += 1
    if setup_white:
        return 0
    advantage = setup_black + black_moves
    return 0 if advantage <= 1 else advantage


def _bonus(rule: str, stones: int) -> int:
    if rule == "N":
        return stones
    return stones - 1 if stones > 1 else 0


# -- history and passes --------------------------------------------------------------------------------------------


class _History:
    """What KataGo's BoardHistory says about the end of the move list: ``max_turns`` of history to show,
    ``valid_turns`` (numApproxValidTurnsThisPhase, at most what matters) and ``pass_ends_phase`` (global 14)."""

    __slots__ = ("max_turns", "valid_turns", "pass_ends_phase")

    def __init__(self, state: GameState, start: int):
        rules = state.rules
        moves = state.moves[start:]
        if not moves:
            self.valid_turns = 0
            self.max_turns = 5
            self.pass_ends_phase = False
            return
        trailing = 0
        for _, move in reversed(moves):
            if move != PASS:
                break
            trailing += 1
        simple = rules.superko == SIMPLE_KO
        pla = state.to_move
        # Under simple ko a pass in a position where the same player passed before ends the phase (Spight-like).
        repeats_pass = simple and _passed_here_before(state, pla, start)
        pass_ends_phase = trailing >= 1 or repeats_pass
        last_color, last_move = moves[-1]
        finished = trailing >= 2 or (simple and last_move == PASS
                                     and _passed_here_before(state, last_color, start, True))
        pass_ends_game = pass_ends_phase and rules.scoring == AREA
        friendly = (rules.friendly_pass_ok and rules.scoring == AREA and trailing + 1 == 2 and not repeats_pass)
        if pass_ends_game and friendly:
            self.max_turns = 0
            pass_ends_phase = False
        elif finished:
            self.max_turns = 1
        else:
            self.max_turns = 5
        self.pass_ends_phase = pass_ends_phase
        self.valid_turns = _valid_turns(moves, rules.scoring == TERRITORY)


def _valid_turns(moves: list[tuple[int, int]], territory: bool) -> int:
    """KataGo's numApproxValidTurnsThisPhase after ``moves``: cut back to one by a game end (two passes) followed by
    a move, and under territory scoring by the end of the normal phase itself. Exact up to 5, all that is read."""
    start = max(0, len(moves) - 12)
    count = start
    passes = 0
    finished = False
    for _, move in moves[start:]:
        if finished:
            count = min(count, 1)
            finished = False
        passes = passes + 1 if move == PASS else 0
        count += 1
        if passes >= 2:
            finished = True
            if territory:
                count = min(count, 1)
    return count


def _passed_here_before(state: GameState, color: int, start: int, skip_last: bool = False) -> bool:
    """Whether ``color`` passed earlier in KataGo's history (from move ``start``) in a position with the stones
    there are now (the last move left out when ``skip_last``)."""
    moves = state.moves
    end = len(moves) - 1 if skip_last else len(moves)
    if (color, PASS) not in moves[start:end]:
        return False
    now = bytes(state.board.color)
    for index in range(end - 1, start - 1, -1):
        if moves[index] != (color, PASS):
            continue
        before = _colors_after(state, index)
        if before == now:
            return True
    return False


_REPLAY_CACHE: dict[tuple, object] = {}


def _colors_after(state: GameState, count: int) -> bytes:
    """Padded colours after the first ``count`` moves: from the recent positions where they reach, else replayed
    from the setup (cached)."""
    age = len(state.moves) - count
    colors = state.history_colors(age)
    if colors is not None:
        return bytes(colors)
    key = (state.size, tuple(state.setup), tuple(state.moves[:count]))
    found = _REPLAY_CACHE.get(key)
    if found is None:
        board = Board(state.size)
        padded = board.geometry.padded
        for color, point in state.setup:
            board.place_setup_stone(padded[point], color)
        suicide = bool(getattr(state.rules, "suicide", False))
        for color, move in state.moves[:count]:
            if move == PASS:
                board.ko = NO_POINT
                continue
            try:
                board.play(padded[move], color, suicide=suicide)
            except IllegalMoveError:
                break
        found = bytes(board.color)
        if len(_REPLAY_CACHE) > 256:
            _REPLAY_CACHE.clear()
        _REPLAY_CACHE[key] = found
    return found


def _seen_since(state: GameState, start: int) -> set[int]:
    """The superko keys of the positions from move ``start`` on (KataGo's ko hash history after a clear), replayed
    from the setup (cached)."""
    key = (state.size, state.rules.superko, tuple(state.setup), tuple(state.moves), start, "seen")
    found = _REPLAY_CACHE.get(key)
    if found is None:
        replayed = GameState(state.size, state.rules)
        replayed.to_move = state.moves[start][0]
        for color, point in state.setup:
            replayed.place_setup(point, color)
        board = replayed.board
        padded = board.geometry.padded
        suicide = bool(getattr(state.rules, "suicide", False))
        found = set()
        for index, (color, move) in enumerate(state.moves):
            if index == start:
                found.add(replayed._superko_key(board.hash, color))
            if move == PASS:
                board.ko = NO_POINT
            else:
                try:
                    board.play(padded[move], color, suicide=suicide)
                except IllegalMoveError:
                    break
            if index >= start:
                found.add(replayed._superko_key(board.hash, 3 - color))
        if len(_REPLAY_CACHE) > 256:
            _REPLAY_CACHE.clear()
        _REPLAY_CACHE[key] = found
    return found


# -- ko bans -------------------------------------------------------------------------------------------------------


def table_key(state: GameState) -> tuple:
    """What Go's encodings read beyond the stones, the side to move and the ko point (``GameState.hash``) and the
    rules and komi (a table of results per ruleset), that a table of network results must tell apart: the passes at
    the end of the move list (whether a pass ends the game, the pass planes) and the superko bans. As KataGo's own
    cache key (NNInputs::getHash), the moves before are left out (the last-move planes, leelaz-18's earlier
    positions): positions reached by other move orders share a result, which the search's transpositions want."""
    bans = ()
    if state.rules.superko != SIMPLE_KO:
        bans = tuple(_bans(state, state.board.ko))
    return (state.passes, bans)


_BANS_CACHE: dict[tuple, tuple[set[int], list[int]]] = {}
_BANS_CACHE_LIMIT = 512  # positions (each entry holds its position's set of seen keys)


def _bans(state: GameState, ko: int) -> list[int]:
    """``_superko_banned`` over the whole game's positions (``state.seen``), computed once for the search's table key
    and the position's features. An entry holds the very set it was computed for and its size: a set only grows,
    so the same set of the same size is the same history."""
    seen = state.seen
    board = state.board
    key = (id(seen), len(seen), board.hash, ko, state.to_move, state.stones, state.peak_stones, state.rules)
    found = _BANS_CACHE.get(key)
    if found is not None and found[0] is seen:
        return found[1]
    banned = _superko_banned(state, ko, seen)
    if len(_BANS_CACHE) > _BANS_CACHE_LIMIT:
        _BANS_CACHE.clear()
    _BANS_CACHE[key] = (seen, banned)
    return banned


def _superko_banned(state: GameState, ko: int, seen: set[int]) -> list[int]:
    """Flat points where a move legal under simple ko (a multi-stone suicide included where the rules allow it)
    would repeat a position positional or situational superko forbids (KataGo's superKoBanned; the simple ko point
    itself is left to the ko feature). ``seen``: the keys of the positions in KataGo's history."""
    if len(seen) <= 1:
        return []
    board = state.board
    geometry = board.geometry
    color = state.to_move
    other = 3 - color
    board_color = board.color
    neighbors = geometry.neighbors
    flat = geometry.flat
    key_base = board.hash
    if state.rules.superko == SITUATIONAL and other == WHITE:
        key_base ^= geometry.zobrist_white_to_move
    # Points that capture (the lone liberty of each opponent string in atari) and, where multi-stone suicide is
    # legal, points with no empty neighbour: played out in full below.
    capturing = {next(iter(libs)) for root, libs in board.liberties.items()
                 if len(libs) == 1 and board_color[root] == other}
    suicide = bool(getattr(state.rules, "suicide", False))
    if suicide:
        capturing.update(pad for pad in geometry.padded if board_color[pad] == EMPTY
                         and all(board_color[n] != EMPTY for n in neighbors[pad]))
    banned: list[int] = []
    seen_array = None
    if state.peak_stones > state.stones:
        # A move that captures nothing adds a stone: it can repeat only a position that had more stones.
        colors = np.frombuffer(board_color, dtype=np.int8)[geometry.padded_array]
        candidates = np.flatnonzero(colors == EMPTY)
        seen_array = np.sort(np.fromiter(seen, dtype=np.uint64, count=len(seen)))
        after = geometry.zobrist_array[color][candidates] ^ np.uint64(key_base)
        found = np.searchsorted(seen_array, after).clip(max=len(seen_array) - 1)
        for point in candidates[seen_array[found] == after].tolist():
            pad = geometry.padded[point]
            if pad in capturing or pad == ko:
                continue
            libs = board.liberties
            root = board.root
            if any(board_color[n] == EMPTY or (board_color[n] == color and len(libs[root[n]]) > 1)
                   for n in neighbors[pad]):
                banned.append(point)
    for pad in capturing:
        if pad == ko:
            continue
        try:
            new_hash, _ = board.try_play(pad, color, suicide)
        except IllegalMoveError:
            continue
        if state._superko_key(new_hash, other) in seen:
            banned.append(flat[pad])
    return banned


# -- pass-alive area (Benson) --------------------------------------------------------------------------------------

_AREA_CACHE: dict[tuple, np.ndarray] = {}


def _area(board: Board, suicide: bool, seki_tax: bool) -> np.ndarray:
    """int8 [N*N]: KataGo's area for the NN (``calculateArea`` with every option on; with the seki tax,
    ``calculateIndependentLifeArea`` keeping stones): owner of each point or EMPTY."""
    colors = bytes(board.color)
    key = (colors, suicide, seki_tax)
    found = _AREA_CACHE.get(key)
    if found is not None:
        return found
    geometry = board.geometry
    black, white = _stone_bits(colors)
    owners = [0, 0, 0]  # [_, black's, white's]: bits of the points each owns
    for pla in (BLACK, WHITE):
        _area_bits(board, pla, suicide, black, white, owners)
    owned = owners[BLACK] | owners[WHITE]
    # What neither owns keeps its stone's colour.
    area_black = owners[BLACK] | (black & ~owned)
    area_white = owners[WHITE] | (white & ~owned)
    if seki_tax:
        basic = bytearray(geometry.padded_len)
        for pad in _bits_points(area_black, geometry):
            basic[pad] = BLACK
        for pad in _bits_points(area_white, geometry):
            basic[pad] = WHITE
        area = np.frombuffer(bytes(_independent_life(board, basic)), dtype=np.int8)[geometry.padded_array].copy()
    else:
        area = (_bits_mask(area_black, geometry) * np.int8(BLACK)) | (_bits_mask(area_white, geometry) * np.int8(WHITE))
    if len(_AREA_CACHE) > _CACHE_LIMIT:
        _AREA_CACHE.clear()
    _AREA_CACHE[key] = area
    return area


def _bits_mask(bits: int, geometry: Geometry) -> np.ndarray:
    """int8 [N*N]: 1 at the flat points whose padded point's bit is set in ``bits``."""
    count = (geometry.padded_len + 7) // 8
    grid = np.unpackbits(np.frombuffer(bits.to_bytes(count, "little"), dtype=np.uint8), bitorder="little")
    return grid[geometry.padded_array].view(np.int8)


def _bits_points(bits: int, geometry: Geometry) -> list[int]:
    """The padded points whose bits are set in ``bits``."""
    padded = geometry.padded
    return [padded[flat] for flat in np.flatnonzero(_bits_mask(bits, geometry)).tolist()]


_ON_BOARD_BITS: dict[int, int] = {}
_REGION_CACHE: dict[tuple[int, int], list[int]] = {}  # (size, a colour's stones) -> the regions around them
_REGION_CACHE_LIMIT = 5000  # entries before it is emptied: a child needs its parent's, recent ones


def _area_bits(board: Board, pla: int, suicide: bool, black: int, white: int, owners: list[int]) -> None:
    """Benson's pass-alive strings and territory of ``pla``, and its big single-colour regions, into ``owners``
    (bits of padded points, per colour), as KataGo's calculateAreaForPla with safe and unsafe big territories.

    The points are bits of Python integers: a region (a connected set of points without ``pla``'s stones, holding
    an empty point) grows from its lowest empty point by shifts; a string is vital to a region when every empty
    point of it (every point, where suicide is legal) is next to the string. Strings with fewer than two vital
    regions die, and so do the regions next to them, until none dies (in any order: the same strings die)."""
    geometry = board.geometry
    width = geometry.width
    on_board = _ON_BOARD_BITS.get(geometry.size)
    if on_board is None:
        on_board = _ON_BOARD_BITS[geometry.size] = sum(1 << pad for pad in geometry.padded)
    near = _near_bits(geometry)
    color = board.color
    root = board.root
    neighbors = geometry.neighbors
    own, other = (black, white) if pla == BLACK else (white, black)
    empty = on_board & ~(black | white)
    space = on_board & ~own
    own_near = own | (own << 1) | (own >> 1) | (own << width) | (own >> width)
    stones_of: dict[int, int] = {}  # string root -> bits of its stones
    reach_of: dict[int, int] = {}  # string root -> bits of its stones and their neighbours

    def reach(head: int) -> int:
        bits = reach_of.get(head)
        if bits is None:
            bits = stones = 0
            for stone in board.string_stones(head):
                stones |= 1 << stone
                bits |= near[stone]
            stones_of[head] = stones
            reach_of[head] = bits
        return bits

    # The regions are the connected parts of ``space``, so they follow from pla's stones alone: a child in the search
    # finds those of the colour that did not move in its parent's cache entry.
    key = (geometry.size, own)
    known = _REGION_CACHE.get(key)
    regions = [region for region in known if region & empty] if known is not None else []
    left = empty
    for region in regions:
        left &= ~region
    if left:
        found = list(known) if known is not None else []
        while left:
            seed = left & -left
            region = seed
            while True:
                grown = (region | (region << 1) | (region >> 1) | (region << width) | (region >> width)) & space
                if grown == region:
                    break
                region = grown
            left &= ~region
            regions.append(region)
            found.append(region)
        if len(_REGION_CACHE) > _REGION_CACHE_LIMIT:
            _REGION_CACHE.clear()
        _REGION_CACHE[key] = found
    vital: list[list[int]] = []
    safe: list[bool] = []  # at most one point not next to pla's stones, or no opponent's stone
    has_opp: list[bool] = []
    for region in regions:
        relevant = region & empty
        seed = relevant & -relevant  # any empty point would do: the vital strings are next to all of them
        point = seed.bit_length() - 1
        if suicide:
            relevant = region
        heads = {root[n] for n in neighbors[point] if color[n] == pla}
        vital.append([head for head in heads if not relevant & ~reach(head)])
        contains_opp = bool(region & other)
        has_opp.append(contains_opp)
        safe.append((region & ~own_near).bit_count() <= 1 or not contains_opp)

    vital_count = dict.fromkeys((r for r in board.liberties if color[r] == pla), 0)
    for heads in vital:
        for head in heads:
            vital_count[head] += 1
    alive = set(vital_count)
    dead = [False] * len(regions)
    while True:
        dying = [head for head in alive if vital_count[head] < 2]
        if not dying:
            break
        alive.difference_update(dying)
        living = 0
        for head in alive:
            reach(head)
            living |= stones_of[head]
        killed = own & ~living
        killed_near = killed | (killed << 1) | (killed >> 1) | (killed << width) | (killed >> width)
        for index, region in enumerate(regions):
            if not dead[index] and region & killed_near:
                dead[index] = True
                for head in vital[index]:
                    vital_count[head] -= 1
    alive_bits = 0
    for head in alive:
        reach(head)
        alive_bits |= stones_of[head]
    opp = 3 - pla
    owners[pla] |= alive_bits
    owners[opp] &= ~alive_bits
    if not own:
        return
    for index, region in enumerate(regions):
        if not dead[index] and safe[index]:
            owners[pla] |= region
            owners[opp] &= ~region
        elif not has_opp[index]:
            owners[pla] |= region & ~(owners[BLACK] | owners[WHITE])


def _independent_life(board: Board, basic: bytearray) -> bytearray:
    """KataGo's calculateIndependentLifeArea keeping stones: the areas that touch no dame and hold no owner's stone in
    atari (no seki), and every stone of the basic area."""
    geometry = board.geometry
    color = board.color
    neighbors = geometry.neighbors
    seki = [False] * geometry.padded_len
    for pad in geometry.padded:
        owner = basic[pad]
        if owner == EMPTY or seki[pad]:
            continue
        in_atari = color[pad] == owner and len(board.liberties[board.root[pad]]) == 1
        touches_dame = any(color[n] == EMPTY and basic[n] == EMPTY for n in neighbors[pad])
        if in_atari or touches_dame:
            seki[pad] = True
            queue = [pad]
            while queue:
                point = queue.pop()
                for n in neighbors[point]:
                    if basic[n] == owner and not seki[n]:
                        seki[n] = True
                        queue.append(n)
    result = bytearray(geometry.padded_len)
    for pad in geometry.padded:
        owner = basic[pad]
        if owner != EMPTY and (not seki[pad] or color[pad] == owner):
            result[pad] = owner
    return result


# -- ladders -------------------------------------------------------------------------------------------------------

_LADDER_CACHE: dict[tuple[bytes, int], tuple[np.ndarray, dict[int, np.ndarray]]] = {}
_NO_POINTS = np.zeros(0, dtype=np.int64)


def _recent_ladders(state: GameState, age: int, start: int) -> np.ndarray:
    """Feature 14's stones on the position ``age`` moves ago (its ko point rebuilt from the move that made it; none
    on the starting position of KataGo's history, from move ``start``)."""
    colors = state.history_colors(age)
    if colors is None:
        return _ladders(bytes(state.board.color), state.board.ko, state.board)[0]
    colors = bytes(colors)
    return _ladders(colors, _ko_made(state, age, colors, start), None)[0]


def _ko_made(state: GameState, age: int, after: bytes, start: int) -> int:
    """The ko point of the position ``age`` moves ago (padded, or NO_POINT): its move captured one stone with one
    lone stone that has one liberty left."""
    moves = state.moves
    if len(moves) - age - 1 < start:
        return NO_POINT
    color, move = moves[-age - 1]
    before = state.history_colors(age + 1)
    if move == PASS or before is None:
        return NO_POINT
    neighbors = state.board.geometry.neighbors
    pad = state.board.geometry.padded[move]
    other = 3 - color
    around = [after[n] for n in neighbors[pad]]
    if after[pad] != color or color in around or around.count(EMPTY) != 1:
        return NO_POINT
    # Every captured string touches the move: one stone taken means one neighbour taken, with no stone of its
    # colour beside it.
    captured = [n for n in neighbors[pad] if before[n] == other and after[n] == EMPTY]
    if len(captured) != 1 or any(before[n] == other for n in neighbors[captured[0]]):
        return NO_POINT
    return captured[0]


def _ladders(colors: bytes, ko: int, board: Board | None) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """(flat points of the stones of strings with one or two liberties that a ladder captures, {colour: flat points
    of the moves that ladder-capture that colour's two-liberty strings}) for the position of padded ``colors`` and
    ``ko``; ``board`` is that position when the caller has it (else it is built from the colours)."""
    key = (colors, ko)
    found = _LADDER_CACHE.get(key)
    if found is not None:
        return found
    if board is None:
        board = _board_from_colors(colors, ko)
    elif board.ko != ko:
        board = board.copy()
        board.ko = ko
    flat = board.geometry.flat
    board_color = board.color
    stones: list[int] = []
    working: dict[int, list[int]] = {BLACK: [], WHITE: []}
    masks = None
    reach: dict[int, int] = {}  # string root -> the bits of its stones and their neighbours, made as reads need them
    for root, libs in list(board.liberties.items()):
        count = len(libs)
        if count > 2:
            continue
        if masks is None:
            masks = _stone_bits(colors)
        captured, moves = _string_ladder(board, root, count, ko if count == 2 and ko in libs else NO_POINT, masks,
                                         reach)
        if moves:
            working[board_color[root]].extend(flat[m] for m in moves)
        if captured:
            stones.extend(flat[s] for s in board.string_stones(root))
    result = (np.asarray(stones, dtype=np.int64) if stones else _NO_POINTS,
              {c: np.asarray(points, dtype=np.int64) if points else _NO_POINTS for c, points in working.items()})
    if len(_LADDER_CACHE) > _CACHE_LIMIT:
        _LADDER_CACHE.clear()
    _LADDER_CACHE[key] = result
    return result


# One string's ladder reading, kept with the points it depends on (its footprint, a bit per padded point) and the
# stones there when it was read: another position with the same stones on the footprint reads the same (see
# _footprint). Keyed by the board's size, the string's root and the ko point when that is one of its liberties (or
# minus the colour, for the string an extension makes: _extension_ladder). Entries: (black, white, footprint, result).
_STRING_CACHE: dict[tuple[int, int, int], list[tuple[int, int, int, object]]] = {}
_STRING_CACHE_LIMIT = 10000  # keys (board size, point, tag) before it is emptied
_READS_PER_KEY = 16  # footprints kept per key, the most recently used


def _digits(color: int) -> bytes:
    """A bytes.translate table: ``color`` to the digit 1, every other byte to 0."""
    table = bytearray(b"0" * 256)
    table[color] = ord("1")
    return bytes(table)


_BLACK_DIGITS = _digits(BLACK)
_WHITE_DIGITS = _digits(WHITE)


def _stone_bits(colors: bytes) -> tuple[int, int]:
    """(black, white): a bit per padded point of ``colors`` (bit i: point i) that holds a stone of that colour. The
    colours become a string of binary digits, the last point first, read by int() in C."""
    return int(colors.translate(_BLACK_DIGITS)[::-1], 2), int(colors.translate(_WHITE_DIGITS)[::-1], 2)


def _string_ladder(board: Board, root: int, count: int, ko_tag: int, masks: tuple[int, int],
                   reach: dict[int, int]) -> tuple[bool, tuple[int, ...]]:
    """(whether a ladder takes the string at ``root`` with ``count`` (1 or 2) liberties, and for two liberties the
    attacker's moves that start one): read, or found in the string cache."""
    key = (board.geometry.size, root, ko_tag)
    found = _cached_read(key, masks)
    if found is not None:
        return found
    touched: set[int] = set()
    defended: set[int] = set()
    if count == 1:
        captured, spent = _read_ladder(board, root, True, touched, defended)
        moves: tuple[int, ...] = ()
    else:
        working, spent = _attacker_first_two_liberties(board, root, touched, defended)
        moves = tuple(working)
        captured = bool(moves)
    if not spent:
        # A search stopped by the node budget is not kept: the order of its moves (set order) decides it.
        _keep_read(key, masks, _footprint(board, root, touched, defended, reach), (captured, moves))
    return captured, moves


def _extension_ladder(board: Board, move: int, pla: int, masks: tuple[int, int]) -> bool:
    """Whether KataGo's ladder search, the attacker moving first, takes the string that ``pla``'s move at ``move``
    (padded, legal, extending a string to two liberties: no ko follows) makes: read on the board after the move, or
    found in the string cache (keyed by the move; the footprint holds the strings the move joins or captures, and
    ``masks`` are ``board``'s stones, before the move)."""
    key = (board.geometry.size, move, -pla)
    found = _cached_read(key, masks)
    if found is not None:
        return found
    child = board.copy()
    new_hash, captured_roots = child.try_play(move, pla, True)
    child._commit(move, pla, new_hash, captured_roots)
    touched: set[int] = set()
    defended: set[int] = set()
    captured, spent = _read_ladder(child, move, False, touched, defended)
    if not spent:
        # The reading's footprint after the move, and before it what decides the move's captures and merges: the
        # strings beside it, and its neighbours.
        footprint = _footprint(child, move, touched, defended, {}) | _near_bits(board.geometry)[move]
        color = board.color
        heads = {board.root[n] for n in board.geometry.neighbors[move] if color[n] == BLACK or color[n] == WHITE}
        near = _near_bits(board.geometry)
        for head in heads:
            for stone in board.string_stones(head):
                footprint |= near[stone]
        _keep_read(key, masks, footprint, captured)
    return captured


def _cached_read(key: tuple[int, int, int], masks: tuple[int, int]):
    """The result kept under ``key`` whose footprint holds the same stones as ``masks`` (black, white), or None."""
    reads = _STRING_CACHE.get(key)
    if not reads:
        return None
    black, white = masks
    snapshot = reads.copy()  # the evaluator's threads may change the list meanwhile
    for read in reversed(snapshot):
        if not ((black ^ read[0]) | (white ^ read[1])) & read[2]:
            if read is not snapshot[-1]:
                # the most recently used last, so that the least recently used goes first
                try:
                    reads.remove(read)
                    reads.append(read)
                except ValueError:  # another thread dropped it
                    pass
            return read[3]
    return None


def _keep_read(key: tuple[int, int, int], masks: tuple[int, int], footprint: int, result) -> None:
    reads = _STRING_CACHE.get(key)
    entry = (masks[0], masks[1], footprint, result)
    if reads is None:
        if len(_STRING_CACHE) > _STRING_CACHE_LIMIT:
            _STRING_CACHE.clear()
        _STRING_CACHE[key] = [entry]
    else:
        reads.append(entry)
        if len(reads) > _READS_PER_KEY:
            del reads[0]


def _footprint(board: Board, root: int, touched: set[int], defended: set[int], reach: dict[int, int]) -> int:
    """The bits of every point whose colour a ladder reading of the string at ``root`` may have looked at, given
    ``touched``: every point the reading played or considered playing (liberties of the laddered string, captures),
    and ``defended``: those the defender played or considered.

    Every board of the reading is ``board`` with moves at touched points and strings captured, and each node reads
    the colours around the laddered string, the candidate moves and the strings next to them. In ``board``'s terms
    those are within: the touched points, the string's stones and their neighbours (K); every string that meets K
    (captures take such strings, and the laddered string grows by the defender's strings beside its moves); the
    opponent's strings next to the laddered string or to a defender's string beside a defender's move (their
    liberties are the defender's captures); and the neighbours of all of these. A position equal to ``board`` on
    those points runs the same reading, move for move."""
    geometry = board.geometry
    near = _near_bits(geometry)
    neighbors = geometry.neighbors
    color = board.color
    roots = board.root
    pla = color[root]
    opp = 3 - pla
    points = touched.union(board.string_stones(root))
    footprint = 0
    heads: set[int] = set()
    for point in points:
        footprint |= near[point]
        c = color[point]
        if c == BLACK or c == WHITE:
            heads.add(roots[point])
        for n in neighbors[point]:
            c = color[n]
            if c == BLACK or c == WHITE:
                heads.add(roots[n])
    joined = {roots[root]}  # the defender's strings the laddered string may take in
    for point in defended:
        for n in neighbors[point]:
            if color[n] == pla:
                joined.add(roots[n])
    for head in joined:
        for stone in board.string_stones(head):
            for n in neighbors[stone]:
                if color[n] == opp:
                    heads.add(roots[n])
    for head in heads:
        bits = reach.get(head)
        if bits is None:
            bits = 0
            for stone in board.string_stones(head):
                bits |= near[stone]
            reach[head] = bits
        footprint |= bits
    return footprint


_NEAR_BITS: dict[int, list[int]] = {}


def _near_bits(geometry: Geometry) -> list[int]:
    """Padded point -> the bits of the point and its four neighbours (the point alone on the border)."""
    near = _NEAR_BITS.get(geometry.size)
    if near is None:
        near = [1 << pad for pad in range(geometry.padded_len)]
        for pad in geometry.padded:
            for n in geometry.neighbors[pad]:
                near[pad] |= 1 << n
        _NEAR_BITS[geometry.size] = near
    return near


def _board_from_colors(colors: bytes, ko: int) -> Board:
    """A Board with padded ``colors`` (strings and liberties rebuilt) and ``ko``; no hash (ladders need none)."""
    size = int(round(math.sqrt(len(colors) - 1))) - 1
    board = Board(size)
    board.color = bytearray(colors)
    neighbors = board.geometry.neighbors
    root = board.root
    next_stone = board.next_stone
    for pad in board.geometry.padded:
        c = colors[pad]
        if c == EMPTY or c == EDGE or root[pad] != NO_POINT:
            continue
        stones = [pad]
        root[pad] = pad
        libs = set()
        i = 0
        while i < len(stones):
            stone = stones[i]
            i += 1
            for n in neighbors[stone]:
                nc = colors[n]
                if nc == EMPTY:
                    libs.add(n)
                elif nc == c and root[n] == NO_POINT:
                    root[n] = pad
                    stones.append(n)
        for a, b in zip(stones, stones[1:] + stones[:1]):
            next_stone[a] = b
        board.liberties[pad] = libs
    board.ko = ko  # _play refuses the ko point to either colour, as KataGo's isLegal does
    return board


class _BudgetSpent(Exception):
    pass


def _play(board: Board, point: int, color: int) -> Board | None:
    """The board after ``color`` plays ``point`` (a copy), or None where KataGo's isLegal says no (occupied, the ko
    point, suicide)."""
    if board.color[point] != EMPTY or point == board.ko:
        return None
    try:
        new_hash, captured = board.try_play(point, color)
    except IllegalMoveError:
        return None  # suicide
    child = board.copy()
    child._commit(point, color, new_hash, captured)
    return child


def _attacker_first_two_liberties(board: Board, root: int, touched: set[int] | None = None,
                                  defended: set[int] | None = None) -> tuple[list[int], bool]:
    """KataGo's searchIsLadderCapturedAttackerFirst2Libs: (the liberties of the two-liberty string at ``root`` where
    the attacker's move starts a ladder that captures it, whether a search ran out of its node budget). The points
    the readings play or consider go into ``touched``, the defender's among them into ``defended`` too."""
    pla = board.color[root]
    opp = 3 - pla
    working = []
    spent = False
    liberties = list(board.liberties[root])
    if touched is None:
        touched = set()
    if defended is None:
        defended = set()
    touched.update(liberties)
    for move, escape in (liberties, liberties[::-1]):
        if _escapes_surely(board, move, escape, pla):
            continue
        child = _play(board, move, opp)
        if child is None:
            continue
        captured, out = _read_ladder(child, root, True, touched, defended)
        spent = spent or out
        if captured:
            working.append(move)
    return working, spent


def _escapes_surely(board: Board, move: int, escape: int, pla: int) -> bool:
    """Whether, after the attacker takes the liberty ``move`` of a two-liberty string of ``pla``, extending at the
    other liberty ``escape`` surely gives the string three liberties: a lower bound, read without playing, on what
    KataGo's getBoundNumLibertiesAfterPlay gives there after the move. Then the ladder search would answer no at
    once, whatever the order of its moves. Moves that capture are left to the search."""
    color = board.color
    root = board.root
    liberties = board.liberties
    neighbors = board.geometry.neighbors
    opp = 3 - pla
    for n in neighbors[move]:
        if color[n] == pla and len(liberties[root[n]]) == 1:
            return False
    immediate = 0
    connection = 0
    for n in neighbors[escape]:
        c = color[n]
        if c == EMPTY:
            if n != move:
                immediate += 1
        elif c == pla:
            libs = liberties[root[n]]
            connection = max(connection, len(libs) - (move in libs) - 1)
        elif c == opp:
            pass
    return max(immediate, connection) >= 3


def _ladder_captured(board: Board, loc: int, defender_first: bool) -> bool:
    """KataGo's searchIsLadderCaptured: whether the string at ``loc`` dies in a ladder, the defender (its colour)
    moving first. Kos count as won by the defender."""
    return _read_ladder(board, loc, defender_first, set(), set())[0]


def _read_ladder(board: Board, loc: int, defender_first: bool, touched: set[int], defended: set[int]) \
        -> tuple[bool, bool]:
    """(``_ladder_captured``, whether the search ran out of its node budget: then it says no). The points the
    search plays or considers playing go into ``touched``, the defender's among them into ``defended`` too."""
    pla = board.color[loc]
    if pla != BLACK and pla != WHITE:
        return False, False
    libs = len(board.liberties[board.root[loc]])
    if libs > 2 or (defender_first and libs > 1):
        return False, False
    if defender_first and board.ko != NO_POINT:
        board = board.copy()
        board.ko = NO_POINT
    size = board.geometry.size
    search = _LadderSearch(loc, pla, defender_first, size * size * 3 // 2 + 1, touched, defended)
    try:
        return search.node(board, 0), False
    except _BudgetSpent:
        return False, True


class _LadderSearch:
    __slots__ = ("loc", "pla", "opp", "defender_first", "stack_size", "nodes", "touched", "defended")

    def __init__(self, loc: int, pla: int, defender_first: bool, stack_size: int, touched: set[int],
                 defended: set[int]):
        self.touched = touched
        self.defended = defended
        self.loc = loc
        self.pla = pla
        self.opp = 3 - pla
        self.defender_first = defender_first
        self.stack_size = stack_size
        self.nodes = 0

    def node(self, board: Board, depth: int) -> bool:
        """Whether the string is captured with the search ``depth`` moves deep."""
        if depth >= self.stack_size - 1:
            return True
        if self.nodes >= LADDER_NODE_BUDGET:
            raise _BudgetSpent
        is_defender = (depth % 2 == 0) == self.defender_first
        loc = self.loc
        pla = self.pla
        liberties = board.liberties[board.root[loc]]
        libs = len(liberties)
        if not is_defender:
            if libs <= 1:
                return True
            if libs >= 3:
                return False
        else:
            if libs >= 2:
                return False
            if board.ko != NO_POINT:
                return False
        if is_defender:
            moves = _capturing_moves(board, loc)
            for lib in liberties:
                if lib not in moves:
                    moves.append(lib)
            self.touched.update(moves)
            self.defended.update(moves)
            lower, upper = _liberty_bounds(board, moves[-1], pla)
            if lower >= 3:
                return False
            if len(moves) == 1 and upper <= 1:
                return True
            mover = pla
        else:
            moves = list(liberties)
            self.touched.update(moves)
            first, second = moves
            libs0 = _immediate_liberties(board, first)
            libs1 = _immediate_liberties(board, second)
            opp = self.opp
            if (libs0 == 0 and libs1 == 0 and _would_be_ko_capture(board, first, opp)
                    and _would_be_ko_capture(board, second, opp)
                    and _liberties_after_play(board, first, pla, 3) <= 2
                    and _liberties_after_play(board, second, pla, 3) <= 2
                    and not _capturing_moves(board, loc)):
                return True
            width = board.geometry.width
            if abs(first - second) not in (1, width):
                if libs0 >= 3 and libs1 >= 3:
                    return False
                if libs0 >= 3:
                    moves = [first]
                elif libs1 >= 3:
                    moves = [second]
            if len(moves) > 1:
                score0 = libs0 * 2 + _connection_liberties_x2(board, first, pla)
                score1 = libs1 * 2 + _connection_liberties_x2(board, second, pla)
                if score1 > score0:
                    moves = [second, first]
            mover = opp
        for move in moves:
            if not is_defender and _escapes_surely(board, move, first if move == second else second, pla):
                continue  # the defender's answer surely has three liberties: this move fails
            child = _play(board, move, mover)
            if child is None:
                continue
            self.nodes += 1
            captured = self.node(child, depth + 1)
            if is_defender and not captured:
                return False
            if not is_defender and captured:
                return True
            if self.nodes >= LADDER_NODE_BUDGET:
                raise _BudgetSpent
        return is_defender


def _capturing_moves(board: Board, loc: int) -> list[int]:
    """The liberties of the opposing strings in atari next to the string at ``loc``: moves that gain it liberties."""
    color = board.color
    own = color[loc]
    opp = 3 - own
    root = board.root
    liberties = board.liberties
    neighbors = board.geometry.neighbors
    moves: list[int] = []
    checked: set[int] = set()
    for stone in board.string_stones(root[loc]):
        for n in neighbors[stone]:
            if color[n] == opp:
                head = root[n]
                if head not in checked:
                    checked.add(head)
                    libs = liberties[head]
                    if len(libs) == 1:
                        for lib in libs:
                            if lib not in moves:
                                moves.append(lib)
    return moves


def _immediate_liberties(board: Board, point: int) -> int:
    color = board.color
    return sum(1 for n in board.geometry.neighbors[point] if color[n] == EMPTY)


def _liberty_bounds(board: Board, point: int, pla: int) -> tuple[int, int]:
    """KataGo's getBoundNumLibertiesAfterPlay: quick lower and upper bounds on the liberties of a stone played."""
    color = board.color
    root = board.root
    liberties = board.liberties
    opp = 3 - pla
    immediate = captures = capture_stones = connection = best_connection = 0
    for n in board.geometry.neighbors[point]:
        c = color[n]
        if c == EMPTY:
            immediate += 1
        elif c == opp:
            libs = len(liberties[root[n]])
            if libs == 1:
                captures += 1
                capture_stones += len(board.string_stones(root[n]))
        elif c == pla:
            libs = len(liberties[root[n]]) - 1
            connection += libs
            best_connection = max(best_connection, libs)
    lower = captures + max(best_connection, immediate)
    upper = immediate + capture_stones + connection
    return lower, upper


def _liberties_after_play(board: Board, point: int, pla: int, cap: int) -> int:
    """KataGo's getNumLibertiesAfterPlay: the liberties a stone played at ``point`` would have, at most ``cap``."""
    color = board.color
    root = board.root
    liberties = board.liberties
    neighbors = board.geometry.neighbors
    opp = 3 - pla
    libs: set[int] = set()
    captured_heads: set[int] = set()
    for n in neighbors[point]:
        c = color[n]
        if c == EMPTY:
            libs.add(n)
        elif c == opp and len(liberties[root[n]]) == 1:
            libs.add(n)
            captured_heads.add(root[n])
        if len(libs) >= cap:
            return cap
    heads = {root[n] for n in neighbors[point] if color[n] == pla}
    for head in heads:
        for stone in board.string_stones(head):
            for n in neighbors[stone]:
                if n == point:
                    continue
                c = color[n]
                if c == EMPTY or (c == opp and root[n] in captured_heads):
                    libs.add(n)
                    if len(libs) >= cap:
                        return cap
    return len(libs)


def _would_be_ko_capture(board: Board, point: int, pla: int) -> bool:
    """KataGo's wouldBeKoCapture: every neighbour is the opponent's (or the edge) and exactly one of them, a lone
    stone, is in atari."""
    color = board.color
    if color[point] != EMPTY:
        return False
    opp = 3 - pla
    capturable = NO_POINT
    for n in board.geometry.neighbors[point]:
        c = color[n]
        if c != EDGE and c != opp:
            return False
        if c == opp and len(board.liberties[board.root[n]]) == 1:
            if capturable != NO_POINT:
                return False
            capturable = n
    if capturable == NO_POINT:
        return False
    return board.next_stone[capturable] == capturable


def _connection_liberties_x2(board: Board, point: int, pla: int) -> int:
    """KataGo's countHeuristicConnectionLibertiesX2: for each neighbouring ``pla`` string with more than one
    liberty, twice its liberties less three."""
    color = board.color
    root = board.root
    liberties = board.liberties
    total = 0
    for n in board.geometry.neighbors[point]:
        if color[n] == pla:
            libs = len(liberties[root[n]])
            if libs > 1:
                total += libs * 2 - 3
    return total


def inverse_transform_policy(policy: np.ndarray, symmetry) -> np.ndarray:
    """Policy [..., N*N+1] of planes seen under ``symmetry`` back in the board's frame (as Leela Zero's planes)."""
    from tabula.engine.net.features import inverse_transform_policy as inverse

    return inverse(policy, symmetry)


def clear_caches() -> None:
    """Empty the ladder, area and replay caches (tests, and memory after a game)."""
    _LADDER_CACHE.clear()
    _STRING_CACHE.clear()
    _BANS_CACHE.clear()
    _AREA_CACHE.clear()
    _REGION_CACHE.clear()
    _REPLAY_CACHE.clear()


__all__ = ["INPUT_ENCODING", "NUM_SPATIAL", "NUM_GLOBAL", "NUM_PLANES", "features", "encode", "encode_batch",
           "komi_wave", "inverse_transform_policy", "clear_caches", "Geometry"]
