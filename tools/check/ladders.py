"""Ladders in finished games: how often a player ran out of atari into a ladder that was already dead, and how many
of its stones were captured in ladders, by the game's outcome.

    python3 -m tabula.tools.check.ladders DIR [DIR ...] [--player tabula] [--min-plies 5]

Why: giving GNU Go 7 stones (issue 36), Tabula's lost games looked like they were lost to ladders. This counts it:
a game "runs a dead ladder" where the player extends one of its strings out of atari to exactly 2 liberties and
``ladder_read`` then says the opponent, to move, captures the string by ataris in ``--min-plies`` plies or more (the
capturing move included: 3 plies is one more atari, so the default 5 asks for a ladder of two ataris and more).
A captured string of the player's counts as captured in a ladder when one of its stones was in such an extended
string, however long before.

Layer: tools (reads games with ``engine.rules.sgf``, plays them on ``engine.rules.board``). Each DIR is a `tabula
match --out` directory: config.json (its ``names``), results.jsonl and the SGFs its results name. Prints a Markdown
table over all the DIRs by outcome from the player's side: lost, won, and games won or lost by a forfeit (a result
with a ``fault``: the other engine crashed or played an illegal move) on rows of their own. The reader is a
ladder reader, not a life-and-death reader (``ladder_read`` says what it leaves out).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from tabula.engine.rules.board import Board, IllegalMoveError
from tabula.engine.rules.coords import BLACK, PASS, WHITE
from tabula.engine.rules.game import SIMPLE_KO, Rules
from tabula.engine.rules.sgf import SgfError, read_sgf, start_position
from tabula.tools.compete.results import pair_score, read_match

OUTCOMES = ("lost", "won", "won by forfeit", "lost by forfeit", "no result")  # the table's rows, in this order


# -- the ladder reader ----------------------------------------------------------------------------------------------


class _Reader:
    """One reading of one string: the defender's colour, the positions read (by role) and what is left to spend."""

    def __init__(self, point: int, defender: int, max_depth: int, budget: int):
        self.point = point
        self.defender = defender
        self.attacker = 3 - defender
        self.max_depth = max_depth
        self.budget = budget
        self.known: dict[tuple[int, int, bool], tuple[bool | None, int]] = {}

    def _spend(self, depth: int) -> bool:
        self.budget -= 1
        return self.budget >= 0 and depth <= self.max_depth

    def attack(self, board: Board, depth: int) -> tuple[bool | None, int]:
        """The attacker to move: an atari on either liberty of a string of 2."""
        liberties = board.string_liberties(self.point)
        if len(liberties) == 1:
            return True, 1
        if len(liberties) >= 3:
            return False, 0
        key = (board.hash, board.ko, True)
        if key in self.known:
            return self.known[key]
        if not self._spend(depth):
            return None, 0
        shortest, unknown = None, False
        for liberty in sorted(liberties):
            after = board.copy()
            try:
                after.play(liberty, self.attacker)
            except IllegalMoveError:
                continue
            verdict, plies = self.defend(after, depth + 1)
            if verdict:
                shortest = plies + 1 if shortest is None else min(shortest, plies + 1)
            elif verdict is None:
                unknown = True
        found = (True, shortest) if shortest is not None else ((None, 0) if unknown else (False, 0))
        if found[0] is not None:
            self.known[key] = found
        return found

    def defend(self, board: Board, depth: int) -> tuple[bool | None, int]:
        """The defender to move, in atari: extend, or capture a string of the attacker's in atari next to it."""
        liberties = board.string_liberties(self.point)
        if len(liberties) >= 2:
            return False, 0
        key = (board.hash, board.ko, False)
        if key in self.known:
            return self.known[key]
        if not self._spend(depth):
            return None, 0
        moves = list(liberties)
        neighbors, color, root = board.geometry.neighbors, board.color, board.root
        for stone in board.string_stones(self.point):
            for neighbor in neighbors[stone]:
                if color[neighbor] == self.attacker and len(board.liberties[root[neighbor]]) == 1:
                    moves += [move for move in board.liberties[root[neighbor]] if move not in moves]
        longest, unknown = 2, False  # no move saves it: it plays elsewhere, the attacker captures
        for move in moves:
            after = board.copy()
            try:
                after.play(move, self.defender)
            except IllegalMoveError:
                continue
            verdict, plies = self.attack(after, depth + 1)
            if verdict is False:
                self.known[key] = (False, 0)
                return False, 0
            if verdict is None:
                unknown = True
            else:
                longest = max(longest, plies + 1)
        found = (None, 0) if unknown else (True, longest)
        if not unknown:
            self.known[key] = found
        return found


def ladder_read(board: Board, point: int, to_move: int, max_depth: int = 100,
                budget: int = 20000) -> tuple[bool | None, int]:
    """Is the string at ``point`` (a padded point of ``board``) captured in a ladder, ``to_move`` playing first?

    Reads ataris only. The attacker, when the string has 2 liberties, ataris on either; the defender, in atari,
    extends at its liberty or captures a string of the attacker's in atari that touches it. 3 liberties or more:
    escaped. Left out: ko (a move that simple ko forbids is not played, and nobody has ko threats), nets and every
    other attack that is not an atari, and the defender's counter-ataris and double ataris that capture nothing. So
    True means "a ladder captures it" and False "no ladder does", not that the string lives.

    Returns (verdict, plies): True captured, False escapes, None unknown (the reading went deeper than ``max_depth``
    plies or read more than ``budget`` positions); ``plies`` the moves until the capture, the capturing move
    included, when the attacker captures by the shortest way and the defender holds out longest (0 unless True).
    The defender to move with 2 liberties or more is no ladder: (False, 0). ValueError where ``point`` is empty.
    """
    defender = board.color[point]
    if defender not in (BLACK, WHITE):
        raise ValueError("no stone at the point to read")
    reader = _Reader(point, defender, max_depth, budget)
    return reader.defend(board, 0) if to_move == defender else reader.attack(board, 0)


