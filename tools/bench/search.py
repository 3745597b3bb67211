"""`tabula bench search WEIGHTS`: search speed against the raw network, measured in one run.

    tabula bench search NET.onnx [--moves 4] [--playouts 800] [--threads N] [--batch-size N] [--net-threads 0]
                                 [--provider auto|cpu|cuda|tensorrt|torch] [--instant-network]
                                 [--leelaz LZ_WEIGHTS.txt] [--profile] [--size N] [--opening N]
                                 [--rollout-mix λ [λ ...]] [--rollout-weights FILE.npz] [--results FILE.jsonl]

Plays ``--moves`` moves of self-play from the empty board (tree reuse on, as in a game) and reports playouts/s,
network positions/s, the mean batch, and efficiency = search rate ÷ the raw throughput of the same evaluator
(``OnnxEvaluator.evaluate``: features, symmetry, masking and onnxruntime) on batches of the same size, measured
in the same run. ``--leelaz`` plays the same moves with Leela Zero 0.17 on the same network (CPU, same threads)
and reports its n/s and the ratio. ``--profile`` profiles one single-threaded search of the Python tree work.
``--instant-network`` measures the bound the Python side puts on playouts/s (no network cost) and, with one search
thread, where a playout's time goes. ``--rollout-mix`` measures AlphaGo's mixed evaluation instead: the same
self-play searched with each λ in turn, round after round, and each λ's playouts/s with its ratio to the first.
``--results`` appends the figures to FILE as one JSON line, as soon as they are measured.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import re
import subprocess
import threading
import time
from dataclasses import replace

import numpy as np

from tabula.engine.config import BACKENDS, PRECISIONS, ConfigError, NetConfig, SearchConfig
from tabula.engine.net.evaluator import (
    Evaluation,
    OnnxEvaluator,
    PendingEvaluation,
    available_cores,
    evaluate_async,
)
from tabula.engine.play.search import Rollout, Search
from tabula.engine.play.search_player import DEFAULT_ROLLOUT_WEIGHTS, WEIGHTS_DIR
from tabula.engine.rules.game import GameState
from tabula.gtp.flags import Flag, add_flags, from_flags
from tabula.tools.bench.net import append_results

LEELAZ = "/usr/games/leelaz"
# The search measured: tabula gtp's defaults, 800 playouts a move, every one run (no visit limit, no early stop),
# and every batch full (the bench measures the batch it is given).
BENCH_SEARCH = SearchConfig(visits=0, playouts=800, early_stop=False, adaptive_batch=False)
BENCH_NET = NetConfig(provider="cpu")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tabula bench search", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("weights", help="Tabula .onnx (fp32 or int8)")
    parser.add_argument("--moves", type=int, default=4, help="self-play moves from the empty board")
    # The search's options have tabula gtp's names and defaults (gtp/flags.py add_flags); the bench's own playouts.
    add_flags(parser, BENCH_SEARCH, {
        "playouts": "new playouts per move",
        "threads": "search threads (default 0: as tabula gtp, 1 on a GPU and 2 on the CPU)",
        "batch_size": "leaves per network call (default 0: as tabula gtp, 64 on a GPU and 8 on the CPU)",
        "batches_in_flight": "batches each search thread keeps at the network at once (default 0: as tabula gtp, "
                             "2 on a GPU and 1 on the CPU)",
        "static_score_utility": "the static score utility's weight (default as tabula gtp)",
        "dynamic_score_utility": "the dynamic score utility's weight (default as tabula gtp)",
        "cpuct_utility_stdev_scale": "the variance-scaled exploration's scale (default as tabula gtp)",
        "atari_prior": "the least prior of a capture or escape of a string in atari (default as tabula gtp)",
    })
    add_flags(parser, BENCH_NET, {"threads": "onnxruntime threads per network call (default 0: as tabula gtp "
                                             "chooses)"}, prefix="net_")
    add_flags(parser, BENCH_NET, {
        "provider": Flag("what runs the network (default cpu; auto picks a GPU where there is one)",
                         name="--provider", choices=BACKENDS),
        "precision": Flag("precision on a GPU", name="--precision", choices=PRECISIONS),
    }, prefix="net_")
    parser.add_argument("--instant-network", action="store_true",
                        help="replay the real network's outputs from a first pass, with an instant network call but "
                             "features, symmetries and legal masks paid: the playouts/s no GPU can raise")
    parser.add_argument("--latency-ms", type=float, default=0.0,
                        help="with --instant-network: each network call waits this long without the GIL, as a GPU "
                             "call does, to see how far search threads overlap tree work with the network")
    parser.add_argument("--seconds", type=float, default=3.0, help="time per raw-throughput measurement")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=2, help="alternations of search and raw measurements")
    parser.add_argument("--leelaz", help="Leela Zero weights of the same network: compare with leelaz")
    parser.add_argument("--profile", action="store_true", help="profile a single-threaded search")
    parser.add_argument("--size", type=int, default=0,
                        help="board size (default: 19 where the network plays it, else its largest)")
    parser.add_argument("--opening", type=int, default=0,
                        help="self-play starts after this many moves of the network's most likely move (untimed)")
    # dest: not SearchConfig.rollout_mix's name, which from_flags would read as one value
    parser.add_argument("--rollout-mix", type=float, nargs="+", default=None, metavar="λ", dest="rollout_mixes",
                        help="compare the search's playouts/s at these values of λ (SearchConfig.rollout_mix), "
                             "measured in turn in every round, e.g. 0 0.5")
    parser.add_argument("--rollout-weights", default=str(WEIGHTS_DIR / DEFAULT_ROLLOUT_WEIGHTS),
                        help="the rollout policy of --rollout-mix (default: %(default)s)")
    parser.add_argument("--results", help="append the figures to this file as a JSON line")
    return parser


def settings(args: argparse.Namespace, evaluator) -> dict:
    """What a ``--results`` line says of the run measured: network, backend and search settings."""
    return {"weights": args.weights, "network": evaluator.describe(), "provider": evaluator.provider,
            "on_gpu": evaluator.on_gpu, "size": args.size, "threads": args.threads, "batch": args.batch_size,
            "in_flight": args.batches_in_flight, "moves": args.moves, "playouts": args.playouts,
            "rounds": args.rounds, "start_s": round(args.start_s, 2)}


class ReplayedNetwork(OnnxEvaluator):
    """The evaluator with a network that costs nothing, for the Python side's bound on playouts/s.

    A first pass (``recording``) runs the real network and keeps each position's output; later passes answer from
    those outputs, so the tree grows as the real network grows it, while every Python cost of ``evaluate``
    (features, symmetries, legal masks, softmax) is still paid, on a network call that returns at once. Positions
    no recording pass saw (threads reorder a search) get uniform priors and value 0, and are counted in
    ``misses``."""

    def __init__(self, *args, **kwargs):
        self.recording = True
        self.latency_s = 0.0  # a replayed call's wait: a GPU's latency, modelled (the GIL is free meanwhile)
        self.misses = 0
        self._outputs: dict[tuple[int, int, bool], tuple[np.ndarray, float]] = {}
        super().__init__(*args, **kwargs)

    def _run(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.recording:
            return super()._run(planes)
        if self.latency_s:
            time.sleep(self.latency_s)
        size = planes.shape[-1]
        return (np.zeros((len(planes), size * size + 1), dtype=np.float32),
                np.zeros(len(planes), dtype=np.float32))

    def evaluate(self, states):
        return self._replayed(states, super().evaluate(states))

    def evaluate_async(self, states):
        pending = super().evaluate_async(states)
        return PendingEvaluation(lambda: self._replayed(states, pending.result()))

    def evaluate_averaged(self, states):
        """The search's root under all 8 symmetries, recorded and replayed apart from the one-symmetry outputs."""
        return self._replayed(states, super().evaluate_averaged(states), averaged=True)

    def _replayed(self, states, result: Evaluation, averaged: bool = False) -> Evaluation:
        keys = [(s.hash, s.size, averaged) for s in states]
        if self.recording:
            # One output per position: a position met again (a transposition in the same batch, or a later
            # recording pass) gets what it got first, as the replay will give it, or the trees would drift apart.
            rows = [self._outputs.setdefault(key, (result.policy[i], float(result.value[i])))
                    for i, key in enumerate(keys)]
            return Evaluation(np.stack([row[0] for row in rows]),
                              np.array([row[1] for row in rows], dtype=np.float32))
        # ``result`` is the instant network's: the Python side paid in full. A position never recorded keeps it
        # (uniform over legal moves, value 0).
        rows = [self._outputs.get(key) for key in keys]
        self.misses += sum(row is None for row in rows)
        return Evaluation(np.stack([result.policy[i] if row is None else row[0] for i, row in enumerate(rows)]),
                          np.array([0.0 if row is None else row[1] for row in rows], dtype=np.float32))


