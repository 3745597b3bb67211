"""What a Tabula network file is, shared by the side that writes it (``network``, with torch) and the side that
runs it (``evaluator``, with onnxruntime): the metadata format version, the error for an unusable file, and the
reader of an fp32 file's parameters that rebuilds a torch model from it.

Layer: with features; imports nothing of the engine, so that ``network`` and ``evaluator`` both depend on it and
not on each other.
"""
from __future__ import annotations

METADATA_FORMAT_VERSION = "1"
KATAGO_STRUCTURE = "katago_structure"  # the metadata key of a KataGo network converted to ONNX (katago_network)


class NetworkFileError(ValueError):
    """A network file that cannot be used: names the file and what is wrong with it."""

    def __init__(self, path: str, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


def is_katago_network(metadata: dict[str, str]) -> bool:
    """Whether a network file's metadata is that of a KataGo network converted to ONNX (KataGo's outputs, its row
    order), not a Tabula network: by its structure, never by its input encoding, which a Tabula network may share
    (a student reading ``katago-v7``)."""
    return KATAGO_STRUCTURE in metadata


def file_sha256(path: str) -> str:
    """The hex SHA-256 of a file's bytes, read a megabyte at a time (OSError where it cannot be read)."""
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_fp32_onnx(path: str, structure_key: str, what: str, proto=None) -> tuple[dict[str, str], dict]:
    """(metadata, numpy initialisers by name) of an fp32 ONNX file whose metadata has ``structure_key`` (the model's
    description, ``what`` names it in the error), the initialisers the exporter shares between parameters through
    Identity nodes included under every name. NetworkFileError for another file. ``proto``: the file already
    loaded (``onnx.load``), which is then not read again."""
    import onnx
    from onnx import numpy_helper

    if proto is None:
        try:
            proto = onnx.load(path)
        except Exception as e:
            raise NetworkFileError(path, f"not an ONNX file ({type(e).__name__})") from None
    metadata = {p.key: p.value for p in proto.metadata_props}
    if structure_key not in metadata:
        raise NetworkFileError(path, f"no {what} in the metadata")
    if metadata.get("precision", "fp32") != "fp32":
        raise NetworkFileError(path, f"weights are {metadata['precision']}, only fp32 files convert back")
    tensors = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    for node in proto.graph.node:
        if node.op_type == "Identity" and node.input[0] in tensors:
            tensors.setdefault(node.output[0], tensors[node.input[0]])
    return metadata, tensors


__all__ = ["METADATA_FORMAT_VERSION", "KATAGO_STRUCTURE", "NetworkFileError", "file_sha256", "is_katago_network",
           "read_fp32_onnx"]