# -- the games ------------------------------------------------------------------------------------------------------


@dataclass
class GameLadders:
    """One game from the player's side."""

    runs: int = 0  # moves that extended a string of the player's out of atari into a dead ladder
    captured: int = 0  # the player's stones captured
    in_ladders: int = 0  # of those, stones of strings that had such an extension


def read_game(data: bytes, player: int, min_plies: int) -> GameLadders:
    """Replay an SGF game (setup stones included) and count ``player``'s (BLACK or WHITE) dead-ladder runs and
    captured stones; SgfError where the file cannot be read or replayed."""
    record = read_sgf(data)
    state = start_position(record, Rules(superko=SIMPLE_KO))  # the match judged superko; the board keeps simple ko
    padded, neighbors = state.board.geometry.padded, state.board.geometry.neighbors
    found = GameLadders()
    laddered: set[int] = set()  # padded points of the player's stones in strings that ran a dead ladder
    for number, (color, move) in enumerate(record.moves, start=1):
        board = state.board
        point = padded[move] if move != PASS else None
        taken: list[list[int]] = []  # the strings this move captures
        extends = False  # the move is the last liberty of a string of its own colour
        if point is not None:
            for root in {board.root[n] for n in neighbors[point] if board.color[n] in (BLACK, WHITE)}:
                if board.liberties[root] == {point}:
                    if board.color[root] == color:
                        extends = True
                    else:
                        taken.append(board.string_stones(root))
        try:
            state.play(move, color)
        except IllegalMoveError as error:
            raise SgfError(f"illegal move {number}: {error.reason}") from error
        if color != player:
            for stones in taken:
                found.captured += len(stones)
                if laddered.intersection(stones):
                    found.in_ladders += len(stones)
                laddered.difference_update(stones)
        elif extends and len(board.string_liberties(point)) == 2:
            verdict, plies = ladder_read(board, point, 3 - player)
            if verdict and plies >= min_plies:
                found.runs += 1
                laddered.update(board.string_stones(point))
    return found


def outcome(result: dict, index: int) -> str:
    """One of ``OUTCOMES``: the result from the side of the engine numbered ``index``."""
    score = pair_score(index, result)
    if score is None or score == 0.5:
        return "no result"
    return ("won" if score == 1.0 else "lost") + (" by forfeit" if result.get("fault") else "")


def games_of(directory: str, player: str) -> list[tuple[str, int, Path]]:
    """(outcome, the player's colour, SGF path) of each game of a match directory whose result names its SGF;
    ValueError saying what is wrong with the directory."""
    index, results = read_match(directory, player)
    if not results:
        raise ValueError(f"{directory}: no results (results.jsonl missing or empty)")
    games = []
    for result in sorted(results, key=lambda r: str(r["game"])):
        if not result.get("sgf") or index not in (result.get("black"), result.get("white")):
            continue
        color = BLACK if result.get("black") == index else WHITE
        games.append((outcome(result, index), color, Path(directory) / result["sgf"]))
    return games


def table(rows: dict[str, list[GameLadders]]) -> str:
    lines = ["| outcome | games | ran ≥1 dead ladder | ran ≥2 | stones captured | captured in ladders |",
             "|---|---|---|---|---|---|"]
    for name in OUTCOMES:
        games = rows.get(name)
        if not games:
            continue
        one, two = sum(g.runs >= 1 for g in games), sum(g.runs >= 2 for g in games)
        captured, in_ladders = sum(g.captured for g in games), sum(g.in_ladders for g in games)
        share = f"{in_ladders / captured:.1%}" if captured else "-"
        lines.append(f"| {name} | {len(games)} | {one} ({one / len(games):.0%}) | {two} ({two / len(games):.0%}) "
                     f"| {captured} | {in_ladders} ({share}) |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tabula.tools.check.ladders",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", metavar="DIR", help="`tabula match --out` directories")
    parser.add_argument("--player", default="tabula", help="whose ladders (the match's --names; default tabula)")
    parser.add_argument("--min-plies", type=int, default=5,
                        help="a ladder is dead when the capture takes this many plies or more (default 5)")
    args = parser.parse_args(argv)
    if args.min_plies < 1:
        parser.error("--min-plies: 1 or more")
    try:
        games = [game for directory in args.dirs for game in games_of(directory, args.player)]
    except ValueError as error:
        parser.error(str(error))
    rows: dict[str, list[GameLadders]] = {}
    skipped = 0
    for name, color, path in games:
        try:
            found = read_game(path.read_bytes(), color, args.min_plies)
        except (OSError, SgfError) as error:
            print(f"{path}: skipped ({error})", file=sys.stderr)
            skipped += 1
            continue
        rows.setdefault(name, []).append(found)
    if not rows:
        print("no game could be read", file=sys.stderr)
        return 1
    print(f"{len(games) - skipped} games from {len(args.dirs)} match director{'y' if len(args.dirs) == 1 else 'ies'}"
          + (f" ({skipped} skipped)" if skipped else "") + f", {args.player}'s side; a dead ladder: captured in "
          f"{args.min_plies} plies or more after the extension")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
