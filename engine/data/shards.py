"""Compact training shards of game records, and the torch-free sampler that turns them into network inputs.

Layer: above records and features; numpy only. A shard holds moves, not planes: two bytes a move plus ~30 bytes a game,
lzma-compressed, so 100k games take about 20 MiB. A training position is rebuilt when it is drawn, by replaying its game
through ``GameState`` up to that move and encoding it with ``engine.net.features``; nothing heavy is cached.

File format (version 2), all little-endian:
    b"TABSHARD" | uint32 header length | JSON header | lzma(games array) | lzma(moves array) | lzma(owners array)
The header names the board size, the counts, each blob's compressed length and the games array's dtype. No pickle:
arrays are rebuilt with ``np.frombuffer`` from a dtype that this module fixes. Version 2 adds each game's counted
margin and the final ownership of the points (int8 [K, N*N], one row per game that has it); version 1 files are
read as version 2 files without either.
"""
from __future__ import annotations

import json
import lzma
import os
import struct
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from tabula.engine.data.records import Record
from tabula.engine.net.encodings import encoding_of
from tabula.engine.net.features import NUM_SYMMETRIES, komi_points, symmetry_tables, transform_planes
from tabula.engine.rules.coords import BLACK, PASS, WHITE
from tabula.engine.rules.games import GameSpec
from tabula.engine.rules.interface import Game

MAGIC = b"TABSHARD"
VERSION = 2
SUFFIX = ".tshard"

# One row per game. ``offset`` indexes the shard's moves array; the game's setup stones come first there.
GAME_DTYPE = np.dtype([
    ("offset", "<i8"),
    ("setup", "<u2"),  # setup stones (handicap, AB/AW) before the moves
    ("moves", "<u2"),  # moves played, passes included
    ("komi", "<f4"),
    ("winner", "i1"),  # 1 black, 2 white, 0 draw or unknown
    ("kind", "u1"),  # records.RESULT_KIND_NAMES index
    ("handicap", "u1"),
    ("value_weight", "u1"),  # 1: the result is a value target; 0: policy only (time, forfeit, handicap)
    ("key", "<u8"),  # first 8 bytes of Record.key(), for tracing and deduplication across shards
    ("margin", "<f4"),  # black's counted margin in points (NaN: not decided by counting)
    ("owner_row", "<i4"),  # row of the final ownership in the shard's owners array (-1: none)
])
GAME_DTYPE_V1 = np.dtype([(name, GAME_DTYPE.fields[name][0]) for name in GAME_DTYPE.names[:9]])

# A move is uint16: bits 0-9 the policy index (pass = N*N), bit 14 white, bit 15 a setup stone.
INDEX_MASK = 0x3FF
WHITE_BIT = 0x4000
SETUP_BIT = 0x8000


class ShardError(ValueError):
    """A file that is not a shard this version can read."""


def encode_move(color: int, move: int, size: int, setup: bool = False) -> int:
    index = size * size if move == PASS else move
    return index | (WHITE_BIT if color == WHITE else 0) | (SETUP_BIT if setup else 0)


def decode_move(code: int, size: int) -> tuple[int, int]:
    """uint16 → (colour, flat move or PASS)."""
    index = code & INDEX_MASK
    return (WHITE if code & WHITE_BIT else BLACK), (PASS if index == size * size else index)


