"""`tabula rl`: the AlphaGo Zero loop from random weights — self-play into a replay window, the supervised trainer on
that window, ONNX export, gating against the best network, an Elo history — started, stopped and resumed from one
directory. One board size, or several in turn (``--sizes 9,13``) with one pooled-head network. Go by default; gomoku
with ``--game gomoku --n-in-row 5`` (the loop, the search and the trainer are the same; the network reads the game's
input planes, engine/net/encodings.py).

Layer: tools. Self-play and gating games run on ``tools.learn.selfplay`` workers (local processes or Ray); training is
``tools.learn.train.train`` unchanged, given ``engine.data.replay.MixedSizeSampler`` (batches of one board size each,
whose policy targets are the search's visit distributions) as its sampler; export is
``engine.net.network.export_onnx``; the Elo plot is ``tools.learn.plot.plot_elo``.

Run directory::

    config.json      the run's settings (fixed when the run starts; workers, Ray and time limits may change)
    state.json       generation, best network, its Elo, resignation threshold (rewritten atomically)
    replay/          the window: one shard per game (engine/data/replay.py); sgf/ every game as SGF
    train/           the trainer's run directory (checkpoint.pt, metrics.jsonl)
    nets/            gen-NNNN.onnx: every candidate; the best is named in state.json
    gating.jsonl     one line per evaluation game; elo.jsonl one line per evaluated candidate, with its score on
                     each board size and the window's games and black wins per size
    STOP             create it (or `tabula rl --dir D --stop`) to stop after the current game or step

``--keep DIR`` keeps a copy of what resumes the run (all of the above but the window, the SGF files and the networks
other than the best; a few MB) in DIR, e.g. one under git, after every generation and when the run stops. A run
directory without ``state.json`` (a new machine) is restored from there, and self-play refills the window.

    tabula rl --dir runs/rl9 --blocks 4 --filters 32 --visits 64 --workers 2      (rerun the same to resume)
    tabula rl --dir runs/rl9 --plot             (elo.png; the same as `tabula plot runs/rl9`)
    tabula rl --dir runs/rl9more --start-from weights/tabula-4x32-rl9.onnx ...   (continue a network by self-play)
    tabula rl --dir runs/any --start-from weights/tabula-6x64-anysize.onnx --sizes 9,13 ...   (games of each in turn)
    tabula rl --dir runs/gomoku9 --game gomoku --size 9 --n-in-row 5 ...        (freestyle five in a row on 9x9)
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import math
import os
import signal
import sys
import time
from dataclasses import dataclass

import numpy as np

from tabula.engine.data.replay import (
    AnchoredSampler,
    MixedSizeSampler,
    ReplayStore,
    SelfPlayGame,
    calibrate_resign_threshold,
    games_by_size,
    winner_triggers,
)
from tabula.engine.rules.coords import BLACK, WHITE
from tabula.gtp.flags import add_flags, from_flags
from tabula.tools.learn.keeping import copy_atomic, restore_kept
from tabula.tools.learn.plot import ELO, plot_elo, read_jsonl
from tabula.tools.learn.selfplay import (
    GatingTask,
    NetBlob,
    SelfPlayConfig,
    add_selfplay_flags,
    make_workers,
    play_gating_game,
    run_selfplay,
    selfplay_from_flags,
    selfplay_tasks,
)

CONFIG = "config.json"
STATE = "state.json"
GATING = "gating.jsonl"
STOP = "STOP"
# Settings that may change when a run is resumed (where to run, how long, the schedule, the komi spread training
# sees, the resignation ceiling); the rest is fixed.
MUTABLE = ("workers", "ray", "ray_address", "max_minutes", "generations", "train_threads", "train_workers",
           "games_per_generation", "train_steps", "gate_games", "keep", "train_komi_spread", "resign_ceiling",
           "min_positions", "train_komi_spread_score_only")


@dataclass(frozen=True)
class RLConfig:
    """The loop; saved with ``SelfPlayConfig`` in config.json."""

    blocks: int = 4
    filters: int = 32
    games_per_generation: int = 50  # self-play games between training chunks
    window_games: int = 2000  # the replay window: the newest games (AGZ: 500,000)
    min_positions: int = 1000  # recorded positions in the window before the first training
    train_steps: int = 100  # optimizer steps per generation
    batch: int = 128
    optimizer: str = "sgd"  # sgd | adamw (the supervised trainer's)
    lr: float = 0.02
    weight_decay: float = 1e-4
    warmup_steps: int = 50
    policy_loss_weight: float = 1.0  # the policy's share of the loss (the value's is 1): below 1 to fine-tune a
    # network whose policy low-visit targets would pull down, while its value learns the games' outcomes
    freeze_batchnorm: bool = False  # keep the start network's batch-norm statistics (19×19 records' for a network
    # trained on them: small-board batches would replace them)
    train_only: str = ""  # train only the parameters with these name prefixes, e.g. "head.value" ("": all)
    # each generation's network the trainer's moving average of its weights (this decay a step; 0: the weights as
    # trained): a fine-tune at a constant rate on a small window swings from generation to generation without it
    ema_decay: float = 0.0
    anchor_data: str = ""  # `tabula prepare` directories of records (comma-separated) whose train shards anchor the
    # training: a share of the batches comes from them (engine.data.replay.AnchoredSampler)
    anchor_shards: int = 0  # of those shards, the first this many (0: all; each is about a million positions)
    anchor_fraction: float = 0.0  # the share of batches drawn from the anchor
    # points: each counted game in the window (and the anchor) seen at a komi moved by a normal draw of this spread,
    # its result the margin's there (PositionSampler._moved_komi), so that a network that sees the komi learns what
    # a point is worth from every counted game, not only from the komi each was played at (0: their own komi)
    train_komi_spread: float = 0.0
    # with train_komi_spread: a position at a moved komi trains the score alone, not the value (PositionSampler)
    train_komi_spread_score_only: bool = False
    gate_games: int = 20  # evaluation games per candidate (AGZ: 400; 0: accept every candidate, as AlphaZero)
    gate_threshold: float = 0.55  # score the candidate needs to replace the best
    gate_visits: int = 32
    resign_false_positive: float = 0.05  # AGZ: keep resignations that lose a won game under 5%
    resign_min_games: int = 20  # calibration games needed before anyone resigns
    resign_ceiling: float = 0.2  # the calibrated threshold never exceeds this winrate
    seed: int = 1
    workers: int = 1  # self-play processes (or Ray CPUs when Ray is started here)
    ray: bool = False  # run games as Ray tasks on a Ray instance started here
    ray_address: str = ""  # join this Ray cluster instead
    generations: int = 0  # stop after this many generations (0: until stopped)
    max_minutes: float = 0.0  # stop after this much wall time in this invocation (0: none)
    train_threads: int = 2  # torch threads of the trainer
    train_workers: int = 1  # the trainer's data-loading processes (the self-play workers are idle meanwhile)
    start_from: str = ""  # generation 0 and the trainer's first weights: this Tabula ONNX file ("": random weights)
    head: str = "agz"  # agz (one board size) | pooled (every size, so --sizes; --start-from a pooled network sets it)
    aux: bool = False  # pooled head: score, ownership and opponent-reply heads, trained on the games' final counts
    small_board_value: bool = False  # pooled head: the value's small-board term (engine.net.network.PooledHead)
    keep: str = ""  # also keep what resumes the run in this directory, e.g. one under git ("": nowhere)
    # the network's input encoding (engine.net.encodings): "" the game's own (Go: leelaz-18, or the --start-from
    # network's); leelaz-18+komi: a Go network that sees the komi (a --start-from network without it is extended)
    input_encoding: str = ""


# -- files ----------------------------------------------------------------------------------------------------------


def _write_json(path: str, data: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        json.dump(data, handle, indent=2, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _append_jsonl(path: str, record: dict) -> None:
    with open(path, "a+b") as handle:
        torn = False
        if handle.seek(0, os.SEEK_END) > 0:
            handle.seek(-1, os.SEEK_END)
            torn = handle.read(1) != b"\n"
        # After a line torn by a kill, start a new one: the next record must not be glued to the torn one.
        handle.write((b"\n" if torn else b"") + json.dumps(record, sort_keys=True).encode() + b"\n")
        handle.flush()
        os.fsync(handle.fileno())


def saved_config(directory: str) -> tuple[RLConfig, SelfPlayConfig] | None:
    path = os.path.join(directory, CONFIG)
    if not os.path.exists(path):
        return None
    with open(path) as handle:
        saved = json.load(handle)
    return RLConfig(**saved["rl"]), SelfPlayConfig.from_dict(saved["selfplay"])


def input_encoding(selfplay: SelfPlayConfig, rl: RLConfig | None = None) -> str:
    """The run's network input (engine.net.encodings): ``rl.input_encoding`` where given, else that of the run's
    game, as its positions name it."""
    from tabula.engine.net.encodings import encoding_of

    if rl is not None and rl.input_encoding:
        return rl.input_encoding
    return encoding_of(selfplay.game_spec.new_state(selfplay.sizes[0])).name


def check_sizes(rl: RLConfig, selfplay: SelfPlayConfig) -> None:
    """Several board sizes need one network that plays them all: the pooled head; and the architecture's own checks
    (the auxiliary heads and the small-board value term need the pooled head too) hold."""
    from tabula.engine.net.network import NetSpec

    if len(set(selfplay.sizes)) > 1 and rl.head != "pooled":
        raise SystemExit(f"tabula rl: --sizes {','.join(map(str, selfplay.sizes))} needs the pooled head (--head "
                         f"pooled, or --start-from a pooled network): the {rl.head} head plays one board size")
    try:
        spec = NetSpec(blocks=rl.blocks, filters=rl.filters, head=rl.head, aux=rl.aux,
                       small_board_value=rl.small_board_value, input_encoding=input_encoding(selfplay, rl))
        if not spec.encoding.accepts(selfplay.game_spec.new_state(selfplay.sizes[0])):
            raise ValueError(f"--input-encoding {spec.input_encoding} is not an input of {selfplay.game}'s positions")
        if not (math.isfinite(rl.train_komi_spread) and rl.train_komi_spread >= 0):
            raise ValueError(f"--train-komi-spread {rl.train_komi_spread}: a standard deviation in points, 0 or more")
        if not (0.0 <= rl.ema_decay < 1.0):
            raise ValueError(f"--ema-decay {rl.ema_decay}: a decay a step, at least 0 and below 1")
        if rl.train_komi_spread > 0 and spec.encoding.komi_plane is None:
            raise ValueError(f"--train-komi-spread moves the komi a network sees; {spec.input_encoding} has no komi "
                             f"input (--input-encoding leelaz-18+komi)")
    except ValueError as error:
        raise SystemExit(f"tabula rl: {error}") from None


def settle_config(directory: str, rl: RLConfig, selfplay: SelfPlayConfig) -> tuple[RLConfig, SelfPlayConfig]:
    """Save a new run's settings; check a resumed run's against its saved ones (only ``MUTABLE`` may differ)."""
    os.makedirs(directory, exist_ok=True)
    saved = saved_config(directory)
    if saved is not None:
        fixed_rl = dataclasses.replace(rl, **{k: getattr(saved[0], k) for k in MUTABLE})
        if fixed_rl != saved[0] or selfplay != saved[1]:
            different = [f.name for cls, new, old in ((RLConfig, fixed_rl, saved[0]),
                                                       (SelfPlayConfig, selfplay, saved[1]))
                         for f in dataclasses.fields(cls) if getattr(new, f.name) != getattr(old, f.name)]
            raise SystemExit(f"tabula rl: {directory} is a run with other {', '.join(different)}; "
                             f"only {', '.join(MUTABLE)} may change on resume")
    _write_json(os.path.join(directory, CONFIG), {"rl": dataclasses.asdict(rl),
                                                  "selfplay": dataclasses.asdict(selfplay)})
    return rl, selfplay


# -- training through the supervised trainer ----------------------------------------------------------------------


def train_config(directory: str, rl: RLConfig, selfplay: SelfPlayConfig):
    """The supervised trainer's settings for this run: one endless run, trained ``train_steps`` at a time, in bf16
    autocast where the hardware has it, as the supervised runs (a 6×64 chunk ran 1.6× as fast as in fp32:
    docs/BENCHMARKS.md)."""
    from tabula.tools.learn.train import TrainConfig

    return TrainConfig(data=os.path.join(directory, "replay"), out=os.path.join(directory, "train"),
                       blocks=rl.blocks, filters=rl.filters, steps=1 << 40, batch=rl.batch, optimizer=rl.optimizer,
                       lr=rl.lr, weight_decay=rl.weight_decay, warmup_steps=rl.warmup_steps, lr_drops="",
                       policy_loss_weight=rl.policy_loss_weight, freeze_batchnorm=rl.freeze_batchnorm,
                       train_only=rl.train_only, ema_decay=rl.ema_decay,
                       seed=rl.seed, device="cpu", precision="auto", threads=rl.train_threads,
                       workers=rl.train_workers,
                       val_every=1 << 40, val_positions=0, log_every=max(1, rl.train_steps // 2),
                       checkpoint_every=1 << 40, checkpoint_minutes=1e9, chunk_steps=rl.train_steps, export=False,
                       init=os.path.join(directory, INIT_CHECKPOINT) if rl.start_from else "", head=rl.head,
                       aux=rl.aux, small_board_value=rl.small_board_value,
                       input_encoding=input_encoding(selfplay, rl))


def trained_steps(directory: str) -> int:
    from tabula.tools.learn.train import CHECKPOINT, load_training_checkpoint

    path = os.path.join(directory, "train", CHECKPOINT)
    return int(load_training_checkpoint(path)["step"]) if os.path.exists(path) else 0


def window_sampler(rl: RLConfig):
    """The trainer's sampler maker for this run: the window alone, or anchored by record shards."""
    spread = rl.train_komi_spread
    moved_value = not rl.train_komi_spread_score_only
    if not rl.anchor_data or rl.anchor_fraction <= 0:
        return (functools.partial(MixedSizeSampler, komi_spread=spread, moved_value=moved_value) if spread
                else MixedSizeSampler)
    from tabula.tools.learn.train import all_shard_paths

    anchor = all_shard_paths(rl.anchor_data, "train")
    anchor = anchor[:rl.anchor_shards] if rl.anchor_shards > 0 else anchor
    if not anchor:
        raise SystemExit(f"tabula rl: no train-*.tshard files in --anchor-data {rl.anchor_data}")
    return lambda paths: AnchoredSampler(paths, anchor, rl.anchor_fraction, komi_spread=spread,
                                         moved_value=moved_value)