def raw_throughput(evaluator: OnnxEvaluator, states: list[GameState], batch: int, seconds: float,
                   callers: int = 1) -> float:
    """Positions/s of ``evaluator.evaluate`` on batches of ``batch`` positions from ``callers`` threads at once
    (as many as the search has workers, so the raw figure gets the same overlap), after a warm-up call."""
    batches = [[states[(i * batch + j) % len(states)] for j in range(batch)] for i in range(8)]
    evaluator.evaluate(batches[0])
    counts = [0] * callers
    start = time.perf_counter()
    deadline = start + seconds

    def call(k: int) -> None:
        while time.perf_counter() < deadline or counts[k] < 2:
            evaluator.evaluate(batches[(counts[k] + k) % len(batches)])
            counts[k] += 1

    workers = [threading.Thread(target=call, args=(k,)) for k in range(callers)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return sum(counts) * batch / (time.perf_counter() - start)


class _TimedEvaluator:
    """``evaluator`` with the time of its ``evaluate`` calls added to ``seconds["evaluate"]``."""

    def __init__(self, evaluator, seconds: dict[str, float]):
        self._evaluator = evaluator
        self._seconds = seconds

    def evaluate(self, states):
        start = time.perf_counter()
        try:
            return self._evaluator.evaluate(states)
        finally:
            self._seconds["evaluate"] += time.perf_counter() - start

    def evaluate_async(self, states):
        start = time.perf_counter()
        try:
            pending = evaluate_async(self._evaluator, states)
        finally:
            self._seconds["evaluate"] += time.perf_counter() - start

        def result():
            waited = time.perf_counter()
            try:
                return pending.result()
            finally:
                self._seconds["evaluate"] += time.perf_counter() - waited
        return PendingEvaluation(result)

    def __getattr__(self, name):
        return getattr(self._evaluator, name)


class TimedSearch(Search):
    """The search with a clock on its two halves: the descents (selection, virtual loss, replaying moves, cache
    look-ups) and the batches (the evaluator, then expansion and backup), and on the evaluator inside them."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seconds = dict(descend=0.0, batch=0.0, evaluate=0.0)
        self.evaluator = _TimedEvaluator(self.evaluator, self.seconds)

    def _timed(self, name: str, call):
        start = time.perf_counter()
        try:
            return call()
        finally:
            self.seconds[name] += time.perf_counter() - start

    def _descend(self, run):
        return self._timed("descend", lambda: super(TimedSearch, self)._descend(run))

    def _evaluate_batch(self, *args):
        return self._timed("batch", lambda: super(TimedSearch, self)._evaluate_batch(*args))

    def _start_batch(self, *args):
        return self._timed("batch", lambda: super(TimedSearch, self)._start_batch(*args))

    def _finish_batch(self, *args):
        return self._timed("batch", lambda: super(TimedSearch, self)._finish_batch(*args))


def board_size(evaluator, size: int = 0) -> int:
    """The board the benchmark plays on: ``size`` if given, else 19×19 where the network plays it, else the largest
    size it plays."""
    if size:
        return size
    return 19 if 19 in evaluator.board_sizes else max(evaluator.board_sizes)


def opening(evaluator, size: int, moves: int) -> GameState:
    """The position after ``moves`` moves of the network's most likely legal move from the empty board."""
    state = GameState(size)
    for _ in range(moves):
        policy = np.asarray(evaluator.evaluate([state]).policy[0])
        state.play(int(np.argmax(policy[:-1] * state.legal_mask()[:-1])))
    return state


def self_play(evaluator, config: SearchConfig, moves: int, playouts: int, seed: int,
              search_class: type[Search] = Search, start: GameState | None = None,
              rollout: Rollout | None = None) -> dict:
    """Search ``moves`` successive positions of one game from ``start`` (default the empty board); returns totals
    (and the search, as ``search``)."""
    search = search_class(evaluator, config, rng=np.random.default_rng(seed), rollout=rollout)
    state = start.copy() if start is not None else GameState(board_size(evaluator))
    totals: dict = dict(playouts=0, evaluated=0, batches=0, elapsed_s=0.0, hits=0, positions=[])
    for _ in range(moves):
        hits_before = search.tree.cache.hits
        result = search.run(state, visits=0, playouts=playouts, early_stop=False)
        totals["playouts"] += result.playouts
        totals["evaluated"] += result.evaluated
        totals["batches"] += result.batches
        totals["elapsed_s"] += result.elapsed_s
        totals["hits"] += search.tree.cache.hits - hits_before
        totals["positions"].append(state.copy())
        state.play(result.move)
    totals["search"] = search
    return totals


def leelaz_rate(weights: str, threads: int, moves: int, playouts: int) -> tuple[float, list[float]]:
    """Leela Zero's playouts/s over ``moves`` genmoves (its own n/s lines), total and per move."""
    commands = "".join(f"genmove {'b' if i % 2 == 0 else 'w'}\n" for i in range(moves)) + "quit\n"
    completed = subprocess.run([LEELAZ, "--cpu-only", "-t", str(threads), "--noponder", "-g", "-w", weights,
                                "-p", str(playouts), "--timemanage", "off", "-s", "1", "-r", "0"],
                               input=commands, capture_output=True, text=True, timeout=1800)
    rates = [float(m) for m in re.findall(r"(\d+) n/s", completed.stderr)]
    counts = [int(m) for m in re.findall(r"(\d+) playouts,", completed.stderr)]
    if not rates:
        raise RuntimeError(f"no n/s in leelaz output:\n{completed.stderr[-2000:]}")
    seconds = sum(c / r for c, r in zip(counts, rates) if r > 0)
    return (sum(counts) / seconds if seconds else 0.0), rates


def profile(evaluator, config: SearchConfig, playouts: int, state: GameState) -> str:
    search = Search(evaluator, SearchConfig(**{**config.__dict__, "threads": 1}), rng=np.random.default_rng(0))
    search.run(state, visits=0, playouts=64, early_stop=False)  # warm up
    profiler = cProfile.Profile()
    profiler.enable()
    search.run(state, visits=0, playouts=playouts, early_stop=False)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(18)
    return out.getvalue()


def instant_network_bound(evaluator: ReplayedNetwork, config: SearchConfig, args: argparse.Namespace,
                          start: GameState) -> int:
    """Record self-play with the real network, then replay it ``--rounds`` times with an instant one. With several
    threads each pass differs a little, so the recording takes three passes."""
    for _ in range(1 if config.threads == 1 else 3):
        self_play(evaluator, config, args.moves, args.playouts, args.seed, start=start)
    evaluator.recording = False
    evaluator.latency_s = args.latency_ms / 1000.0
    rates = []
    for _ in range(args.rounds):
        played = self_play(evaluator, config, args.moves, args.playouts, args.seed, start=start)
        rates.append(played["playouts"] / played["elapsed_s"])
    latency = f", {args.latency_ms:g} ms a call" if args.latency_ms else ""
    print(f"search with an instant network (outputs recorded from the real one{latency}): {args.rounds} rounds x "
          f"{args.moves} moves x {args.playouts} playouts, {args.threads} threads, batch {args.batch_size}, "
          f"{args.batches_in_flight} in flight")
    print(f"  playouts/s, best round  {max(rates):8.1f}   (rounds: {', '.join(f'{r:.0f}' for r in rates)})")
    total = args.rounds * args.moves * args.playouts
    print(f"  positions the recording had not seen: {evaluator.misses} in {total} playouts (answered uniformly)")
    append_results(args.results, [{"what": "search-instant", **settings(args, evaluator),
                                   "latency_ms": args.latency_ms, "playouts_per_s": round(max(rates), 1),
                                   "rounds_playouts_per_s": [round(r, 1) for r in rates], "misses": evaluator.misses}])
    if config.threads == 1:
        # One more pass with clocks on (they cost a little): where a playout's time goes.
        played = self_play(evaluator, config, args.moves, args.playouts, args.seed, search_class=TimedSearch,
                           start=start)
        seconds, count = played["search"].seconds, played["playouts"]
        per = {name: 1e6 * value / count for name, value in seconds.items()}
        print(f"  us per playout (timed pass, {count / played['elapsed_s']:.0f} playouts/s): "
              f"descent {per['descend']:.1f}, evaluator {per['evaluate']:.1f} (features, masks, symmetry, "
              f"softmax, and waiting for the network), expansion and backup {per['batch'] - per['evaluate']:.1f}, "
              f"the rest {1e6 * played['elapsed_s'] / count - per['descend'] - per['batch']:.1f}")
    return 0


def rollout_mix_rates(evaluator, config: SearchConfig, args: argparse.Namespace, start: GameState) -> int:
    """Playouts/s of the same self-play at each ``--rollout-mix`` λ, the λs taking turns within every round so that
    load from other processes hits them alike."""
    from tabula.engine.rollout.policy import RolloutPolicyError
    from tabula.engine.rollout.rollout import PolicyRollouts

    try:
        rollout = PolicyRollouts.load(args.rollout_weights) if any(mix > 0 for mix in args.rollout_mixes) else None
    except RolloutPolicyError as error:
        raise SystemExit(f"tabula bench search: {error}") from None
    totals = {mix: [0, 0.0, []] for mix in args.rollout_mixes}  # playouts, seconds, each round's rate
    for round_index in range(args.rounds):
        for mix in args.rollout_mixes:
            played = self_play(evaluator, replace(config, rollout_mix=mix), args.moves, args.playouts,
                               args.seed + round_index, start=start, rollout=rollout)
            total = totals[mix]
            total[0] += played["playouts"]
            total[1] += played["elapsed_s"]
            total[2].append(played["playouts"] / played["elapsed_s"])
    print(f"search with rollouts mixed in: {args.rounds} rounds x {args.moves} moves x {args.playouts} playouts "
          f"from move {args.opening}, {args.threads} threads, batch {args.batch_size}, {args.batches_in_flight} in "
          f"flight")
    first = totals[args.rollout_mixes[0]]
    for mix, (playouts, seconds, rates) in totals.items():
        print(f"  λ = {mix:<4g} playouts/s {playouts / seconds:8.1f}   ratio to λ = {args.rollout_mixes[0]:g} "
              f"{(playouts / seconds) / (first[0] / first[1]):.3f}   (rounds: {', '.join(f'{r:.1f}' for r in rates)})")
    return 0


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.latency_ms < 0 or (args.latency_ms and not args.instant_network):
        parser.error("--latency-ms is a non-negative wait for --instant-network")
    try:
        for mix in args.rollout_mixes or ():
            replace(BENCH_SEARCH, rollout_mix=mix)  # SearchConfig checks each value
    except ConfigError as error:
        parser.error(f"--rollout-mix: {error.reason}")
    if args.rollout_mixes is not None and args.instant_network:
        parser.error("--rollout-mix measures the real network's search, not --instant-network's")
    network = ReplayedNetwork if args.instant_network else OnnxEvaluator
    config = from_flags(BENCH_SEARCH, args)
    net = from_flags(BENCH_NET, args, prefix="net_").for_search(config, available_cores())
    args.net_threads = net.threads
    started = time.perf_counter()
    try:
        evaluator = network(args.weights, symmetry="random", rng=np.random.default_rng(args.seed),
                            threads=net.threads, provider=net.provider, precision=net.precision,
                            batch_hint=args.batch_size, log=None)
    except (ValueError, RuntimeError) as error:  # a bad file, a provider this machine lacks: one line, no trace
        raise SystemExit(f"tabula bench search: {error}") from None
    args.start_s = time.perf_counter() - started  # the backend's start: a GPU's checks and CUDA graphs included
    config = config.for_network(evaluator.on_gpu)  # as tabula gtp resolves both
    # what 0 became, for the report and the results
    args.threads, args.batch_size, args.batches_in_flight = config.threads, config.batch_size, config.batches_in_flight
    size = board_size(evaluator, args.size)
    if size not in evaluator.board_sizes:
        parser.error(f"{args.weights} plays {', '.join(map(str, evaluator.board_sizes))}, not {size}x{size}")
    args.size = size
    start = opening(evaluator, size, args.opening)
    if args.leelaz and size != 19:
        parser.error(f"--leelaz compares on 19x19 (Leela Zero 0.17 plays nothing else); {args.weights} plays "
                     f"{size}x{size}")
    cpu_threads = "" if evaluator.on_gpu else f", net threads {args.net_threads or 'default'}"
    print(f"network {args.weights}: {evaluator.metadata.get('architecture', '?')}, "
          f"{evaluator.metadata.get('precision', 'fp32')}, on {evaluator.provider}{cpu_threads} (started in "
          f"{args.start_s:.1f} s); self-play on {size}x{size}")
    if args.instant_network:
        return instant_network_bound(evaluator, config, args, start)
    if args.rollout_mixes is not None:
        return rollout_mix_rates(evaluator, config, args, start)
    # Rounds alternate search and raw measurements so that load from other processes hits both alike.
    callers = sorted({1, args.threads})
    totals = dict(playouts=0, evaluated=0, batches=0, elapsed_s=0.0, hits=0)
    raw_sums: dict[tuple[int, int], float] = {}
    for round_index in range(args.rounds):
        played = self_play(evaluator, config, args.moves, args.playouts, args.seed + round_index, start=start)
        for key in ("playouts", "evaluated", "batches", "elapsed_s", "hits"):
            totals[key] += played[key]
        mean_batch = totals["evaluated"] / max(1, totals["batches"])
        for b in sorted({args.batch_size, max(1, int(round(mean_batch)))}):
            for c in callers:
                rate = raw_throughput(evaluator, played["positions"] * 8, b, args.seconds, c)
                raw_sums[(b, c)] = raw_sums.get((b, c), 0.0) + rate
    raw_by_callers = {key: total / args.rounds for key, total in raw_sums.items() if key[0] in
                      {args.batch_size, max(1, int(round(mean_batch)))}}
    playouts_per_s = totals["playouts"] / totals["elapsed_s"]
    evals_per_s = totals["evaluated"] / totals["elapsed_s"]
    at = max(1, int(round(mean_batch)))
    best_raw = max(v for (b, _), v in raw_by_callers.items() if b == at)
    print(f"search: {args.rounds} rounds x {args.moves} moves x {args.playouts} playouts, {args.threads} threads, "
          f"batch {args.batch_size}, {args.batches_in_flight} in flight")
    print(f"  playouts/s            {playouts_per_s:8.1f}")
    print(f"  network positions/s   {evals_per_s:8.1f}  (cache hits {totals['hits']} of {totals['playouts']})")
    print(f"  mean batch            {mean_batch:8.2f}")
    for (b, c), value in sorted(raw_by_callers.items()):
        print(f"  raw evaluate, batch {b:2d}, {c} caller{'s' if c > 1 else ' '} {value:8.1f} positions/s")
    print(f"  efficiency = playouts/s / best raw at batch {at}          {playouts_per_s / best_raw:.3f}")
    print(f"  efficiency = network positions/s / best raw at batch {at} {evals_per_s / best_raw:.3f}")
    append_results(args.results, [{"what": "search", **settings(args, evaluator),
                                   "playouts_per_s": round(playouts_per_s, 1),
                                   "positions_per_s": round(evals_per_s, 1), "mean_batch": round(mean_batch, 2),
                                   "cache_hits": totals["hits"],
                                   "raw_positions_per_s": {f"b{b}c{c}": round(v, 1)
                                                           for (b, c), v in sorted(raw_by_callers.items())},
                                   "efficiency": round(playouts_per_s / best_raw, 3)}])
    if args.leelaz:
        lz, rates = leelaz_rate(args.leelaz, args.threads, args.moves, args.playouts)
        print(f"leelaz 0.17 --cpu-only -t {args.threads}: {lz:.1f} playouts/s (per move n/s: "
              f"{', '.join(f'{r:.0f}' for r in rates)})")
        print(f"  tabula / leelaz       {playouts_per_s / lz:8.2f}x")
    if args.profile:
        print(profile(evaluator, config, args.playouts, start))
    return 0
