"""Issue 36's komi measurements of one network, as one command: its calibration per colour at each komi on its own
small-board self-play and on 19×19 held-out records, and how its predicted score lead moves with the komi.

    python3 -m tabula.tools.check.komi_calibration NET --out runs/cal/NAME [--sizes 9,13] [--komis 0.5,5.5,6.5,7.5]
        [--games 200] [--workers 2] [--records 100] [--seed 9101]

Layer: tools (runs `tabula selfplay` and `tabula eval` as child processes, each as a user would, and reads their
``name: value`` lines). For each size and komi: ``--games`` self-play games of NET at that komi (64 visits, no
resignation, the self-play defaults otherwise; games already in OUT/S-K count, so a cut-off run goes on), then NET's
value on every position of them, per colour: the mover's mean predicted winrate against the share of those positions
the mover went on to win. 19×19: Tygem 2016's first ``--records`` games (all at 6.5) and the first ``--records`` of
Tom's validation split (`tabula prepare`'s 2%) at 7.5 and at 6.5 (``tabula eval --record-komi``). The slope: the
first size's games at the last komi read at every komi (``tabula eval --komi``), the score head's mean lead for white
against the komi, by least squares; and the same over each komi's own games (where play adapts to the komi). Prints
a markdown table (and writes OUT/summary.json).

Games are the unit of chance: with n games the share won is good to about ±1/sqrt(n) (two standard errors at an even
share; the positions of one game share its result), which the table prints beside each cell.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys

GAMES_DIR = os.environ.get("TABULA_GAMES", os.path.join("..", "shared", "data", "games"))
RECORD_SETS = (  # (label, archive, extra tabula eval arguments)
    ("Tygem 2016, 6.5", "tygem-9d-2016.tar.xz", ["--record-komi", "6.5"]),
    ("Tom validation, 7.5", "tom-9d.tar.xz", ["--split", "val", "--val-fraction", "0.02", "--record-komi", "7.5"]),
    ("Tom validation, 6.5", "tom-9d.tar.xz", ["--split", "val", "--val-fraction", "0.02", "--record-komi", "6.5"]),
)
WITHIN = 0.03  # the bar: predicted within 3 points of the share won


def tabula(module: str, args: list[str]) -> dict[str, str]:
    """Run ``python -m tabula.tools.learn.MODULE ARGS``; its stdout's ``name: value`` lines."""
    done = subprocess.run([sys.executable, "-m", f"tabula.tools.learn.{module}", *args], stdout=subprocess.PIPE,
                          text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"komi_calibration: {module} {' '.join(args)} failed (exit {done.returncode})")
    return dict(line.split(": ", 1) for line in done.stdout.splitlines() if ": " in line)


def sgf_count(directory: str) -> int:
    path = os.path.join(directory, "sgf")
    return len([n for n in os.listdir(path) if n.endswith(".sgf")]) if os.path.isdir(path) else 0


