"""Dead stones and scores of finished games: a GTP engine against a referee (GNU Go by default).

    python3 -m tabula.tools.check.dead_stones runs/strength/*/games/*.sgf --engine "tabula gtp" --max-games 200
    python3 -m tabula.tools.check.dead_stones ../shared/data/games/tygem-9d-2016.tar.xz --counted-only --max-games 200

Layer: tools (imports engine.rules for reading games, tools.compete.gtp_client for the engines). Each game's final
position is loaded into both engines with ``loadsgf`` (the file's whole main line), then both are asked
``final_status_list dead`` and ``final_score``. A game agrees when both name the same dead stones; the scores are
compared too (Chinese counting on both sides: the referee runs with ``--chinese-rules``), as they are and once GNU
Go's way with neutral points is allowed for (``dame_parity``). In handicap games GNU Go's count after ``loadsgf``
gives white nothing for the handicap stones, where Tabula's (as GNU Go's own in a game begun with
``fixed_handicap``) gives one point a stone: there the scores differ by the handicap, and the dead stones are the
comparison. Archives are read the way ``tabula prepare`` reads them (``--counted-only`` keeps the games decided by
counting, whose final positions are finished). The report gives the agreement rates, by board size, every game whose
dead stones differ with the stones each side called dead, so that a person can look at who is right, and the first
games that differ in score only.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field

from tabula.engine.data.records import RecordFilter, iter_sgf_files, parse_record
from tabula.engine.rules.board import EMPTY
from tabula.engine.rules.coords import BLACK, parse_vertex
from tabula.engine.rules.sgf import load_state
from tabula.tools.compete.gtp_client import EngineError, GtpEngine, GtpFailure

GNUGO = "/usr/games/gnugo --mode gtp --chinese-rules"


@dataclass
class Agreement:
    """Counts by board size, and the disagreements kept for the report."""

    games: Counter = field(default_factory=Counter)
    same_dead: Counter = field(default_factory=Counter)
    same_score: Counter = field(default_factory=Counter)
    same_score_but_dame: Counter = field(default_factory=Counter)  # equal once the referee's dame parity is allowed
    skipped: Counter = field(default_factory=Counter)  # reason -> games
    dead_disagreements: list[str] = field(default_factory=list)  # every game whose dead stones differ
    score_disagreements: list[str] = field(default_factory=list)  # same dead stones, another score

    def lines(self) -> list[str]:
        out = []
        for size in sorted(self.games):
            n = self.games[size]
            out.append(f"{size}x{size}: {n} games, dead stones agree in {self.same_dead[size]} "
                       f"({100 * self.same_dead[size] / n:.1f}%), scores in {self.same_score[size]} "
                       f"({100 * self.same_score[size] / n:.1f}%), scores once the dame's parity is allowed for in "
                       f"{self.same_score_but_dame[size]} ({100 * self.same_score_but_dame[size] / n:.1f}%)")
        out += [f"skipped ({reason}): {count}" for reason, count in sorted(self.skipped.items())]
        if self.dead_disagreements:
            out += ["", "dead stones disagree:"] + self.dead_disagreements
        if self.score_disagreements:
            out += ["", "same dead stones, scores disagree (the first 20):"] + self.score_disagreements[:20]
        return out


def dead_set(reply: str) -> set[str]:
    """The vertices of a ``final_status_list dead`` reply (one string a line), upper case."""
    return {word.upper() for word in reply.split()}


def score_margin(reply: str) -> float | None:
    """Black's margin in a ``final_score`` reply (``B+7.5`` is 7.5, ``W+0.5`` -0.5, ``0`` 0), None if unreadable."""
    text = reply.strip().upper()
    if text == "0":
        return 0.0
    try:
        return {"B": 1.0, "W": -1.0}[text[0]] * float(text[2:]) if text[1:2] == "+" else None
    except (KeyError, ValueError, IndexError):
        return None


