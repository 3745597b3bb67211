"""Stones enclosed in a group's only liberties: whether the seki that a liberty count sees there holds.

Layer: above board. Used by ``engine.rules.playout.seki_stones`` (no seki where the reading kills) and by
``engine.play.judging`` (the dead stones: what it kills is dead, the stones that kill live).

A group whose only liberties are shared with opponent stones it encloses looks like a seki to a count of
liberties: whichever side fills a shared liberty puts itself in atari. But the enclosed side can sacrifice: fill a
liberty, be captured, and then play the vital point of the space its capture left, as in a nakade, until the group
is captured. Whether it can is a closed game on a few points (the enclosed stones and the empty points around
them, bordered by the group and the board's edge alone), read here to the end: small enough to read every line,
where random playouts break such a seki at random and a network may read it either way.
"""
from __future__ import annotations

from tabula.engine.rules.board import EDGE, Board, IllegalMoveError
from tabula.engine.rules.coords import BLACK, EMPTY, WHITE

PLIES_PER_POINT = 6  # the depth bound, per point of the region: room for the defender's passes between the
# attacker's fills, sacrifices and vital points (docs/RELIABILITY.md, "Dead stones against GNU Go")
MAX_POSITIONS = 5_000  # positions read before giving up (the seki stands): a quarter of a second of CPU or so
MAX_REGION_POINTS = 8  # enclosed regions larger than this are left to the other judges: reading grows as 3^points
_READ: dict[tuple, bool] = {}  # the readings' answers by region and contents
_READ_LIMIT = 1_000  # entries before it is emptied


def enclosed_kill(board: Board, root: int, read: set[int] | None = None,
                  dead: frozenset[int] = frozenset()) -> set[int] | None:
    """Roots of the strings that are not in seki after all, or None where the seki stands or is not of this kind.

    ``root`` is a string of the colour that may be enclosed (the attacker). Its region is every point reachable from
    it through empty points and the attacker's stones; the defender's string is the one bordering the region. Where
    the region has at most ``MAX_REGION_POINTS`` points, one defender string borders it and has all its liberties in
    it, none of the attacker's strings outside the region that touch it (its wall) is among ``dead`` (padded points
    judged dead otherwise: enclosed stones inside a dead wall do not live) or in atari where its capture is no ko
    (the defender would take it), and the attacker, playing inside the region only, captures the defender whatever
    it plays there or passes, the defender moving first: the roots of the attacker's strings in the region (they
    live) and of the defender's string (it dies). ``read``, where given, gets ``root`` and the roots of the
    attacker's strings of every region looked at, so that a caller reads each region once."""
    color = board.color
    attacker = color[root]
    neighbors = board.geometry.neighbors
    region = [root]
    seen = {root}
    defenders: set[int] = set()
    if read is not None:
        read.add(root)
    for point in region:
        for n in neighbors[point]:
            if n in seen:
                continue
            if color[n] == EMPTY or color[n] == attacker:
                seen.add(n)
                region.append(n)
                if len(region) > MAX_REGION_POINTS:
                    return None
            elif color[n] == 3 - attacker:
                defenders.add(board.root[n])
    region.sort()  # the same region gives the same reading (and cache entry) from whichever string it is found
    inside = set(region)
    attackers = {board.root[p] for p in region if color[p] == attacker}
    if read is not None:
        read |= attackers
    if len(defenders) != 1:  # several strings: taking one need not kill the rest
        return None
    (defender,) = defenders
    if not board.liberties[defender] <= inside:
        return None
    defender_stones = board.string_stones(defender)
    walls = {board.root[n] for stone in defender_stones for n in neighbors[stone]
             if color[n] == attacker and n not in inside}
    if not dead.isdisjoint(stone for wall in walls for stone in board.string_stones(wall)):
        return None
    if any(_takes_for_good(board, wall) for wall in walls):  # the defender, moving first, takes it
        return None
    # The local game depends on the region's points and the defender's string alone: a judgement asks the same
    # region several times (with other stones off the board elsewhere), so the answers are kept.
    key = (board.size, tuple(region), bytes(color[p] for p in region), board.ko, board.ko_color,
           tuple(sorted(defender_stones)))
    kills = _READ.get(key)
    if kills is None:
        if len(_READ) >= _READ_LIMIT:
            _READ.clear()
        kills = _READ[key] = _attacker_captures(board, region, attacker, defender_stones)
    return attackers | defenders if kills else None


def settled_by_reading(board: Board, dead: list[int] = ()) -> tuple[list[int], list[int]]:
    """Flat points of the stones that ``enclosed_kill``'s reading settles on ``board``: (dead, alive), the
    enclosing strings that die and the enclosed strings that kill them. ``dead``: flat points judged dead
    otherwise; a region whose wall holds any of them is not read (its enclosed stones need not live)."""
    geometry = board.geometry
    color = board.color
    judged = frozenset(geometry.padded[p] for p in dead)
    killed: set[int] = set()
    alive: set[int] = set()
    read: set[int] = set()  # the attacker's strings already read with their region: one reading a region
    for root in sorted({board.root[pad] for pad in geometry.padded if color[pad] in (BLACK, WHITE)}):
        if root in read or root in killed or root in alive:
            continue
        settled = enclosed_kill(board, root, read, judged)
        if settled:
            for string in settled:
                (alive if color[string] == color[root] else killed).add(string)
    both = killed & alive  # regions that read each other: left to the other judges
    return ([geometry.flat[p] for root in sorted(killed - both) for p in board.string_stones(root)],
            [geometry.flat[p] for root in sorted(alive - both) for p in board.string_stones(root)])


