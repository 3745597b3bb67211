"""`tabula train`: supervised training of the AGZ network on prepared shards, resumable after a kill at any moment.

Loss (AlphaGo Zero): ``policy_loss_weight`` × policy cross-entropy + ``value_loss_weight`` × value MSE (both 1 by
default), and L2 through the optimizer's weight decay. Optimizer: SGD with Nesterov momentum and a step schedule
(AGZ's recipe; weight decay is then exactly an L2 term, and the run is cheap to reason about); ``--optimizer adamw``
for short runs where tuning time is scarce.

Resuming: batch ``s`` is a pure function of (seed, s) (``PositionSampler.batch_for_step``), the learning rate a
pure function of s, so a checkpoint of model, optimizer, step and torch RNG is the whole state. Checkpoints are
written atomically (temporary file, fsync, rename); rerunning the same command continues from the last one. Run
directory: config.json, checkpoint.pt (loads with ``weights_only=True``), metrics.jsonl, model.onnx at the end.

``--synthetic SIZE`` trains on random batches of that board size instead of shards: nothing to learn, but the
training step costs what it costs on real data, so it measures samples/s where no games are at hand (a lent GPU).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import time
from dataclasses import asdict, dataclass, fields, replace
from typing import Callable

import numpy as np
import torch
from torch.nn import functional as F

from tabula.engine.data.shards import Batch, PositionSampler, shard_paths
from tabula.engine.net.encodings import Encoding, encoding_named
from tabula.engine.net.features import INPUT_ENCODING, KOMI_SCALE, NUM_PLANES
from tabula.engine.net.network import (
    AGZ,
    POOLED,
    SCORE_SCALE,
    SMALL_BOARD_KOMI_FLAGS,
    NetSpec,
    TabulaNet,
    export_onnx,
    with_komi_input,
)
from tabula.engine.rules.coords import MAX_SIZE, MIN_SIZE
from tabula.tools.learn.keeping import copy_atomic, restore_kept, settle_run_config

CHECKPOINT = "checkpoint.pt"
METRICS = "metrics.jsonl"
CONFIG = "config.json"

# Fields a resumed run must share with the run it continues; the rest (time limits, workers, device) may change.
FIXED_ON_RESUME = ("data", "blocks", "filters", "head", "batch", "seed", "optimizer", "steps", "lr", "lr_drops",
                   "warmup_steps", "weight_decay", "momentum", "value_loss_weight", "policy_loss_weight", "init", "aux",
                   "small_board_value", "schedule", "final_lr_fraction", "reply_loss_weight", "score_loss_weight",
                   "ownership_loss_weight", "ema_decay", "freeze_batchnorm", "train_only", "synthetic",
                   "input_encoding", "komi_spread")


@dataclass(frozen=True)
class TrainConfig:
    """One training run; saved as config.json in the run directory."""

    data: str  # directory written by `tabula prepare`, or several separated by commas ("" with synthetic)
    out: str  # run directory
    blocks: int = 6
    filters: int = 64
    head: str = AGZ  # agz | pooled
    aux: bool = False  # pooled head: score, ownership and opponent-reply heads and their losses
    small_board_value: bool = False  # pooled head: the value's small-board term (engine.net.network.PooledHead)
    steps: int = 10000  # total optimizer steps of the run
    batch: int = 256  # positions per step
    optimizer: str = "sgd"  # sgd (Nesterov momentum) | adamw
    lr: float = 0.05  # peak learning rate
    momentum: float = 0.9
    weight_decay: float = 1e-4  # L2: SGD adds weight_decay * w to each gradient (AGZ's c = weight_decay / 2)
    warmup_steps: int = 200  # linear warm-up from 0 to lr
    schedule: str = "step"  # step (x0.1 at lr_drops) | cosine (from lr down to lr * final_lr_fraction)
    lr_drops: str = "0.6,0.85"  # fractions of `steps` where the lr is multiplied by 0.1
    final_lr_fraction: float = 0.01  # cosine: the last step's lr as a fraction of the peak
    value_loss_weight: float = 1.0  # AGZ weighs value MSE and policy CE equally
    policy_loss_weight: float = 1.0  # below 1: fine-tuning that moves the policy less than the value (self-play)
    reply_loss_weight: float = 0.15  # aux: cross-entropy of the opponent's reply (KataGo's weight)
    score_loss_weight: float = 0.5  # aux: Huber loss of the margin in tens of points
    ownership_loss_weight: float = 1.5  # aux: mean over the points of the ownership cross-entropy (KataGo's weight)
    ema_decay: float = 0.0  # exponential moving average of the weights, validated and exported; 0: none
    freeze_batchnorm: bool = False  # normalize with the starting weights' running statistics and keep them (fine-
    # tuning on other data, e.g. small-board self-play from a 19×19 network: its batches' statistics differ)
    train_only: str = ""  # comma-separated prefixes of the parameters to train, e.g. "head.value" (the value head
    # alone, its small-board term included: the policy stays as loaded), "head.value_small_boards" (that term
    # alone); "": all
    seed: int = 1
    device: str = "cpu"  # cpu | cuda
    precision: str = "auto"  # auto (bf16 where the hardware has it) | bf16 | fp32
    threads: int = 0  # torch intra-op threads in the training process (0: torch decides)
    workers: int = 1  # data-loading processes (0: load in the training process)
    val_every: int = 500  # steps between validations
    val_positions: int = 4096  # fixed validation positions (from the val shards)
    log_every: int = 50  # steps between training-metric lines
    checkpoint_every: int = 500  # steps between checkpoints (also every checkpoint_minutes)
    checkpoint_minutes: float = 5.0
    max_minutes: float = 0.0  # stop (with a checkpoint) after this much wall time in this invocation; 0: none
    chunk_steps: int = 0  # stop (with a checkpoint) after this many steps in this invocation; 0: none
    export: bool = True  # write model.onnx when the run completes
    init: str = ""  # start a new run from this checkpoint's weights (not its optimizer); "" : random weights
    keep: str = ""  # also keep each checkpoint (and the metrics) in this directory, e.g. one under git; a run whose
    # --out lost its checkpoint (a new machine) resumes from there
    synthetic: int = 0  # board size of random batches trained on instead of the shards (throughput only); 0: shards
    komi_spread: float = 0.0  # records seen at other komis: each position of a counted game has its komi moved by
    # a normal draw of this many points, its value and score targets those of its margin there (PositionSampler;
    # resigned games keep theirs); 0: as played
    input_encoding: str = "leelaz-18"  # the game's network input (engine.net.encodings): gomoku-4 for gomoku;
    # leelaz-18+komi: a Go network that sees the komi (an --init of leelaz-18 is extended: network.with_komi_input)

    def to_dict(self) -> dict:
        return asdict(self)


def parse_args(argv: list[str]) -> TrainConfig:
    parser = argparse.ArgumentParser(prog="tabula train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = {f.name: f.default for f in fields(TrainConfig)}
    parser.add_argument("--data", default="", help="directory of shards from `tabula prepare` (required unless "
                                                   "--synthetic)")
    parser.add_argument("--out", required=True, help="run directory (created; rerun the command to resume)")
    for name, default in defaults.items():
        if name in ("data", "out", "export", "aux", "freeze_batchnorm", "small_board_value"):
            continue
        choices = {"head": (AGZ, POOLED), "optimizer": ("sgd", "adamw"), "device": ("cpu", "cuda"),
                   "precision": ("auto", "bf16", "fp32"), "schedule": ("step", "cosine")}.get(name)
        parser.add_argument("--" + name.replace("_", "-"), type=type(default), default=default, choices=choices)
    parser.add_argument("--no-export", dest="export", action="store_false", help="do not write model.onnx at the end")
    parser.add_argument("--aux", action="store_true",
                        help="pooled head: train score, ownership and opponent-reply heads too")
    parser.add_argument("--small-board-value", action="store_true",
                        help="pooled head: with the value's small-board term (as --init has it)")
    parser.add_argument("--freeze-batchnorm", action="store_true",
                        help="keep the batch norms' running statistics as --init has them, and normalize with them")
    parser.add_argument("--model", choices=("network", "rollout"), default="network",
                        help="rollout: the rollout policy's pattern weights instead (`tabula train --model rollout "
                             "--help` lists its own options)")
    values = vars(parser.parse_args(argv))
    values.pop("model")
    if values["synthetic"] and not MIN_SIZE <= values["synthetic"] <= MAX_SIZE:
        parser.error(f"--synthetic is a board size from {MIN_SIZE} to {MAX_SIZE} (0: train on --data's shards)")
    if not (values["komi_spread"] >= 0 and math.isfinite(values["komi_spread"])):
        parser.error("--komi-spread is a number of points, at least 0")
    try:
        encoding = encoding_named(values["input_encoding"])
    except ValueError as error:
        parser.error(str(error))
    if values["komi_spread"] and encoding.komi_plane is None:
        parser.error(f"--komi-spread needs a network that sees the komi (--input-encoding leelaz-18+komi), not "
                     f"{values['input_encoding']}")
    if not values["data"] and not values["synthetic"]:
        parser.error("--data is required (or --synthetic SIZE, random batches for a throughput measurement)")
    return TrainConfig(**values)


def requested_model(argv: list[str]) -> tuple[str, list[str]]:
    """(``--model``'s value, the other arguments): the rollout policy has a trainer and options of its own."""
    parser = argparse.ArgumentParser(prog="tabula train", add_help=False, allow_abbrev=False)  # the rest passes on
    parser.add_argument("--model", choices=("network", "rollout"), default="network")
    known, rest = parser.parse_known_args(argv)
    return known.model, rest


# -- pieces ---------------------------------------------------------------------------------------------------------


def learning_rate(config: TrainConfig, step: int) -> float:
    """The lr of optimizer step ``step`` (0-based): linear warm-up, then ×0.1 at each drop, or a cosine from the
    peak down to ``final_lr_fraction`` of it at the last step."""
    lr = config.lr
    if config.warmup_steps > 0 and step < config.warmup_steps:
        return lr * (step + 1) / config.warmup_steps
    if config.schedule == "cosine":
        span = max(1, config.steps - config.warmup_steps)
        progress = min(1.0, (step - config.warmup_steps) / span)
        floor = config.final_lr_fraction
        return lr * (floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress)))
    for fraction in (float(f) for f in config.lr_drops.split(",") if f.strip()):
        if step >= fraction * config.steps:
            lr *= 0.1
    return lr