def calibration(lines: dict[str, str]) -> dict[str, float]:
    return {key: float(lines[key]) for key in ("black_to_move_predicted", "black_to_move_won",
                                               "white_to_move_predicted", "white_to_move_won", "white_score_lead")
            if key in lines}


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of y over x."""
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / spread


def cell(row: dict[str, float], colour: str, games: int) -> str:
    predicted, won = row[f"{colour}_to_move_predicted"], row[f"{colour}_to_move_won"]
    mark = "yes" if abs(predicted - won) <= WITHIN else "no"
    noise = f" (±{100 / math.sqrt(games):.0f})" if games else ""
    return f"{predicted:.3f} vs {won:.3f}{noise}, {mark}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tabula.tools.check.komi_calibration",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("net", help="ONNX network (one that sees the komi, or any other for comparison)")
    parser.add_argument("--out", required=True, help="directory for the games and summary.json")
    parser.add_argument("--sizes", default="9,13", help="self-play board sizes (default: %(default)s)")
    parser.add_argument("--komis", default="0.5,5.5,6.5,7.5", help="komis (default: %(default)s)")
    parser.add_argument("--games", type=int, default=200, help="self-play games a size and komi (default 200)")
    parser.add_argument("--visits", type=int, default=64, help="self-play visits (default 64)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=9101)
    parser.add_argument("--records", type=int, default=100, help="19x19 records a set (0: none; default 100)")
    args = parser.parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
        komis = [float(k) for k in args.komis.split(",") if k.strip()]
    except ValueError:
        parser.error("--sizes and --komis are comma-separated numbers")
    if not sizes or not komis or args.games < 1 or args.records < 0 or args.workers < 1:
        parser.error("give at least one size and komi, --games and --workers 1 or more, --records 0 or more")
    if not os.path.isfile(args.net):
        parser.error(f"{args.net}: no such file")
    os.makedirs(args.out, exist_ok=True)
    summary: dict = {"net": args.net, "games": args.games, "visits": args.visits, "selfplay": {}, "records": {}}
    for size in sizes:
        for komi in komis:
            directory = os.path.join(args.out, f"{size}-{komi:g}")
            missing = args.games - sgf_count(directory)
            if missing > 0:
                tabula("selfplay", ["--net", args.net, "--out", directory, "--size", str(size), "--komi", f"{komi:g}",
                                    "--games", str(missing), "--visits", str(args.visits), "--resign-threshold",
                                    "0", "--seed", str(args.seed + size * 1000 + int(komi * 2)),
                                    "--workers", str(args.workers)])
            row = calibration(tabula("evaluate", [args.net, os.path.join(directory, "sgf"), "--size", str(size)]))
            summary["selfplay"][f"{size}-{komi:g}"] = {**row, "games": sgf_count(directory)}
            print(f"{size}x{size} komi {komi:g}: {row}", file=sys.stderr, flush=True)
    for label, archive, extra in RECORD_SETS if args.records else ():
        path = os.path.join(GAMES_DIR, archive)
        if not os.path.exists(path):
            print(f"komi_calibration: {path} not found; {label} left out", file=sys.stderr)
            continue
        lines = tabula("evaluate", [args.net, path, "--max-games", str(args.records), *extra])
        summary["records"][label] = {**calibration(lines), "games": int(lines.get("games", 0)),
                                     "value_mse": float(lines.get("value_mse", "nan"))}
        print(f"{label}: {summary['records'][label]}", file=sys.stderr, flush=True)
    leads = []
    source = os.path.join(args.out, f"{sizes[0]}-{komis[-1]:g}", "sgf")
    for komi in komis:
        lines = tabula("evaluate", [args.net, source, "--size", str(sizes[0]), "--komi", f"{komi:g}"])
        if "white_score_lead" in lines:
            leads.append((komi, float(lines["white_score_lead"])))
    if len(leads) > 1:
        summary["score_lead"] = {"games": source, "leads": leads, "slope": slope(leads)}
    # the same over each komi's own games (each read at its komi): the lead as play at that komi makes it
    own = [(komi, summary["selfplay"][f"{sizes[0]}-{komi:g}"].get("white_score_lead")) for komi in komis]
    own = [(k, v) for k, v in own if v is not None]
    if len(own) > 1:
        summary["score_lead_own_games"] = {"leads": own, "slope": slope(own)}
    with open(os.path.join(args.out, "summary.json"), "w") as handle:
        json.dump(summary, handle, indent=1)
    print("| board | komi | black to move: predicted vs won | white to move: predicted vs won |")
    print("|---|---|---|---|")
    for key, row in summary["selfplay"].items():
        size, komi = key.split("-", 1)
        print(f"| {size}×{size} self-play ({row['games']} games) | {komi} | {cell(row, 'black', row['games'])} | "
              f"{cell(row, 'white', row['games'])} |")
    for label, row in summary["records"].items():
        print(f"| 19×19 {label} ({row['games']} games, value MSE {row['value_mse']:.3f}) | | "
              f"{cell(row, 'black', row['games'])} | {cell(row, 'white', row['games'])} |")
    if "score_lead" in summary:
        text = ", ".join(f"{k:g}: {v:+.2f}" for k, v in leads)
        print(f"\nwhite's mean predicted lead by komi ({source}): {text}; slope {summary['score_lead']['slope']:.2f}")
    if "score_lead_own_games" in summary:
        text = ", ".join(f"{k:g}: {v:+.2f}" for k, v in summary["score_lead_own_games"]["leads"])
        print(f"white's mean predicted lead on each komi's own games: {text}; "
              f"slope {summary['score_lead_own_games']['slope']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
