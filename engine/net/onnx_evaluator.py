"""``OnnxEvaluator``: a network file evaluated through onnxruntime (TensorRT, CUDA or the CPU) or, on a GPU that
onnxruntime here cannot use, through torch; its checks of the file, its symmetries, and its batches on a thread of
their own (``evaluate_async``).

Layer: net; numpy and onnxruntime only, so that the GTP engine starts fast. torch is imported (through
``torch_backend``) only where a GPU is present that onnxruntime cannot use, or where it is asked for.
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from tabula.engine.config import ON_GPU, NetConfig, ResignThresholds, parse_share
from tabula.engine.net.comparison import GPU_TOLERANCE, outputs_difference
from tabula.engine.net.encodings import encoding_named
from tabula.engine.net.evaluation import (
    Evaluation,
    PendingEvaluation,
    UnsupportedBoardSizeError,
    empty_evaluation,
    masked_softmax,
)
from tabula.engine.net.features import (
    INPUT_ENCODING,
    NUM_PLANES,
    NUM_SYMMETRIES,
    inverse_transform_planes,
    transform_planes,
)
from tabula.engine.net.int8_check import fallback_note, fp32_sibling, int8_disagreement
from tabula.engine.net.netfile import METADATA_FORMAT_VERSION, NetworkFileError, is_katago_network
from tabula.engine.net.providers import (
    PROVIDERS,
    TORCH,
    choose_providers,
    default_cache_dir,
    first_line,
    nvidia_gpu_present,
    provider_options,
    stderr_log,
)
from tabula.engine.rules.game import GameState
from tabula.engine.rules.interface import batch_legal_masks

SYMMETRY_MODES = ("random", "identity", "average")
AVERAGE = "average"
# The names a provider is asked for by, engine.config.BACKENDS, are "auto", the PROVIDERS and TORCH.
DEFAULT_MAX_BATCH = 256
# Outputs beyond score and ownership that some networks give (KataGo's), read into Evaluation's fields of these names
EXTRA_OUTPUTS = ("wdl", "score_mean", "score_stdev")
# A policy beside the main one (KataGo's optimistic policy; files converted before it was an output lack it)
OPTIMISTIC_POLICY = "policy_optimistic"
# The board sizes whose CUDA graphs the torch backend captures before the first move
PREPARED_SIZES = (9, 13, 19)


def session_options(threads: int = 0):
    """onnxruntime's session options for every session Tabula runs on the CPU: ``threads`` intra-op threads (0:
    onnxruntime's choice), its own warnings off, and denormal floats read and written as zero in its threads.

    Without the last, a transformer's matrix products (KataGo's newer networks) run many times slower on CPUs that
    handle denormals in microcode, as Intel's do; elsewhere, and for residual networks, it changes nothing. Values
    that small (below 1e-38) move no output Tabula reads (docs/BENCHMARKS.md, "Denormals")."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = max(0, int(threads))
    options.log_severity_level = 3  # onnxruntime's own warnings would clutter stderr
    options.add_session_config_entry("session.set_denormal_as_zero", "1")
    return options


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
                 threads: int = 0, provider: str = "auto", log: Callable[[str], None] | None = stderr_log,
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

        options = session_options(threads)
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
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
        # the share of the dead-stone judgement its ownership head earned, as measured (None: never measured)
        self.ownership_share: float | None = _metadata_ownership_share(self.metadata, path)
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
        """Compare this int8 file with its fp32 file on the CPU (``int8_check``), and run the fp32 file where they
        disagree; returns the log's note of the switch (None: the int8 file stays, or has no fp32 file to be
        checked against)."""
        found = int8_disagreement(self.path, self.metadata, self.board_sizes, self.encoding, self._run_session,
                                  self._input_name, options)
        if found is None:
            return None
        sibling, reference, top1 = found
        metadata = self.metadata
        self._use_session(reference)
        self.metadata = {**metadata, "precision": "fp32"}  # what runs; the int8 file's thresholds still rule
        return fallback_note(metadata, sibling, top1)

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
        # A KataGo network converted to ONNX (its rows from the top, KataGo's symmetry numbering), told apart from a
        # Tabula network by its structure in the metadata, not by its input encoding, which a Tabula network may share
        self.katago_network: bool = is_katago_network(self.metadata)
        outputs = {o.name for o in session.get_outputs()}
        # Score and ownership heads (tabula train --aux): scoreLead and territory for GUIs, dead stones
        self.has_score_and_ownership: bool = {"score", "ownership"} <= outputs
        # KataGo's further outputs (win/loss/no result, score mean and stdev), read where the file has them all
        self.extra_outputs: tuple[str, ...] = EXTRA_OUTPUTS if self.has_score_and_ownership \
            and set(EXTRA_OUTPUTS) <= outputs else ()
        if self.extra_outputs and OPTIMISTIC_POLICY in outputs:
            self.extra_outputs += (OPTIMISTIC_POLICY,)

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
        declared = meta.get("input_planes")
        if declared is not None and self.encoding.plane_names and declared != ",".join(self.encoding.plane_names):
            raise self._fail(f"it reads {self.encoding.name} planes {declared}, and this version of Tabula computes "
                             f"{','.join(self.encoding.plane_names)}: a network of another version of the encoding")
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
            return empty_evaluation()
        prepared = self._prepare(states)
        return self._finish(prepared, *self._run(prepared.planes))

    def evaluate_encoded(self, states: Sequence[GameState], planes: np.ndarray) -> Evaluation:
        """``evaluate`` as the identity symmetry gives it, of positions whose planes the caller has encoded already
        (``self.encoding.encode_batch(states, None)``): a labeller that stores the same planes encodes them once."""
        if not states:
            return empty_evaluation()
        if planes.shape[:2] != (len(states), self.encoding.planes) or planes.shape[-1] != states[0].size:
            raise ValueError(f"planes of shape {planes.shape} for {len(states)} positions of {self.encoding.name}")
        if states[0].size not in self.board_sizes:
            raise UnsupportedBoardSizeError(f"{os.path.basename(self.path)} does not play {states[0].size}x"
                                            f"{states[0].size}")
        prepared = _Prepared(np.ascontiguousarray(planes, dtype=np.float32), batch_legal_masks(states), None,
                             len(states), "identity")
        return self._finish(prepared, *self._run(prepared.planes))

    def evaluate_averaged(self, states: Sequence[GameState]) -> Evaluation:
        """``evaluate`` with the mean over the 8 symmetries, whatever this evaluator's symmetry mode (the search's
        root: eight times the work for one position)."""
        if not states:
            return empty_evaluation()
        prepared = self._prepare(states, AVERAGE)
        return self._finish(prepared, *self._run(prepared.planes))

    def evaluate_symmetry(self, states: Sequence[GameState], symmetry: int) -> Evaluation:
        """``evaluate`` with every position seen under one symmetry (``engine.net.features``' numbering), whatever
        this evaluator's symmetry mode: ``kata-raw-nn``."""
        if not states:
            return empty_evaluation()
        prepared = self._prepare(states, symmetry=symmetry)
        return self._finish(prepared, *self._run(prepared.planes))

    def evaluate_async(self, states: Sequence[GameState]) -> "PendingEvaluation":
        """``evaluate`` in two halves: features and masks now, in the caller's thread; the network on this
        evaluator's network thread; softmax and symmetry undone when ``result()`` is asked for.

        The network call is the only part that runs without the GIL (onnxruntime and torch release it), so a
        search that keeps its Python work on one thread and the network on another overlaps the two, where search
        threads that each run the whole of ``evaluate`` mostly queue for the GIL."""
        if not states:
            return PendingEvaluation(empty_evaluation)
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

    def _policy(self, prepared: "_Prepared", logits: np.ndarray) -> np.ndarray:
        """Move probabilities float32 [B, N*N+1] of a batch's policy logits: in the board's frame, masked to the
        legal moves, the mean over the symmetries where the batch was evaluated under all 8."""
        masks, count = prepared.masks, prepared.count
        inverse_transform_policy = self.encoding.inverse_transform_policy
        if prepared.mode == "identity":
            return masked_softmax(logits, masks)
        if prepared.mode == "random":
            return masked_softmax(inverse_transform_policy(logits, prepared.symmetries), masks)
        policy = np.zeros(masks.shape, dtype=np.float32)
        for s in range(NUM_SYMMETRIES):
            policy += masked_softmax(inverse_transform_policy(logits[s * count: (s + 1) * count], s), masks)
        return policy / NUM_SYMMETRIES

    def _finish(self, prepared: "_Prepared", logits: np.ndarray, value: np.ndarray,
                score: np.ndarray | None = None, ownership: np.ndarray | None = None,
                *extra: np.ndarray) -> Evaluation:
        count = prepared.count
        policy = self._policy(prepared, logits)
        optimistic = None
        if self.extra_outputs[-1:] == (OPTIMISTIC_POLICY,) and len(extra) == len(self.extra_outputs):
            optimistic = self._policy(prepared, extra[-1])
            extra = extra[:-1]
        if prepared.mode == "random":
            if ownership is not None:
                ownership = _unturned_points(ownership, prepared.symmetries)
        elif prepared.mode != "identity":
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
        if optimistic is not None:
            evaluation.policy_optimistic = optimistic.astype(np.float32, copy=False)
        return evaluation


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


def _metadata_ownership_share(metadata: dict[str, str], path: object) -> float | None:
    """The share of the dead-stone judgement measured for the network's ownership head (metadata
    ``ownership_network``, a number in [0, 1]), None where it has none; one it cannot read is none, with a warning."""
    text = metadata.get("ownership_network")
    if text is None:
        return None
    try:
        return parse_share(text)
    except ValueError:
        print(f"tabula: {path}: its ownership_network {text!r} is ignored: not a number in [0, 1]", file=sys.stderr)
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


__all__ = ["OnnxEvaluator", "SYMMETRY_MODES", "DEFAULT_MAX_BATCH", "EXTRA_OUTPUTS", "OPTIMISTIC_POLICY",
           "PREPARED_SIZES"]
