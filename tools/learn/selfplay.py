"""`tabula selfplay`: self-play games with the training options (root noise, opening temperature, playout-cap
randomization, calibrated resignation), written to a replay store and as SGF; and the workers that play them, as
local processes or Ray tasks.

Layer: tools; imports engine (search, evaluator, replay) and never torch, so that workers start fast. The games are
pure functions of a task (network bytes, options, seed): ``play_selfplay_game`` and ``play_gating_game`` run the
same in this process, a local process pool or a Ray cluster. Both play through ``engine.play.game_loop`` with
``SelfPlayPicker``s.

    tabula selfplay --net best.onnx --out runs/sp --games 20 --visits 64
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import math
import multiprocessing
import os
import random
import sys
import tempfile
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import numpy as np

from tabula.engine.config import PlayConfig, SearchConfig
from tabula.engine.data.replay import ReplayStore, SelfPlayGame
from tabula.engine.play.decision import MoveDecider
from tabula.engine.play.game_loop import play_game
from tabula.engine.play.result import Candidate, SearchResult
from tabula.engine.play.search import Search
from tabula.engine.rules.coords import BLACK, PASS, RESIGN, WHITE
from tabula.engine.rules.game import handicap_points
from tabula.engine.rules.games import GameSpec
from tabula.gtp.flags import add_flags, from_flags


@dataclass(frozen=True)
class SelfPlayConfig:
    """How self-play games are played; saved in the run's config.json."""

    # Board sizes, in turn by game number (``game_size``); a size given twice gets twice the games. Several sizes need
    # the pooled head (one network for all); the agz head plays one.
    sizes: tuple[int, ...] = (9,)
    komi: float = 7.5  # area scoring; a half point so that no game is drawn
    visits: int = 64  # full search: root visits of a move whose visit distribution becomes a policy target
    fast_visits: int = 16  # KataGo's playout-cap randomization: visits of the other moves (0: every move is full)
    full_fraction: float = 0.25  # share of moves searched in full (and recorded), the rest fast and unrecorded
    temperature_moves: int = 8  # the first moves are drawn in proportion to visits (temperature 1), then the best
    dirichlet_alpha: float = 0.03  # on 19x19; the search scales it by 361/N² (0.13 on 9x9)
    noise_weight: float = 0.25  # share of Dirichlet noise in the root priors of full searches
    c_puct: float = 1.5
    prune_targets: bool = True  # KataGo's policy-target pruning of visits that only exploration explains
    resign_consecutive: int = 3  # resign after this many own moves in a row under the threshold
    no_resign_fraction: float = 0.1  # games played to the end to calibrate the threshold
    max_moves_factor: float = 2.0  # a game is scored after this many × N² moves
    batch_size: int = 8  # leaves per network call (one search thread)
    game: str = "go"  # go | gomoku (engine.rules.games)
    n_in_row: int = 5  # gomoku: n or more stones in a row win
    # Go: each game's komi drawn from a normal distribution around ``komi`` with this standard deviation, rounded to
    # a half point as real komi are (KataGo draws komi so that a network learns every komi, near the fair one
    # most); 0: every game at ``komi``
    komi_spread: float = 0.0
    handicap_fraction: float = 0.0  # Go: the share of games with 2 to max_handicap handicap stones and komi 0.5
    max_handicap: int = 4  # Go: the most handicap stones (where the board has a fixed placement for them)
    # Go: in a handicap game black's searches (full and fast) get this share of the visits (at least two), so that
    # the side giving the stones is the stronger player, as a bot giving handicap is: between equals a game of 5 or
    # more stones is lost for white from the first move, and its results teach the value nothing it can rank moves
    # by (KataGo plays such games with a playout advantage for the same reason). 1: equals
    handicap_black_visits: float = 1.0

    def __post_init__(self) -> None:
        # config.json holds the sizes as a JSON list: as a tuple, a saved configuration equals the one it was
        object.__setattr__(self, "sizes", tuple(int(s) for s in self.sizes))
        if not self.sizes or not all(2 <= s <= 25 for s in self.sizes):
            raise ValueError(f"board sizes {self.sizes}: one or more, each from 2 to 25")
        for size in self.sizes:
            self.game_spec.check_size(size)  # ValueError for an unknown game or a board it is not played on
        if not (math.isfinite(self.komi_spread) and self.komi_spread >= 0):
            raise ValueError(f"komi spread {self.komi_spread}: a standard deviation in points, 0 or more")
        if not 0.0 <= self.handicap_fraction <= 1.0:
            raise ValueError(f"handicap fraction {self.handicap_fraction}: from 0 to 1")
        if not 2 <= self.max_handicap <= 9:
            raise ValueError(f"max handicap {self.max_handicap}: from 2 to 9 stones")
        if not 0.0 < self.handicap_black_visits <= 1.0:
            raise ValueError(f"handicap black visits {self.handicap_black_visits}: a share of the visits, above 0 "
                             "and at most 1")
        if (self.komi_spread > 0 or self.handicap_fraction > 0) and not self.game_spec.scored:
            raise ValueError(f"komi and handicap are Go's, not {self.game}'s")

    @property
    def game_spec(self) -> GameSpec:
        """The game the games are of."""
        return GameSpec(self.game, self.n_in_row)

    @classmethod
    def from_dict(cls, data: dict) -> "SelfPlayConfig":
        """A saved configuration; one from before ``sizes`` names its one ``size``."""
        data = dict(data)
        if "size" in data:
            data["sizes"] = (data.pop("size"),)
        return cls(**data)

    def game_size(self, number: int) -> int:
        """The board size of game ``number`` (a task's number, which never repeats): the sizes in turn, so that a
        resumed run continues the cycle where it stopped."""
        return self.sizes[number % len(self.sizes)]

    def game_start(self, size: int, seed: int) -> tuple[float, int]:
        """(komi, handicap stones) of the game of ``seed`` on ``size``: ``komi`` and none, or drawn from the game's
        own random stream (``komi_spread``, ``handicap_fraction``), so that its other draws stay as they were. A
        handicap the board has no fixed placement for (``handicap_points``) is played as an even game."""
        if self.komi_spread <= 0 and self.handicap_fraction <= 0:
            return self.komi, 0
        rng = np.random.default_rng([seed, 0x6B6F6D69])  # "komi"
        if self.handicap_fraction > 0 and rng.random() < self.handicap_fraction:
            stones = int(rng.integers(2, self.max_handicap + 1))
            try:
                handicap_points(size, stones)
                return 0.5, stones
            except ValueError:
                pass
        komi = self.komi + (rng.normal(0.0, self.komi_spread) if self.komi_spread > 0 else 0.0)
        return round(komi * 2.0) / 2.0, 0

    def play_config(self, resign_winrate: float) -> PlayConfig:
        """How a self-play move is chosen from its search: drawn by visits for the first moves, passes and
        resignations as in matches, but scored by Tromp-Taylor (no referee-aware counts)."""
        return PlayConfig(temperature_moves=self.temperature_moves, temperature=1.0, resign_winrate=resign_winrate,
                          resign_consecutive=self.resign_consecutive, referee_aware=False)

    def search_config(self, visits: int, noise: bool) -> SearchConfig:
        """The search of one move: full searches get noise and no early stop, so their visits are a target. Self-play
        keeps its batches full and its root to one symmetry: 8 root evaluations would cost a 16-visit fast search
        half as much again, and at these visit counts the games, not each move, are what the run is short of. The
        exploration stays the plain c·P·√N/(1+n) (no variance scaling): the policy targets are pruned by it
        (prune_target), and the training runs resumed across sessions keep the search they started with."""
        return SearchConfig(visits=visits, threads=1, batch_size=self.batch_size, c_puct=self.c_puct,
                            adaptive_batch=False, root_symmetries=False,
                            fpu_root_reduction=0.0 if noise else SearchConfig.fpu_root_reduction,
                            lcb=False, early_stop=not noise, noise=noise, dirichlet_alpha=self.dirichlet_alpha,
                            noise_weight=self.noise_weight, cache_entries=20_000, cpuct_utility_stdev_scale=0.0)


