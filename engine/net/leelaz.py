"""Leela Zero's text weight files: read and write them as numpy arrays. Weights are data: nothing here runs code.

Layer: beside the evaluator, numpy only (the torch conversion lives in ``network.py``). The format, as Leela Zero 0.17
reads it (``Network::load_v1_network``): a version line (1, or 2 for ELF OpenGo nets whose value is black's rather
than the side to move's), then one line of space-separated floats per tensor:

- the input convolution and each residual convolution, 4 lines each: weights ``[out, in, 3, 3]``, biases ``[out]``,
  batch-norm means ``[out]``, batch-norm variances ``[out]``;
- the policy head, 6 lines: 1×1 conv weights ``[2, F]``, biases, BN means, BN variances, then the fully connected
  layer's weights ``[N*N+1, 2*N*N]`` and biases;
- the value head, 8 lines: 1×1 conv weights ``[1, F]``, biases, BN means, BN variances, FC1 weights ``[256, N*N]``,
  FC1 biases, FC2 weights ``[1, 256]``, FC2 biases.

A layer computes ``(conv(x) + bias - mean) / sqrt(variance + 1e-5)``: batch norm has no scale or shift, and Leela
Zero folds the conv bias into the mean when it loads. Files may be gzipped.
"""
from __future__ import annotations

import gzip
import io
import os
from dataclasses import dataclass

import numpy as np

from tabula.engine.net.features import NUM_PLANES

BN_EPSILON = 1e-5
POLICY_CHANNELS = 2
VALUE_CHANNELS = 1
HEAD_LINES = 14
VERSION_STM = 1  # value from the side to move's view
VERSION_BLACK = 2  # ELF OpenGo: value from black's view


class LeelazFormatError(ValueError):
    """A weight file that is not a valid Leela Zero network: names the file, the line and what is wrong."""

    def __init__(self, path: str, problem: str, line: int | None = None):
        where = f"{path}" + (f", line {line}" if line is not None else "")
        super().__init__(f"{where}: {problem}")
        self.path = path
        self.line = line
        self.problem = problem


@dataclass
class ConvLayer:
    """One convolution with its batch norm, as the file stores it (all float32)."""

    weights: np.ndarray  # [out, in, k, k]
    biases: np.ndarray  # [out]
    means: np.ndarray  # [out]
    variances: np.ndarray  # [out]

    @property
    def outputs(self) -> int:
        return self.weights.shape[0]


@dataclass
class LeelazWeights:
    """A whole network. ``residual`` holds two layers per block."""

    input: ConvLayer
    residual: list[ConvLayer]
    policy: ConvLayer  # [2, F, 1, 1]
    policy_fc_weights: np.ndarray  # [N*N+1, 2*N*N]
    policy_fc_biases: np.ndarray  # [N*N+1]
    value: ConvLayer  # [1, F, 1, 1]
    value_fc1_weights: np.ndarray  # [H, N*N]
    value_fc1_biases: np.ndarray  # [H]
    value_fc2_weights: np.ndarray  # [1, H]
    value_fc2_biases: np.ndarray  # [1]
    version: int = VERSION_STM

    @property
    def blocks(self) -> int:
        return len(self.residual) // 2

    @property
    def filters(self) -> int:
        return self.input.outputs

    @property
    def board_size(self) -> int:
        return int(round((self.policy_fc_biases.size - 1) ** 0.5))

    @property
    def value_hidden(self) -> int:
        return self.value_fc1_biases.size