def train_chunk(directory: str, rl: RLConfig, selfplay: SelfPlayConfig, target_step: int, log) -> int:
    """Train up to ``target_step`` (resuming the trainer's checkpoint); returns the step reached."""
    from tabula.tools.learn.train import train

    config = dataclasses.replace(train_config(directory, rl, selfplay),
                                 chunk_steps=max(1, target_step - trained_steps(directory)))
    train(config, log=log, make_sampler=window_sampler(rl), fixed_data=False)
    return trained_steps(directory)


def export_candidate(directory: str, path: str, generation: int) -> None:
    """The trainer's checkpoint as ONNX, atomically, with the exporter every Tabula network goes through."""
    from tabula.engine.net.network import export_onnx, load_checkpoint

    model = load_checkpoint(os.path.join(directory, "train", "checkpoint.pt"))
    tmp = path + ".tmp.onnx"
    export_onnx(model, tmp, f"tabula rl: {os.path.basename(os.path.normpath(directory))} generation {generation}")
    os.replace(tmp, path)


INIT_CHECKPOINT = "start.pt"  # in the run directory: --start-from's weights, where the trainer's first chunk begins


def start_network_spec(path: str, sizes: tuple[int, ...], encoding: str = "leelaz-18"):
    """The architecture of a ``--start-from`` network, checked against the run: one that plays every one of
    ``sizes`` (an AlphaGo Zero head made for the one size, or a pooled head whose file lists them all), valued from
    the side to move's view, of the run's game (its positions' input ``encoding``, or one that reads them: Go's
    leelaz-18+komi)."""
    from tabula.engine.net.evaluator import NetworkFileError, OnnxEvaluator
    from tabula.engine.net.network import AGZ, SIDE_TO_MOVE, NetSpec

    try:
        evaluator = OnnxEvaluator(path, symmetry="identity", provider="cpu", log=None)
        spec = NetSpec.from_dict(json.loads(evaluator.metadata["architecture"]))
    except (NetworkFileError, KeyError, TypeError, ValueError) as e:
        raise SystemExit(f"tabula rl: --start-from {path}: {e}") from None
    if (spec.encoding.state_encoding or spec.input_encoding) != encoding:
        raise SystemExit(f"tabula rl: --start-from {path} reads {spec.input_encoding} input planes; the run's game "
                         f"reads {encoding}")
    sizes_text = f"{spec.board_size}x{spec.board_size}" if spec.head == AGZ else "its sizes"
    plays = set(sizes) <= ({spec.board_size} if spec.head == AGZ else set(evaluator.board_sizes))
    if not plays or spec.value_perspective != SIDE_TO_MOVE:
        run_sizes = ", ".join(f"{s}x{s}" for s in sorted(set(sizes)))
        raise SystemExit(f"tabula rl: --start-from {path} is a {spec.head} network for {sizes_text}, valued from "
                         f"{spec.value_perspective}'s view; the run plays {run_sizes} and trains values from the "
                         f"side to move's view")
    return spec


