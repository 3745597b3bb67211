"""`tabula prepare`: SGF archives and folders → compact train/validation shards, with a count of every drop reason.

Reads tar.xz/tar.gz (streamed, nothing extracted), zip, folders and single SGF files. Writes DIR/train-NNNN.tshard,
DIR/val-NNNN.tshard and DIR/dataset.json (the arguments, the filter report and the shard list).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from dataclasses import asdict

from tqdm import tqdm

from tabula.engine.data.records import RecordFilter, final_ownership, is_validation, iter_records
from tabula.engine.data.shards import SUFFIX, write_shard


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tabula prepare", description=__doc__)
    parser.add_argument("sources", nargs="+", metavar="ARCHIVE", help="tar.xz/tar.gz/zip archive, folder or SGF file")
    parser.add_argument("--out", required=True, help="output directory (created; keep it out of git, e.g. runs/)")
    parser.add_argument("--max-games", type=int, default=None, help="stop after keeping this many games")
    parser.add_argument("--val-fraction", type=float, default=0.02,
                        help="share of games held out, split by game hash (1: all, for a held-out year)")
    parser.add_argument("--games-per-shard", type=int, default=25000)
    parser.add_argument("--size", type=int, default=19, help="keep only games on this board size")
    parser.add_argument("--min-moves", type=int, default=30, help="drop games shorter than this")
    parser.add_argument("--handicap", choices=("drop", "policy", "value"), default="drop",
                        help="handicap games: drop them, keep their moves with no value target, or keep their "
                             "results as value targets too (for a network that sees the komi)")
    parser.add_argument("--keep-unknown-results", action="store_true",
                        help="keep games without a result, for the policy target only")
    parser.add_argument("--ownership-playouts", type=int, default=8,
                        help="random playouts that judge dead stones at the end of counted games, for the ownership "
                             "target (0: no ownership targets)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if not 0.0 <= args.val_fraction <= 1.0:
        print("tabula prepare: --val-fraction must be in [0, 1]", file=sys.stderr)
        return 2
    if args.ownership_playouts < 0:
        print("tabula prepare: --ownership-playouts must be >= 0", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    for name in os.listdir(args.out):
        if name.endswith(SUFFIX):
            print(f"tabula prepare: {args.out} already holds shards; use an empty directory", file=sys.stderr)
            return 2
    rules = RecordFilter(size=args.size, min_moves=args.min_moves, handicap=args.handicap,
                         require_result=not args.keep_unknown_results)
    reader, records = iter_records(args.sources, rules, args.max_games)
    pending: dict[str, list] = {"train": [], "val": []}
    written: list[dict] = []
    counters = {"train": 0, "val": 0}
    labels = {"counted": 0, "ownership": 0}
    started = time.time()

    def flush(split: str) -> None:
        batch = pending[split]
        if not batch:
            return
        path = os.path.join(args.out, f"{split}-{counters[split]:04d}{SUFFIX}")
        size_bytes = write_shard(path, batch, args.size)
        written.append({"file": os.path.basename(path), "games": len(batch),
                        "moves": sum(len(r.moves) for r in batch), "bytes": size_bytes})
        counters[split] += 1
        pending[split] = []

    progress = tqdm(total=args.max_games, unit="game", disable=args.quiet, file=sys.stderr, smoothing=0.05)
    for record in records:
        if not math.isnan(record.margin):
            labels["counted"] += 1
            if args.ownership_playouts > 0:
                # seeded by the game, so the labels do not depend on the order games are read in
                rng = random.Random(int.from_bytes(record.key()[:8], "little"))
                record.ownership = final_ownership(record, rng, args.ownership_playouts)
                labels["ownership"] += record.ownership is not None
        split = "val" if is_validation(record.key(), args.val_fraction) else "train"
        pending[split].append(record)
        if len(pending[split]) >= args.games_per_shard:
            flush(split)
        progress.update(1)
        progress.set_postfix(read=reader.report.read, refresh=False)
    progress.close()
    flush("train")
    flush("val")

    report = reader.report
    manifest = {"arguments": vars(args), "filter": asdict(rules), "report": report.to_dict(), "labels": labels,
                "shards": written,
                "seconds": round(time.time() - started, 1)}
    with open(os.path.join(args.out, "dataset.json"), "w") as handle:
        json.dump(manifest, handle, indent=2)
    print(report.format())
    print(f"counted games {labels['counted']}, with a trusted final ownership {labels['ownership']}")
    for split in ("train", "val"):
        games = sum(s["games"] for s in written if s["file"].startswith(split))
        moves = sum(s["moves"] for s in written if s["file"].startswith(split))
        print(f"{split:<5} {games:>8} games {moves:>10} positions")
    total = sum(s["bytes"] for s in written)
    print(f"wrote {len(written)} shards, {total / 2**20:.2f} MiB, to {args.out} in {manifest['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