def _attacker_captures(board: Board, region: list[int], attacker: int, defender_stones: list[int]) -> bool:
    """Whether ``attacker`` captures the string of ``defender_stones`` by moves inside ``region`` whatever the
    defender plays there or passes, the defender moving first (a pass included): a kill that holds whoever is to
    move. The wall around the defender is taken to stand (``enclosed_kill`` reads no region whose wall the defender
    can take at once, where the capture is no ko): the defender's moves outside the region are passes here, not a
    race to fill a wall's liberties. At the end of a game a wall's last liberties are mostly points the defender
    cannot fill (the wall's eyes, or self-atari; docs/RELIABILITY.md). A group that the attacker kills only by
    moving first is left alone: at the end of a game the defender may be the one to move (a 13x13 game's black group
    with one white stone in its eye space lived so, as GNU Go and KataGo's network judge it).

    The reading is bounded: ``PLIES_PER_POINT`` plies a point of the region (room for sacrifices, their capture
    and the vital point played again), a line cut off there counting as the defender's, and ``MAX_POSITIONS``
    positions read in all, past which the answer is no. A position's result is kept with the depth it was read to:
    a capture found within fewer plies holds with more, a defence that held with more plies holds with fewer."""
    defender = 3 - attacker
    neighbors = board.geometry.neighbors
    inside = set(region)
    # The attacker tries the points with the most neighbours inside the region first: the vital points.
    order = sorted(region, key=lambda p: -sum(1 for n in neighbors[p] if n in inside))
    known: dict[tuple, tuple[bool, int]] = {}
    read = [0]

    def moves(position: Board, color: int):
        """The positions after each legal move of ``color`` inside the region, vital points first."""
        for point in order:
            if position.color[point] == EMPTY:
                child = position.copy()
                try:
                    child.play(point, color)
                except IllegalMoveError:
                    continue
                yield child

    def captures(position: Board, to_move: int, depth: int) -> bool:
        if depth == 0:
            return False
        read[0] += 1
        if read[0] > MAX_POSITIONS:
            raise _OutOfReading
        key = (bytes(position.color[p] for p in region), position.ko, position.ko_color, to_move)
        found = known.get(key)
        if found is not None and (found[1] <= depth if found[0] else found[1] >= depth):
            return found[0]
        if _two_eyes(position, region, defender, defender_stones):
            result = False
        elif to_move == attacker:  # a capture now, or a move after which every answer loses
            result = any(any(child.color[stone] == EMPTY for stone in defender_stones)
                         or captures(child, defender, depth - 1) for child in moves(position, attacker))
        else:  # the pass and every move lose
            result = captures(position, attacker, depth - 1) and all(
                captures(child, attacker, depth - 1) for child in moves(position, defender))
        known[key] = (result, depth)
        return result

    try:
        return captures(board, defender, PLIES_PER_POINT * len(region) + 1)  # + 1: the defender's first move
    except _OutOfReading:
        return False


def _takes_for_good(board: Board, wall: int) -> bool:
    """Whether the string ``wall`` is in atari and its capture frees the taker for good: not where one stone is taken
    and the taking string is left in atari, a ko or a snapback. A wall that only a ko takes is taken to stand: at
    the end of a game the ko is not fought (docs/RELIABILITY.md, "Dead stones against GNU Go")."""
    if len(board.liberties[wall]) != 1:
        return False
    (liberty,) = board.liberties[wall]
    position = board.copy()
    try:
        captured = position.play(liberty, 3 - board.color[wall])
    except IllegalMoveError:
        return False
    return not (len(captured) == 1 and len(position.liberties[position.root[liberty]]) == 1)


class _OutOfReading(Exception):
    """The reading went past ``MAX_POSITIONS``: the seki is left standing."""


def _two_eyes(board: Board, region: list[int], defender: int, defender_stones: list[int]) -> bool:
    """Whether the defender's strings now live unconditionally (Benson's test on one-point eyes): every string left,
    among those holding ``defender_stones`` or bordering ``region``, is next to two empty points of the region whose
    every neighbour is a defender's stone of a string left. Such strings cannot be captured whatever the attacker
    plays, so the reading stops there."""
    color = board.color
    neighbors = board.geometry.neighbors
    eyes = [p for p in region if color[p] == EMPTY and all(color[n] in (defender, EDGE) for n in neighbors[p])]
    if len(eyes) < 2:
        return False
    roots = {board.root[stone] for stone in defender_stones if color[stone] == defender}
    roots |= {board.root[n] for p in region for n in neighbors[p] if color[n] == defender}
    while True:
        eye_roots = {eye: {board.root[n] for n in neighbors[eye] if color[n] == defender} for eye in eyes}
        eyes = [eye for eye in eyes if eye_roots[eye] <= roots]
        left = {root for root in roots if sum(1 for eye in eyes if root in eye_roots[eye]) >= 2}
        if left == roots:
            return bool(roots) and all(color[stone] == defender and board.root[stone] in roots
                                       for stone in defender_stones)
        roots = left
