"""The torch network, its ONNX export, and conversion to and from Leela Zero weights.

Layer: the only engine module that imports torch (the GTP path needs only ``evaluator.py`` and onnxruntime). Two
heads share one residual trunk (3×3 input conv, then blocks of conv-BN-ReLU-conv-BN-skip-ReLU):

- ``agz``: AlphaGo Zero's heads, as Leela Zero has them — fixed board size. Policy: 1×1 conv to 2 channels, BN,
  ReLU, FC to N*N+1. Value: 1×1 conv to 1 channel, BN, ReLU, FC to 256, ReLU, FC to 1, tanh.
- ``pooled``: any board size (KataGo style). Policy: 1×1 convs give one logit per point; the pass logit and the value
  come from global mean and max pooling, so one net plays 9×9, 13×13 and 19×19.

``forward(planes float32 [B, 18, N, N]) -> (policy logits float32 [B, N*N+1] pass last, value float32 [B] tanh)``;
the value is from the side to move's view. That is Go's; a network of another game (``NetSpec.input_encoding``,
``engine.net.encodings``: gomoku's ``gomoku-4``) reads that encoding's planes and has no pass logit when the game has
no pass. A pooled net with ``aux`` heads adds two outputs, ``score`` float32 [B]
(the final margin in points, side to move's view) and ``ownership`` float32 [B, N*N] (tanh, +1: the side to move
will own the point), and trains a third, the opponent's reply (KataGo's auxiliary policy), which is not exported.
A pooled Go net of ``leelaz-18+komi`` sees the komi (``TabulaNet``, ``PooledHead``, ``with_komi_input``).
Checkpoints load with ``weights_only=True`` only: weights are data.
"""
from __future__ import annotations

import json
import os
import warnings
from dataclasses import asdict, dataclass, replace
from typing import Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from tabula.engine.net.encodings import Encoding, encoding_named
from tabula.engine.net.features import INPUT_ENCODING, KOMI_INPUT_ENCODING, KOMI_SCALE
from tabula.engine.net.leelaz import BN_EPSILON, VERSION_BLACK, VERSION_STM, ConvLayer, LeelazWeights
from tabula.engine.net.netfile import METADATA_FORMAT_VERSION, NetworkFileError, read_fp32_onnx

AGZ = "agz"
POOLED = "pooled"
SIDE_TO_MOVE = "side_to_move"
BLACK_VIEW = "black"  # Leela Zero v2 files (ELF OpenGo): the value head predicts black's outcome
SCORE_SCALE = 10.0  # the score head's raw output is in tens of points, so that it trains at unit scale
OUTPUTS = ("policy", "value")
AUX_OUTPUTS = ("score", "ownership")
# The small-board value offset's weights (PooledHead): the komi, the parity wave and the mover's constant, each
# with its size-scaled copy. Files calibrated before the mover's term hold the first four.
OFFSET_WEIGHTS = 6
OFFSET_PARAMETER = "head.value_offset_small_boards.weight"
# NetSpec's small-board komi terms, each in a network's metadata only where it is on
SMALL_BOARD_KOMI_FLAGS = ("small_board_komi", "small_board_komi_parity", "small_board_score_komi")
# The global planes the head reads with ``head_komi``: the side to move's komi / KOMI_SCALE and its parity wave
KOMI_GLOBALS = ("komi", "komi_wave")
HEAD_KOMI_LAYERS = ("value_head_komi", "score_head_komi")  # the head's modules that read them


def has_komi_globals(encoding: Encoding) -> bool:
    """Whether ``encoding`` carries the komi among its global planes (katago-v7, tabula-v2), which ``head_komi``
    reads; not a komi input plane of its own (leelaz-18+komi), which the older komi terms read."""
    return encoding.komi_plane is None and set(KOMI_GLOBALS) <= set(encoding.plane_names)


def is_head_komi_weight(name: str) -> bool:
    """Whether a state_dict entry belongs to the head's komi paths (``head_komi``)."""
    return any(f".{layer}." in name for layer in HEAD_KOMI_LAYERS)