# -- the search's visit distribution as a target ----------------------------------------------------------------


def prune_target(candidates: Sequence[Candidate], c_puct: float) -> dict[int, int]:
    """KataGo's policy-target pruning: take from every move but the most visited the visits it would not have got
    if only its PUCT score (with the root's noised priors) had to stay below the best move's; moves left with one
    visit or fewer are dropped. Returns {move: visits}.

    A visit count n' is kept for move i when Q_i + c·P_i·√N/(1+n') would still be below the best move's score,
    i.e. n' > c·P_i·√N/(U_best − Q_i) − 1.
    """
    if not candidates:
        return {}
    best = max(candidates, key=lambda c: c.visits)
    total = sum(c.visits for c in candidates)
    sqrt_n = math.sqrt(max(total, 1))
    best_score = best.value + c_puct * best.prior * sqrt_n / (1 + best.visits)
    kept = {best.move: best.visits}
    for c in candidates:
        if c is best:
            continue
        gap = best_score - c.value
        if gap <= 0:
            visits = c.visits
        else:
            needed = math.floor(c_puct * c.prior * sqrt_n / gap - 1.0) + 1
            visits = min(c.visits, max(0, needed))
        if visits > 1:
            kept[c.move] = visits
    return kept


def visit_target(candidates: Sequence[Candidate], size: int, c_puct: float,
                 prune: bool) -> tuple[np.ndarray, np.ndarray]:
    """(policy indices int64 [k], pass = N*N; visits int64 [k]) of a search's root, most visited first."""
    counts = prune_target(candidates, c_puct) if prune else {c.move: c.visits for c in candidates if c.visits > 0}
    ordered = sorted(counts.items(), key=lambda item: -item[1])
    moves = np.array([size * size if m == PASS else m for m, _ in ordered], dtype=np.int64)
    return moves, np.array([v for _, v in ordered], dtype=np.int64)


