"""The evaluators' names in one place, for ``from tabula.engine.net.evaluator import X``; each job has its module:

- ``evaluation.py``: the ``Evaluator`` protocol, ``Evaluation`` (``value`` in [-1, 1], the side to move's view),
  the stand-in ``UniformEvaluator``;
- ``providers.py``: what can run a network here (cores, GPU, onnxruntime's providers and their options);
- ``onnx_evaluator.py``: ``OnnxEvaluator``, a network file through onnxruntime or torch, and ``session_options``,
  every onnxruntime CPU session's settings;
- ``int8_check.py``: an int8 file runs on the CPU only where it agrees with its fp32 file;
- ``network_set.py``: ``NetworkSet`` (each board size to its network) and ``load_networks``;
- ``comparison.py``: comparing two runners of one network (start-up checks, tests).

Layer: net. Network results are cached in one place, the search's transposition table.
"""
from __future__ import annotations

from tabula.engine.net.comparison import (
    GPU_TOLERANCE,
    SCORE_TOLERANCE_POINTS,
    comparison_planes,
    outputs_difference,
)
from tabula.engine.net.evaluation import (
    Evaluation,
    Evaluator,
    PendingEvaluation,
    UniformEvaluator,
    UnsupportedBoardSizeError,
    empty_evaluation,
    evaluate_all_symmetries,
    evaluate_async,
    legal_mask,
    masked_softmax,
)
from tabula.engine.net.int8_check import INT8_AGREEMENT, fp32_sibling, int8_disagreement
from tabula.engine.net.netfile import NetworkFileError
from tabula.engine.net.network_set import NetworkSet, katago_onnx, load_networks
from tabula.engine.net.onnx_evaluator import (
    AVERAGE,
    DEFAULT_MAX_BATCH,
    EXTRA_OUTPUTS,
    PREPARED_SIZES,
    SYMMETRY_MODES,
    OnnxEvaluator,
    session_options,
)
from tabula.engine.net.providers import (
    PROVIDERS,
    TORCH,
    available_cores,
    choose_providers,
    default_cache_dir,
    first_line,
    nvidia_gpu_present,
    provider_options,
    stderr_log,
)

__all__ = ["Evaluation", "Evaluator", "PendingEvaluation", "UniformEvaluator", "UnsupportedBoardSizeError",
           "empty_evaluation", "evaluate_all_symmetries", "evaluate_async", "legal_mask", "masked_softmax",
           "PROVIDERS", "TORCH", "available_cores", "choose_providers", "default_cache_dir", "first_line",
           "nvidia_gpu_present", "provider_options", "stderr_log", "OnnxEvaluator", "session_options", "AVERAGE",
           "DEFAULT_MAX_BATCH", "EXTRA_OUTPUTS", "PREPARED_SIZES", "SYMMETRY_MODES", "INT8_AGREEMENT", "fp32_sibling",
           "int8_disagreement", "NetworkSet", "katago_onnx", "load_networks", "GPU_TOLERANCE",
           "SCORE_TOLERANCE_POINTS", "comparison_planes", "outputs_difference", "NetworkFileError"]
