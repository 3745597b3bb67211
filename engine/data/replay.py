"""The self-play replay window: one durable shard file per finished game, the newest ``window`` games kept, and the
samplers that draw training positions from them with the search's visit distribution as the policy target, one
board size per batch.

Layer: above shards and records; numpy only. Each game is a regular ``engine.data.shards`` shard (moves and result, so
``PositionSampler`` and ``tabula train`` read it as-is) whose header carries the self-play extras under ``"replay"``:
the search's visit counts at each recorded move (sparse: the visited moves and their counts, uint16 each), the root
value the mover saw at every move (float16, for resignation calibration) and how the game ended.

Durability: a game is written to a temporary file, fsynced, renamed into place and the directory fsynced
(``write_shard`` plus one directory fsync), so a kill at any moment leaves either the whole game or nothing but a
``*.tmp*`` file, which readers ignore and the next writer removes. One process writes (an exclusive ``flock``);
any number may read.
"""
from __future__ import annotations

import base64
import fcntl
import json
import lzma
import math
import os
import struct
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from tabula.engine.data.records import DRAW, OTHER, RESIGN, SCORE, Record, area_labels
from tabula.engine.data.shards import MAGIC, SUFFIX, Batch, PositionSampler, ShardError, write_shard
from tabula.engine.net.features import NUM_SYMMETRIES, symmetry_tables, transform_planes
from tabula.engine.rules.coords import BLACK, WHITE
from tabula.engine.rules.games import GameSpec

PREFIX = "train-"  # the supervised trainer's split name: the window directory is a shard directory
REPLAY_VERSION = 1
LOCK = ".writer.lock"


@dataclass
class SelfPlayGame:
    """One finished self-play game and its training targets.

    ``moves``: (colour, flat move or PASS). ``targets[i]``: the visit distribution of the search before move ``i`` as
    (policy indices int [k], pass = N*N; visits int [k]), or None where the move is no policy target (a fast search
    under playout-cap randomization). ``values[i]``: the search's value of move ``i`` from the mover's view, in
    [-1, 1]. ``winner``: BLACK, WHITE or 0 (draw). ``game``: which game (Go, or gomoku and its n in a row).
    ``setup``: (colour, point) of the stones placed before the first move (handicap stones, white moving first),
    ``handicap`` their number; ``komi`` the game's own (self-play may draw it per game).
    """

    size: int
    komi: float
    moves: list[tuple[int, int]]
    targets: list[tuple[np.ndarray, np.ndarray] | None]
    values: list[float]
    winner: int
    result: str  # SGF RE, e.g. "B+R", "W+3.5"
    resign_enabled: bool = True  # False in the games that calibrate the resignation threshold
    resign_threshold: float = 0.0  # winrate threshold the game was played with (0: none)
    net: str = ""  # the network that played it
    seconds: float = 0.0  # wall time of the game
    extra: dict = field(default_factory=dict)
    game: GameSpec = field(default_factory=GameSpec)
    setup: list[tuple[int, int]] = field(default_factory=list)
    handicap: int = 0

    def record(self, name: str = "") -> Record:
        """The game as the trainer's shards keep it. A game counted at its end (not resigned) also gives the
        auxiliary heads their targets: self-play counts Tromp-Taylor, so the final position's area owners and
        margin are exact, dead stones and all (the search captures them before passing). A game that is not
        scored in points (gomoku) has its result alone."""
        kind = RESIGN if self.result.endswith("+R") else DRAW if self.winner == 0 else \
            SCORE if self.game.scored else OTHER
        record = Record(name=name, size=self.size, komi=self.komi, moves=list(self.moves), setup=list(self.setup),
                        handicap=self.handicap, winner=self.winner, result_kind=kind, value_weight=1.0)
        if kind != RESIGN and self.game.scored:
            record.ownership = area_labels(record.replay().board)
            record.margin = float(record.ownership.sum()) - self.komi
        return record

    @property
    def num_targets(self) -> int:
        return sum(t is not None for t in self.targets)


# -- encoding the extras in a shard header ------------------------------------------------------------------------