# -- networks in worker processes -------------------------------------------------------------------------------


@dataclass(frozen=True)
class NetBlob:
    """An ONNX network as bytes, so that a task carries it to any machine; ``name`` is for records and logs."""

    name: str
    data: bytes

    @classmethod
    def load(cls, path: str) -> "NetBlob":
        with open(path, "rb") as handle:
            return cls(os.path.basename(path), handle.read())

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.data).hexdigest()[:16]


class EvaluatorCache:
    """The few networks a worker process has loaded, by content (tasks of one generation share one)."""

    def __init__(self, capacity: int = 3):
        self.capacity = capacity
        self._loaded: OrderedDict[str, object] = OrderedDict()
        self._directory = tempfile.mkdtemp(prefix="tabula-nets-")

    def get(self, net: NetBlob, seed: int):
        from tabula.engine.net.evaluator import OnnxEvaluator

        key = net.digest
        if key not in self._loaded:
            path = os.path.join(self._directory, key + ".onnx")
            if not os.path.exists(path):
                with open(path + ".tmp", "wb") as handle:
                    handle.write(net.data)
                os.replace(path + ".tmp", path)
            self._loaded[key] = OnnxEvaluator(path, symmetry="random", rng=np.random.default_rng(seed), threads=1,
                                              provider="cpu", log=None)
            while len(self._loaded) > self.capacity:
                self._loaded.popitem(last=False)
        self._loaded.move_to_end(key)
        return self._loaded[key]


_CACHE: EvaluatorCache | None = None  # one per worker process, created on its first task


def _evaluator(net: NetBlob, seed: int):
    global _CACHE
    if _CACHE is None:
        _CACHE = EvaluatorCache()
    return _CACHE.get(net, seed)


# -- games ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SelfPlayTask:
    net: NetBlob
    config: SelfPlayConfig
    seed: int
    resign_threshold: float  # winrate; 0 never resigns
    resign_enabled: bool  # False: a calibration game, played to the end whatever the threshold
    size: int  # the board's side: one of config.sizes


