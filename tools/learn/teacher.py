"""Teacher labels: positions judged by a stronger network, stored compactly for a student to learn from.

A teacher is any network Tabula plays (a KataGo model file or its ONNX conversion, a Tabula ONNX file), optionally
after a small search. For each position it gives the policy distribution (the network's, or the search's root
visits), the win/draw/loss (a network without a WDL head: from its value), the value, the score lead and the
ownership, all from the side to move's view.

Positions come from two sources, each a pure function of (seed, chunk) with a cursor that a checkpoint keeps:

- ``RecordPositions``: the games of SGF archives (``engine.data.records``), a few positions a game, with the game's
  result and counted margin where the record has them.
- ``SelfPlayPositions``: games played in lockstep by sampling a network's policy (the teacher's own by default, so
  that its evaluations label the positions at no extra cost), even and handicap (under each handicap bonus), at
  drawn komis, on the sizes asked for: the positions a player meets, with the game's Tromp-Taylor count where it
  ended by two passes.

Storage (``write_labels``, ``read_labels``): one compressed npz file per chunk and board size. The student's own
input planes, in the encoding the student reads (``leelaz-18+komi``, ``katago-v7`` or ``tabula-v2``), rather than
the game, so that training reads positions without replaying them: the planes that are 0 or 1 at each point
bit-packed, the constant ones (side to move, komi, rules: ``Encoding.constant_planes``) one float16 number each, in
twentieths (``CONSTANT_SCALE``: every komi of half points, and its KataGo global, exactly); the file names its
encoding and which planes are which. The policy as its 32 likeliest moves with uint8 probabilities; the ownership
as int8; the rest float16. Compressed, that is a few hundred bytes a position. Files of the first format (the 16
history planes, the side to move and the komi) still read, as ``leelaz-18+komi``.

Layer: a tool (numpy, onnxruntime through the evaluator, the search); no torch.
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field, fields
from typing import Callable, Iterator, Sequence

import numpy as np

from tabula.engine.net import features
from tabula.engine.net.encodings import Encoding, encoding_named
from tabula.engine.net.evaluator import Evaluation, OnnxEvaluator, katago_onnx
from tabula.engine.rules.coords import BLACK, PASS, WHITE
from tabula.engine.rules.game import BONUS_NONE, HANDICAP_BONUSES, SIMPLE_KO, GameState, Rules, handicap_points

POLICY_TOP = 32  # moves kept of each policy target
HISTORY_PLANES = 16  # leelaz-18's stone planes (the first label format's ``stones``)
NO_MOVE = 65535  # an unused slot of the stored policy
OWNERSHIP_LEVELS = 16  # ownership stored as int8 in sixteenths: within 1/32 of the teacher's, a third of the bytes
CONSTANT_SCALE = 20.0  # constant planes stored as float16 of value x 20: komi / 20 of any half-point komi exact
LABEL_FORMAT = 2  # the layout of a label file, written into it (1: leelaz-18+komi's planes only, still read)
STUDENT_ENCODINGS = (features.KOMI_INPUT_ENCODING, "katago-v7", "tabula-v2")
DEFAULT_STUDENT_ENCODING = "tabula-v2"  # the next architecture's inputs (leelaz-18+komi: the student before it)
SOURCES = ("records", "selfplay", "focus")
LABEL_FIELDS = ("planes_bits", "planes_constant", "komi", "policy_moves", "policy_probs", "value", "wdl", "score",
                "score_mean", "score_stdev", "ownership", "outcome", "outcome_weight", "margin", "source", "visits")


class LabelError(ValueError):
    """A label file that cannot be read, or a teacher that cannot label."""


class LabelEncodingError(LabelError):
    """A label file of another student encoding than the one asked for."""


@dataclass
class Position:
    """A position to label, and what its game says about it (side to move's view)."""

    state: GameState
    outcome: float = 0.0  # +1 won, -1 lost, 0 drawn or unknown
    outcome_weight: float = 0.0  # 1 where the game's result is known and meaningful
    margin: float = math.nan  # the final margin in points where the game was counted
    source: int = 0  # index into SOURCES


# -- the teacher ----------------------------------------------------------------------------------------------------


class Teacher:
    """Labels positions with a network's judgement, or with a small search's over it.

    Args:
        path: a KataGo model file (converted to ONNX on first use, ``katago_onnx``) or an ONNX file.
        visits: 0 labels with the network alone (batched); N > 0 runs an N-visit search from each position and
            labels with its root: the visit distribution as the policy, its mean value and score, its ownership.
        provider, threads, batch: where and how the network runs (``OnnxEvaluator``); ``batch`` is the largest
            network call (a GPU takes thousands).
        symmetry: ``identity`` (cheapest, reproducible), ``random`` or ``average`` (8 times the work).
        search_parallel: searches run at once, their network calls merged into batches (``BatchingEvaluator``):
            a GPU's way to label with a search; 1 searches one position after another.
        student_encoding: the input encoding whose planes the labels store (``STUDENT_ENCODINGS``).
    """

    def __init__(self, path: str, visits: int = 0, provider: str = "cpu", threads: int = 0, batch: int = 256,
                 symmetry: str = "identity", seed: int = 0, log: Callable[[str], None] | None = None,
                 search_parallel: int = 1, student_encoding: str = DEFAULT_STUDENT_ENCODING):
        self.student = student_encoding_named(student_encoding)
        if visits < 0:
            raise LabelError("visits must be at least 0")
        if batch < 1:
            raise LabelError("the label batch must be at least 1")
        self.path = path
        self.visits = visits
        self.search_parallel = max(1, search_parallel)
        self.batch = batch
        onnx_path = katago_onnx(path, log)
        self.evaluator = OnnxEvaluator(onnx_path, symmetry=symmetry, rng=np.random.default_rng(seed),
                                       threads=threads, provider=provider, log=log,
                                       max_batch=max(batch, 8), batch_hint=batch)
        self.board_sizes = self.evaluator.board_sizes
        self.has_ownership = bool(getattr(self.evaluator, "has_score_and_ownership", False))
        self._seed = seed
        # The student's planes begin with the teacher's (a KataGo teacher, a tabula-v2 student): encoded once, for
        # both, where the teacher sees the positions as they are
        teacher_encoding = self.evaluator.encoding.name
        self.shares_planes = symmetry == "identity" and teacher_encoding in (self.student.name, self.student.extends)

    def describe(self) -> str:
        return f"{os.path.basename(self.path)} ({self.evaluator.describe()} on {self.evaluator.provider})" + (
            f", {self.visits} visits" if self.visits else ", no search")

    def evaluate(self, states: Sequence[GameState]) -> Evaluation:
        """The network's raw judgement of positions of one size, in calls of at most ``batch``."""
        parts = [self.evaluator.evaluate(states[i:i + self.batch]) for i in range(0, len(states), self.batch)]
        return parts[0] if len(parts) == 1 else join_evaluations(parts)

    def label(self, positions: Sequence[Position], evaluation: Evaluation | None = None) -> dict[str, np.ndarray]:
        """The label arrays (``LABEL_FIELDS``) of positions of one board size. ``evaluation``: the network's
        judgement of them where the caller has it already (self-play), used when there is no search."""
        if not positions:
            raise LabelError("no positions to label")
        states = [p.state for p in positions]
        size = states[0].size
        if any(s.size != size for s in states):
            raise LabelError("a label batch holds one board size")
        planes = None
        if self.visits == 0:
            if evaluation is None and self.shares_planes:
                planes = self.student.encode_batch(states, None)
                raw = self._evaluate_encoded(states, planes)
            else:
                raw = evaluation if evaluation is not None else self.evaluate(states)
            policy, value, score, ownership = raw.policy, raw.value, raw.score, raw.ownership
            wdl = raw.wdl if raw.wdl is not None else _wdl_of(raw.value)
            score_mean = raw.score_mean if raw.score_mean is not None else score
            score_stdev = raw.score_stdev
        else:
            policy, value, score, ownership, wdl, score_mean, score_stdev = self._searched(states)
        count = len(states)
        points = size * size
        if score is None:
            score = np.full(count, np.nan, np.float32)
        if score_mean is None:
            score_mean = score
        if score_stdev is None:
            score_stdev = np.full(count, np.nan, np.float32)
        if ownership is None:
            ownership = np.zeros((count, points), np.float32)
        labels = {**encode_positions(states, self.student.name, planes), **sparse_policy(policy)}
        labels.update({
            "value": np.asarray(value, np.float16),
            "wdl": quantize_unit(np.asarray(wdl, np.float32)),
            "score": np.asarray(score, np.float16),
            "score_mean": np.asarray(score_mean, np.float16),
            "score_stdev": np.asarray(score_stdev, np.float16),
            "ownership": np.round(np.clip(np.asarray(ownership, np.float32), -1, 1) * OWNERSHIP_LEVELS
                                  ).astype(np.int8),
            "outcome": np.array([p.outcome for p in positions], np.int8),
            "outcome_weight": np.array([p.outcome_weight for p in positions], np.uint8),
            "margin": np.array([p.margin for p in positions], np.float16),
            "source": np.array([p.source for p in positions], np.uint8),
            "visits": np.full(count, self.visits, np.uint16),
        })
        if not self.has_ownership:
            labels["ownership_known"] = np.zeros(count, np.uint8)
        return labels

    def _evaluate_encoded(self, states: Sequence[GameState], planes: np.ndarray) -> Evaluation:
        """``evaluate`` of positions whose student planes are ``planes``, the teacher's planes their first."""
        width = self.evaluator.encoding.planes
        parts = [self.evaluator.evaluate_encoded(states[i:i + self.batch], planes[i:i + self.batch, :width])
                 for i in range(0, len(states), self.batch)]
        return parts[0] if len(parts) == 1 else join_evaluations(parts)

    def _searched(self, states: Sequence[GameState]):
        """(policy, value, score, ownership, wdl, score mean, score stdev) of an N-visit search from each state:
        the root's visit shares, mean value and score, the tree's ownership (side to move's view); the draw share
        of the WDL is the network's, the rest split so that win - loss is the searched value."""
        from tabula.engine.config import BATCHED_PLAYOUTS_PER_LEAF, SearchConfig
        from tabula.engine.play.search import Search

        # Batches of up to 8 (the batched rule), not the engine's one leaf a thread: labelling is bound by the
        # network's speed, and one thread of one leaf a call would leave most of it unused.
        config = SearchConfig(visits=self.visits, threads=1, batch_size=8, batches_in_flight=1, reuse_tree=False,
                              early_stop=False, root_symmetries=False,
                              playouts_per_leaf=BATCHED_PLAYOUTS_PER_LEAF)
        raw = self.evaluate(states)
        count, width = raw.policy.shape
        policy = np.zeros((count, width), np.float32)
        value = np.zeros(count, np.float32)
        score = np.zeros(count, np.float32)
        stdev = np.zeros(count, np.float32)
        ownership = None if raw.ownership is None else np.zeros_like(raw.ownership)
        evaluator = self.evaluator
        if self.search_parallel > 1:
            from tabula.engine.net.batching import BatchingEvaluator

            evaluator = BatchingEvaluator(self.evaluator, max_batch=self.batch)

        def searched(i: int):
            search = Search(evaluator, config, rng=np.random.default_rng([self._seed, i]))
            return search, search.run(states[i], visits=self.visits)

        if self.search_parallel > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=self.search_parallel) as pool:
                runs = list(pool.map(searched, range(count)))
            evaluator.close()
        else:
            runs = [searched(i) for i in range(count)]
        for i, (state, (search, result)) in enumerate(zip(states, runs)):
            for candidate in result.candidates:
                policy[i, width - 1 if candidate.move == PASS else candidate.move] = candidate.visits
            total = policy[i].sum()
            policy[i] = policy[i] / total if total > 0 else raw.policy[i]
            stats = search.root_stats()
            value[i], score[i], stdev[i] = stats.value, stats.score, stats.score_stdev
            if ownership is not None:
                owned = search.ownership()
                if owned is not None:
                    ownership[i] = owned if state.to_move == BLACK else -owned
        draw = raw.wdl[:, 2] if raw.wdl is not None else np.zeros(count, np.float32)
        decided = 1.0 - draw
        win = np.clip((decided + value) / 2.0, 0.0, 1.0)
        wdl = np.stack([win, np.clip(decided - win, 0.0, 1.0), draw], axis=1)
        score_out = score if raw.score is not None else None
        return policy, value, score_out, ownership, wdl, score_out, stdev if raw.score is not None else None