def _open_text(path: str) -> str:
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise LeelazFormatError(path, f"cannot read: {e.strerror or e}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, gzip.BadGzipFile) as e:
            raise LeelazFormatError(path, f"corrupt gzip data ({e})") from None
    try:
        return raw.decode("ascii")
    except UnicodeDecodeError as e:
        raise LeelazFormatError(path, f"not a text weight file (non-ASCII byte at offset {e.start})") from None


def read_leelaz(path: str | os.PathLike) -> LeelazWeights:
    """Read a Leela Zero weight file (plain or gzipped, version 1 or 2), or raise LeelazFormatError."""
    path = os.fspath(path)
    return parse_leelaz(_open_text(path), path)


def parse_leelaz(text: str, name: str = "<weights>") -> LeelazWeights:
    lines = text.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise LeelazFormatError(name, "empty file")
    try:
        version = int(lines[0].strip())
    except ValueError:
        raise LeelazFormatError(name, f"first line should be the format version, got {lines[0][:40]!r}", 1) \
            from None
    if version not in (VERSION_STM, VERSION_BLACK):
        raise LeelazFormatError(name, f"unsupported format version {version} (expected 1 or 2)", 1)
    tower_lines = len(lines) - 1 - 4 - HEAD_LINES
    if tower_lines < 0 or tower_lines % 8:
        raise LeelazFormatError(name, f"{len(lines)} lines cannot be 1 + 4 + 8 per residual block + 14 "
                                      "(truncated file?)")

    def floats(index: int) -> np.ndarray:
        line = lines[index]
        try:
            values = np.array(line.split(), dtype=np.float32)
        except ValueError:
            raise LeelazFormatError(name, "not a list of numbers", index + 1) from None
        if values.size == 0:
            raise LeelazFormatError(name, "empty line", index + 1)
        if not np.all(np.isfinite(values)):
            raise LeelazFormatError(name, "non-finite number", index + 1)
        return values

    def expect(values: np.ndarray, count: int, index: int, what: str) -> np.ndarray:
        if values.size != count:
            raise LeelazFormatError(name, f"{what}: {values.size} numbers, expected {count}", index + 1)
        return values

    def conv(first: int, inputs: int, kernel: int, outputs: int | None, what: str) -> ConvLayer:
        biases = floats(first + 1)
        if outputs is not None:
            expect(biases, outputs, first + 1, f"{what} biases")
        out = biases.size
        weights = expect(floats(first), out * inputs * kernel * kernel, first, f"{what} weights")
        means = expect(floats(first + 2), out, first + 2, f"{what} batch-norm means")
        variances = expect(floats(first + 3), out, first + 3, f"{what} batch-norm variances")
        if np.any(variances + BN_EPSILON <= 0):
            raise LeelazFormatError(name, f"{what}: negative batch-norm variance", first + 4)
        return ConvLayer(weights.reshape(out, inputs, kernel, kernel), biases, means, variances)

    index = 1
    input_conv = conv(index, NUM_PLANES, 3, None, "input convolution")
    filters = input_conv.outputs
    index += 4
    residual = []
    for layer in range(tower_lines // 4):
        residual.append(conv(index, filters, 3, filters, f"residual convolution {layer + 1}"))
        index += 4
    policy = conv(index, filters, 1, POLICY_CHANNELS, "policy convolution")
    policy_fc_biases = floats(index + 5)
    points = policy_fc_biases.size - 1
    size = int(round(points ** 0.5))
    if size * size != points or size < 2:
        raise LeelazFormatError(name, f"policy output has {points + 1} entries, not N*N+1", index + 6)
    policy_fc_weights = expect(floats(index + 4), (points + 1) * POLICY_CHANNELS * points, index + 4,
                               "policy fully connected weights").reshape(points + 1, POLICY_CHANNELS * points)
    index += 6
    value = conv(index, filters, 1, VALUE_CHANNELS, "value convolution")
    value_fc1_biases = floats(index + 5)
    hidden = value_fc1_biases.size
    value_fc1_weights = expect(floats(index + 4), hidden * VALUE_CHANNELS * points, index + 4,
                               "value FC1 weights").reshape(hidden, VALUE_CHANNELS * points)
    value_fc2_weights = expect(floats(index + 6), hidden, index + 6, "value FC2 weights").reshape(1, hidden)
    value_fc2_biases = expect(floats(index + 7), 1, index + 7, "value FC2 bias")
    return LeelazWeights(input_conv, residual, policy, policy_fc_weights, policy_fc_biases, value,
                         value_fc1_weights, value_fc1_biases, value_fc2_weights, value_fc2_biases, version)


def format_leelaz(weights: LeelazWeights) -> str:
    """The file's text. Nine significant digits give back every float32 exactly."""
    def line(values: np.ndarray) -> str:
        return " ".join(f"{v:.9g}" for v in np.asarray(values, dtype=np.float32).ravel().tolist())

    out = io.StringIO()
    out.write(f"{weights.version}\n")
    for layer in [weights.input, *weights.residual, weights.policy]:
        for values in (layer.weights, layer.biases, layer.means, layer.variances):
            out.write(line(values) + "\n")
    out.write(line(weights.policy_fc_weights) + "\n")
    out.write(line(weights.policy_fc_biases) + "\n")
    layer = weights.value
    for values in (layer.weights, layer.biases, layer.means, layer.variances, weights.value_fc1_weights,
                   weights.value_fc1_biases, weights.value_fc2_weights, weights.value_fc2_biases):
        out.write(line(values) + "\n")
    return out.getvalue()


def write_leelaz(weights: LeelazWeights, path: str | os.PathLike) -> None:
    """Write a weight file; gzipped when the name ends in ``.gz``."""
    path = os.fspath(path)
    data = format_leelaz(weights).encode("ascii")
    if path.endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    with open(path, "wb") as f:
        f.write(data)


__all__ = ["ConvLayer", "LeelazWeights", "LeelazFormatError", "read_leelaz", "parse_leelaz", "format_leelaz",
           "write_leelaz", "BN_EPSILON", "VERSION_STM", "VERSION_BLACK"]
