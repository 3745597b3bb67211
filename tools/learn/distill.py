"""`tabula distill`: a student network taught by a stronger one, labelling and training in one loop.

Each chunk labels positions with the teacher (``tools.learn.teacher``: records and self-play, optionally after a
small search), writes them to the run's label window (``RUN/labels``, outside git, the oldest dropped beyond
``--window-positions``), then trains ``--steps-per-chunk`` optimizer steps on batches drawn from the window, and
checkpoints. Only the student's checkpoint (``RUN/checkpoint.pt``, with the records' cursors and the chunk count) is
needed to go on: a run whose labels are lost refills its window as it labels on. The checkpoint is written
(atomically) after every trained chunk, or at most every ``--checkpoint-minutes``, so that a run killed at any moment
loses at most the work since: on resume, the labels and metrics of chunks the checkpoint does not count are
dropped and those chunks labelled again. The run stops cleanly at ``--max-minutes`` or ``--chunks`` (or SIGTERM),
writing the checkpoint and the student as ONNX (``RUN/model.onnx``) before its label workers are stopped (killed
where they do not exit within seconds). Rerun the same command to continue.

``--focus-records`` adds ``--focus-positions`` positions a chunk from a second set of records, read again and again
with new positions drawn each time round: the positions the student meets and misjudges, such as its own games
against GNU Go, whose handicap games are read at the komis of ``--handicap-bonuses`` as self-play's are. Their
results do not train (``--outcome-mix`` leaves them out): they tell how players far below the teacher played
more than what the positions were worth.

Losses (weights configurable): the policy's cross-entropy against the teacher's distribution (its KL divergence is
logged), the value's MSE against the teacher's value, the score lead's and the ownership's as ``tabula train``'s
auxiliary losses (``train.aux_losses``), each value and score target moved ``--outcome-mix`` of the way to the
game's result and counted margin where the game has them.

The student (``--student-arch``, ``--student-encoding``): a pooled network with the score and ownership heads, reading
``leelaz-18+komi`` (the history planes and a komi plane, the grafted komi terms of ``PooledHead``), ``katago-v7``
(KataGo's V7 inputs: liberties, ko, the last moves, ladders, pass-alive areas, and the komi and rules as globals) or
``tabula-v2`` (katago-v7's, then the reading features), these two without grafted terms. The labels store the
student's own planes, so a run keeps one encoding; its label window refuses files of another.

``--zero-planes`` zeroes chosen input planes in training and in the fresh losses: an ablation, to measure what a
feature is worth (accuracy and value error at equal steps on the same labels). A network trained so is for that
measurement, not for play: it was never taught to read those planes, and the engine gives them their values.
``--labels-from DIR`` takes each chunk's labels from another run's label directory instead of labelling (the
teacher is not loaded): with the same settings, the other run's training repeated on its own labels, bit for bit,
so that an ablation costs no labelling and sees exactly the labels the run it is compared with saw.

The model, optimizer, learning rate, weight average, checkpoint writing and auxiliary losses are ``tabula train``'s;
``--lr-drops STEP:LR,...`` lowers the learning rate from those steps on (a run on its plateau: rerun the command
with a drop after the step it is at). The batches are a pure function of (seed, step) and the window, so a resumed
run trains exactly as an uninterrupted one on the same labels.
"""
from __future__ import annotations

import argparse
import copy
import functools
import json
import math
import os
import re
import signal
import sys
import time
from dataclasses import asdict, dataclass, fields, replace

import numpy as np
import torch
from torch.nn import functional as F

from tabula.engine.net import features
from tabula.engine.net.encodings import encoding_named, plane_indices
from tabula.engine.net.katago_features import komi_wave
from tabula.engine.net.network import (
    POOLED,
    NetSpec,
    TabulaNet,
    export_onnx,
    has_komi_globals,
    is_head_komi_weight,
    load_network,
)
from tabula.engine.rules.game import HANDICAP_BONUSES
from tabula.tools.learn import grow, transfer
from tabula.tools.learn import teacher as teaching
from tabula.tools.learn import train as trainer
from tabula.tools.learn.keeping import settle_run_config

CHECKPOINT = "checkpoint.pt"
METRICS = "metrics.jsonl"
CONFIG = "config.json"
LABELS = "labels"
STUDENT = "model.onnx"
TEACHER_NETWORK = "teacher_network"  # config.json's key: the teacher's network (teacher.teacher_identity)
SNAPSHOTS = "snapshots"  # RUN/snapshots/chunk-NNNNNN.onnx: the student after that chunk (--snapshot-chunks)
# --train-komi-spread's moved komis stay within the komi plane's unit, the range int8 files are calibrated on
MAX_MOVED_KOMI = features.KOMI_SCALE
POOL_GRACE_S = 5.0  # seconds the label workers have to exit at a stop before they are killed
# Settings a resumed run must share with the run it continues
# (the teacher is fixed by the network it holds, TEACHER_NETWORK, not by its path)
FIXED_ON_RESUME = ("student_arch", "student_encoding", "zero_planes", "seed", "steps_per_chunk", "batch",
                   "optimizer", "lr", "init")


