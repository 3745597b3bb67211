"""Quantization-aware int8: an int8 file of a network that keeps its fp32 file's moves where plain quantization loses
some (``tabula export --quantize int8 --aware-steps N``).

Why: in a network taught by a teacher's distribution the likeliest two moves are often a rounding apart, and the
int8 file's uint8 activations, rounded in every residual block, swap them; no single layer is to blame, so keeping
one in fp32 or rescaling it does not help (docs/BENCHMARKS.md, "int8 of the tabula-v2 student"). Here a copy of the
network's residual blocks learns, for a few hundred steps, to give the fp32 file's outputs with its forward pass
rounded as the int8 file rounds it: each block's input, its middle ReLU, its second convolution and the sum after
its ReLU to uint8 over ranges calibrated once on the fp32 network, the convolutions' weights to 7 bits per output
channel (``INT8_FORMATS["any"]``). The copy is then quantized as usual (``tools.learn.export.quantize_int8_aware``);
the fp32 file beside the int8 file stays the original, which is what the int8 file is checked against
(``engine.net.int8_check``) and what a GPU rebuilds.
Agreeing with the fp32 file more often does not make a file play better (docs/BENCHMARKS.md, "Quantization-aware
int8"): a file made here ships only after a match against the plain one.

Layer: tools (trains ``engine.net.network``'s TabulaNet; ``tools.learn.export`` writes the file).
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import parametrize

from tabula.engine.net.network import ResidualBlock, TabulaNet

WEIGHT_LEVELS = 64  # 7-bit symmetric weights: round(w / s) in [-64, 64], s = max |w| of the output channel / 64
ACTIVATION_LEVELS = 255  # uint8 activations, asymmetric over the calibrated range
RANGE_QUANTILE = 1e-5  # the calibration's percentile, 99.999% (quantize_int8's) of |x|


@dataclass(frozen=True)
class AwareConfig:
    """How the trunk learns its rounding: ``steps`` of Adam at ``lr`` on batches of ``batch`` positions; the
    unrounded pass's loss counts ``plain_weight`` as much as the rounded pass's, which keeps the copy near the
    original (the ranges calibrated on it stay right)."""
    steps: int = 1200
    batch: int = 64
    lr: float = 4e-5
    plain_weight: float = 0.25
    seed: int = 0


def _straight_through_round(x: torch.Tensor) -> torch.Tensor:
    """round(x) forward, the identity backward."""
    return x + (torch.round(x) - x).detach()


class SevenBitWeight(nn.Module):
    """A parametrization of a convolution's weight: rounded per output channel as ``INT8_FORMATS["any"]`` stores
    it, while ``enabled``."""

    def __init__(self) -> None:
        super().__init__()
        self.enabled = False

    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        if not self.enabled:
            return weight
        scale = weight.detach().abs().amax(dim=(1, 2, 3), keepdim=True).clamp_min(1e-12) / WEIGHT_LEVELS
        return torch.clamp(_straight_through_round(weight / scale), -WEIGHT_LEVELS, WEIGHT_LEVELS) * scale


class ActivationRounding:
    """uint8 rounding of a residual block's activations over fixed ranges: recorded while ``recording`` (the
    calibration pass, begun by ``expect``), applied while ``enabled``. Keys: (block, point)."""

    def __init__(self) -> None:
        self.recording = False
        self.enabled = False
        self.tail = 1  # how many of a point's largest |x| the calibration's percentile leaves above its range
        self.largest: dict[tuple[int, str], list[torch.Tensor]] = {}
        self.extremes: dict[tuple[int, str], tuple[float, float]] = {}
        self.ranges: dict[tuple[int, str], tuple[float, float]] = {}

    def expect(self, values: int) -> None:
        """Start a calibration pass over ``values`` activations a point."""
        self.tail = max(1, math.ceil(values * RANGE_QUANTILE))
        self.largest.clear()
        self.extremes.clear()
        self.recording = True

    def __call__(self, x: torch.Tensor, key: tuple[int, str]) -> torch.Tensor:
        if self.recording:
            flat = x.detach().flatten()
            self.largest.setdefault(key, []).append(torch.topk(flat.abs(), min(self.tail, flat.numel())).values)
            low, high = self.extremes.get(key, (0.0, 0.0))
            self.extremes[key] = (min(low, float(flat.min())), max(high, float(flat.max())))
        if not self.enabled:
            return x
        low, high = self.ranges[key]
        scale = max(high - low, 1e-8) / ACTIVATION_LEVELS
        zero = round(-low / scale)
        return (torch.clamp(_straight_through_round(x / scale) + zero, 0, ACTIVATION_LEVELS) - zero) * scale

    def fix_ranges(self) -> None:
        """Each recorded point's range as onnxruntime's percentile calibration places it: [-t, t] for t the
        99.999% quantile of |x|, cut to the values seen (and holding zero, as uint8 with a zero point must)."""
        self.recording = False
        for key, parts in self.largest.items():
            largest = torch.cat(parts)
            bound = float(torch.topk(largest, min(self.tail, largest.numel())).values[-1])
            low, high = self.extremes[key]
            self.ranges[key] = (max(-bound, low), min(bound, high))
        self.largest.clear()


class RoundedBlock(nn.Module):
    """A residual block whose forward pass rounds where onnxruntime's QDQ int8 graph does."""

    def __init__(self, block: ResidualBlock, index: int, rounding: ActivationRounding) -> None:
        super().__init__()
        self.first, self.second, self.index, self.rounding = block.first, block.second, index, rounding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = self.rounding
        if self.index == 0:  # later blocks' inputs are the previous sums, rounded already
            x = q(x, (self.index, "input"))
        middle = q(F.relu(self.first(x)), (self.index, "middle"))
        second = q(self.second(middle), (self.index, "second"))
        return q(F.relu(x + second), (self.index, "sum"))