def play_selfplay_game(task: SelfPlayTask, evaluator=None) -> tuple[SelfPlayGame, bytes]:
    """One self-play game: (the game with its targets, its SGF). ``evaluator``: use this one instead of the task's
    network (tests)."""
    config = task.config
    rng = np.random.default_rng(task.seed)
    evaluator = evaluator or _evaluator(task.net, int(rng.integers(1 << 62)))
    size = task.size
    game_spec = config.game_spec
    komi, handicap = config.game_start(size, task.seed)
    shared = _searches(evaluator, config, rng, 1.0)  # one tree for both sides, reused from move to move
    searches = {BLACK: shared, WHITE: shared}
    if handicap and config.handicap_black_visits < 1.0:
        searches[BLACK] = _searches(evaluator, config, rng, config.handicap_black_visits)
    state = game_spec.new_state(size, komi)
    if handicap:
        state.place_handicap(handicap_points(size, handicap))
    resign = task.resign_threshold if task.resign_enabled else 0.0
    decider = MoveDecider(config.play_config(resign), rng, random.Random(task.seed))
    picker = SelfPlayPicker(searches, decider, rng, config.full_fraction,
                            lambda result: visit_target(result.candidates, size, config.c_puct, config.prune_targets))
    start = time.monotonic()
    end = play_game(state, {BLACK: picker, WHITE: picker}, int(config.max_moves_factor * size * size))
    game = SelfPlayGame(size=size, komi=komi, moves=list(state.moves), targets=picker.targets, values=picker.values,
                        winner=end.winner, result=end.result, resign_enabled=task.resign_enabled,
                        resign_threshold=task.resign_threshold, net=task.net.name,
                        seconds=time.monotonic() - start, game=game_spec, setup=list(getattr(state, "setup", ())),
                        handicap=getattr(state, "handicap", 0))
    sgf = game_spec.sgf(state, black_name=task.net.name, white_name=task.net.name, result=end.result)
    return game, sgf


class SelfPlayPicker:
    """The ``MovePicker`` of self-play and gating games: a search of the side to move (its full search, or under
    playout-cap randomization its fast one), then ``MoveDecider``. With ``target``, it keeps each move's policy
    target (None after a fast search) and value in ``targets`` and ``values``, in the order the moves are played.

    ``searches``: colour -> (full search, fast search or None); ``full_fraction``: the share of moves searched in
    full where there is a fast search. ``budget_s`` is ignored: the searches' visits decide."""

    def __init__(self, searches: dict[int, tuple[Search, Search | None]], decider: MoveDecider,
                 rng: np.random.Generator, full_fraction: float = 1.0,
                 target: Callable[[SearchResult], tuple[np.ndarray, np.ndarray]] | None = None):
        self.searches, self.decider, self.rng = searches, decider, rng
        self.full_fraction, self.target = full_fraction, target
        self.targets: list[tuple[np.ndarray, np.ndarray] | None] = []
        self.values: list[float] = []

    def pick(self, state, budget_s: float | None = None) -> int:
        full, fast = self.searches[state.to_move]
        is_full = fast is None or self.rng.random() < self.full_fraction
        result = (full if is_full else fast).run(state)
        decision = self.decider.decide(state, result)
        if self.target is not None and decision.move != RESIGN:
            self.targets.append(self.target(result) if is_full else None)
            self.values.append(decision.value)
        return decision.move


def _searches(evaluator, config: SelfPlayConfig, rng: np.random.Generator,
              share: float) -> tuple[Search, Search | None]:
    """(full search, fast search or None) of one player of a self-play game, at ``share`` of the visits: at least
    two, the root and the child the policy likes best (one visit expands the root and chooses among unvisited
    moves)."""
    if share >= 1.0:
        visits, fast_visits = config.visits, config.fast_visits
    else:
        visits, fast_visits = (max(2, round(v * share)) for v in (config.visits, config.fast_visits))
    full = Search(evaluator, config.search_config(visits, noise=True), rng)
    fast = None
    if config.fast_visits > 0 and config.full_fraction < 1.0:
        fast = Search(evaluator, config.search_config(fast_visits, noise=False), rng)
    return full, fast


@dataclass(frozen=True)
class GatingTask:
    candidate: NetBlob
    best: NetBlob
    candidate_color: int  # BLACK or WHITE
    config: SelfPlayConfig
    visits: int
    seed: int
    size: int  # the board's side: one of config.sizes
    index: int = 0  # the game's number in its evaluation
    opening_moves: int = 4  # moves drawn in proportion to visits, so that the games differ