def records_to_arrays(records: Sequence[Record], size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(games GAME_DTYPE [G], moves uint16 [M], owners int8 [K, N*N]) for records of one board size."""
    games = np.zeros(len(records), dtype=GAME_DTYPE)
    codes: list[int] = []
    owners: list[np.ndarray] = []
    for i, record in enumerate(records):
        if record.size != size:
            raise ValueError(f"a {record.size}x{record.size} record in a {size}x{size} shard")
        owner_row = -1
        if record.ownership is not None:
            owner_row = len(owners)
            owners.append(np.asarray(record.ownership, dtype=np.int8).reshape(size * size))
        games[i] = (len(codes), len(record.setup), len(record.moves), record.komi, record.winner, record.result_kind,
                    min(record.handicap, 255), 1 if record.value_weight > 0 else 0,
                    int.from_bytes(record.key()[:8], "little"), record.margin, owner_row)
        codes.extend(encode_move(color, point, size, setup=True) for color, point in record.setup)
        codes.extend(encode_move(color, move, size) for color, move in record.moves)
    owner_array = np.stack(owners) if owners else np.zeros((0, size * size), dtype=np.int8)
    return games, np.asarray(codes, dtype=np.uint16), owner_array


def write_shard(path: str, records: Sequence[Record], size: int = 19, extra: dict | None = None) -> int:
    """Write records as one shard atomically (temporary file, fsync, rename); returns the file's bytes."""
    games, moves, owners = records_to_arrays(records, size)
    games_blob = lzma.compress(games.tobytes(), preset=6)
    moves_blob = lzma.compress(moves.tobytes(), preset=6)
    owners_blob = lzma.compress(owners.tobytes(), preset=6)
    header = {"version": VERSION, "size": size, "games": len(games), "moves": int(len(moves)),
              "owners": len(owners), "games_bytes": len(games_blob), "moves_bytes": len(moves_blob),
              "owners_bytes": len(owners_blob),
              "game_dtype": [list(item) for item in GAME_DTYPE.descr], **(extra or {})}
    header_bytes = json.dumps(header, sort_keys=True).encode()
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as handle:
        handle.write(MAGIC + struct.pack("<I", len(header_bytes)) + header_bytes)
        handle.write(games_blob)
        handle.write(moves_blob)
        handle.write(owners_blob)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    return os.path.getsize(path)


def read_shard(path: str, with_owners: bool = False) -> tuple:
    """(header, games GAME_DTYPE [G], moves uint16 [M]), and owners int8 [K, N*N] with ``with_owners``; raises
    ShardError on anything unexpected. A version 1 file reads as one without margins or owners."""
    with open(path, "rb") as handle:
        data = handle.read()
    if data[:8] != MAGIC:
        raise ShardError(f"{path}: not a Tabula shard")
    try:
        (length,) = struct.unpack_from("<I", data, 8)
        header = json.loads(data[12: 12 + length])
        version = header.get("version")
        if version not in (1, VERSION):
            raise ShardError(f"{path}: shard version {version}, this reader knows 1 and {VERSION}")
        layout = GAME_DTYPE if version == VERSION else GAME_DTYPE_V1
        if [tuple(item) for item in header["game_dtype"]] != [tuple(item) for item in layout.descr]:
            raise ShardError(f"{path}: unexpected game layout")
        start = 12 + length
        games_end = start + header["games_bytes"]
        games = np.frombuffer(lzma.decompress(data[start:games_end]), dtype=layout)
        moves_end = games_end + header["moves_bytes"]
        moves = np.frombuffer(lzma.decompress(data[games_end:moves_end]), dtype=np.uint16)
        points = header["size"] ** 2
        if version == VERSION and len(data) != moves_end + header["owners_bytes"]:
            raise ShardError(f"{path}: the file is {len(data)} bytes, "
                             f"its header says {moves_end + header['owners_bytes']}")
        owners = np.zeros((0, points), dtype=np.int8)
        if version == VERSION and with_owners:
            owners = np.frombuffer(lzma.decompress(data[moves_end: moves_end + header["owners_bytes"]]),
                                   dtype=np.int8).reshape(-1, points)
    except (KeyError, ValueError, TypeError, struct.error, lzma.LZMAError) as error:
        raise ShardError(f"{path}: {error}") from None
    if len(games) != header["games"] or len(moves) != header["moves"]:
        raise ShardError(f"{path}: counts do not match the header")
    if version == 1:
        upgraded = np.zeros(len(games), dtype=GAME_DTYPE)
        for name in GAME_DTYPE_V1.names:
            upgraded[name] = games[name]
        upgraded["margin"] = np.nan
        upgraded["owner_row"] = -1
        games = upgraded
    elif with_owners and (len(owners) != header["owners"] or games["owner_row"].max(initial=-1) >= len(owners)):
        raise ShardError(f"{path}: ownership rows do not match the header")
    return (header, games, moves, owners) if with_owners else (header, games, moves)


def shard_paths(directory: str, split: str) -> list[str]:
    """The shards of one split (``train`` or ``val``) in a prepared directory, in name order."""
    return sorted(os.path.join(directory, name) for name in os.listdir(directory)
                  if name.startswith(split + "-") and name.endswith(SUFFIX))


@dataclass
class Batch:
    """Training examples, already under their random symmetries.

    planes float32 [B, 18, N, N]; policy int64 [B] (index of the move played, pass = N*N); value float32 [B] (the
    game's result from the side to move's view: 1 win, -1 loss, 0 draw); value_weight float32 [B] (0 where the
    result is no value target).

    The auxiliary targets (None from samplers that have none, which weighs them 0): ``reply`` int64 [B], the
    opponent's answer to the move played (KataGo's auxiliary policy; weight 0 after the game's last move);
    ``score`` float32 [B], the counted margin from the side to move's view; ``ownership`` int8 [B, N*N], the final
    owner of each point from the side to move's view (+1 its own), under the same symmetry as the planes.

    ``komi`` float32 [B]: the game's komi from the side to move's view in points (``features.komi_points``: white's
    counted komi, negated for black to move; None for a game without komi), which a network that sees the komi
    reads as a plane added to ``planes`` (``features.with_komi_plane``), so that samplers and stored validation
    planes stay those of the game's own encoding.
    """

    planes: np.ndarray
    policy: np.ndarray
    value: np.ndarray
    value_weight: np.ndarray
    reply: np.ndarray | None = None
    reply_weight: np.ndarray | None = None
    score: np.ndarray | None = None
    score_weight: np.ndarray | None = None
    ownership: np.ndarray | None = None
    ownership_weight: np.ndarray | None = None
    komi: np.ndarray | None = None


class PositionSampler:
    """Every position of the games in some shards, drawn uniformly; torch-free, so it runs in any worker process.

    A position is (game, k): the board before the game's k-th move, whose target is that move. Memory is the
    shards' arrays (2 bytes a move) plus one int64 per game. The shards are of one game (their header's ``game``,
    engine.rules.games.GameSpec; Go where it names none), whose positions and input planes they become.
    """

    def __init__(self, paths: Iterable[str], komi_spread: float = 0.0, moved_value: bool = True):
        if not (komi_spread >= 0.0 and np.isfinite(komi_spread)):
            raise ValueError(f"komi_spread must be a finite number of points, at least 0, not {komi_spread!r}")
        # Records are played at one or two komis, too few for a network that sees the komi to learn what a point of
        # komi is worth; a game whose counted margin is known is as good a game at any other komi, its result the
        # margin's sign there (``_moved_komi``).
        self.komi_spread = float(komi_spread)
        # False: a position at a moved komi trains the score alone (its value weight 0). Why: between players who
        # play to win the margin follows the komi, so the moved game's result overstates what a point is worth,
        # while its moved margin is exactly the lead the score should learn (docs/TRAINING.md, stage 5).
        self.moved_value = bool(moved_value)
        games_list, moves_list, owners_list, size, game = [], [], [], None, None
        base = owner_base = 0
        for path in paths:
            header, games, moves, owners = read_shard(path, with_owners=True)
            if size is None:
                size = header["size"]
                game = GameSpec.from_dict(header.get("game"))
            elif header["size"] != size:
                raise ShardError(f"{path}: board size {header['size']}, other shards {size}")
            elif GameSpec.from_dict(header.get("game")) != game:
                raise ShardError(f"{path}: a game of {header.get('game')}, other shards {game}")
            games = games.copy()
            games["offset"] += base
            games["owner_row"] = np.where(games["owner_row"] >= 0, games["owner_row"] + owner_base, -1)
            base += len(moves)
            owner_base += len(owners)
            games_list.append(games)
            moves_list.append(moves)
            owners_list.append(owners)
        if size is None:
            raise ShardError("no shards given")
        self.size: int = size
        self.game: GameSpec = game
        self.games = np.concatenate(games_list) if games_list else np.zeros(0, GAME_DTYPE)
        self.moves = np.concatenate(moves_list) if moves_list else np.zeros(0, np.uint16)
        self.owners = np.concatenate(owners_list) if owners_list else np.zeros((0, size * size), np.int8)
        # cumulative positions: game g owns positions [starts[g], starts[g + 1])
        self.starts = np.concatenate([[0], np.cumsum(self.games["moves"].astype(np.int64))])
        if self.num_positions == 0:
            raise ShardError("the shards hold no positions")

    @property
    def num_games(self) -> int:
        return len(self.games)

    @property
    def num_positions(self) -> int:
        return int(self.starts[-1])

    def locate(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Global position numbers → (game index, move number k), both int64."""
        games = np.searchsorted(self.starts, positions, side="right") - 1
        return games, positions - self.starts[games]

    def state(self, game: int, k: int) -> tuple[Game, int, float, float]:
        """(position before move k, its target policy index, value target from the mover's view, value weight)."""
        row = self.games[game]
        size = self.size
        state = self.game.record_state(size, float(row["komi"]))
        offset, setup = int(row["offset"]), int(row["setup"])
        for code in self.moves[offset: offset + setup]:
            color, point = decode_move(int(code), size)
            state.place_setup(point, color)
        if setup and int(row["handicap"]):
            state.handicap = int(row["handicap"])  # the rules' handicap bonus, if any, is part of the komi seen
        begin = offset + setup
        for code in self.moves[begin: begin + k]:
            color, move = decode_move(int(code), size)
            state.play(move, color)
        color, move = decode_move(int(self.moves[begin + k]), size)
        state.to_move = color  # the player who actually moved next (records need not alternate)
        winner = int(row["winner"])
        value = 0.0 if winner == 0 else (1.0 if winner == color else -1.0)
        target = size * size if move == PASS else move
        return state, target, value, float(row["value_weight"])

    def batch(self, rng: np.random.Generator, batch_size: int, symmetries: bool = True,
              positions: np.ndarray | None = None) -> Batch:
        """``batch_size`` positions drawn uniformly (or the given global ``positions``), each under a random
        dihedral symmetry applied to planes and policy target alike."""
        if positions is None:
            positions = rng.integers(0, self.num_positions, size=batch_size)
        games, ks = self.locate(np.asarray(positions, dtype=np.int64))
        states, targets, values, weights = [], [], [], []
        for game, k in zip(games.tolist(), ks.tolist()):
            state, target, value, weight = self.state(game, k)
            states.append(state)
            targets.append(target)
            values.append(value)
            weights.append(weight)
        planes = encoding_of(states[0]).encode_batch(states, None)
        komi = np.asarray([komi_points(s) for s in states], dtype=np.float32) if self.game.scored else None
        policy = np.asarray(targets, dtype=np.int64)
        reply, reply_weight = self._replies(games, ks)
        # +1 where the mover is black: margins and owners are stored from black's view
        black = np.asarray([state.to_move == BLACK for state in states], dtype=np.float32) * 2.0 - 1.0
        rows = self.games["owner_row"][games]
        margin = self.games["margin"][games].astype(np.float32)
        score_weight = (np.isfinite(margin) & (self.games["value_weight"][games] > 0)).astype(np.float32)
        score = np.where(score_weight > 0, np.nan_to_num(margin) * black, 0.0).astype(np.float32)
        value = np.asarray(values, dtype=np.float32)
        value_weight = np.asarray(weights, dtype=np.float32)
        if self.komi_spread > 0 and komi is not None:
            value, score, komi, moved = self._moved_komi(rng, games, black, margin, score_weight, value, komi)
            if not self.moved_value:
                value_weight = np.where(moved != 0, 0.0, value_weight).astype(np.float32)
        ownership = np.zeros((len(states), self.size * self.size), dtype=np.int8)
        has_owners = rows >= 0
        ownership[has_owners] = self.owners[rows[has_owners]] * black[has_owners, None].astype(np.int8)
        if symmetries:
            chosen = rng.integers(0, NUM_SYMMETRIES, size=len(states))
            planes = transform_planes(planes, chosen)
            # transformed[j] = original[forward[s, j]], so the move at original index t moves to inverse[s, t]
            inverse = symmetry_tables(self.size)[1]
            policy = inverse[chosen, policy]
            reply = inverse[chosen, reply]
            ownership = transform_planes(ownership.reshape(len(states), 1, self.size, self.size),
                                         chosen).reshape(len(states), -1)
        return Batch(planes=np.ascontiguousarray(planes, dtype=np.float32), policy=policy,
                     value=value, value_weight=value_weight,
                     reply=reply, reply_weight=reply_weight, score=score, score_weight=score_weight,
                     ownership=np.ascontiguousarray(ownership), ownership_weight=has_owners.astype(np.float32),
                     komi=komi)

    def _moved_komi(self, rng: np.random.Generator, games: np.ndarray, black: np.ndarray, margin: np.ndarray,
                    score_weight: np.ndarray, value: np.ndarray, komi: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Each position's game replayed at another komi: white's komi moved by a normal draw of ``komi_spread``
        points (rounded to half points), the counted margin by as much the other way, and the value target the new
        margin's sign (0 where it is 0). Only counted games move (their margin is the result's; a resignation has
        none, and keeps its komi and result), and only where the margin agrees with the recorded winner (a draw
        with a margin of 0 included); ownership does not depend on komi.
        ``black``: +1 where black moves; ``margin``: black's view; ``value``, ``komi``: the mover's view. Returns
        the value, score and komi, and the points each position's komi moved (0: not moved)."""
        moved = np.round(rng.normal(0.0, self.komi_spread, size=len(games)) * 2.0) / 2.0
        winner = self.games["winner"][games]
        agrees = (((margin > 0) & (winner == BLACK)) | ((margin < 0) & (winner == WHITE))
                  | ((margin == 0) & (winner == 0)))
        moved = np.where((score_weight > 0) & agrees, moved, 0.0).astype(np.float32)
        margin = np.nan_to_num(margin) - moved
        mover_margin = margin * black
        value = np.where(moved != 0, np.sign(mover_margin), value).astype(np.float32)
        score = np.where(score_weight > 0, mover_margin, 0.0).astype(np.float32)
        return value, score, (komi - moved * black).astype(np.float32), moved

    def _replies(self, games: np.ndarray, ks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The policy index of the move after move k (int64 [B]; pass where there is none) and its weight."""
        after = ks + 1
        exists = after < self.games["moves"][games]
        codes = self.moves[self.games["offset"][games] + self.games["setup"][games] + np.where(exists, after, 0)]
        index = (codes & INDEX_MASK).astype(np.int64)
        index = np.where(exists, index, self.size * self.size)
        return index, exists.astype(np.float32)

    def batch_for_step(self, seed: int, step: int, batch_size: int, symmetries: bool = True) -> Batch:
        """The batch of training step ``step``: a pure function of (seed, step), so a resumed run sees the very
        batches an uninterrupted one would, in any worker process."""
        return self.batch(np.random.default_rng([seed, step]), batch_size, symmetries)


__all__ = ["Batch", "PositionSampler", "ShardError", "GAME_DTYPE", "SUFFIX", "write_shard", "read_shard",
           "shard_paths", "records_to_arrays", "encode_move", "decode_move"]