def data_dirs(data: str) -> list[str]:
    return [d for d in data.split(",") if d]


def all_shard_paths(data: str, split: str) -> list[str]:
    """The shards of one split across every directory of ``--data``, in the order given, then by name."""
    return [path for directory in data_dirs(data) for path in shard_paths(directory, split)]


def use_bf16(config: TrainConfig) -> bool:
    if config.precision != "auto":
        return config.precision == "bf16"
    if config.device == "cuda":
        return torch.cuda.is_bf16_supported()
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def make_optimizer(config: TrainConfig, model: torch.nn.Module) -> torch.optim.Optimizer:
    if config.optimizer == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    return torch.optim.SGD(model.parameters(), lr=config.lr, momentum=config.momentum, nesterov=True,
                           weight_decay=config.weight_decay)


def freeze_parameters(model: TabulaNet, train_only: str) -> None:
    """Only the parameters named by a prefix in ``train_only`` get gradients (the optimizers skip the others)."""
    prefixes = tuple(p.strip() for p in train_only.split(",") if p.strip())
    if not prefixes:
        return
    names = [name for name, _ in model.named_parameters()]
    unknown = [p for p in prefixes if not any(name.startswith(p) for name in names)]
    if unknown:
        raise SystemExit(f"tabula train: --train-only {','.join(unknown)} names no parameter of the network")
    for name, parameter in model.named_parameters():
        parameter.requires_grad_(name.startswith(prefixes))