def play_gating_game(task: GatingTask) -> dict:
    """One evaluation game, candidate against best, no noise; returns {"game", "size", "candidate_color",
    "winner", "moves", "result"}."""
    config = task.config
    rng = np.random.default_rng(task.seed)
    search_config = dataclasses.replace(config.search_config(task.visits, noise=False), lcb=True)
    nets = {task.candidate_color: task.candidate, 3 - task.candidate_color: task.best}
    searches = {color: Search(_evaluator(net, int(rng.integers(1 << 62))), search_config, rng)
                for color, net in nets.items()}
    state = config.game_spec.new_state(task.size, config.komi)
    max_moves = int(config.max_moves_factor * task.size * task.size)
    # A fixed, safe resignation: the side to move sure of its loss (winrate under 2.5%, a value under -0.95) for
    # three moves in a row; gating needs only the winner. The first moves are drawn so that the games differ.
    play = PlayConfig(temperature_moves=task.opening_moves, resign_winrate=0.025, resign_consecutive=3,
                      referee_aware=False)
    pickers = {color: SelfPlayPicker({color: (searches[color], None)},
                                     MoveDecider(play, rng, random.Random(task.seed)), rng)
               for color in (BLACK, WHITE)}
    end = play_game(state, pickers, max_moves)
    return {"game": task.index, "size": task.size, "candidate_color": task.candidate_color, "winner": end.winner,
            "moves": len(state.moves), "result": end.result}


# -- workers ----------------------------------------------------------------------------------------------------


class Workers:
    """Where tasks run: ``map_unordered(function, tasks)`` yields results as they finish."""

    def map_unordered(self, function: Callable, tasks: Sequence) -> Iterator:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def describe(self) -> str:
        raise NotImplementedError


class LocalWorkers(Workers):
    """``processes`` local worker processes (spawned: the loop's process may hold torch threads); 1 runs the tasks
    in this process, one after another."""

    def __init__(self, processes: int = 1):
        self.processes = max(1, processes)
        self._pool = None
        if self.processes > 1:
            self._pool = multiprocessing.get_context("spawn").Pool(self.processes)

    def map_unordered(self, function: Callable, tasks: Sequence) -> Iterator:
        if self._pool is None:
            for task in tasks:
                yield function(task)
            return
        yield from self._pool.imap_unordered(function, tasks)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None

    def describe(self) -> str:
        return f"{self.processes} local process{'es' if self.processes > 1 else ''}"


def _call(function: Callable, task):
    return function(task)


class RayWorkers(Workers):
    """Tasks as Ray tasks, one CPU each: on the cluster at ``address``, or on a Ray instance started here with
    ``processes`` CPUs. Every node needs Tabula importable (``pip install -e .[ray]`` in the same place)."""

    def __init__(self, address: str = "", processes: int = 1):
        import ray

        import tabula

        self._ray = ray
        if not ray.is_initialized():
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                # the folder that holds the tabula package: a checkout or site-packages
                root = os.path.dirname(os.path.dirname(os.path.abspath(tabula.__file__)))
                ray.init(num_cpus=max(1, processes), include_dashboard=False, log_to_driver=False,
                         runtime_env={"env_vars": {"PYTHONPATH": root, "OMP_NUM_THREADS": "1"}})
        self._remote = ray.remote(num_cpus=1, max_retries=2)(_call)
        self.address = address

    def map_unordered(self, function: Callable, tasks: Sequence) -> Iterator:
        ray = self._ray
        function_ref = ray.put(function)
        pending = [self._remote.remote(function_ref, task) for task in tasks]
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                yield ray.get(done[0])
        finally:
            for ref in pending:
                ray.cancel(ref)

    def close(self) -> None:
        if not self.address:
            self._ray.shutdown()

    def describe(self) -> str:
        cpus = int(self._ray.cluster_resources().get("CPU", 0))
        return f"Ray {'at ' + self.address if self.address else 'started here'}, {cpus} CPUs"


def make_workers(processes: int, ray: bool = False, ray_address: str = "") -> Workers:
    if ray or ray_address:
        return RayWorkers(ray_address, processes)
    return LocalWorkers(processes)


# -- writing games ------------------------------------------------------------------------------------------------


