"""What a Tabula network file is, shared by the side that writes it (``network``, with torch) and the side that
runs it (``evaluator``, with onnxruntime): the metadata format version and the error for an unusable file.

Layer: with features; imports nothing of the engine, so that ``network`` and ``evaluator`` both depend on it and
not on each other.
"""
from __future__ import annotations

METADATA_FORMAT_VERSION = "1"


class NetworkFileError(ValueError):
    """A network file that cannot be used: names the file and what is wrong with it."""

    def __init__(self, path: str, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


__all__ = ["METADATA_FORMAT_VERSION", "NetworkFileError"]
