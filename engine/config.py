"""Configuration: one tree of frozen dataclasses, built only at entry points and passed down.

Each component receives only its own part. Runtime changes (``time_settings``, ``komi``) use
``dataclasses.replace``. Nothing here reads the environment or argv: the entry points make their options from these
fields with ``gtp/flags.py``. Each dataclass checks its own fields in ``__post_init__`` (ConfigError), and those
options check their values through it, so that a value out of range is an argparse error naming the option.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterable

from tabula.engine.rules.coords import MAX_SIZE, MIN_SIZE
from tabula.engine.rules.game import Rules

# NetConfig's names for what runs the network (engine/net/evaluator.py maps them to its backends): "auto" (TensorRT,
# CUDA, torch on CUDA, then the CPU: the first that works), onnxruntime's providers, and the torch CUDA backend.
BACKENDS = ("auto", "tensorrt", "cuda", "cpu", "torch")
PRECISIONS = ("auto", "fp32", "fp16", "bf16")  # of the GPU backends; onnxruntime on the CPU always runs the file's


class ConfigError(ValueError):
    """A configuration field out of its range: ``field`` names it, ``reason`` says what it must be."""

    def __init__(self, owner: str, field_name: str, reason: str):
        super().__init__(f"{owner}.{field_name} {reason}")
        self.field = field_name
        self.reason = reason


def _finite(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _require(config: object, name: str, ok: bool, must: str) -> None:
    """ConfigError unless ``ok``; ``must`` says what the field ``name`` of ``config`` must be."""
    if not ok:
        raise ConfigError(type(config).__name__, name, f"must be {must}, not {getattr(config, name)!r}")


def _at_least(config: object, minimum: int, *names: str) -> None:
    for name in names:
        value = getattr(config, name)
        _require(config, name, _finite(value) and value >= minimum, f"{minimum} or more")


def _unit_interval(config: object, *names: str) -> None:
    for name in names:
        value = getattr(config, name)
        _require(config, name, _finite(value) and 0.0 <= value <= 1.0, "in [0, 1]")


def _one_of(config: object, name: str, choices: Iterable[str]) -> None:
    _require(config, name, getattr(config, name) in choices, f"one of {', '.join(choices)}")


# SearchConfig.visits of an engine built from its entry point: a budget by board size, REFERENCE_VISITS on 19×19 and
# larger boards and REFERENCE_VISITS·361/N² on smaller ones, at most MAX_VISITS_SCALE times as many (1,600 on 9×9,
# 854 on 13×13). Why: a network evaluation costs about the board's area, so this keeps a move near the time a
# 19×19 move takes, where a flat 400 visits would play the small boards at a fraction of it, and weaker
# (docs/STRENGTH.md, "Visits by board size"). The cap: on the smallest boards the tree's own work, not the network,
# is most of a visit's cost. A --visits given on the command line is the budget on every size.
BY_BOARD_SIZE = -1
REFERENCE_VISITS = 400
REFERENCE_SIZE = 19
MAX_VISITS_SCALE = 4


@dataclass(frozen=True)
class SearchConfig:
    """The tree search."""

    visits: int = 400  # stop after this many visits at the root (0: no limit; BY_BOARD_SIZE: see above)
    playouts: int = 0  # stop after this many new playouts this move (0: no limit)
    # Worker threads descending the tree, and leaves per network call at most. 0 (the default): chosen with the
    # network (for_network), as ON_CPU and ON_GPU below say.
    threads: int = 0
    batch_size: int = 0
    # Shrink the batch for searches bounded by visits or playouts: every leaf in flight is a visit chosen without
    # the results still to come (a collision under virtual loss), so at most one leaf is in flight per
    # ``playouts_per_leaf`` of a search's playouts, with a virtual loss of 1 in batches of 4 or fewer
    # (Search._batching). A search bounded by time alone keeps the configured batches.
    adaptive_batch: bool = True
    playouts_per_leaf: int = 0  # 0: chosen with the network (for_network), as ON_CPU and ON_GPU below say
    root_symmetries: bool = True  # the root's priors and value are the mean over the 8 symmetries
    # Batches a search thread keeps at the network at once: with 2 or more it goes on descending while the network
    # (a GPU) runs the earlier batch, where threads that each wait for their own batch mostly queue for the GIL.
    # 0: chosen with the network, as threads and batch_size are (for_network).
    batches_in_flight: int = 0
    c_puct: float = 1.5  # exploration weight in Q + c·P·√N/(1+n), values in [-1, 1]
    # KataGo's variance-scaled cPUCT: c is multiplied at each node by 1 + scale·(σ/prior - 1), σ the spread of the
    # utilities backed up through it (with the prior counted prior_weight times): a quiet node (every move equally
    # lost or won) explores less and ranks its moves by the small differences there are, a wild one more. KataGo's
    # default, measured against 0 in docs/STRENGTH.md. 0: off.
    cpuct_utility_stdev_scale: float = 0.85
    cpuct_utility_stdev_prior: float = 0.4
    cpuct_utility_stdev_prior_weight: float = 2.0
    fpu_reduction: float = 0.5  # unvisited child's value = parent's net value - this · √(visited prior mass)
    fpu_root_reduction: float = 0.5  # the same at the root (0 with noise, as in self-play)
    # KataGo's exploration that grows with a node's visits: c becomes c_puct + cpuct_log·ln((N + base) / base), N the
    # visits of the node's children (KataGo's GTP default: 1.0 + 0.45·ln((N + 500) / 500)). 0: c_puct alone.
    cpuct_log: float = 0.0
    cpuct_log_base: float = 500.0
    # KataGo's fpuParentWeightByVisitedPolicy: the first-play urgency starts from m²·(the mean utility of the node's
    # visits) + (1 - m²)·(the network's utility of the node), m the prior mass of its visited children, rather than
    # from the network's alone: once most of the policy has been tried, what the search found there counts.
    fpu_search_mean: bool = False
    # KataGo's subtree value bias correction (its docs/KataGoMethods.md; engine/play/value_bias.py has the buckets):
    # positions after the same local sequence (mover, move, move before, 5×5 pattern, ko) share a running mean of how
    # far the search below them ended from the network's utility, weighted by their children's visits to the power
    # subtree_value_bias_exponent; each node's own evaluation is corrected by this share of its bucket's mean. KataGo
    # reports 30 to 60 Elo from it at 0.35-0.45 (its GTP default 0.45, exponent 0.85). 0: off. The table starts
    # afresh each move here (KataGo carries it over).
    subtree_value_bias: float = 0.0
    subtree_value_bias_exponent: float = 0.85
    # KataGo's optimistic policy below the root: every node but the root takes its priors from the network's
    # optimistic policy channel alone (KataGo's policyOptimism 1), the root from the file's policy (a KataGo network
    # converted by Tabula mixes it in at 0.2, KataGo's rootPolicyOptimism). The optimistic channel leans to the
    # moves whose outcome beat the network's expectation in training, the lines a small search most needs to see
    # (KataGo reports 40 to 90 Elo). Only KataGo's networks of model version 12 and later have the channel;
    # elsewhere this changes nothing.
    optimistic_policy: bool = False
    virtual_loss: int = 3  # losses added per in-flight leaf on every edge of its path
    # The most visited move, unless another one's lower confidence bound is above the most visited one's mean: only
    # then does the bound separate the moves (LCB over close values ranks them by noise).
    lcb: bool = True
    lcb_min_visit_ratio: float = 0.1  # a move needs this share of the top visits to be chosen by LCB
    # ... and is never chosen by it when both its prior and its visits are below this share of the top move's
    lcb_veto_ratio: float = 0.5
    early_stop: bool = True  # stop when the most visited move cannot be overtaken in the remaining budget
    cache_entries: int = 50_000  # network results kept by position hash (about 1-2 KB each on 19x19)
    max_nodes: int = 150_000  # stop searching once this many nodes are expanded (about 7 KB each on 19x19)
    eye_filter: bool = True  # never search moves that fill one's own single-point eye (see Board.is_own_eye)
    # The least prior of a legal move at the only liberty of a string in atari of atari_min_stones stones or more
    # (either colour's: it captures, or it gives a liberty), the rest scaled down to make room. Why: the network
    # gives taking a big group it never expected in atari a prior of about 0, so the search never tries it and reads
    # a lost position as won (Board.atari_stakes; the games that showed it and the match that set 0.1 are in
    # docs/STRENGTH.md). 0: the network's priors alone.
    atari_prior: float = 0.1
    atari_min_stones: int = 2
    reuse_tree: bool = True  # keep the matching subtree between moves
    reuse_undo_plies: int = 4  # keep ancestors of the root this many plies up, for undo and re-sent games
    noise: bool = False  # Dirichlet noise at the root (self-play)
    dirichlet_alpha: float = 0.03  # alpha on 19x19, scaled by 361/N² on other sizes
    noise_weight: float = 0.25  # share of the noise in the root priors
    # The root's priors raised to 1/T and renormalised for each run (KataGo's rootPolicyTemperature): above 1 the
    # search looks wider at the root. 1: the network's priors.
    root_policy_temperature: float = 1.0
    rollout_mix: float = 0.0  # λ in [0, 1]: a leaf's value is (1 - λ)·network + λ·one rollout's result (AlphaGo)
    # KataGo's score utility: the search ranks moves by a leaf's value plus these weights times (2/π)·atan of its
    # score (side to move's view, points): static, around 0 at a scale of 2·N points; dynamic, around the centre
    # (the root's expected score, moved dynamic_score_zero_weight of the way to 0) at dynamic_score_scale·N points.
    # Far behind or far ahead every move's value is the same, and the score still tells them apart. The reported
    # winrates stay the value alone; a network without a score head ranks by its value alone.
    static_score_utility: float = 0.1
    dynamic_score_utility: float = 0.3
    dynamic_score_scale: float = 0.75
    dynamic_score_zero_weight: float = 0.2
    # The share of a leaf's score (the utility's and the reported lead's) taken from its ownership, Σ ownership plus
    # the side to move's komi (an area count of the predicted final board), instead of the score head. Why: the
    # score head learned its margins from records whose big losers resign, and compresses big ones (docs/STRENGTH.md),
    # so a search on it sees a dead group as a few points.
    ownership_score: float = 0.0

    def __post_init__(self) -> None:
        _require(self, "visits", isinstance(self.visits, int) and (self.visits >= 0 or self.visits == BY_BOARD_SIZE),
                 f"0 or more (or {BY_BOARD_SIZE}: by board size)")
        _at_least(self, 0, "playouts", "batches_in_flight", "c_puct", "fpu_reduction", "fpu_root_reduction",
                  "virtual_loss", "cache_entries", "reuse_undo_plies")
        _at_least(self, 0, "threads", "batch_size", "playouts_per_leaf")
        _at_least(self, 1, "max_nodes", "atari_min_stones")
        _unit_interval(self, "lcb_min_visit_ratio", "lcb_veto_ratio", "noise_weight", "rollout_mix",
                       "cpuct_utility_stdev_scale",
                       "static_score_utility", "dynamic_score_utility", "dynamic_score_zero_weight", "ownership_score",
                       "atari_prior")
        _require(self, "cpuct_utility_stdev_prior",
                 _finite(self.cpuct_utility_stdev_prior) and self.cpuct_utility_stdev_prior > 0, "above 0")
        _at_least(self, 0, "cpuct_utility_stdev_prior_weight")
        _require(self, "dirichlet_alpha", _finite(self.dirichlet_alpha) and self.dirichlet_alpha > 0, "above 0")
        _require(self, "root_policy_temperature",
                 _finite(self.root_policy_temperature) and 0.01 <= self.root_policy_temperature <= 100.0,
                 "from 0.01 to 100")
        _require(self, "dynamic_score_scale", _finite(self.dynamic_score_scale) and self.dynamic_score_scale > 0,
                 "above 0")
        _at_least(self, 0, "cpuct_log")
        _unit_interval(self, "subtree_value_bias", "subtree_value_bias_exponent")
        _require(self, "cpuct_log_base", _finite(self.cpuct_log_base) and self.cpuct_log_base >= 1, "1 or more")

    def visits_for(self, state: Any) -> int:
        """The visits a move in ``state`` (a game state with a ``size``) stops at (0: no limit): ``visits``, or with
        BY_BOARD_SIZE the budget for the board's side (see BY_BOARD_SIZE). The size is read only for that budget: a
        rectangular gomoku board has none."""
        if self.visits != BY_BOARD_SIZE:
            return self.visits
        size = state.size
        if size >= REFERENCE_SIZE:
            return REFERENCE_VISITS
        scaled = round(REFERENCE_VISITS * REFERENCE_SIZE ** 2 / size ** 2)
        return min(MAX_VISITS_SCALE * REFERENCE_VISITS, scaled)

    @property
    def score_utility(self) -> bool:
        """Whether the search adds a score utility to the values it ranks moves by."""
        return self.static_score_utility > 0 or self.dynamic_score_utility > 0

    def for_network(self, on_gpu: bool) -> "SearchConfig":
        """This configuration with ``threads``, ``batch_size``, ``batches_in_flight`` and ``playouts_per_leaf`` 0
        resolved for where the network runs: ``ON_GPU`` or ``ON_CPU`` (why each: there). A value asked for is kept."""
        chosen = ON_GPU if on_gpu else ON_CPU
        resolved = {name: value for name, value in chosen.items() if getattr(self, name) == 0}
        return replace(self, **resolved) if resolved else self


# The search's shape where the network runs on the CPU: two threads of batches of 8, one batch in flight each. Two
# threads share the cores' network calls (NetConfig.for_search) and run more playouts/s than one (docs/BENCHMARKS.md,
# "Network threads on the CPU"). A search bounded by visits, as the default one is, sends batches of one leaf per
# 1,024 of its new playouts per thread and never fewer than one: one leaf a thread below 4,096 new playouts on the two
# threads, so at every board size's default visits. Why: batches of several leaves under virtual loss scatter the
# visits of a position where every move's value is the same (a decided handicap game) over the best few moves, and
# played worse than one leaf a thread giving handicap and in even games under the same clock, though one leaf a call
# makes fewer playouts a second (docs/STRENGTH.md, "Visits at 7 stones"; docs/BENCHMARKS.md, "A move at the default
# budgets: one leaf a thread").
ON_CPU = {"threads": 2, "batch_size": 8, "batches_in_flight": 1, "playouts_per_leaf": 1024}
# One leaf in flight per 32 playouts: the rule a search bounded by visits had everywhere before the CPU's one leaf a
# thread. Kept where batches pay (a GPU, the teacher's labels, bound by the network's speed) or where a setting was
# measured with it (gomoku).
BATCHED_PLAYOUTS_PER_LEAF = 32
# ... and on a GPU: one thread of batches of 64 with two in flight: near the fastest shape measured with half its
# leaves in flight, and about twice the CPU's shape there (docs/BENCHMARKS.md, "The GPU table"). A search bounded by
# visits still sends smaller batches, by the batched rule (not measured against one leaf at a time on a GPU, where a
# call of one leaf costs nearly what a call of 64 does).
ON_GPU = {"threads": 1, "batch_size": 64, "batches_in_flight": 2, "playouts_per_leaf": BATCHED_PLAYOUTS_PER_LEAF}


# PlayConfig.resign_winrate of an engine built from its entry point: the threshold calibrated for the network that
# plays the board size (its metadata ``resign_winrate``, written by ``tabula export --resign-winrate``: a
# ResignThresholds), and never resigning with a network that has none: a value head nobody measured is no reason to
# give up a game. Likewise PlayConfig.ownership_network: the share of the dead-stone judgement measured for the
# network's ownership head (metadata ``ownership_network``, ``tabula export --ownership-network``), 0 where none was.
CALIBRATED = -1.0


def parse_share(text: str) -> float:
    """A share in [0, 1] written as text (``ownership_network`` in a network's metadata, ``tabula export
    --ownership-network``); ValueError for anything else, NaN included."""
    try:
        share = float(text)
    except ValueError:
        share = float("nan")
    if not 0.0 <= share <= 1.0:  # NaN fails this too
        raise ValueError(f"{text!r} is not a number in [0, 1]")
    return share


@dataclass(frozen=True)
class ResignThresholds:
    """A network's calibrated resignation winrates (``tabula resign`` measures them; ``tabula export
    --resign-winrate`` writes them into its metadata): ``even`` per board size, ``handicap`` per board size for
    handicap games (where none is given, a handicap game uses the size's even threshold), ``default`` for the sizes
    not listed. 0 never resigns: a size nobody calibrated. Whichever applies, white's is lowered early in a
    handicap game (engine.play.decision.resign_threshold_factor), as ``tabula resign`` calibrated it.

    Text form (metadata and option): ``0.2`` (every size), or entries ``SIZE:T`` (even games), ``hSIZE:T``
    (handicap games) and ``*:T`` (the other sizes), comma-separated, e.g. ``9:0.2,13:0.15,19:0.1,h19:0.05``."""

    default: float = 0.0
    even: tuple[tuple[int, float], ...] = ()
    handicap: tuple[tuple[int, float], ...] = ()

    def __post_init__(self) -> None:
        def winrate(t: Any) -> bool:
            return _finite(t) and 0.0 <= t < 1.0

        _require(self, "default", winrate(self.default), "a winrate in [0, 1)")
        for name in ("even", "handicap"):
            _require(self, name, all(isinstance(n, int) and MIN_SIZE <= n <= MAX_SIZE and winrate(t)
                                     for n, t in getattr(self, name)),
                     f"(size, winrate) pairs: sizes from {MIN_SIZE} to {MAX_SIZE}, winrates in [0, 1)")

    def for_game(self, size: int, handicap: int = 0) -> float:
        """The threshold of a game on ``size`` with ``handicap`` stones."""
        if handicap > 0 and size in dict(self.handicap):
            return dict(self.handicap)[size]
        return dict(self.even).get(size, self.default)

    @classmethod
    def parse(cls, text: str) -> "ResignThresholds":
        """The text form (see the class); ValueError saying what is wrong."""
        entries = [entry.strip() for entry in text.split(",") if entry.strip()]
        if not entries:
            raise ValueError("no resignation threshold given")
        if len(entries) == 1 and ":" not in entries[0]:
            entries = [f"*:{entries[0]}"]
        default, even, handicap = 0.0, {}, {}
        for entry in entries:
            key, _, value = entry.partition(":")
            try:
                threshold = float(value)
                if key == "*":
                    default = threshold
                elif key.startswith("h"):
                    handicap[int(key[1:])] = threshold
                else:
                    even[int(key)] = threshold
            except ValueError:
                raise ValueError(f"{entry!r} is not SIZE:T, hSIZE:T or *:T (T a winrate)") from None
        try:
            return cls(default, tuple(sorted(even.items())), tuple(sorted(handicap.items())))
        except ConfigError as error:
            raise ValueError(f"resignation thresholds {text!r}: {error.reason}") from None

    def __str__(self) -> str:
        entries = [f"{size}:{t:g}" for size, t in self.even] + [f"h{size}:{t:g}" for size, t in self.handicap]
        if self.default or not entries:
            entries.append(f"*:{self.default:g}")
        return ",".join(entries)


@dataclass(frozen=True)
class PlayConfig:
    """How a search's result becomes the move played (engine.play.decision.MoveDecider), the same for GTP, self-play
    and gating: temperature, passing, resignation; and what the player does around the search."""

    temperature_moves: int = 0  # moves played in proportion to visits^(1/temperature) for the first k moves
    temperature: float = 1.0
    resign_winrate: float = 0.10  # resign below this winrate (0: never; CALIBRATED: the network's own, see below)
    resign_consecutive: int = 3  # ... for this many of our moves in a row
    resign_after: float = 0.25  # ... and never in the first this share of the board's points in moves
    # Before passing, also count the lead as a referee removing dead stones would (random playouts), and after the
    # opponent's pass play no stones inside settled territory. Off in self-play, which scores by Tromp-Taylor.
    referee_aware: bool = True
    # After the opponent's pass, behind by that count: when no move the search tried has this winrate, playing on
    # changes nothing, so pass (or resign where allowed) rather than give away a point a stone under territory rules.
    lost_winrate: float = 0.10
    ponder: bool = False  # search on the opponent's time until the next command arrives
    # Dead stones (final_status_list, final_score, cleanup) are judged by the mean ownership of this many random
    # playouts and this many rollouts of the rollout policy (0: random playouts alone).
    ownership_playouts: int = 64
    ownership_rollouts: int = 128
    # ... and this share of the map taken from the network's ownership head (the mean over the 8 symmetries), where
    # the network has one (0: the playouts and rollouts alone; CALIBRATED: the share measured for the network that
    # plays the board size, its metadata ``ownership_network``, and 0 where it has none)
    ownership_network: float = 0.0

    def __post_init__(self) -> None:
        _at_least(self, 0, "temperature_moves", "temperature", "ownership_rollouts")  # temperature 0: the search's move
        _at_least(self, 1, "resign_consecutive", "ownership_playouts")
        _unit_interval(self, "resign_after", "lost_winrate")
        share = self.ownership_network
        _require(self, "ownership_network", share == CALIBRATED or (_finite(share) and 0.0 <= share <= 1.0),
                 f"in [0, 1], or {CALIBRATED:g}: the share measured for the network")
        resign = self.resign_winrate
        _require(self, "resign_winrate", resign == CALIBRATED or (_finite(resign) and 0.0 <= resign < 1.0),
                 f"in [0, 1), or {CALIBRATED:g}: the network's calibrated threshold")


@dataclass(frozen=True)
class TimeConfig:
    """How the clock is spent."""

    # Kept back from every period and from the main time for network lag and start-up delays (KataGo's lagBuffer,
    # Leela Zero's --lagbuffer): a server's clock runs while the move travels.
    lag_buffer_s: float = 1.0
    max_time_per_move_s: float = 0.0  # 0: no cap beyond the clock

    def __post_init__(self) -> None:
        _at_least(self, 0, "lag_buffer_s", "max_time_per_move_s")


@dataclass(frozen=True)
class NetConfig:
    """Where the network comes from and how it runs."""

    weights: tuple[str, ...] = ()  # ONNX files, each playing the sizes it was made for; () means the shipped ones
    threads: int = 0  # onnxruntime intra-op threads on the CPU (0: chosen with the search, for_search)
    provider: str = "auto"  # auto | cpu | cuda | tensorrt | torch (see evaluator.OnnxEvaluator)
    precision: str = "auto"  # of the GPU backends: auto (fp16) | fp16 | bf16 | fp32
    max_batch: int = 256  # the largest batch the GPU backends prepare for (TensorRT profile, CUDA graphs)
    cache_dir: str = ""  # TensorRT engine cache; "": evaluator.default_cache_dir()
    # The rollout policy (.npz; "": the shipped one), for rollout_mix and for judging dead stones: read at start-up
    # when rollout_mix > 0 or a file is named, else when dead stones are first judged.
    rollout_weights: str = ""

    def __post_init__(self) -> None:
        _at_least(self, 0, "threads")
        _at_least(self, 1, "max_batch")
        _one_of(self, "provider", BACKENDS)
        _one_of(self, "precision", PRECISIONS)

    def for_search(self, search: SearchConfig, cores: int) -> "NetConfig":
        """This configuration with ``threads`` 0 resolved for a search on ``cores`` CPUs. Each search thread with
        one batch in flight runs its own network calls, so as many run at once as there are search threads: they
        share the cores (``cores // threads`` each) rather than each taking them all, which oversubscribed them
        and ran fewer playouts per second (docs/BENCHMARKS.md, "Network threads on the CPU"). One network call at a
        time (one search thread, or batches in flight, which one evaluator thread runs in turn) is left to
        onnxruntime's default (its physical cores).
        ``batches_in_flight`` 0 counts as 1: that is what it becomes on the CPU (SearchConfig.for_network), the only
        place these threads matter, and this is resolved before the network shows where it runs."""
        # threads 0 counts as the CPU's, like batches_in_flight 0 (see above)
        concurrent = (search.threads or ON_CPU["threads"]) if search.batches_in_flight <= 1 else 1
        if self.threads > 0 or concurrent == 1:
            return self
        return replace(self, threads=max(1, cores // concurrent))


@dataclass(frozen=True)
class EngineConfig:
    rules: Rules = field(default_factory=Rules)
    search: SearchConfig = field(default_factory=lambda: SearchConfig(visits=BY_BOARD_SIZE))
    play: PlayConfig = field(default_factory=lambda: PlayConfig(resign_winrate=CALIBRATED,
                                                                ownership_network=CALIBRATED))
    time: TimeConfig = field(default_factory=TimeConfig)
    net: NetConfig = field(default_factory=NetConfig)
    player: str = "search"  # move picker: search (the network, default) | random (the baseline)
    board_size: int = 0  # the first game's size; 0: 19x19, or the first size the player's networks play
    seed: int | None = None  # None: a fresh seed per process

    def __post_init__(self) -> None:
        size = self.board_size
        _require(self, "board_size", size == 0 or (isinstance(size, int) and MIN_SIZE <= size <= MAX_SIZE),
                 f"0 or in {MIN_SIZE}..{MAX_SIZE}")
        _require(self, "seed", self.seed is None or (isinstance(self.seed, int) and self.seed >= 0),
                 "0 or more (or None: a fresh seed)")

    def to_dict(self) -> dict:
        return asdict(self)
