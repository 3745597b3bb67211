"""Dead stones at the end of a game (final_status_list, final_score, kgs-genmove_cleanup): an ownership map's
verdict on each string, a second look at the strings it leaves near even, seki read on the board, and a check of the
count against the network's score.

Layer: above rules and playout, below the move pickers (``engine.play.search_player`` passes in its ownership
and the network's score).

Why each step (docs/RELIABILITY.md, "Dead stones against GNU Go", has the measurements):
- The ownership map (random playouts and rollouts from the position) calls a string dead when its stones' mean
  ownership is the opponent's. Most strings are far from even and that is the whole answer.
- A string near even often sits beside stones that are clearly dead: in random play those dead stones still
  fight, give a dead group liberties to connect to or take a live group's eye space. Counting takes them off the
  board, so the near-even strings are judged again in the position without them. Only from 13x13 up: on 9x9 the
  first verdict already agrees with GNU Go, and the second look only turned lone stones in a ko shape over at
  random.
- A seki breaks at random in random play (whoever fills a shared liberty first is captured), so its strings come
  out near even and either verdict. A near-even dead group that lives in seki once put back
  (``engine.rules.playout.seki_stones``) is alive, and no string in a seki is open to the score check.
- A group whose only liberties are shared with opponent stones it encloses, in a region of a few points, is read to
  the end (``engine.rules.enclosed``): where the enclosed stones capture it whoever moves first (by a sacrifice and
  the vital point, a nakade), it is dead and they live, whatever the map says, unless the wall around it is judged
  dead. Random playouts break such shapes at random, and a network's ownership head may read the group alive (in
  handicap games the student's did, where GNU Go and KataGo's network call it dead).
- The network's score head learned the recorded margin of counted games, dead stones and all. When the count with
  these dead stones names the other winner and is far from it (``SCORE_CHECK_POINTS``), a large group has been
  misjudged either way; the near-even strings or groups of them whose change brings the count well nearer the
  network's score change their verdict. Smaller differences are left alone: the score head's own error on a
  finished record is about what a small string's verdict is worth.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from tabula.engine.rules.coords import BLACK, EMPTY, WHITE
from tabula.engine.rules.enclosed import settled_by_reading
from tabula.engine.rules.game import TAX_SEKI, GameState
from tabula.engine.rules.playout import seki_stones, string_ownership

Ownership = Callable[[GameState], np.ndarray]  # float [N*N] in [-1, 1], black's view

NEAR_EVEN = 0.4  # a string whose mean ownership is within this of even is judged again
JUDGED_AGAIN_FROM_SIZE = 13  # boards from this size up judge near-even strings again
GROUP_DISTANCE = 2  # near-even strings of one colour this close (in lines, across and along) form a group
SCORE_CHECK_POINTS = 30.0  # a count this far from the network's score is checked
SCORE_CHANGE_POINTS = 10.0  # a verdict changes only when it brings the count this much nearer the score
SEKI_EYE_POINTS = 6  # a region of one colour larger than this is room for two eyes: its strings are not in seki


def judge_dead_stones(state: GameState, ownership: Ownership, score: float | None = None) -> list[int]:
    """Flat points of the stones judged dead in ``state``, whole strings at a time.

    ``ownership``: the map to judge by, called once on ``state`` and once more on the position without its clearly
    dead stones when some string is near even. Groups whose life the enclosed reading settles take its verdict and
    stay out of the score check. ``score``: the network's expected final margin from black's view,
    komi included (None: a network without a score head, no check)."""
    strings = string_ownership(state, ownership(state))
    near = [stones for stones, mean in strings if abs(mean) < NEAR_EVEN]
    if state.size < JUDGED_AGAIN_FROM_SIZE or not near:
        dead = {p for stones, mean in strings if mean < 0.0 for p in stones}  # playout.dead_stones' verdict
    else:
        dead = {p for stones, mean in strings if mean <= -NEAR_EVEN for p in stones}
        again = ownership(state.without_stones(sorted(dead)))
        for stones, mean in string_ownership(state, again, near):
            if mean < 0.0:
                dead.update(stones)
    if near:
        dead = _spare_seki(state, dead, near)
    killed, saved = settled_by_reading(state.board, sorted(dead))
    settled = set(killed) | set(saved)
    dead = (dead - set(saved)) | set(killed)
    if near and score is not None:
        seki = set(seki_stones(state, sorted(dead)))
        candidates = [stones for stones in near + _groups(state, near)
                      if not seki.intersection(stones) and not settled.intersection(stones)]
        dead = _fit_score(state, dead, candidates, score)
    return sorted(dead)


def count_without(state: GameState, dead: list[int]) -> float:
    """The count under ``state.rules`` (black's view, komi included) with the stones ``dead`` (flat points) taken off,
    the empty points of a seki counting for nobody where the rules say so (the seki tax): what a referee counts."""
    dead = sorted(dead)
    seki = seki_for_counting(state, dead) if state.rules.tax == TAX_SEKI else []
    return state.score(dead, seki)


def seki_for_counting(state: GameState, dead: list[int]) -> list[int]:
    """Flat points of the live stones in seki as territory counting sees them (``GameState.score``'s ``seki``): the
    strings of ``seki_stones``, without those that touch a region of their own colour of more than
    ``SEKI_EYE_POINTS`` points, and then without those left with no opponent string in seki beside them.

    ``seki_stones`` reads a whole territory as one eye, so two walls with their territories behind them and dame
    between them look like a seki to it; under the seki tax that would cost both sides all their territory. A
    string with that much room of its own lives by itself."""
    seki = seki_stones(state, dead)
    if not seki:
        return []
    board = state.without_stones(dead).board if dead else state.board
    geometry = board.geometry
    color = board.color
    neighbors = geometry.neighbors
    region_size: dict[int, int] = {}  # padded empty point -> points in its region, when one colour borders it
    for pad in geometry.padded:
        if color[pad] != EMPTY or pad in region_size:
            continue
        region, reaches = [pad], 0
        seen = {pad}
        for point in region:
            for n in neighbors[point]:
                if color[n] == EMPTY and n not in seen:
                    seen.add(n)
                    region.append(n)
                elif color[n] in (BLACK, WHITE):
                    reaches |= color[n]
        size = len(region) if reaches in (BLACK, WHITE) else 0
        region_size.update((point, size) for point in region)
    roots = {board.root[geometry.padded[p]] for p in seki}
    roots = {root for root in roots if all(region_size[lib] <= SEKI_EYE_POINTS for lib in board.liberties[root])}
    while True:  # each string keeps an opponent in seki beside it, sharing a liberty
        kept = {root for root in roots
                if any(color[n] == 3 - color[root] and board.root[n] in roots
                       for lib in board.liberties[root] for n in neighbors[lib])}
        if kept == roots:
            break
        roots = kept
    return sorted(geometry.flat[p] for root in roots for p in board.string_stones(root))


def _spare_seki(state: GameState, dead: set[int], near: list[list[int]]) -> set[int]:
    """``dead`` without the groups of near-even strings that live in seki once put back on the board.

    Random play breaks a seki at random (whoever fills a shared liberty first is captured), so a string in seki
    comes out near even and either verdict. Only near-even groups are put back: the seki test reads liberties, not
    eye shape, and finds a seki in some dead corners that the playouts rightly gave away (docs/RELIABILITY.md)."""
    judged_again = {p for stones in near for p in stones}
    for group in _linked_by_liberties(state, dead):
        if judged_again.issuperset(group):
            rest = dead - set(group)
            if set(seki_stones(state, sorted(rest))).issuperset(group):
                dead = rest
    return dead


def _linked_by_liberties(state: GameState, dead: set[int]) -> list[list[int]]:
    """The dead stones in groups: strings of one colour that share a liberty go together."""
    board = state.board
    geometry = board.geometry
    roots = sorted({board.root[geometry.padded[p]] for p in dead})

    def linked(a: int, b: int) -> bool:
        return board.color[roots[a]] == board.color[roots[b]] and not board.liberties[roots[a]].isdisjoint(
            board.liberties[roots[b]])

    return [sorted(geometry.flat[p] for i in indices for p in board.string_stones(roots[i]))
            for indices in _clusters(len(roots), linked)]


def _groups(state: GameState, strings: list[list[int]]) -> list[list[int]]:
    """The stones of each group of two or more ``strings`` of one colour linked by stones ``GROUP_DISTANCE``
    apart or closer: a dead group is often several strings, and its count changes only when all go together."""
    size = state.size
    color = [state.color_at(stones[0]) for stones in strings]

    def close(a: int, b: int) -> bool:
        return color[a] == color[b] and any(abs(p % size - q % size) + abs(p // size - q // size) <= GROUP_DISTANCE
                                            for p in strings[a] for q in strings[b])

    return [sorted(p for i in indices for p in strings[i]) for indices in _clusters(len(strings), close)
            if len(indices) > 1]


def _clusters(count: int, linked: Callable[[int, int], bool]) -> list[list[int]]:
    """The indices 0..count-1 in clusters: two indices ``linked`` go together, and so does what links to either."""
    group = list(range(count))  # union-find

    def root(i: int) -> int:
        while group[i] != i:
            group[i] = group[group[i]]
            i = group[i]
        return i

    for a in range(count):
        for b in range(a + 1, count):
            if root(a) != root(b) and linked(a, b):
                group[root(b)] = root(a)
    members: dict[int, list[int]] = {}
    for i in range(count):
        members.setdefault(root(i), []).append(i)
    return list(members.values())


def _fit_score(state: GameState, dead: set[int], candidates: list[list[int]], score: float) -> set[int]:
    """``dead`` with the verdicts on near-even strings or groups (``candidates``) changed, one at a time and the most
    helpful first, while the count names another winner than ``score``, at least ``SCORE_CHECK_POINTS`` from it, and
    a change brings it ``SCORE_CHANGE_POINTS`` nearer.

    Only another winner: the score head shrinks large margins (B+40 for a game GNU Go counts B+161), so a count far
    beyond it on the same side is no sign of a misjudged group."""
    def count(stones: set[int]) -> float:
        return state.without_stones(sorted(stones)).area_score()

    counted = count(dead)
    while abs(counted - score) >= SCORE_CHECK_POINTS and counted * score < 0:
        best: tuple[float, set[int]] | None = None  # (its count, the dead stones)
        for stones in candidates:
            trial = dead ^ set(stones)
            after = count(trial)
            if (abs(counted - score) - abs(after - score) > SCORE_CHANGE_POINTS
                    and (best is None or abs(after - score) < abs(best[0] - score))):
                best = (after, trial)
        if best is None:
            break
        counted, dead = best
    return dead


__all__ = ["GROUP_DISTANCE", "JUDGED_AGAIN_FROM_SIZE", "NEAR_EVEN", "SCORE_CHECK_POINTS", "SCORE_CHANGE_POINTS",
           "SEKI_EYE_POINTS", "judge_dead_stones", "seki_for_counting", "count_without"]