@dataclass(frozen=True)
class NetSpec:
    """Architecture of a network: everything needed to rebuild it before loading weights."""

    blocks: int = 6  # residual blocks
    filters: int = 64  # channels in the trunk
    head: str = AGZ  # agz (fixed size) | pooled (any size)
    board_size: int = 19  # the agz head's size; the pooled head ignores it
    value_hidden: int = 256  # width of the value head's hidden layer
    head_channels: int = 32  # pooled head: channels of the 1×1 head convolutions
    value_perspective: str = SIDE_TO_MOVE  # side_to_move | black (imported ELF nets)
    aux: bool = False  # pooled head only: score, ownership and opponent-reply heads
    small_board_value: bool = False  # pooled head only: the value head's small-board term (PooledHead)
    input_encoding: str = INPUT_ENCODING  # the game's input planes and policy layout (engine.net.encodings)
    # leelaz-18+komi only: the komi (points, white's) at which the score head's fixed komi path adds nothing, the
    # komi a network extended by with_komi_input had learned its score at (PooledHead)
    komi_reference: float = 7.5
    # leelaz-18+komi only: a komi term of the value that only boards below 19x19 see (PooledHead)
    small_board_komi: bool = False
    # with small_board_komi only: its komi parity term (PooledHead)
    small_board_komi_parity: bool = False
    # leelaz-18+komi with aux only: a komi term of the score alone that only boards below 19x19 see (PooledHead)
    small_board_score_komi: bool = False
    # katago-v7 and tabula-v2 (the komi among their global planes), pooled head only: the head reads the komi and
    # its parity wave itself, into the value's hidden layer and straight into the score (PooledHead)
    head_komi: bool = False
    # with head_komi only: an offset of the value's raw output by the komi, its parity wave and the mover's term
    # on boards below 19x19, a calibration
    # fitted to self-play results (PooledHead; tools/learn/calibrate.py)
    small_board_value_offset: bool = False

    def __post_init__(self) -> None:
        if self.head not in (AGZ, POOLED):
            raise ValueError(f"unknown head {self.head!r}")
        if self.value_perspective not in (SIDE_TO_MOVE, BLACK_VIEW):
            raise ValueError(f"unknown value perspective {self.value_perspective!r}")
        if self.blocks < 0 or self.filters < 1:
            raise ValueError("blocks must be >= 0 and filters >= 1")
        if self.aux and self.head != POOLED:
            raise ValueError("auxiliary heads need the pooled head")
        if self.small_board_value and self.head != POOLED:
            raise ValueError("the small-board value term needs the pooled head")
        encoding = self.encoding  # ValueError for an unknown name
        if (self.aux or self.small_board_value) and not encoding.scored:
            raise ValueError(f"score, ownership and small-board value heads are for Go, not {self.input_encoding}")
        if encoding.komi_plane is not None and self.head != POOLED:
            raise ValueError(f"the komi input ({self.input_encoding}) needs the pooled head")
        if self.small_board_komi and encoding.komi_plane is None:
            raise ValueError(f"the small-board komi term reads the komi input, which {self.input_encoding} has not")
        if self.small_board_komi_parity and not self.small_board_komi:
            raise ValueError("the small-board komi parity term extends the small-board komi term, which is missing")
        if self.small_board_score_komi and (encoding.komi_plane is None or not self.aux):
            raise ValueError("the small-board score komi term needs the komi input and the score head")
        if self.head_komi and (self.head != POOLED or not has_komi_globals(encoding)):
            raise ValueError(f"the head's komi reads the komi and komi_wave global planes with the pooled head, "
                             f"which {self.input_encoding} with the {self.head} head has not")
        if self.small_board_value_offset and not self.head_komi:
            raise ValueError("the small-board value offset reads the komi the head reads (head_komi), which is off")

    @property
    def encoding(self) -> Encoding:
        """The input encoding (planes, policy layout); ValueError for an unknown name."""
        return encoding_named(self.input_encoding)

    def to_dict(self) -> dict:
        data = asdict(self)
        if self.encoding.komi_plane is None:
            del data["komi_reference"]  # meaningless without the komi input: the metadata of such nets stays as it was
        for flag in (*SMALL_BOARD_KOMI_FLAGS, "head_komi", "small_board_value_offset"):
            if not data[flag]:
                del data[flag]  # the metadata of networks without it stays as it was
        return data

    def same_weights(self, other: "NetSpec") -> bool:
        """Whether the weights of one load into the other: the same architecture, the board size aside for the
        pooled head, which has no weight that depends on it (a 19x19-trained network continues on 9x9)."""
        if self.head == POOLED and other.head == POOLED:
            return replace(self, board_size=other.board_size) == other
        return self == other

    @classmethod
    def from_dict(cls, data: dict) -> "NetSpec":
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)


class ConvBN(nn.Module):
    """Convolution without bias, then batch norm (epsilon as Leela Zero's)."""

    def __init__(self, inputs: int, outputs: int, kernel: int):
        super().__init__()
        self.conv = nn.Conv2d(inputs, outputs, kernel, padding=kernel // 2, bias=False)
        self.bn = nn.BatchNorm2d(outputs, eps=BN_EPSILON)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.conv(x))


