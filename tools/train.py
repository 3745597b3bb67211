"""`tabula train`: supervised training of the AGZ network on prepared shards, resumable after a kill at any moment.

Loss (AlphaGo Zero): policy cross-entropy + ``value_loss_weight`` × value MSE, and L2 through the optimizer's weight
decay. Optimizer: SGD with Nesterov momentum and a step schedule (AGZ's recipe; weight decay is then exactly an L2
term, and the run is cheap to reason about); ``--optimizer adamw`` for short runs where tuning time is scarce.

Resuming: batch ``s`` is a pure function of (seed, s) (``PositionSampler.batch_for_step``), the learning rate a
pure function of s, so a checkpoint of model, optimizer, step and torch RNG is the whole state. Checkpoints are
written atomically (temporary file, fsync, rename); rerunning the same command continues from the last one. Run
directory: config.json, checkpoint.pt (loads with ``weights_only=True``), metrics.jsonl, model.onnx at the end.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import time
from dataclasses import asdict, dataclass, fields
from typing import Callable

import numpy as np
import torch
from torch.nn import functional as F

from engine.network import AGZ, POOLED, NetSpec, TabulaNet, export_onnx
from engine.shards import PositionSampler, shard_paths

CHECKPOINT = "checkpoint.pt"
METRICS = "metrics.jsonl"
CONFIG = "config.json"

# Fields a resumed run must share with the run it continues; the rest (time limits, workers, device) may change.
FIXED_ON_RESUME = ("data", "blocks", "filters", "head", "batch", "seed", "optimizer", "steps", "lr", "lr_drops",
                   "warmup_steps", "weight_decay", "momentum", "value_loss_weight", "init")


@dataclass(frozen=True)
class TrainConfig:
    """One training run; saved as config.json in the run directory."""

    data: str  # directory written by `tabula prepare`
    out: str  # run directory
    blocks: int = 6
    filters: int = 64
    head: str = AGZ  # agz | pooled
    steps: int = 10000  # total optimizer steps of the run
    batch: int = 256  # positions per step
    optimizer: str = "sgd"  # sgd (Nesterov momentum) | adamw
    lr: float = 0.05  # peak learning rate
    momentum: float = 0.9
    weight_decay: float = 1e-4  # L2: SGD adds weight_decay * w to each gradient (AGZ's c = weight_decay / 2)
    warmup_steps: int = 200  # linear warm-up from 0 to lr
    lr_drops: str = "0.6,0.85"  # fractions of `steps` where the lr is multiplied by 0.1
    value_loss_weight: float = 1.0  # AGZ weighs value MSE and policy CE equally
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

    def to_dict(self) -> dict:
        return asdict(self)


def parse_args(argv: list[str]) -> TrainConfig:
    parser = argparse.ArgumentParser(prog="tabula train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = {f.name: f.default for f in fields(TrainConfig)}
    parser.add_argument("--data", required=True, help="directory of shards from `tabula prepare`")
    parser.add_argument("--out", required=True, help="run directory (created; rerun the command to resume)")
    for name, default in defaults.items():
        if name in ("data", "out", "export"):
            continue
        choices = {"head": (AGZ, POOLED), "optimizer": ("sgd", "adamw"), "device": ("cpu", "cuda"),
                   "precision": ("auto", "bf16", "fp32")}.get(name)
        parser.add_argument("--" + name.replace("_", "-"), type=type(default), default=default, choices=choices)
    parser.add_argument("--no-export", dest="export", action="store_false", help="do not write model.onnx at the end")
    return TrainConfig(**vars(parser.parse_args(argv)))


# -- pieces ---------------------------------------------------------------------------------------------------------


def learning_rate(config: TrainConfig, step: int) -> float:
    """The lr of optimizer step ``step`` (0-based): linear warm-up, then ×0.1 at each drop."""
    lr = config.lr
    if config.warmup_steps > 0 and step < config.warmup_steps:
        lr *= (step + 1) / config.warmup_steps
    for fraction in (float(f) for f in config.lr_drops.split(",") if f.strip()):
        if step >= fraction * config.steps:
            lr *= 0.1
    return lr


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


def losses(policy_logits: torch.Tensor, value: torch.Tensor, policy: torch.Tensor, z: torch.Tensor,
           value_weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(policy cross-entropy, value MSE over the positions with a value target), both float32 scalars."""
    policy_loss = F.cross_entropy(policy_logits.float(), policy)
    squared = (value.float() - z) ** 2
    value_loss = (squared * value_weight).sum() / value_weight.sum().clamp(min=1.0)
    return policy_loss, value_loss


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
    """A checkpoint of this module (also readable by ``engine.network.load_checkpoint``); weights only."""
    return torch.load(path, map_location="cpu", weights_only=True)


class StepBatches(torch.utils.data.Dataset):
    """Item ``s`` is the whole batch of step ``s``: planes, policy, value, value weight as tensors."""

    def __init__(self, sampler: PositionSampler, seed: int, batch: int):
        self.sampler, self.seed, self.batch = sampler, seed, batch

    def __len__(self) -> int:
        return 2 ** 62

    def __getitem__(self, step: int) -> tuple[torch.Tensor, ...]:
        b = self.sampler.batch_for_step(self.seed, step, self.batch)
        return (torch.from_numpy(b.planes), torch.from_numpy(b.policy), torch.from_numpy(b.value),
                torch.from_numpy(b.value_weight))


