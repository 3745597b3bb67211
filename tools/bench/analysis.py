"""`tabula bench analysis WEIGHTS GAMES`: a whole game reviewed in one analysis-engine query against the same
positions searched one at a time as the GTP engine searches them.

    tabula bench analysis NET.onnx ARCHIVE.tar.gz|GAME.sgf [--turns 250] [--visits 100] [--analysis-threads 0]
                          [--provider cpu] [--net-threads 0] [--gtp-process] [--only analysis|gtp|gtp-process]
                          [--results FILE.jsonl]

The game is the first 19x19 record of the archive (or the SGF file) with at least ``--turns`` moves and no setup
stones. The analysis side sends one query with ``analyzeTurns`` 0 .. turns-1 and ``maxVisits`` ``--visits`` to an
in-process ``AnalysisEngine`` (``--analysis-threads`` positions searched at once, their leaves batched together),
timed from the query line to its last answer. The GTP side searches the same positions one after another with one
``Search`` in ``tabula gtp``'s shape (its default threads and batch for where the network runs), each to the same
visits: early stop off on both sides and no tree kept from one position to the next, so that both make exactly the
same visits; both keep their table of network results from position to position. Both use the same network
session. ``--gtp-process`` adds a real ``tabula gtp`` process stepping through the game as a GUI would
(``tabula-winrate``, a search of ``--visits``, then ``play``), with the engine's own settings: its tree is kept
from move to move, so its searches make fewer new visits than the others. Reports the seconds (wall and CPU) of
each, the visits/s and mean network batch of the in-process sides, and the ratio of their wall times.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import replace
from pathlib import Path

from tabula.engine.config import BACKENDS, EngineConfig, NetConfig
from tabula.engine.net.evaluator import OnnxEvaluator, available_cores
from tabula.engine.play.search import Search
from tabula.engine.rules.coords import BLACK, format_vertex
from tabula.engine.rules.sgf import SgfError, SgfRecord, read_sgf
from tabula.gtp.analysis_engine import AnalysisConfig, AnalysisEngine, parse_query
from tabula.tools.bench.net import append_results


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tabula bench analysis", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("weights", help="Tabula .onnx network")
    parser.add_argument("games", help="an SGF file, or a .tar.gz/.tar.xz archive of them")
    parser.add_argument("--turns", type=int, default=250, help="positions reviewed: turns 0 .. N-1 of the game")
    parser.add_argument("--visits", type=int, default=100, help="visits per position")
    parser.add_argument("--analysis-threads", type=int, default=0,
                        help="positions the analysis engine searches at once (0: tabula analysis's default)")
    parser.add_argument("--provider", default="cpu", choices=BACKENDS, help="what runs the network")
    parser.add_argument("--net-threads", type=int, default=0, help="onnxruntime threads (0: its default)")
    parser.add_argument("--only", choices=("analysis", "gtp", "gtp-process"), help="measure one side only")
    parser.add_argument("--gtp-process", action="store_true",
                        help="also time a `tabula gtp` process stepping through the game: tabula-winrate (a search "
                             "of --visits visits) then play, position by position, its tree kept as a GUI's would")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--results", help="append the figures to this file as one JSON line")
    return parser


def first_game(path: str, turns: int) -> tuple[str, SgfRecord]:
    """(its name, the record) of the first 19x19 game in ``path`` with at least ``turns`` moves and no setup."""
    def fits(record: SgfRecord) -> bool:
        return record.size == 19 and not record.setup and len(record.moves) >= turns

    if not tarfile.is_tarfile(path):
        record = read_sgf(Path(path).read_bytes())
        if not fits(record):
            raise SystemExit(f"{path}: not a 19x19 game of {turns} moves without setup stones")
        return path, record
    with tarfile.open(path) as archive:
        for member in archive:
            if not member.isfile() or not member.name.endswith(".sgf"):
                continue
            try:
                record = read_sgf(archive.extractfile(member).read())
            except SgfError:
                continue
            if fits(record):
                return member.name, record
    raise SystemExit(f"{path}: no 19x19 game of {turns} moves without setup stones")


def review_query(record: SgfRecord, turns: int, visits: int) -> dict:
    moves = [["B" if color == BLACK else "W", format_vertex(move, record.size)]
             for color, move in record.moves[:turns]]
    return {"id": "review", "moves": moves, "rules": "japanese" if record.komi == 6.5 else "chinese",
            "komi": record.komi, "boardXSize": record.size, "boardYSize": record.size,
            "analyzeTurns": list(range(turns)), "maxVisits": visits}


def time_analysis(evaluator, search, query: dict, threads: int, seed: int) -> dict:
    lines: list[str] = []
    done = threading.Event()
    turns = len(query["analyzeTurns"])

    def write(line: str) -> None:
        lines.append(line)
        if len(lines) >= turns or '"error"' in line:  # a refused query has one line only: no waiting for more
            done.set()

    engine = AnalysisEngine(evaluator, search, AnalysisConfig(analysis_threads=threads), write, seed=seed)
    started, cpu = time.perf_counter(), time.process_time()
    engine.handle_line(json.dumps(query))
    done.wait()
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    engine.finish()
    answers = [json.loads(line) for line in lines]
    errors = [a for a in answers if "error" in a]
    if errors:
        raise SystemExit(f"the analysis engine refused the game: {errors[0]}")
    visits = sum(a["rootInfo"]["visits"] for a in answers)
    return {"seconds": elapsed, "cpu_seconds": cpu, "positions": len(answers), "visits": visits,
            "visits_per_s": visits / elapsed,
            "mean_batch": engine.batcher.mean_batch, "analysis_threads": engine.threads}


def time_gtp(evaluator, search, query: dict, visits: int, seed: int) -> dict:
    import numpy as np

    # the positions the analysis engine searches, as it reads them from the query
    states = parse_query(query, AnalysisConfig(), search, None).states
    searcher = Search(evaluator, search, np.random.default_rng(seed))
    total = batches = evaluated = 0
    started, cpu = time.perf_counter(), time.process_time()
    for turn in sorted(states):
        result = searcher.run(states[turn], visits=visits, early_stop=False)
        total += result.root_visits
        batches += result.batches
        evaluated += result.evaluated
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {"seconds": elapsed, "cpu_seconds": cpu, "positions": len(states), "visits": total,
            "visits_per_s": total / elapsed,
            "mean_batch": evaluated / batches if batches else 0.0, "search_threads": searcher.config.threads,
            "batch_size": searcher.config.batch_size}


def _cpu_seconds(pid: int) -> float:
    """The user and system CPU time of process ``pid`` so far (Linux /proc), 0 where it cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def time_gtp_process(weights: str, query: dict, visits: int, provider: str, seed: int) -> dict:
    """A real ``tabula gtp`` stepping through the game as a GUI would: ``tabula-winrate`` (one search of ``visits``
    visits, the engine's own settings otherwise, its tree kept from move to move) then ``play``, for each turn."""
    process = subprocess.Popen([sys.executable, "-m", "tabula.tools.cli", "gtp", "--weights", weights, "--visits",
                                str(visits), "--provider", provider, "--seed", str(seed), "--log-level", "ERROR"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

    def send(command: str) -> str:
        process.stdin.write(command + "\n")
        process.stdin.flush()
        reply = []
        while True:
            line = process.stdout.readline()
            if not line:
                raise SystemExit(f"tabula gtp ended at {command!r}")
            if not line.strip():
                break
            reply.append(line.rstrip("\n"))
        if not reply or not reply[0].startswith("="):
            raise SystemExit(f"tabula gtp refused {command!r}: {reply}")
        return "\n".join(reply)

    try:
        for command in (f"boardsize {query['boardXSize']}", "clear_board", f"kata-set-rules {query['rules']}",
                        f"komi {query['komi']}", "tabula-winrate", "clear_board"):  # one search to warm up
            send(command)
        started, cpu = time.perf_counter(), _cpu_seconds(process.pid)
        for color, vertex in query["moves"]:
            send("tabula-winrate")
            send(f"play {color} {vertex}")
        elapsed, cpu = time.perf_counter() - started, _cpu_seconds(process.pid) - cpu
        send("quit")
    finally:
        process.stdin.close()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:  # an engine that does not end at the end of its input
            process.kill()
            process.wait()
    turns = len(query["moves"])
    return {"seconds": elapsed, "cpu_seconds": cpu, "positions": turns, "visits_per_s": turns * visits / elapsed}


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    name, record = first_game(args.games, args.turns)
    engine = EngineConfig()
    net = NetConfig(provider=args.provider, threads=args.net_threads)
    evaluator = OnnxEvaluator(args.weights, provider=net.provider, threads=net.threads, log=None)
    # Both sides: tabula gtp's search at the given visits, all of them made, every position from scratch.
    base = replace(engine.search, visits=args.visits, early_stop=False, reuse_tree=False)
    query = review_query(record, args.turns, args.visits)
    # onnxruntime's first calls allocate: made before either side is timed
    warm = parse_query(review_query(record, 1, 1), AnalysisConfig(), base, None).states[0]
    for batch in (1, 8, 32):
        evaluator.evaluate([warm] * batch)
    print(f"game {name}: {args.turns} positions x {args.visits} visits, {available_cores()} cores, "
          f"{evaluator.provider}", flush=True)
    figures: dict = {"bench": "analysis", "weights": args.weights, "game": name, "turns": args.turns,
                     "visits": args.visits, "provider": evaluator.provider, "cores": available_cores()}
    if args.only in (None, "analysis"):
        analysis = time_analysis(evaluator, replace(base, threads=base.threads or 1), query, args.analysis_threads,
                                 args.seed)
        figures["analysis"] = analysis
        print(f"analysis engine, one query: {analysis['seconds']:.1f} s ({analysis['cpu_seconds']:.1f} s of CPU), "
              f"{analysis['visits_per_s']:.0f} visits/s, "
              f"mean batch {analysis['mean_batch']:.1f} ({analysis['analysis_threads']} positions at once)", flush=True)
    if args.only is None and args.gtp_process or args.only == "gtp-process":
        process = time_gtp_process(args.weights, query, args.visits, args.provider, args.seed)
        figures["gtp_process"] = process
        print(f"a tabula gtp process, tabula-winrate then play at each position: {process['seconds']:.1f} s "
              f"({process['cpu_seconds']:.1f} s of CPU)", flush=True)
    if args.only in (None, "gtp"):
        gtp = time_gtp(evaluator, base, query, args.visits, args.seed)
        figures["gtp"] = gtp
        print(f"one position at a time (tabula gtp's search, {gtp['search_threads']} threads, batches of "
              f"{gtp['batch_size']}): {gtp['seconds']:.1f} s ({gtp['cpu_seconds']:.1f} s of CPU), "
              f"{gtp['visits_per_s']:.0f} visits/s, mean batch "
              f"{gtp['mean_batch']:.1f}", flush=True)
    if "analysis" in figures and "gtp" in figures:
        figures["speedup"] = figures["gtp"]["seconds"] / figures["analysis"]["seconds"]
        print(f"the analysis engine took {1 / figures['speedup']:.2f} of the time ({figures['speedup']:.2f}x)")
    append_results(args.results, [figures])
    return 0


__all__ = ["main", "first_game", "review_query"]
