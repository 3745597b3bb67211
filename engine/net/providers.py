"""What can run a network here: the CPUs this process may use, whether an NVIDIA GPU is present (without importing
torch or CUDA), onnxruntime's providers in order of preference and their options; and the one-line log of it.

Layer: net; the standard library only.
"""
from __future__ import annotations

import os
import sys
from typing import Sequence

from tabula.engine.net.features import NUM_PLANES

PROVIDERS = {  # our names -> onnxruntime's, in order of preference for "auto"
    "tensorrt": "TensorrtExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "cpu": "CPUExecutionProvider",
}
TORCH = "torch"  # the torch CUDA backend (engine/net/torch_backend.py), for GPUs that onnxruntime here cannot use
# The names a provider is asked for by, engine.config.BACKENDS, are "auto", the PROVIDERS and TORCH.


def stderr_log(line: str) -> None:
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


def first_line(error: BaseException | None) -> str:
    """An error's message as one log line can hold it (its type where it has none)."""
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else type(error).__name__


__all__ = ["PROVIDERS", "TORCH", "available_cores", "nvidia_gpu_present", "default_cache_dir", "provider_options",
           "choose_providers", "stderr_log", "first_line"]