def _worker_init(_: int) -> None:
    torch.set_num_threads(1)


class Validation:
    """A fixed set of validation positions (identity symmetry), kept as uint8 planes."""

    def __init__(self, config: TrainConfig):
        paths = shard_paths(config.data, "val")
        self.size = 0
        if not paths or config.val_positions <= 0:
            return
        sampler = PositionSampler(paths)
        rng = np.random.default_rng([config.seed, 7919])
        count = min(config.val_positions, sampler.num_positions)
        positions = rng.choice(sampler.num_positions, size=count, replace=False)
        b = sampler.batch(rng, count, symmetries=False, positions=positions)
        self.planes = torch.from_numpy(b.planes.astype(np.uint8))
        self.policy = torch.from_numpy(b.policy)
        self.value = torch.from_numpy(b.value)
        self.value_weight = torch.from_numpy(b.value_weight)
        self.size = count

    def run(self, model: TabulaNet, device: torch.device, bf16: bool, chunk: int = 256) -> dict:
        model.eval()
        totals = {"policy_loss": 0.0, "top1": 0.0, "top5": 0.0, "value_sq": 0.0, "value_n": 0.0}
        with torch.no_grad():
            for start in range(0, self.size, chunk):
                end = min(start + chunk, self.size)
                planes = self.planes[start:end].to(device).float().contiguous(memory_format=torch.channels_last)
                target = self.policy[start:end].to(device)
                z = self.value[start:end].to(device)
                weight = self.value_weight[start:end].to(device)
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                    logits, value = model(planes)
                logits = logits.float()
                totals["policy_loss"] += float(F.cross_entropy(logits, target, reduction="sum"))
                top5 = logits.topk(5, dim=1).indices
                totals["top1"] += float((top5[:, 0] == target).sum())
                totals["top5"] += float((top5 == target[:, None]).any(dim=1).sum())
                totals["value_sq"] += float((((value.float() - z) ** 2) * weight).sum())
                totals["value_n"] += float(weight.sum())
        model.train()
        return {"val_policy_loss": totals["policy_loss"] / self.size, "val_top1": totals["top1"] / self.size,
                "val_top5": totals["top5"] / self.size,
                "val_value_mse": totals["value_sq"] / max(totals["value_n"], 1.0), "val_positions": self.size}


# -- the run --------------------------------------------------------------------------------------------------------


