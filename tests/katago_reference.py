"""KataGo's ``kata-raw-nn`` reference outputs (``../shared/katago/reference-raw-nn-*.txt``): the reader the KataGo
tests share (network, features, GTP).

A reference file: ``#`` comment lines, then per case the GTP commands that set the position up, the ``kata-raw-nn``
command, KataGo's reply (``symmetry``, ``whiteWin`` ... ``shorttermScoreError`` lines, ``policy`` and N rows,
``policyPass``, ``whiteOwnership`` and N rows) and a line ``end``. Illegal points are ``NAN`` in the policy.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from tabula.tools.check.raw_nn_compare import open_text, parse_reply, read_cases

REFERENCE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "katago")
# KataGo's networks are never in the repository: the slow tests that need one look here, and skip without it.
MODELS_DIR = os.environ.get("TABULA_KATAGO_MODELS", "/work/katago-models")


@dataclass
class ReferenceCase:
    commands: list[str]  # the GTP commands before kata-raw-nn
    size: int
    komi: float | None
    rules: str | None
    scalars: dict[str, float] = field(default_factory=dict)  # whiteWin, whiteLoss, noResult, whiteLead, ...
    policy: np.ndarray | None = None  # float [N, N], row 0 = KataGo's first printed row (the top, y = 0), NaN illegal
    policy_pass: float = float("nan")
    ownership: np.ndarray | None = None  # float [N, N], white's view, rows as printed

    @property
    def moves(self) -> list[tuple[str, str]]:
        """(colour, vertex) of each ``play`` command, in order."""
        return [tuple(c.split()[1:3]) for c in self.commands if c.startswith("play ")]

    @property
    def handicap(self) -> list[str]:
        return [v for c in self.commands if c.startswith("set_free_handicap") for v in c.split()[1:]]

    @property
    def empty(self) -> bool:
        return not self.moves and not self.handicap


def read_reference(path: str) -> list[ReferenceCase]:
    """The cases of a reference file, each reply parsed by ``raw_nn_compare`` (the one reader of the format)."""
    with open_text(path) as handle:
        _, cases = read_cases(handle.read())
    found: list[ReferenceCase] = []
    for case in cases:
        komi, rules = None, None
        for command in case.commands:
            parts = command.split()
            if parts[0] == "komi":
                komi = float(parts[1])
            elif parts[0] == "kata-set-rules":
                rules = parts[1]
        reply = parse_reply(case.reply or [], case.size)
        found.append(ReferenceCase(case.commands, case.size, komi, rules, reply.scalars, reply.policy,
                                   reply.policy_pass, reply.ownership))
    return found


def reference_path(network: str) -> str:
    """``network``: b10c384 or g170e-b15c192."""
    return os.path.normpath(os.path.join(REFERENCE_DIR, f"reference-raw-nn-{network}.txt"))


def empty_board_planes(size: int, komi: float, rules: str) -> np.ndarray:
    """float32 [1, 41, N, N]: KataGo's V7 inputs for an empty board, black to move (nninputs.cpp's fillRowV7), for
    the rules the reference files use (chinese, japanese, tromp-taylor)."""
    planes = np.zeros((1, 41, size, size), dtype=np.float32)
    planes[0, 0] = 1.0
    g = np.zeros(19, dtype=np.float32)
    self_komi = -komi  # black to move
    g[5] = self_komi / 20.0
    area = rules in ("chinese", "tromp-taylor")
    if rules == "tromp-taylor":
        g[6], g[7], g[8] = 1.0, 0.5, 1.0  # positional superko, multi-stone suicide legal
    if not area:
        g[9] = 1.0  # territory scoring
        g[10] = 1.0  # seki tax (japanese)
    if area:
        even = (size * size) % 2 == 0
        floor = np.floor(self_komi / 2.0) * 2.0 if even else np.floor((self_komi - 1.0) / 2.0) * 2.0 + 1.0
        delta = min(max(self_komi - floor, 0.0), 2.0)
        g[18] = delta if delta < 0.5 else (1.0 - delta if delta < 1.5 else delta - 2.0)
    planes[0, 22:] = g[:, None, None]
    return planes