def _with_rounding(model: TabulaNet) -> tuple[ActivationRounding, list[SevenBitWeight]]:
    """Swap the blocks of ``model``'s tower for rounding ones sharing their weights, and parametrize those blocks'
    convolution weights; returns the switches."""
    if not len(model.tower):
        raise ValueError("the network has no residual blocks to round")
    rounding, weights = ActivationRounding(), []
    for index, block in enumerate(model.tower):
        model.tower[index] = RoundedBlock(block, index, rounding)
        for conv_bn in (block.first, block.second):
            weight = SevenBitWeight()
            parametrize.register_parametrization(conv_bn.conv, "weight", weight)
            weights.append(weight)
    return rounding, weights


def _without_rounding(model: TabulaNet) -> None:
    """Undo ``_with_rounding``: plain residual blocks holding the trained (unrounded) weights."""
    for index, rounded in enumerate(model.tower):
        block = ResidualBlock(rounded.first.conv.out_channels)
        for conv_bn in (rounded.first, rounded.second):
            parametrize.remove_parametrizations(conv_bn.conv, "weight", leave_parametrized=False)
        block.first, block.second = rounded.first, rounded.second
        model.tower[index] = block


def _loss(outputs: tuple[torch.Tensor, ...], targets: tuple[torch.Tensor, ...], legal: torch.Tensor) -> torch.Tensor:
    """How far outputs are from the fp32 network's: the policy's KL over the legal moves, the value's squared
    error, and with score and ownership heads theirs (the score in points, hence its small weight)."""
    logits = F.log_softmax(outputs[0].masked_fill(~legal, -1e4), dim=1)
    wanted = F.softmax(targets[0].masked_fill(~legal, -1e4), dim=1)
    loss = (wanted * (torch.log(wanted.clamp_min(1e-12)) - logits)).sum(1).mean()
    loss = loss + F.mse_loss(outputs[1], targets[1])
    if len(outputs) >= 4:
        loss = loss + 0.01 * F.mse_loss(outputs[2], targets[2]) + 0.1 * F.mse_loss(outputs[3], targets[3])
    return loss


