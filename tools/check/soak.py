"""Soak test: a long `tabula match`, then the figures that say whether the engines held up.

    python3 -m tabula.tools.check.soak --engine 0 -- --out runs/soak --games 1000 --size 9 --parallel 2 \
        --referee "/usr/games/gnugo --mode gtp --chinese-rules" \
        "python3 -m tabula.gtp --visits 32 --threads 1" "/usr/games/gnugo --mode gtp --level 1"

Everything after ``--`` is passed to `tabula match` unchanged (rerunning resumes, as the match does). Then the
results are read back and checked: no illegal move, crash, hang or malformed reply (any game ended by a fault), no
engine process left alive after the match, and the watched engine's resident memory per 100 games (the largest
and the peak over each block, per engine process; the match records them after every game). ``--summary`` only
reads an existing run. Exits 1 when a check fails.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Sequence

from tabula.tools.compete import match, results, settings

BLOCK_GAMES = 100


def alive(pid: int, argv0: str | None = None) -> bool:
    """Whether ``pid`` is a live process (and, given ``argv0``, one whose command line mentions it: a pid reused
    by an unrelated process does not count)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace")
        with open(f"/proc/{pid}/stat") as handle:
            if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False  # a zombie has exited; only its parent's wait is missing
    except OSError:
        return False
    return argv0 is None or argv0 in cmdline


def engine_side(record: dict, engine: int) -> str | None:
    return "black" if record["black"] == engine else "white" if record["white"] == engine else None


def memory_blocks(records: Sequence[dict], engine: int, block: int = BLOCK_GAMES) -> list[dict]:
    """Per ``block`` games in the order played: the watched engine's largest RSS and peak RSS (MiB) at the end of
    a game, and how many engine processes served them (a restart after a fault starts a fresh process)."""
    ordered = sorted(records, key=lambda r: r.get("finished", ""))
    blocks = []
    for start in range(0, len(ordered), block):
        rss, peak, pids = [], [], set()
        for record in ordered[start:start + block]:
            side = engine_side(record, engine)
            memory = (record.get("memory_mb") or {}).get(side) if side else None
            if memory:
                rss.append(memory["rss"])
                peak.append(memory["peak"])
                pids.add(record["pid"][side])
        blocks.append({"games": f"{start + 1}-{start + len(ordered[start:start + block])}",
                       "rss_max": max(rss, default=None), "peak_max": max(peak, default=None),
                       "processes": len(pids)})
    return blocks


def clock_lines(out: Path, records: Sequence[dict], engine: int, system: str) -> list[str]:
    """Under a time control: the watched engine's time per game, longest move, and the least it had left on its
    clock (main time or the current period, from the SGF's BL/WL) and of its byoyomi periods (OB/OW)."""
    from sgfmill import sgf

    spent, longest, least_left, least_periods = [], 0.0, None, None
    for record in records:
        side = engine_side(record, engine)
        if side is None:
            continue
        spent.append(record["time_s"][side])
        longest = max(longest, record["max_move_s"][side])
        try:
            game = sgf.Sgf_game.from_bytes((out / record["sgf"]).read_bytes())
        except (OSError, ValueError):
            continue
        left_key, periods_key = ("BL", "OB") if side == "black" else ("WL", "OW")
        for node in game.get_main_sequence():
            if node.has_property(left_key):
                left = float(node.get(left_key))
                least_left = left if least_left is None else min(least_left, left)
            if node.has_property(periods_key):
                periods = int(node.get(periods_key))
                least_periods = periods if least_periods is None else min(least_periods, periods)
    if not spent:
        return []
    lines = [f"clock ({system}) of engine {engine}: {sum(spent) / len(spent):.1f} s a game on average "
             f"(least {min(spent):.1f}, most {max(spent):.1f}), longest move {longest:.2f} s, least left on the "
             f"clock {least_left if least_left is not None else '-'} s"
             + (f", fewest periods/stones left {least_periods}" if least_periods is not None else "")]
    losses = sum(1 for record in records
                 if (record.get("fault") or {}).get("kind") == settings.TIME_LOSS
                 and record["fault"]["engine"] == engine)
    lines.append(f"losses on time of engine {engine}: {losses}")
    return lines


def report(out: Path, engine: int, wall_s: float | None = None) -> tuple[str, bool]:
    config = match.load_config(out / settings.CONFIG_FILE)
    records = results.read_results(out / settings.RESULTS_FILE)
    reasons = Counter(record["reason"] for record in records)
    faults = [record for record in records if record.get("fault")]
    games = {record["game"] for record in records}
    expected = len(match.schedule(config))
    leaked = sorted({(side, pid) for record in records for side, pid in (record.get("pid") or {}).items()
                     if pid and alive(pid)})
    moves = [record["moves"] for record in records]
    lines = [f"soak {out}: {len(records)} games recorded of {expected} scheduled ({len(games)} distinct)"
             + (f" in {wall_s:.0f} s" if wall_s is not None else ""),
             "endings: " + ", ".join(f"{reason} {count}" for reason, count in reasons.most_common()),
             f"moves a game: mean {sum(moves) / max(1, len(moves)):.1f}, max {max(moves, default=0)}",
             f"games ended by a fault (illegal move, crash, hang, bad reply, time): {len(faults)}"]
    for record in faults[:10]:
        lines.append(f"  {record['game']}: {record['reason']} {record['fault']}")
    lines.append(f"engine processes alive after the match: {len(leaked)}"
                 + (f" {leaked[:10]}" if leaked else ""))
    if config.time.system != settings.NO_TIME:
        lines += clock_lines(out, records, engine, config.time.system)
    name = settings.config_name(config, engine)
    lines.append(f"resident memory of engine {engine} ({name}) per {BLOCK_GAMES} games, MiB (largest at a game's "
                 f"end / peak / processes):")
    blocks = memory_blocks(records, engine)
    for block in blocks:
        lines.append(f"  games {block['games']:>9}: {block['rss_max']} / {block['peak_max']} / "
                     f"{block['processes']}")
    passed = not faults and not leaked and len(games) == len(records) == expected
    lines.append("PASS" if passed else "FAIL")
    return "\n".join(lines), passed


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    match_argv = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(prog="python3 -m tabula.tools.check.soak", description=__doc__.split("\n\n")[0],
                                     usage="%(prog)s [--engine N] [--summary --out DIR] -- MATCH ARGUMENTS")
    parser.add_argument("--engine", type=int, default=0, help="the engine whose memory is watched (default 0)")
    parser.add_argument("--out", default="", help="with --summary: the match directory")
    parser.add_argument("--summary", action="store_true", help="only report on an existing run")
    args = parser.parse_args(own)
    if args.summary:
        if not args.out:
            parser.error("--summary needs --out")
        out = Path(args.out)
        wall_s = None
        if not (out / settings.CONFIG_FILE).is_file():
            print(f"soak: {out} holds no match ({settings.CONFIG_FILE} is missing)", file=sys.stderr)
            return 2
    else:
        if not match_argv:
            parser.error("give the match's arguments after --")
        started = time.monotonic()
        status = match.main(match_argv)
        wall_s = time.monotonic() - started
        if status != 0:
            print(f"soak: the match exited with status {status}", file=sys.stderr)
            return status
        out = Path(match.build_parser().parse_args(match_argv).out)
        time.sleep(2.0)  # engines told to quit get a moment to exit before we look for survivors
    text, passed = report(out, args.engine, wall_s)
    print(text)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
