"""How the search talks to the network: one batch-first protocol and its implementations.

``value`` always means the expected outcome in [-1, 1] from the side to move's view. ``policy`` is float32
[B, N*N+1], pass last, softmaxed over the legal moves (illegal points are 0) and renormalised.

Layer: above features; numpy and onnxruntime only, so that the GTP engine starts fast. torch is imported (through
``torch_backend``) only where a GPU is present that onnxruntime cannot use, or where it is asked for.
``OnnxEvaluator`` runs a network file; ``NetworkSet`` routes each board size to its network. Network results are
cached in one place, the search's transposition table.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import sys
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import numpy as np

from tabula.engine.config import ON_GPU, NetConfig, ResignThresholds
from tabula.engine.net.encodings import Encoding, encoding_named
from tabula.engine.net.features import (
    INPUT_ENCODING,
    NUM_PLANES,
    NUM_SYMMETRIES,
    inverse_transform_planes,
    transform_planes,
)
from tabula.engine.net.netfile import METADATA_FORMAT_VERSION, NetworkFileError
from tabula.engine.rules.game import GameState
from tabula.engine.rules.interface import batch_legal_masks

SYMMETRY_MODES = ("random", "identity", "average")
AVERAGE = "average"
PROVIDERS = {  # our names -> onnxruntime's, in order of preference for "auto"
    "tensorrt": "TensorrtExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "cpu": "CPUExecutionProvider",
}
TORCH = "torch"  # the torch CUDA backend (engine/net/torch_backend.py), for GPUs that onnxruntime here cannot use
# The names a provider is asked for by, engine.config.BACKENDS, are "auto", the PROVIDERS and TORCH.
DEFAULT_MAX_BATCH = 256
# Outputs beyond score and ownership that some networks give (KataGo's), read into Evaluation's fields of these names
EXTRA_OUTPUTS = ("wdl", "score_mean", "score_stdev")


class UnsupportedBoardSizeError(ValueError):
    """The network was not made for this board size."""


@dataclass
class Evaluation:
    # float32 [B, policy_size] (Go: N*N+1, pass last; gomoku: N*N), 0 on illegal moves, rows sum to 1
    policy: np.ndarray
    value: np.ndarray  # float32 [B], side to move's view, in [-1, 1]
    # From networks with score and ownership heads (None otherwise), side to move's view:
    score: np.ndarray | None = None  # float32 [B], the final margin in points
    ownership: np.ndarray | None = None  # float32 [B, N*N] in [-1, 1], +1: the side to move will own the point
    # From networks that give them (KataGo's; None otherwise), side to move's view:
    wdl: np.ndarray | None = None  # float32 [B, 3]: P(win), P(loss), P(no result)
    score_mean: np.ndarray | None = None  # float32 [B], the expected final score in points (KataGo's scoreMean)
    score_stdev: np.ndarray | None = None  # float32 [B], its standard deviation


class Evaluator(Protocol):
    def evaluate(self, states: Sequence[GameState]) -> Evaluation:
        """Evaluate positions of one game and board size (any ``engine.rules.interface.Game``)."""
        ...


def legal_mask(state: GameState) -> np.ndarray:
    """bool [N*N+1]: the side to move's legal points, and pass (always legal)."""
    return state.legal_mask()