def set_training(model: TabulaNet, freeze_batchnorm: bool) -> None:
    """Training mode, but with frozen batch norms in eval mode: they normalize with their running statistics, which
    then stay as loaded, and the network trained is the one that plays."""
    model.train()
    if freeze_batchnorm:
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.eval()


def losses(policy_logits: torch.Tensor, value: torch.Tensor, policy: torch.Tensor, z: torch.Tensor,
           value_weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(policy cross-entropy, value MSE over the positions with a value target), both float32 scalars."""
    policy_loss = F.cross_entropy(policy_logits.float(), policy)
    squared = (value.float() - z) ** 2
    value_loss = (squared * value_weight).sum() / value_weight.sum().clamp(min=1.0)
    return policy_loss, value_loss


def _weighted_mean(values: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return (values * weight).sum() / weight.sum().clamp(min=1.0)


def aux_losses(out: dict[str, torch.Tensor], targets: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The auxiliary losses, each a float32 scalar averaged over the positions that have its target.

    reply: cross-entropy of the opponent's answer. score: Huber loss (δ = 1) on the margin in tens of points.
    ownership: mean over the points of the binary cross-entropy between (1 + tanh(o)) / 2 and (1 + t) / 2, where
    t is +1, -1 or 0 (neither side's, as for dame and seki).
    """
    reply = F.cross_entropy(out["reply"].float(), targets["reply"], reduction="none")
    score = F.huber_loss(out["score"].float(), targets["score"] / SCORE_SCALE, reduction="none", delta=1.0)
    owner_target = (targets["ownership"].float() + 1.0) / 2.0
    # (1 + tanh(o)) / 2 = sigmoid(2o)
    owner = F.binary_cross_entropy_with_logits(2.0 * out["ownership"].float(), owner_target,
                                               reduction="none").mean(dim=1)
    return {"reply_loss": _weighted_mean(reply, targets["reply_weight"]),
            "score_loss": _weighted_mean(score, targets["score_weight"]),
            "ownership_loss": _weighted_mean(owner, targets["ownership_weight"])}


def atomic_torch_save(obj: dict, path: str) -> None:
    """Write ``obj`` so that ``path`` always holds either the old or the new file, whenever the process dies."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as handle:
            torch.save(obj, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    directory = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def load_training_checkpoint(path: str) -> dict:
    """A checkpoint of this module (also readable by ``engine.net.network.load_checkpoint``); weights only."""
    return torch.load(path, map_location="cpu", weights_only=True)


def batch_tensors(b: Batch) -> dict[str, torch.Tensor]:
    """A sampler's batch as tensors; auxiliary targets a sampler lacks get weight 0."""
    count, points = len(b.policy), b.planes.shape[-1] * b.planes.shape[-2]
    zeros = np.zeros(count, dtype=np.float32)
    return {"planes": torch.from_numpy(b.planes), "policy": torch.from_numpy(b.policy),
            "value": torch.from_numpy(b.value), "value_weight": torch.from_numpy(b.value_weight),
            "reply": torch.from_numpy(b.reply if b.reply is not None else np.zeros(count, np.int64)),
            "reply_weight": torch.from_numpy(b.reply_weight if b.reply_weight is not None else zeros),
            "score": torch.from_numpy(b.score if b.score is not None else zeros),
            "score_weight": torch.from_numpy(b.score_weight if b.score_weight is not None else zeros),
            "ownership": torch.from_numpy(b.ownership if b.ownership is not None
                                          else np.zeros((count, points), np.int8)),
            "ownership_weight": torch.from_numpy(b.ownership_weight if b.ownership_weight is not None else zeros),
            "komi": torch.from_numpy(b.komi if b.komi is not None else zeros)}


def network_planes(planes: torch.Tensor, komi: torch.Tensor, encoding: Encoding) -> torch.Tensor:
    """The network's input: a sampler's planes (the game's own encoding, float [B, 18, N, N] for Go), with the komi
    plane (``komi`` float [B], the side to move's komi in points) added where ``encoding`` has one."""
    if encoding.komi_plane is None:
        return planes
    plane = (komi.to(planes.dtype) / KOMI_SCALE)[:, None, None, None].expand(-1, 1, *planes.shape[2:])
    return torch.cat([planes, plane], dim=1)


class SyntheticSampler:
    """Random batches of one board size in place of shards (``--synthetic``), with a sampler's interface: random
    stones over the history planes, either side to move, a random move and result. Nothing in them is learnable;
    they cost the training step what real batches cost, and their loading costs almost nothing."""

    num_games = 0
    num_positions = 0

    def __init__(self, size: int):
        self.size = size

    def batch_for_step(self, seed: int, step: int, batch: int) -> Batch:
        rng = np.random.default_rng([seed, step])
        size = self.size
        planes = (rng.random((batch, NUM_PLANES, size, size), dtype=np.float32) < 0.25).astype(np.float32)
        planes[:, 16:18] = 0.0
        planes[np.arange(batch), 16 + rng.integers(0, 2, batch)] = 1.0
        return Batch(planes=planes, policy=rng.integers(0, size * size + 1, batch),
                     value=rng.choice(np.array([-1.0, 1.0], dtype=np.float32), batch),
                     value_weight=np.ones(batch, dtype=np.float32))


class StepBatches(torch.utils.data.Dataset):
    """Item ``s`` is the whole batch of step ``s`` as a dict of tensors (``batch_tensors``)."""

    def __init__(self, sampler: PositionSampler, seed: int, batch: int):
        self.sampler, self.seed, self.batch = sampler, seed, batch

    def __len__(self) -> int:
        return 2 ** 62

    def __getitem__(self, step: int) -> dict[str, torch.Tensor]:
        return batch_tensors(self.sampler.batch_for_step(self.seed, step, self.batch))


def _worker_init(_: int) -> None:
    torch.set_num_threads(1)


class Validation:
    """A fixed set of validation positions (identity symmetry), kept as uint8 planes."""

    def __init__(self, config: TrainConfig):
        self.freeze_batchnorm = config.freeze_batchnorm
        paths = all_shard_paths(config.data, "val")
        self.size = 0
        if not paths or config.val_positions <= 0:
            return
        sampler = PositionSampler(paths)
        rng = np.random.default_rng([config.seed, 7919])
        count = min(config.val_positions, sampler.num_positions)
        positions = rng.choice(sampler.num_positions, size=count, replace=False)
        self.tensors = batch_tensors(sampler.batch(rng, count, symmetries=False, positions=positions))
        self.tensors["planes"] = self.tensors["planes"].to(torch.uint8)
        self.size = count

    def run(self, model: TabulaNet, device: torch.device, bf16: bool, chunk: int = 256) -> dict:
        model.eval()
        totals = {"policy_loss": 0.0, "top1": 0.0, "top5": 0.0, "value_sq": 0.0, "value_n": 0.0}
        aux = {"reply_loss": "reply_weight", "score_loss": "score_weight", "ownership_loss": "ownership_weight"}
        aux_totals = {name: [0.0, 0.0] for name in aux}
        score_error = [0.0, 0.0]
        with torch.no_grad():
            for start in range(0, self.size, chunk):
                end = min(start + chunk, self.size)
                t = {k: v[start:end].to(device) for k, v in self.tensors.items()}
                planes = network_planes(t["planes"].float(), t["komi"], model.spec.encoding)
                planes = planes.contiguous(memory_format=torch.channels_last)
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                    out = model.train_outputs(planes)
                logits, value = out["policy"].float(), torch.tanh(out["value"].float())
                target, z, weight = t["policy"], t["value"], t["value_weight"]
                totals["policy_loss"] += float(F.cross_entropy(logits, target, reduction="sum"))
                top5 = logits.topk(5, dim=1).indices
                totals["top1"] += float((top5[:, 0] == target).sum())
                totals["top5"] += float((top5 == target[:, None]).any(dim=1).sum())
                totals["value_sq"] += float((((value - z) ** 2) * weight).sum())
                totals["value_n"] += float(weight.sum())
                if model.spec.aux:
                    values = aux_losses(out, t)
                    for name, weight_name in aux.items():
                        n = float(t[weight_name].sum())
                        aux_totals[name][0] += float(values[name]) * n
                        aux_totals[name][1] += n
                    error = (SCORE_SCALE * out["score"].float() - t["score"]).abs() * t["score_weight"]
                    score_error[0] += float(error.sum())
                    score_error[1] += float(t["score_weight"].sum())
        set_training(model, self.freeze_batchnorm)
        results = {"val_policy_loss": totals["policy_loss"] / self.size, "val_top1": totals["top1"] / self.size,
                   "val_top5": totals["top5"] / self.size,
                   "val_value_mse": totals["value_sq"] / max(totals["value_n"], 1.0), "val_positions": self.size}
        if model.spec.aux:
            results.update({f"val_{name}": total / max(n, 1.0) for name, (total, n) in aux_totals.items()})
            results["val_score_mae"] = score_error[0] / max(score_error[1], 1.0)
        return results


class WeightAverage:
    """An exponential moving average of every floating tensor of the model's state (weights and batch-norm
    statistics), updated after each optimizer step; what validation and export use when the run has one.

    The decay warms up, (1 + n) / (10 + n) after n steps until it reaches ``decay``: a plain 0.999 would still give
    the random initial weights 37% of the average after 1,000 steps (0.999^1000), and a validation read from the
    average would measure mostly the random start."""

    def __init__(self, model: TabulaNet, decay: float):
        self.decay = decay
        self.state = {k: v.detach().clone() for k, v in model.state_dict().items() if v.is_floating_point()}

    def restore(self, saved: dict[str, torch.Tensor]) -> None:
        """The average a checkpoint kept (``ema_state_dict``), in the model's float32 whatever it was stored in."""
        self.state = {k: v.to(torch.float32, copy=True) if v.is_floating_point() else v.clone()
                      for k, v in saved.items()}

    def update(self, model: TabulaNet, step: int) -> None:
        """Fold in the weights after optimizer step ``step`` (0-based)."""
        decay = min(self.decay, (1.0 + step) / (10.0 + step))
        with torch.no_grad():
            for name, value in model.state_dict().items():
                if name in self.state:
                    self.state[name].lerp_(value.detach(), 1.0 - decay)

    def averaged(self, model: TabulaNet) -> TabulaNet:
        """A copy of ``model`` holding the averaged weights."""
        import copy
        twin = copy.deepcopy(model)
        twin.load_state_dict({**model.state_dict(), **self.state})
        return twin


# -- the run --------------------------------------------------------------------------------------------------------


def _komi_fields(path: str, encoding: Encoding) -> dict:
    """NetSpec's fields of a network that sees the komi which no command line sets: those of the checkpoint it
    continues or starts from (``path``) where that one has the komi input (its ``komi_reference``, and its
    small-board komi terms, added by ``tabula export --add-small-board-komi``, ``--add-small-board-komi-parity`` and
    ``--add-small-board-score-komi``), else the defaults (an extension of a leelaz-18 network)."""
    if encoding.komi_plane is None or not path or not os.path.exists(path):
        return {}
    saved = load_training_checkpoint(path)["spec"]
    fields = {"komi_reference": float(saved["komi_reference"])} if "komi_reference" in saved else {}
    for flag in SMALL_BOARD_KOMI_FLAGS:
        if saved.get(flag):
            fields[flag] = True
    return fields


def optimizer_step(loss: torch.Tensor, optimizer, model, average, step: int, command: str) -> float:
    """One step on ``loss`` (the weights' moving average updated too, where there is one); returns the loss, and
    SystemExit where it is not finite (the run would only go on to NaN weights)."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    if average is not None:
        average.update(model, step)
    value = loss.item()
    if not math.isfinite(value):
        raise SystemExit(f"{command}: loss is {value} at step {step + 1}; lower --lr")
    return value


def _settle_config(config: TrainConfig) -> TrainConfig:
    """Write config.json for a new run, or check the command against the run it continues."""
    try:  # the architecture's own checks (e.g. heads that need the pooled one), before config.json is written
        NetSpec(blocks=config.blocks, filters=config.filters, head=config.head, aux=config.aux,
                small_board_value=config.small_board_value, input_encoding=config.input_encoding)
    except ValueError as error:
        raise SystemExit(f"tabula train: {error}") from None
    settle_run_config(config.out, config, FIXED_ON_RESUME, "tabula train", "--out", CONFIG)
    return config


def _append_metrics(path: str, record: dict) -> None:
    with open(path, "a") as handle:
        handle.write(json.dumps(record, sort_keys=True) + "\n")


def _truncate_metrics(path: str, step: int) -> None:
    """Drop lines written after the checkpoint we resume from (a killed run logs steps it will redo)."""
    if not os.path.exists(path):
        return
    kept = []
    with open(path) as handle:
        for line in handle:
            try:
                if json.loads(line).get("step", 0) <= step:
                    kept.append(line)
            except json.JSONDecodeError:
                pass  # a line cut short by a kill
    with open(path + ".tmp", "w") as handle:
        handle.writelines(kept)
    os.replace(path + ".tmp", path)


def train(config: TrainConfig, log=print,
          make_sampler: Callable[[list[str]], PositionSampler] | None = None, fixed_data: bool = True) -> dict:
    """Run (or continue) training; returns the final metrics. Stops early, with a checkpoint, on max_minutes,
    chunk_steps or SIGTERM.

    ``make_sampler``: the training sampler from the train shard paths (default: ``PositionSampler`` with the
    configuration's ``komi_spread``), e.g. ``engine.data.replay.MixedSizeSampler`` (with its own komi spread)
    for self-play's window (batch ``s`` must stay a pure function of (seed, s) for exact resume; each batch is of
    one board size, and the sampler's ``size`` is the one the agz head is built for). Validation always
    reads the val shards with ``PositionSampler`` (the played move is its policy target).
    ``fixed_data``: the shards are the same on every resume (checked), unlike self-play's moving window.
    """
    started = time.time()
    # On a new machine (--out has no checkpoint) the run kept in --keep is copied into --out first, so that it
    # resumes and its settings are checked as any resumed run's are: the kept config.json is the run's.
    restored = restore_kept(config.out, config.keep, CHECKPOINT, names=(CONFIG, METRICS))
    config = _settle_config(config)
    if restored:
        log(f"tabula train: restored the checkpoint kept in {config.keep}")
    if config.threads > 0:
        torch.set_num_threads(config.threads)
    device = torch.device(config.device)
    bf16 = use_bf16(config)
    encoding = encoding_named(config.input_encoding)
    if config.synthetic:
        if (encoding.state_encoding or encoding.name) != INPUT_ENCODING:
            raise SystemExit(f"tabula train: --synthetic makes Go positions ({INPUT_ENCODING} planes), not "
                             f"{config.input_encoding}")
        train_paths, sampler = [], SyntheticSampler(config.synthetic)
    else:
        train_paths = all_shard_paths(config.data, "train")
        if not train_paths:
            raise SystemExit(f"tabula train: no train-*.tshard files in {config.data}")
        if make_sampler is None:
            sampler = PositionSampler(train_paths, komi_spread=config.komi_spread)
        elif config.komi_spread:
            raise SystemExit("tabula train: --komi-spread is for records; a sampler given by the caller moves its own "
                             "komi (tabula rl --train-komi-spread)")
        else:
            sampler = make_sampler(train_paths)
        game = getattr(sampler, "game", None)  # the shards' game, where the sampler knows it
        if game is not None and not encoding.accepts(game.new_state(sampler.size)):
            raise SystemExit(f"tabula train: the shards are games of {game.name}, whose network input is not "
                             f"--input-encoding {config.input_encoding}")
    checkpoint_path = os.path.join(config.out, CHECKPOINT)
    spec = NetSpec(blocks=config.blocks, filters=config.filters, head=config.head, board_size=sampler.size,
                   aux=config.aux, small_board_value=config.small_board_value, input_encoding=config.input_encoding,
                   **_komi_fields(checkpoint_path if os.path.exists(checkpoint_path) else config.init, encoding))
    # What the batches of a resumed run depend on besides (seed, step): the same games in the same order.
    data_fingerprint = f"{len(train_paths)} shards, {sampler.num_games} games, {sampler.num_positions} positions"

    torch.manual_seed(config.seed)
    model = TabulaNet(spec)
    freeze_parameters(model, config.train_only)
    optimizer = make_optimizer(config, model)
    metrics_path = os.path.join(config.out, METRICS)
    kept_checkpoint = os.path.join(config.keep, CHECKPOINT) if config.keep else ""
    step, elapsed_before, cpu_before = 0, 0.0, 0.0
    validation_cpu = 0.0  # validation's own CPU time, left out of cpu_s so that runs compare by training cost
    saved_window: dict = {}
    average = WeightAverage(model, config.ema_decay) if config.ema_decay > 0 else None
    if os.path.exists(checkpoint_path):
        state = load_training_checkpoint(checkpoint_path)
        # A pooled net's board size is no part of its weights: a window of several sizes may start with another one.
        if not NetSpec.from_dict(state["spec"]).same_weights(spec):
            raise SystemExit(f"tabula train: {checkpoint_path} holds another architecture")
        if fixed_data and state.get("data_fingerprint", data_fingerprint) != data_fingerprint:
            raise SystemExit(f"tabula train: {checkpoint_path} was trained on other data "
                             f"({state['data_fingerprint']}; now {data_fingerprint}): prepare the same shards again")
        model.load_state_dict(state["state_dict"])
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        if average is not None and "ema_state_dict" in state:
            average.restore(state["ema_state_dict"])
        step = int(state["step"])
        elapsed_before = float(state.get("elapsed_s", 0.0))
        cpu_before = float(state.get("cpu_s", 0.0))
        saved_window = json.loads(state.get("log_window", "{}"))
        _truncate_metrics(metrics_path, step)
        log(f"tabula train: resuming {config.out} at step {step}")
    elif config.init:
        state = load_training_checkpoint(config.init)
        initial = NetSpec.from_dict(state["spec"])
        extend = (encoding.komi_plane is not None and initial.input_encoding == INPUT_ENCODING
                  and replace(initial, input_encoding=spec.input_encoding, komi_reference=spec.komi_reference)
                  .same_weights(spec))
        if not extend and not initial.same_weights(spec):
            raise SystemExit(f"tabula train: {config.init} holds another architecture")
        weights = state["state_dict"]
        if extend:  # a network of the 18 planes, given the komi input with zero weights (network.with_komi_input)
            start = TabulaNet(initial)
            start.load_state_dict(weights)
            weights = with_komi_input(start, spec.komi_reference).state_dict()
            log(f"tabula train: {config.init} extended with the komi input ({spec.input_encoding}), zero weights")
        model.load_state_dict(weights)
        if average is not None:
            average = WeightAverage(model, config.ema_decay)
        log(f"tabula train: starting from the weights of {config.init}")
    model.to(device).to(memory_format=torch.channels_last)
    if device.type == "cuda":
        # the optimizer's momentum buffers were loaded on the CPU
        optimizer.load_state_dict(optimizer.state_dict())
        torch.backends.cudnn.benchmark = True
        if average is not None:
            average.state = {k: v.to(device) for k, v in average.state.items()}
    set_training(model, config.freeze_batchnorm)

    def training_cpu() -> float:
        """CPU seconds this run has spent training (this process; with workers=0 that includes the data)."""
        return cpu_before + time.process_time() - cpu_started - validation_cpu

    def save(reason: str) -> None:
        state = {"spec": spec.to_dict(), "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
                 "optimizer": _to_cpu(optimizer.state_dict()), "step": step, "torch_rng": torch.get_rng_state(),
                 "elapsed_s": elapsed_before + time.time() - started, "cpu_s": training_cpu(),
                 "log_window": json.dumps(saved_window),
                 "config": json.dumps(config.to_dict()), "data_fingerprint": data_fingerprint}
        if average is not None:
            state["ema_state_dict"] = _to_cpu(average.state)
        atomic_torch_save(state, checkpoint_path)
        if config.keep:
            os.makedirs(config.keep, exist_ok=True)
            atomic_torch_save(state, kept_checkpoint)
            for name in (METRICS, CONFIG):
                if os.path.exists(os.path.join(config.out, name)):
                    copy_atomic(os.path.join(config.out, name), os.path.join(config.keep, name))
        log(f"tabula train: checkpoint at step {step} ({reason})")

    def evaluated_model() -> TabulaNet:
        return average.averaged(model) if average is not None else model

    stop = {"signal": None}

    def on_signal(signum, _frame) -> None:
        stop["signal"] = signum

    old_handler = signal.signal(signal.SIGTERM, on_signal) if _main_thread() else None
    validation = Validation(config)
    cpu_started = time.process_time()  # the training's own cost: loading the data and the validation set is not
    source = (f"random {config.synthetic}x{config.synthetic} batches (--synthetic)" if config.synthetic
              else f"{sampler.num_games} games, {sampler.num_positions} positions")
    log(f"tabula train: {source}; {config.blocks}x"
        f"{config.filters} {config.head}{' aux' if config.aux else ''} net, {'bf16' if bf16 else 'fp32'} on "
        f"{device}, {validation.size} validation positions")

    results: dict = {}
    names = ("loss", "policy_loss", "value_mse", "top1") + (
        ("reply_loss", "score_loss", "ownership_loss") if config.aux else ())
    if step < config.steps:
        loader = torch.utils.data.DataLoader(
            StepBatches(sampler, config.seed, config.batch), batch_size=None, sampler=range(step, config.steps),
            num_workers=config.workers, worker_init_fn=_worker_init if config.workers else None,
            pin_memory=device.type == "cuda", prefetch_factor=4 if config.workers else None,
            persistent_workers=False)
        first_step = step
        last_checkpoint = time.time()
        window = {**{name: 0.0 for name in names}, "n": 0}
        window.update(saved_window)  # the sums since the last log line, so resumed logs equal uninterrupted ones
        window["t"] = time.time()
        for batch in loader:
            lr = learning_rate(config, step)
            for group in optimizer.param_groups:
                group["lr"] = lr
            batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
            planes = network_planes(batch["planes"], batch["komi"], encoding).contiguous(
                memory_format=torch.channels_last)
            policy = batch["policy"]
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                out = model.train_outputs(planes)
            logits = out["policy"]
            policy_loss, value_loss = losses(logits, torch.tanh(out["value"].float()), policy, batch["value"],
                                             batch["value_weight"])
            loss = config.policy_loss_weight * policy_loss + config.value_loss_weight * value_loss
            parts = {"policy_loss": policy_loss, "value_mse": value_loss}
            if config.aux:
                extra = aux_losses(out, batch)
                loss = loss + (config.reply_loss_weight * extra["reply_loss"]
                               + config.score_loss_weight * extra["score_loss"]
                               + config.ownership_loss_weight * extra["ownership_loss"])
                parts.update(extra)
            loss_value = optimizer_step(loss, optimizer, model, average, step, "tabula train")
            step += 1
            window["loss"] += loss_value
            for name, value in parts.items():
                window[name] += value.item()
            window["top1"] += (logits.detach().argmax(dim=1) == policy).float().mean().item()
            window["n"] += 1
            if step % config.log_every == 0 or step == config.steps:
                n = window["n"]
                seconds = time.time() - window["t"]
                record = {"step": step, "kind": "train", "lr": lr, **{name: window[name] / n for name in names},
                          "samples_per_s": n * config.batch / max(seconds, 1e-9),
                          "elapsed_s": round(elapsed_before + time.time() - started, 1),
                          "cpu_s": round(training_cpu(), 1)}
                _append_metrics(metrics_path, record)
                log(f"step {step:>7}  loss {record['loss']:.4f}  policy {record['policy_loss']:.4f}  "
                    f"value {record['value_mse']:.4f}  top1 {record['top1']:.3f}  lr {lr:.4g}  "
                    f"{record['samples_per_s']:.0f} samples/s")
                window = {**{name: 0.0 for name in names}, "n": 0, "t": time.time()}
            saved_window.clear()
            saved_window.update({k: v for k, v in window.items() if k != "t"})
            if validation.size and (step % config.val_every == 0 or step == config.steps):
                validation_started = time.process_time()
                results = {"step": step, "kind": "val", "cpu_s": round(training_cpu(), 1),
                           **validation.run(evaluated_model(), device, bf16)}
                validation_cpu += time.process_time() - validation_started
                _append_metrics(metrics_path, results)
                log(f"step {step:>7}  validation: top1 {results['val_top1']:.4f}  top5 {results['val_top5']:.4f}  "
                    f"policy loss {results['val_policy_loss']:.4f}  value MSE {results['val_value_mse']:.4f}")
            minutes = (time.time() - started) / 60
            out_of_time = config.max_minutes > 0 and minutes >= config.max_minutes
            out_of_steps = config.chunk_steps > 0 and step - first_step >= config.chunk_steps
            if step == config.steps or out_of_time or out_of_steps or stop["signal"] is not None:
                save("done" if step == config.steps else "stopping; rerun the same command to continue")
                break
            if step % config.checkpoint_every == 0 or time.time() - last_checkpoint >= 60 * config.checkpoint_minutes:
                save("periodic")
                last_checkpoint = time.time()
        del loader
    if old_handler is not None:
        signal.signal(signal.SIGTERM, old_handler)

    if step >= config.steps:
        onnx_path = os.path.join(config.out, "model.onnx")
        if config.export and not os.path.exists(onnx_path):
            final = evaluated_model().to("cpu").to(memory_format=torch.contiguous_format).eval()
            provenance = (f"tabula train: supervised on {config.data}, {step} steps x {config.batch}"
                          + (f" from {config.init}" if config.init else "")
                          + (f", EMA {config.ema_decay}" if average is not None else ""))
            export_onnx(final, onnx_path + ".tmp.onnx", provenance)
            os.replace(onnx_path + ".tmp.onnx", onnx_path)
            log(f"tabula train: exported {onnx_path}")
        log(f"tabula train: run complete at step {step}")
    return {"step": step, **results}


def _to_cpu(value):
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_cpu(v) for v in value]
    return value


def _main_thread() -> bool:
    import threading
    return threading.current_thread() is threading.main_thread()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    model, rest = requested_model(argv)
    if model == "rollout":
        from tabula.tools.learn import rollout_train  # numpy only; its own options
        return rollout_train.main(rest)
    config = parse_args(argv)
    train(config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