def _encode_extras(game: SelfPlayGame) -> dict:
    n = len(game.moves)
    if len(game.targets) != n or len(game.values) != n:
        raise ValueError("a target and a value are needed for every move")
    counts = np.zeros(n, dtype=np.uint16)
    index_parts, visit_parts = [], []
    for i, target in enumerate(game.targets):
        if target is None:
            continue
        moves, visits = np.asarray(target[0]), np.asarray(target[1])
        keep = visits > 0
        counts[i] = int(keep.sum())
        index_parts.append(moves[keep].astype(np.uint16))
        visit_parts.append(np.minimum(visits[keep], 65535).astype(np.uint16))
    index = np.concatenate(index_parts) if index_parts else np.zeros(0, np.uint16)
    visits = np.concatenate(visit_parts) if visit_parts else np.zeros(0, np.uint16)
    values = np.asarray(game.values, dtype=np.float16)
    blob = counts.astype("<u2").tobytes() + index.astype("<u2").tobytes() + visits.astype("<u2").tobytes() \
        + values.astype("<f2").tobytes()
    return {"game": game.game.to_dict(),
            "replay": {"version": REPLAY_VERSION, "moves": n, "entries": int(len(index)),
                       "arrays": base64.b64encode(lzma.compress(blob, preset=6)).decode("ascii"),
                       "result": game.result, "resign_enabled": game.resign_enabled,
                       "resign_threshold": game.resign_threshold, "net": game.net,
                       "seconds": round(game.seconds, 3), **game.extra}}


