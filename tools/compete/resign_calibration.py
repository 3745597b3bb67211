"""`tabula resign`: calibrate the resignation threshold from matches played on past it (AlphaGo Zero's way).

    tabula match --out runs/cal-9 --size 9 ... --engines "tabula gtp --resign-winrate 0" ...    (resignation off)
    tabula resign runs/cal-9 runs/cal-13 runs/cal-19 runs/cal-19-h7

Each Tabula engine of each match logs its search per move (`tabula.search: move N: ...` and the candidates' winrates,
kept by `tabula match` in OUT/logs, or their extract in OUT/searched; tools/compete/search_log.py gives them to their
games). For every game a Tabula engine played to the end, its *trigger* is the lowest threshold at which it would NOT
have resigned under MoveDecider's rule: the winrate of the move played under the threshold for ``--consecutive`` of
its moves in a row, never in the first ``--after`` share of the board's points in moves, and as white in a handicap
game a threshold lowered early (engine.play.decision.resign_threshold_factor). A game is resigned at threshold T
iff its trigger < T.

For each board size, even and handicap games apart, it prints: the games won and lost, the share of the won games
that resigning at T would have thrown away (the false positives, AGZ keeps them under 5%) for T = 0.02 … 0.30, the
calibrated threshold (the highest T with fewer than ``--max-false-positive`` of the winners resigning; 0 with fewer
than ``--min-games`` winners), and at that threshold the share of the games lost by more than ``--big-loss`` points
(by the match's count) that would have been resigned; and after the table the ``tabula export --resign-winrate``
argument that writes those thresholds into the network.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from tabula.engine.config import ResignThresholds
from tabula.engine.data.replay import calibrate_resign_threshold, false_positive_rate
from tabula.engine.play.decision import resign_threshold_factor
from tabula.engine.rules.coords import BLACK, WHITE
from tabula.tools.compete.results import jsonl_exists, read_results
from tabula.tools.compete.search_log import SEARCHED_DIR, SearchedMove, has_searched_moves, searched_moves

THRESHOLDS = (0.02, 0.05, 0.10, 0.15, 0.20, 0.25, 0.30)
MARGIN = re.compile(r"^[BW]\+(\d+(?:\.\d+)?)$")


@dataclass(frozen=True)
class PlayedGame:
    """One game a Tabula engine played to the end with resignation off, from its side."""

    match: str
    game: str
    size: int
    handicap: int
    color: int  # BLACK or WHITE: the Tabula engine's colour
    engine: int  # the engine's index in the match
    won: bool
    margin: float | None  # points by which it won (> 0) or lost (< 0); None when the game ended otherwise
    trigger: float  # the lowest threshold at which it would not have resigned


def trigger(moves: list[SearchedMove], size: int, handicap: int, color: int, consecutive: int,
            after: float) -> float:
    """The lowest winrate threshold at which this player would NOT have resigned: over every run of ``consecutive``
    of its moves (past the first ``after`` share of the board's points in moves), the run's highest winrate divided
    by the threshold factor of its move, the lowest of those. 1.0 when no run can be judged."""
    area = size * size
    judged = []
    for searched in moves:
        played_before = searched.number - 1  # len(state.moves) when the decision was made
        if searched.winrate is None or played_before < int(after * area):
            continue
        judged.append(searched.winrate / resign_threshold_factor(played_before, area, handicap, color))
    k = max(1, consecutive)
    if len(judged) < k:
        return 1.0
    return min(max(judged[i:i + k]) for i in range(len(judged) - k + 1))


def margin_of(record: dict, color: int) -> float | None:
    """The engine's margin in points (> 0 won) when the result names one, else None (resignation, time, fault)."""
    found = MARGIN.match(str(record.get("result", "")))
    if not found:
        return None
    points = float(found[1])
    winner = BLACK if record["result"].startswith("B") else WHITE
    return points if winner == color else -points


def played_games(out: Path, consecutive: int, after: float,
                 engine_names: Sequence[str] = ()) -> list[PlayedGame]:
    """Every game of the match in ``out`` that a Tabula engine (one with search lines in its log) played to a
    result, from that engine's side; with ``engine_names``, only the engines of those names (``tabula match
    --names``): a match of two Tabula networks calibrates one of them. ValueError where the match has no engine of
    any of those names."""
    records = {record["game"]: record for record in read_results(out / "results.jsonl")}
    config = _read_config(out)
    assigned, _ = searched_moves(out)  # its logs, or what search_log --write kept of them (OUT/searched)
    if engine_names:
        names = list(config.get("names") or [])
        if not set(engine_names) & set(names):
            raise ValueError(f"{out}: no engine named {' or '.join(map(repr, engine_names))} (its engines: "
                             f"{', '.join(names) or 'unnamed'})")
        assigned = {engine: runs for engine, runs in assigned.items()
                    if engine < len(names) and names[engine] in engine_names}
    games = []
    for engine, runs in assigned.items():
        for name, moves in runs.items():
            record = records.get(name)
            if record is None or record.get("winner") not in ("B", "W") or record.get("fault"):
                continue
            color = BLACK if record["black"] == engine else WHITE
            size = int(record.get("size") or config.get("size", 19))
            handicap = int(record.get("handicap") or 0)
            won = record["winner"] == ("B" if color == BLACK else "W")
            games.append(PlayedGame(out.name, name, size, handicap, color, engine, won, margin_of(record, color),
                                    trigger(moves, size, handicap, color, consecutive, after)))
    return games


def _read_config(out: Path) -> dict:
    try:
        return json.loads((out / "config.json").read_text())
    except (OSError, ValueError):
        return {}


def report(games: list[PlayedGame], max_false_positive: float, min_games: int, big_loss: float,
           ceiling: float) -> tuple[str, dict[tuple[int, bool], float]]:
    """The table described in the module docstring, and the calibrated threshold per (size, handicap game)."""
    header = (f"{'size':>4} {'games':>9} {'won':>5} {'lost':>5}  " + " ".join(f"FP@{t:.2f}" for t in THRESHOLDS)
              + "  threshold  FP at it  big losses resigned")
    lines = [header]
    chosen = {}
    for key in sorted({(g.size, g.handicap > 0) for g in games}):
        group = [g for g in games if (g.size, g.handicap > 0) == key]
        winners = [g.trigger for g in group if g.won]
        losers = [g for g in group if not g.won]
        threshold = calibrate_resign_threshold(winners, max_false_positive, min_games, ceiling)
        chosen[key] = threshold
        big = [g for g in losers if g.margin is not None and g.margin < -big_loss]
        resigned = sum(g.trigger < threshold for g in big)
        rates = " ".join(f"{100 * false_positive_rate(winners, t):6.1f}%" for t in THRESHOLDS)
        kind = "handicap" if key[1] else "even"
        lines.append(f"{key[0]:>4} {kind:>9} {len(winners):>5} {len(losers):>5}  {rates}  {threshold:9.3f}  "
                     f"{100 * false_positive_rate(winners, threshold):7.1f}%  {resigned}/{len(big)}")
    return "\n".join(lines), chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tabula resign", description=__doc__.split("\n")[0])
    parser.add_argument("matches", nargs="+", type=Path, help="tabula match --out directories (resignation off)")
    parser.add_argument("--consecutive", type=int, default=3, help="own moves in a row under the threshold (as "
                        "--resign-consecutive of tabula gtp; default 3)")
    parser.add_argument("--after", type=float, default=0.25, help="no resignation in the first this share of the "
                        "board's points in moves (default 0.25, as tabula gtp)")
    parser.add_argument("--max-false-positive", type=float, default=0.05,
                        help="share of won games a threshold may throw away (default 0.05)")
    parser.add_argument("--min-games", type=int, default=20, help="won games needed to calibrate (default 20)")
    parser.add_argument("--big-loss", type=float, default=20.0, help="points: a loss by more is a big loss")
    parser.add_argument("--ceiling", type=float, default=0.2, help="the calibrated threshold never exceeds this "
                        "(default 0.2, as tabula rl: a game against another opponent turns more often than self-play)")
    parser.add_argument("--engine", metavar="NAME", action="append", default=[],
                        help="only the engine of this name in each match (tabula match --names; repeat it for "
                             "matches that name the network differently): the network calibrated, where both "
                             "engines are Tabula's (default: every Tabula engine)")
    parser.add_argument("--games", action="store_true", help="also list every game's trigger")
    args = parser.parse_args(argv)
    if args.consecutive < 1 or not 0 <= args.after < 1 or not 0 < args.max_false_positive < 1 \
            or not 0 < args.ceiling < 1:
        parser.error("--consecutive must be >= 1, --after in [0, 1), --max-false-positive and --ceiling in (0, 1)")
    games = []
    for out in args.matches:
        if not jsonl_exists(out / "results.jsonl") or not has_searched_moves(out):
            print(f"tabula resign: {out}: not a tabula match directory (no results.jsonl or .xz, or neither logs/ nor "
                  f"{SEARCHED_DIR}/)", file=sys.stderr)
            return 2
        try:
            found = played_games(out, args.consecutive, args.after, args.engine)
        except ValueError as error:
            print(f"tabula resign: {error}", file=sys.stderr)
            return 2
        if not args.engine and len({g.engine for g in found}) > 1:
            print(f"tabula resign: {out}: more than one Tabula engine; their games are pooled (--engine NAME "
                  f"calibrates one network)", file=sys.stderr)
        games += found
    if not games:
        print("tabula resign: no game with a Tabula engine's search lines", file=sys.stderr)
        return 2
    table, chosen = report(games, args.max_false_positive, args.min_games, args.big_loss, args.ceiling)
    print(table)
    calibrated = ResignThresholds(even=tuple((size, t) for (size, handicap), t in chosen.items() if not handicap),
                                  handicap=tuple((size, t) for (size, handicap), t in chosen.items() if handicap))
    print(f"to ship: tabula export --resign-winrate {calibrated} NET.onnx")
    if args.games:
        for g in games:
            print(f"{g.match} {g.game} {g.size} h{g.handicap} {'B' if g.color == BLACK else 'W'} "
                  f"{'won' if g.won else 'lost'} {g.margin if g.margin is not None else '-'} {g.trigger:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