@dataclass(frozen=True)
class DistillConfig:
    teacher: str  # a KataGo model file, its ONNX, or a Tabula ONNX network
    run: str  # run directory (created; rerun to continue)
    student_arch: str = "6x64"  # BLOCKSxFILTERS of the student (pooled head, score and ownership, komi input)
    student_encoding: str = teaching.DEFAULT_STUDENT_ENCODING  # the student's input planes, which the labels store
    zero_planes: str = ""  # planes zeroed in training and the fresh losses (names or indices): ablations only
    labels_from: str = ""  # another run's label directory whose chunks are taken in place of labelling ("": label)
    # start the student from this Tabula checkpoint or fp32 ONNX network: the student's architecture and encoding,
    # a smaller network of its encoding grown into it (grow.py: the same function in more blocks or filters), or a
    # leelaz-18(+komi) network, its weights mapped onto the student's inputs (transfer.py) and grown where smaller
    init: str = ""
    # a run begun before the head read the komi (NetSpec.head_komi) gets its komi paths at this resume, zero, so
    # that the student computes what it computed; without it such a run goes on as it began
    add_head_komi: bool = False
    records: str = ""  # SGF archives or folders, comma-separated; "": self-play positions only
    records_share: float = 0.5  # share of each chunk's positions from the records (where there are records)
    per_game: int = 4  # positions drawn from each record
    # records read again and again beside --records (their positions new each time round), handicap games at the
    # komis of --handicap-bonuses: the positions the student plays and misjudges (its games against GNU Go, say)
    focus_records: str = ""
    focus_positions: int = 512  # positions a chunk from them
    focus_per_game: int = 16  # positions drawn from each of their games
    selfplay_games: int = 16  # self-play games a chunk (0: none)
    sizes: str = "9,13,19,19"  # self-play board sizes, drawn per game
    komi: float = 7.0  # self-play's mean komi of even games
    komi_spread: float = 1.5
    handicap_fraction: float = 0.2
    max_handicap: int = 9
    # white's handicap bonuses a handicap game is drawn from (Rules' names)
    handicap_bonuses: str = ",".join(HANDICAP_BONUSES)
    keep: float = 0.25  # share of a self-play game's positions labelled
    player: str = ""  # the network whose policy plays the self-play games ("": the teacher's, whose evaluations
    # then label the kept positions for free), e.g. Tabula's own, for the positions Tabula meets
    chunk_positions: int = 1024  # positions taken from the records a chunk (times records_share)
    visits: int = 0  # teacher's search visits a position (0: the network alone)
    search_parallel: int = 1  # searches at once, their network calls batched together (a GPU: 64 or more)
    label_workers: int = 0  # processes that play and label the self-play games, each its own teacher (0: this one)
    label_batch: int = 256  # positions a teacher network call
    provider: str = "cpu"  # where the teacher runs: cpu | auto (a GPU where there is one) | torch | cuda | tensorrt
    teacher_threads: int = 0  # onnxruntime threads of the teacher (0: onnxruntime decides)
    symmetry: str = "identity"  # the teacher's symmetry: identity | random | average
    window_positions: int = 200_000  # labelled positions kept for training (the oldest chunks dropped)
    steps_per_chunk: int = 100
    batch: int = 256
    optimizer: str = "adamw"
    lr: float = 0.001
    weight_decay: float = 1e-4
    warmup_steps: int = 100
    # later learning rates: STEP:LR,... (from optimizer step STEP on, the lr is LR). A resumed run may add or move
    # drops only among the steps it has not trained, so that it still trains as one uninterrupted run would
    lr_drops: str = ""
    ema_decay: float = 0.0
    # normalize with the batch norms' running statistics and keep them: a batch holds one board size, so batch
    # statistics train a network that plays with other (mixed sizes') statistics than it learned with; frozen, the
    # network trained is the one that plays at every size. For a student already trained (the statistics set)
    freeze_batchnorm: bool = False
    policy_weight: float = 1.0
    value_weight: float = 1.0
    score_weight: float = 0.5
    ownership_weight: float = 1.5
    outcome_mix: float = 0.25  # where a game's result is known, the value and score targets move this far to it
    # The score's komi: ``train_komi_share`` of each batch's positions are seen at their komi moved by a normal draw
    # of ``train_komi_spread`` points (half points, |komi| at most MAX_MOVED_KOMI), the score target moved with it
    # point for point (the lead is what the komi would have to change by for an even game), and train the score
    # alone: the teacher's policy, value and ownership are those of the komi it saw. 0: none. Why: a teacher's
    # positions come at few komis, too few for the student's score to learn the komi from them on every size.
    train_komi_spread: float = 0.0
    train_komi_share: float = 0.5
    seed: int = 1
    device: str = "cpu"  # cpu | cuda
    precision: str = "auto"  # auto | bf16 | fp32
    threads: int = 0  # torch threads (0: torch decides)
    chunks: int = 0  # stop once this many chunks are labelled and trained (0: no limit)
    max_minutes: float = 0.0  # stop after this much wall time in this invocation (0: none)
    checkpoint_minutes: float = 0.0  # write the checkpoint after a chunk at most this often (0: after every chunk)
    export: bool = True  # write the student as ONNX when stopping
    # also write the student after every this many chunks, RUN/snapshots/chunk-NNNNNN.onnx, the points of a curve
    # of strength against the compute spent (each chunk's metrics line has elapsed_s and cpu_s); 0: none
    snapshot_chunks: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


def parse_arch(text: str) -> tuple[int, int]:
    try:
        blocks, filters = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"--student-arch is BLOCKSxFILTERS, e.g. 6x64, not {text!r}") from None
    if blocks < 0 or filters < 1:
        raise ValueError(f"--student-arch {text}: blocks at least 0, filters at least 1")
    return blocks, filters


def parse_args(argv: list[str]) -> DistillConfig:
    parser = argparse.ArgumentParser(prog="tabula distill", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--teacher", required=True, help="KataGo model file (.bin.gz), its ONNX, or a Tabula ONNX")
    parser.add_argument("--run", required=True, help="run directory (created; rerun the command to continue)")
    choices = {"optimizer": ("sgd", "adamw"), "device": ("cpu", "cuda"), "precision": ("auto", "bf16", "fp32"),
               "student_encoding": teaching.STUDENT_ENCODINGS,
               "symmetry": ("identity", "random", "average"),
               "provider": ("cpu", "auto", "torch", "cuda", "tensorrt")}
    for f in fields(DistillConfig):
        if f.name in ("teacher", "run", "export", "add_head_komi", "freeze_batchnorm"):
            continue
        parser.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default,
                            choices=choices.get(f.name))
    parser.add_argument("--no-export", dest="export", action="store_false", help="do not write RUN/model.onnx")
    parser.add_argument("--freeze-batchnorm", action="store_true",
                        help="train with the batch norms' running statistics, kept as they are (those of the "
                             "weight average where there is one): the network trained is the one that plays")
    parser.add_argument("--add-head-komi", action="store_true",
                        help="a run begun before the head read the komi gets its komi paths (zero) at this resume")
    config = DistillConfig(**vars(parser.parse_args(argv)))
    try:
        check(config)
    except ValueError as error:
        parser.error(str(error))
    return config