def _decode_extras(meta: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(counts uint16 [moves] (0: no target), indices uint16 [E], visits uint16 [E], values float32 [moves])."""
    if meta.get("version") != REPLAY_VERSION:
        raise ShardError(f"replay extras version {meta.get('version')}, this reader knows {REPLAY_VERSION}")
    n, e = int(meta["moves"]), int(meta["entries"])
    blob = lzma.decompress(base64.b64decode(meta["arrays"]))
    if len(blob) != 2 * n + 4 * e + 2 * n:
        raise ShardError("replay arrays have the wrong length")
    counts = np.frombuffer(blob, "<u2", n, 0)
    index = np.frombuffer(blob, "<u2", e, 2 * n)
    visits = np.frombuffer(blob, "<u2", e, 2 * n + 2 * e)
    values = np.frombuffer(blob, "<f2", n, 2 * n + 4 * e).astype(np.float32)
    return counts, index, visits, values


def read_header(path: str) -> dict:
    """A shard's JSON header only (cheap: the compressed arrays are not read)."""
    with open(path, "rb") as handle:
        start = handle.read(12)
        if start[:8] != MAGIC:
            raise ShardError(f"{path}: not a Tabula shard")
        (length,) = struct.unpack_from("<I", start, 8)
        return json.loads(handle.read(length))


def read_game(path: str) -> SelfPlayGame:
    """A game back from its file (moves from the shard, targets and values from the header)."""
    from tabula.engine.data.shards import decode_move, read_shard

    header, games, codes = read_shard(path)
    meta = header.get("replay")
    if meta is None:
        raise ShardError(f"{path}: a shard without self-play targets")
    size = header["size"]
    row = games[0]
    first = int(row["offset"]) + int(row["setup"])
    setup = [decode_move(int(c), size) for c in codes[int(row["offset"]):first]]
    moves = [decode_move(int(c), size) for c in codes[first:]]
    counts, index, visits, values = _decode_extras(meta)
    targets: list[tuple[np.ndarray, np.ndarray] | None] = []
    at = 0
    for count in counts.tolist():
        targets.append((index[at:at + count].astype(np.int64), visits[at:at + count].astype(np.int64))
                       if count else None)
        at += count
    return SelfPlayGame(size=size, komi=float(row["komi"]), moves=moves, targets=targets, values=values.tolist(),
                        winner=int(row["winner"]), result=meta["result"], resign_enabled=meta["resign_enabled"],
                        resign_threshold=meta["resign_threshold"], net=meta.get("net", ""),
                        seconds=meta.get("seconds", 0.0), game=GameSpec.from_dict(header.get("game")), setup=setup,
                        handicap=int(row["handicap"]))


# -- the store ------------------------------------------------------------------------------------------------------


def _sequence(name: str) -> int | None:
    if not (name.startswith(PREFIX) and name.endswith(SUFFIX)):
        return None
    try:
        return int(name[len(PREFIX):-len(SUFFIX)])
    except ValueError:
        return None


def game_files(directory: str) -> list[tuple[int, str]]:
    """(sequence number, path) of every finished game in ``directory``, oldest first; temporary files excluded."""
    if not os.path.isdir(directory):
        return []
    found = [(seq, os.path.join(directory, name)) for name in os.listdir(directory)
             if (seq := _sequence(name)) is not None]
    return sorted(found)


def _fsync_directory(directory: str) -> None:
    handle = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


class ReplayStore:
    """The newest ``window`` self-play games, one shard file each, in ``directory``.

    Games are numbered 0, 1, ... in the order they were appended; the numbers never restart, so ``total`` counts
    every game ever played. Opening for writing takes an exclusive lock, removes temporary files left by a kill and
    evicts games older than the window. ``window`` 0 keeps everything. ``first``: the number the next game gets at
    least (a run whose games were lost with its machine goes on numbering where it was).
    """

    def __init__(self, directory: str, window: int, writable: bool = True, first: int = 0):
        self.directory = directory
        self.window = window
        self._lock_handle = None
        os.makedirs(directory, exist_ok=True)
        if writable:
            self._lock_handle = open(os.path.join(directory, LOCK), "a")
            try:
                fcntl.flock(self._lock_handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self._lock_handle.close()
                raise RuntimeError(f"{directory}: another process is writing this replay store") from None
            for name in os.listdir(directory):
                if ".tmp" in name:  # write_shard's temporary file, cut short by a kill
                    os.remove(os.path.join(directory, name))
        files = game_files(directory)
        self._next = max(files[-1][0] + 1 if files else 0, first)
        if writable:
            self._evict()

    def close(self) -> None:
        if self._lock_handle is not None:
            self._lock_handle.close()
            self._lock_handle = None

    def __enter__(self) -> "ReplayStore":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def total(self) -> int:
        """Games appended since the store was created, evicted ones included."""
        return self._next

    def append(self, game: SelfPlayGame) -> str:
        """Write one game durably, then evict beyond the window; returns its path."""
        if self._lock_handle is None:
            raise RuntimeError("the store was opened read-only")
        seq = self._next
        path = os.path.join(self.directory, f"{PREFIX}{seq:09d}{SUFFIX}")
        write_shard(path, [game.record(f"selfplay-{seq}")], size=game.size, extra=_encode_extras(game))
        _fsync_directory(self.directory)  # the rename itself survives a power cut
        self._next = seq + 1
        self._evict()
        return path

    def _evict(self) -> None:
        if self.window <= 0:
            return
        files = game_files(self.directory)
        for _, path in files[:max(0, len(files) - self.window)]:
            os.remove(path)

    def paths(self) -> list[str]:
        """The window's files, oldest first."""
        files = game_files(self.directory)
        if self.window > 0:
            files = files[-self.window:]
        return [path for _, path in files]

    def games(self) -> list[SelfPlayGame]:
        return [read_game(path) for path in self.paths()]


# -- training positions -----------------------------------------------------------------------------------------


class ReplaySampler(PositionSampler):
    """``PositionSampler`` over self-play games that draws only recorded positions, uniformly, with a policy target
    drawn from the search's visit distribution.

    A one-hot target drawn from π each time a position is drawn has the cross-entropy of π as its expectation, so
    the supervised trainer's loss and metrics apply unchanged (top-1 then counts agreement with a draw from π).
    Same constructor as ``PositionSampler`` (a list of shard paths, of one board size), so the trainer can build
    either. ``require_targets``: refuse a window without recorded positions (``MixedSizeSampler`` drops the sizes
    that have none instead). ``komi_spread``: each counted game's positions seen at a komi moved by a normal draw of
    that many points, as ``PositionSampler`` moves records' (self-play draws each game's komi from a few points
    around the fair one, too few games at each komi to show what a point is worth).
    """

    def __init__(self, paths: Iterable[str], require_targets: bool = True, komi_spread: float = 0.0,
                 moved_value: bool = True):
        paths = list(paths)
        super().__init__(paths, komi_spread=komi_spread, moved_value=moved_value)
        offsets, indices, visits, positions = [0], [], [], []
        first_position = 0
        for game, path in enumerate(paths):
            meta = read_header(path).get("replay")
            if meta is None or len(self.games) != len(paths):
                raise ShardError(f"{path}: not a self-play game file (one game with replay targets)")
            moves = int(self.games[game]["moves"])
            counts, index, visit, _ = _decode_extras(meta)
            recorded = np.flatnonzero(counts > 0)
            positions.append(first_position + recorded)
            ends = np.cumsum(counts.astype(np.int64))
            starts = ends - counts
            for i in recorded.tolist():
                indices.append(index[starts[i]:ends[i]])
                visits.append(visit[starts[i]:ends[i]])
                offsets.append(offsets[-1] + int(counts[i]))
            first_position += moves
        self.target_positions = np.concatenate(positions).astype(np.int64) if positions else np.zeros(0, np.int64)
        self._target_offsets = np.asarray(offsets, dtype=np.int64)
        self._target_moves = np.concatenate(indices).astype(np.int64) if indices else np.zeros(0, np.int64)
        self._target_visits = np.concatenate(visits).astype(np.float64) if visits else np.zeros(0)
        if require_targets and len(self.target_positions) == 0:
            raise ShardError("the window holds no recorded positions")

    @property
    def num_targets(self) -> int:
        return len(self.target_positions)

    def policy_target(self, target: int) -> tuple[np.ndarray, np.ndarray]:
        """(policy indices int64 [k], probabilities float64 [k]) of recorded position number ``target``."""
        begin, end = self._target_offsets[target], self._target_offsets[target + 1]
        visits = self._target_visits[begin:end]
        return self._target_moves[begin:end], visits / visits.sum()

    def batch(self, rng: np.random.Generator, batch_size: int, symmetries: bool = True,
              positions: np.ndarray | None = None) -> Batch:
        """``batch_size`` recorded positions drawn uniformly (``positions``: indices into the recorded positions),
        each with a policy target drawn from its π and under a random symmetry."""
        chosen = rng.integers(0, self.num_targets, size=batch_size) if positions is None else np.asarray(positions)
        plain = super().batch(rng, len(chosen), symmetries=False, positions=self.target_positions[chosen])
        policy = np.empty(len(chosen), dtype=np.int64)
        for row, target in enumerate(chosen.tolist()):
            moves, probabilities = self.policy_target(target)
            policy[row] = moves[rng.choice(len(moves), p=probabilities)]
        planes, reply, ownership = plain.planes, plain.reply, plain.ownership
        if symmetries:
            symmetry = rng.integers(0, NUM_SYMMETRIES, size=len(chosen))
            planes = transform_planes(planes, symmetry)
            inverse = symmetry_tables(self.size)[1]  # as PositionSampler.batch does
            policy = inverse[symmetry, policy]
            reply = inverse[symmetry, reply]
            ownership = transform_planes(ownership.reshape(len(chosen), 1, self.size, self.size),
                                         symmetry).reshape(len(chosen), -1)
        return Batch(planes=np.ascontiguousarray(planes, dtype=np.float32), policy=policy, value=plain.value,
                     value_weight=plain.value_weight, reply=reply, reply_weight=plain.reply_weight,
                     score=plain.score, score_weight=plain.score_weight, ownership=np.ascontiguousarray(ownership),
                     ownership_weight=plain.ownership_weight, komi=plain.komi)


class MixedSizeSampler:
    """The trainer's sampler over a window of games of one or more board sizes. A batch is one tensor, so one
    size: each batch draws its size in proportion to the recorded positions of each size in the window, then its
    positions within that size as ``ReplaySampler`` does (uniformly, a target from π, a random symmetry), with
    every auxiliary target. With one size its batches are exactly ``ReplaySampler``'s: no draw is spent on the
    size. Built, like ``PositionSampler``, from a list of shard paths; has what the trainer reads of one.
    ``komi_spread``, ``moved_value``: as ``ReplaySampler``'s (``PositionSampler``'s)."""

    def __init__(self, paths: Iterable[str], komi_spread: float = 0.0, moved_value: bool = True):
        by_size: dict[int, list[str]] = {}
        for path in paths:
            by_size.setdefault(int(read_header(path)["size"]), []).append(path)
        built = {size: ReplaySampler(group, require_targets=False, komi_spread=komi_spread, moved_value=moved_value)
                 for size, group in sorted(by_size.items())}
        self.samplers: dict[int, ReplaySampler] = {size: s for size, s in built.items() if s.num_targets > 0}
        if not self.samplers:
            raise ShardError("the window holds no recorded positions")
        if len({s.game for s in built.values()}) > 1:
            raise ShardError(f"the window holds games of {sorted({s.game.name for s in built.values()})}")
        self.game = next(iter(self.samplers.values())).game  # the window's one game (engine.rules.games)
        self.sizes = list(self.samplers)
        targets = np.array([s.num_targets for s in self.samplers.values()], dtype=np.float64)
        self.size_probabilities = targets / targets.sum()
        # The trainer's NetSpec.board_size: several sizes need the pooled head, whose weights do not depend on it.
        self.size = self.sizes[0]
        self.num_games = sum(s.num_games for s in built.values())
        self.num_positions = sum(s.num_positions for s in built.values())

    @property
    def num_targets(self) -> int:
        return sum(self.targets_by_size.values())

    @property
    def targets_by_size(self) -> dict[int, int]:
        """Recorded positions of each board size in the window (the sizes that have any)."""
        return {size: s.num_targets for size, s in self.samplers.items()}

    def batch(self, rng: np.random.Generator, batch_size: int, symmetries: bool = True) -> Batch:
        """``batch_size`` recorded positions of one board size, the size drawn in proportion to its positions."""
        index = 0 if len(self.sizes) == 1 else int(rng.choice(len(self.sizes), p=self.size_probabilities))
        return self.samplers[self.sizes[index]].batch(rng, batch_size, symmetries)

    def batch_for_step(self, seed: int, step: int, batch_size: int, symmetries: bool = True) -> Batch:
        """The batch of training step ``step``: a pure function of (seed, step) and the window."""
        return self.batch(np.random.default_rng([seed, step]), batch_size, symmetries)


class AnchoredSampler:
    """A window's sampler (``MixedSizeSampler``) with a share of its batches drawn from record shards instead
    (``PositionSampler``, e.g. the 19×19 records a network was trained on): fine-tuning on small-board self-play then
    keeps seeing the records' positions and results, so what the network shares across sizes (the value head) is not
    pulled away from them. A batch is the anchor's with probability ``fraction``, drawn from the step's own random
    stream, so a batch is still a pure function of (seed, step) and the data. ``komi_spread`` moves the komi of
    the counted games of both (``PositionSampler``): records at their recorded komi alone are mostly resigned games,
    which would teach a network that sees the komi that its usual values mean a decided game."""

    def __init__(self, window_paths: Iterable[str], anchor_paths: Iterable[str], fraction: float,
                 komi_spread: float = 0.0, moved_value: bool = True):
        if not 0.0 <= fraction < 1.0:
            raise ValueError(f"anchor fraction {fraction}: needs 0 <= fraction < 1")
        self.window = MixedSizeSampler(window_paths, komi_spread=komi_spread, moved_value=moved_value)
        self.anchor = PositionSampler(anchor_paths, komi_spread=komi_spread, moved_value=moved_value)
        if self.anchor.game != self.window.game:
            raise ShardError(f"anchor records of {self.anchor.game.name} for a window of {self.window.game.name}")
        self.game = self.window.game
        self.fraction = fraction
        self.size = self.window.size
        self.num_games = self.window.num_games + self.anchor.num_games
        self.num_positions = self.window.num_positions + self.anchor.num_positions

    @property
    def targets_by_size(self) -> dict[int, int]:
        return self.window.targets_by_size

    def batch(self, rng: np.random.Generator, batch_size: int, symmetries: bool = True) -> Batch:
        if rng.random() < self.fraction:
            return self.anchor.batch(rng, batch_size, symmetries)
        return self.window.batch(rng, batch_size, symmetries)

    def batch_for_step(self, seed: int, step: int, batch_size: int, symmetries: bool = True) -> Batch:
        return self.batch(np.random.default_rng([seed, step]), batch_size, symmetries)


def games_by_size(games: Iterable[SelfPlayGame]) -> dict[int, dict]:
    """Per board size, smallest first: {"games": count, "black_wins": the share of them black won} (self-play's
    first-move bias, which the value targets inherit)."""
    counts: dict[int, list[int]] = {}
    for game in games:
        count = counts.setdefault(game.size, [0, 0])
        count[0] += 1
        count[1] += game.winner == BLACK
    return {size: {"games": n, "black_wins": black / n} for size, (n, black) in sorted(counts.items())}


# -- resignation calibration (AlphaGo Zero's false-positive rule) -----------------------------------------------


def resign_trigger(game: SelfPlayGame, color: int, consecutive: int, skip_moves: int) -> float:
    """The lowest winrate threshold at which ``color`` would NOT have resigned this game: the minimum over every
    run of ``consecutive`` of its moves (after the first ``skip_moves`` moves of the game) of the run's highest
    winrate. A player with rule (winrate < t for ``consecutive`` moves in a row) resigns iff trigger < t.
    Returns 1.0 when the player never had ``consecutive`` moves to judge (no threshold would resign)."""
    own = [(v + 1.0) / 2.0 for i, ((c, _), v) in enumerate(zip(game.moves, game.values))
           if c == color and i >= skip_moves]
    k = max(1, consecutive)
    if len(own) < k:
        return 1.0
    return float(min(max(own[i:i + k]) for i in range(len(own) - k + 1)))


def calibrate_resign_threshold(triggers: Sequence[float], max_false_positive: float = 0.05,
                               min_games: int = 20, ceiling: float = 0.5) -> float:
    """The highest winrate threshold under which fewer than ``max_false_positive`` of the winners would have
    resigned, from the winners' ``resign_trigger`` in games played without resignation. 0 (never resign) until
    ``min_games`` such games exist; never above ``ceiling``."""
    if len(triggers) < min_games:
        return 0.0
    ordered = np.sort(np.asarray(triggers, dtype=np.float64))
    allowed = math.ceil(max_false_positive * len(ordered) - 1e-9) - 1  # most winners that may fall below: < rate·n
    if allowed < 0:
        return 0.0
    # t = ordered[allowed]: only values strictly below it (at most ``allowed`` of them) would resign.
    return float(min(ordered[allowed], ceiling))


def false_positive_rate(triggers: Sequence[float], threshold: float) -> float:
    """Share of winners (by their ``resign_trigger``) who would have resigned at ``threshold``."""
    if not len(triggers):
        return 0.0
    return float(np.mean(np.asarray(triggers) < threshold))


def winner_triggers(games: Iterable[SelfPlayGame], consecutive: int, skip_fraction: float = 0.25) -> list[float]:
    """``resign_trigger`` of the winner of every decided game played without resignation."""
    found = []
    for game in games:
        if game.resign_enabled or game.winner not in (BLACK, WHITE):
            continue
        found.append(resign_trigger(game, game.winner, consecutive, int(skip_fraction * game.size * game.size)))
    return found


__all__ = ["SelfPlayGame", "ReplayStore", "ReplaySampler", "MixedSizeSampler", "AnchoredSampler", "games_by_size",
           "read_game", "read_header", "game_files", "resign_trigger", "calibrate_resign_threshold",
           "false_positive_rate", "winner_triggers"]