class ResidualBlock(nn.Module):
    def __init__(self, filters: int):
        super().__init__()
        self.first = ConvBN(filters, filters, 3)
        self.second = ConvBN(filters, filters, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(x + self.second(F.relu(self.first(x))))


class AgzHead(nn.Module):
    def __init__(self, spec: NetSpec):
        super().__init__()
        points = spec.board_size * spec.board_size
        self.policy_conv = ConvBN(spec.filters, 2, 1)
        self.policy_fc = nn.Linear(2 * points, spec.encoding.policy_size(spec.board_size))
        self.value_conv = ConvBN(spec.filters, 1, 1)
        self.value_fc1 = nn.Linear(points, spec.value_hidden)
        self.value_fc2 = nn.Linear(spec.value_hidden, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        policy = self.policy_fc(F.relu(self.policy_conv(x)).flatten(1))
        hidden = F.relu(self.value_fc1(F.relu(self.value_conv(x)).flatten(1)))
        return policy, self.value_fc2(hidden)[:, 0]


class PooledHead(nn.Module):
    """With ``small_board_value``: a term added to the value's hidden layer, a linear map of the value features'
    mean, the side to move (1 black, 0 white) and a constant, all scaled by ``max(19 - size, 0) / 10``. Why: the
    network does not see the komi, and 7.5 points weigh far more on 9×9 than on the 19×19 records its value learned
    from (it overrated black's chances on 9×9 by 12 to 19 points). The term is zero on 19×19 and larger boards, so
    a network trained on 19×19 keeps its 19×19 values bit for bit while the term, zero-initialised and trained alone
    on small-board self-play, learns their komi (docs/TRAINING.md).

    With a komi input (``leelaz-18+komi``): ``value_komi``, a linear map of the side to move's komi k (points / 20)
    and k × (size - 14) / 10 into the value's hidden layer (so into the score too), zero-initialised, and a fixed
    path that adds (komi - reference) points to the score. Why fixed: the score target is the final margin with the
    komi in it (records' ``RE``, self-play's count), so it moves point for point with the komi while the stones do
    not; a learned path would have to learn the identity from data, through a ReLU layer, at every size. With the
    identity given, the learned part predicts the margin on the board, which the komi moves only through play,
    and the ``komi_reference`` (the side to move's view of the komi the network had learned its score at, 7.5) makes
    the path zero there, so an extended network keeps its outputs at that komi exactly. The value has no such path:
    how many points make a win more likely depends on the position, which is what ``value_komi`` learns.

    With ``small_board_komi`` (a komi input's networks only): ``value_komi_small_boards``, a linear map of k times the
    value features' mean, k and k × (size - 14) / 10, all scaled by ``max(19 - size, 0) / 10``, into the value's
    hidden layer, zero-initialised. Why: self-play on 9×9 and 13×13 is where a point of komi decides games, but
    training the komi terms every size shares on it moved the 19×19 values too (white to move 18 points too
    pessimistic on held-out records, docs/TRAINING.md); this term is zero on 19×19, so trained alone on small boards
    it leaves the 19×19 network bit for bit as it was.

    With ``small_board_komi_parity`` too: ``value_parity_small_boards``, the same map of KataGo's komi parity wave w
    (w × the value features' mean, w and w × (size - 14) / 10, scaled the same), zero-initialised. Why: under area
    scoring a board without neutral points ends with a margin of the board area's parity (odd on 9×9 and 13×13), so
    komi 5.5 and 6.5 decide the same games and 6.5 and 7.5 do not; a value linear in the komi cannot show that steps
    (it gave white 5–12 points too much at 5.5–7.5 on 9×9, docs/TRAINING.md). w is a triangle wave of the side to
    move's komi, 0 at the komis that allow a draw, ±0.5 halfway between them (``komi_parity_wave``).

    With ``small_board_score_komi`` (a komi input's networks with the score head): ``score_komi_small_boards``, a
    linear map of (k - reference) and its size-scaled copy, scaled by ``max(19 - size, 0) / 10``, added to the score
    alone, zero-initialised. Why: the small-board value terms above feed the score's hidden layer too, and trained
    for the value they pulled 9×9's score back from the fixed path's point for point to 0.75 points a komi point
    (docs/TRAINING.md); this term, trained alone on the moved-komi score targets (the lead), gives the score its
    slope back without touching the value anywhere, and adds nothing at the reference komi nor on 19×19.

    With ``head_komi`` (katago-v7 and tabula-v2, whose global planes carry the side to move's komi k = points / 20
    and KataGo's komi parity wave w): ``value_head_komi``, a linear map of k and w and their size-scaled copies into
    the value's hidden layer, and with the score head ``score_head_komi``, a linear map of the komi (in the score's
    tens of points) and its size-scaled copy added to the score; both zero-initialised, so that a network given
    them computes what it computed. Why: through the trunk alone a student learned the komi on 19×19 but hardly on
    9×9 (the score moved 0.3 points a komi point, its value leaned to black at komi 7.5, docs/TRAINING.md). The
    score moves point for point with the komi at any size, which a linear path learns at once; the value's path
    learns how much a point weighs at each size. Not grafted: every size and komi trains them, and they are part of
    the architecture a new student starts with.

    With ``small_board_value_offset`` (``head_komi`` networks only): ``value_offset_small_boards``, a linear map of
    k, w, a constant (the mover's term) and their size-scaled copies added to the value's raw output (before tanh),
    scaled by ``max(19 - size, 0) / 10``, zero-initialised and fitted alone to self-play results
    (``tools/learn/calibrate.py``). Why: a student taught by a stronger network's value learns the komi as the
    teacher's own play realises it; on 9x9, where one point decides games, the engine's own games realise it
    differently (at komi 7.5 black won more often than the student predicted, docs/TRAINING.md), and the side to
    move there wins a little more often than the student predicts whatever its colour. The komi's terms are one
    number for a game that flips sign with the side to move, so they move every value a search backs up to a node
    the same way; the mover's term alternates with the depth and is small. The offset changes the winrate a user
    reads and resignation far more than the choice of moves, and nothing on 19x19. Files calibrated before the
    mover's term hold the first four of its ``OFFSET_WEIGHTS``; they load with the mover's two at zero."""

    def __init__(self, spec: NetSpec):
        super().__init__()
        channels = spec.head_channels
        self.policy_conv = ConvBN(spec.filters, channels, 1)
        self.policy_points = nn.Conv2d(channels, 1, 1)
        # the pass logit, from the pooled policy features (None: a game without a pass)
        self.policy_pass = nn.Linear(2 * channels, 1) if spec.encoding.has_pass else None
        self.value_conv = ConvBN(spec.filters, channels, 1)
        self.value_fc1 = nn.Linear(3 * channels, spec.value_hidden)
        self.value_fc2 = nn.Linear(spec.value_hidden, 1)
        self.aux = spec.aux
        if spec.aux:
            self.reply_points = nn.Conv2d(channels, 1, 1)
            self.reply_pass = nn.Linear(2 * channels, 1)
            self.ownership_points = nn.Conv2d(channels, 1, 1)
            self.score_fc = nn.Linear(spec.value_hidden, 1)
        self.value_small_boards = None
        if spec.small_board_value:
            self.value_small_boards = nn.Linear(channels + 2, spec.value_hidden, bias=False)
            nn.init.zeros_(self.value_small_boards.weight)
        self.value_komi = None
        self.komi_reference = spec.komi_reference
        if spec.encoding.komi_plane is not None:
            self.value_komi = nn.Linear(2, spec.value_hidden, bias=False)
            nn.init.zeros_(self.value_komi.weight)
        self.value_komi_small_boards = None
        if spec.small_board_komi:
            self.value_komi_small_boards = nn.Linear(channels + 2, spec.value_hidden, bias=False)
            nn.init.zeros_(self.value_komi_small_boards.weight)
        self.value_parity_small_boards = None
        if spec.small_board_komi_parity:
            self.value_parity_small_boards = nn.Linear(channels + 2, spec.value_hidden, bias=False)
            nn.init.zeros_(self.value_parity_small_boards.weight)
        self.score_komi_small_boards = None
        if spec.small_board_score_komi:
            self.score_komi_small_boards = nn.Linear(2, 1, bias=False)
            nn.init.zeros_(self.score_komi_small_boards.weight)
        self.value_head_komi, self.score_head_komi = None, None
        if spec.head_komi:
            self.value_head_komi = nn.Linear(4, spec.value_hidden, bias=False)
            nn.init.zeros_(self.value_head_komi.weight)
            if spec.aux:
                self.score_head_komi = nn.Linear(2, 1, bias=False)
                nn.init.zeros_(self.score_head_komi.weight)
        self.value_offset_small_boards = None
        if spec.small_board_value_offset:
            self.value_offset_small_boards = nn.Linear(OFFSET_WEIGHTS, 1, bias=False)
            nn.init.zeros_(self.value_offset_small_boards.weight)

    def forward(self, x: torch.Tensor, size: torch.Tensor, black: torch.Tensor | None = None,
                komi_plane: torch.Tensor | None = None,
                komi_globals: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """``size``: float [B, 1], the board's side length; ``black``: float [B, 1], 1 when black is to move, else 0
        (needed by the small-board and komi terms only); ``komi_plane``: float [B, N, N], the input's komi plane
        (the komi input's networks only); ``komi_globals``: float [B, 2], the side to move's komi / KOMI_SCALE and
        the komi parity wave (``head_komi`` only).
        Raw outputs: value before tanh, ownership before tanh, score in tens of points."""
        p = F.relu(self.policy_conv(x))
        pooled = torch.cat([p.mean(dim=(2, 3)), p.amax(dim=(2, 3))], dim=1)
        points = self.policy_points(p).flatten(1)
        out = {"policy": points if self.policy_pass is None else torch.cat([points, self.policy_pass(pooled)], dim=1)}
        v = F.relu(self.value_conv(x))
        mean = v.mean(dim=(2, 3))
        value_pooled = torch.cat([with_size_term(mean, size), v.amax(dim=(2, 3))], dim=1)
        hidden = self.value_fc1(value_pooled)
        smallness = None  # the small-board terms' scale: 1 on 9×9, 0 on 19×19 and larger boards
        if (self.value_small_boards is not None or self.value_komi_small_boards is not None
                or self.score_komi_small_boards is not None or self.value_offset_small_boards is not None):
            smallness = torch.clamp(19.0 - size, min=0.0) / 10.0
        if self.value_small_boards is not None:
            hidden = hidden + self.value_small_boards(torch.cat([mean, black, torch.ones_like(black)], dim=1)
                                                      * smallness)
        komi = None
        if self.value_komi is not None:
            # Read here, in the head, which int8 files keep in fp32 (tools/learn/export.py, after_heads): the komi's
            # path to the score is then exact, not clipped to the range calibration saw in the trunk.
            k = komi_plane.mean(dim=(1, 2))[:, None]  # the side to move's komi / KOMI_SCALE
            komi = k * KOMI_SCALE
            komi_features = with_size_term(k, size)
            hidden = hidden + self.value_komi(komi_features)
            if self.value_komi_small_boards is not None:
                hidden = hidden + self.value_komi_small_boards(torch.cat([k * mean, komi_features], dim=1) * smallness)
            if self.value_parity_small_boards is not None:
                wave = komi_parity_wave(komi, size)
                hidden = hidden + self.value_parity_small_boards(
                    torch.cat([wave * mean, with_size_term(wave, size)], dim=1) * smallness)
        head_komi_features = None
        if self.value_head_komi is not None:
            k, wave = komi_globals[:, :1], komi_globals[:, 1:2]
            head_komi_features = torch.cat([with_size_term(k, size), with_size_term(wave, size)], dim=1)
            hidden = hidden + self.value_head_komi(head_komi_features)
        hidden = F.relu(hidden)
        out["value"] = self.value_fc2(hidden)[:, 0]
        if self.value_offset_small_boards is not None:
            features = torch.cat([head_komi_features, with_size_term(torch.ones_like(size), size)], dim=1)
            out["value"] = out["value"] + (self.value_offset_small_boards(features) * smallness)[:, 0]
        if self.aux:
            out["reply"] = torch.cat([self.reply_points(p).flatten(1), self.reply_pass(pooled)], dim=1)
            # ownership reads the value branch's per-point features: who owns a point is what the value sums up
            out["ownership"] = self.ownership_points(v).flatten(1)
            out["score"] = self.score_fc(hidden)[:, 0]
            if self.value_komi is not None:  # the fixed komi path (see the class): exactly 0 at the reference komi
                reference = self.komi_reference * (1.0 - 2.0 * black)  # the side to move's view of it
                moved = komi - reference
                out["score"] = out["score"] + (moved / SCORE_SCALE)[:, 0]
                if self.score_komi_small_boards is not None:
                    line = self.score_komi_small_boards(with_size_term(moved / KOMI_SCALE, size))
                    out["score"] = out["score"] + (line * smallness)[:, 0]
            if self.score_head_komi is not None:  # the komi in the score's unit: a weight of 1 moves it point for point
                komi_tens = komi_globals[:, :1] * (KOMI_SCALE / SCORE_SCALE)
                out["score"] = out["score"] + self.score_head_komi(with_size_term(komi_tens, size))[:, 0]
        return out


def with_size_term(x: torch.Tensor, size: torch.Tensor) -> torch.Tensor:
    """``x`` [B, C] and its size-scaled copy, x × (size - 14) / 10 ([B, 2C]): KataGo's trick, with which one
    network learns how the board's size shifts what a feature means (the value's pooled mean, the komi)."""
    return torch.cat([x, x * (size - 14.0) / 10.0], dim=1)


def komi_parity_wave(komi: torch.Tensor, size: torch.Tensor) -> torch.Tensor:
    """KataGo's komi parity wave of ``komi`` (points, the side to move's) on boards of side ``size`` (both [B, 1]):
    a triangle wave of period 2 that is 0 at the komis which allow a draw under area scoring (those of the board
    area's parity: odd on 9×9, even on 10×10), +0.5 half a point above them and -0.5 half a point below. Continuous,
    so a komi read back from the input plane a hair off its value gives the same wave."""
    odd = torch.remainder(torch.round(size), 2.0)  # the area's parity is the side's
    floor = torch.floor((komi - odd) / 2.0) * 2.0 + odd  # the drawable komi at or below
    delta = komi - floor  # in [0, 2)
    return torch.where(delta < 0.5, delta, torch.where(delta < 1.5, 1.0 - delta, delta - 2.0))


class TabulaNet(nn.Module):
    """The residual network. ``forward(planes [B, 18, N, N]) -> (policy logits [B, N*N+1], value [B] in [-1, 1])``,
    plus (score [B] in points, ownership [B, N*N] in [-1, 1]) with aux heads; ``train_outputs`` gives every head's
    raw output for the losses."""

    def __init__(self, spec: NetSpec):
        super().__init__()
        self.spec = spec
        self.size_planes = spec.encoding.size_planes
        self.komi_plane = spec.encoding.komi_plane
        # The komi plane has a convolution of its own, zero-initialised, added after the batch norm (before the
        # ReLU): a network extended with it (with_komi_input) computes exactly what it computed, since adding zeros
        # changes no bit, where one wider convolution could sum in another order; and the input ConvBN stays one
        # that folds (torch_backend.fold_batch_norms). The plane is within about ±0.5, the scale the batch norm
        # gives the rest, so the convolution needs no normalisation of its own.
        self.input_komi = None
        if self.komi_plane is not None:
            self.input = ConvBN(self.komi_plane, spec.filters, 3)
            self.input_komi = nn.Conv2d(1, spec.filters, 3, padding=1, bias=False)
            nn.init.zeros_(self.input_komi.weight)
        else:
            self.input = ConvBN(spec.encoding.planes, spec.filters, 3)
        self.tower = nn.Sequential(*[ResidualBlock(spec.filters) for _ in range(spec.blocks)])
        self.head = AgzHead(spec) if spec.head == AGZ else PooledHead(spec)
        # The komi and komi_wave planes' numbers (head_komi), a buffer on the module's device and in no state_dict.
        # Not a list index, which makes a tensor from host data at every call: a copy to the GPU that a CUDA graph's
        # capture refuses. Nor slices and a concatenation, operators int8 quantization reaches, which would clip the
        # komi to its calibrated range: the Gather of the planes and its mean stay fp32 (tools/learn/export.py).
        names = spec.encoding.plane_names
        self.register_buffer("komi_globals", torch.tensor([names.index(name) for name in KOMI_GLOBALS])
                             if spec.head_komi else None, persistent=False)

    def train_outputs(self, planes: torch.Tensor) -> dict[str, torch.Tensor]:
        """Raw head outputs: policy and reply logits, value and ownership before tanh, score in tens of points."""
        if self.input_komi is None:
            x = self.input(planes)
        else:
            k = self.komi_plane
            x = self.input(planes[:, :k]) + self.input_komi(planes[:, k:k + 1])
        x = self.tower(F.relu(x))
        if self.spec.head == AGZ:
            policy, value = self.head(x)
            return {"policy": policy, "value": value}
        # Planes 16 and 17 together are all ones: their sum is the number of points, without reading the shape.
        # Rounded, because an int8 file quantizes the planes (a 1 comes back as 0.99999994), and the small-board
        # value term must be exactly zero on 19×19. An encoding without such planes sums a plane of ones.
        if self.size_planes is not None:
            ones = planes[:, self.size_planes[0]:self.size_planes[1]]
        else:
            ones = torch.ones_like(planes[:, :1])
        size = torch.round(torch.sqrt(ones.sum(dim=(1, 2, 3))))[:, None]
        komi_plane = planes[:, self.komi_plane] if self.komi_plane is not None else None
        needs_black = self.spec.small_board_value or komi_plane is not None
        # rounded: an int8 file's 1 is 0.99999994
        black = torch.round(planes[:, 16].amax(dim=(1, 2)))[:, None] if needs_black else None
        # each a plane of one value over the board, which its mean reads
        komi_globals = (planes.index_select(1, self.komi_globals).mean(dim=(2, 3))
                        if self.komi_globals is not None else None)
        return self.head(x, size, black, komi_plane, komi_globals)

    def forward(self, planes: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.train_outputs(planes)
        value = torch.tanh(out["value"])
        if self.spec.value_perspective == BLACK_VIEW:
            value = value * (2.0 * planes[:, 16, 0, 0] - 1.0)
        if not self.spec.aux:
            return out["policy"], value
        return out["policy"], value, SCORE_SCALE * out["score"], torch.tanh(out["ownership"])


# -- checkpoints -----------------------------------------------------------------------------------------------


def save_checkpoint(model: TabulaNet, path: str | os.PathLike, **extra: object) -> None:
    """A torch file holding only tensors, numbers and strings, so that it loads with ``weights_only=True``."""
    torch.save({"spec": model.spec.to_dict(), "state_dict": model.state_dict(), **extra}, path)


def load_checkpoint(path: str | os.PathLike, averaged: bool = True) -> TabulaNet:
    """Load a checkpoint written by ``save_checkpoint`` or ``tabula train``: with ``averaged``, the run's moving
    average of the weights where it keeps one (what it validates and exports). Never unpickles arbitrary objects."""
    path = os.fspath(path)
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
        model = TabulaNet(NetSpec.from_dict(data["spec"]))
        state = data["state_dict"]
        if averaged and "ema_state_dict" in data:
            state = {**state, **data["ema_state_dict"]}
        model.load_state_dict(state)
    except NetworkFileError:
        raise
    except Exception as e:  # torch raises many types for bad files; one typed error names the file
        raise NetworkFileError(path, f"not a Tabula checkpoint ({type(e).__name__}: {str(e)[:200]})") from None
    return model.eval()


def with_komi_input(model: TabulaNet, komi_reference: float = 7.5) -> TabulaNet:
    """``model`` (a pooled Go network of ``leelaz-18``) reading ``leelaz-18+komi``: its weights, and zero ones for
    the komi plane's convolution and the value's komi term, so that it computes what it computed (and at
    ``komi_reference``, the komi it had learned at, the same score; the score moves point for point with the komi
    from there: PooledHead) until they are trained."""
    spec = model.spec
    if spec.head != POOLED:
        raise ValueError("the komi input needs the pooled head")
    if spec.input_encoding == KOMI_INPUT_ENCODING:
        raise ValueError("the network already has the komi input")
    if spec.input_encoding != INPUT_ENCODING:
        raise ValueError(f"the komi input is Go's ({INPUT_ENCODING} networks), not {spec.input_encoding}'s")
    return _grown(model, ["head.value_komi.weight", "input_komi.weight"], input_encoding=KOMI_INPUT_ENCODING,
                  komi_reference=float(komi_reference))


def with_small_board_komi(model: TabulaNet) -> TabulaNet:
    """``model`` (a network with the komi input) with a zero small-board komi term added (``PooledHead``): the same
    outputs on every board until the term is trained, and on 19×19 and larger boards after it too."""
    if model.spec.encoding.komi_plane is None:
        raise ValueError("the small-board komi term needs a network with the komi input (tabula export "
                         "--add-komi-input first)")
    if model.spec.small_board_komi:
        raise ValueError("the network already has the small-board komi term")
    return _grown(model, ["head.value_komi_small_boards.weight"], small_board_komi=True)


def with_small_board_komi_parity(model: TabulaNet) -> TabulaNet:
    """``model`` (a network with the small-board komi term) with a zero komi parity term added (``PooledHead``): the
    same outputs on every board until the term is trained, and on 19×19 and larger boards after it too."""
    if not model.spec.small_board_komi:
        raise ValueError("the komi parity term extends the small-board komi term (tabula export "
                         "--add-small-board-komi first)")
    if model.spec.small_board_komi_parity:
        raise ValueError("the network already has the small-board komi parity term")
    return _grown(model, ["head.value_parity_small_boards.weight"], small_board_komi_parity=True)


def with_small_board_value_offset(model: TabulaNet) -> TabulaNet:
    """``model`` (a network whose head reads the komi, ``head_komi``) with a zero small-board value offset added
    (``PooledHead``): the same outputs on every board until it is fitted, and on 19×19 and larger boards after it."""
    if not model.spec.head_komi:
        raise ValueError("the small-board value offset reads the komi the head reads: a katago-v7 or tabula-v2 "
                         "network with head_komi")
    if model.spec.small_board_value_offset:
        raise ValueError("the network already has the small-board value offset")
    return _grown(model, [OFFSET_PARAMETER], small_board_value_offset=True)


def with_small_board_score_komi(model: TabulaNet) -> TabulaNet:
    """``model`` (a network with the komi input and the score head) with a zero small-board score komi term added
    (``PooledHead``): the same outputs on every board until the term is trained; after it the same value everywhere,
    and the same score on 19×19 and larger boards and at the reference komi."""
    if model.spec.encoding.komi_plane is None or not model.spec.aux:
        raise ValueError("the small-board score komi term needs a network with the komi input (tabula export "
                         "--add-komi-input first) and the score head")
    if model.spec.small_board_score_komi:
        raise ValueError("the network already has the small-board score komi term")
    return _grown(model, ["head.score_komi_small_boards.weight"], small_board_score_komi=True)


def with_small_board_value(model: TabulaNet) -> TabulaNet:
    """``model`` with a zero small-board value term added (``PooledHead``): the same outputs on every board until
    the term is trained."""
    if model.spec.head != POOLED:
        raise ValueError("the small-board value term needs the pooled head")
    if model.spec.small_board_value:
        return model
    return _grown(model, ["head.value_small_boards.weight"], small_board_value=True)


def _grown(model: TabulaNet, new_parameters: list[str], **spec_changes) -> TabulaNet:
    """``model`` rebuilt under its spec with ``spec_changes``: its weights, and ``new_parameters`` (those the
    changes add, which start at zero) as initialised, so that it computes what it computed until they train."""
    grown = TabulaNet(replace(model.spec, **spec_changes))
    missing, unexpected = grown.load_state_dict(model.state_dict(), strict=False)
    assert not unexpected and sorted(missing) == sorted(new_parameters), (missing, unexpected)
    return grown.eval()


# -- random networks ---------------------------------------------------------------------------------------------


def random_network(spec: NetSpec, seed: int, calibration: Sequence[np.ndarray] = ()) -> TabulaNet:
    """A network with random weights whose outputs are not degenerate, for tests and benchmarks.

    ``calibration``: batches of planes float32 [B, 18, N, N]. Batch-norm statistics are set from them, so that
    every layer sees unit-scale activations; then the policy logits are scaled to a spread of about 3 and the
    value to about 0.5 before tanh, so that policies are peaked and values differ between positions.
    Batch-norm scales and shifts are random too, so that exports exercise the general case.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = TabulaNet(spec)
        batch_norms = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
        with torch.no_grad():
            for bn in batch_norms:
                bn.weight.uniform_(0.7, 1.3)
                bn.bias.normal_(0.0, 0.1)
        if calibration:
            model.train()
            for bn in batch_norms:
                bn.reset_running_stats()
                bn.momentum = None  # cumulative average over the calibration batches
            with torch.no_grad():
                for planes in calibration:
                    model(torch.from_numpy(np.ascontiguousarray(planes)))
            for bn in batch_norms:
                bn.momentum = 0.1
        model.eval()
        if calibration:
            _scale_outputs(model, calibration)
    return model


def _scale_outputs(model: TabulaNet, calibration: Sequence[np.ndarray]) -> None:
    with torch.no_grad():
        policy = model(torch.from_numpy(np.ascontiguousarray(calibration[0])))[0]
        points = policy[:, :-1] if model.spec.encoding.has_pass else policy  # the pass logit left out
        spread = float(points.std(dim=1).mean())
        head = model.head
        last = head.policy_fc if isinstance(head, AgzHead) else head.policy_points
        if spread > 0:
            last.weight.mul_(3.0 / spread)
            last.bias.mul_(3.0 / spread)
        raw = []
        hook = head.value_fc2.register_forward_hook(lambda m, i, o: raw.append(o))
        model(torch.from_numpy(np.ascontiguousarray(calibration[0])))
        hook.remove()
        spread = float(raw[0].std())
        if spread > 0:
            head.value_fc2.weight.mul_(0.5 / spread)
            head.value_fc2.bias.mul_(0.5 / spread)


# -- ONNX ----------------------------------------------------------------------------------------------------------


def onnx_metadata(model: TabulaNet, board_sizes: Sequence[int], provenance: str,
                  precision: str = "fp32") -> dict[str, str]:
    """The metadata every Tabula ONNX file carries; ``OnnxEvaluator`` reads and checks it."""
    encoding = model.spec.encoding
    return {
        "tabula_format": METADATA_FORMAT_VERSION,
        "architecture": json.dumps(model.spec.to_dict(), sort_keys=True),
        "board_sizes": ",".join(str(s) for s in board_sizes),
        "input_encoding": encoding.name,
        # the planes by name, which the evaluator checks against the encoding it computes (one whose planes changed)
        **({"input_planes": ",".join(encoding.plane_names)} if encoding.plane_names else {}),
        "input": f"planes float32 [batch, {encoding.planes}, N, N], y = 0 the bottom row"
                 + (f"; plane {encoding.komi_plane}: the side to move's komi / {KOMI_SCALE:g}, white to move +, black -"
                    if encoding.komi_plane is not None else ""),
        "policy": ("logits float32 [batch, N*N+1], point y*N+x, pass last" if encoding.has_pass
                   else "logits float32 [batch, N*N], point y*N+x"),
        "value": "tanh float32 [batch], side to move's view, in [-1, 1]",
        **({"score": "float32 [batch], the final margin in points, side to move's view",
            "ownership": "tanh float32 [batch, N*N], +1 owned by the side to move at the end"}
           if model.spec.aux else {}),
        "precision": precision,
        "provenance": provenance,
    }


def default_board_sizes(spec: NetSpec) -> list[int]:
    """The sizes a network is declared to play: its own for the agz head; for the pooled head every size its game
    is played on (Go: 2 to 25, every size a GTP client can ask for; gomoku 5 to 20), since its convolutions and
    pooling apply to any board."""
    return [spec.board_size] if spec.head == AGZ else list(spec.encoding.board_sizes)


def export_onnx(model: TabulaNet, path: str | os.PathLike, provenance: str,
                board_sizes: Sequence[int] | None = None, check: bool = True) -> None:
    """Write ``model`` as ONNX (dynamic batch; dynamic height and width for the pooled head) with metadata.

    ``check``: run ``onnx.checker`` and compare onnxruntime's outputs with torch's on random planes.
    """
    import onnx

    path = os.fspath(path)
    model = model.eval()
    spec = model.spec
    sizes = list(board_sizes or default_board_sizes(spec))
    if spec.head == AGZ and sizes != [spec.board_size]:
        raise ValueError(f"an agz net plays only {spec.board_size}x{spec.board_size}")
    size = sizes[-1]
    dynamic = {0: "batch"} if spec.head == AGZ else {0: "batch", 2: "height", 3: "width"}
    example = torch.from_numpy(np.repeat(spec.encoding.trial_planes(size), 2, axis=0))  # empty boards
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # The TorchScript exporter is fast and, without constant folding, keeps parameter names (batch norms are
        # fused by onnxruntime at load time instead), which ``load_onnx`` relies on.
        names = list(OUTPUTS + (AUX_OUTPUTS if spec.aux else ()))
        axes = {"planes": dynamic, **{name: {0: "batch"} for name in names}}
        torch.onnx.export(model, (example,), path, input_names=["planes"], output_names=names, dynamic_axes=axes,
                          opset_version=17, do_constant_folding=False, dynamo=False)
    proto = onnx.load(path)
    set_metadata(proto, onnx_metadata(model, sizes, provenance))
    onnx.save(proto, path)
    if check:
        onnx.checker.check_model(path)
        # every size a pooled net declares runs the same graph: check the ends and the usual sizes
        for s in sorted({sizes[0], sizes[-1]} | ({9, 13, 19} & set(sizes))):
            compare_with_onnx(model, path, s)


def set_metadata(proto, metadata: dict[str, str]) -> None:
    del proto.metadata_props[:]
    for key, value in metadata.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value


def compare_with_onnx(model: TabulaNet, path: str, size: int, tolerance: float = 1e-4) -> float:
    """Run torch and onnxruntime on the same random planes; raise if they differ. Returns the largest difference,
    relative where an output is above 1 in size: random planes drive logits and scores (points) far past what real
    positions give, and there float32's rounding alone passes an absolute 1e-4."""
    import onnxruntime as ort

    rng = np.random.default_rng(size)
    encoding = model.spec.encoding
    planes = (rng.random((3, encoding.planes, size, size)) < 0.3).astype(np.float32)
    if encoding.size_planes is not None:  # as the encoding has them: one of the two planes all ones
        first, end = encoding.size_planes
        planes[:, first:end] = 0.0
        planes[:, first + rng.integers(0, end - first, 3)] = 1.0
    with torch.no_grad():
        expected = model(torch.from_numpy(planes))
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = list(OUTPUTS + (AUX_OUTPUTS if model.spec.aux else ()))
    actual = session.run(names, {"planes": planes})
    diff = max(float((np.abs(a - e.numpy()) / np.maximum(1.0, np.abs(e.numpy()))).max())
               for a, e in zip(actual, expected))
    if not diff <= tolerance:
        raise RuntimeError(f"{path}: onnxruntime and torch differ by {diff:g} on {size}x{size}")
    return diff


# Parameters of the heads that only training uses (the opponent's reply), which ONNX files do not hold.
TRAINING_ONLY = ("head.reply_",)


def with_movers_weights(weights: np.ndarray) -> np.ndarray:
    """A small-board value offset's weights (last axis) as ``OFFSET_WEIGHTS``: four, from a file calibrated before
    the mover's term, with the mover's two at zero; any other count as it is."""
    if weights.shape[-1] != 4:
        return weights
    return np.pad(weights, [(0, 0)] * (weights.ndim - 1) + [(0, OFFSET_WEIGHTS - 4)])


def load_onnx(path: str | os.PathLike, proto=None) -> TabulaNet:
    """Rebuild the torch network from a Tabula fp32 ONNX file (its metadata and named initialisers); the heads
    that only training uses (``TRAINING_ONLY``) keep their initial weights. ``proto``: the file already loaded."""
    path = os.fspath(path)
    metadata, tensors = read_fp32_onnx(path, "architecture", "Tabula architecture", proto)
    model = TabulaNet(NetSpec.from_dict(json.loads(metadata["architecture"])))
    state = model.state_dict()
    for name, value in state.items():
        if name.endswith("num_batches_tracked"):
            continue
        if name.startswith(TRAINING_ONLY) and name not in tensors:
            continue  # never exported: a network continued from its file learns this head afresh
        tensor = tensors.get(name)
        if name == OFFSET_PARAMETER and tensor is not None:
            tensor = with_movers_weights(tensor)
        if tensor is None or tensor.shape != tuple(value.shape):
            raise NetworkFileError(path, f"parameter {name} missing or of the wrong shape")
        state[name] = torch.from_numpy(np.array(tensor))
    model.load_state_dict(state)
    return model.eval()


def load_network(path: str | os.PathLike, averaged: bool = True) -> TabulaNet:
    """A Tabula network from an fp32 ONNX file (``load_onnx``) or a checkpoint (``load_checkpoint``, ``averaged``
    as there), told apart by the name's ``.onnx``."""
    if os.fspath(path).endswith(".onnx"):
        return load_onnx(path)
    return load_checkpoint(path, averaged=averaged)


# -- Leela Zero weights ---------------------------------------------------------------------------------------------


def _from_conv_layer(target: ConvBN, layer: ConvLayer) -> None:
    # Leela Zero: (conv + bias - mean) / sqrt(var + eps), no BN scale or shift.
    with torch.no_grad():
        target.conv.weight.copy_(torch.from_numpy(layer.weights))
        target.bn.running_mean.copy_(torch.from_numpy(layer.means - layer.biases))
        target.bn.running_var.copy_(torch.from_numpy(layer.variances))
        target.bn.weight.fill_(1.0)
        target.bn.bias.fill_(0.0)


def _to_conv_layer(source: ConvBN) -> ConvLayer:
    weights = source.conv.weight.detach().numpy().astype(np.float32)
    bn = source.bn
    mean = bn.running_mean.detach().numpy().astype(np.float32)
    var = bn.running_var.detach().numpy().astype(np.float32)
    scale = bn.weight.detach().numpy().astype(np.float32)
    shift = bn.bias.detach().numpy().astype(np.float32)
    std = np.sqrt(var + np.float32(BN_EPSILON))
    if np.all(scale == 1.0):
        # gamma = 1: the shift becomes a conv bias, since (conv - mean) / std + shift = (conv + shift*std - mean) / std.
        return ConvLayer(weights, (shift * std).astype(np.float32), mean, var)
    # General case: fold the scale into the weights and leave a unit batch norm (variance 1 - eps, mean 0).
    factor = scale / std
    return ConvLayer((weights * factor[:, None, None, None]).astype(np.float32),
                     (shift - mean * factor).astype(np.float32), np.zeros_like(mean),
                     np.full_like(var, 1.0 - BN_EPSILON))


def from_leelaz(weights: LeelazWeights) -> TabulaNet:
    """The torch network computing exactly what Leela Zero computes with ``weights``."""
    perspective = BLACK_VIEW if weights.version == VERSION_BLACK else SIDE_TO_MOVE
    spec = NetSpec(blocks=weights.blocks, filters=weights.filters, head=AGZ, board_size=weights.board_size,
                   value_hidden=weights.value_hidden, value_perspective=perspective)
    model = TabulaNet(spec)
    _from_conv_layer(model.input, weights.input)
    for i, block in enumerate(model.tower):
        _from_conv_layer(block.first, weights.residual[2 * i])
        _from_conv_layer(block.second, weights.residual[2 * i + 1])
    head = model.head
    _from_conv_layer(head.policy_conv, weights.policy)
    _from_conv_layer(head.value_conv, weights.value)
    with torch.no_grad():
        for layer, w, b in ((head.policy_fc, weights.policy_fc_weights, weights.policy_fc_biases),
                            (head.value_fc1, weights.value_fc1_weights, weights.value_fc1_biases),
                            (head.value_fc2, weights.value_fc2_weights, weights.value_fc2_biases)):
            layer.weight.copy_(torch.from_numpy(w))
            layer.bias.copy_(torch.from_numpy(b))
    return model.eval()


def to_leelaz(model: TabulaNet) -> LeelazWeights:
    """Leela Zero weights computing what ``model`` computes (agz head only)."""
    spec = model.spec
    if spec.head != AGZ or spec.input_encoding != INPUT_ENCODING:
        raise ValueError("only Go networks with the agz head have a Leela Zero equivalent")
    head = model.head

    def array(t: torch.Tensor) -> np.ndarray:
        return t.detach().numpy().astype(np.float32)

    residual = []
    for block in model.tower:
        residual += [_to_conv_layer(block.first), _to_conv_layer(block.second)]
    return LeelazWeights(
        input=_to_conv_layer(model.input), residual=residual, policy=_to_conv_layer(head.policy_conv),
        policy_fc_weights=array(head.policy_fc.weight), policy_fc_biases=array(head.policy_fc.bias),
        value=_to_conv_layer(head.value_conv),
        value_fc1_weights=array(head.value_fc1.weight), value_fc1_biases=array(head.value_fc1.bias),
        value_fc2_weights=array(head.value_fc2.weight), value_fc2_biases=array(head.value_fc2.bias),
        version=VERSION_BLACK if spec.value_perspective == BLACK_VIEW else VERSION_STM)


__all__ = ["NetSpec", "TabulaNet", "AGZ", "POOLED", "SIDE_TO_MOVE", "BLACK_VIEW", "save_checkpoint",
           "load_checkpoint", "with_komi_input", "with_small_board_komi", "with_small_board_komi_parity",
           "with_small_board_score_komi", "with_small_board_value_offset", "SMALL_BOARD_KOMI_FLAGS", "OFFSET_WEIGHTS",
           "OFFSET_PARAMETER", "with_movers_weights",
           "with_small_board_value", "komi_parity_wave", "random_network", "export_onnx",
           "load_onnx", "load_network", "onnx_metadata", "compare_with_onnx", "from_leelaz", "to_leelaz",
           "default_board_sizes", "set_metadata"]
