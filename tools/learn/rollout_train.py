"""`tabula train --model rollout`: the rollout policy's pattern weights from prepared shards, by softmax regression.

Reads the games of `tabula prepare` shards (DIR/train-*.tshard to learn, DIR/val-*.tshard to validate; several
directories separated by commas, as for the network), replays them many at once through ``engine.rollout.patterns``
and keeps every position's features in memory (about 2 KB a position). Patterns and response patterns seen at least
``--min-count`` times among the candidate moves get their own weight; rarer ones share one "unknown" weight. Adam on
the mean cross-entropy of the move played (passes are not targets: a rollout passes only when nothing is left),
L2 on the weights, a cosine learning rate. Writes OUT/config.json, OUT/metrics.jsonl and OUT/rollout.npz (and a copy
at ``--weights``), whose metadata carries the held-out figures.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, fields
from typing import Iterable, Iterator

import numpy as np

from tabula.engine.data.records import RecordFilter, iter_records
from tabula.engine.data.shards import decode_move, read_shard, shard_paths
from tabula.engine.rollout.patterns import NEAR_BUCKET, NUM_CODES, NUM_DISTANCES, Features, features, pattern_geometry
from tabula.engine.rollout.policy import RolloutWeights
from tabula.engine.rules.board import Board
from tabula.engine.rules.coords import PASS
from tabula.engine.rules.playout import LibertyStates


@dataclass(frozen=True)
class RolloutTrainConfig:
    """One training run of the rollout policy; saved as config.json in the run directory."""

    data: str  # directories written by `tabula prepare`, separated by commas
    out: str  # run directory
    max_games: int = 0  # training games read (0: all of them)
    max_val_games: int = 500  # held-out games read (0: all of them)
    epochs: int = 2
    batch: int = 1024  # positions per step
    lr: float = 0.02  # Adam's peak step; cosine down to 0
    l2: float = 1e-6  # L2 penalty on every weight, per position
    min_count: int = 20  # candidate occurrences a pattern needs for a weight of its own
    lanes: int = 64  # games replayed at once while reading
    seed: int = 1
    weights: str = ""  # also write the weights here, e.g. weights/rollout-patterns.npz

    def to_dict(self) -> dict:
        return asdict(self)


def parse_args(argv: list[str]) -> RolloutTrainConfig:
    parser = argparse.ArgumentParser(prog="tabula train --model rollout", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="directories of shards from `tabula prepare`, comma-separated")
    parser.add_argument("--out", required=True, help="run directory (created)")
    for item in fields(RolloutTrainConfig):
        if item.name not in ("data", "out"):
            parser.add_argument("--" + item.name.replace("_", "-"), type=type(item.default), default=item.default)
    return RolloutTrainConfig(**vars(parser.parse_args(argv)))


# -- positions from shards ------------------------------------------------------------------------------------------


def shard_games(paths: Iterable[str], max_games: int = 0) -> Iterator[tuple[int, list[tuple[int, int]],
                                                                            list[tuple[int, int]]]]:
    """(size, setup [(colour, point)], moves [(colour, flat or PASS)]) of each game of the shards, in order."""
    count = 0
    for path in paths:
        header, games, moves = read_shard(path)
        size = header["size"]
        for game in games:
            if max_games and count >= max_games:
                return
            start, setup, played = int(game["offset"]), int(game["setup"]), int(game["moves"])
            codes = moves[start: start + setup + played].tolist()
            decoded = [decode_move(code, size) for code in codes]
            yield size, decoded[:setup], decoded[setup:]
            count += 1


@dataclass
class Examples:
    """Positions and the move played in each (``target``, flat); features as ``engine.rollout.patterns.Features``."""

    pattern: np.ndarray  # int32 [E, N*N]
    tactics: np.ndarray  # uint8 [E, N*N]
    response: np.ndarray  # int64 [E, 12]
    previous: np.ndarray  # int64 [E]
    own_previous: np.ndarray  # int64 [E]
    target: np.ndarray  # int64 [E]
    passes: int = 0  # positions whose move was a pass (no example)

    def __len__(self) -> int:
        return len(self.target)

    def features(self, rows: np.ndarray | slice) -> Features:
        return Features(self.pattern[rows], self.tactics[rows], self.response[rows], self.previous[rows],
                        self.own_previous[rows])


def extract(games: Iterable[tuple[int, list, list]], lanes: int = 64, log=None) -> Examples:
    """The features of every position of ``games`` (one board size) before each move that is not a pass."""
    chunks: dict[str, list[np.ndarray]] = {name: [] for name in ("pattern", "tactics", "response", "previous",
                                                                 "own_previous", "target")}
    source = iter(games)
    slots: list[list] = []  # [board, moves, next index, previous, own previous]
    passes = 0
    started, read, steps = time.time(), 0, 0

    def refill() -> None:
        nonlocal read
        while len(slots) < lanes:
            try:
                size, setup, moves = next(source)
            except StopIteration:
                return
            board = Board(size)
            for color, point in setup:
                board.place_setup_stone(board.geometry.padded[point], color)
            slots.append([LibertyStates(board), moves, 0, -1, -1])
            read += 1

    refill()
    while slots:
        asking = [slot for slot in slots if slot[1][slot[2]][1] != PASS]
        passes += len(slots) - len(asking)
        if asking:
            batch = features([s[0] for s in asking], [s[1][s[2]][0] for s in asking], [s[3] for s in asking],
                             [s[4] for s in asking])
            chunks["pattern"].append(batch.pattern)
            chunks["tactics"].append(batch.tactics)
            chunks["response"].append(batch.response)
            chunks["previous"].append(batch.previous)
            chunks["own_previous"].append(batch.own_previous)
            chunks["target"].append(np.array([s[1][s[2]][1] for s in asking], dtype=np.int64))
        for slot in slots:
            run, moves, k = slot[0], slot[1], slot[2]
            color, move = moves[k]
            if move == PASS:
                run.board.ko = 0
            else:
                run.play(run.board.geometry.padded[move], color)
            slot[2], slot[3], slot[4] = k + 1, (move if move != PASS else -1), slot[3]
        slots[:] = [slot for slot in slots if slot[2] < len(slot[1])]
        refill()
        steps += 1
        if log and steps % 2000 == 0:
            log(f"read {read} games, {sum(len(t) for t in chunks['target'])} positions, {time.time() - started:.0f} s")
    if not chunks["target"]:
        raise ValueError("no positions: the shards hold no moves")
    joined = {name: np.concatenate(parts) for name, parts in chunks.items()}
    return Examples(**joined, passes=passes)


# -- the softmax --------------------------------------------------------------------------------------------------


class Layout:
    """Where each weight lies in the parameter vector (``RolloutWeights.vector``'s order)."""

    def __init__(self, patterns: int, responses: int):
        self.patterns, self.responses = patterns, responses
        self.unknown_pattern = patterns + responses
        self.unknown_response = self.unknown_pattern + 1
        self.self_atari = self.unknown_pattern + 2
        self.save_atari = self.unknown_pattern + 3
        self.distance_previous = self.unknown_pattern + 4
        self.distance_own = self.distance_previous + NUM_DISTANCES
        self.size = self.distance_own + NUM_DISTANCES


@dataclass
class Indexed:
    """Examples with each feature replaced by its parameter's index (-1: no candidate, or not in the diamond)."""

    pattern: np.ndarray  # int32 [E, N*N]
    tactics: np.ndarray  # uint8 [E, N*N]
    response: np.ndarray  # int32 [E, 12]
    previous: np.ndarray
    own_previous: np.ndarray
    target: np.ndarray
    learnable: np.ndarray  # bool [E]: the move played is a candidate

    def __len__(self) -> int:
        return len(self.target)


def vocabulary(examples: Examples, min_count: int) -> tuple[np.ndarray, np.ndarray]:
    """(pattern codes, response keys) seen at least ``min_count`` times among the candidates, sorted."""
    counts = np.bincount(examples.pattern[examples.pattern >= 0], minlength=NUM_CODES)
    codes = np.flatnonzero(counts >= min_count).astype(np.int32)
    keys, key_counts = np.unique(examples.response[examples.response >= 0], return_counts=True)
    return codes, keys[key_counts >= min_count].astype(np.int64)


def index(examples: Examples, codes: np.ndarray, keys: np.ndarray) -> Indexed:
    layout = Layout(len(codes), len(keys))
    mapping = np.full(NUM_CODES, layout.unknown_pattern, dtype=np.int32)
    mapping[codes] = np.arange(len(codes), dtype=np.int32)
    pattern = np.where(examples.pattern >= 0, mapping[np.maximum(examples.pattern, 0)], -1).astype(np.int32)
    at = np.minimum(np.searchsorted(keys, examples.response), max(len(keys) - 1, 0))
    known = (keys[at] == examples.response) if len(keys) else np.zeros(examples.response.shape, bool)
    response = np.where(examples.response < 0, -1,
                        np.where(known, layout.patterns + at, layout.unknown_response)).astype(np.int32)
    rows = np.arange(len(examples))
    learnable = pattern[rows, examples.target] >= 0
    return Indexed(pattern, examples.tactics, response, examples.previous, examples.own_previous, examples.target,
                   learnable)


def batch_logits(vector: np.ndarray, layout: Layout, data: Indexed, rows: np.ndarray) -> np.ndarray:
    """float64 [b, N*N]: the logits of the candidates of positions ``rows``, -inf elsewhere (as ``policy.logits``)."""
    pattern = data.pattern[rows]
    tactics = data.tactics[rows]
    count, points = pattern.shape
    near = pattern_geometry(int(round(points ** 0.5))).near_flat
    z = np.zeros((count, points + 1))
    z[:, :points] = (vector[np.maximum(pattern, 0)] + vector[layout.self_atari] * (tactics & 1)
                     + vector[layout.save_atari] * (tactics >> 1 & 1))
    for moves, base in ((data.previous[rows], layout.distance_previous),
                        (data.own_previous[rows], layout.distance_own)):
        has = np.flatnonzero(moves >= 0)
        z[has[:, None], near[moves[has]]] += vector[base + NEAR_BUCKET]
    previous = data.previous[rows]
    has = np.flatnonzero(previous >= 0)
    response = data.response[rows][has]
    z[has[:, None], near[previous[has], :12]] += np.where(response >= 0, vector[np.maximum(response, 0)], 0.0)
    return np.where(pattern >= 0, z[:, :points], -np.inf)


def loss_and_gradient(vector: np.ndarray, layout: Layout, data: Indexed, rows: np.ndarray,
                      l2: float) -> tuple[float, np.ndarray]:
    """Mean cross-entropy of the moves played at ``rows`` (learnable positions only) plus the L2 term, and its
    gradient."""
    z = batch_logits(vector, layout, data, rows)
    count, points = z.shape
    z -= z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    targets = data.target[rows]
    loss = -float(np.mean(np.log(p[np.arange(count), targets] + 1e-30)))
    g = p
    g[np.arange(count), targets] -= 1.0
    g /= count
    pattern = data.pattern[rows]
    tactics = data.tactics[rows]
    candidate = pattern >= 0
    gradient = np.bincount(pattern[candidate], weights=g[candidate], minlength=layout.size)
    gradient[layout.self_atari] += float(np.sum(g * (tactics & 1)))
    gradient[layout.save_atari] += float(np.sum(g * (tactics >> 1 & 1)))
    extended = np.concatenate([g, np.zeros((count, 1))], axis=1)
    near = pattern_geometry(int(round(points ** 0.5))).near_flat
    for moves, base in ((data.previous[rows], layout.distance_previous),
                        (data.own_previous[rows], layout.distance_own)):
        has = np.flatnonzero(moves >= 0)
        summed = extended[has[:, None], near[moves[has]]].sum(axis=0)
        gradient[base: base + NUM_DISTANCES] += np.bincount(NEAR_BUCKET, weights=summed, minlength=NUM_DISTANCES)
    previous = data.previous[rows]
    has = np.flatnonzero(previous >= 0)
    response = data.response[rows][has]
    local = extended[has[:, None], near[previous[has], :12]]
    mask = response >= 0
    gradient += np.bincount(response[mask], weights=local[mask], minlength=layout.size)
    gradient += l2 * vector
    return loss + 0.5 * l2 * float(vector @ vector), gradient


def evaluate(vector: np.ndarray, layout: Layout, data: Indexed, chunk: int = 2048) -> dict:
    """Top-1 accuracy over every position (a move that is no candidate counts as a miss), and the mean
    cross-entropy over the learnable ones."""
    hits, losses = 0, []
    for start in range(0, len(data), chunk):
        rows = np.arange(start, min(start + chunk, len(data)))
        z = batch_logits(vector, layout, data, rows)
        hits += int(np.sum(np.argmax(z, axis=1) == data.target[rows]))
        learn = rows[data.learnable[rows]]
        if len(learn):
            losses.append(loss_and_gradient(vector, layout, data, learn, 0.0)[0] * len(learn))
    learnable = int(data.learnable.sum())
    return {"positions": len(data), "top1": hits / max(len(data), 1), "learnable": learnable,
            "loss": sum(losses) / max(learnable, 1)}


def fit(data: Indexed, layout: Layout, config: RolloutTrainConfig, log=print, val: Indexed | None = None,
        metrics_path: str | None = None) -> np.ndarray:
    """Adam over the learnable positions; returns the parameter vector."""
    rng = np.random.default_rng(config.seed)
    vector = np.zeros(layout.size)
    m, v = np.zeros_like(vector), np.zeros_like(vector)
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    learn = np.flatnonzero(data.learnable)
    steps_per_epoch = max(1, len(learn) // config.batch)
    total = steps_per_epoch * config.epochs
    step = 0
    started = time.time()
    for epoch in range(config.epochs):
        order = rng.permutation(learn)
        running = []
        for i in range(steps_per_epoch):
            rows = np.sort(order[i * config.batch: (i + 1) * config.batch])
            loss, gradient = loss_and_gradient(vector, layout, data, rows, config.l2)
            lr = config.lr * 0.5 * (1.0 + math.cos(math.pi * step / total))
            step += 1
            m = beta1 * m + (1 - beta1) * gradient
            v = beta2 * v + (1 - beta2) * gradient * gradient
            vector -= lr * (m / (1 - beta1 ** step)) / (np.sqrt(v / (1 - beta2 ** step)) + eps)
            running.append(loss)
            if step % 200 == 0 or step == total:
                record = {"step": step, "epoch": epoch, "loss": float(np.mean(running)), "lr": lr,
                          "seconds": round(time.time() - started, 1)}
                running = []
                if val is not None and (step % 1000 == 0 or step == total):
                    record.update({f"val_{k}": x for k, x in evaluate(vector, layout, val).items()})
                log(json.dumps(record))
                if metrics_path:
                    with open(metrics_path, "a") as handle:
                        handle.write(json.dumps(record) + "\n")
    return vector


def weights_from(vector: np.ndarray, codes: np.ndarray, keys: np.ndarray, metadata: dict) -> RolloutWeights:
    template = RolloutWeights(codes, np.zeros(len(codes), np.float32), keys, np.zeros(len(keys), np.float32),
                              metadata=metadata)
    return template.with_vector(vector)


def train(config: RolloutTrainConfig, argv: list[str], log=print) -> dict:
    os.makedirs(config.out, exist_ok=True)
    with open(os.path.join(config.out, "config.json"), "w") as handle:
        json.dump(config.to_dict(), handle, indent=2)
    metrics_path = os.path.join(config.out, "metrics.jsonl")
    if os.path.exists(metrics_path):
        os.remove(metrics_path)
    directories = [d for d in config.data.split(",") if d]
    train_paths = [p for d in directories for p in shard_paths(d, "train")]
    val_paths = [p for d in directories for p in shard_paths(d, "val")]
    if not train_paths:
        raise SystemExit(f"tabula train --model rollout: no train-*.tshard in {config.data}")
    started = time.time()
    examples = extract(shard_games(train_paths, config.max_games), config.lanes, log)
    read_s = time.time() - started
    log(f"training positions {len(examples)} (and {examples.passes} passes) read in {read_s:.0f} s")
    codes, keys = vocabulary(examples, config.min_count)
    data = index(examples, codes, keys)
    del examples
    layout = Layout(len(codes), len(keys))
    log(f"{len(codes)} patterns, {len(keys)} response patterns with {config.min_count}+ occurrences; "
        f"{int(data.learnable.sum())} of {len(data)} moves played are candidates")
    val = None
    if val_paths:
        held = extract(shard_games(val_paths, config.max_val_games), config.lanes)
        val = index(held, codes, keys)
        log(f"held-out positions {len(val)} (and {held.passes} passes)")
        del held
    fit_started = time.time()
    vector = fit(data, layout, config, log, val, metrics_path)
    summary = {"train_positions": len(data), "train_games": config.max_games or "all",
               "patterns": len(codes), "responses": len(keys), "read_seconds": round(read_s, 1),
               "fit_seconds": round(time.time() - fit_started, 1),
               "train": evaluate(vector, layout, data) if len(data) <= 200000 else None}
    if val is not None:
        summary["heldout"] = evaluate(vector, layout, val)
        summary["heldout_games"] = config.max_val_games or "all"
    metadata = {"command": "tabula train --model rollout " + " ".join(argv), "data": config.data,
                "config": config.to_dict(), "summary": summary}
    weights = weights_from(vector, codes, keys, metadata)
    path = os.path.join(config.out, "rollout.npz")
    weights.save(path)
    if config.weights:
        weights.save(config.weights)
    log(json.dumps(summary))
    log(f"wrote {path}" + (f" and {config.weights}" if config.weights else ""))
    return summary


def evaluate_records(weights_path: str, sources: list[str], max_games: int | None = None, min_moves: int = 30,
                     keep=lambda record: True) -> dict:
    """``evaluate`` of a weights file on the games of SGF archives, read by ``engine.data.records.iter_records``
    with `tabula prepare`'s filter (19×19, no handicap, a result); ``keep`` picks games by their record."""
    weights = RolloutWeights.load(weights_path)
    reader, records = iter_records(sources, RecordFilter(size=19, min_moves=min_moves))
    kept = 0

    def games() -> Iterator[tuple[int, list, list]]:
        nonlocal kept
        for record in records:
            if keep(record):
                kept += 1
                yield record.size, record.setup, record.moves
            if max_games and kept >= max_games:
                return

    examples = extract(games())
    data = index(examples, weights.pattern_codes, weights.response_keys)
    result = evaluate(weights.vector(), Layout(len(weights.pattern_codes), len(weights.response_keys)), data)
    return {"games": kept, "passes": examples.passes, **result, "filter": reader.report.to_dict()}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    config = parse_args(argv)
    train(config, argv, log=lambda line: print(line, flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
