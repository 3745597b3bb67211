"""A teacher network's ONNX file halved for the trip to a lent GPU machine, and made whole again there.

The lent machine receives 64 MiB in all, the repository's tracked files included, and a KataGo network's ONNX
conversion (float32 weights) may not fit beside them. ``pack`` stores every float32 initializer
as float16 (half the bytes; the file names the ones it changed in its metadata, and is no network until unpacked:
its extension is ``.onnx16``), and the whole file xz-compressed (trained float16 weights repeat their exponents,
and what the device tool lets travel is bounded). ``unpack`` casts them back to float32, giving an ordinary ONNX file
with the original's graph and metadata, whose weights are the original's rounded to float16. That rounding is what
a GPU running the teacher in fp16 (the torch backend's default) applies anyway. Packed files from before the
compression unpack the same way.

    python3 -m tabula.tools.learn.fp16_pack pack ~/.cache/tabula/katago/g170e-b15c192-*.onnx runs/teacher/
    python3 -m tabula.tools.learn.fp16_pack unpack runs/teacher/NAME.onnx16 /tmp/teacher/

A target that is a folder gets the source's name with the other extension.

Layer: a tool (onnx, numpy); no torch.
"""
from __future__ import annotations

import argparse
import lzma
import os
import sys

import numpy as np

PACKED_KEY = "tabula_fp16_pack"  # metadata: the initializers stored as float16, comma-separated
PACKED_EXTENSION = ".onnx16"
XZ_MAGIC = b"\xfd7zXZ\x00"


class PackError(ValueError):
    """A file that cannot be packed or unpacked, with the reason."""


def _load(path: str):
    """An ONNX model from ``path``, a plain ONNX file or a packed one (xz-compressed or not)."""
    import onnx

    try:
        with open(path, "rb") as handle:
            packed = handle.read(len(XZ_MAGIC)) == XZ_MAGIC
        if not packed:
            return onnx.load(path)  # from the path: an ONNX file's external data lies beside it
        with lzma.open(path) as handle:
            return onnx.load_from_string(handle.read())
    except Exception as error:  # onnx raises protobuf's and its own errors for files that are not ONNX
        raise PackError(f"{path}: not an ONNX file ({str(error).splitlines()[0][:200] if str(error) else error})") \
            from None


def _target(source: str, target: str, extension: str) -> str:
    if os.path.isdir(target) or target.endswith(os.sep):
        stem = os.path.basename(source)
        for end in (".onnx", PACKED_EXTENSION):
            if stem.endswith(end):
                stem = stem[: -len(end)]
        target = os.path.join(target, stem + extension)
    return target


def _save(model, target: str, compress: bool = False) -> None:
    import onnx

    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    if compress:
        with open(target + ".tmp", "wb") as handle:
            handle.write(lzma.compress(model.SerializeToString(), preset=9))
    else:  # an ordinary ONNX file, written as onnx writes one
        onnx.save(model, target + ".tmp")
    os.replace(target + ".tmp", target)


def pack(source: str, target: str) -> str:
    """Write ``source`` (an ONNX file) with its float32 initializers as float16, xz-compressed, to ``target`` (a
    file, or a folder: ``NAME.onnx16`` in it); returns the path written."""
    from onnx import TensorProto, numpy_helper

    model = _load(source)
    if any(p.key == PACKED_KEY for p in model.metadata_props):
        raise PackError(f"{source} is packed already")
    names = []
    for index, tensor in enumerate(model.graph.initializer):
        if tensor.data_type != TensorProto.FLOAT:
            continue
        array = numpy_helper.to_array(tensor)
        if np.any(np.abs(array[np.isfinite(array)]) > np.finfo(np.float16).max):
            raise PackError(f"{source}: {tensor.name} holds weights beyond float16's range")
        model.graph.initializer[index].CopyFrom(numpy_helper.from_array(array.astype(np.float16), tensor.name))
        names.append(tensor.name)
    if not names:
        raise PackError(f"{source} has no float32 weights to pack")
    entry = model.metadata_props.add()
    entry.key, entry.value = PACKED_KEY, ",".join(names)
    target = _target(source, target, PACKED_EXTENSION)
    _save(model, target, compress=True)
    return target


def unpack(source: str, target: str) -> str:
    """Write the packed ``source`` back as a float32 ONNX file to ``target`` (a file, or a folder: ``NAME.onnx`` in
    it); returns the path written."""
    from onnx import numpy_helper

    model = _load(source)
    entries = [p for p in model.metadata_props if p.key == PACKED_KEY]
    if not entries:
        raise PackError(f"{source} is not a packed file (no {PACKED_KEY} in its metadata)")
    names = set(entries[0].value.split(","))
    for index, tensor in enumerate(model.graph.initializer):
        if tensor.name in names:
            array = numpy_helper.to_array(tensor).astype(np.float32)
            model.graph.initializer[index].CopyFrom(numpy_helper.from_array(array, tensor.name))
    kept = [p for p in model.metadata_props if p.key != PACKED_KEY]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    target = _target(source, target, ".onnx")
    _save(model, target)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tabula.tools.learn.fp16_pack", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("pack", "unpack"))
    parser.add_argument("source")
    parser.add_argument("target", help="a file, or a folder (ending in /, or existing) for the source's name")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if not os.path.isfile(args.source):
        print(f"fp16_pack: {args.source}: no such file", file=sys.stderr)
        return 2
    try:
        written = (pack if args.action == "pack" else unpack)(args.source, args.target)
    except PackError as error:
        print(f"fp16_pack: {error}", file=sys.stderr)
        return 1
    print(f"{args.action}ed {args.source} ({os.path.getsize(args.source):,} bytes) -> {written} "
          f"({os.path.getsize(written):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