def _wdl_of(value: np.ndarray) -> np.ndarray:
    """A WDL for a network that gives only a value: no draws."""
    value = np.clip(np.asarray(value, np.float32), -1.0, 1.0)
    return np.stack([(1.0 + value) / 2.0, (1.0 - value) / 2.0, np.zeros_like(value)], axis=1)


# -- encoding and storage -------------------------------------------------------------------------------------------


def student_encoding_named(name: str) -> Encoding:
    """The student encoding ``name`` (one of ``STUDENT_ENCODINGS``); LabelError naming them otherwise, or saying why
    a known one cannot be used here."""
    if name not in STUDENT_ENCODINGS:
        raise LabelError(f"unknown student encoding {name!r} (known: {', '.join(STUDENT_ENCODINGS)})")
    try:
        return encoding_named(name)
    except ValueError as error:
        raise LabelError(str(error)) from None


def plane_layout(encoding: Encoding) -> tuple[list[int], list[int]]:
    """(the planes stored bit-packed, the constant planes stored as numbers) of ``encoding``."""
    constant = list(encoding.constant_planes)
    return [p for p in range(encoding.planes) if p not in constant], constant


def encode_positions(states: Sequence[GameState], encoding: str = DEFAULT_STUDENT_ENCODING,
                     planes: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The student's input of each position under ``encoding``, compactly: ``planes_bits`` uint8 [B, S, ⌈N·N/8⌉]
    (the 0/1 planes, each bit-packed from a byte boundary, so that compression finds the history's repeated boards),
    ``planes_constant`` float16 [B, G] (each constant plane's value x ``CONSTANT_SCALE``), ``komi`` float16 [B] (the
    side to move's komi in points). ``planes``: the positions' planes where the caller has them already."""
    student = encoding_named(encoding)
    if planes is None:
        planes = student.encode_batch(states, None)
    count = len(states)
    spatial, constant = plane_layout(student)
    bits = planes[:, spatial]
    if not np.all((bits == 0.0) | (bits == 1.0)):
        raise LabelError(f"{student.name}: a plane it does not declare constant holds values other than 0 and 1")
    values = planes[:, constant]
    if values.size and not np.all(values == values[:, :, :1, :1]):
        raise LabelError(f"{student.name}: a plane it declares constant varies over the board")
    return {"planes_bits": np.packbits(bits.astype(np.uint8).reshape(count, len(spatial), -1), axis=-1),
            "planes_constant": (values[:, :, 0, 0] * np.float32(CONSTANT_SCALE)).astype(np.float16),
            "komi": np.array([features.komi_points(s) for s in states], np.float16)}


def decode_planes(labels: dict[str, np.ndarray], size: int, rows: np.ndarray | slice = slice(None),
                  encoding: str = DEFAULT_STUDENT_ENCODING) -> np.ndarray:
    """float32 [B, C, N, N]: ``encoding``'s planes of the stored positions ``rows`` (of a file of that encoding)."""
    student = encoding_named(encoding)
    spatial, constant = plane_layout(student)
    packed = labels["planes_bits"][rows]
    count = len(packed)
    planes = np.empty((count, student.planes, size, size), np.float32)
    planes[:, spatial] = np.unpackbits(packed, axis=-1, count=size * size).reshape(count, len(spatial), size, size)
    values = labels["planes_constant"][rows].astype(np.float32) / np.float32(CONSTANT_SCALE)
    planes[:, constant] = values[:, :, None, None]
    return planes


def sparse_policy(policy: np.ndarray, top: int = POLICY_TOP) -> dict[str, np.ndarray]:
    """A policy [B, L] as its ``top`` likeliest moves (``policy_moves`` uint16, NO_MOVE where unused) and their
    probabilities (``policy_probs`` uint8, in 255ths of the row's mass kept)."""
    policy = np.asarray(policy, np.float32)
    count, width = policy.shape
    top = min(top, width)
    order = np.argsort(-policy, axis=1, kind="stable")[:, :top]
    probs = np.take_along_axis(policy, order, axis=1)
    kept = probs.sum(axis=1, keepdims=True)
    shares = np.where(kept > 0, probs / np.maximum(kept, 1e-12), 0.0)
    quantized = np.round(shares * 255.0).astype(np.uint8)
    moves = np.where(quantized > 0, order, NO_MOVE).astype(np.uint16)
    return {"policy_moves": moves, "policy_probs": quantized}


def dense_policy(labels: dict[str, np.ndarray], width: int, rows: np.ndarray | slice = slice(None)) -> np.ndarray:
    """float32 [B, width]: the stored policies of ``rows``, each summing to 1."""
    moves = labels["policy_moves"][rows].astype(np.int64)
    probs = labels["policy_probs"][rows].astype(np.float32)
    count = len(moves)
    policy = np.zeros((count, width + 1), np.float32)  # the last column takes the unused slots
    np.add.at(policy, (np.arange(count)[:, None], np.where(moves == NO_MOVE, width, moves)), probs)
    policy = policy[:, :width]
    total = policy.sum(axis=1, keepdims=True)
    return np.where(total > 0, policy / np.maximum(total, 1e-12), 1.0 / width).astype(np.float32)


def quantize_unit(x: np.ndarray) -> np.ndarray:
    """Values in [0, 1] as uint8 255ths."""
    return np.round(np.clip(x, 0.0, 1.0) * 255.0).astype(np.uint8)


# a label file's entries that describe the file, not its positions
FILE_ENTRIES = ("size", "format", "teacher", "layout")


def write_labels(path: str, size: int, labels: dict[str, np.ndarray], teacher: str = "",
                 encoding: str = DEFAULT_STUDENT_ENCODING) -> int:
    """Write one label file (atomically: a kill leaves the old file or none) of positions whose planes are
    ``encoding``'s; returns its bytes."""
    counts = {len(v) for v in labels.values()}
    if len(counts) != 1:
        raise LabelError("label arrays of different lengths")
    student = encoding_named(encoding)
    spatial, constant = plane_layout(student)
    # one entry (each costs a zip and an npy header): the encoding, which stored planes are which of its planes, and
    # their names (an encoding whose planes changed since is refused, not misread)
    layout = json.dumps({"encoding": encoding, "bits": spatial, "constant": constant,
                         "names": list(student.plane_names)}, separators=(",", ":"))
    tmp = f"{path}.tmp{os.getpid()}.npz"
    np.savez_compressed(tmp, size=np.array(size, np.int16), format=np.array(LABEL_FORMAT, np.int16),
                        teacher=np.array(teacher), layout=np.array(layout), **labels)
    os.replace(tmp, path)
    return os.path.getsize(path)


def read_labels(path: str, encoding: str | None = None) -> tuple[int, dict[str, np.ndarray]]:
    """(board size, label arrays) of a file of ``write_labels``; LabelError for a file that is not one, and
    LabelEncodingError for one whose planes are not ``encoding``'s (None: any encoding's)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            size = int(data["size"])
            layout = int(data["format"]) if "format" in data.files else 0
            layout_entry = json.loads(str(data["layout"])) if "layout" in data.files else {}
            stored = str(layout_entry.get("encoding", features.KOMI_INPUT_ENCODING))
            planes = [layout_entry.get("bits"), layout_entry.get("constant"), layout_entry.get("names")]
            labels = {name: data[name] for name in data.files if name not in FILE_ENTRIES}
    except (OSError, ValueError, KeyError, EOFError, AttributeError) as error:
        raise LabelError(f"{path}: not a label file ({error})") from None
    if layout == 1:
        labels = _first_format(labels)
    elif layout != LABEL_FORMAT:
        raise LabelError(f"{path}: label format {layout}, not {LABEL_FORMAT}: label it again")
    missing = [name for name in LABEL_FIELDS if name not in labels]
    if missing or not 2 <= size <= 25:
        raise LabelError(f"{path}: not a label file (missing {', '.join(missing) or 'a board size'})")
    if encoding is not None and stored != encoding:
        raise LabelEncodingError(f"{path}: labels of the {stored} encoding, and this student reads {encoding}: "
                                 "use another run directory, or move the file out of it")
    if layout == LABEL_FORMAT:
        try:
            known = encoding_named(stored)
        except ValueError as error:
            raise LabelError(f"{path}: {error}") from None
        if [*plane_layout(known), list(known.plane_names)] != planes:
            raise LabelError(f"{path}: {stored}'s planes are not what they were when it was labelled: label it again")
    return size, labels


def _first_format(labels: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A first-format file's arrays (``stones``, ``black_to_move``, ``komi``) in today's layout of
    ``leelaz-18+komi``: the history planes packed as they were, the side to move and the komi as constants."""
    black = labels.pop("black_to_move", None)
    stones = labels.pop("stones", None)
    if black is None or stones is None or "komi" not in labels:
        return labels  # missing fields, reported as such
    black = black.astype(np.float32)
    constant = np.stack([black, 1.0 - black, labels["komi"].astype(np.float32) / np.float32(features.KOMI_SCALE)],
                        axis=1)
    labels["planes_bits"] = stones
    labels["planes_constant"] = (constant * np.float32(CONSTANT_SCALE)).astype(np.float16)
    return labels


# -- positions ------------------------------------------------------------------------------------------------------


class RecordPositions:
    """Positions of the games in SGF archives: ``per_game`` positions drawn from each game (its moves, setup
    position excluded), read in order; ``cursor`` counts the games taken, which a resumed run skips.

    ``repeat``: the archives are read again from the start each time they end, so that a small set (the games
    Tabula lost, say) gives new positions chunk after chunk (the draws are seeded by the cursor, which keeps
    counting). ``bonuses``: white's handicap bonuses (Rules' names) a handicap game is read at, one drawn per game,
    as self-play draws them; none: the record's komi alone, as its SGF gives it. ``source``: the name in ``SOURCES``
    the positions carry. ``results``: False where the games' results say more about their players than about the
    positions (games of players far below the teacher): the positions then carry no result, and the teacher's
    judgement alone trains on them."""

    def __init__(self, paths: Sequence[str], per_game: int = 4, seed: int = 1, cursor: int = 0,
                 size: int = 19, max_games: int | None = None, repeat: bool = False,
                 bonuses: Sequence[str] = (), source: str = "records", results: bool = True):
        self.paths = list(paths)
        self.source, self.results = SOURCES.index(source), results
        self.per_game, self.seed, self.cursor = per_game, seed, cursor
        self.size, self.max_games, self.repeat, self.bonuses = size, max_games, repeat, tuple(bonuses)
        self._pass_length = 0  # games in one pass of the archives, once a pass has ended
        self._records = self._read()
        self.exhausted = False
        left = cursor  # the games an earlier run took
        while left > 0 and self._next() is not None:
            left -= 1
            if self._pass_length:  # a repeated set: whole passes skipped unread, so a long run resumes as fast
                left %= self._pass_length

    def _read(self) -> Iterator:
        from tabula.engine.data.records import RecordFilter, iter_records

        rules = RecordFilter(size=self.size, handicap="value", require_result=False)
        self._reader, records = iter_records(self.paths, rules, self.max_games)
        self._read_this_pass = 0
        return records

    def _next(self):
        """The next record, from the start again where ``repeat`` and the archives have ended; None at the end
        (or where a whole pass found no game)."""
        record = next(self._records, None)
        if record is None and self.repeat and self._read_this_pass > 0:
            self._pass_length = self._read_this_pass
            self._records = self._read()
            record = next(self._records, None)
        if record is not None:
            self._read_this_pass += 1
        return record

    def take(self, count: int) -> list[Position]:
        """About ``count`` positions (whole games' worth), fewer when the archives run out."""
        from tabula.engine.data.records import DRAW

        positions: list[Position] = []
        while len(positions) < count:
            record = self._next()
            if record is None:
                self.exhausted = True
                break
            game = self.cursor
            self.cursor += 1
            rng = np.random.default_rng([self.seed, game])
            moves = len(record.moves)
            picks = np.sort(rng.choice(moves, size=min(self.per_game, moves), replace=False))
            rules, counted = None, record.margin if self.results else math.nan
            if self.bonuses and record.handicap >= 2:
                bonus = self.bonuses[int(rng.integers(len(self.bonuses)))]
                rules = Rules(komi=record.komi, superko=SIMPLE_KO, white_handicap_bonus=bonus)
                # the SGF does not say whether its count gave white a bonus: no margin rather than one points off
                counted = math.nan
            known = self.results and record.value_weight > 0 and (record.winner in (BLACK, WHITE)
                                                                  or record.result_kind == DRAW)
            for k in picks.tolist():
                state = record.replay(rules, upto=k)
                sign = 1.0 if state.to_move == BLACK else -1.0
                outcome = 0.0
                if known and record.winner in (BLACK, WHITE):
                    outcome = sign if record.winner == BLACK else -sign
                margin = sign * counted if not math.isnan(counted) else math.nan
                positions.append(Position(state, outcome, 1.0 if known else 0.0, margin, self.source))
        return positions


@dataclass
class SelfPlaySettings:
    sizes: tuple[int, ...] = (9, 13, 19, 19)  # drawn uniformly per game
    komi: float = 7.0  # mean komi of even games
    komi_spread: float = 1.5  # standard deviation of the komi, rounded to half points
    handicap_fraction: float = 0.2  # share of games with 2 to max_handicap stones at komi 0.5
    max_handicap: int = 9
    # white's handicap bonuses (Rules.white_handicap_bonus) a handicap game is drawn from: a player meets all of
    # them (none under Japanese rules, N under Chinese, KGS and OGS rules, N-1 under AGA's), and the network reads
    # the komi with the bonus in it, so it has to learn the positions at each of those komis
    handicap_bonuses: tuple[str, ...] = HANDICAP_BONUSES
    temperature: float = 1.0  # policy temperature for the opening (a share of the board's points, below)
    opening_fraction: float = 0.1  # moves sampled at ``temperature``: this share of the board's points
    late_temperature: float = 0.5  # the temperature after the opening
    keep: float = 0.25  # share of each game's positions labelled
    max_moves_factor: float = 1.5  # a game stops unfinished (no outcome) after this many moves per point


@dataclass
class _Game:
    state: GameState
    positions: list[Position] = field(default_factory=list)
    kept_evaluations: list[tuple[int, int]] = field(default_factory=list)  # (position index, row in the batch)


class SelfPlayPositions:
    """Games played in lockstep by sampling ``player``'s policy (an object with ``evaluate(states)``), each game's
    settings and moves drawn from (seed, chunk, game). ``take(chunk, games)`` plays them to the end and returns the
    kept positions with the network's evaluations of them (so that a teacher playing labels at no extra cost)."""

    def __init__(self, player, settings: SelfPlaySettings | None = None, seed: int = 1,
                 board_sizes: Sequence[int] | None = None):
        self.player = player
        self.settings = settings or SelfPlaySettings()
        self.seed = seed
        if board_sizes is not None:
            missing = [s for s in self.settings.sizes if s not in board_sizes]
            if missing:
                raise LabelError(f"the player plays {', '.join(map(str, board_sizes))}, not {missing}")

    def new_game(self, rng: np.random.Generator) -> GameState:
        s = self.settings
        size = int(rng.choice(s.sizes))
        handicap = 0
        if rng.random() < s.handicap_fraction and s.max_handicap >= 2:
            handicap = int(rng.integers(2, (s.max_handicap if size >= 13 else min(s.max_handicap, 4)) + 1))
        komi = 0.5 if handicap else float(np.round(2.0 * rng.normal(s.komi, s.komi_spread)) / 2.0)
        bonus = s.handicap_bonuses[int(rng.integers(len(s.handicap_bonuses)))] if handicap else BONUS_NONE
        state = GameState(size, Rules(komi=komi, white_handicap_bonus=bonus))
        if handicap:
            state.place_handicap(handicap_points(size, handicap))
        return state

    def take(self, chunk: int, games: int | Sequence[int], deadline: float = math.inf
             ) -> dict[int, tuple[list[Position], list[Evaluation]]]:
        """{board size: (positions, [evaluations whose rows are those positions])} of ``games`` games (a count, or
        the games' numbers in the chunk: a worker's share); past ``deadline`` (``time.time()``) the games stop where
        they are, without an outcome."""
        s = self.settings
        numbers = range(games) if isinstance(games, int) else games
        rngs = [np.random.default_rng([self.seed, chunk, g]) for g in numbers]
        live = [_Game(self.new_game(rng)) for rng in rngs]
        records: list[tuple[_Game, np.random.Generator]] = list(zip(live, rngs))
        evaluations: dict[int, list[tuple[Position, Evaluation, int]]] = {}
        playing = list(records)
        while playing and time.time() < deadline:
            by_size: dict[int, list[tuple[_Game, np.random.Generator]]] = {}
            for entry in playing:
                by_size.setdefault(entry[0].state.size, []).append(entry)
            still = []
            for size, entries in sorted(by_size.items()):
                states = [g.state for g, _ in entries]
                evaluation = self.player.evaluate(states)
                for row, (game, rng) in enumerate(entries):
                    state = game.state
                    if rng.random() < s.keep:
                        position = Position(state.copy(), source=SOURCES.index("selfplay"))
                        game.positions.append(position)
                        evaluations.setdefault(size, []).append((position, evaluation, row))
                    opening = len(state.moves) < s.opening_fraction * size * size
                    move = _sample(evaluation.policy[row], s.temperature if opening else s.late_temperature, rng)
                    state.play(PASS if move == size * size else move)
                    if not state.is_game_over() and len(state.moves) < s.max_moves_factor * size * size:
                        still.append((game, rng))
            playing = still
        for game, _ in records:  # the outcome of games that ended by two passes: Tromp-Taylor's count
            if not game.state.is_game_over():
                continue
            black_margin = game.state.area_score()
            for position in game.positions:
                sign = 1.0 if position.state.to_move == BLACK else -1.0
                position.margin = sign * black_margin
                position.outcome = float(np.sign(position.margin))
                position.outcome_weight = 1.0
        out: dict[int, tuple[list[Position], list[Evaluation]]] = {}
        for size, entries in evaluations.items():
            positions = [p for p, _, _ in entries]
            out[size] = (positions, [_row(e, r) for _, e, r in entries])
        return out


def _row(evaluation: Evaluation, row: int) -> Evaluation:
    return Evaluation(**{name: None if getattr(evaluation, name) is None else getattr(evaluation, name)[row:row + 1]
                         for name in (each.name for each in fields(Evaluation))})


def join_evaluations(parts: Sequence[Evaluation]) -> Evaluation:
    """One Evaluation of the positions of ``parts`` in order: every array field joined by rows; None stays None."""
    return Evaluation(**{name: None if getattr(parts[0], name) is None
                         else np.concatenate([getattr(p, name) for p in parts])
                         for name in (each.name for each in fields(Evaluation))})


def _sample(policy: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
    if temperature <= 0:
        return int(np.argmax(policy))
    weights = np.power(np.maximum(policy.astype(np.float64), 0.0), 1.0 / temperature)
    total = weights.sum()
    if not total > 0:
        return len(policy) - 1
    return int(rng.choice(len(policy), p=weights / total))


def group_by_size(positions: Sequence[Position]) -> dict[int, list[Position]]:
    groups: dict[int, list[Position]] = {}
    for position in positions:
        groups.setdefault(position.state.size, []).append(position)
    return groups


def throughput(teacher: Teacher, positions: Sequence[Position], repeat: int = 1) -> float:
    """Positions labelled a second (wall clock) over ``positions`` of one size, ``repeat`` times."""
    started = time.perf_counter()
    for _ in range(repeat):
        teacher.label(positions)
    return repeat * len(positions) / max(time.perf_counter() - started, 1e-9)


def teacher_identity(path: str) -> str:
    """The network a teacher file holds, whichever file or precision holds it: a KataGo model's name (from its model
    file, or from an ONNX file converted from one, fp32 or int8; with its policy optimism where that is not the
    conversion's default, since it changes the policy), else the SHA-256 of the file. A run goes on with the same
    teacher, not necessarily the same path: on another machine, or from its int8 file. ValueError where the file
    cannot be read."""
    from tabula.engine.net import katago_model
    from tabula.engine.net.netfile import KATAGO_STRUCTURE, file_sha256

    name = katago_model.header_name(path)
    if name is not None:
        return f"katago:{name}"
    if path.lower().endswith(".onnx"):
        import onnx

        try:
            metadata = {p.key: p.value for p in onnx.load(path, load_external_data=False).metadata_props}
            structure = json.loads(metadata[KATAGO_STRUCTURE]) if KATAGO_STRUCTURE in metadata else None
            optimism = float(metadata.get("policy_optimism", katago_model.DEFAULT_POLICY_OPTIMISM))
        except Exception as error:  # onnx raises its own DecodeError and others for a file that is not ONNX
            raise ValueError(f"{path}: not a readable ONNX file ({type(error).__name__})") from None
        if structure and structure.get("name"):
            mixed = "" if optimism == katago_model.DEFAULT_POLICY_OPTIMISM else f", policy optimism {optimism:g}"
            return f"katago:{structure['name']}{mixed}"
    try:
        return f"sha256:{file_sha256(path)}"
    except OSError as error:
        raise ValueError(f"{path}: {error.strerror}") from None


def iter_label_files(directory: str) -> Iterator[str]:
    if not os.path.isdir(directory):
        return
    for name in sorted(os.listdir(directory)):
        if name.endswith(".npz") and ".tmp" not in name:
            yield os.path.join(directory, name)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tabula.tools.learn.teacher TEACHER``: labelling throughput (positions/s) of a teacher on record
    positions, at each batch without a search and at each visit count with one; one JSON line a figure."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="python -m tabula.tools.learn.teacher", description=main.__doc__)
    parser.add_argument("teacher", help="a KataGo model file, its ONNX, or a Tabula ONNX network")
    parser.add_argument("--records", required=True, help="SGF archives or folders (comma-separated)")
    parser.add_argument("--positions", type=int, default=64, help="positions labelled a measurement without search")
    parser.add_argument("--search-positions", type=int, default=4, help="... and with a search")
    parser.add_argument("--batches", default="1,256", help="label batches measured without a search")
    parser.add_argument("--visits", default="16", help="search visits measured (at batch 8, the search's own)")
    parser.add_argument("--threads", type=int, default=0, help="onnxruntime threads (0: onnxruntime decides)")
    parser.add_argument("--search-parallel", default="1", help="searches at once, measured at each (comma-separated)")
    parser.add_argument("--provider", default="cpu")
    args = parser.parse_args(argv)
    source = RecordPositions([p for p in args.records.split(",") if p], per_game=4, seed=1)
    positions = source.take(args.positions)[:args.positions]
    if not positions:
        raise SystemExit("no positions in --records")
    for batch in (int(b) for b in args.batches.split(",") if b):
        labeller = Teacher(args.teacher, provider=args.provider, threads=args.threads, batch=batch)
        labeller.label(positions[:min(batch, 8)])  # the first calls pay for the session's warm-up
        rate = throughput(labeller, positions)
        print(json.dumps({"teacher": os.path.basename(args.teacher), "size": positions[0].state.size,
                          "visits": 0, "batch": batch, "positions": len(positions),
                          "positions_per_s": round(rate, 2)}), flush=True)
    for visits in (int(v) for v in args.visits.split(",") if v):
        for parallel in (int(p) for p in args.search_parallel.split(",") if p):
            labeller = Teacher(args.teacher, visits=visits, provider=args.provider, threads=args.threads,
                               search_parallel=parallel)
            chosen = positions[:args.search_positions]
            labeller.label(chosen[:1])
            rate = throughput(labeller, chosen)
            print(json.dumps({"teacher": os.path.basename(args.teacher), "size": chosen[0].state.size,
                              "visits": visits, "batch": 8, "search_parallel": parallel, "positions": len(chosen),
                              "positions_per_s": round(rate, 2)}), flush=True)
    return 0


__all__ = ["Teacher", "Position", "RecordPositions", "SelfPlayPositions", "SelfPlaySettings", "LabelError",
           "LabelEncodingError", "write_labels", "read_labels", "encode_positions", "decode_planes", "plane_layout",
           "student_encoding_named", "sparse_policy", "dense_policy", "LABEL_FIELDS", "STUDENT_ENCODINGS",
           "DEFAULT_STUDENT_ENCODING", "CONSTANT_SCALE", "SOURCES", "group_by_size", "join_evaluations",
           "throughput", "iter_label_files", "teacher_identity"]


if __name__ == "__main__":
    import sys

    sys.exit(main())