def adopt_start_network(rl: RLConfig, sizes: tuple[int, ...], encoding: str = "leelaz-18") -> RLConfig:
    """A run that starts from a network takes that network's architecture: blocks, filters, head, auxiliary heads,
    small-board value term. ``encoding``: the run's game's network input, which the network must read."""
    if not rl.start_from:
        return rl
    spec = start_network_spec(rl.start_from, sizes, encoding)
    if rl.small_board_value and not spec.small_board_value:
        raise SystemExit(f"tabula rl: --start-from {rl.start_from} has no small-board value term; add it with "
                         f"`tabula export --add-small-board-value {rl.start_from} OUT.onnx` and start from OUT.onnx")
    wanted = rl.input_encoding or spec.input_encoding
    if wanted != spec.input_encoding and not extends_with_komi(spec.input_encoding, wanted, spec.head):
        raise SystemExit(f"tabula rl: --start-from {rl.start_from} reads {spec.input_encoding} input planes, not "
                         f"--input-encoding {wanted}")
    return dataclasses.replace(rl, blocks=spec.blocks, filters=spec.filters, head=spec.head, aux=spec.aux,
                               small_board_value=spec.small_board_value,
                               input_encoding="" if wanted == encoding else wanted)


def extends_with_komi(start: str, wanted: str, head: str) -> bool:
    """Whether a start network of input ``start`` becomes one of ``wanted`` by ``network.with_komi_input``."""
    from tabula.engine.net.features import INPUT_ENCODING, KOMI_INPUT_ENCODING

    return start == INPUT_ENCODING and wanted == KOMI_INPUT_ENCODING and head == "pooled"