def dame_parity(data: bytes, dead: set[str]) -> float:
    """What GNU Go's Chinese ``final_score`` adds to black's margin over the position as it stands, once its own
    ``dead`` stones are off: it counts as if the neutral points were filled in turn starting with the side to move, so
    an odd number of them gives that side one more point (on 100 held-out 19x19 records, 90 of its scores fit this
    exactly). Servers and Tromp-Taylor count the position as it stands, which is what Tabula answers."""
    state = load_state(data)
    counted = state.without_stones([parse_vertex(vertex, state.size) for vertex in dead])
    board = counted.board
    owners = board.area_owners()
    neutral = sum(1 for pad in board.geometry.padded if board.color[pad] == EMPTY and owners[pad] == EMPTY)
    return 0.0 if neutral % 2 == 0 else 1.0 if state.to_move == BLACK else -1.0


def finished_games(sources: list[str], counted_only: bool, max_games: int | None):
    """(name, SGF bytes, board size) of games to check: SGF files as they are; records from archives (any size
    ``parse_record`` accepts, finished by counting where ``counted_only``; handicap games too: their final
    positions are judged like any other)."""
    seen = 0
    for source in sources:
        for name, data in iter_sgf_files(source):
            if max_games is not None and seen >= max_games:
                return
            size = _size_of(data)
            if size is None:
                continue
            if counted_only:
                try:
                    record = parse_record(name, data, RecordFilter(size=size, min_moves=1, handicap="value"))
                except ValueError:
                    continue
                if record.margin != record.margin:  # NaN: not decided by counting
                    continue
            seen += 1
            yield name, data, size


def _size_of(data: bytes) -> int | None:
    from sgfmill import sgf
    try:
        return sgf.Sgf_game.from_bytes(data).get_size()
    except (ValueError, TypeError):
        return None


def check(sources: list[str], engine_command: str, referee_command: str, counted_only: bool,
          max_games: int | None, progress=print) -> Agreement:
    agreement = Agreement()
    with tempfile.TemporaryDirectory() as scratch, GtpEngine(engine_command, label="engine") as engine, \
            GtpEngine(referee_command, label="referee") as referee:
        path = os.path.join(scratch, "game.sgf")
        for number, (name, data, size) in enumerate(finished_games(sources, counted_only, max_games), 1):
            with open(path, "wb") as handle:
                handle.write(data)
            try:
                answers = []
                for side in (engine, referee):
                    side.send(f"boardsize {size}")
                    side.send(f"loadsgf {path}")
                    answers.append((dead_set(side.send("final_status_list dead", timeout_s=300)),
                                    side.send("final_score", timeout_s=300).strip().upper()))
            except GtpFailure as failure:  # e.g. a size the engine refuses: counted, not fatal
                agreement.skipped[failure.text or "refused"] += 1
                continue
            (ours, our_score), (theirs, their_score) = answers
            agreement.games[size] += 1
            agreement.same_dead[size] += ours == theirs
            agreement.same_score[size] += our_score == their_score
            ours_margin, their_margin = score_margin(our_score), score_margin(their_score)
            agreement.same_score_but_dame[size] += (  # ours against GNU Go's count less the point its parity gives
                ours_margin is not None and their_margin is not None
                and ours_margin == their_margin - dame_parity(data, theirs))
            if ours != theirs or our_score != their_score:
                (agreement.dead_disagreements if ours != theirs else agreement.score_disagreements).append(
                    f"{name}: engine {our_score}, dead {' '.join(sorted(ours - theirs)) or '-'} not the referee's; "
                    f"referee {their_score}, dead {' '.join(sorted(theirs - ours)) or '-'} not the engine's")
            if number % 20 == 0:
                progress(f"{number} games")
    return agreement


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tabula.tools.check.dead_stones", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sources", nargs="+", help="SGF files, folders or archives of finished games")
    parser.add_argument("--engine", default="tabula gtp", help="the engine judged (default: %(default)s)")
    parser.add_argument("--referee", default=GNUGO, help="the engine it is compared with (default: %(default)s)")
    parser.add_argument("--counted-only", action="store_true", help="only games decided by counting (RE[B+3.5])")
    parser.add_argument("--max-games", type=int, default=None)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        agreement = check(args.sources, args.engine, args.referee, args.counted_only, args.max_games,
                          progress=lambda line: print(line, file=sys.stderr))
    except EngineError as error:
        print(f"dead_stones: {error}", file=sys.stderr)
        return 2
    print("\n".join(agreement.lines()))
    return 0


__all__ = ["check", "Agreement", "dead_set", "score_margin", "dame_parity", "main"]


if __name__ == "__main__":
    sys.exit(main())
