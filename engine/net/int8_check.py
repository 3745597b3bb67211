"""The int8 check: an int8 network file runs on the CPU only where it computes what its fp32 file beside it does
(``NAME-int8.onnx`` beside ``NAME.onnx``), and that fp32 file is what a GPU backend rebuilds.

An int8 file says in its metadata how it was quantized (``int8_kernels``, written by ``tabula export --quantize``):
``any``, 7-bit weights, which every CPU's int8 kernels compute as the file means; ``vnni``, or nothing (files from
before the key), 8-bit weights, which CPUs without VNNI get wrong. Both are checked at the start all the same; the
mark says why a file that disagrees does.

Layer: net; numpy and onnxruntime only.
"""
from __future__ import annotations

import os
from typing import Callable

import numpy as np

from tabula.engine.net.comparison import comparison_planes
from tabula.engine.net.encodings import Encoding
from tabula.engine.net.providers import PROVIDERS, first_line

# An int8 file on the CPU runs only where it agrees with its fp32 file this well on random positions
# (int8_disagreement): well below what a faithful int8 file reaches and well above what saturating int8 kernels give
# (docs/BENCHMARKS.md, "int8 on a CPU without VNNI").
INT8_AGREEMENT = {"positions": 64, "top1": 0.6, "value": 0.1}


def quantized_for_every_cpu(metadata: dict[str, str]) -> bool:
    """Whether an int8 file's weights fit every CPU's int8 kernels (``int8_kernels`` ``any``: 7-bit weights)."""
    return metadata.get("int8_kernels") == "any"


def fallback_note(metadata: dict[str, str], sibling: str, top1: float) -> str:
    """The log's note when an int8 file (its ``metadata``) disagreed with its fp32 file ``sibling``, which runs
    instead; ``top1``: the share of positions where the two picked the same move."""
    name = os.path.basename(sibling)
    why = ("its int8 file disagrees with it on this CPU although its 7-bit weights fit every CPU's int8 kernels"
           if quantized_for_every_cpu(metadata) else "this CPU has no VNNI")
    return (f"{why}, so the network runs from its fp32 file {name}: the same network at full precision (int8 here "
            f"would pick the same move in {top1:.0%} of positions)")


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


def int8_disagreement(path: str, metadata: dict[str, str], board_sizes: tuple[int, ...], encoding: Encoding,
                      run_int8: Callable[[np.ndarray], tuple[np.ndarray, ...]], input_name: str,
                      options=None) -> tuple[str, object, float] | None:
    """Whether an int8 file (``path``, its ``metadata``, run on the CPU by ``run_int8``) computes what its fp32 file
    does: None where it agrees on ``INT8_AGREEMENT["positions"]`` random positions (or agreed before in this
    process, or has no fp32 file to be checked against); else (the fp32 file, its CPU session with ``options``, the
    share of positions where both pick the same move), so that the caller runs the fp32 file instead.

    Why: onnxruntime's int8 convolutions on a CPU without VNNI (AVX2, or AVX-512 without VNNI) multiply u8 by s8
    with a saturating instruction, and a file of 8-bit weights comes out wrong there (docs/BENCHMARKS.md, "int8 on
    every CPU"); a file of 7-bit weights (``quantized_for_every_cpu``) should agree everywhere, and is measured all
    the same. A wrong network plays on without a sign, so it is measured, once, at the start."""
    key = (_file_key(path), _file_key(_fp32_name(path)))
    if key in _INT8_AGREED:
        return None  # checked in this process already, the same two files on disk
    try:
        sibling, reference = fp32_sibling(path, metadata, options)  # the session that may take over
    except FileNotFoundError:
        return None
    size = 19 if 19 in board_sizes else max(board_sizes)
    planes = comparison_planes(size, count=INT8_AGREEMENT["positions"], encoding=encoding)
    int8_logits, int8_value = run_int8(planes)[:2]
    logits, value = reference.run(["policy", "value"], {input_name: planes})
    top1 = float(np.mean(int8_logits.argmax(axis=1) == logits.argmax(axis=1)))
    value_diff = float(np.abs(int8_value - value.reshape(-1)).mean())
    if top1 >= INT8_AGREEMENT["top1"] and value_diff <= INT8_AGREEMENT["value"]:
        _INT8_AGREED.add(key)
        return None
    return sibling, reference, top1


__all__ = ["INT8_AGREEMENT", "fallback_note", "fp32_sibling", "int8_disagreement", "quantized_for_every_cpu"]