def write_sgf_file(directory: str, index: int, sgf: bytes) -> str:
    """The game's SGF, atomically (an SGF that exists is whole)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{index:09d}.sgf")
    with open(path + ".tmp", "wb") as handle:
        handle.write(sgf)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(path + ".tmp", path)
    return path


def selfplay_tasks(net: NetBlob, config: SelfPlayConfig, count: int, seed: int, first: int,
                   resign_threshold: float) -> list[SelfPlayTask]:
    """``count`` tasks numbered from ``first`` (their seeds and board sizes depend on the number, so a resumed run
    plays new games and continues the cycle of sizes), a ``no_resign_fraction`` of them without resignation."""
    tasks = []
    for i in range(first, first + count):
        rng = np.random.default_rng([seed, i])
        game_seed = int(rng.integers(1 << 62))
        enabled = rng.random() >= config.no_resign_fraction
        tasks.append(SelfPlayTask(net, config, game_seed, resign_threshold, enabled, config.game_size(i)))
    return tasks


def run_selfplay(store: ReplayStore, sgf_directory: str, tasks: Sequence[SelfPlayTask], workers: Workers,
                 on_game: Callable[[SelfPlayGame], None] | None = None,
                 should_stop: Callable[[], bool] = lambda: False) -> int:
    """Play ``tasks`` on ``workers`` and append each game to ``store`` as soon as it arrives; returns games written.
    Stops taking results when ``should_stop()`` turns true (games in flight are lost).

    The SGF is written before the game is appended: a kill between the two leaves an SGF under the next number,
    which the next game overwrites, never a stored game without its SGF."""
    written = 0
    for game, sgf in workers.map_unordered(play_selfplay_game, tasks):
        write_sgf_file(sgf_directory, store.total, sgf)
        store.append(game)
        written += 1
        if on_game is not None:
            on_game(game)
        if should_stop():
            break
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tabula selfplay", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--net", required=True, help="ONNX network")
    parser.add_argument("--out", required=True, help="directory: replay/ (one shard per game) and sgf/")
    parser.add_argument("--games", type=int, default=10)
    parser.add_argument("--window", type=int, default=0, help="keep only the newest games (0: all)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--ray", action="store_true", help="run games as Ray tasks (Ray started here)")
    parser.add_argument("--ray-address", default="", help="join this Ray cluster")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--resign-threshold", type=float, default=0.0, help="winrate (0: never resign)")
    add_selfplay_flags(parser)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    config = selfplay_from_flags(parser, SelfPlayConfig, args)
    from tqdm import tqdm

    with ReplayStore(os.path.join(args.out, "replay"), args.window) as store:
        tasks = selfplay_tasks(NetBlob.load(args.net), config, args.games, args.seed, store.total,
                               args.resign_threshold)
        workers = make_workers(args.workers, args.ray, args.ray_address)
        bar = tqdm(total=len(tasks), desc="self-play", unit="game", file=sys.stderr)
        started = time.time()

        def on_game(game: SelfPlayGame) -> None:
            bar.update(1)
            hours = max(time.time() - started, 1e-9) / 3600
            bar.set_postfix_str(f"{bar.n / hours:.0f} games/h, {len(game.moves)} moves, {game.result}")

        try:
            run_selfplay(store, os.path.join(args.out, "sgf"), tasks, workers, on_game)
        finally:
            bar.close()
            workers.close()
    return 0


# -- options (shared with tools/learn/rl_loop.py) ---------------------------------------------------------------


def add_selfplay_flags(parser: argparse.ArgumentParser) -> None:
    """``SelfPlayConfig``'s options (unset: a saved configuration's value), and ``--size N`` for ``--sizes N``."""
    add_flags(parser, SelfPlayConfig, keep_unset=True)
    parser.add_argument("--size", type=int, default=None, help="one board size: the same as --sizes N")


def selfplay_from_flags(parser: argparse.ArgumentParser, base, args: argparse.Namespace) -> SelfPlayConfig:
    """``base`` (a configuration, or the class for its defaults) with the options of ``add_selfplay_flags``."""
    if args.size is not None:
        if args.sizes is not None:
            parser.error("--size N is --sizes N: give one of them")
        args.sizes = (args.size,)
    try:
        return from_flags(base, args)
    except ValueError as e:
        parser.error(str(e))


__all__ = ["SelfPlayConfig", "add_selfplay_flags", "selfplay_from_flags", "SelfPlayTask", "GatingTask", "NetBlob",
           "prune_target", "visit_target", "play_selfplay_game", "play_gating_game", "SelfPlayPicker", "LocalWorkers",
           "RayWorkers", "make_workers", "run_selfplay", "selfplay_tasks"]


if __name__ == "__main__":
    sys.exit(main())