def masked_softmax(logits: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """float32 [B, L]: softmax of ``logits`` over the entries where ``masks`` (bool [B, L]) is true, 0 elsewhere."""
    x = np.where(masks, logits.astype(np.float32, copy=False), np.float32(-np.inf))
    x -= x.max(axis=1, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(axis=1, keepdims=True)
    return x


class UniformEvaluator:
    """A stand-in that needs no network: equal priors over legal moves and a value of 0."""

    def evaluate(self, states: Sequence[GameState]) -> Evaluation:
        masks = batch_legal_masks(states).astype(np.float32)
        return Evaluation(policy=masks / masks.sum(axis=1, keepdims=True),
                          value=np.zeros(len(states), dtype=np.float32))


def _stderr_log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def available_cores(cgroup_cpu_max: str = "/sys/fs/cgroup/cpu.max") -> int:
    """The CPUs this process may use: its affinity (which ``taskset`` narrows), else all of them, and no more than
    a container's CPU quota (cgroup v2 ``cpu.max``: "quota period", or "max" for none)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cores = os.cpu_count() or 1
    try:
        with open(cgroup_cpu_max) as handle:
            quota, period = handle.read().split()[:2]
        if quota != "max":
            cores = min(cores, -(-int(quota) // int(period)))  # a quota of 2.5 CPUs runs 3 threads part-time
    except (OSError, ValueError):  # no cgroup v2 here, or a file we do not understand: the affinity stands
        pass
    return max(1, cores)


def nvidia_gpu_present() -> bool:
    """Whether an NVIDIA GPU is visible here, checked without importing torch or CUDA (it costs microseconds, so a
    CPU machine with torch installed does not pay torch's import on every start)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    return os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidia0")


def default_cache_dir() -> str:
    """Where TensorRT keeps the engines it built, so that the second start skips the build (minutes for 20x256)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tabula", "tensorrt")


def provider_options(provider: str, precision: str, cache_dir: str,
                     profile: tuple[tuple[int, int], tuple[int, int], tuple[int, int]] | None,
                     planes: int = NUM_PLANES) -> dict[str, object]:
    """onnxruntime options for one provider. ``profile``: ((batch, size) at min, opt, max) of the input ``planes``
    (``planes`` of them: 18, or 19 with the komi plane), for TensorRT, which otherwise builds a new engine whenever a
    larger batch arrives."""
    if provider != PROVIDERS["tensorrt"]:
        return {}
    options: dict[str, object] = {
        "trt_fp16_enable": precision in ("auto", "fp16"),
        "trt_engine_cache_enable": True,
        "trt_engine_cache_path": cache_dir,
        "trt_timing_cache_enable": True,
        "trt_timing_cache_path": cache_dir,
    }
    if precision == "bf16":  # an onnxruntime too old for this option fails, and the next provider is tried
        options["trt_bf16_enable"] = True
    if profile is not None:
        for key, (batch, size) in zip(("min", "opt", "max"), profile):
            options[f"trt_profile_{key}_shapes"] = f"planes:{batch}x{planes}x{size}x{size}"
    return options


def choose_providers(provider: str, available: Sequence[str]) -> list[str]:
    """onnxruntime provider names to try, best first, always ending with the CPU."""
    if provider == "auto":
        wanted = [name for name in PROVIDERS.values() if name in available]
    elif provider in PROVIDERS:
        name = PROVIDERS[provider]
        if name not in available:
            raise ValueError(f"onnxruntime provider {provider!r} is not available here (have: {', '.join(available)})")
        wanted = [name]
    else:
        raise ValueError(f"unknown provider {provider!r} (auto, {', '.join(PROVIDERS)})")
    if PROVIDERS["cpu"] not in wanted:
        wanted.append(PROVIDERS["cpu"])
    return wanted


class OnnxEvaluator:
    """Evaluates positions with an ONNX network, through onnxruntime or, on a GPU it cannot use, through torch.

    Args:
        path: an ONNX file with one input ``planes`` float32 [batch, 18, N, N] and outputs ``policy`` (logits,
            [batch, N*N+1]) and ``value`` (tanh, [batch], side to move's view), as ``tabula export`` writes; the
            planes are those its metadata's ``input_encoding`` names (19 for ``leelaz-18+komi``: the position's komi
            as well, from ``GameState.rules``).
        symmetry: ``random`` (each position under one of the 8 symmetries, drawn from ``rng``), ``identity``,
            or ``average`` (the mean of all 8: eight times the work).
        rng: numpy Generator for random symmetries; a fresh one when None.
        threads: onnxruntime intra-op threads (0: onnxruntime decides).
        provider: ``auto`` (TensorRT, then CUDA, then torch on CUDA when a GPU is present, then CPU: the first that
            works), ``cpu``, ``cuda``, ``tensorrt`` or ``torch``.
        log: receives one line naming what runs the network, and why a better backend does not; default stderr.
        precision: of the GPU backends: ``auto`` (fp16), ``fp16``, ``bf16`` or ``fp32``.
        max_batch: the largest batch the GPU backends prepare for (TensorRT's profile, torch's CUDA graphs).
        batch_hint: the batch the search sends most (TensorRT optimises for it; torch captures the CUDA graphs up
            to it before the first move); 0: a GPU search's default batch (``ON_GPU``), as a search configuration's
            batch size 0 becomes where the network runs on a GPU.
        cache_dir: TensorRT's engine cache (default ``default_cache_dir()``).
        check_int8: an int8 file that runs on the CPU is first compared with its fp32 file beside it
            (``fp32_sibling``), and where they disagree (onnxruntime's int8 kernels on a CPU without VNNI) the fp32
            file runs instead (``INT8_AGREEMENT``). False runs the int8 file whatever it computes (benchmarks).

    Raises NetworkFileError for a missing, corrupt or unsuitable file, before any position is evaluated, and
    ValueError for a backend that was asked for by name and cannot run here.
    """

    def __init__(self, path: str | os.PathLike, symmetry: str = "random", rng: np.random.Generator | None = None,
                 threads: int = 0, provider: str = "auto", log: Callable[[str], None] | None = _stderr_log,
                 precision: str = "auto", max_batch: int = DEFAULT_MAX_BATCH, batch_hint: int = 0,
                 cache_dir: str | None = None, check_int8: bool = True):
        import onnxruntime as ort

        if symmetry not in SYMMETRY_MODES:
            raise ValueError(f"unknown symmetry mode {symmetry!r} ({', '.join(SYMMETRY_MODES)})")
        # NetConfig's fields, checked where they are declared (ConfigError, a ValueError)
        NetConfig(threads=threads, provider=provider, precision=precision, max_batch=max_batch)
        self.path = path = os.fspath(path)
        batch_hint = batch_hint or ON_GPU["batch_size"]
        self.symmetry = symmetry
        self._rng = rng if rng is not None else np.random.default_rng()
        self._rng_lock = threading.Lock()  # numpy Generators are not thread-safe; the search may call from threads
        self._runner: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None
        self._executor: ThreadPoolExecutor | None = None  # the network thread of evaluate_async, made on first use
        self._executor_lock = threading.Lock()
        if not os.path.isfile(path):
            raise NetworkFileError(path, "no such file")
        if os.path.getsize(path) == 0:
            raise NetworkFileError(path, "empty file")

        options = ort.SessionOptions()
        options.intra_op_num_threads = max(0, int(threads))
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # onnxruntime's own warnings would clutter stderr
        candidates = choose_providers("cpu" if provider == TORCH else provider, ort.get_available_providers())
        notes: list[str] = []  # why a backend preferred to the one that runs does not run
        profile = None
        self._planes = NUM_PLANES  # the input's planes, as _tensorrt_profile reads them from the file
        cache_dir = cache_dir or default_cache_dir()
        if PROVIDERS["tensorrt"] in candidates:
            profile = self._tensorrt_profile(ort, max_batch, batch_hint)
            try:
                os.makedirs(cache_dir, exist_ok=True)
            except OSError as e:
                notes.append(f"no TensorRT engine cache ({e.strerror}: {cache_dir})")
        if candidates[0] != PROVIDERS["cpu"]:
            # onnxruntime also logs a GPU provider's failure (a library it cannot load) on stderr, at error level:
            # the one line below reports it, so its logger keeps to fatal errors (a process-wide setting)
            ort.set_default_logger_severity(4)
        session = None
        failure = None
        chosen = candidates
        for start in range(len(candidates)):
            chosen = candidates[start:]
            last = start == len(candidates) - 1
            settings = [provider_options(name, precision, cache_dir, profile, self._planes) for name in chosen]
            try:
                # enable_fallback=0: on a provider error onnxruntime would otherwise retry by itself without our
                # options and announce it with print(), and stdout is the GTP channel. Anything it still prints
                # goes to stderr.
                with contextlib.redirect_stdout(sys.stderr):
                    session = ort.InferenceSession(path, sess_options=options, providers=chosen,
                                                   provider_options=settings, enable_fallback=0)
            except Exception as e:  # onnxruntime raises its own exception types for bad files and providers
                # A GPU provider fails in too many ways to recognise (missing libraries, TensorRT builder errors,
                # out of memory): try the next one; only the CPU's failure says that the file itself is bad.
                failure = e
                if last:
                    break
                notes.append(f"{chosen[0]} failed: {first_line(e)}")
                continue
            self._use_session(session)
            sizes = self._check_interface()  # what is wrong here is wrong with the file, whatever runs it
            if last:
                self._trial_runs(sizes)
                break
            try:
                # A GPU provider may start and fail only when it runs (TensorRT builds engines for shapes it meets
                # at run time, cuDNN loads on the first convolution): try the next one, as above.
                self._trial_runs(sizes)
                break
            except NetworkFileError as e:
                notes.append(f"{session.get_providers()[0]} failed: {e.problem}")
                session = None
        if session is None:
            raise NetworkFileError(path, f"onnxruntime cannot load it: {first_line(failure)}")
        self.board_sizes: tuple[int, ...] = sizes
        # the winrate below which resigning loses few games, as measured for this network (None: never measured)
        self.resign_thresholds: ResignThresholds | None = _metadata_thresholds(self.metadata, path)
        self.provider: str = session.get_providers()[0]
        if self.provider != chosen[0]:  # onnxruntime fell back by itself (a GPU build without its libraries)
            notes.append(f"onnxruntime could not start {chosen[0]}")
        if self.provider == PROVIDERS["tensorrt"]:
            self.provider += f" {'fp16' if precision == 'auto' else precision}"
        if provider == TORCH or (provider == "auto" and self.provider == PROVIDERS["cpu"] and nvidia_gpu_present()):
            try:
                # torch warns as it finds a GPU it cannot use (a driver too old, say); the line below says it once
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    self._start_torch(precision, max_batch, batch_hint)
            except Exception as e:  # no torch, no CUDA, a driver problem, outputs that disagree: all fall back
                if provider == TORCH:
                    raise ValueError(f"{path}: the torch backend cannot run it: {first_line(e)}") from None
                notes.append(f"torch on CUDA failed: {first_line(e)}")
        if check_int8 and self._runner is None and self.provider == PROVIDERS["cpu"] \
                and self.metadata.get("precision") == "int8":
            note = self._check_int8(options)
            if note:
                notes.append(note)
        if log is not None:
            count = ""  # onnxruntime's CPU threads: they matter to nothing else
            if self.provider == PROVIDERS["cpu"]:
                count = f", {threads} thread{'s' if threads != 1 else ''} per network call" if threads else \
                    ", default threads"
            log(f"tabula: network {os.path.basename(path)} ({self.describe()}) on {self.provider}{count}"
                + "".join(f"; {note}" for note in notes))

    def _tensorrt_profile(self, ort, max_batch: int, batch_hint: int):
        """TensorRT's (batch, size) at min, opt and max, from the file's input shape and metadata (read through a
        CPU session: only machines that have TensorRT pay for it). None when the file cannot tell."""
        try:
            probe = ort.InferenceSession(self.path, providers=[PROVIDERS["cpu"]])
            meta = probe.get_modelmeta().custom_metadata_map
            static = probe.get_inputs()[0].shape[2]
            if isinstance(probe.get_inputs()[0].shape[1], int):
                self._planes = probe.get_inputs()[0].shape[1]
            sizes = ([int(s) for s in meta["board_sizes"].split(",")] if "board_sizes" in meta
                     else [static] if isinstance(static, int) else [])
        except Exception:
            return None  # the real session reports what is wrong with the file
        if not sizes:
            return None
        hint = min(max(1, batch_hint), max_batch)
        return (1, min(sizes)), (hint, max(sizes)), (max_batch, max(sizes))

    def _start_torch(self, precision: str, max_batch: int, batch_hint: int) -> None:
        """Run the network with torch on CUDA from now on, once its outputs agree with onnxruntime's. The CUDA graphs
        of the batches the search sends (up to ``batch_hint``) are captured here, before the first move.

        An int8 file (the shipped default) cannot be rebuilt as a torch network; its fp32 file beside it
        (``fp32_sibling``) is, and then runs on the GPU in its place, checked against that file on the CPU."""
        from tabula.engine.net import (
            torch_backend,  # imports torch: only here, only when a GPU is present or torch was asked for
        )

        source = self.path
        reference: Callable[[np.ndarray], tuple[np.ndarray, ...]] = self._run_session
        if self.metadata.get("precision", "fp32") != "fp32":
            source = fp32_sibling(self.path, self.metadata)[0]
            reference = OnnxEvaluator(source, symmetry="identity", provider="cpu", log=None)._run_session
        runner = torch_backend.TorchRunner(source, device="cuda",
                                           precision="fp16" if precision == "auto" else precision,
                                           max_batch=max_batch)
        prepared = [size for size in self.board_sizes if size in PREPARED_SIZES] or list(self.board_sizes[:1])
        for size in self.board_sizes:
            # through the CUDA graphs where they are captured now anyway; eagerly elsewhere, where a graph captured
            # for the check would cost the start what PREPARED_SIZES saves
            run = runner.run if size in prepared else functools.partial(runner.run, graphs=False)
            difference = outputs_difference(reference, run, size, self.encoding)
            if difference > GPU_TOLERANCE:
                raise RuntimeError(f"its outputs differ from onnxruntime's by {difference:.3g} on {size}x{size}")
        # The graphs of the common sizes are captured now; another size's on its first batches (a fraction of a
        # second each): capturing every bucket of all 24 sizes of a pooled network would hold up the engine's start
        # by most of a minute.
        runner.prepare(prepared, batch_hint)
        self._runner = runner.run
        self.has_score_and_ownership = self.has_score_and_ownership and runner.aux
        self._session = None  # the CPU copy of the weights is no longer needed
        self.provider = runner.describe()
        if source != self.path:
            self.provider += f" (the fp32 weights of {os.path.basename(source)})"

    def _check_int8(self, options) -> str | None:
        """Compare this int8 file with its fp32 file on the CPU, and run the fp32 file where they disagree; returns
        the log's note of the switch (None: the int8 file stays, or has no fp32 file to be checked against).

        Why: onnxruntime's int8 convolutions on a CPU without VNNI (AVX2, or AVX-512 without VNNI) multiply u8 by s8
        with a saturating instruction, and the shipped network's outputs come out wrong there (docs/BENCHMARKS.md,
        "int8 on a CPU without VNNI"). A wrong network plays on without a sign, so it is measured here, once, at the
        start."""
        key = (_file_key(self.path), _file_key(_fp32_name(self.path)))
        if key in _INT8_AGREED:
            return None  # checked in this process already, the same two files on disk
        try:
            sibling, reference = fp32_sibling(self.path, self.metadata, options)  # the session that may take over
        except FileNotFoundError:
            return None
        size = 19 if 19 in self.board_sizes else max(self.board_sizes)
        planes = comparison_planes(size, count=INT8_AGREEMENT["positions"], encoding=self.encoding)
        int8_logits, int8_value = self._run_session(planes)[:2]
        logits, value = reference.run(["policy", "value"], {self._input_name: planes})
        top1 = float(np.mean(int8_logits.argmax(axis=1) == logits.argmax(axis=1)))
        value_diff = float(np.abs(int8_value - value.reshape(-1)).mean())
        if top1 >= INT8_AGREEMENT["top1"] and value_diff <= INT8_AGREEMENT["value"]:
            _INT8_AGREED.add(key)
            return None
        metadata = self.metadata
        self._use_session(reference)
        self.metadata = {**metadata, "precision": "fp32"}  # what runs; the int8 file's thresholds still rule
        return (f"this CPU has no VNNI, so the network runs from its fp32 file {os.path.basename(sibling)}: the "
                f"same network at full precision (int8 here would pick the same move in {top1:.0%} of positions)")

    @property
    def on_gpu(self) -> bool:
        """Whether the network runs on a GPU (onnxruntime's CUDA or TensorRT provider, or torch on CUDA)."""
        return self._runner is not None or not self.provider.startswith(PROVIDERS["cpu"])

    def describe(self) -> str:
        """One line: blocks x filters, head, board sizes, precision — from the metadata."""
        try:
            arch = json.loads(self.metadata["architecture"])
            shape = f"{arch['blocks']}x{arch['filters']} {arch['head']}"
        except (KeyError, TypeError, ValueError):
            shape = "unknown architecture"
        sizes = self.board_sizes
        contiguous = len(sizes) > 3 and list(sizes) == list(range(sizes[0], sizes[-1] + 1))
        sizes = f"{sizes[0]}-{sizes[-1]}" if contiguous else "/".join(str(s) for s in sizes)
        return f"{shape}, {sizes}, {self.metadata.get('precision', 'fp32')}"

    # -- checks --------------------------------------------------------------------------------------------------

    def _fail(self, problem: str) -> NetworkFileError:
        return NetworkFileError(self.path, problem)

    def _use_session(self, session) -> None:
        """Run the network with this onnxruntime session from now on, and read what its file says of itself."""
        self._session = session
        self._input_name = session.get_inputs()[0].name
        self.metadata: dict[str, str] = dict(session.get_modelmeta().custom_metadata_map)
        outputs = {o.name for o in session.get_outputs()}
        # Score and ownership heads (tabula train --aux): scoreLead and territory for GUIs, dead stones
        self.has_score_and_ownership: bool = {"score", "ownership"} <= outputs
        # KataGo's further outputs (win/loss/no result, score mean and stdev), read where the file has them all
        self.extra_outputs: tuple[str, ...] = EXTRA_OUTPUTS if self.has_score_and_ownership \
            and set(EXTRA_OUTPUTS) <= outputs else ()

    def _check_interface(self) -> tuple[int, ...]:
        """Check inputs, outputs and metadata against each other; returns board sizes."""
        session, meta = self._session, self.metadata
        inputs = session.get_inputs()
        if len(inputs) != 1:
            raise self._fail(f"{len(inputs)} inputs, expected one (planes)")
        shape, kind = inputs[0].shape, inputs[0].type
        if kind != "tensor(float)":
            raise self._fail(f"input is {kind}, expected tensor(float)")
        try:
            # the game's input planes and policy layout (Go: leelaz-18; gomoku: gomoku-4)
            self.encoding = encoding_named(meta.get("input_encoding", INPUT_ENCODING))
        except ValueError as e:
            raise self._fail(str(e)) from None
        if len(shape) != 4 or shape[1] != self.encoding.planes:
            raise self._fail(f"input shape {shape}, expected [batch, {self.encoding.planes}, N, N]")
        outputs = {o.name for o in session.get_outputs()}
        if not {"policy", "value"} <= outputs:
            raise self._fail(f"outputs {sorted(outputs)}, expected policy and value")
        if meta.get("tabula_format", METADATA_FORMAT_VERSION) != METADATA_FORMAT_VERSION:
            raise self._fail(f"metadata format {meta['tabula_format']!r}, expected {METADATA_FORMAT_VERSION}")
        static = [d for d in shape[2:] if isinstance(d, int)]
        if len(static) == 1 or (len(static) == 2 and static[0] != static[1]):
            raise self._fail(f"input shape {shape} is not square")
        if "board_sizes" in meta:
            try:
                sizes = tuple(int(s) for s in meta["board_sizes"].split(","))
            except ValueError:
                raise self._fail(f"unreadable board_sizes metadata {meta['board_sizes']!r}") from None
            if static and any(s != static[0] for s in sizes):
                raise self._fail(f"metadata says board sizes {sizes} but the input is {static[0]}x{static[0]}")
        elif static:
            sizes = (static[0],)
        else:
            raise self._fail("the input size is dynamic and the metadata names no board_sizes")
        if not sizes or any(not 2 <= s <= 25 for s in sizes):
            raise self._fail(f"unsupported board sizes {sizes}")
        return sizes

    def _trial_runs(self, sizes: tuple[int, ...]) -> None:
        """One empty board of every size through the network: outputs of the right shapes, finite."""
        for size in sizes:
            planes = self.encoding.trial_planes(size)
            try:
                policy, value = self._run(planes)[:2]
            except Exception as e:
                raise self._fail(f"a trial evaluation on {size}x{size} failed: {str(e).splitlines()[0][:300]}") \
                    from None
            points = self.encoding.policy_size(size)
            if policy.shape != (1, points) or value.shape != (1,):
                raise self._fail(f"on {size}x{size} the outputs have shapes {policy.shape} and {value.shape}, "
                                 f"expected (1, {points}) and (1,)")
            if not (np.all(np.isfinite(policy)) and np.all(np.isfinite(value))):
                raise self._fail("the network outputs NaN or infinity")

    # -- evaluation ----------------------------------------------------------------------------------------------

    def _run(self, planes: np.ndarray) -> tuple[np.ndarray, ...]:
        """Raw network: planes float32 [B, P, N, N] -> (policy logits float32 [B, N*N+1], value float32 [B]), then
        score [B] and ownership [B, N*N] where the network has those heads."""
        if self._runner is not None:
            return self._runner(planes)
        return self._run_session(planes)

    def _run_session(self, planes: np.ndarray) -> tuple[np.ndarray, ...]:
        """``_run`` through the onnxruntime session."""
        planes = np.ascontiguousarray(planes, dtype=np.float32)
        if self.has_score_and_ownership:
            policy, value, score, ownership, *extra = self._session.run(
                ["policy", "value", "score", "ownership", *self.extra_outputs], {self._input_name: planes})
            return (policy, value.reshape(-1), score.reshape(-1), ownership.reshape(len(planes), -1),
                    *(a.reshape(len(planes), -1) if a.ndim > 1 and a.shape[-1] > 1 else a.reshape(-1) for a in extra))
        policy, value = self._session.run(["policy", "value"], {self._input_name: planes})
        return policy, value.reshape(-1)

    def run(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The raw network on encoded planes, no symmetry and no masking (benchmarks and tests)."""
        return self._run(np.ascontiguousarray(planes, dtype=np.float32))[:2]

    def evaluate(self, states: Sequence[GameState]) -> Evaluation:
        """Evaluate positions of one board size: policy masked to legal moves and pass, value side to move's view."""
        if not states:
            return _empty_evaluation()
        prepared = self._prepare(states)
        return self._finish(prepared, *self._run(prepared.planes))

    def evaluate_averaged(self, states: Sequence[GameState]) -> Evaluation:
        """``evaluate`` with the mean over the 8 symmetries, whatever this evaluator's symmetry mode (the search's
        root: eight times the work for one position)."""
        if not states:
            return _empty_evaluation()
        prepared = self._prepare(states, AVERAGE)
        return self._finish(prepared, *self._run(prepared.planes))

    def evaluate_symmetry(self, states: Sequence[GameState], symmetry: int) -> Evaluation:
        """``evaluate`` with every position seen under one symmetry (``engine.net.features``' numbering), whatever
        this evaluator's symmetry mode: ``kata-raw-nn``."""
        if not states:
            return _empty_evaluation()
        prepared = self._prepare(states, symmetry=symmetry)
        return self._finish(prepared, *self._run(prepared.planes))

    def evaluate_async(self, states: Sequence[GameState]) -> "PendingEvaluation":
        """``evaluate`` in two halves: features and masks now, in the caller's thread; the network on this
        evaluator's network thread; softmax and symmetry undone when ``result()`` is asked for.

        The network call is the only part that runs without the GIL (onnxruntime and torch release it), so a
        search that keeps its Python work on one thread and the network on another overlaps the two, where search
        threads that each run the whole of ``evaluate`` mostly queue for the GIL."""
        if not states:
            return PendingEvaluation(_empty_evaluation)
        prepared = self._prepare(states)
        future = self._network_thread().submit(self._run, prepared.planes)
        return PendingEvaluation(lambda: self._finish(prepared, *future.result()))

    def _network_thread(self) -> ThreadPoolExecutor:
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="network")
            return self._executor

    def _prepare(self, states: Sequence[GameState], mode: str | None = None,
                 symmetry: int | None = None) -> "_Prepared":
        """Planes and masks of ``states`` under ``mode`` (default: this evaluator's), or under ``symmetry`` for every
        position (then as ``random`` mode, with that symmetry drawn for each)."""
        mode = mode or self.symmetry
        if symmetry is not None:
            if not 0 <= symmetry < NUM_SYMMETRIES:
                raise ValueError(f"symmetry {symmetry} is not one of 0..{NUM_SYMMETRIES - 1}")
            mode = "random"
        count = len(states)
        size = states[0].size
        if size not in self.board_sizes:
            raise UnsupportedBoardSizeError(
                f"{os.path.basename(self.path)} plays {', '.join(f'{s}x{s}' for s in self.board_sizes)}, "
                f"not {size}x{size}")
        encoding = self.encoding
        if not encoding.accepts(states[0]):
            raise ValueError(f"{os.path.basename(self.path)} reads {encoding.name} input planes, and these positions "
                             f"are encoded as {type(states[0]).INPUT_ENCODING}: a network of another game")
        encode_batch = encoding.encode_batch
        masks = batch_legal_masks(states)
        symmetries = None
        if mode == "identity":
            planes = encode_batch(states, None)
        elif mode == "random":
            if symmetry is not None:
                symmetries = np.full(count, symmetry, dtype=np.int64)
            else:
                with self._rng_lock:
                    symmetries = self._rng.integers(0, NUM_SYMMETRIES, count)
            planes = encode_batch(states, symmetries)
        else:
            planes = encode_batch(states, None)
            planes = np.concatenate([transform_planes(planes, s) for s in range(NUM_SYMMETRIES)])
        return _Prepared(planes, masks, symmetries, count, mode)

    def _finish(self, prepared: "_Prepared", logits: np.ndarray, value: np.ndarray,
                score: np.ndarray | None = None, ownership: np.ndarray | None = None,
                *extra: np.ndarray) -> Evaluation:
        masks, count = prepared.masks, prepared.count
        inverse_transform_policy = self.encoding.inverse_transform_policy
        if prepared.mode == "identity":
            policy = masked_softmax(logits, masks)
        elif prepared.mode == "random":
            policy = masked_softmax(inverse_transform_policy(logits, prepared.symmetries), masks)
            if ownership is not None:
                ownership = _unturned_points(ownership, prepared.symmetries)
        else:
            policy = np.zeros(masks.shape, dtype=np.float32)
            for s in range(NUM_SYMMETRIES):
                policy += masked_softmax(inverse_transform_policy(logits[s * count: (s + 1) * count], s), masks)
            policy /= NUM_SYMMETRIES
            value = value.reshape(NUM_SYMMETRIES, count).mean(axis=0)
            if score is not None:
                score = score.reshape(NUM_SYMMETRIES, count).mean(axis=0)
                ownership = np.mean([_unturned_points(ownership[s * count: (s + 1) * count], s)
                                     for s in range(NUM_SYMMETRIES)], axis=0)
            # per-position outputs (wdl [8B, 3], score mean and stdev [8B]): the mean over the symmetries
            extra = tuple(a.reshape(NUM_SYMMETRIES, count, *a.shape[1:]).mean(axis=0) for a in extra)
        evaluation = Evaluation(policy=policy.astype(np.float32, copy=False),
                                value=np.clip(value, -1.0, 1.0).astype(np.float32, copy=False))
        if score is not None:
            evaluation.score = score.astype(np.float32, copy=False)
            evaluation.ownership = np.clip(ownership, -1.0, 1.0).astype(np.float32, copy=False)
        if extra:
            evaluation.wdl, evaluation.score_mean, evaluation.score_stdev = \
                (a.astype(np.float32, copy=False) for a in extra)
        return evaluation


def _fp32_name(path: str) -> str | None:
    """``NAME.onnx`` for ``NAME-int8.onnx`` (None for any other name)."""
    folder, name = os.path.split(path)
    stem, extension = os.path.splitext(name)
    return os.path.join(folder, stem[: -len("-int8")] + extension) if stem.endswith("-int8") else None


def _file_key(path: str | None) -> tuple | None:
    """A file as it is on disk (its real path, size and modification time); None where there is none."""
    try:
        info = os.stat(path)
    except (OSError, TypeError):
        return None
    return os.path.realpath(path), info.st_size, info.st_mtime_ns


# The int8 files whose check agreed in this process (keys of _file_key pairs): a second engine or evaluator of the
# same file (tests, tools that load a network again) does not pay the check's half second again.
_INT8_AGREED: set[tuple] = set()


def fp32_sibling(path: str, metadata: dict[str, str], options=None) -> tuple[str, object]:
    """The fp32 file of an int8 network: ``NAME.onnx`` beside ``NAME-int8.onnx`` (as ``tabula export --quantize``
    names them, and as the shipped networks come), holding the same architecture, and the onnxruntime CPU session
    (with ``options``) that read it. The torch backend runs it where the int8 file cannot go, and the CPU where its
    int8 kernels get the int8 file wrong. Raises FileNotFoundError (its message says what was looked for) when
    there is none."""
    candidate = _fp32_name(path)
    if candidate is None or not os.path.isfile(candidate):
        raise FileNotFoundError(f"weights are {metadata.get('precision')}, only fp32 files convert back, and there "
                                f"is no {os.path.basename(candidate) if candidate else 'fp32 file'} beside it")
    import onnxruntime as ort  # not onnx: the playing path installs onnxruntime alone

    try:
        session = ort.InferenceSession(candidate, sess_options=options, providers=[PROVIDERS["cpu"]])
    except Exception as e:  # onnxruntime's own exception types: a file it cannot load is no fp32 file of this one
        raise FileNotFoundError(f"{os.path.basename(candidate)} beside it cannot be loaded ({first_line(e)})") \
            from None
    fp32 = session.get_modelmeta().custom_metadata_map
    if fp32.get("precision", "fp32") != "fp32" or fp32.get("architecture") != metadata.get("architecture"):
        raise FileNotFoundError(f"{os.path.basename(candidate)} beside it is not its fp32 file (another "
                                f"architecture or precision)")
    return candidate, session


def _metadata_thresholds(metadata: dict[str, str], path: object) -> ResignThresholds | None:
    """The network's calibrated resignation thresholds (metadata ``resign_winrate``), None where it has none; one it
    cannot read is none, with a warning: a file is never refused for what only decides when to give up."""
    text = metadata.get("resign_winrate")
    if text is None:
        return None
    try:
        return ResignThresholds.parse(text)
    except ValueError as error:
        print(f"tabula: {path}: its resignation thresholds are ignored: {error}", file=sys.stderr)
        return None


def _unturned_points(values: np.ndarray, symmetry: int | np.ndarray) -> np.ndarray:
    """Per-point outputs [B, N*N] of planes seen under ``symmetry`` (one, or one per row), in the board's frame."""
    size = int(round(values.shape[-1] ** 0.5))
    planes = values.reshape(len(values), 1, size, size)
    return inverse_transform_planes(planes, symmetry).reshape(len(values), -1)


@dataclass
class _Prepared:
    """What ``OnnxEvaluator`` computed for a batch before the network runs."""

    planes: np.ndarray  # float32 [B (x8 for "average"), 18, N, N]
    masks: np.ndarray  # bool [B, N*N+1]
    symmetries: np.ndarray | None  # int [B] for "random"
    count: int
    mode: str  # identity | random | average


def _empty_evaluation() -> Evaluation:
    return Evaluation(np.zeros((0, 0), dtype=np.float32), np.zeros(0, dtype=np.float32))


class PendingEvaluation:
    """A batch on its way through the network; ``result()`` waits for it and raises what the evaluation raised."""

    def __init__(self, finish: Callable[[], Evaluation]):
        self._finish = finish

    def result(self) -> Evaluation:
        return self._finish()


def evaluate_all_symmetries(evaluator: Evaluator, states: Sequence[GameState]) -> Evaluation:
    """``evaluator.evaluate_averaged`` (the mean over the 8 symmetries) where the evaluator has one; otherwise its
    ``evaluate`` (stand-ins in tests, which have no symmetries to average)."""
    averaged = getattr(evaluator, "evaluate_averaged", None)
    return averaged(states) if averaged is not None else evaluator.evaluate(states)


def evaluate_async(evaluator: Evaluator, states: Sequence[GameState]) -> PendingEvaluation:
    """``evaluator.evaluate_async`` where the evaluator has one; otherwise ``evaluate`` now, handed back as done."""
    start = getattr(evaluator, "evaluate_async", None)
    if start is not None:
        return start(states)
    evaluation = evaluator.evaluate(states)
    return PendingEvaluation(lambda: evaluation)


class NetworkSet:
    """Several networks behind one evaluator, each board size routed to the first network that plays it.

    A shipped engine plays 19x19 with one network and 9x9 with another; the search sees one evaluator whose
    ``board_sizes`` are the union. A batch is always of one size (``Evaluator.evaluate``), so it goes whole to one
    network.
    """

    def __init__(self, networks: Sequence):
        if not networks:
            raise ValueError("a network set needs at least one network")
        self.networks = list(networks)
        self._by_size: dict[int, object] = {}
        for network in self.networks:
            for size in network.board_sizes:
                self._by_size.setdefault(size, network)
        self.board_sizes: tuple[int, ...] = tuple(sorted(self._by_size))

    @property
    def on_gpu(self) -> bool:
        """Whether any of the networks runs on a GPU."""
        return any(getattr(network, "on_gpu", False) for network in self.networks)

    def network_for(self, size: int):
        network = self._by_size.get(size)
        if network is None:
            raise UnsupportedBoardSizeError(
                f"no network for {size}x{size}; the networks play {', '.join(f'{s}x{s}' for s in self.board_sizes)}")
        return network

    def evaluate(self, states: Sequence[GameState]) -> Evaluation:
        if not states:
            return _empty_evaluation()
        return self.network_for(states[0].size).evaluate(states)

    def evaluate_async(self, states: Sequence[GameState]) -> PendingEvaluation:
        if not states:
            return PendingEvaluation(_empty_evaluation)
        return evaluate_async(self.network_for(states[0].size), states)

    def evaluate_averaged(self, states: Sequence[GameState]) -> Evaluation:
        if not states:
            return _empty_evaluation()
        return evaluate_all_symmetries(self.network_for(states[0].size), states)

    def evaluate_symmetry(self, states: Sequence[GameState], symmetry: int) -> Evaluation:
        if not states:
            return _empty_evaluation()
        return self.network_for(states[0].size).evaluate_symmetry(states, symmetry)


def load_networks(paths: Sequence, seed: np.random.SeedSequence, **options) -> tuple[object, list[OnnxEvaluator]]:
    """(the evaluator the search sees, the networks): one ``OnnxEvaluator`` a path (a KataGo model file through its
    cached ONNX conversion, ``katago_onnx``), each with its own random stream spawned from ``seed`` and the given
    options, behind a ``NetworkSet`` where there are several (each board size to the first that plays it)."""
    rngs = [np.random.default_rng(s) for s in seed.spawn(len(paths))]
    paths = [katago_onnx(path, options.get("log", _stderr_log)) for path in paths]
    networks = [OnnxEvaluator(path, rng=rng, **options) for path, rng in zip(paths, rngs)]
    return (networks[0] if len(networks) == 1 else NetworkSet(networks)), networks


def katago_onnx(path, log: Callable[[str], None] | None = _stderr_log):
    """``path`` itself, or for a KataGo model file (``.bin.gz`` and the like) its ONNX conversion, made on first use
    and kept in a cache (``katago_model.converted_onnx``: NetworkFileError where it cannot be made)."""
    from tabula.engine.net import katago_model

    if not os.path.isfile(path) or not katago_model.looks_like_katago(path):
        return path
    return katago_model.converted_onnx(path, log)


# An int8 file on the CPU runs only where it agrees with its fp32 file this well on random positions (OnnxEvaluator.
# _check_int8): well below what a faithful int8 file reaches and well above what saturating int8 kernels give
# (docs/BENCHMARKS.md, "int8 on a CPU without VNNI").
INT8_AGREEMENT = {"positions": 64, "top1": 0.6, "value": 0.1}
# The board sizes whose CUDA graphs the torch backend captures before the first move
PREPARED_SIZES = (9, 13, 19)
GPU_TOLERANCE = 0.05  # largest difference of a probability or a value between a GPU backend and the CPU
# ... and of a score lead, in points: bf16 moves the default network's score by up to a point (its 8-bit mantissa)
SCORE_TOLERANCE_POINTS = 2.0


def comparison_planes(size: int, count: int = 16, seed: int = 0, encoding: Encoding | None = None) -> np.ndarray:
    """float32 [count, 18, size, size]: random stones and histories, either side to move; for comparing backends.
    With an ``encoding`` that has a komi plane, the komi of each drawn around 7 points (``encoding.planes`` planes)."""
    rng = np.random.default_rng(seed + size)
    if encoding is not None and encoding.planes != NUM_PLANES and encoding.komi_plane is None \
            and encoding.state_encoding == INPUT_ENCODING:
        return _played_planes(size, count, rng, encoding)  # KataGo's inputs: not random planes, real positions
    planes = (rng.random((count, NUM_PLANES, size, size)) < 0.25).astype(np.float32)
    planes[:, 16:18] = 0.0
    planes[np.arange(count), 16 + rng.integers(0, 2, count)] = 1.0
    if encoding is not None and encoding.komi_plane is not None:
        from tabula.engine.net.features import with_komi_plane

        komi = np.round(rng.normal(7.0, 3.0, count) * 2.0) / 2.0 * np.where(planes[:, 16, 0, 0] > 0, -1.0, 1.0)
        planes = with_komi_plane(planes, komi)
    return planes


def _played_planes(size: int, count: int, rng: np.random.Generator, encoding: Encoding) -> np.ndarray:
    """The planes of ``count`` Go positions of random legal moves (up to a third of the board), the komi and the
    side to move varied: for encodings whose planes are not independent bits (KataGo's)."""
    from tabula.engine.rules.coords import PASS

    states = []
    for index in range(count):
        state = encoding.new_state(size)
        state.rules = dataclasses.replace(state.rules, komi=float(np.round(rng.normal(7.0, 3.0) * 2.0) / 2.0))
        for _ in range(int(rng.integers(0, size * size // 3 + 1))):
            moves = [m for m in state.legal_moves() if m != PASS]
            if not moves:
                break
            state.play(moves[int(rng.integers(len(moves)))])
        states.append(state)
    return encoding.encode_batch(states, None)


def outputs_difference(reference: Callable[[np.ndarray], tuple[np.ndarray, ...]],
                       other: Callable[[np.ndarray], tuple[np.ndarray, ...]], size: int,
                       encoding: Encoding | None = None) -> float:
    """Largest difference between two raw runners' move probabilities (softmax over all points) and values, and,
    where both give them, score leads (in units of SCORE_TOLERANCE_POINTS / GPU_TOLERANCE points, so that a score
    off by that many points counts as a probability off by GPU_TOLERANCE) and ownerships."""
    planes = comparison_planes(size, encoding=encoding)
    expected, actual = reference(planes), other(planes)
    (ref_logits, ref_value), (logits, value) = expected[:2], actual[:2]
    everything = np.ones(ref_logits.shape, dtype=bool)
    probabilities = np.abs(masked_softmax(ref_logits, everything) - masked_softmax(logits, everything)).max()
    differences = [probabilities, np.abs(ref_value.reshape(-1) - value.reshape(-1)).max()]
    if len(expected) >= 4 and len(actual) >= 4:
        differences.append(np.abs(expected[2].reshape(-1) - actual[2].reshape(-1)).max()
                           * GPU_TOLERANCE / SCORE_TOLERANCE_POINTS)
        differences.append(np.abs(expected[3].reshape(len(planes), -1) - actual[3].reshape(len(planes), -1)).max())
    return float(max(differences))


def first_line(error: BaseException | None) -> str:
    """An error's message as one log line can hold it (its type where it has none)."""
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else type(error).__name__