def initial_network(path: str, rl: RLConfig, size: int, directory: str, encoding: str = "leelaz-18") -> None:
    """Generation 0: the ``--start-from`` network (copied, and its weights saved where the trainer starts), or the
    trainer's own starting weights (same seed, same initialisation), exported. ``size``: the agz head's one board
    size (the pooled head plays every size); ``encoding``: the game's network input."""
    import torch

    from tabula.engine.net.network import NetSpec, TabulaNet, export_onnx, load_onnx, save_checkpoint, with_komi_input

    if rl.start_from:
        start = os.path.join(directory, INIT_CHECKPOINT)
        model = load_onnx(rl.start_from)
        extend = extends_with_komi(model.spec.input_encoding, encoding, model.spec.head)
        if extend:
            model = with_komi_input(model)
        save_checkpoint(model, start + ".tmp")
        os.replace(start + ".tmp", start)
        if extend:
            export_onnx(model, path + ".tmp.onnx", f"{os.path.basename(rl.start_from)} with a zero komi input",
                        _declared_sizes(rl.start_from))
            os.replace(path + ".tmp.onnx", path)
            return
        with open(rl.start_from, "rb") as source, open(path + ".tmp.onnx", "wb") as target:
            target.write(source.read())
            target.flush()
            os.fsync(target.fileno())
        os.replace(path + ".tmp.onnx", path)
        return
    torch.manual_seed(rl.seed)
    model = TabulaNet(NetSpec(blocks=rl.blocks, filters=rl.filters, head=rl.head, board_size=size,
                              aux=rl.aux, small_board_value=rl.small_board_value, input_encoding=encoding)).eval()
    tmp = path + ".tmp.onnx"
    export_onnx(model, tmp, "tabula rl: random initial weights")
    os.replace(tmp, path)