def check(config: DistillConfig) -> None:
    """ValueError for settings that cannot run."""
    parse_arch(config.student_arch)
    zeroed_planes(config)
    for name in ("teacher", "player"):
        path = getattr(config, name)
        if path and not os.path.isfile(path):
            raise ValueError(f"--{name} {path}: no such file")
    for name in ("records", "focus_records"):
        for path in (p for p in getattr(config, name).split(",") if p):
            if not os.path.exists(path):
                raise ValueError(f"--{name.replace('_', '-')} {path}: no such file or folder")
    if config.labels_from and not os.path.isdir(config.labels_from):
        raise ValueError(f"--labels-from {config.labels_from}: no such directory")
    if config.labels_from and os.path.abspath(config.labels_from) == os.path.abspath(os.path.join(config.run, LABELS)):
        raise ValueError("--labels-from is another run's label directory, not this run's")
    parse_lr_drops(config.lr_drops)
    if config.checkpoint_minutes < 0:
        raise ValueError("--checkpoint-minutes is 0 (after every chunk) or more")
    if config.snapshot_chunks < 0:
        raise ValueError("--snapshot-chunks is 0 (none) or more")
    if not 0.0 <= config.records_share <= 1.0 or not 0.0 <= config.outcome_mix <= 1.0 or not 0 < config.keep <= 1:
        raise ValueError("--records-share, --outcome-mix and --keep are shares from 0 to 1")
    if not 0.0 <= config.train_komi_share <= 1.0 or not 0.0 <= config.train_komi_spread <= MAX_MOVED_KOMI:
        raise ValueError(f"--train-komi-share is a share from 0 to 1, --train-komi-spread points from 0 to "
                         f"{MAX_MOVED_KOMI:g}")
    if config.train_komi_spread > 0 and "komi_wave" not in encoding_named(config.student_encoding).plane_names:
        raise ValueError(f"--train-komi-spread moves the komi among katago-v7's globals (katago-v7 and tabula-v2 "
                         f"students), not a {config.student_encoding} student's")
    if not config.records and not config.focus_records and config.selfplay_games <= 0:
        raise ValueError("no positions: give --records, --focus-records or --selfplay-games above 0")
    for name in ("steps_per_chunk", "batch", "label_batch", "window_positions", "chunk_positions", "per_game",
                 "focus_positions", "focus_per_game"):
        if getattr(config, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1")
    sizes = [int(s) for s in config.sizes.split(",") if s.strip()]
    if not sizes or any(not 7 <= s <= 19 for s in sizes):
        raise ValueError("--sizes are board sizes from 7 to 19")
    handicap_bonuses(config)


def handicap_bonuses(config: DistillConfig) -> tuple[str, ...]:
    """``--handicap-bonuses`` as a tuple; ValueError where it names no bonus or one the rules do not know."""
    bonuses = tuple(b.strip() for b in config.handicap_bonuses.split(",") if b.strip())
    if not bonuses or any(b not in HANDICAP_BONUSES for b in bonuses):
        raise ValueError(f"--handicap-bonuses is a list of {', '.join(HANDICAP_BONUSES)}, "
                         f"not {config.handicap_bonuses!r}")
    return bonuses


@functools.lru_cache(maxsize=8)  # read at every optimizer step: parsed once per setting
def parse_lr_drops(text: str) -> tuple[tuple[int, float], ...]:
    """``--lr-drops`` as (step, lr) pairs in step order; ValueError where it is not STEP:LR,... with distinct steps
    of 0 or more and learning rates above 0."""
    drops = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        try:
            step_text, lr_text = item.split(":")
            step, lr = int(step_text), float(lr_text)
        except ValueError:
            raise ValueError(f"--lr-drops is STEP:LR,..., e.g. 12600:0.0003, not {text!r}") from None
        if step < 0 or not lr > 0:
            raise ValueError(f"--lr-drops {item}: a step of 0 or more and a learning rate above 0")
        drops.append((step, lr))
    if len({step for step, _ in drops}) != len(drops):
        raise ValueError(f"--lr-drops {text}: each step once")
    return tuple(sorted(drops))


def learning_rate(config: DistillConfig, train_config: trainer.TrainConfig, step: int) -> float:
    """The lr of optimizer step ``step``: ``tabula train``'s warm-up to ``--lr``, then the last drop reached."""
    lr = trainer.learning_rate(train_config, step)
    for drop_step, drop_lr in parse_lr_drops(config.lr_drops):
        if step >= drop_step:
            lr = drop_lr
    return lr


def check_lr_drops_on_resume(saved: str, given: str, step: int) -> None:
    """ValueError where ``given`` changes the learning rate of a step below ``step``, which the run has trained."""
    trained = lambda text: [(s, lr) for s, lr in parse_lr_drops(text) if s < step]  # noqa: E731
    if trained(saved) != trained(given):
        raise ValueError(f"--lr-drops {given!r} changes the learning rate of steps this run has trained (it is at "
                         f"step {step}, begun with --lr-drops {saved!r}): change only drops after step {step}")


def zeroed_planes(config: DistillConfig) -> list[int]:
    """The student's planes that ``--zero-planes`` names; ValueError for a plane the encoding has not, or for one
    that tells the network the board's size."""
    try:
        encoding = teaching.student_encoding_named(config.student_encoding)
    except teaching.LabelError as error:
        raise ValueError(f"--student-encoding: {error}") from None
    chosen = plane_indices(encoding, config.zero_planes)
    sized = set(range(*encoding.size_planes)) if encoding.size_planes else set()
    if sized & set(chosen):
        raise ValueError(f"--zero-planes: {encoding.name}'s planes {sorted(sized)} tell the network the board's size; "
                         "they cannot be zeroed")
    return chosen


# -- the window of labels -------------------------------------------------------------------------------------------


class LabelWindow:
    """The label files of a run, newest last, as arrays by board size; batches are drawn from it. Every file holds
    ``encoding``'s planes: one of another raises LabelEncodingError (a run keeps one student encoding)."""

    def __init__(self, directory: str, limit: int, encoding: str = teaching.DEFAULT_STUDENT_ENCODING,
                 zero_planes: list[int] | None = None):
        self.directory, self.limit = directory, limit
        self.encoding, self.zero_planes = encoding, list(zero_planes or [])
        self.skipped: dict[str, str] = {}  # files that cannot be read, and why
        self._cache: dict[str, tuple[int, dict[str, np.ndarray]]] = {}
        self.refresh()

    def refresh(self) -> None:
        """Reread the directory, dropping the oldest files beyond ``limit`` positions (never the newest chunk)."""
        paths = list(teaching.iter_label_files(self.directory))
        kept: list[str] = []
        total = 0
        for path in reversed(paths):
            if path in self.skipped:
                continue
            if path not in self._cache:
                try:
                    self._cache[path] = teaching.read_labels(path, self.encoding)
                except teaching.LabelEncodingError:
                    raise
                except teaching.LabelError as error:  # labels are disposable: one unreadable file costs its chunk
                    self.skipped[path] = str(error)
                    continue
            count = len(self._cache[path][1]["value"])
            if kept and total + count > self.limit and _chunk_of(path) != _chunk_of(kept[0]):
                os.remove(path)
                self._cache.pop(path, None)
                continue
            kept.insert(0, path)
            total += count
        for path in [p for p in self._cache if p not in kept]:
            self._cache.pop(path)
        self.paths = kept
        groups: dict[int, dict[str, list[np.ndarray]]] = {}
        for path in kept:
            size, labels = self._cache[path]
            known = labels.get("ownership_known", np.ones(len(labels["value"]), np.uint8))
            group = groups.setdefault(size, {})
            for name in (*teaching.LABEL_FIELDS, "ownership_known"):
                group.setdefault(name, []).append(known if name == "ownership_known" else labels[name])
        self.by_size = {size: {name: np.concatenate(arrays) for name, arrays in group.items()}
                        for size, group in groups.items()}
        self.size = sum(len(g["value"]) for g in self.by_size.values())

    def batch(self, seed: int, step: int, count: int, komi_spread: float = 0.0,
              komi_share: float = 0.5) -> dict[str, torch.Tensor]:
        """The batch of optimizer step ``step``: one board size drawn by its share of the window, ``count``
        positions of it drawn uniformly, each under a random symmetry; with ``komi_spread``, ``komi_share`` of
        them at a moved komi (DistillConfig.train_komi_spread)."""
        rng = np.random.default_rng([seed, step, 104729])
        sizes = sorted(self.by_size)
        counts = np.array([len(self.by_size[s]["value"]) for s in sizes], np.float64)
        size = sizes[int(rng.choice(len(sizes), p=counts / counts.sum()))]
        labels = self.by_size[size]
        rows = rng.integers(0, len(labels["value"]), count)
        symmetries = rng.integers(0, features.NUM_SYMMETRIES, count)
        shifts = None
        if komi_spread > 0:  # drawn after the rest, so that a run without it draws the same batches as before
            moved = rng.random(count) < komi_share
            shifts = np.where(moved, np.round(2.0 * rng.normal(0.0, komi_spread, count)) / 2.0, 0.0)
        return batch_of(labels, size, rows, symmetries, self.encoding, self.zero_planes, shifts)


def move_komi(planes: np.ndarray, komi: np.ndarray, shifts: np.ndarray, size: int, encoding: str) -> np.ndarray:
    """Change ``planes`` (a batch of ``encoding``'s, in place) to show each side to move's ``komi`` moved by its
    shift, at most MAX_MOVED_KOMI either way, and the komi wave with it under area scoring; returns the shifts
    made."""
    names = encoding_named(encoding).plane_names
    moved = np.clip(komi + shifts, -MAX_MOVED_KOMI, MAX_MOVED_KOMI).astype(np.float32)
    planes[:, names.index("komi")] = (moved / np.float32(features.KOMI_SCALE))[:, None, None]
    if "komi_wave" in names:
        area = planes[:, names.index("territory_scoring"), 0, 0] == 0
        waves = np.array([komi_wave(k, size) for k in moved], np.float32)
        planes[area, names.index("komi_wave")] = waves[area][:, None, None]
    return moved - komi


def batch_of(labels: dict[str, np.ndarray], size: int, rows: np.ndarray, symmetries: np.ndarray,
             encoding: str = teaching.DEFAULT_STUDENT_ENCODING, zero_planes: list[int] | None = None,
             komi_shifts: np.ndarray | None = None) -> dict[str, torch.Tensor]:
    """The training tensors of stored positions ``rows`` of one board size, each under its symmetry: ``planes``
    the student's input (``encoding``'s, with ``zero_planes`` zeroed). ``komi_shifts``: points by which each
    position's komi is moved (``move_komi``); a moved one's score and margin move with it and it trains the score
    alone (``full`` 0)."""
    count = len(rows)
    points = size * size
    planes = features.transform_planes(teaching.decode_planes(labels, size, rows, encoding), symmetries)
    score = labels["score"][rows].astype(np.float32)
    margin = labels["margin"][rows].astype(np.float32)
    full = np.ones(count, np.float32)
    if komi_shifts is not None and np.any(komi_shifts != 0):
        made = move_komi(planes, labels["komi"][rows].astype(np.float32), komi_shifts, size, encoding)
        score, margin = score + made, margin + made
        full = (komi_shifts == 0).astype(np.float32)
    if zero_planes:
        planes[:, zero_planes] = 0.0
    policy = features.transform_policy(teaching.dense_policy(labels, points + 1, rows), symmetries)
    ownership = (labels["ownership"][rows].astype(np.float32).reshape(count, 1, size, size)
                 / teaching.OWNERSHIP_LEVELS)
    ownership = features.transform_planes(ownership, symmetries).reshape(count, points)
    known = labels.get("ownership_known")
    ownership_weight = (known[rows].astype(np.float32) if known is not None else np.ones(count, np.float32)) * full
    score_weight = np.isfinite(score).astype(np.float32)
    return {"full": torch.from_numpy(full),
            "planes": torch.from_numpy(np.ascontiguousarray(planes)),
            "policy": torch.from_numpy(np.ascontiguousarray(policy)),
            "value": torch.from_numpy(labels["value"][rows].astype(np.float32)),
            "score": torch.from_numpy(np.nan_to_num(score)),
            "score_weight": torch.from_numpy(score_weight),
            "ownership": torch.from_numpy(np.ascontiguousarray(ownership)),
            "ownership_weight": torch.from_numpy(ownership_weight),
            "outcome": torch.from_numpy(labels["outcome"][rows].astype(np.float32)),
            "outcome_weight": torch.from_numpy(labels["outcome_weight"][rows].astype(np.float32)),
            "margin": torch.from_numpy(np.nan_to_num(margin)),
            "margin_known": torch.from_numpy(np.isfinite(margin).astype(np.float32)),
            "komi": torch.from_numpy(labels["komi"][rows].astype(np.float32))}


def fresh_losses(model: TabulaNet, paths: list[str], config: DistillConfig, device: torch.device, bf16: bool,
                 most: int = 256) -> dict[str, float]:
    """The student's losses on a chunk's new labels before it trains on them (up to ``most`` positions a board
    size, as stored): a held-out learning curve for free. Means over the positions, ``fresh_`` before each name."""
    totals: dict[str, float] = {}
    seen = 0
    model.eval()
    with torch.no_grad():
        for path in paths:
            size, labels = teaching.read_labels(path, config.student_encoding)
            rows = np.arange(min(most, len(labels["value"])))
            batch = {k: v.to(device) for k, v in batch_of(labels, size, rows, np.zeros(len(rows), np.int64),
                                                          config.student_encoding, zeroed_planes(config)).items()}
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                out = model.train_outputs(batch["planes"].contiguous(memory_format=torch.channels_last))
            loss, parts = distill_losses(out, batch, config)
            for name, value in {"loss": loss, **parts}.items():
                totals[name] = totals.get(name, 0.0) + float(value) * len(rows)
            seen += len(rows)
    trainer.set_training(model, config.freeze_batchnorm)
    return {f"fresh_{name}": round(total / max(seen, 1), 5) for name, total in totals.items()}


def _chunk_of(path: str) -> str:
    return os.path.basename(path).split("-")[1]


# -- losses ---------------------------------------------------------------------------------------------------------


def distill_losses(out: dict[str, torch.Tensor], batch: dict[str, torch.Tensor], config: DistillConfig
                   ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """(the weighted loss, its parts): policy cross-entropy against the teacher's distribution and its KL
    divergence, value MSE, and ``train.aux_losses``' score and ownership losses against the mixed targets."""
    logits = out["policy"].float()
    target = batch["policy"]
    full = batch["full"]  # 0 for a position at a moved komi: its score alone trains
    share = full.sum().clamp(min=1.0)
    log_student = F.log_softmax(logits, dim=1)
    cross_entropy = (-(target * log_student).sum(dim=1) * full).sum() / share
    entropy = (-(target * torch.log(target.clamp(min=1e-12))).sum(dim=1) * full).sum() / share
    mix = config.outcome_mix * batch["outcome_weight"]
    value_target = (1.0 - mix) * batch["value"] + mix * batch["outcome"]
    value_loss = (((torch.tanh(out["value"].float()) - value_target) ** 2) * full).sum() / share
    score_mix = config.outcome_mix * batch["margin_known"]
    count = len(target)
    aux = trainer.aux_losses(out, {
        "reply": torch.zeros(count, dtype=torch.long, device=target.device),
        "reply_weight": torch.zeros(count, device=target.device),
        "score": (1.0 - score_mix) * batch["score"] + score_mix * batch["margin"],
        "score_weight": batch["score_weight"],
        "ownership": batch["ownership"], "ownership_weight": batch["ownership_weight"]})
    loss = (config.policy_weight * cross_entropy + config.value_weight * value_loss
            + config.score_weight * aux["score_loss"] + config.ownership_weight * aux["ownership_loss"])
    top1 = ((logits.argmax(dim=1) == target.argmax(dim=1)).float() * full).sum() / share
    return loss, {"policy_kl": cross_entropy - entropy, "policy_ce": cross_entropy, "value_mse": value_loss,
                  "score_loss": aux["score_loss"], "ownership_loss": aux["ownership_loss"], "top1": top1}


# -- the run --------------------------------------------------------------------------------------------------------


def student_spec(config: DistillConfig) -> NetSpec:
    """The student: a pooled network with the score and ownership heads reading ``--student-encoding``, and none of
    the grafted small-board or komi terms (the komi of katago-v7 and tabula-v2 is among their global planes)."""
    blocks, filters = parse_arch(config.student_arch)
    encoding = encoding_named(config.student_encoding)
    return NetSpec(blocks=blocks, filters=filters, head=POOLED, aux=True, input_encoding=encoding.name,
                   head_komi=has_komi_globals(encoding))


def with_head_komi(source: TabulaNet) -> TabulaNet:
    """``source`` with the head's komi paths (``NetSpec.head_komi``), zero, so that it computes what it computed."""
    model = TabulaNet(replace(source.spec, head_komi=True))
    missing, unexpected = model.load_state_dict(source.state_dict(), strict=False)
    if unexpected or not all(is_head_komi_weight(k) for k in missing):
        raise ValueError(f"not a network the head's komi extends: missing {missing}, unexpected {unexpected}")
    return model.train(source.training)


def with_head_komi_state(state: dict, model: TabulaNet) -> dict:
    """A training checkpoint ``state`` of a student without the head's komi, for ``model`` (the same student with
    it): the new weights zero in the weights and their average, and the optimizer's parameter list extended by them
    (they come last in the model's order; the optimizer starts their moments when it first steps them)."""
    names = [name for name, _ in model.named_parameters()]
    old = state["state_dict"]
    added = [name for name in model.state_dict() if name not in old]
    if not added or not all(is_head_komi_weight(n) for n in added):
        raise SystemExit(f"tabula distill: the checkpoint is not this student without the head's komi ({added})")
    if names[len(names) - len(added):] != added:
        raise SystemExit("tabula distill: the head's komi weights are not the model's last parameters")
    zeros = {name: torch.zeros_like(model.state_dict()[name]) for name in added}
    state = dict(state, state_dict={**old, **zeros})
    if "ema_state_dict" in state:
        state["ema_state_dict"] = {**state["ema_state_dict"], **{k: v.clone() for k, v in zeros.items()}}
    optimizer = copy.deepcopy(state["optimizer"])
    (group,) = optimizer["param_groups"]
    group["params"] = list(range(len(names)))
    state["optimizer"] = optimizer
    return state


def initial_student(path: str, spec: NetSpec) -> TabulaNet:
    """``--init``'s network as a student of ``spec``: a checkpoint (its trained weights, not their average) or an
    fp32 ONNX file, of the student's architecture and encoding, or of a smaller one of it (``grow.grown``: the same
    function in more blocks or filters), or of Leela Zero's inputs (``transfer.transferred``, then grown where its
    trunk is smaller); SystemExit saying why otherwise."""
    from tabula.engine.net.netfile import NetworkFileError

    try:
        source = load_network(path, averaged=False)
    except (NetworkFileError, OSError) as error:
        raise SystemExit(f"tabula distill: --init {path}: {error}") from None
    if source.spec.same_weights(spec):
        return source
    # a leelaz-18 network is mapped onto the student's inputs at its own trunk's size first
    trunk = replace(spec, blocks=source.spec.blocks, filters=source.spec.filters, head_komi=False)
    if transfer.can_transfer(source.spec, trunk):
        source = transfer.transferred(source, trunk)
    # a student from before the head read the komi gets its komi paths, zero (compared without them: a spec of
    # them on a network without the komi planes, such as a Leela Zero one, is no spec at all)
    if spec.head_komi and not source.spec.head_komi and source.spec.same_weights(trunk):
        source = with_head_komi(source)
    if source.spec.same_weights(spec):
        return source
    if grow.can_grow(source.spec, spec):
        return grow.grown(source, spec)
    raise SystemExit(f"tabula distill: --init {path} is a {source.spec.blocks}x{source.spec.filters} network of "
                     f"{source.spec.input_encoding}, neither a {spec.blocks}x{spec.filters} student of "
                     f"{spec.input_encoding} or a smaller one to grow it from, nor a leelaz-18 network to start "
                     "one from")


def trainer_config(config: DistillConfig) -> trainer.TrainConfig:
    """``tabula train``'s settings that its optimizer, learning rate and precision read."""
    return trainer.TrainConfig(data="", out=config.run, optimizer=config.optimizer, lr=config.lr,
                               weight_decay=config.weight_decay, warmup_steps=config.warmup_steps, schedule="step",
                               lr_drops="", steps=2 ** 62, device=config.device, precision=config.precision)


def _settle_config(config: DistillConfig) -> None:
    path = os.path.join(config.run, CONFIG)
    saved = None
    if os.path.exists(path):
        with open(path) as handle:
            saved = json.load(handle)
    old_encoding = saved is not None and "student_encoding" not in saved
    if old_encoding and config.student_encoding != features.KOMI_INPUT_ENCODING:
        # begun before there was a choice: its student reads leelaz-18+komi
        raise SystemExit(f"tabula distill: {config.run}'s student reads {features.KOMI_INPUT_ENCODING}: go on "
                         f"with --student-encoding {features.KOMI_INPUT_ENCODING}")
    try:
        network = teaching.teacher_identity(config.teacher)
    except ValueError as error:
        raise SystemExit(f"tabula distill: --teacher {error}") from None
    if saved is not None:
        before = saved.get(TEACHER_NETWORK)
        if before is None and saved.get("teacher", config.teacher) != config.teacher:
            # begun before the teacher was kept by its network: that of the file it named, where the file is here
            if not os.path.isfile(saved["teacher"]):
                raise SystemExit(f"tabula distill: {config.run} was taught by {saved['teacher']}, not here: give "
                                 f"--teacher that file, or use another --run")
            try:
                before = teaching.teacher_identity(saved["teacher"])
            except ValueError as error:
                raise SystemExit(f"tabula distill: {config.run}'s teacher {error}") from None
        if before is not None and before != network:
            raise SystemExit(f"tabula distill: {config.run} is a run taught by another network ({before}, "
                             f"--teacher holds {network}); use another --run")
    settle_run_config(config.run, config, FIXED_ON_RESUME, "tabula distill", "--run", CONFIG,
                      extra={TEACHER_NETWORK: network})


def distill(config: DistillConfig, log=print) -> dict:
    """Label and train chunk after chunk until a limit; returns the last chunk's record."""
    started, cpu_started = time.time(), time.process_time()
    try:
        check(config)
    except ValueError as error:
        raise SystemExit(f"tabula distill: {error}") from None
    checkpoint_path = os.path.join(config.run, CHECKPOINT)
    state = trainer.load_training_checkpoint(checkpoint_path) if os.path.exists(checkpoint_path) else None
    if state is not None:  # before the run's config.json is rewritten with the settings given
        try:
            check_lr_drops_on_resume(json.loads(state.get("config", "{}")).get("lr_drops", ""), config.lr_drops,
                                     int(state["step"]))
        except ValueError as error:
            raise SystemExit(f"tabula distill: {error}") from None
    _settle_config(config)
    if config.threads > 0:
        torch.set_num_threads(config.threads)
    device = torch.device(config.device)
    train_config = trainer_config(config)
    bf16 = trainer.use_bf16(train_config)
    spec = student_spec(config)
    saved = NetSpec.from_dict(state["spec"]) if state is not None else None
    adding_head_komi = False
    if saved is not None and not saved.head_komi:
        # a run begun before the head read the komi goes on as it began, unless told to add it
        adding_head_komi = config.add_head_komi and spec.head_komi
        spec = replace(spec, head_komi=adding_head_komi)
    torch.manual_seed(config.seed)
    model = TabulaNet(spec)
    optimizer = trainer.make_optimizer(train_config, model)
    average = trainer.WeightAverage(model, config.ema_decay) if config.ema_decay > 0 else None
    step, chunk, cursor, focus_cursor, elapsed_before = 0, 0, 0, 0, 0.0
    cpu_before: float | None = 0.0
    if state is not None:
        if saved.input_encoding != spec.input_encoding:  # a run begun before --student-encoding had its default
            raise SystemExit(f"tabula distill: {checkpoint_path}'s student reads {saved.input_encoding}: go on with "
                             f"--student-encoding {saved.input_encoding}")
        if not replace(saved, head_komi=spec.head_komi).same_weights(spec):
            raise SystemExit(f"tabula distill: {checkpoint_path} holds another architecture")
        if adding_head_komi:
            state = with_head_komi_state(state, model)
            log("tabula distill: the head's komi paths added (zero: the student computes what it computed)")
        model.load_state_dict(state["state_dict"])
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        if average is not None and "ema_state_dict" in state:
            average.restore(state["ema_state_dict"])
        elif average is not None:  # --ema-decay given to a run trained without it: the average starts here
            average = trainer.WeightAverage(model, config.ema_decay)
        step, chunk, cursor = int(state["step"]), int(state["chunk"]), int(state["records_cursor"])
        focus_cursor = int(state.get("focus_cursor", 0))
        elapsed_before = float(state.get("elapsed_s", 0.0))
        # a run begun before cpu_s was counted has no total: it records none rather than part of one
        cpu_before = float(state["cpu_s"]) if state.get("cpu_s") is not None else None
        log(f"tabula distill: resuming {config.run} at chunk {chunk}, step {step}")
    elif config.init:
        model.load_state_dict(initial_student(config.init, spec).state_dict())
        if average is not None:
            average = trainer.WeightAverage(model, config.ema_decay)
    model.to(device).to(memory_format=torch.channels_last)
    if device.type == "cuda":
        optimizer.load_state_dict(optimizer.state_dict())
        if average is not None:
            average.state = {k: v.to(device) for k, v in average.state.items()}
    if config.freeze_batchnorm and average is not None:
        # the statistics frozen are the average's, which the exported student has played with, not the last few
        # batches' that the trained weights' running statistics follow
        with torch.no_grad():
            for name, buffer in model.named_buffers():
                if name.endswith(("running_mean", "running_var")) and name in average.state:
                    buffer.copy_(average.state[name])
    trainer.set_training(model, config.freeze_batchnorm)

    from tabula.engine.net.netfile import NetworkFileError

    label_dir = os.path.join(config.run, LABELS)
    os.makedirs(label_dir, exist_ok=True)
    # what a killed run did after its checkpoint is redone: its label files and metrics lines go (without a
    # checkpoint the labels stay: a window of another encoding is refused, and chunk 0's are replaced as it labels)
    discard_unsaved(config.run, chunk, step, labels=os.path.exists(checkpoint_path))
    # worker processes play and label the self-play games; with no records, this process needs no teacher
    use_pool = not config.labels_from and config.label_workers > 0 and config.selfplay_games > 0
    teacher_here = not config.labels_from and not (use_pool and not config.records and not config.focus_records)
    teacher, selfplay, records, focus, pool = None, None, None, None, None
    try:
        try:
            described = f"labels from {config.labels_from}"
            if teacher_here:
                teacher = make_teacher(config, log)
                described = f"teacher {teacher.describe()}"
            # made here even where worker processes play: a player that cannot play fails here, once
            if config.selfplay_games > 0 and teacher is not None:
                selfplay = make_selfplay(config, teacher, log)
            if config.records and teacher is not None:
                records = teaching.RecordPositions([p for p in config.records.split(",") if p],
                                                   per_game=config.per_game, seed=config.seed, cursor=cursor)
            if config.focus_records and teacher is not None:
                focus = teaching.RecordPositions([p for p in config.focus_records.split(",") if p],
                                                 per_game=config.focus_per_game, seed=config.seed, cursor=focus_cursor,
                                                 repeat=True, bonuses=handicap_bonuses(config), source="focus",
                                                 results=False)
            if use_pool:
                import multiprocessing

                pool = multiprocessing.get_context("spawn").Pool(config.label_workers, initializer=_start_worker,
                                                                 initargs=(config,))
                worker = pool.apply(_describe_worker)  # a worker that cannot start says why here
                if teacher is None:
                    described = f"teacher {worker} in {config.label_workers} worker processes"
            log(f"tabula distill: {described}; student {config.student_arch} of {config.student_encoding}"
                + (f", planes {config.zero_planes} zeroed" if config.zero_planes else ""))
        except (teaching.LabelError, NetworkFileError, ValueError) as error:  # ValueError: a backend that cannot run
            raise SystemExit(f"tabula distill: {error}") from None
        return _run_chunks(config, log, started, model, optimizer, average, spec, device, bf16, train_config,
                           step, chunk, (cursor, focus_cursor), (elapsed_before, cpu_before, cpu_started), teacher,
                           selfplay, (records, focus), pool, label_dir)
    finally:
        if pool is not None:
            close_pool(pool)


def _run_chunks(config: DistillConfig, log, started: float, model, optimizer, average, spec: NetSpec,
                device: torch.device, bf16: bool, train_config: trainer.TrainConfig, step: int, chunk: int,
                cursors: tuple[int, int], spent: tuple[float, float | None, float], teacher, selfplay,
                streams: tuple, pool, label_dir: str) -> dict:
    """``distill``'s loop: label and train chunk after chunk until a limit, checkpointing as it goes, then write the
    checkpoint and the student (before the caller stops the label workers). ``cursors``: the games taken from the
    records and from the focus records; ``streams``: their RecordPositions (None: none). ``spent``: the wall and CPU
    seconds of the run's earlier invocations (CPU None: not counted then), and ``time.process_time()`` at this
    one's start."""
    elapsed_before, cpu_before, cpu_started = spent
    (cursor, focus_cursor), (records, focus) = cursors, streams

    def cpu_s() -> float | None:
        # this process's CPU time since the run began, every thread's (labelling and training where
        # --label-workers is 0; the label workers' processes are not counted)
        return None if cpu_before is None else round(cpu_before + time.process_time() - cpu_started, 1)

    checkpoint_path = os.path.join(config.run, CHECKPOINT)
    try:
        window = LabelWindow(label_dir, config.window_positions, config.student_encoding, zeroed_planes(config))
    except teaching.LabelEncodingError as error:
        raise SystemExit(f"tabula distill: {error}") from None
    for problem in window.skipped.values():
        log(f"tabula distill: skipped {problem}")
    last_save = [time.time()]

    def save(reason: str = "") -> None:
        # ``cursor``: the records taken by the chunks counted, so that a chunk not counted is labelled again
        state = {"spec": spec.to_dict(), "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
                 "optimizer": trainer._to_cpu(optimizer.state_dict()), "step": step, "chunk": chunk,
                 "records_cursor": cursor, "focus_cursor": focus_cursor, "torch_rng": torch.get_rng_state(),
                 "elapsed_s": elapsed_before + time.time() - started, "cpu_s": cpu_s(),
                 "config": json.dumps(config.to_dict())}
        if average is not None:
            state["ema_state_dict"] = trainer._to_cpu(average.state)
        trainer.atomic_torch_save(state, checkpoint_path)
        last_save[0] = time.time()
        if reason:
            log(f"tabula distill: checkpoint at chunk {chunk}, step {step} ({reason})")

    def write_student(path: str) -> None:
        # a copy: the model trains on after a snapshot, on its device, in its memory format and mode
        final = average.averaged(model) if average is not None else copy.deepcopy(model)
        final = final.to("cpu").to(memory_format=torch.contiguous_format).eval()
        export_onnx(final, path + ".partial",
                    f"tabula distill: {config.student_arch} of {config.student_encoding} taught by "
                    f"{os.path.basename(config.teacher)}{f' at {config.visits} visits' if config.visits else ''}, "
                    f"{step} steps x {config.batch}, chunk {chunk}"
                    + (f"; planes {config.zero_planes} zeroed in training: for measurement, not play"
                       if config.zero_planes else ""))
        os.replace(path + ".partial", path)

    stop = {"signal": None}

    def on_signal(signum, _frame) -> None:
        stop["signal"] = signum

    old_handler = signal.signal(signal.SIGTERM, on_signal) if trainer._main_thread() else None

    def stopped() -> bool:
        return stop["signal"] is not None

    def out_of_time() -> bool:
        return (config.max_minutes > 0 and time.time() - started >= 60 * config.max_minutes) or stopped()

    step_seconds = 0.0  # the last trained chunk's seconds a step (0: no chunk has trained in this process)

    record: dict = {}
    reason = "done"
    records_out = False
    try:
        while True:
            if step >= chunk * config.steps_per_chunk and config.chunks and chunk >= config.chunks:
                break
            labelled = {}
            if step >= chunk * config.steps_per_chunk:  # the last chunk is trained: label the next one
                if out_of_time():
                    reason = "out of time"
                    break
                label_started = time.time()
                deadline = labelling_deadline(started, config.max_minutes, step_seconds * config.steps_per_chunk)
                discard_chunk(label_dir, chunk)  # a chunk begun by a killed run: none of its files stay
                if config.labels_from:
                    labelled = taken_chunk(chunk, config.labels_from, label_dir, config.student_encoding)
                else:
                    labelled = label_chunk(teacher, chunk, config, records, selfplay, label_dir, deadline, pool,
                                           stopped, focus)
                if labelled is None:  # stopped while the workers labelled: the chunk is labelled again on resume
                    reason = "out of time"
                    break
                label_seconds = time.time() - label_started
                chunk += 1
                if focus is not None:
                    focus_cursor = focus.cursor
                if records is not None:
                    cursor = records.cursor
                    if records.exhausted and not records_out:
                        # said once a process: a run whose records ran out learns from self-play alone, and
                        # drifts from the positions people play (the chunks' from_records counts show it)
                        records_out = True
                        log(f"tabula distill: the records ran out after {cursor} games: the chunks go on with "
                            "self-play alone; give --records more archives (their order kept, new ones last)")
                try:
                    window.refresh()
                except teaching.LabelEncodingError as error:
                    raise SystemExit(f"tabula distill: {error}") from None
                if not labelled["positions"]:
                    reason = "out of time" if time.time() >= deadline else "no positions left"
                    chunk -= 1
                    if config.labels_from:  # every chunk taken: a run that labels on goes on where that one stopped
                        cursor = max(cursor, records_cursor_of(config.labels_from))
                    break
            if window.size == 0:
                if labelled:
                    raise SystemExit("tabula distill: the label window is empty")
                # stopped inside a chunk whose labels are gone (a new machine): label that chunk again
                log(f"tabula distill: no labels for chunk {chunk}; labelling it again")
                chunk -= 1
                continue
            fresh = fresh_losses(model, labelled["paths"], config, device, bf16) if labelled else {}
            train_started = time.time()
            sums: dict[str, float] = {}
            first_step = step
            while step < chunk * config.steps_per_chunk:
                if out_of_time():
                    break
                lr = learning_rate(config, train_config, step)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                batch = {k: v.to(device) for k, v in window.batch(config.seed, step, config.batch,
                                                                  config.train_komi_spread,
                                                                  config.train_komi_share).items()}
                planes = batch["planes"].contiguous(memory_format=torch.channels_last)
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                    out = model.train_outputs(planes)
                loss, parts = distill_losses(out, batch, config)
                value = trainer.optimizer_step(loss, optimizer, model, average, step, "tabula distill")
                step += 1
                sums["loss"] = sums.get("loss", 0.0) + value
                for name, part in parts.items():
                    sums[name] = sums.get(name, 0.0) + part.item()
            trained = step - first_step
            train_seconds = time.time() - train_started
            if trained:
                step_seconds = train_seconds / trained
            record = {"chunk": chunk, "step": step, "window": window.size,
                      "elapsed_s": round(elapsed_before + time.time() - started, 1),
                      **{k: round(v / max(trained, 1), 5) for k, v in sums.items()},
                      "samples_per_s": round(trained * config.batch / max(train_seconds, 1e-9), 1)}
            cpu = cpu_s()
            if cpu is not None:
                record["cpu_s"] = cpu
            if labelled:
                record.update({"labelled": labelled["positions"], "label_s": round(label_seconds, 2),
                               "labels_per_s": round(labelled["positions"] / max(label_seconds, 1e-9), 1),
                               "bytes_per_position": round(labelled["bytes"] / max(labelled["positions"], 1), 1),
                               "by_size": labelled["by_size"], **fresh})
                if "from_records" in labelled:
                    record["from_records"] = labelled["from_records"]
                if focus is not None:
                    record["from_focus"] = labelled.get("from_focus", 0)
            trainer._append_metrics(os.path.join(config.run, METRICS), record)
            log(f"chunk {chunk:>5}  step {step:>7}  "
                + (f"labelled {labelled['positions']} ({record['labels_per_s']:.0f}/s, new KL "
                   f"{fresh['fresh_policy_kl']:.3f})  " if labelled else "")
                + (f"loss {record['loss']:.4f}  KL {record['policy_kl']:.4f}  value {record['value_mse']:.4f}  "
                   f"top1 {record['top1']:.3f}  {record['samples_per_s']:.0f} samples/s" if trained else ""))
            if step < chunk * config.steps_per_chunk:  # stopped inside the chunk
                reason = "out of time"
                break
            if time.time() - last_save[0] >= 60 * config.checkpoint_minutes:
                save()
            if config.snapshot_chunks and chunk % config.snapshot_chunks == 0:  # the chunk is trained
                snapshot = os.path.join(config.run, SNAPSHOTS, f"chunk-{chunk:06d}.onnx")
                try:
                    os.makedirs(os.path.dirname(snapshot), exist_ok=True)
                    write_student(snapshot)
                except Exception as error:  # noqa: BLE001 - a missing snapshot stops no training
                    log(f"tabula distill: no snapshot {snapshot}: {error}")
                    if os.path.exists(snapshot + ".partial"):
                        os.remove(snapshot + ".partial")
        save(reason)
        if config.export:
            write_student(os.path.join(config.run, STUDENT))
            log(f"tabula distill: exported {os.path.join(config.run, STUDENT)}")
    finally:
        if old_handler is not None:
            signal.signal(signal.SIGTERM, old_handler)
    return {"step": step, "chunk": chunk, "reason": reason, **record}


_CHUNK_FILE = re.compile(r"chunk-(\d+)-")


def discard_chunk(directory: str, chunk: int, later: bool = False) -> None:
    """Remove chunk ``chunk``'s label files (``later``: those of every chunk from it on), and temporary files."""
    if not os.path.isdir(directory):
        return
    for name in os.listdir(directory):
        match = _CHUNK_FILE.match(name)
        if ".tmp" in name or (match and (int(match[1]) >= chunk if later else int(match[1]) == chunk)):
            os.remove(os.path.join(directory, name))


def discard_unsaved(run: str, chunk: int, step: int, labels: bool = True) -> None:
    """Drop what a run killed after its checkpoint (at ``chunk``, ``step``) wrote: the label files of the chunks it
    does not count (``labels``), the metrics lines past it (and one cut short), and temporary files."""
    if labels:
        discard_chunk(os.path.join(run, LABELS), chunk, later=True)
    for name in os.listdir(run):
        if name.startswith(CHECKPOINT + ".tmp") or name.startswith(STUDENT + ".tmp"):
            os.remove(os.path.join(run, name))
    path = os.path.join(run, METRICS)
    if not os.path.exists(path):
        return
    kept, dropped = [], 0
    with open(path) as handle:
        for line in handle:
            try:
                row = json.loads(line)
                if int(row.get("step", 0)) <= step and int(row.get("chunk", 0)) <= chunk and line.endswith("\n"):
                    kept.append(line)
                    continue
            except (json.JSONDecodeError, TypeError, ValueError, AttributeError):
                pass  # a line cut short by a kill
            dropped += 1
    if dropped:
        with open(path + ".tmp", "w") as handle:
            handle.writelines(kept)
        os.replace(path + ".tmp", path)


def close_pool(pool, grace: float = POOL_GRACE_S) -> bool:
    """Stop ``pool``'s workers, abandoning what they do: ``Pool.terminate`` (SIGTERM), and SIGKILL for any worker
    still alive ``grace`` seconds on. Returns within about ``grace`` + 2 s even where the pool's own shutdown
    hangs (a worker that ignores SIGTERM, a queue lock held by a dead worker); False where it had to kill."""
    import threading

    workers = list(getattr(pool, "_pool", []))
    closer = threading.Thread(target=pool.terminate, name="close-label-pool", daemon=True)
    closer.start()
    closer.join(grace)
    if not closer.is_alive():
        return True
    end = time.monotonic() + 2.0
    while time.monotonic() < end:
        alive = [p for p in {*workers, *getattr(pool, "_pool", [])} if p.exitcode is None]
        for process in alive:
            process.kill()
        for process in alive:
            process.join(0.2)
        closer.join(0.1)
        if not closer.is_alive():
            break
    return False


def make_selfplay(config: DistillConfig, teacher: teaching.Teacher, log) -> teaching.SelfPlayPositions:
    """The self-play source: games played by the teacher, or by ``--player``."""
    sizes = tuple(int(s) for s in config.sizes.split(",") if s.strip())
    settings = teaching.SelfPlaySettings(sizes=sizes, komi=config.komi, komi_spread=config.komi_spread,
                                         handicap_fraction=config.handicap_fraction,
                                         max_handicap=config.max_handicap,
                                         handicap_bonuses=handicap_bonuses(config), keep=config.keep)
    player = teacher
    if config.player:
        from tabula.engine.net.evaluator import OnnxEvaluator, katago_onnx

        player = OnnxEvaluator(katago_onnx(config.player, log), symmetry="identity", provider=config.provider,
                               threads=config.teacher_threads, log=log)
    return teaching.SelfPlayPositions(player, settings, seed=config.seed,
                                      board_sizes=getattr(player, "board_sizes", None))


def make_teacher(config: DistillConfig, log) -> teaching.Teacher:
    return teaching.Teacher(config.teacher, visits=config.visits, provider=config.provider,
                            threads=config.teacher_threads, batch=config.label_batch, symmetry=config.symmetry,
                            seed=config.seed, log=log, search_parallel=config.search_parallel,
                            student_encoding=config.student_encoding)


# The self-play labeller of a worker process (label_workers): its own teacher, and player where there is one
_worker: dict = {}


def _start_worker(config: DistillConfig) -> None:
    """A worker's start: its teacher and player. A failure is kept, to be raised by its tasks (an initializer that
    raises has the pool start workers over and over); Ctrl-C is the main process's to handle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)
    try:
        teacher = make_teacher(config, None)
        _worker.update(teacher=teacher, selfplay=make_selfplay(config, teacher, None))
    except (Exception, SystemExit) as error:
        _worker["error"] = str(error)


def _describe_worker() -> str:
    """In a worker: its teacher, or teaching.LabelError saying why it has none."""
    if "error" in _worker:
        raise teaching.LabelError(_worker["error"])
    return _worker["teacher"].describe()


def _label_games(chunk: int, games: list[int], deadline: float) -> dict[int, dict[str, np.ndarray]]:
    """In a worker: the label arrays by board size of games ``games`` of chunk ``chunk``."""
    if "error" in _worker:
        raise teaching.LabelError(_worker["error"])
    teacher, selfplay = _worker["teacher"], _worker["selfplay"]
    out = {}
    for size, (positions, evaluations) in selfplay.take(chunk, games, deadline).items():
        joined = teaching.join_evaluations(evaluations) if selfplay.player is teacher else None
        out[size] = teacher.label(positions, joined)
    return out


def records_cursor_of(label_dir: str) -> int:
    """The records cursor in the checkpoint of the run whose labels are in ``label_dir`` (0 where there is none):
    the records that run has labelled, which a run taking its labels skips when it labels on."""
    path = os.path.join(os.path.dirname(os.path.abspath(label_dir)), CHECKPOINT)
    try:
        return int(trainer.load_training_checkpoint(path).get("records_cursor", 0))
    except (OSError, RuntimeError, ValueError, KeyError):
        return 0


def taken_chunk(chunk: int, source: str, directory: str, encoding: str) -> dict:
    """Chunk ``chunk``'s label files copied from another run's label directory ``source`` (``--labels-from``), as
    ``label_chunk`` returns labelled ones; none once that run's chunks run out."""
    import shutil

    total, written, by_size, paths = 0, 0, {}, []
    for path in teaching.iter_label_files(source):
        name = os.path.basename(path)
        if _chunk_of(path) != f"{chunk:06d}":
            continue
        try:
            size, labels = teaching.read_labels(path, encoding)
        except teaching.LabelError as error:
            raise SystemExit(f"tabula distill: --labels-from: {error}") from None
        target = os.path.join(directory, name)
        shutil.copyfile(path, target + ".tmp.npz")
        os.replace(target + ".tmp.npz", target)
        count = len(labels["value"])
        total, written = total + count, written + os.path.getsize(target)
        by_size[str(size)] = by_size.get(str(size), 0) + count
        paths.append(target)
    return {"positions": total, "bytes": written, "by_size": by_size, "paths": paths}


def labelling_deadline(started: float, max_minutes: float, chunk_seconds: float) -> float:
    """When a chunk's self-play stops (``time.time()``), so that the chunk still trains within a run's time limit
    (``max_minutes`` from ``started``; 0: none): twice the last chunk's training time (``chunk_seconds``) before the
    end, or at 80% of the limit where no chunk has trained yet (0). A fixed 80% would leave the last fifth of a CPU
    run's small chunks to the records alone."""
    if max_minutes <= 0:
        return math.inf
    if chunk_seconds <= 0:
        return started + 48 * max_minutes
    return started + 60 * max_minutes - 2 * chunk_seconds


def label_chunk(teacher: teaching.Teacher | None, chunk: int, config: DistillConfig,
                records: teaching.RecordPositions | None, selfplay: teaching.SelfPlayPositions | None,
                directory: str, deadline: float = math.inf, pool=None, stopped=None,
                focus: teaching.RecordPositions | None = None) -> dict | None:
    """Label chunk ``chunk``'s positions and write them, one file a board size; returns their count and bytes.
    ``focus``: the focus records, ``config.focus_positions`` positions a chunk.
    ``pool``: worker processes that play and label the self-play games in place of ``selfplay``, each a share;
    None, and nothing written, where ``stopped()`` turns true while they work."""
    parts: dict[int, list[dict[str, np.ndarray]]] = {}

    def label(positions: list) -> None:
        for size, group in teaching.group_by_size(positions).items():
            parts.setdefault(size, []).append(teacher.label(group))

    pending = None
    if pool is not None:  # the workers play while this process labels the records
        workers = config.label_workers
        shares = [list(range(w, config.selfplay_games, workers)) for w in range(workers)]
        pending = pool.starmap_async(_label_games, [(chunk, games, deadline) for games in shares if games])
    taken: list = []
    if records is not None and not records.exhausted:
        share = config.records_share if config.selfplay_games > 0 else 1.0
        taken = records.take(max(1, round(config.chunk_positions * share))) if share > 0 else []
        label(taken)
    focused: list = []
    if focus is not None and not focus.exhausted:
        focused = focus.take(config.focus_positions)
        label(focused)
    if pending is not None:
        while not pending.ready():
            pending.wait(0.2)
            if stopped is not None and stopped() and not pending.ready():
                return None
        try:
            done = pending.get()
        except teaching.LabelError as error:
            raise SystemExit(f"tabula distill: a label worker: {error}") from None
        for labelled in done:
            for size, labels in labelled.items():
                parts.setdefault(size, []).append(labels)
    elif selfplay is not None:
        _worker.update(teacher=teacher, selfplay=selfplay)
        for size, labels in _label_games(chunk, list(range(config.selfplay_games)), deadline).items():
            parts.setdefault(size, []).append(labels)
    total, written, by_size, paths = 0, 0, {}, []
    for size, arrays in sorted(parts.items()):
        names = set.intersection(*(set(a) for a in arrays))
        joined = {name: np.concatenate([a[name] for a in arrays]) for name in sorted(names)}
        if any("ownership_known" in a for a in arrays):
            joined["ownership_known"] = np.concatenate([a.get("ownership_known", np.ones(len(a["value"]), np.uint8))
                                                        for a in arrays])
        path = os.path.join(directory, f"chunk-{chunk:06d}-{size}x{size}.npz")
        written += teaching.write_labels(path, size, joined, os.path.basename(config.teacher),
                                         config.student_encoding)
        paths.append(path)
        count = len(joined["value"])
        total += count
        by_size[str(size)] = count
    return {"positions": total, "bytes": written, "by_size": by_size, "paths": paths, "from_records": len(taken),
            "from_focus": len(focused)}


def main(argv: list[str] | None = None) -> int:
    config = parse_args(sys.argv[1:] if argv is None else argv)
    distill(config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