def _settle_config(config: TrainConfig) -> TrainConfig:
    """Write config.json for a new run, or check the command against the run it continues."""
    os.makedirs(config.out, exist_ok=True)
    path = os.path.join(config.out, CONFIG)
    if os.path.exists(path):
        with open(path) as handle:
            saved = json.load(handle)
        different = [k for k in FIXED_ON_RESUME if k in saved and saved[k] != getattr(config, k)]
        if different:
            raise SystemExit(f"tabula train: {config.out} is a run with other {', '.join(different)} "
                             f"({', '.join(f'{k}={saved[k]!r}' for k in different)}); use another --out")
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        json.dump(config.to_dict(), handle, indent=2)
    os.replace(tmp, path)
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
          make_sampler: Callable[[list[str]], PositionSampler] = PositionSampler) -> dict:
    """Run (or continue) training; returns the final metrics. Stops early, with a checkpoint, on max_minutes,
    chunk_steps or SIGTERM.

    ``make_sampler``: the training sampler from the train shard paths, e.g. ``engine.replay.ReplaySampler`` for
    self-play's window (batch ``s`` must stay a pure function of (seed, s) for exact resume). Validation always
    reads the val shards with ``PositionSampler`` (the played move is its policy target).
    """
    started = time.time()
    config = _settle_config(config)
    if config.threads > 0:
        torch.set_num_threads(config.threads)
    device = torch.device(config.device)
    bf16 = use_bf16(config)
    train_paths = shard_paths(config.data, "train")
    if not train_paths:
        raise SystemExit(f"tabula train: no train-*.tshard files in {config.data}")
    sampler = make_sampler(train_paths)
    spec = NetSpec(blocks=config.blocks, filters=config.filters, head=config.head, board_size=sampler.size)

    torch.manual_seed(config.seed)
    model = TabulaNet(spec)
    optimizer = make_optimizer(config, model)
    checkpoint_path = os.path.join(config.out, CHECKPOINT)
    metrics_path = os.path.join(config.out, METRICS)
    step, elapsed_before = 0, 0.0
    saved_window: dict = {}
    if os.path.exists(checkpoint_path):
        state = load_training_checkpoint(checkpoint_path)
        if NetSpec.from_dict(state["spec"]) != spec:
            raise SystemExit(f"tabula train: {checkpoint_path} holds another architecture")
        model.load_state_dict(state["state_dict"])
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        step = int(state["step"])
        elapsed_before = float(state.get("elapsed_s", 0.0))
        saved_window = json.loads(state.get("log_window", "{}"))
        _truncate_metrics(metrics_path, step)
        log(f"tabula train: resuming {config.out} at step {step}")
    elif config.init:
        state = load_training_checkpoint(config.init)
        if NetSpec.from_dict(state["spec"]) != spec:
            raise SystemExit(f"tabula train: {config.init} holds another architecture")
        model.load_state_dict(state["state_dict"])
        log(f"tabula train: starting from the weights of {config.init}")
    model.to(device).to(memory_format=torch.channels_last)
    if device.type == "cuda":
        # the optimizer's momentum buffers were loaded on the CPU
        optimizer.load_state_dict(optimizer.state_dict())
        torch.backends.cudnn.benchmark = True
    model.train()

    def save(reason: str) -> None:
        atomic_torch_save({"spec": spec.to_dict(), "state_dict": {k: v.detach().cpu() for k, v in
                                                                   model.state_dict().items()},
                           "optimizer": _to_cpu(optimizer.state_dict()), "step": step,
                           "torch_rng": torch.get_rng_state(),
                           "elapsed_s": elapsed_before + time.time() - started,
                           "log_window": json.dumps(saved_window),
                           "config": json.dumps(config.to_dict())}, checkpoint_path)
        log(f"tabula train: checkpoint at step {step} ({reason})")

    stop = {"signal": None}

    def on_signal(signum, _frame) -> None:
        stop["signal"] = signum

    old_handler = signal.signal(signal.SIGTERM, on_signal) if _main_thread() else None
    validation = Validation(config)
    log(f"tabula train: {sampler.num_games} games, {sampler.num_positions} positions; {config.blocks}x"
        f"{config.filters} {config.head} net, {'bf16' if bf16 else 'fp32'} on {device}, "
        f"{validation.size} validation positions")

    results: dict = {}
    if step < config.steps:
        loader = torch.utils.data.DataLoader(
            StepBatches(sampler, config.seed, config.batch), batch_size=None, sampler=range(step, config.steps),
            num_workers=config.workers, worker_init_fn=_worker_init if config.workers else None,
            pin_memory=device.type == "cuda", prefetch_factor=4 if config.workers else None,
            persistent_workers=False)
        first_step = step
        last_checkpoint = time.time()
        window = {"loss": 0.0, "policy_loss": 0.0, "value_mse": 0.0, "top1": 0.0, "n": 0}
        window.update(saved_window)  # the sums since the last log line, so resumed logs equal uninterrupted ones
        window["t"] = time.time()
        for planes, policy, z, weight in loader:
            lr = learning_rate(config, step)
            for group in optimizer.param_groups:
                group["lr"] = lr
            planes = planes.to(device, non_blocking=True).contiguous(memory_format=torch.channels_last)
            policy, z, weight = (t.to(device, non_blocking=True) for t in (policy, z, weight))
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                logits, value = model(planes)
            policy_loss, value_loss = losses(logits, value, policy, z, weight)
            loss = policy_loss + config.value_loss_weight * value_loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            loss_value = loss.item()
            if not math.isfinite(loss_value):
                raise SystemExit(f"tabula train: loss is {loss_value} at step {step}; lower --lr")
            window["loss"] += loss_value
            window["policy_loss"] += policy_loss.item()
            window["value_mse"] += value_loss.item()
            window["top1"] += (logits.detach().argmax(dim=1) == policy).float().mean().item()
            window["n"] += 1
            if step % config.log_every == 0 or step == config.steps:
                n = window["n"]
                seconds = time.time() - window["t"]
                record = {"step": step, "kind": "train", "lr": lr, "loss": window["loss"] / n,
                          "policy_loss": window["policy_loss"] / n, "value_mse": window["value_mse"] / n,
                          "top1": window["top1"] / n, "samples_per_s": n * config.batch / max(seconds, 1e-9),
                          "elapsed_s": round(elapsed_before + time.time() - started, 1)}
                _append_metrics(metrics_path, record)
                log(f"step {step:>7}  loss {record['loss']:.4f}  policy {record['policy_loss']:.4f}  "
                    f"value {record['value_mse']:.4f}  top1 {record['top1']:.3f}  lr {lr:.4g}  "
                    f"{record['samples_per_s']:.0f} samples/s")
                window = {"loss": 0.0, "policy_loss": 0.0, "value_mse": 0.0, "top1": 0.0, "n": 0, "t": time.time()}
            saved_window.clear()
            saved_window.update({k: v for k, v in window.items() if k != "t"})
            if validation.size and (step % config.val_every == 0 or step == config.steps):
                results = {"step": step, "kind": "val", **validation.run(model, device, bf16)}
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
            model.to("cpu").to(memory_format=torch.contiguous_format).eval()
            provenance = (f"tabula train: supervised on {os.path.basename(os.path.normpath(config.data))}, "
                          f"{step} steps x {config.batch}" + (f" from {config.init}" if config.init else ""))
            export_onnx(model, onnx_path + ".tmp.onnx", provenance)
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
    config = parse_args(sys.argv[1:] if argv is None else argv)
    train(config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