def _declared_sizes(path: str) -> list[int] | None:
    """The board sizes an ONNX file's metadata declares (None: the default)."""
    import onnx

    declared = {p.key: p.value for p in onnx.load(path).metadata_props}.get("board_sizes", "")
    return [int(s) for s in declared.split(",")] if declared else None


# -- keeping a run where a new machine finds it -----------------------------------------------------------------


def keep_run(directory: str, keep: str, state: dict) -> None:
    """Copy into ``keep`` what resumes the run: its settings, the Elo and gating logs, the trainer's checkpoint (or,
    before the first chunk, the weights it starts from), the best network, and the state last. Not the replay
    window (training data stays out of git) nor the SGF files; older networks kept before are removed."""
    from tabula.tools.learn.train import CHECKPOINT

    checkpoint = os.path.join("train", CHECKPOINT)
    weights = checkpoint if os.path.exists(os.path.join(directory, checkpoint)) else INIT_CHECKPOINT
    for name in (CONFIG, ELO, GATING, weights, state["best"], STATE):
        source = os.path.join(directory, name)
        if not os.path.exists(source) or (name == state["best"] and os.path.exists(os.path.join(keep, name))):
            continue  # a generation's network never changes once written
        copy_atomic(source, os.path.join(keep, name))
    stale = [os.path.join("nets", name) for name in os.listdir(os.path.join(keep, "nets"))
             if os.path.join("nets", name) != state["best"]] if os.path.isdir(os.path.join(keep, "nets")) else []
    if weights == checkpoint:
        stale.append(INIT_CHECKPOINT)
    for name in stale:
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(keep, name))


def restore_kept_run(directory: str, keep: str) -> bool:
    """On a new machine (``directory`` has no state) copy the run kept in ``keep`` into it, the state last, so that
    a kill part-way restores it again next time. False when there is nothing to restore; SystemExit when
    ``directory`` holds another run or one behind the kept one (keeping it would overwrite the newer)."""
    kept_state = os.path.join(keep, STATE)
    if not keep or not os.path.exists(kept_state):
        return False
    with open(kept_state) as handle:
        kept = json.load(handle)
    if os.path.exists(os.path.join(directory, STATE)):
        with open(os.path.join(directory, STATE)) as handle:
            here = json.load(handle)
        behind = kept.get("tasks_issued", 0) > here.get("tasks_issued", 0)
        if behind or not _same_run(saved_config(directory), saved_config(keep)):
            raise SystemExit(f"tabula rl: {keep} keeps {'a run ahead of' if behind else 'another run than'} the one in "
                             f"{directory}; move {directory} away to resume from {keep}, or keep elsewhere")
        return False
    # The logs are copied before the state when kept, so a kill in between can leave lines of a generation the
    # state has not reached: drop them (at worst a gate is played again) rather than trust a decision the state
    # never recorded.
    os.makedirs(directory, exist_ok=True)
    for name in (ELO, GATING):
        lines = [line for line in read_jsonl(os.path.join(keep, name)) if line["generation"] < kept["generation"]]
        with open(os.path.join(directory, name) + ".tmp", "w") as handle:
            handle.writelines(json.dumps(line, sort_keys=True) + "\n" for line in lines)
        os.replace(os.path.join(directory, name) + ".tmp", os.path.join(directory, name))
    return restore_kept(directory, keep, STATE, skip=(ELO, GATING))


def _same_run(here: tuple[RLConfig, SelfPlayConfig] | None, kept: tuple[RLConfig, SelfPlayConfig] | None) -> bool:
    """Whether two saved configurations are of one run: equal but for what may change on resume (``MUTABLE``)."""
    if here is None or kept is None:
        return here is kept
    fixed = {k: getattr(here[0], k) for k in MUTABLE}
    return dataclasses.replace(kept[0], **fixed) == here[0] and kept[1] == here[1]


# -- Elo ------------------------------------------------------------------------------------------------------------


def gating_score(games: list[dict]) -> tuple[float, int, int, int]:
    """(candidate's score in [0, 1], wins, losses, draws)."""
    wins = sum(g["winner"] == g["candidate_color"] for g in games)
    draws = sum(g["winner"] == 0 for g in games)
    losses = len(games) - wins - draws
    return ((wins + 0.5 * draws) / len(games) if games else 0.5), wins, losses, draws


