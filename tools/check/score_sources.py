"""How well a network's two scores predict finished games' margins: its score head, and the area count of its
ownership head (Σ ownership plus the side to move's komi, what ``--ownership-score`` takes a share of). Why a tool:
the score head learned its margins from records whose big losers resign, so it may compress big margins, which a
score-aware search (issue 36: giving handicap) then cannot see. The value head is measured beside them (its mean
squared error against the result, and how often it was sure, beyond ``--sure``, of the side that lost): giving 7
stones, Tabula's search stood at 0.9 and over in games both counts called lost by 50 points and more.

    python3 -m tabula.tools.check.score_sources NET 'docs/matches/SET/games/*.sgf' [--every 30] [--big 30]

Layer: tools. Every ``--every``-th position of each game whose result is a count (``RE[B+3.5]``; resigned games and
draws are skipped), the network's answer under the identity symmetry, against the final margin from the same side's
view. Prints the mean absolute error of each score, overall and split at ``--big`` points of final margin, and the
mean signed error (positive: the score says the side to move does better than it did). A position's error also
holds the mistakes played after it, so both scores err; what tells them apart is how they follow big margins.
"""
from __future__ import annotations

import argparse
import glob
import re
import sys

import numpy as np

RESULT = re.compile(r"([BW])\+(\d+(?:\.\d+)?)$")


def positions_of(path: str, every: int) -> tuple[list, float] | None:
    """(states, black's final margin) of the game in ``path``: its positions after every ``every``-th move (the
    first and the last left out), or None where the result is not a count or the file is not a game."""
    from tabula.engine.rules.sgf import SgfError, read_sgf, replay

    try:
        with open(path, "rb") as handle:
            record = read_sgf(handle.read())
        found = RESULT.match(record.result)
        if not found:
            return None
        states = replay(record, snapshot_every=every)[1:-1]
    except (OSError, SgfError) as error:
        print(f"{path}: skipped ({error})", file=sys.stderr)
        return None
    return states, float(found.group(2)) * (1.0 if found.group(1) == "B" else -1.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tabula.tools.check.score_sources",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("net", help="ONNX network with score and ownership heads")
    parser.add_argument("games", nargs="+", help="SGF files or globs of finished games")
    parser.add_argument("--every", type=int, default=30, help="every this many moves a position (default 30)")
    parser.add_argument("--big", type=float, default=30.0, help="points: the split between small and big margins")
    parser.add_argument("--sure", type=float, default=0.9,
                        help="a winrate: the value counts as sure of the side to move's win beyond it (or of its "
                             "loss below 1 minus it); default 0.9")
    args = parser.parse_args(argv)
    if args.every < 1:
        parser.error("--every: 1 or more")
    if not 0.5 < args.sure < 1.0:
        parser.error("--sure: a winrate above 0.5 and below 1")
    from tabula.engine.net.evaluator import OnnxEvaluator
    from tabula.engine.play.tree import ownership_margins
    from tabula.engine.rules.coords import BLACK

    net = OnnxEvaluator(args.net, symmetry="identity", log=None)
    if not net.has_score_and_ownership:
        print(f"{args.net}: no score and ownership heads", file=sys.stderr)
        return 2
    paths = sorted({path for pattern in args.games for path in (glob.glob(pattern) or [pattern])})
    rows, games = [], 0
    for path in paths:
        found = positions_of(path, args.every)
        if not found or not found[0]:
            continue
        states, margin = found
        games += 1
        answer = net.evaluate(states)
        areas = ownership_margins(states, answer.ownership)
        for state, head, area, value in zip(states, answer.score.tolist(), areas, answer.value.tolist()):
            truth = margin if state.to_move == BLACK else -margin
            rows.append((truth, head, area, value))
    if not rows:
        print("no counted games with positions", file=sys.stderr)
        return 2
    truth, head, area, value = (np.array(column) for column in zip(*rows))
    print(f"games: {games}, positions: {len(rows)} (every {args.every} moves)")
    print("| final margin | positions | score head: mean abs error | mean signed | ownership count: mean abs error "
          "| mean signed |")
    print("|---|---|---|---|---|---|")
    for label, chosen in (("all", np.ones(len(truth), bool)), (f"≤ {args.big:g} points", np.abs(truth) <= args.big),
                          (f"> {args.big:g} points", np.abs(truth) > args.big)):
        if chosen.any():
            h, a, t = head[chosen], area[chosen], truth[chosen]
            print(f"| {label} | {chosen.sum()} | {np.abs(h - t).mean():.1f} | {(h - t).mean():+.1f} | "
                  f"{np.abs(a - t).mean():.1f} | {(a - t).mean():+.1f} |")
    if np.ptp(truth) > 0:  # one margin seen from one side has no slope
        slope_head, slope_area = (float(np.polyfit(truth, x, 1)[0]) for x in (head, area))
        print(f"slope against the final margin (least squares): score head {slope_head:.2f}, ownership count "
              f"{slope_area:.2f}")
    won = np.sign(truth)  # the side to move's result: 1 won, -1 lost (a margin of 0 is a draw: 0)
    winrate = (1.0 + value) / 2.0
    sure_wrong = ((winrate > args.sure) & (won < 0)) | ((winrate < 1.0 - args.sure) & (won > 0))
    print(f"value: mean squared error against the result {np.mean((value - won) ** 2):.3f}; sure (beyond "
          f"{args.sure:g}) of the side that lost in {sure_wrong.sum()} of {len(won)} positions "
          f"({100 * sure_wrong.mean():.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
