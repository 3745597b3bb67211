"""The network on a GPU through torch, for machines whose onnxruntime has no GPU provider.

Layer: beside ``onnx_evaluator.py``, imported only when this backend is chosen: it imports torch, which
the playing path otherwise never loads. The network is the same ONNX file the CPU path runs: ``network.load_onnx``
rebuilds the torch module from its metadata and named initialisers. Batch norms are folded into the convolutions,
weights are cast to fp16 or bf16, activations run channels-last, and on CUDA each (batch bucket, board size) is
captured once as a CUDA graph, so that a search's small batches cost one graph launch instead of a few hundred kernel
launches from Python. A batch is padded up to its bucket; batches beyond the largest bucket run in chunks.
"""
from __future__ import annotations

import bisect
import threading

import numpy as np
import torch
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

from tabula.engine.net import network
from tabula.engine.net.netfile import is_katago_network

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# Capturing a CUDA graph makes the whole process's CUDA calls illegal for the capturing thread's stream in the
# default ("global") mode; two runners (one per network of a set) capturing at once would break each other.
_CAPTURE_LOCK = threading.Lock()


def batch_buckets(max_batch: int) -> list[int]:
    """Batch sizes that get their own CUDA graph: 1, 2, 4, 8, then steps of about 1.5× up to ``max_batch``.

    Padding a batch to the next bucket wastes at most a third of the work above 8; a graph per size would cost memory
    and capture time for sizes the search never asks for."""
    if max_batch < 1:
        raise ValueError("max_batch must be at least 1")
    buckets = [b for b in (1, 2, 4, 8) if b < max_batch]
    size = 8
    while size < max_batch:
        size = min(max_batch, size + max(8, (size // 2) // 8 * 8))
        buckets.append(size)
    if not buckets or buckets[-1] != max_batch:
        buckets.append(max_batch)
    return sorted(set(buckets))


def fold_batch_norms(model: nn.Module) -> nn.Module:
    """Fold every ``ConvBN``'s batch norm into its convolution (eval-mode statistics); the module computes the same."""
    for module in model.modules():
        if isinstance(module, network.ConvBN) and isinstance(module.bn, nn.BatchNorm2d):
            module.conv = fuse_conv_bn_eval(module.conv, module.bn)
            module.bn = nn.Identity()
    return model


def _read(path: str):
    """An ONNX file, loaded once for its metadata and its weights (None where it cannot be read: ``load_onnx``
    then reads it again and says what is wrong)."""
    import onnx

    try:
        return onnx.load(path)
    except Exception:
        return None


class TorchRunner:
    """Runs a Tabula ONNX file's network with torch: ``run(planes) -> (policy logits, value)`` as float32 numpy, and
    the score lead and ownership after them where the network has those heads (``aux``), as onnxruntime gives them;
    for a KataGo network converted to ONNX (``katago_network``), all its outputs in the file's order.

    Args:
        path: a Tabula fp32 ONNX file.
        device: ``cuda`` (or ``cuda:N``), or ``cpu`` (tests, and machines where the comparison is wanted).
        precision: ``fp16``, ``bf16`` or ``fp32`` weights and activations (outputs are always float32).
        cuda_graphs: capture and replay CUDA graphs (CUDA only).
        max_batch: the largest batch given one graph; larger batches run in chunks of this size.

    Thread-safe: calls are serialised (the graphs share their input and output buffers, and the GPU runs one batch at
    a time anyway); encoding and masking in the callers' threads overlap with it.
    """

    def __init__(self, path: str, device: str = "cuda", precision: str = "fp16", cuda_graphs: bool = True,
                 max_batch: int = 256):
        if precision not in DTYPES:
            raise ValueError(f"unknown precision {precision!r} ({', '.join(DTYPES)})")
        self.device = torch.device(device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        self.precision = precision
        self.dtype = DTYPES[precision]
        self.cuda_graphs = bool(cuda_graphs) and self.device.type == "cuda"
        self.buckets = batch_buckets(max_batch)
        self.max_batch = self.buckets[-1]
        proto = _read(path)
        self.katago = is_katago_network({p.key: p.value for p in proto.metadata_props} if proto is not None else {})
        if self.katago:
            # KataGo's networks: rebuilt from the structure in the file's metadata; all their outputs run
            from tabula.engine.net import katago_network

            model = katago_network.load_onnx(path, proto)
            self.planes, self.aux = katago_network.NUM_PLANES, True
            # the outputs the file has, as onnxruntime would give them (a file converted before the optimistic
            # policy was an output lacks it)
            names = [output.name for output in proto.graph.output]
            self.katago_outputs = [katago_network.OUTPUTS.index(name) for name in names
                                   if name in katago_network.OUTPUTS]
            self.ones_plane = 0  # on the board
        else:
            model = fold_batch_norms(network.load_onnx(path, proto))
            self.planes = model.spec.encoding.planes
            # a plane all ones on an empty board: black to move (leelaz-18), on the board (katago-v7, tabula-v2)
            self.ones_plane = (model.spec.encoding.size_planes or (16,))[0]
            # The score and ownership heads run too: without them the search on a GPU would rank moves by the value
            # alone (no score utility: every move of a lost handicap game equally bad) and report no score lead.
            self.aux = bool(model.spec.aux)
        self.model = model.to(device=self.device, dtype=self.dtype, memory_format=torch.channels_last).eval()
        self._graphs: dict[tuple[int, int], tuple] = {}
        self._lock = threading.Lock()
        if self.device.type == "cuda":
            torch.backends.cudnn.benchmark = True  # shapes are few and fixed: let cuDNN time its algorithms once
            if precision == "fp32":
                # fp32 should mean fp32: on Ampere and later cuDNN may otherwise run convolutions in TF32, whose
                # 10-bit mantissa is what fp32 was asked for to avoid. (A process-wide switch; nothing else here
                # runs fp32 convolutions that would want TF32.)
                torch.backends.cudnn.allow_tf32 = False
                torch.backends.cuda.matmul.allow_tf32 = False

    def prepare(self, sizes, largest_batch: int | None = None) -> None:
        """Capture the CUDA graphs of every bucket up to ``largest_batch`` (default: all) for these board sizes now,
        so that a game never pays a capture's seconds, or finds the GPU's memory short, in the middle of a move."""
        if not self.cuda_graphs:
            return
        limit = self.max_batch if largest_batch is None else min(self.max_batch, max(1, largest_batch))
        needed = self.buckets[: bisect.bisect_left(self.buckets, limit) + 1]  # up to the bucket that holds limit
        for size in sizes:
            for bucket in needed:
                with self._lock:
                    self._graph(bucket, size)

    def describe(self) -> str:
        where = torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else "cpu"
        graphs = ", CUDA graphs" if self.cuda_graphs else ""
        return f"torch {where} {self.precision}{graphs}"

    def run(self, planes: np.ndarray, graphs: bool = True) -> tuple[np.ndarray, ...]:
        """planes float32 [B, P, N, N] -> (policy logits float32 [B, N*N+1], value float32 [B]), then score float32
        [B] and ownership float32 [B, N*N] where the network has those heads. ``graphs`` False runs without the
        CUDA graphs (none captured for this call)."""
        count = len(planes)
        if count > self.max_batch:
            parts = [self.run(planes[i: i + self.max_batch], graphs) for i in range(0, count, self.max_batch)]
            return tuple(np.concatenate(outputs) for outputs in zip(*parts))
        host = torch.from_numpy(np.ascontiguousarray(planes, dtype=np.float32))
        with self._lock, torch.inference_mode():
            if not (self.cuda_graphs and graphs):
                x = host.to(device=self.device, dtype=self.dtype).contiguous(memory_format=torch.channels_last)
                outputs = self._outputs(x)
            else:
                bucket = self.buckets[bisect.bisect_left(self.buckets, count)]
                graph, x, outputs = self._graph(bucket, planes.shape[-1])
                x[:count].copy_(host)  # to the device and to the network's precision in one copy
                graph.replay()
            return tuple(output[:count].float().cpu().numpy() for output in outputs)

    def _outputs(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The network's outputs as ``run`` returns them: policy, value [B] (and score [B], ownership [B, N*N])."""
        outputs = self.model(x)
        if self.katago:  # policy, value, score, ownership, wdl, score mean, score stdev, optimistic policy
            return tuple(outputs[i].reshape(len(x), -1) if outputs[i].dim() > 1 else outputs[i]
                         for i in self.katago_outputs)
        policy, value = outputs[:2]
        if not self.aux:
            return policy, value.reshape(-1)
        score, ownership = outputs[2:4]
        return policy, value.reshape(-1), score.reshape(-1), ownership.reshape(len(x), -1)

    def _graph(self, batch: int, size: int) -> tuple:
        key = (batch, size)
        if key not in self._graphs:
            with _CAPTURE_LOCK, torch.cuda.device(self.device), torch.inference_mode():
                self._graphs[key] = self._capture(batch, size)
        return self._graphs[key]

    def _capture(self, batch: int, size: int) -> tuple:
        x = torch.zeros((batch, self.planes, size, size), device=self.device, dtype=self.dtype)
        x = x.contiguous(memory_format=torch.channels_last)
        # a valid empty board (leelaz-18: black to move; katago-v7: every point on the board), so that warm-up and
        # padding rows compute ordinary numbers
        x[:, self.ones_plane] = 1.0
        # Warm-up on a side stream, as torch's CUDA graph notes ask: cuDNN's benchmarking and lazy
        # initialisation must not be captured.
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            for _ in range(3):
                self.model(x)
        torch.cuda.current_stream(self.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        # Each graph keeps its own memory pool (torch's default). Graphs replayed one at a time could share one
        # and save memory, but a few MiB per graph is nothing beside an H100's memory.
        with torch.cuda.graph(graph):
            outputs = self._outputs(x)
        return graph, x, outputs