def _legal_columns(legal: np.ndarray, columns: int) -> torch.Tensor:
    """The legal-move mask widened to the policy's columns (outputs past pass, if any, stay unmasked)."""
    if legal.shape[1] < columns:
        legal = np.concatenate([legal, np.ones((len(legal), columns - legal.shape[1]), dtype=bool)], axis=1)
    return torch.from_numpy(legal[:, :columns])


@contextlib.contextmanager
def simulated_int8(model: TabulaNet, calibration: torch.Tensor):
    """Within the block, ``model``'s residual blocks can round as its int8 file would, over ranges calibrated on the
    planes ``calibration``; yields ``rounded(on)``, the switch (off at first). On leaving, ``model`` has plain
    blocks again, with whatever weights were trained meanwhile (unrounded)."""
    rounding, weights = _with_rounding(model)

    def rounded(on: bool) -> None:
        rounding.enabled = on
        for weight in weights:
            weight.enabled = on

    try:
        points = calibration.shape[0] * calibration.shape[2] * calibration.shape[3]
        rounding.expect(points * model.spec.filters)
        with torch.no_grad():
            for i in range(0, len(calibration), 256):
                model(calibration[i: i + 256])
        rounding.fix_ranges()
        yield rounded
    finally:
        rounded(False)
        _without_rounding(model)


def train_rounded(model: TabulaNet, planes: np.ndarray, legal: np.ndarray, config: AwareConfig,
                  calibration: np.ndarray | None = None, log=None) -> dict[str, float]:
    """Fine-tune ``model``'s residual blocks (in place) so that its rounded forward pass (``simulated_int8``,
    calibrated on ``calibration``, the int8 file's calibration planes, or else on ``planes``) gives what its forward
    pass gave before, on ``planes`` (with their ``legal`` move masks). Returns the rounded pass's loss on those
    positions before and after (``before``, ``after``)."""
    torch.manual_seed(config.seed)
    model.eval()  # batch norms keep their statistics: they fold into the convolutions the int8 file rounds
    inputs = torch.from_numpy(planes)
    with torch.no_grad():
        targets = [torch.cat(parts) for parts in zip(*(model(inputs[i: i + 256])
                                                      for i in range(0, len(inputs), 256)))]
    mask = _legal_columns(legal, targets[0].shape[1])

    def loss_on_all() -> float:
        with torch.no_grad():
            total = sum(float(_loss(model(inputs[i: i + 256]), [t[i: i + 256] for t in targets], mask[i: i + 256]))
                        * len(inputs[i: i + 256]) for i in range(0, len(inputs), 256))
        return total / len(inputs)

    with simulated_int8(model, inputs if calibration is None else torch.from_numpy(calibration)) as rounded:
        rounded(True)
        before = loss_on_all()
        trained = [p for name, p in model.named_parameters() if name.startswith("tower.")]
        for name, parameter in model.named_parameters():
            parameter.requires_grad_(name.startswith("tower."))
        optimizer = torch.optim.Adam(trained, lr=config.lr)
        generator = torch.Generator().manual_seed(config.seed)
        for step in range(config.steps):
            pick = torch.randint(0, len(inputs), (config.batch,), generator=generator)
            batch_targets = [t[pick] for t in targets]
            rounded(True)
            loss = _loss(model(inputs[pick]), batch_targets, mask[pick])
            rounded(False)
            plain = _loss(model(inputs[pick]), batch_targets, mask[pick])
            optimizer.zero_grad()
            (loss + config.plain_weight * plain).backward()
            optimizer.step()
            if log is not None and (step % 100 == 0 or step == config.steps - 1):
                log(f"step {step}: rounded {loss.item():.4f}, unrounded {plain.item():.4f}")
        rounded(True)
        after = loss_on_all()
    for parameter in model.parameters():
        parameter.requires_grad_(True)
    return {"before": before, "after": after}


__all__ = ["AwareConfig", "simulated_int8", "train_rounded"]