def gating_by_size(games: list[dict], default_size: int) -> dict[str, dict]:
    """The candidate's result on each board size, {"9": {"score", "wins", "losses", "draws"}}, smallest first;
    a game recorded without its size (a run from before sizes) is of ``default_size``."""
    sizes = sorted({g.get("size", default_size) for g in games})
    results = {}
    for size in sizes:
        score, wins, losses, draws = gating_score([g for g in games if g.get("size", default_size) == size])
        results[str(size)] = {"score": score, "wins": wins, "losses": losses, "draws": draws}
    return results


def size_results(by_size: dict[str, dict], separator: str) -> str:
    """``separator`` + "9x9 7-3, 13x13 5-5": the wins and losses on each board size, where there are several
    ("" where there is one: the total says it)."""
    if len(by_size) < 2:
        return ""
    return separator + ", ".join(f"{size}x{size} {r['wins']}-{r['losses']}" for size, r in by_size.items())


def elo_difference(score: float, games: int) -> float:
    """Elo from a score, with 0 and 1 pulled in by half a game (a finite estimate from small matches)."""
    from tabula.tools.compete.elo import elo_from_score

    if games <= 0:
        return 0.0
    clipped = min(max(score, 0.5 / games), 1.0 - 0.5 / games)
    return elo_from_score(clipped)


# -- the loop -------------------------------------------------------------------------------------------------------


