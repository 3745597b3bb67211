"""KataGo's network files: the reader and the writer of the format KataGo's C++ loads (``.bin.gz``, ``.bin``,
``.txt.gz``, ``.txt``), numpy only.

The format is a stream of whitespace-separated tokens (names, integers, a few floats) in which each layer's weights
follow its header: as text floats in the ``.txt`` files, and in the binary files as ``@BIN@`` and then the 32-bit
little-endian floats. What comes in which order depends on the model version; one schema per layer below says it,
and the same schema drives both the reader and the writer (``_Reader``, ``_Writer``), so that what one writes the
other reads.

A parsed model is nested dicts (layer fields by name, weights as float32 arrays in the file's order: convolutions
[ky, kx, in, out], matrices [in, out]) and lists of blocks, each block a dict with its ``kind``. The torch network
(``katago_network``) is built from it; ``structure`` gives the same tree with every array replaced by its shape,
which is what an exported ONNX file keeps in its metadata.

``converted_onnx`` converts a model file to a Tabula ONNX file on first use and keeps it in a cache (the
conversion itself imports ``katago_network``, and so torch, only then).

Layer: net (numpy; ``netfile`` for its error).
"""
from __future__ import annotations

import gzip
import io
import os
import re
import zlib
from typing import Callable

import numpy as np

# Model versions whose inputs are KataGo's V7 features (22 spatial, 19 global): the ones Tabula reads.
SUPPORTED_VERSIONS = range(8, 18)
# How much of the optimistic policy (model versions 12 and later) a converted network's policy mixes in: KataGo's
# default at the search's root and in kata-raw-nn (rootPolicyOptimism; its search uses 1.0 below the root)
DEFAULT_POLICY_OPTIMISM = 0.2
NUM_SPATIAL_FEATURES = 22
NUM_GLOBAL_FEATURES = 19
ACTIVATIONS = ("ACTIVATION_IDENTITY", "ACTIVATION_RELU", "ACTIVATION_MISH", "ACTIVATION_SILU")
BLOCK_KINDS = ("ordinary_block", "gpool_block", "nested_bottleneck_block", "transformer_attention_block",
               "transformer_ffn_block")
# The scalings of the value head's outputs before version 13, where the file does not give them
DEFAULT_POSTPROCESS = {
    "td_score_multiplier": 20.0, "score_mean_multiplier": 20.0, "score_stdev_multiplier": 20.0,
    "lead_multiplier": 20.0, "variance_time_multiplier": 40.0, "shortterm_value_error_multiplier": 0.25,
    "shortterm_score_error_multiplier": 30.0,
}
_MAX_CHANNELS = 1 << 16  # far above any network's; a header beyond it is a corrupt file, not a network
_MAX_NESTING = 8
_TOKEN = re.compile(rb"\s*(\S+)")
_SPACE = b" \t\n\r\v\f"


class KataGoModelError(ValueError):
    """A KataGo model file that cannot be used: names the file and what is wrong with it."""

    def __init__(self, path: str, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class _FormatError(Exception):
    """What is wrong, before the file's name is known to the message."""


# -- reading and writing -------------------------------------------------------------------------------------------


def read_model(path: str | os.PathLike) -> dict:
    """Parse a KataGo model file (``.bin.gz``, ``.bin``, ``.txt.gz``, ``.txt``; gzip recognised by its contents).

    Raises KataGoModelError for a missing, truncated or corrupt file, and for a model version other than 8 to 17
    (naming the version)."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as e:
        raise KataGoModelError(path, e.strerror or str(e)) from None
    return parse_model(data, path)


def parse_model(data: bytes, path: str = "<bytes>") -> dict:
    """``read_model`` on a file's bytes (``path`` names it in errors and says, by its ending, text or binary)."""
    if not data:
        raise KataGoModelError(path, "empty file")
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise KataGoModelError(path, f"corrupt or truncated gzip data ({e})") from None
    lower = path.lower()
    text = lower.endswith((".txt", ".txt.gz"))
    try:
        return _parse(data, binary=not text)
    except _FormatError as e:
        ambiguous = not lower.endswith((".bin", ".bin.gz", ".txt", ".txt.gz"))
        if not text and ambiguous and "@BIN@" in str(e):
            try:
                return _parse(data, binary=False)
            except _FormatError:
                pass
        raise KataGoModelError(path, f"not a usable KataGo model: {e}") from None


def _parse(data: bytes, binary: bool) -> dict:
    reader = _Reader(data, binary)
    model: dict = {}
    _model_schema(reader, model)
    _check_model(model)
    return model


def write_model(model: dict, path: str | os.PathLike, binary: bool | None = None) -> None:
    """Write ``model`` (as ``read_model`` returns it) in KataGo's format: gzip where ``path`` ends in ``.gz``;
    binary floats unless ``binary`` is False or the name ends in ``.txt``/``.txt.gz``."""
    path = os.fspath(path)
    lower = path.lower()
    if binary is None:
        binary = not lower.endswith((".txt", ".txt.gz"))
    data = model_bytes(model, binary)
    if lower.endswith(".gz"):
        data = gzip.compress(data, compresslevel=6, mtime=0)
    with open(path, "wb") as handle:
        handle.write(data)


def model_bytes(model: dict, binary: bool = True) -> bytes:
    """The uncompressed file of ``model``."""
    try:
        _check_model(model)
    except _FormatError as e:
        raise ValueError(str(e)) from None
    writer = _Writer(binary)
    _model_schema(writer, model)
    return writer.getvalue()


class _Reader:
    """Reads tokens and float blocks from a model file's bytes, into the dicts the schemas name."""

    reading = True

    def __init__(self, data: bytes, binary: bool):
        self.data = data
        self.pos = 0
        self.binary = binary
        self.where = "model header"

    def token(self) -> str:
        match = _TOKEN.match(self.data, self.pos)
        if match is None:
            raise _FormatError(f"the file ends early (truncated?) in {self.where}")
        self.pos = match.end()
        try:
            return match.group(1).decode("ascii")
        except UnicodeDecodeError:
            raise _FormatError(f"unreadable bytes where a token was expected in {self.where}") from None

    def tok(self, d: dict, key: str) -> str:
        d[key] = value = self.token()
        return value

    def int(self, d: dict, key: str, low: int = 0, high: int = _MAX_CHANNELS) -> int:
        text = self.token()
        try:
            value = int(text)
        except ValueError:
            raise _FormatError(f"{self.where}: expected an integer for {key}, found {text[:40]!r}") from None
        if not low <= value <= high:
            raise _FormatError(f"{self.where}: {key} = {value}, expected {low} to {high}")
        d[key] = value
        return value

    def float(self, d: dict, key: str) -> float:
        text = self.token()
        try:
            value = float(text)
        except ValueError:
            raise _FormatError(f"{self.where}: expected a number for {key}, found {text[:40]!r}") from None
        if not np.isfinite(value):
            raise _FormatError(f"{self.where}: {key} is not finite")
        d[key] = value
        return value

    def floats(self, d: dict, key: str, shape: tuple[int, ...]) -> None:
        count = int(np.prod(shape, dtype=np.int64))
        if self.binary:
            start = self.pos
            while self.pos < len(self.data) and self.data[self.pos] in _SPACE and self.pos - start <= 100:
                self.pos += 1
            if self.data[self.pos:self.pos + 5] != b"@BIN@":
                if self.pos >= len(self.data):
                    raise _FormatError(f"the file ends early (truncated?) in {self.where}")
                raise _FormatError(f"{self.where}: no @BIN@ float block where {key}'s weights should start "
                                   "(a text model read as binary?)")
            self.pos += 5
            end = self.pos + 4 * count
            if end > len(self.data):
                raise _FormatError(f"the file ends early (truncated?) in {self.where}'s weights")
            values = np.frombuffer(self.data, dtype="<f4", count=count, offset=self.pos).astype(np.float32)
            self.pos = end
        else:
            tokens = [self.token() for _ in range(count)]
            try:
                values = np.array([float(t) for t in tokens], dtype=np.float32)
            except ValueError:
                raise _FormatError(f"{self.where}: unreadable float weights (a binary model read as text?)") \
                    from None
        if not np.all(np.isfinite(values)):
            raise _FormatError(f"{self.where}: NaN or infinite weights")
        d[key] = values.reshape(shape)

    def item(self, items: list, index: int) -> dict:
        if index == len(items):
            items.append({})
        return items[index]


class _Writer:
    """Writes what the schemas name from the dicts, as KataGo's exporter does (one token a line)."""

    reading = False

    def __init__(self, binary: bool):
        self.out = io.BytesIO()
        self.binary = binary
        self.where = "model"

    def getvalue(self) -> bytes:
        return self.out.getvalue()

    def _line(self, text: str) -> None:
        self.out.write(text.encode("ascii") + b"\n")

    def tok(self, d: dict, key: str) -> str:
        value = str(d[key])
        if not value or any(c.isspace() for c in value):
            raise ValueError(f"{self.where}: {key} {value!r} is not one token")
        self._line(value)
        return value

    def int(self, d: dict, key: str, low: int = 0, high: int = _MAX_CHANNELS) -> int:
        value = int(d[key])
        self._line(str(value))
        return value

    def float(self, d: dict, key: str) -> float:
        value = float(d[key])
        self._line(repr(value))
        return value

    def floats(self, d: dict, key: str, shape: tuple[int, ...]) -> None:
        values = np.asarray(d[key], dtype=np.float32)
        if values.shape != tuple(shape):
            raise ValueError(f"{self.where}: {key} has shape {values.shape}, expected {tuple(shape)}")
        if self.binary:
            self.out.write(b"@BIN@" + values.astype("<f4").tobytes() + b"\n")
        else:
            self._line(" ".join(repr(float(v)) for v in values.reshape(-1)))

    def item(self, items: list, index: int) -> dict:
        return items[index]


# -- the schemas: one function per layer, for the reader and the writer alike ---------------------------------------


def _named(io_, d: dict, what: str) -> str:
    name = io_.tok(d, "name")
    io_.where = f"{what} {name}"
    return name


def _conv(io_, d: dict) -> dict:
    _named(io_, d, "convolution")
    ky = io_.int(d, "ky", 1, 99)
    kx = io_.int(d, "kx", 1, 99)
    cin = io_.int(d, "in_channels", 1)
    cout = io_.int(d, "out_channels", 1)
    io_.int(d, "dilation_y", 1, 99)
    io_.int(d, "dilation_x", 1, 99)
    if ky % 2 != 1 or kx % 2 != 1:
        raise _FormatError(f"{io_.where}: even convolution sizes {ky}x{kx}")
    io_.floats(d, "weights", (ky, kx, cin, cout))
    return d


def _batch_norm(io_, d: dict) -> dict:
    _named(io_, d, "batch norm")
    channels = io_.int(d, "channels", 1)
    epsilon = io_.float(d, "epsilon")
    if not epsilon > 0:
        raise _FormatError(f"{io_.where}: epsilon {epsilon} is not positive")
    has_scale = io_.int(d, "has_scale", 0, 1)
    has_bias = io_.int(d, "has_bias", 0, 1)
    io_.floats(d, "mean", (channels,))
    io_.floats(d, "variance", (channels,))
    if has_scale:
        io_.floats(d, "scale", (channels,))
    if has_bias:
        io_.floats(d, "bias", (channels,))
    return d


def _activation(io_, d: dict, version: int) -> dict:
    _named(io_, d, "activation")
    if version >= 11:
        kind = io_.tok(d, "activation")
        if kind not in ACTIVATIONS:
            raise _FormatError(f"{io_.where}: unknown activation {kind}")
    elif io_.reading:
        d["activation"] = "ACTIVATION_RELU"
    return d


def _matmul(io_, d: dict) -> dict:
    _named(io_, d, "matmul")
    cin = io_.int(d, "in_channels", 1)
    cout = io_.int(d, "out_channels", 1)
    io_.floats(d, "weights", (cin, cout))
    return d


def _matbias(io_, d: dict) -> dict:
    _named(io_, d, "bias")
    channels = io_.int(d, "channels", 1)
    io_.floats(d, "weights", (channels,))
    return d


def _rms_norm(io_, d: dict) -> dict:
    _named(io_, d, "rms norm")
    channels = io_.int(d, "channels", 1)
    epsilon = io_.float(d, "epsilon")
    io_.int(d, "spatial", 0, 1)
    io_.int(d, "group_size", 0, 0)  # KataGo refuses grouped RMS norms too
    if not 0 < epsilon <= 1:
        raise _FormatError(f"{io_.where}: epsilon {epsilon} is not in (0, 1]")
    io_.floats(d, "gamma", (channels,))
    io_.floats(d, "beta", (channels,))
    return d


def _transformer_norm(io_, d: dict) -> dict:
    _named(io_, d, "transformer norm")
    channels = io_.int(d, "channels", 1)
    epsilon = io_.float(d, "epsilon")
    if not 0 < epsilon <= 1:
        raise _FormatError(f"{io_.where}: epsilon {epsilon} is not in (0, 1]")
    io_.floats(d, "weight", (channels,))
    return d


def _sub(io_, d: dict, key: str, schema: Callable, *args) -> dict:
    if io_.reading:
        d[key] = {}
    return schema(io_, d[key], *args)


def _ordinary_block(io_, d: dict, version: int, depth: int) -> None:
    _named(io_, d, "block")
    _sub(io_, d, "pre_bn", _batch_norm)
    _sub(io_, d, "pre_activation", _activation, version)
    _sub(io_, d, "regular_conv", _conv)
    _sub(io_, d, "mid_bn", _batch_norm)
    _sub(io_, d, "mid_activation", _activation, version)
    _sub(io_, d, "final_conv", _conv)


def _gpool_block(io_, d: dict, version: int, depth: int) -> None:
    _named(io_, d, "block")
    _sub(io_, d, "pre_bn", _batch_norm)
    _sub(io_, d, "pre_activation", _activation, version)
    _sub(io_, d, "regular_conv", _conv)
    _sub(io_, d, "gpool_conv", _conv)
    _sub(io_, d, "gpool_bn", _batch_norm)
    _sub(io_, d, "gpool_activation", _activation, version)
    _sub(io_, d, "gpool_to_bias", _matmul)
    _sub(io_, d, "mid_bn", _batch_norm)
    _sub(io_, d, "mid_activation", _activation, version)
    _sub(io_, d, "final_conv", _conv)


def _nested_block(io_, d: dict, version: int, depth: int) -> None:
    _named(io_, d, "block")
    count = io_.int(d, "num_blocks", 1, 1000)
    _sub(io_, d, "pre_bn", _batch_norm)
    _sub(io_, d, "pre_activation", _activation, version)
    _sub(io_, d, "pre_conv", _conv)
    _block_stack(io_, d, count, version, depth + 1)
    _sub(io_, d, "post_bn", _batch_norm)
    _sub(io_, d, "post_activation", _activation, version)
    _sub(io_, d, "post_conv", _conv)


def _attention_block(io_, d: dict, version: int, depth: int) -> None:
    _named(io_, d, "attention block")
    heads = io_.int(d, "num_heads", 1)
    kv_heads = io_.int(d, "num_kv_heads", 1)
    q_dim = io_.int(d, "q_head_dim", 1)
    io_.int(d, "v_head_dim", 1)
    use_rope = io_.int(d, "use_rope", 0, 1)
    learnable = io_.int(d, "learnable_rope", 0, 1)
    if heads % kv_heads != 0:
        raise _FormatError(f"{io_.where}: {heads} heads do not divide into {kv_heads} key/value heads")
    if use_rope and q_dim % 2 != 0:
        raise _FormatError(f"{io_.where}: odd head size {q_dim} with rotary embeddings")
    _sub(io_, d, "pre_norm", _transformer_norm)
    _sub(io_, d, "q_proj", _matmul)
    _sub(io_, d, "k_proj", _matmul)
    _sub(io_, d, "v_proj", _matmul)
    _sub(io_, d, "out_proj", _matmul)
    if use_rope:
        if learnable:
            io_.tok(d, "rope_name")
            rope_heads = io_.int(d, "rope_kv_heads", 1)
            pairs = io_.int(d, "rope_pairs", 1)
            io_.int(d, "rope_dim", 2, 2)
            if rope_heads != kv_heads or pairs != q_dim // 2:
                raise _FormatError(f"{io_.where}: rotary frequencies [{rope_heads}, {pairs}] do not match the "
                                   f"heads [{kv_heads}, {q_dim // 2}]")
            io_.floats(d, "rope_freqs", (rope_heads, pairs, 2))
        else:
            io_.tok(d, "rope_name")
            theta = io_.float(d, "rope_theta")
            if not theta > 0:
                raise _FormatError(f"{io_.where}: rotary theta {theta} is not positive")


def _ffn_block(io_, d: dict, version: int, depth: int) -> None:
    _named(io_, d, "feed-forward block")
    io_.int(d, "channels", 1)
    io_.int(d, "ffn_channels", 1)
    swiglu = io_.int(d, "use_swiglu", 0, 1)
    _sub(io_, d, "pre_norm", _transformer_norm)
    _sub(io_, d, "linear1", _matmul)
    if swiglu:
        _sub(io_, d, "linear_gate", _matmul)
    _sub(io_, d, "linear2", _matmul)


_BLOCK_SCHEMAS = {
    "ordinary_block": _ordinary_block,
    "gpool_block": _gpool_block,
    "nested_bottleneck_block": _nested_block,
    "transformer_attention_block": _attention_block,
    "transformer_ffn_block": _ffn_block,
}


def _block_stack(io_, d: dict, count: int, version: int, depth: int) -> None:
    if depth > _MAX_NESTING:
        raise _FormatError(f"{io_.where}: blocks nested deeper than {_MAX_NESTING}")
    if io_.reading:
        d["blocks"] = []
    elif len(d["blocks"]) != count:
        raise ValueError(f"{io_.where}: {len(d['blocks'])} blocks, the header says {count}")
    for index in range(count):
        block = io_.item(d["blocks"], index)
        kind = io_.tok(block, "kind")
        if kind not in _BLOCK_SCHEMAS:
            raise _FormatError(f"{io_.where}: unknown block kind {kind[:60]!r}")
        _BLOCK_SCHEMAS[kind](io_, block, version, depth)


def _metadata_encoder(io_, d: dict, version: int) -> None:
    _named(io_, d, "metadata encoder")
    io_.int(d, "in_channels", 1)
    _sub(io_, d, "mul1", _matmul)
    _sub(io_, d, "bias1", _matbias)
    _sub(io_, d, "act1", _activation, version)
    _sub(io_, d, "mul2", _matmul)
    _sub(io_, d, "bias2", _matbias)
    _sub(io_, d, "act2", _activation, version)
    _sub(io_, d, "mul3", _matmul)


def _unused(io_, d: dict, key: str, count: int) -> None:
    """KataGo's placeholders for future options: zeros, which KataGo refuses to read otherwise."""
    if io_.reading:
        d[key] = [io_.int({}, key, 0, 0) for _ in range(count)]
    else:
        for _ in range(count):
            io_.int({key: 0}, key)


def _trunk(io_, d: dict, version: int, meta_version: int) -> None:
    io_.where = "trunk"
    io_.tok(d, "name")
    count = io_.int(d, "num_blocks", 1, 1000)
    for key in ("trunk_channels", "mid_channels", "regular_channels", "dilated_channels", "gpool_channels"):
        io_.int(d, key, 0)
    if version >= 15:
        io_.int(d, "norm_kind", 0, 1)
        _unused(io_, d, "options", 5)
    elif io_.reading:
        d["norm_kind"] = 0
    _sub(io_, d, "initial_conv", _conv)
    _sub(io_, d, "initial_matmul", _matmul)
    if meta_version > 0:
        _sub(io_, d, "metadata_encoder", _metadata_encoder, version)
    _block_stack(io_, d, count, version, 0)
    if d["norm_kind"] == 0:
        _sub(io_, d, "tip_bn", _batch_norm)
    else:
        _sub(io_, d, "tip_rms_norm", _rms_norm)
    _sub(io_, d, "tip_activation", _activation, version)


def policy_channels(version: int, head: dict | None = None) -> int:
    """The policy convolution's output channels (the first is the policy Tabula uses)."""
    if version >= 17:
        return head["out_channels"]
    return 4 if version == 16 else 2 if version >= 12 else 1


def _policy_head(io_, d: dict, version: int) -> None:
    io_.where = "policy head"
    io_.tok(d, "name")
    if version >= 17:
        channels = io_.int(d, "out_channels", 2, 4)
        if channels not in (2, 4):
            raise _FormatError(f"policy head: {channels} output channels, expected 2 or 4")
        _unused(io_, d, "options", 3)
    _sub(io_, d, "p1_conv", _conv)
    _sub(io_, d, "g1_conv", _conv)
    _sub(io_, d, "g1_bn", _batch_norm)
    _sub(io_, d, "g1_activation", _activation, version)
    _sub(io_, d, "gpool_to_bias", _matmul)
    _sub(io_, d, "p1_bn", _batch_norm)
    _sub(io_, d, "p1_activation", _activation, version)
    _sub(io_, d, "p2_conv", _conv)
    _sub(io_, d, "gpool_to_pass", _matmul)
    if version >= 15:
        _sub(io_, d, "gpool_to_pass_bias", _matbias)
        _sub(io_, d, "pass_activation", _activation, version)
        _sub(io_, d, "gpool_to_pass2", _matmul)


def _value_head(io_, d: dict, version: int) -> None:
    io_.where = "value head"
    io_.tok(d, "name")
    if version >= 17:
        _unused(io_, d, "options", 3)
    _sub(io_, d, "v1_conv", _conv)
    _sub(io_, d, "v1_bn", _batch_norm)
    _sub(io_, d, "v1_activation", _activation, version)
    _sub(io_, d, "v2_mul", _matmul)
    _sub(io_, d, "v2_bias", _matbias)
    _sub(io_, d, "v2_activation", _activation, version)
    _sub(io_, d, "v3_mul", _matmul)
    _sub(io_, d, "v3_bias", _matbias)
    _sub(io_, d, "sv3_mul", _matmul)
    _sub(io_, d, "sv3_bias", _matbias)
    _sub(io_, d, "ownership_conv", _conv)


def _model_schema(io_, d: dict) -> None:
    io_.tok(d, "name")
    version_text = io_.tok(d, "version") if io_.reading else io_.tok({"version": d["version"]}, "version")
    try:
        version = int(version_text)
    except ValueError:
        raise _FormatError(f"no model version after the name (found {version_text[:40]!r}): not a KataGo model "
                           "file") from None
    d["version"] = version
    if version not in SUPPORTED_VERSIONS:
        raise _FormatError(unsupported_version_message(version))
    io_.int(d, "input_channels", 1)
    io_.int(d, "input_global_channels", 1)
    if version >= 13:
        if io_.reading:
            d["postprocess"] = {}
        for key in DEFAULT_POSTPROCESS:
            value = io_.float(d["postprocess"], key)
            if not value > 0:
                raise _FormatError(f"model header: {key} {value} is not positive")
    elif io_.reading:
        d["postprocess"] = dict(DEFAULT_POSTPROCESS)
    if version >= 15:
        io_.int(d, "meta_encoder_version", 0, 1)
        io_.int(d, "prefer_pass_alive_under_suicide", 0, 1)
        _unused(io_, d, "options", 6)
    elif io_.reading:
        d["meta_encoder_version"] = 0
        d["prefer_pass_alive_under_suicide"] = 0
    _sub(io_, d, "trunk", _trunk, version, d["meta_encoder_version"])
    _sub(io_, d, "policy_head", _policy_head, version)
    _sub(io_, d, "value_head", _value_head, version)


def unsupported_version_message(version: int) -> str:
    if 3 <= version <= 7:
        return (f"KataGo model version {version} is not supported: Tabula reads model versions "
                f"{SUPPORTED_VERSIONS[0]} to {SUPPORTED_VERSIONS[-1]} (KataGo's V7 inputs); version {version} "
                f"networks take older inputs")
    return (f"KataGo model version {version} is not supported: Tabula reads model versions "
            f"{SUPPORTED_VERSIONS[0]} to {SUPPORTED_VERSIONS[-1]}")


# -- checks: the channels of consecutive layers agree ---------------------------------------------------------------


def _expect(condition: bool, where: str, problem: str) -> None:
    if not condition:
        raise _FormatError(f"{where}: {problem}")


def _conv_io(conv: dict) -> tuple[int, int]:
    return conv["in_channels"], conv["out_channels"]


def _check_blocks(blocks: list, channels: int, where: str) -> None:
    for block in blocks:
        kind, name = block["kind"], f"{where} {block['name']}"
        if kind in ("ordinary_block", "gpool_block"):
            regular = block["regular_conv"]
            _expect(block["pre_bn"]["channels"] == channels == regular["in_channels"], name, "input channels")
            mid = regular["out_channels"]
            _expect(block["mid_bn"]["channels"] == mid == block["final_conv"]["in_channels"], name, "mid channels")
            _expect(block["final_conv"]["out_channels"] == channels, name, "output channels")
            if kind == "gpool_block":
                gpool = block["gpool_conv"]
                _expect(gpool["in_channels"] == channels and block["gpool_bn"]["channels"] == gpool["out_channels"],
                        name, "pooling channels")
                _expect(_mat_io(block["gpool_to_bias"]) == (3 * gpool["out_channels"], mid), name,
                        "pooling matmul channels")
        elif kind == "nested_bottleneck_block":
            inner = block["pre_conv"]["out_channels"]
            _expect(block["pre_bn"]["channels"] == channels == block["pre_conv"]["in_channels"], name,
                    "input channels")
            _expect(block["post_bn"]["channels"] == inner == block["post_conv"]["in_channels"], name,
                    "inner channels")
            _expect(block["post_conv"]["out_channels"] == channels, name, "output channels")
            _check_blocks(block["blocks"], inner, name)
        elif kind == "transformer_attention_block":
            heads, kv, q, v = (block[k] for k in ("num_heads", "num_kv_heads", "q_head_dim", "v_head_dim"))
            _expect(block["pre_norm"]["channels"] == channels, name, "norm channels")
            _expect(_mat_io(block["q_proj"]) == (channels, heads * q), name, "query channels")
            _expect(_mat_io(block["k_proj"]) == (channels, kv * q), name, "key channels")
            _expect(_mat_io(block["v_proj"]) == (channels, kv * v), name, "value channels")
            _expect(_mat_io(block["out_proj"]) == (heads * v, channels), name, "output channels")
        else:
            ffn = block["ffn_channels"]
            _expect(block["channels"] == channels == block["pre_norm"]["channels"], name, "channels")
            _expect(_mat_io(block["linear1"]) == (channels, ffn), name, "linear1 channels")
            if block["use_swiglu"]:
                _expect(_mat_io(block["linear_gate"]) == (channels, ffn), name, "gate channels")
            _expect(_mat_io(block["linear2"]) == (ffn, channels), name, "linear2 channels")


def _mat_io(mat: dict) -> tuple[int, int]:
    return mat["in_channels"], mat["out_channels"]


def _check_model(model: dict) -> None:
    version = model["version"]
    trunk, policy, value = model["trunk"], model["policy_head"], model["value_head"]
    channels = trunk["trunk_channels"]
    _expect(_conv_io(trunk["initial_conv"]) == (model["input_channels"], channels), "trunk", "initial convolution")
    _expect(_mat_io(trunk["initial_matmul"]) == (model["input_global_channels"], channels), "trunk",
            "initial matmul")
    _check_blocks(trunk["blocks"], channels, "trunk")
    tip = trunk.get("tip_bn") or trunk.get("tip_rms_norm")
    _expect(tip["channels"] == channels, "trunk", "tip norm channels")
    p1, g1 = policy["p1_conv"], policy["g1_conv"]
    _expect(p1["in_channels"] == channels == g1["in_channels"], "policy head", "input channels")
    _expect(policy["g1_bn"]["channels"] == g1["out_channels"], "policy head", "g1 channels")
    _expect(_mat_io(policy["gpool_to_bias"]) == (3 * g1["out_channels"], p1["out_channels"]), "policy head",
            "pooling matmul channels")
    _expect(policy["p1_bn"]["channels"] == p1["out_channels"] == policy["p2_conv"]["in_channels"], "policy head",
            "p1 channels")
    out = policy_channels(version, policy)
    _expect(policy["p2_conv"]["out_channels"] == out, "policy head", f"policy channels (expected {out})")
    if version >= 15:
        hidden = p1["out_channels"]
        _expect(_mat_io(policy["gpool_to_pass"]) == (3 * g1["out_channels"], hidden), "policy head", "pass matmul")
        _expect(policy["gpool_to_pass_bias"]["channels"] == hidden, "policy head", "pass bias")
        _expect(_mat_io(policy["gpool_to_pass2"]) == (hidden, out), "policy head", "pass matmul 2")
    else:
        _expect(_mat_io(policy["gpool_to_pass"]) == (3 * g1["out_channels"], out), "policy head", "pass matmul")
    v1 = value["v1_conv"]
    _expect(v1["in_channels"] == channels and value["v1_bn"]["channels"] == v1["out_channels"], "value head",
            "v1 channels")
    hidden = value["v2_mul"]["out_channels"]
    _expect(_mat_io(value["v2_mul"]) == (3 * v1["out_channels"], hidden), "value head", "v2 channels")
    _expect(value["v2_bias"]["channels"] == hidden, "value head", "v2 bias")
    _expect(_mat_io(value["v3_mul"]) == (hidden, 3) and value["v3_bias"]["channels"] == 3, "value head",
            "v3 channels")
    scores = 6 if version >= 9 else 4
    _expect(_mat_io(value["sv3_mul"]) == (hidden, scores) and value["sv3_bias"]["channels"] == scores,
            "value head", f"score channels (expected {scores})")
    _expect(_conv_io(value["ownership_conv"]) == (v1["out_channels"], 1), "value head", "ownership channels")
    _expect(model["input_channels"] == NUM_SPATIAL_FEATURES and model["input_global_channels"] == NUM_GLOBAL_FEATURES,
            "model header", f"{model['input_channels']} spatial and {model['input_global_channels']} global inputs, "
            f"expected {NUM_SPATIAL_FEATURES} and {NUM_GLOBAL_FEATURES}")


# -- a random network (test fixtures) --------------------------------------------------------------------------


def random_model(version: int = 15, seed: int = 0, channels: int = 16, mid: int = 8, gpool: int = 4,
                 head: int = 8, rms_tip: bool | None = None, name: str = "tabula-random") -> dict:
    """A small network of every block kind (ordinary, global pooling, nested bottleneck holding each kind, attention
    with learnt and with fixed rotary embeddings and grouped heads, SwiGLU feed-forward), random weights, for
    ``version`` (8 to 17): what the tests write with ``write_model`` instead of shipping KataGo's networks."""
    if version not in SUPPORTED_VERSIONS:
        raise ValueError(unsupported_version_message(version))
    rng = np.random.default_rng(seed)
    kinds = ["ACTIVATION_RELU", "ACTIVATION_MISH", "ACTIVATION_SILU"] if version >= 11 else ["ACTIVATION_RELU"]
    counter = iter(range(1 << 30))

    def label(what: str) -> str:
        return f"{what}.{next(counter)}"

    def conv(cin: int, cout: int, k: int = 3) -> dict:
        w = rng.normal(0.0, 1.0 / np.sqrt(cin * k * k), (k, k, cin, cout)).astype(np.float32)
        return {"name": label("conv"), "ky": k, "kx": k, "in_channels": cin, "out_channels": cout,
                "dilation_y": 1, "dilation_x": 1, "weights": w}

    def bn(c: int) -> dict:
        return {"name": label("bn"), "channels": c, "epsilon": 1e-5, "has_scale": 1, "has_bias": 1,
                "mean": rng.normal(0.0, 0.1, c).astype(np.float32),
                "variance": rng.uniform(0.5, 1.5, c).astype(np.float32),
                "scale": rng.uniform(0.5, 1.5, c).astype(np.float32),
                "bias": rng.normal(0.0, 0.1, c).astype(np.float32)}

    def act() -> dict:
        return {"name": label("act"), "activation": kinds[int(rng.integers(len(kinds)))]}

    def mat(cin: int, cout: int, scale: float = 1.0) -> dict:
        return {"name": label("mat"), "in_channels": cin, "out_channels": cout,
                "weights": rng.normal(0.0, scale / np.sqrt(cin), (cin, cout)).astype(np.float32)}

    def bias(c: int) -> dict:
        return {"name": label("bias"), "channels": c, "weights": rng.normal(0.0, 0.1, c).astype(np.float32)}

    def norm(c: int) -> dict:
        return {"name": label("norm"), "channels": c, "epsilon": 1e-6,
                "weight": rng.uniform(0.5, 1.5, c).astype(np.float32)}

    def ordinary(c: int, m: int) -> dict:
        return {"kind": "ordinary_block", "name": label("block"), "pre_bn": bn(c), "pre_activation": act(),
                "regular_conv": conv(c, m), "mid_bn": bn(m), "mid_activation": act(), "final_conv": conv(m, c)}

    def gpool_block(c: int, m: int) -> dict:
        return {"kind": "gpool_block", "name": label("block"), "pre_bn": bn(c), "pre_activation": act(),
                "regular_conv": conv(c, m), "gpool_conv": conv(c, gpool), "gpool_bn": bn(gpool),
                "gpool_activation": act(), "gpool_to_bias": mat(3 * gpool, m), "mid_bn": bn(m),
                "mid_activation": act(), "final_conv": conv(m, c)}

    def attention(c: int, heads: int, kv_heads: int, learnable: bool) -> dict:
        q_dim = v_dim = 4
        block = {"kind": "transformer_attention_block", "name": label("block"), "num_heads": heads,
                 "num_kv_heads": kv_heads, "q_head_dim": q_dim, "v_head_dim": v_dim, "use_rope": 1,
                 "learnable_rope": int(learnable), "pre_norm": norm(c), "q_proj": mat(c, heads * q_dim),
                 "k_proj": mat(c, kv_heads * q_dim), "v_proj": mat(c, kv_heads * v_dim),
                 "out_proj": mat(heads * v_dim, c, 0.5), "rope_name": label("rope")}
        if learnable:
            block.update(rope_kv_heads=kv_heads, rope_pairs=q_dim // 2, rope_dim=2,
                         rope_freqs=rng.uniform(-1.0, 1.0, (kv_heads, q_dim // 2, 2)).astype(np.float32))
        else:
            block["rope_theta"] = 100.0
        return block

    def ffn(c: int) -> dict:
        return {"kind": "transformer_ffn_block", "name": label("block"), "channels": c, "ffn_channels": 2 * c,
                "use_swiglu": 1, "pre_norm": norm(c), "linear1": mat(c, 2 * c), "linear_gate": mat(c, 2 * c),
                "linear2": mat(2 * c, c, 0.5)}

    def nested(c: int) -> dict:
        inner_c = mid
        blocks = [ordinary(inner_c, mid // 2), attention(inner_c, 2, 2, True), ffn(inner_c),
                  gpool_block(inner_c, mid // 2)]
        return {"kind": "nested_bottleneck_block", "name": label("block"), "num_blocks": len(blocks),
                "pre_bn": bn(c), "pre_activation": act(), "pre_conv": conv(c, inner_c), "blocks": blocks,
                "post_bn": bn(inner_c), "post_activation": act(), "post_conv": conv(inner_c, c)}

    blocks = [ordinary(channels, mid), gpool_block(channels, mid), nested(channels), attention(channels, 4, 2, False),
              ffn(channels), nested(channels)]
    rms_tip = version >= 15 if rms_tip is None else rms_tip
    trunk = {"name": "trunk", "num_blocks": len(blocks), "trunk_channels": channels, "mid_channels": mid,
             "regular_channels": mid - gpool if mid > gpool else mid, "dilated_channels": gpool,
             "gpool_channels": gpool, "norm_kind": int(rms_tip),
             "initial_conv": conv(NUM_SPATIAL_FEATURES, channels, 5),
             "initial_matmul": mat(NUM_GLOBAL_FEATURES, channels), "blocks": blocks, "tip_activation": act()}
    if version >= 15:
        trunk["options"] = [0] * 5
    if rms_tip:
        if version < 15:
            raise ValueError("an RMS norm at the trunk's tip needs model version 15 or later")
        trunk["tip_rms_norm"] = {"name": label("rms"), "channels": channels, "epsilon": 1e-6, "spatial": 1,
                                 "group_size": 0, "gamma": rng.uniform(0.5, 1.5, channels).astype(np.float32),
                                 "beta": rng.normal(0.0, 0.1, channels).astype(np.float32)}
    else:
        trunk["tip_bn"] = bn(channels)
    out = 2 if version >= 12 else 1
    if version == 16:
        out = 4
    policy = {"name": "policy_head", "p1_conv": conv(channels, head, 1), "g1_conv": conv(channels, head, 1),
              "g1_bn": bn(head), "g1_activation": act(), "gpool_to_bias": mat(3 * head, head), "p1_bn": bn(head),
              "p1_activation": act(), "p2_conv": conv(head, out, 1)}
    if version >= 17:
        policy.update(out_channels=out, options=[0] * 3)
    if version >= 15:
        policy.update(gpool_to_pass=mat(3 * head, head), gpool_to_pass_bias=bias(head), pass_activation=act(),
                      gpool_to_pass2=mat(head, out))
    else:
        policy["gpool_to_pass"] = mat(3 * head, out)
    scores = 6 if version >= 9 else 4
    value = {"name": "value_head", "v1_conv": conv(channels, head, 1), "v1_bn": bn(head), "v1_activation": act(),
             "v2_mul": mat(3 * head, 2 * head), "v2_bias": bias(2 * head), "v2_activation": act(),
             "v3_mul": mat(2 * head, 3), "v3_bias": bias(3), "sv3_mul": mat(2 * head, scores, 0.1),
             "sv3_bias": bias(scores), "ownership_conv": conv(head, 1, 1)}
    if version >= 17:
        value["options"] = [0] * 3
    model = {"name": name, "version": version, "input_channels": NUM_SPATIAL_FEATURES,
             "input_global_channels": NUM_GLOBAL_FEATURES, "postprocess": dict(DEFAULT_POSTPROCESS),
             "meta_encoder_version": 0, "prefer_pass_alive_under_suicide": 0,
             "trunk": trunk, "policy_head": policy, "value_head": value}
    if version >= 15:
        model["options"] = [0] * 6
    _check_model(model)
    return model


# -- conversion on first use ---------------------------------------------------------------------------------------


def looks_like_katago(path: str | os.PathLike) -> bool:
    """Whether a file's first tokens are a KataGo model's (a name, then the model version and input planes): not
    ONNX, not Leela Zero weights (a format version, then floats). Reads the first kilobyte."""
    return header_name(path) is not None


def header_name(path: str | os.PathLike) -> str | None:
    """The model's name where a file's first tokens are a KataGo model's header (a name, then the model version and
    input planes), else None. Reads the first kilobyte."""
    path = os.fspath(path)
    if path.lower().endswith(".onnx"):
        return None
    try:
        with open(path, "rb") as handle:
            head = handle.read(1024)
            if head[:2] == b"\x1f\x8b":
                handle.seek(0)
                with gzip.GzipFile(fileobj=handle) as unpacked:
                    head = unpacked.read(1024)
    except (OSError, EOFError, zlib.error):
        return None
    tokens = head.split()[:4]
    if len(tokens) < 4 or not all(token.isdigit() for token in tokens[1:4]):
        return None
    return tokens[0].decode("utf-8", "replace")


# The conversion's own version, in the cached files' names: a change of what the converted graph computes or holds
# raises it, so that files converted before are converted again rather than loaded
CONVERTER_VERSION = 2  # 2: the optimistic policy as an output of its own


def conversion_cache_dir() -> str:
    """Where converted KataGo networks are kept: $XDG_CACHE_HOME/tabula/katago, else ~/.cache/tabula/katago."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tabula", "katago")


def converted_onnx(path: str | os.PathLike, log: Callable[[str], None] | None = None,
                   cache_dir: str | None = None) -> str:
    """The ONNX file of a KataGo model file, converted on first use (``katago_network.export_onnx``) and kept in
    ``cache_dir`` under a name holding the file's SHA-256, so that a changed file converts again and the same file
    never does. ``log`` receives one line saying which happened.

    The conversion needs torch; without it, NetworkFileError says to install it. A file that is no usable KataGo
    model is a NetworkFileError naming it."""
    import atexit
    import shutil
    import tempfile
    import time

    from tabula.engine.net.netfile import NetworkFileError, file_sha256

    path = os.fspath(path)
    name = os.path.basename(path)
    try:
        digest = file_sha256(path)
    except OSError as e:
        raise NetworkFileError(path, e.strerror or str(e)) from None
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", re.sub(r"\.(bin|txt)(\.gz)?$|\.gz$", "", name))[:80] or "network"
    directory = cache_dir or conversion_cache_dir()
    target = os.path.join(directory, f"{stem}-{digest[:16]}-c{CONVERTER_VERSION}.onnx")
    if os.path.isfile(target):
        if log is not None:
            log(f"tabula: KataGo network {name}: converted before, loading {target}")
        return target
    try:
        from tabula.engine.net import katago_network
    except ImportError:
        raise NetworkFileError(path, "a KataGo model file is converted to ONNX on first use, and that needs torch: "
                                     "pip install 'tabula[train]' (or torch); or convert it where torch is with "
                                     "tabula export --from-katago FILE OUT.onnx and give OUT.onnx") from None
    started = time.monotonic()
    try:
        model = read_model(path)
        net = katago_network.KataGoNet(model)
    except (KataGoModelError, katago_network.KataGoNetworkError) as e:
        raise NetworkFileError(path, getattr(e, "problem", str(e))) from None
    try:
        os.makedirs(directory, exist_ok=True)
        handle, scratch = tempfile.mkstemp(suffix=".onnx.tmp", dir=directory)
    except OSError as e:  # an unwritable cache: convert for this run only, into a folder removed at exit
        directory = tempfile.mkdtemp(prefix="tabula-katago-")
        atexit.register(shutil.rmtree, directory, ignore_errors=True)
        target = os.path.join(directory, os.path.basename(target))
        handle, scratch = tempfile.mkstemp(suffix=".onnx.tmp", dir=directory)
        if log is not None:
            log(f"tabula: cannot keep converted networks in {cache_dir or conversion_cache_dir()} "
                f"({e.strerror or e}); converting into {directory}")
    os.close(handle)
    try:
        katago_network.export_onnx(net, model, scratch, path)
        os.chmod(scratch, 0o644)  # mkstemp's 0600 would keep the cache from the machine's other users
        os.replace(scratch, target)  # whole or not at all: a second engine converting at once replaces it alike
    finally:
        if os.path.exists(scratch):
            os.remove(scratch)
    _tidy_cache(target)
    if log is not None:
        log(f"tabula: converted KataGo network {name} ({describe(model)}) to {target} in "
            f"{time.monotonic() - started:.0f} s; later starts load it from there")
    return target


# A scratch file of a conversion older than this was left by a process that was killed: no conversion runs so long
SCRATCH_ABANDONED_S = 24 * 3600.0


def _tidy_cache(target: str) -> None:
    """Remove from ``target``'s folder what no start will load: the conversions of ``target``'s file by other
    converter versions (``NAME-DIGEST-cV.onnx``), which the cache would otherwise keep one of for every version, and
    the scratch files (``*.onnx.tmp``) of conversions killed part-way, each the size of a network."""
    import time

    kept = os.path.basename(target)
    prefix = kept[: kept.rindex("-c") + 2]
    folder = os.path.dirname(target)
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for other in names:
        path = os.path.join(folder, other)
        version = other[len(prefix):-len(".onnx")] if other.startswith(prefix) and other.endswith(".onnx") else ""
        try:
            if (other != kept and version.isdigit()) or (
                    other.endswith(".onnx.tmp") and time.time() - os.path.getmtime(path) > SCRATCH_ABANDONED_S):
                os.remove(path)
        except OSError:
            pass  # another user's file, or removed at once by a second engine: it stays or is gone either way


# -- summaries ------------------------------------------------------------------------------------------------------


def structure(tree):
    """The model with every weight array replaced by its shape (a JSON-able list): what it is, without weights."""
    if isinstance(tree, dict):
        return {key: structure(value) for key, value in tree.items()}
    if isinstance(tree, list):
        return [structure(value) for value in tree]
    if isinstance(tree, np.ndarray):
        return {"shape": list(tree.shape)}
    return tree


def from_structure(tree):
    """The inverse of ``structure``, with zero weights (to be loaded from elsewhere)."""
    if isinstance(tree, dict):
        if set(tree) == {"shape"}:
            return np.zeros(tree["shape"], dtype=np.float32)
        return {key: from_structure(value) for key, value in tree.items()}
    if isinstance(tree, list):
        return [from_structure(value) for value in tree]
    return tree


def block_kinds(blocks: list) -> dict[str, int]:
    """How many blocks of each kind, nested ones included."""
    counts: dict[str, int] = {}
    for block in blocks:
        counts[block["kind"]] = counts.get(block["kind"], 0) + 1
        for kind, count in block_kinds(block.get("blocks", [])).items():
            counts[kind] = counts.get(kind, 0) + count
    return counts


def describe(model: dict) -> str:
    """One line: name, version, blocks x channels, block kinds."""
    trunk = model["trunk"]
    kinds = ", ".join(f"{count} {kind.replace('_block', '')}" for kind, count in block_kinds(trunk["blocks"]).items())
    return (f"{model['name']} (KataGo model version {model['version']}, {trunk['num_blocks']} blocks x "
            f"{trunk['trunk_channels']}: {kinds})")


__all__ = ["ACTIVATIONS", "BLOCK_KINDS", "DEFAULT_POLICY_OPTIMISM", "DEFAULT_POSTPROCESS", "KataGoModelError",
           "NUM_GLOBAL_FEATURES", "NUM_SPATIAL_FEATURES", "SUPPORTED_VERSIONS", "block_kinds", "conversion_cache_dir",
           "converted_onnx", "describe", "from_structure", "header_name", "looks_like_katago", "model_bytes",
           "parse_model", "policy_channels", "random_model", "read_model", "structure",
           "unsupported_version_message", "write_model"]