class Loop:
    """One run directory's loop. ``run()`` plays generations until told to stop; everything it needs to resume is
    on disk after every game, training chunk and evaluation game."""

    def __init__(self, directory: str, rl: RLConfig, selfplay: SelfPlayConfig, log=None):
        check_sizes(rl, selfplay)
        self.directory = directory
        self.rl, self.selfplay = settle_config(directory, rl, selfplay)
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self.nets = os.path.join(directory, "nets")
        os.makedirs(self.nets, exist_ok=True)
        self.state_path = os.path.join(directory, STATE)
        self.state = self._load_state()
        # a ceiling lowered on resume holds at once, for the games this generation still plays and in its status
        self.state["resign_threshold"] = min(self.state["resign_threshold"], self.rl.resign_ceiling)
        self.started = time.time()
        self.session_games = 0
        self._signal = None

    def _load_state(self) -> dict:
        if os.path.exists(self.state_path):
            with open(self.state_path) as handle:
                return json.load(handle)
        best = os.path.join(self.nets, "gen-0000.onnx")
        if not os.path.exists(best):
            initial_network(best, self.rl, self.selfplay.sizes[0], self.directory,
                            input_encoding(self.selfplay, self.rl))
        state = {"generation": 1, "best": os.path.relpath(best, self.directory), "best_generation": 0,
                 "best_elo": 0.0, "resign_threshold": 0.0, "selfplay_target": self.rl.games_per_generation,
                 "train_target": 0, "train_generation": 0}
        _write_json(self.state_path, state)
        return state

    def _save_state(self) -> None:
        _write_json(self.state_path, self.state)

    def stopping(self) -> bool:
        if self._signal is not None or os.path.exists(os.path.join(self.directory, STOP)):
            return True
        if self.rl.max_minutes > 0 and time.time() - self.started >= 60 * self.rl.max_minutes:
            return True
        return False

    def status(self, store: ReplayStore, positions: int | None = None, window: dict[int, dict] | None = None) -> str:
        """One line; ``window``: per board size, the window's games, black's share of wins and recorded positions
        (black's share is the first-move bias of self-play, which the value targets inherit)."""
        hours = max(time.time() - self.started, 1e-9) / 3600
        positions_text = f", {positions} positions in window" if positions is not None else ""
        if window:
            positions_text += " (" + "; ".join(
                f"{size}x{size}: {w['games']} games, {w['positions']} positions, black won {100 * w['black_wins']:.0f}%"
                for size, w in window.items()) + ")"
        return (f"gen {self.state['generation']}: {store.total} games ({self.session_games / hours:.0f} games/h)"
                f"{positions_text}, best gen {self.state['best_generation']} Elo {self.state['best_elo']:+.0f}, "
                f"resign < {100 * self.state['resign_threshold']:.1f}%")

    def run(self) -> dict:
        rl = self.rl
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        workers = make_workers(rl.workers, rl.ray, rl.ray_address)
        self.log(f"tabula rl: {self.directory} on {workers.describe()}")
        try:
            with self._open_store() as store:
                done = 0
                while not self.stopping():
                    if rl.generations and done >= rl.generations:
                        break
                    if not self._generation(store, workers):
                        break
                    done += 1
                    self._keep()
                self._keep()
                self.log("tabula rl: stopped; " + self.status(store))
        finally:
            workers.close()
            for s, handler in previous.items():
                signal.signal(s, handler)
        return self.state

    def _open_store(self) -> ReplayStore:
        """The replay window. One that is empty although the run has played games was lost with its machine (a run
        restored from ``--keep``): its numbering goes on from the games issued, and self-play refills it, a
        generation's games from there, before training goes on."""
        rl = self.rl
        path, issued = os.path.join(self.directory, "replay"), self.state.get("tasks_issued", 0)
        store = ReplayStore(path, rl.window_games)
        if store.total == 0 and issued > 0 and trained_steps(self.directory) > 0:
            store.close()
            store = ReplayStore(path, rl.window_games, first=issued)
            # Four generations' games (at most a window): trained on one generation's alone, the next chunk would
            # see each of its positions some ten times.
            refill = max(rl.games_per_generation, min(rl.window_games or issued, 4 * rl.games_per_generation))
            self.state["selfplay_target"] = issued + refill
            self._save_state()
            self.log(f"tabula rl: the replay window is empty after {issued} games issued (a new machine?): self-play "
                     f"refills it with {refill} games")
        return store

    def _keep(self) -> None:
        if self.rl.keep:
            keep_run(self.directory, self.rl.keep, self.state)

    def _on_signal(self, signum, _frame) -> None:
        self._signal = signum
        self.log("tabula rl: stopping after the current game or training step")

    def _generation(self, store: ReplayStore, workers) -> bool:
        """One generation: self-play, train, export, gate. False when stopped part-way (resume continues)."""
        state, rl = self.state, self.rl
        generation = state["generation"]
        if store.total < state["selfplay_target"] and not self._selfplay(store, workers):
            return False
        targets = self._window_targets(store)
        sampler_positions = sum(targets.values())
        if sampler_positions < rl.min_positions:
            self.log(f"tabula rl: {sampler_positions} recorded positions in the window, training starts at "
                     f"{rl.min_positions}")
            state["selfplay_target"] = store.total + rl.games_per_generation
            self._save_state()
            return True
        # The chunk's target is fixed once per generation: a resume after the chunk (during export or gating) must
        # not read "target reached" as "start the next chunk".
        trained = trained_steps(self.directory)
        candidate = os.path.join(self.nets, f"gen-{generation:04d}.onnx")
        if "train_generation" not in state:  # a run from before the field: was this generation's chunk started?
            started = trained < state["train_target"] or os.path.exists(candidate)
            state["train_generation"] = generation if started else generation - 1
        if state["train_generation"] != generation:
            state["train_target"] = trained + rl.train_steps
            state["train_generation"] = generation
            self._save_state()
        if trained < state["train_target"]:
            reached = train_chunk(self.directory, rl, self.selfplay, state["train_target"],
                                  log=lambda line: self.log("  " + line))
            if reached < state["train_target"]:
                return False
        if not os.path.exists(candidate):
            export_candidate(self.directory, candidate, generation)
        games = store.games()
        window = {size: {**counts, "positions": targets.get(size, 0)} for size, counts in games_by_size(games).items()}
        if not self._gate(store, workers, generation, candidate, window):
            return False
        state["generation"] = generation + 1
        state["selfplay_target"] = store.total + rl.games_per_generation
        state["resign_threshold"] = self._resign_threshold(games)
        self._save_state()
        self.log("tabula rl: " + self.status(store, sampler_positions, window))
        return True

    def _window_targets(self, store: ReplayStore) -> dict[int, int]:
        """Recorded positions of each board size in the window."""
        paths = store.paths()
        if not paths:
            return {}
        try:
            return MixedSizeSampler(paths).targets_by_size
        except ValueError:
            return {}

    def _resign_threshold(self, games: list[SelfPlayGame]) -> float:
        # One threshold for every board size: a winrate means the same on each, and the calibration games of all
        # sizes together reach resign_min_games sooner. Each game's own size sets the opening in which it is not
        # judged (winner_triggers), as it sets when a game may resign (MoveDecider).
        triggers = winner_triggers(games, self.selfplay.resign_consecutive)
        return calibrate_resign_threshold(triggers, self.rl.resign_false_positive, self.rl.resign_min_games,
                                          self.rl.resign_ceiling)

    def _selfplay(self, store: ReplayStore, workers) -> bool:
        from tqdm import tqdm

        state = self.state
        count = state["selfplay_target"] - store.total
        best = NetBlob.load(os.path.join(self.directory, state["best"]))
        # Task numbers never repeat, even for games lost in flight, so no two games share a seed.
        first = max(state.get("tasks_issued", 0), store.total)
        tasks = selfplay_tasks(best, self.selfplay, count, self.rl.seed, first, state["resign_threshold"])
        state["tasks_issued"] = first + count
        self._save_state()
        bar = tqdm(total=count, desc=f"gen {state['generation']} self-play", unit="game", file=sys.stderr,
                   leave=False)

        def on_game(game) -> None:
            self.session_games += 1
            bar.update(1)
            bar.set_postfix_str(self.status(store))

        try:
            run_selfplay(store, os.path.join(self.directory, "sgf"), tasks, workers, on_game, self.stopping)
        finally:
            bar.close()
        return store.total >= state["selfplay_target"]

    def _gate(self, store: ReplayStore, workers, generation: int, candidate: str, window: dict[int, dict]) -> bool:
        """Evaluate ``candidate`` against the best (resuming its games); record Elo, with the results on each board
        size and the window's ``window`` summary; replace the best if it wins."""
        from tqdm import tqdm

        state, rl = self.state, self.rl
        gating_path = os.path.join(self.directory, GATING)
        elo_path = os.path.join(self.directory, ELO)
        # A kill between the Elo line and the state save leaves the generation decided: reuse it, play nothing more.
        recorded = [h for h in read_jsonl(elo_path) if h["generation"] == generation]
        played = [g for g in read_jsonl(gating_path) if g["generation"] == generation]
        wanted = rl.gate_games
        if len(played) < wanted and not recorded:
            blobs = NetBlob.load(candidate), NetBlob.load(os.path.join(self.directory, state["best"]))
            indices = sorted(set(range(wanted)) - {g["game"] for g in played})
            # The sizes in turn, a pair of games (one with each colour) at a time, so that every size counts and
            # the candidate plays black as often as white on each.
            tasks = [GatingTask(blobs[0], blobs[1], BLACK if i % 2 == 0 else WHITE, self.selfplay, rl.gate_visits,
                                int(np.random.default_rng([rl.seed, generation, i, 17]).integers(1 << 62)),
                                self.selfplay.game_size(i // 2), i)
                     for i in indices]
            bar = tqdm(total=wanted, initial=len(played), desc=f"gen {generation} gating", unit="game",
                       file=sys.stderr, leave=False)
            try:
                for result in workers.map_unordered(play_gating_game, tasks):
                    record = {"generation": generation, **result}
                    _append_jsonl(gating_path, record)
                    played.append(record)
                    bar.update(1)
                    score, *_ = gating_score(played)
                    bar.set_postfix_str(f"candidate {100 * score:.0f}%")
                    if self.stopping():
                        break
            finally:
                bar.close()
            if len(played) < wanted:
                return False
        if recorded:
            record = recorded[-1]
            score, wins, losses, elo, accepted = (record[k] for k in ("score", "wins", "losses", "elo", "accepted"))
            by_size = record.get("by_size", {})
        else:
            score, wins, losses, draws = gating_score(played)
            by_size = gating_by_size(played, self.selfplay.sizes[0])
            accepted = wanted == 0 or score >= rl.gate_threshold
            elo = state["best_elo"] + elo_difference(score, len(played)) if wanted else state["best_elo"]
            record = {"generation": generation, "net": os.path.relpath(candidate, self.directory),
                      "games": store.total, "steps": trained_steps(self.directory), "score": score, "wins": wins,
                      "losses": losses, "draws": draws, "elo": elo, "accepted": accepted, "opponent": state["best"],
                      "time": time.time(), "by_size": by_size,
                      "window": {str(size): summary for size, summary in window.items()}}
            _append_jsonl(elo_path, record)
        self.log(f"tabula rl: generation {generation} scored {100 * score:.0f}% ({wins}-{losses}"
                 f"{size_results(by_size, '; ')}) against {state['best']}: {'accepted' if accepted else 'rejected'}, "
                 f"Elo {elo:+.0f}")
        if accepted:
            state.update(best=record["net"], best_generation=generation, best_elo=elo)
        return True


# -- command line ---------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tabula rl", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", required=True, help="run directory (rerun the same command to resume)")
    parser.add_argument("--stop", action="store_true", help="ask the run in --dir to stop, and return")
    parser.add_argument("--plot", action="store_true", help="write --dir/elo.png from the Elo history, and return")
    parser.add_argument("--status", action="store_true", help="print the run's state and Elo history, and return")
    add_flags(parser, RLConfig, keep_unset=True)
    add_selfplay_flags(parser)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.stop:
        open(os.path.join(args.dir, STOP), "w").close()
        return 0
    if args.plot:
        print(plot_elo(args.dir))
        return 0
    if args.status:
        with open(os.path.join(args.dir, STATE)) as handle:
            print(json.dumps(json.load(handle), indent=2))
        for h in read_jsonl(os.path.join(args.dir, ELO)):
            print(f"gen {h['generation']:4d}  {h['games']:6d} games  {h['steps']:6d} steps  score "
                  f"{100 * h['score']:5.1f}%  Elo {h['elo']:+7.0f}  {'accepted' if h['accepted'] else 'rejected'}"
                  + size_results(h.get("by_size", {}), "  "))
        return 0
    with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(args.dir, STOP))
    if args.keep and restore_kept_run(args.dir, args.keep):
        print(f"tabula rl: restored the run kept in {args.keep}", file=sys.stderr, flush=True)
    saved = saved_config(args.dir)  # a resumed run: options not given keep their saved values
    rl = from_flags(saved[0] if saved else RLConfig, args)
    selfplay = selfplay_from_flags(parser, saved[1] if saved else SelfPlayConfig, args)
    if not saved:
        rl = adopt_start_network(rl, selfplay.sizes, input_encoding(selfplay))
    Loop(args.dir, rl, selfplay).run()
    return 0


__all__ = ["RLConfig", "Loop", "check_sizes", "settle_config", "train_config", "gating_score", "gating_by_size",
           "elo_difference", "read_jsonl", "keep_run", "restore_kept_run"]


if __name__ == "__main__":
    sys.exit(main())
