"""`tabula export`: convert networks between Leela Zero text weights, torch checkpoints and ONNX; make random
networks; quantize ONNX to int8.

    tabula export --random --blocks 6 --filters 64 OUT.onnx [--leelaz-out OUT.txt] [--checkpoint-out OUT.pt]
    tabula export --from-leelaz WEIGHTS.txt[.gz] OUT.onnx
    tabula export --to-leelaz IN.onnx|IN.pt OUT.txt[.gz]
    tabula export IN.pt OUT.onnx
    tabula export --quantize int8 IN.onnx OUT.onnx      (or add --quantize int8 to any of the ONNX-writing forms;
        7-bit weights, right on every CPU; --quantize int8-vnni: 8-bit weights, right only where the CPU has VNNI)
    tabula export --quantize int8 --aware-steps 1200 --calibration-games GLOB IN.onnx IN-int8.onnx   (the trunk first
        trained to round well: the int8 file keeps more of IN's moves, which need not play better; match it first)
    tabula export --add-small-board-value IN.onnx|IN.pt OUT.onnx   (a pooled net with a zero small-board value term)
    tabula export --add-komi-input IN.onnx|IN.pt OUT.onnx [--checkpoint-out OUT.pt]   (a pooled Go net that sees
        the komi: leelaz-18+komi, its new weights zero; the same outputs at --komi-reference until trained)
    tabula export --add-small-board-komi IN OUT.onnx [--checkpoint-out OUT.pt]   (a komi network with a zero komi
        term that only boards below 19x19 see; with --add-komi-input, both at once)
    tabula export --add-small-board-komi-parity IN OUT.onnx [--checkpoint-out OUT.pt]   (that term's zero komi
        parity term, for area scoring's odd margins on 9x9 and 13x13)
    tabula export --add-small-board-score-komi IN OUT.onnx [--checkpoint-out OUT.pt]   (a zero komi term of the
        score alone on boards below 19x19, for its slope: trained alone, it leaves the value as it was)
    tabula export --resign-winrate 9:0.2,19:0.1 NET.onnx   (the calibrated resignation thresholds written into
        NET.onnx's metadata, nothing else changed; or add --resign-winrate to any of the ONNX-writing forms)
    tabula export --ownership-network 0.5 NET.onnx   (the share of dead-stone judging measured for its ownership
        head, likewise; both at once where both are given)
    tabula export --from-katago MODEL.bin.gz OUT.onnx [--no-int8]   (KataGo's model file as fp32 ONNX, and beside it
        OUT-int8.onnx where int8 keeps the same top move on at least 95% of test positions; --no-int8: fp32 only)
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import sys
import tempfile
from glob import glob

import numpy as np

from tabula.engine.net.evaluator import session_options
from tabula.engine.net.features import INPUT_ENCODING
from tabula.engine.net.netfile import file_sha256
from tabula.engine.rules.coords import EMPTY, PASS
from tabula.engine.rules.game import GameState, Rules

# -- positions for calibration and accuracy checks ----------------------------------------------------------------


def random_positions(size: int, count: int, seed: int, max_moves: int | None = None,
                     min_moves: int = 0) -> list[GameState]:
    """Positions from random legal games (no filling of own eyes), sampled at random move numbers from
    ``min_moves`` to below ``max_moves`` (default: the board's points)."""
    rng = random.Random(seed)
    max_moves = max_moves or size * size
    positions: list[GameState] = []
    while len(positions) < count:
        state = GameState(size)
        stop = rng.randrange(min_moves, max_moves)
        for _ in range(stop):
            state.play(_random_move(state, rng))
            if state.is_game_over():
                break
        positions.append(state)
    return positions


def _random_move(state: GameState, rng: random.Random) -> int:
    """A legal move of ``state``'s side to move that fills none of its own eyes, each such move equally likely;
    PASS where there is none. Points are drawn without replacement until one qualifies: a few legality checks a
    move, where listing every legal move first made a 25x25 board's random games take minutes. (The same draw as
    ``engine.rules.playout.random_move``, which keeps its listing so that the seeded random player's games stay
    as they were.)"""
    board = state.board
    padded, color, to_move = board.geometry.padded, board.color, state.to_move
    points = list(range(state.size * state.size))
    remaining = len(points)
    while remaining:
        j = rng.randrange(remaining)
        remaining -= 1
        points[j], points[remaining] = points[remaining], points[j]
        move = points[remaining]
        pad = padded[move]
        if color[pad] == EMPTY and not board.is_own_eye(pad, to_move) and state.legal(move):
            return move
    return PASS


def sgf_positions(count: int, seed: int, games: str, per_game: int = 8, skip_games: int = 0,
                  moves: range | None = None, size: int = 19) -> list[GameState]:
    """Positions from the real ``size``×``size`` games of the SGF archives, folders or files that the glob ``games``
    names (the games after the first ``skip_games``), ``per_game`` sampled from each, each the position after a
    number of moves in ``moves`` (default: any). FileNotFoundError where there are none; ImportError without
    sgfmill."""
    archives = sorted(glob(games)) if games else []
    if not archives:
        raise FileNotFoundError(f"no games found in {games}" if games else "no game archives named")
    # Imported only when there are games to read: a GPU machine lent for benchmarks has neither games nor sgfmill.
    from tabula.engine.data.records import iter_sgf_files
    from tabula.engine.rules.sgf import SgfError, read_sgf, replay

    rng = random.Random(seed)
    positions: list[GameState] = []
    for archive in archives:
        for _, data in iter_sgf_files(archive):
            if skip_games > 0:
                skip_games -= 1
                continue
            try:
                record = read_sgf(data)
                after = replay(record)[1:] if record.size == size else []  # the position after each move
            except SgfError:
                continue
            if moves is not None:
                after = [after[m - 1] for m in moves if 1 <= m <= len(after)]
            positions.extend(rng.sample(after, min(per_game, len(after))))
            if len(positions) >= count:
                return positions[:count]
    if not positions:
        raise FileNotFoundError(f"no games found in {games}")
    return positions


def positions(size: int, count: int, seed: int, games: str = "", source: str = "auto", per_game: int = 8,
              skip_games: int = 0, moves: range | None = None) -> list[GameState]:
    """The positions a network is calibrated or measured on: on 19×19, from the real games of ``games``
    (``sgf_positions``) where there are any and sgfmill to read them, else from random games (``random_positions``,
    at the same move numbers). ``source``: ``auto`` (that), ``sgf`` (on 19×19 real games, or the error why not) or
    ``random``."""
    if source != "random" and size == 19:
        try:
            return sgf_positions(count, seed, games, per_game, skip_games, moves)
        except (OSError, ImportError):  # no archives, or no sgfmill to read them (the lent GPU machine has neither)
            if source == "sgf":
                raise
    return random_positions(size, count, seed, moves.stop if moves else None, moves.start if moves else 0)


def calibration_states(size: int, count: int, seed: int, source: str = "auto", games: str = "",
                       encoding: str = INPUT_ENCODING) -> list[GameState]:
    """``positions`` for calibrating a network of input ``encoding``: from the real games of ``games`` on 19×19
    where there are any, otherwise random games. Where the encoding reads the komi (a komi plane, or katago-v7's and
    tabula-v2's komi among their globals), each position's komi is drawn, in half points from -20 to 20 (the ends
    always among them), so that the int8 layers that read it cover that range, to about 0.16 points: calibrated at
    the games' one komi, they clip any komi beyond it to that komi's value."""
    from tabula.engine.net.encodings import encoding_named
    from tabula.engine.net.features import KOMI_SCALE

    chosen = encoding_named(encoding)
    states = positions(size, count, seed, games, source)
    if chosen.komi_plane is not None or "komi" in (chosen.plane_names or ()):
        rng = np.random.default_rng([seed, 20])
        half_points = int(2 * KOMI_SCALE)
        komi = rng.integers(-half_points, half_points + 1, len(states)) / 2.0
        # the plane's unit range, KOMI_SCALE points for or against the mover
        ends = np.array([KOMI_SCALE, -KOMI_SCALE, -KOMI_SCALE, KOMI_SCALE])[:len(komi)]
        komi[:len(ends)] = ends
        for state, value in zip(states, komi):
            state.rules = Rules(komi=float(value), superko=state.rules.superko)
    return states


def calibration_planes(size: int, count: int, seed: int, source: str = "auto", games: str = "",
                       encoding: str = INPUT_ENCODING) -> np.ndarray:
    """float32 [count, C, N, N]: ``calibration_states`` under the network's input ``encoding``."""
    from tabula.engine.net.encodings import encoding_named

    return encoding_named(encoding).encode_batch(calibration_states(size, count, seed, source, games, encoding), None)


# -- quantization ------------------------------------------------------------------------------------------------


def calibration_size(sizes: list[int]) -> int:
    """The one board size int8 calibration uses for a network that plays ``sizes``: the largest up to 19x19 (the
    smallest above, for a network of larger boards only).

    One size because onnxruntime's percentile calibrator stacks the activations of every batch, which must then
    share a shape (a network for 2x2 to 25x25 failed with "inhomogeneous shape"); 19x19 because it reaches the
    ranges the smaller boards do (docs/BENCHMARKS.md measures the agreement on 9x9 as well)."""
    up_to_19 = [s for s in sizes if s <= 19]
    return max(up_to_19) if up_to_19 else min(sizes)


def after_heads(graph) -> list[str]:
    """Names of the nodes of the heads (``/head/...``) and of every node that uses their outputs, directly or not.
    One pass suffices: ONNX keeps a graph's nodes in topological order."""
    names: list[str] = []
    tensors: set[str] = set()
    for node in graph.node:
        if node.name.startswith("/head/") or any(t in tensors for t in node.input):
            names.append(node.name)
            tensors.update(node.output)
    return names


def activation_matmuls(graph) -> list[str]:
    """Names of the MatMul nodes that multiply two activations (attention's scores and weighted values), neither
    input a weight: they stay fp32 (their calibration would hold every position's attention maps in memory)."""
    weights = {t.name for t in graph.initializer}
    return [node.name for node in graph.node
            if node.op_type == "MatMul" and not any(name in weights for name in node.input)]


def katago_fp32_nodes(blocks: int, last_share: float = 0.2):
    """graph -> the nodes of a converted KataGo network that stay fp32 besides its heads: attention's activation
    products (``activation_matmuls``), the first convolution, the 1x1 convolutions that open nested bottleneck
    blocks (``pre_conv``: they read the trunk, whose outliers 8 bits of one range per tensor do not hold, for a few
    per cent of the work), and the trunk's last ``last_share`` of blocks (at least one), whose errors nothing after
    them averages out (docs/BENCHMARKS.md, "KataGo networks")."""
    last = max(1, int(np.ceil(blocks * last_share)))
    prefixes = ("/initial_conv/", *(f"/blocks.{index}/" for index in range(blocks - last, blocks)))

    def nodes(graph) -> list[str]:
        return activation_matmuls(graph) + [node.name for node in graph.node
                                            if node.name.startswith(prefixes) or "/pre_conv/" in node.name]
    return nodes


def trunk_fp32_nodes(last: int):
    """graph -> the nodes of the last ``last`` residual blocks of a Tabula network's trunk (``/tower/tower.N/``), kept
    fp32 by ``tabula export --quantize int8 --fp32-blocks``: the trunk's last rounding errors reach the heads with
    nothing after them to average them out. One fp32 block took the student's agreement from 94.4% to 95.2%, for
    about 30% of the search's playouts a second (docs/BENCHMARKS.md, "int8 of the tabula-v2 student")."""
    pattern = re.compile(r"^/tower/tower\.(\d+)/")

    def nodes(graph) -> list[str]:
        found = [(int(match.group(1)), node.name) for node in graph.node if (match := pattern.match(node.name))]
        if not found:
            raise ValueError(f"--fp32-blocks {last}: the network has no residual blocks named as Tabula's")
        blocks = max(index for index, _ in found) + 1
        if last > blocks:
            raise ValueError(f"--fp32-blocks {last}: the network has {blocks} residual blocks")
        return [name for index, name in found if index >= blocks - last]
    return nodes


def smoothing_pairs(graph) -> list[tuple[str, str, str]]:
    """(the weight scaled down, the weight scaled up, the activation between them) of each product pair of a
    converted KataGo network whose activation can be rescaled exactly, channel by channel: SwiGLU's gate and its
    output projection (the hidden activation is silu(linear1 x) times gate x, linear in the gate's output), and
    attention's value and output projections (the attention output mixes values with weights per head, linear in
    the values). Found by the converter's node names (katago_network); none in other networks."""
    weights = {t.name: t for t in graph.initializer}
    by_name = {node.name: node for node in graph.node}
    producer = {output: node for node in graph.node for output in node.output}
    pairs = []
    for node in graph.node:
        if node.op_type != "MatMul" or node.input[1] not in weights:
            continue
        if node.name.endswith("/linear2/MatMul"):
            product = producer.get(node.input[0])
            inputs = product.input if product is not None and product.op_type == "Mul" else []
            down = [producer[t] for t in inputs if t in producer and producer[t].name.endswith("/gate/MatMul")]
        elif node.name.endswith("/out_proj/MatMul"):
            value = by_name.get(node.name[: -len("/out_proj/MatMul")] + "/v_proj/MatMul")
            down = [value] if value is not None else []
        else:
            continue
        if len(down) == 1 and down[0].op_type == "MatMul" and down[0].input[1] in weights:
            scaled_down, scaled_up = weights[down[0].input[1]], weights[node.input[1]]
            if len(scaled_down.dims) == 2 and len(scaled_up.dims) == 2 and scaled_down.dims[1] == scaled_up.dims[0]:
                pairs.append((scaled_down.name, scaled_up.name, node.input[0]))
    return pairs


def smooth_for_int8(source: str, target: str, calibration: dict[int, np.ndarray], alpha: float = 0.5) -> int:
    """``source`` written to ``target`` with the activation of each ``smoothing_pairs`` pair rescaled per channel
    (SmoothQuant): channel j divided by s_j = max|activation_j|^alpha / max|weight row j|^(1 - alpha) over the
    ``calibration`` planes, the weight after it multiplied by s_j, so that the network computes the same in fp32 and
    int8's one range per activation tensor is no longer set by a few channels. The number of pairs rescaled (0:
    ``target`` not written); where the rescaled file's outputs differ from the source's (a graph these pairs do not
    describe), none."""
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    proto = onnx.load(source)
    pairs = smoothing_pairs(proto.graph)
    if not pairs:
        return 0
    for _, _, activation in pairs:
        proto.graph.output.append(onnx.helper.make_tensor_value_info(activation, onnx.TensorProto.FLOAT, None))
    session = ort.InferenceSession(proto.SerializeToString(), session_options(), providers=["CPUExecutionProvider"])
    names = [activation for _, _, activation in pairs]
    peaks: list = [None] * len(pairs)
    reference = []
    for planes in calibration.values():
        for start in range(0, len(planes), 4):
            outputs = session.run(["policy", *names], {"planes": planes[start: start + 4]})
            reference.append(outputs[0])
            for k, values in enumerate(outputs[1:]):
                peak = np.abs(values).reshape(-1, values.shape[-1]).max(axis=0)
                peaks[k] = peak if peaks[k] is None else np.maximum(peaks[k], peak)
    del proto.graph.output[-len(pairs):]
    weights = {t.name: t for t in proto.graph.initializer}
    for (down, up, _), peak in zip(pairs, peaks):
        lower, upper = numpy_helper.to_array(weights[down]), numpy_helper.to_array(weights[up])
        scale = (np.maximum(peak, 1e-5) ** alpha / np.maximum(np.abs(upper).max(axis=1), 1e-5) ** (1 - alpha))
        scale = np.clip(scale, 1e-3, 1e3).astype(np.float32)
        weights[down].CopyFrom(numpy_helper.from_array((lower / scale[None, :]).astype(np.float32), down))
        weights[up].CopyFrom(numpy_helper.from_array((upper * scale[:, None]).astype(np.float32), up))
    onnx.save(proto, target)
    session = ort.InferenceSession(target, session_options(), providers=["CPUExecutionProvider"])
    policies = [session.run(["policy"], {"planes": planes[start: start + 4]})[0]
                for planes in calibration.values() for start in range(0, len(planes), 4)]
    if max(float(np.abs(a - b).max()) for a, b in zip(policies, reference)) > 1e-3:
        os.remove(target)
        return 0
    return len(pairs)


# The int8 formats (the ``int8_kernels`` metadata of the file written, which int8_check reads):
# - "any": weights of 7 bits (-64 to 64, onnxruntime's reduce_range), right on every CPU. Where a CPU has no VNNI
#   (AVX2, or AVX-512 without it) onnxruntime multiplies uint8 activations by int8 weights with vpmaddubsw, which
#   adds two products in 16 bits and saturates: 255 x 127 x 2 does not fit, 255 x 64 x 2 = 32,640 does. The
#   convolutions that read the input planes stay fp32 (``input_convolutions``, a few per cent of the work): at 7
#   bits they held most of the value's error, and without them the default network agrees with its fp32 file as
#   closely as with 8-bit weights (docs/BENCHMARKS.md, "int8 on a CPU without VNNI").
# - "vnni": weights of 8 bits, every convolution of the trunk, right only where the CPU has VNNI (AVX-512 VNNI or
#   AVX-VNNI: 32-bit sums); the format of the int8 files written before "any".
INT8_FORMATS = {"any": {"reduce_range": True, "input_convolutions": False},
                "vnni": {"reduce_range": False, "input_convolutions": True}}
DEFAULT_INT8_FORMAT = "any"


def input_convolutions(graph) -> list[str]:
    """Names of the convolutions that read the graph's inputs (directly or through operators that are not
    convolutions, such as the Slice that splits off a komi plane). A tensor counts as read from the inputs only where
    everything it is computed from is (inputs, weights and constants): a KataGo network multiplies every block's
    activations by the board's mask, a slice of the input planes, and the convolutions after those products read the
    trunk, not the inputs. ONNX keeps a graph's nodes in topological order."""
    before = {value.name for value in graph.input} | {t.name for t in graph.initializer}
    names = []
    for node in graph.node:
        if node.op_type == "Conv":
            if node.input[0] in before:
                names.append(node.name)
        elif all(t in before for t in node.input if t):
            before.update(node.output)
    return names


def quantize_int8(source: str, target: str, calibration: dict[int, np.ndarray],
                  also_exclude=None, op_types: list[str] | None = None, method: str = "percentile",
                  kernels: str = DEFAULT_INT8_FORMAT, fp32_blocks: int = 0) -> None:
    """Static int8 quantization (QDQ, per-channel weights, u8 activations) calibrated on ``calibration`` (board size
    -> its planes: one size for ``percentile``), keeping the metadata with ``precision`` set to int8 and
    ``int8_kernels`` to ``kernels``: the format (``INT8_FORMATS``), ``any`` (7-bit weights, right on every CPU) or
    ``vnni`` (8-bit weights, right only where the CPU has VNNI). ``fp32_blocks``: the trunk's last residual blocks
    kept fp32 (``trunk_fp32_nodes``); ``also_exclude``: graph -> names of further nodes to keep in fp32;
    ``op_types``: the operators to quantize (default: onnxruntime's); ``method``: the calibration,
    ``percentile`` (99.999%) or ``minmax`` (any number of board sizes; it keeps each batch's extremes only, where
    percentile keeps every activation)."""
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    from tabula.engine.net.network import set_metadata

    if kernels not in INT8_FORMATS:
        raise ValueError(f"no int8 format {kernels!r} (known: {', '.join(INT8_FORMATS)})")
    if len(calibration) != 1 and method == "percentile":
        raise ValueError("percentile int8 calibration takes positions of one board size (calibration_size)")

    class Reader(CalibrationDataReader):
        # Full batches of 32 only (or one batch of fewer): the percentile calibrator stacks every batch's
        # activations, so a shorter last batch fails as a second board size does. Min-max takes batches of 4: the
        # session that measures the extremes holds every activation of a batch, gigabytes for a few positions of a
        # large KataGo network at 19x19 (docs/BENCHMARKS.md, "KataGo networks").
        def __init__(self) -> None:
            step = 32 if method == "percentile" else 4
            batches = []
            for planes in calibration.values():
                full = max(step, len(planes) // step * step)
                batches += [{"planes": planes[i: i + step]} for i in range(0, min(full, len(planes)), step)]
            self.batches = iter(batches)

        def get_next(self):
            return next(self.batches, None)

    metadata = _metadata(source)
    with tempfile.TemporaryDirectory() as scratch:
        prepared = os.path.join(scratch, "prepared.onnx")
        quant_pre_process(source, prepared, skip_symbolic_shape=True)
        # The heads are a sliver of the work but most of the error: they stay fp32, and so does everything after
        # them (the score's scaling Mul was quantized once, which clipped the score to its calibrated range,
        # -17.4 to +11.2 points). Percentile calibration (99.999%) measured slightly more accurate than min-max on
        # real positions (docs/BENCHMARKS.md).
        graph = onnx.load(prepared).graph
        heads = after_heads(graph) + (also_exclude(graph) if also_exclude is not None else [])
        if fp32_blocks:
            heads += trunk_fp32_nodes(fp32_blocks)(graph)
        if not INT8_FORMATS[kernels]["input_convolutions"]:
            heads += input_convolutions(graph)
        with contextlib.redirect_stdout(sys.stderr):  # the calibrators print progress on stdout
            quantize_static(prepared, target, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                            calibrate_method={"percentile": CalibrationMethod.Percentile,
                                              "minmax": CalibrationMethod.MinMax}[method],
                            nodes_to_exclude=heads,
                            op_types_to_quantize=op_types, reduce_range=INT8_FORMATS[kernels]["reduce_range"],
                            extra_options={"ActivationSymmetric": False, "WeightSymmetric": True})
    proto = onnx.load(target)
    metadata["precision"] = "int8"
    metadata["int8_kernels"] = kernels
    form = ("7-bit weights, the input convolutions fp32" if kernels == "any" else "8-bit weights")
    if fp32_blocks:
        form += f", the last {fp32_blocks} residual block{'s' if fp32_blocks > 1 else ''} fp32"
    metadata["provenance"] = (metadata.get("provenance", "")
                              + f"; int8 static quantization of the trunk (QDQ, per channel, {form})")
    set_metadata(proto, metadata)
    onnx.save(proto, target)


def quantize_int8_aware(source: str, target: str, states: list[GameState], config, calibration: dict[int, np.ndarray],
                        log=None) -> dict[str, float]:
    """Write ``target``, an int8 file of the fp32 network ``source`` (a pooled Tabula network), its trunk first
    trained on ``states`` (GameStates of one board size) to round well (``quantization_aware.train_rounded`` with
    ``config``, an ``AwareConfig``), then quantized as ``quantize_int8`` does, calibrated on ``calibration`` (one
    board size: its planes), which also places the simulated rounding's ranges. The file's metadata is ``source``'s
    (its thresholds, its architecture: the fp32 file it is checked against is ``source``), with the int8 fields and
    the fine-tune in its provenance. Returns ``train_rounded``'s losses."""
    import onnx

    from tabula.engine.net.encodings import encoding_named
    from tabula.engine.net.network import export_onnx, load_onnx, set_metadata
    from tabula.engine.rules.interface import batch_legal_masks
    from tabula.tools.learn.quantization_aware import train_rounded

    model = load_onnx(source)
    planes = encoding_named(model.spec.encoding.name).encode_batch(states, None)
    ((_, ranges_planes),) = calibration.items()
    losses = train_rounded(model, planes, batch_legal_masks(states), config, ranges_planes, log)
    metadata = _metadata(source)
    with tempfile.TemporaryDirectory() as scratch:
        tuned = os.path.join(scratch, "tuned.onnx")
        sizes = [int(s) for s in metadata["board_sizes"].split(",")] if metadata.get("board_sizes") else None
        export_onnx(model, tuned, metadata.get("provenance", ""), sizes)
        quantize_int8(tuned, target, calibration)
    quantized = _metadata(target)
    metadata.update(precision=quantized["precision"], int8_kernels=quantized["int8_kernels"])
    metadata["provenance"] = (metadata.get("provenance", "")
                              + f"; int8 of its trunk after a quantization-aware fine-tune ({config.steps} steps "
                              + f"of {config.batch} on {len(states)} positions), "
                              + quantized["provenance"].rsplit("; ", 1)[-1])
    proto = onnx.load(target)
    set_metadata(proto, metadata)
    onnx.save(proto, target)
    return losses


# -- the command -----------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tabula export", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--random", action="store_true", help="a random network (calibrated batch norms)")
    mode.add_argument("--from-leelaz", metavar="WEIGHTS", help="a Leela Zero weight file (text, maybe gzipped)")
    mode.add_argument("--to-leelaz", metavar="IN", help="write IN (Tabula .onnx or .pt, agz head) as LZ weights")
    mode.add_argument("--from-katago", metavar="MODEL",
                      help="a KataGo model file (.bin.gz, .bin, .txt.gz, .txt): fp32 ONNX, and OUT-int8.onnx beside it "
                           "where int8 keeps the top move")
    parser.add_argument("--no-int8", action="store_true", help="with --from-katago: the fp32 file only")
    parser.add_argument("--policy-optimism", type=float, default=None, metavar="X",
                        help="with --from-katago: the share in [0, 1] of the optimistic policy the file's policy mixes "
                             "in (model versions 12 and later; default 0.2, KataGo's at the root; its search uses 1.0 "
                             "below the root)")
    parser.add_argument("--agreement-positions", type=int, default=100,
                        help="with --from-katago: positions per board size (19x19 and 9x9) of int8's agreement check")
    parser.add_argument("paths", nargs="+", help="[IN] OUT")
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--filters", type=int, default=64)
    parser.add_argument("--head", choices=("agz", "pooled"), default="agz")
    parser.add_argument("--aux", action="store_true", help="with --random --head pooled: score and ownership heads")
    parser.add_argument("--size", type=int, default=19, help="board size of an agz head")
    parser.add_argument("--board-sizes", default="", help="pooled head: comma-separated sizes (default 2 to 25)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--leelaz-out", help="with --random: also write the same net as LZ weights")
    parser.add_argument("--checkpoint-out", help="with --random or --from-leelaz: also write a torch checkpoint")
    parser.add_argument("--quantize", choices=("none", "int8", "int8-vnni"), default="none",
                        help="int8: 7-bit weights, right on every CPU; int8-vnni: 8-bit weights, a little closer to "
                             "fp32 where the CPU has VNNI and wrong where it has not (the engine then runs the fp32 "
                             "file beside it)")
    parser.add_argument("--aware-steps", type=int, default=0, metavar="N",
                        help="with --quantize int8 of a pooled Tabula network: first train a copy of its trunk N "
                             "steps to give its outputs with int8's rounding (quantization-aware, e.g. 1200); the fp32 "
                             "file stays as it is. Nearer the fp32 file's moves is not stronger: match it against "
                             "the plain int8 file before shipping it")
    parser.add_argument("--aware-positions", type=int, default=4000, metavar="M",
                        help="with --aware-steps: the positions it trains on (drawn as --calibration's are)")
    parser.add_argument("--fp32-blocks", type=int, default=0, metavar="N",
                        help="with --quantize: the trunk's last N residual blocks stay fp32 (closer to the fp32 "
                             "file, and slower: one block cost the 6x64 student about 30%% of its playouts a "
                             "second; default 0)")
    parser.add_argument("--add-small-board-value", action="store_true",
                        help="IN OUT: add the pooled value head's small-board term, zero (the same outputs until "
                             "self-play trains it: tabula rl --start-from OUT --train-only head.value_small_boards)")
    parser.add_argument("--add-komi-input", action="store_true",
                        help="IN OUT: a pooled Go network made to see the komi (leelaz-18+komi: a komi plane, zero "
                             "weights from it, and the score's fixed komi path), the same outputs at --komi-reference "
                             "until trained (tabula train --input-encoding leelaz-18+komi --init OUT.pt, with "
                             "--checkpoint-out OUT.pt here)")
    parser.add_argument("--add-small-board-komi", action="store_true",
                        help="IN OUT: a network with the komi input gets a zero komi term of the value that only "
                             "boards below 19x19 see (PooledHead); the same outputs until trained")
    parser.add_argument("--add-small-board-komi-parity", action="store_true",
                        help="IN OUT: a network with the small-board komi term (or with --add-small-board-komi) gets "
                             "its zero komi parity term (area scoring's odd margins: PooledHead); the same outputs "
                             "until trained")
    parser.add_argument("--add-small-board-score-komi", action="store_true",
                        help="IN OUT: a network with the komi input and the score head gets a zero komi term of the "
                             "score alone that only boards below 19x19 see (PooledHead); the same outputs until "
                             "trained, and the same value after")
    parser.add_argument("--komi-reference", type=float, default=7.5,
                        help="with --add-komi-input: the komi the network learned its score at (default 7.5)")
    parser.add_argument("--resign-winrate", type=_thresholds, default=None, metavar="T|SIZE:T,...",
                        help="write the calibrated resignation thresholds into the network's metadata (tabula gtp "
                             "resigns with them by default; tabula resign measures them): one winrate for every "
                             "size, or SIZE:T for even games, hSIZE:T for handicap games, *:T for the other sizes, "
                             "comma-separated")
    parser.add_argument("--ownership-network", type=_share, default=None, metavar="F",
                        help="write into the network's metadata the share in [0, 1] of the dead-stone judgement "
                             "(final_status_list, final_score, cleanup) that its ownership head earned against a "
                             "referee's (docs/RELIABILITY.md): tabula gtp takes it by default")
    parser.add_argument("--calibration", type=int, default=256, help="positions for calibration (int8, random)")
    parser.add_argument("--calibration-source", choices=("auto", "sgf", "random"), default="auto",
                        help="auto: the games of --calibration-games on 19x19 where there are any, else random games")
    parser.add_argument("--calibration-games", default="", metavar="GLOB",
                        help="SGF archives (tar, zip, folders or files; a glob) whose 19x19 games calibrate "
                             "(default: none, random games)")
    return parser


def main(argv: list[str]) -> int:
    """Run ``tabula export``. A file that cannot be read or converted ends the run with one line naming it
    (SystemExit, status 1), not a traceback."""
    args = build_parser().parse_args(argv)
    from tabula.engine.net.evaluator import NetworkFileError
    from tabula.engine.net.leelaz import LeelazFormatError

    if args.fp32_blocks < 0:
        raise SystemExit(f"tabula export: --fp32-blocks must be 0 or more, not {args.fp32_blocks}")
    if args.fp32_blocks and args.quantize == "none":
        raise SystemExit("tabula export: --fp32-blocks applies to --quantize int8 or int8-vnni")
    source = args.to_leelaz or args.from_leelaz or args.from_katago or (None if args.random else args.paths[0])
    try:
        if args.from_katago:
            return _export_katago(args)
        if _only_metadata(args):
            for key, value in _measured_metadata(args).items():
                _set_metadata_value(args.paths[0], key, value)
                print(f"{args.paths[0]}: {key} {value}", file=sys.stderr)
            return 0
        status = _export(args)
        if not args.to_leelaz:
            for key, value in _measured_metadata(args).items():
                _set_metadata_value(args.paths[-1], key, value)
        return status
    except (NetworkFileError, LeelazFormatError) as error:
        raise SystemExit(f"tabula export: {error}") from None  # the message names the file
    except OSError as error:
        raise SystemExit(f"tabula export: {error.filename or source}: {error.strerror or error}") from None
    except ValueError as error:
        raise SystemExit(f"tabula export: {source or args.paths[-1]}: {error}") from None


def _thresholds(text: str):
    """--resign-winrate's value (engine.config.ResignThresholds); an argparse error when it cannot be read."""
    from tabula.engine.config import ResignThresholds

    try:
        return ResignThresholds.parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _komi_terms(args: argparse.Namespace) -> bool:
    """Whether the command adds a komi term: the komi input or a small-board komi term."""
    return (args.add_komi_input or args.add_small_board_komi or args.add_small_board_komi_parity
            or args.add_small_board_score_komi)


def _share(text: str) -> float:
    """--ownership-network's value (engine.config.parse_share); an argparse error when it is not a share."""
    from tabula.engine.config import parse_share

    try:
        return parse_share(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _measured_metadata(args: argparse.Namespace) -> dict[str, str]:
    """The measured settings the command writes into the network's metadata (--resign-winrate,
    --ownership-network), by metadata key."""
    values = {"resign_winrate": args.resign_winrate, "ownership_network": args.ownership_network}
    return {key: f"{value:g}" if isinstance(value, float) else str(value)
            for key, value in values.items() if value is not None}


def _only_metadata(args: argparse.Namespace) -> bool:
    """``tabula export --resign-winrate T NET.onnx`` (or --ownership-network): one existing ONNX file whose metadata
    alone changes."""
    converting = (args.random or args.from_leelaz or args.to_leelaz or args.add_small_board_value or _komi_terms(args)
                  or args.quantize != "none" or args.leelaz_out or args.checkpoint_out)
    return (bool(_measured_metadata(args)) and not converting and len(args.paths) == 1
            and args.paths[0].endswith(".onnx") and os.path.isfile(args.paths[0]))


def _export(args: argparse.Namespace) -> int:
    from tabula.engine.net import network
    from tabula.engine.net.leelaz import read_leelaz, write_leelaz

    paths = args.paths
    out = paths[-1]
    if args.add_small_board_value and args.to_leelaz:
        raise SystemExit("tabula export: --add-small-board-value writes ONNX of a pooled network, not Leela Zero "
                         "weights")
    komi_terms = _komi_terms(args)
    if komi_terms and (args.to_leelaz or args.from_leelaz or args.random):
        raise SystemExit("tabula export: --add-komi-input and --add-small-board-* take IN OUT, a pooled Tabula "
                         "network: Leela Zero weights have no komi input")
    if args.to_leelaz:
        if len(paths) != 1:
            raise SystemExit("tabula export --to-leelaz IN OUT: give OUT only")
        model = network.load_network(args.to_leelaz)
        write_leelaz(network.to_leelaz(model), out)
        print(f"wrote {out} ({model.spec.blocks}x{model.spec.filters}, LZ format)", file=sys.stderr)
        return 0

    if args.random:
        if len(paths) != 1:
            raise SystemExit("tabula export --random OUT.onnx: give OUT only")
        spec = network.NetSpec(blocks=args.blocks, filters=args.filters, head=args.head, board_size=args.size,
                               aux=args.aux, small_board_value=args.add_small_board_value)
        sizes = _sizes(args, spec)
        calibration = [calibration_planes(s, min(args.calibration, 128), args.seed, args.calibration_source,
                                          args.calibration_games) for s in sizes]
        model = network.random_network(spec, args.seed, calibration)
        provenance = f"random weights, seed {args.seed}, tabula export --random"
    elif args.from_leelaz:
        if len(paths) != 1:
            raise SystemExit("tabula export --from-leelaz WEIGHTS OUT.onnx: give OUT only")
        if args.add_small_board_value:
            raise SystemExit("tabula export: Leela Zero weights have an agz head; --add-small-board-value needs the "
                             "pooled head")
        model = network.from_leelaz(read_leelaz(args.from_leelaz))
        sizes = [model.spec.board_size]
        digest = file_sha256(args.from_leelaz)[:16]
        provenance = f"Leela Zero weights {os.path.basename(args.from_leelaz)} sha256:{digest}"
    else:
        if len(paths) != 2:
            raise SystemExit("tabula export IN OUT.onnx")
        source = paths[0]
        if source.endswith(".onnx") and args.quantize != "none" and not (args.add_small_board_value or komi_terms):
            _write_quantized(source, out, args)
            return 0
        model = network.load_network(source)
        sizes = _sizes(args, model.spec, source)
        provenance = f"converted from {os.path.basename(source)} sha256:{file_sha256(source)[:16]}"
        if args.add_small_board_value:
            if model.spec.small_board_value:
                raise SystemExit(f"tabula export: {source} already has the small-board value term")
            model = network.with_small_board_value(model)
            provenance += ", with a zero small-board value term"
        try:
            if args.add_komi_input:
                model = network.with_komi_input(model, args.komi_reference)
                provenance += f", with a zero komi input (score reference komi {args.komi_reference:g})"
            if args.add_small_board_komi:
                model = network.with_small_board_komi(model)
                provenance += ", with a zero small-board komi term"
            if args.add_small_board_komi_parity:
                model = network.with_small_board_komi_parity(model)
                provenance += ", with a zero small-board komi parity term"
            if args.add_small_board_score_komi:
                model = network.with_small_board_score_komi(model)
                provenance += ", with a zero small-board score komi term"
        except ValueError as error:
            raise SystemExit(f"tabula export: {source}: {error}") from None

    if args.leelaz_out:
        write_leelaz(network.to_leelaz(model), args.leelaz_out)
    if args.checkpoint_out:
        network.save_checkpoint(model, args.checkpoint_out)
    if args.quantize != "none":
        with tempfile.TemporaryDirectory() as scratch:
            fp32 = os.path.join(scratch, "fp32.onnx")
            network.export_onnx(model, fp32, provenance, sizes)
            _write_quantized(fp32, out, args)
    else:
        network.export_onnx(model, out, provenance, sizes)
    spec = model.spec
    print(f"wrote {out} ({spec.blocks}x{spec.filters}, {spec.head} head, sizes {sizes}, {args.quantize})",
          file=sys.stderr)
    return 0


# int8 of a KataGo network is written only where it keeps the fp32 file's top move at least this often
KATAGO_INT8_TOP1 = 0.95
KATAGO_CALIBRATION = 32  # positions of each calibration size
KATAGO_CALIBRATION_SIZES = (19, 13, 9)
# the trunk's last share of blocks kept fp32 (katago_fp32_nodes), tried in turn until int8 agrees: the fewer, the faster
KATAGO_FP32_SHARES = (0.1, 0.2, 0.3)


def _export_katago(args: argparse.Namespace) -> int:
    """``--from-katago MODEL OUT.onnx``: the fp32 file, then the int8 one where it agrees (``_katago_int8``)."""
    import time

    from tabula.engine.net import katago_model

    if len(args.paths) != 1:
        raise SystemExit("tabula export --from-katago MODEL OUT.onnx: give OUT only")
    if args.agreement_positions < 1:
        raise SystemExit("tabula export: --agreement-positions must be 1 or more")
    out = args.paths[0]
    try:
        from tabula.engine.net import katago_network
    except ImportError as error:
        raise SystemExit(f"tabula export --from-katago needs torch ({error}): pip install 'tabula[train]' (or torch)")
    started = time.monotonic()
    try:
        model = katago_model.read_model(args.from_katago)
        optimism = katago_network.DEFAULT_POLICY_OPTIMISM if args.policy_optimism is None else args.policy_optimism
        if not 0.0 <= optimism <= 1.0:
            raise SystemExit(f"tabula export: --policy-optimism must be in [0, 1], not {optimism:g}")
        net = katago_network.KataGoNet(model, policy_optimism=optimism)
    except (katago_model.KataGoModelError, katago_network.KataGoNetworkError) as error:
        raise SystemExit(f"tabula export: {error}") from None
    difference = katago_network.export_onnx(net, model, out, args.from_katago)
    print(f"wrote {out} ({katago_model.describe(model)}, fp32; onnxruntime and torch agree to {difference:.1g}) in "
          f"{time.monotonic() - started:.0f} s", file=sys.stderr)
    for key, value in _measured_metadata(args).items():
        _set_metadata_value(out, key, value)
    if not args.no_int8:
        _katago_int8(out, args)
    return 0


def _katago_int8(fp32: str, args: argparse.Namespace) -> None:
    """Quantize a converted KataGo network (7-bit weights, right on every CPU; a transformer's activations rescaled
    first, ``smooth_for_int8``; min-max calibration on 19x19, 13x13 and 9x9 positions: KataGo's activations have
    outliers that percentile calibration clips, and one size alone left the value on the others far off; the heads
    and ``katago_fp32_nodes`` stay fp32, with the trunk's last ``KATAGO_FP32_SHARES`` of blocks tried in turn, the
    fastest first) and keep the first that does as NAME-int8.onnx beside NAME.onnx: one whose top move (among the
    legal moves) is the fp32 file's on at least KATAGO_INT8_TOP1 of the positions of 19x19 real games (random games
    where there are none) and 9x9 random games. One line for each try says what was measured."""
    import time

    import onnxruntime as ort

    from tabula.engine.net.encodings import encoding_named
    from tabula.engine.rules.interface import batch_legal_masks

    started = time.monotonic()
    stem, extension = os.path.splitext(fp32)
    target = f"{stem}-int8{extension or '.onnx'}"
    encoding = encoding_named("katago-v7")
    calibration = {size: calibration_planes(size, min(args.calibration, KATAGO_CALIBRATION), args.seed + 1,
                                            args.calibration_source, args.calibration_games, encoding.name)
                   for size in KATAGO_CALIBRATION_SIZES}
    options = session_options()

    def run(path: str, planes: np.ndarray) -> list[np.ndarray]:
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        return [np.concatenate(parts) for parts in zip(*(session.run(["policy", "value", "score"],
                                                                     {"planes": planes[i: i + 8]})
                                                         for i in range(0, len(planes), 8)))]

    measured = []  # (size, planes, legal masks, the fp32 file's outputs)
    for size in (19, 9):
        states = positions(size, args.agreement_positions, args.seed + 7, args.calibration_games,
                           args.calibration_source, skip_games=50)
        planes = encoding.encode_batch(states, None)
        measured.append((size, planes, batch_legal_masks(states), run(fp32, planes)))
    scratch = target + ".tmp"
    smoothed = target + ".smoothed.tmp"
    try:
        blocks = int(json.loads(_metadata(fp32)["architecture"])["blocks"])
        # 7-bit weights ("any"), right on every CPU; a transformer's rescaled first (smooth_for_int8)
        source = smoothed if smooth_for_int8(fp32, smoothed, calibration) else fp32
        tried: set[int] = set()
        for share in KATAGO_FP32_SHARES:
            last = max(1, int(np.ceil(blocks * share)))
            if last in tried:
                continue
            tried.add(last)
            quantize_int8(source, scratch, calibration, also_exclude=katago_fp32_nodes(blocks, share),
                          op_types=["Conv", "MatMul"], method="minmax", kernels="any")
            agreed = total = 0
            value_diffs, lead_diffs, by_size = [], [], []
            for size, planes, legal, reference in measured:
                runs = [reference, run(scratch, planes)]
                tops = [np.where(legal, outputs[0], -np.inf).argmax(axis=1) for outputs in runs]
                same = int((tops[0] == tops[1]).sum())
                agreed += same
                total += len(planes)
                by_size.append(f"{size}x{size} {same}/{len(planes)}")
                value_diffs.append(np.abs(runs[0][1] - runs[1][1]))
                lead_diffs.append(np.abs(runs[0][2] - runs[1][2]))
            top1 = agreed / total
            figures = (f"the last {last} of {blocks} blocks fp32: top move the same on {agreed} of {total} positions "
                       f"({top1:.1%}; {', '.join(by_size)}), mean |value diff| {np.concatenate(value_diffs).mean():.3f}"
                       f", mean |lead diff| {np.concatenate(lead_diffs).mean():.2f} points; "
                       f"{time.monotonic() - started:.0f} s")
            if top1 >= KATAGO_INT8_TOP1:
                os.replace(scratch, target)
                print(f"wrote {target} (int8, {figures})", file=sys.stderr)
                return
            print(f"int8 with {figures}: under the bar of {KATAGO_INT8_TOP1:.0%}", file=sys.stderr)
        print("no int8 file: int8 keeps too little of the fp32 network", file=sys.stderr)
    finally:
        for path in (scratch, smoothed):
            if os.path.exists(path):
                os.remove(path)


def _set_metadata_value(path: str, key: str, value: str) -> None:
    """One metadata entry of a Tabula ONNX file set (added or replaced), the rest kept; NetworkFileError for a file
    that is no Tabula network (nothing written). The file is replaced whole: a kill leaves the old one."""
    import onnx
    from google.protobuf.message import DecodeError

    from tabula.engine.net.evaluator import NetworkFileError
    from tabula.engine.net.network import set_metadata

    try:
        proto = onnx.load(path)
    except DecodeError as error:
        raise NetworkFileError(path, f"not an ONNX file ({error})") from None
    entries = {p.key: p.value for p in proto.metadata_props}
    if not proto.graph.node or "tabula_format" not in entries:
        raise NetworkFileError(path, "not a Tabula network (no graph, or no Tabula metadata)")
    entries[key] = value
    set_metadata(proto, entries)
    onnx.save(proto, path + ".tmp")
    os.replace(path + ".tmp", path)


def _metadata(path: str) -> dict[str, str]:
    """A Tabula ONNX file's metadata entries."""
    import onnx

    return {p.key: p.value for p in onnx.load(path).metadata_props}


def _sizes(args: argparse.Namespace, spec, source: str = "") -> list[int]:
    """--board-sizes, else the sizes an ONNX source declares (a conversion keeps them), else the default."""
    from tabula.engine.net.network import default_board_sizes

    if args.board_sizes and spec.head == "pooled":
        return [int(s) for s in args.board_sizes.split(",")]
    declared = _metadata(source).get("board_sizes", "") if source.endswith(".onnx") else ""
    return [int(s) for s in declared.split(",")] if declared else default_board_sizes(spec)


def _write_quantized(source: str, out: str, args: argparse.Namespace) -> None:
    if args.aware_steps and (args.quantize != "int8" or args.fp32_blocks):
        raise SystemExit("tabula export: --aware-steps trains the trunk for --quantize int8 (7-bit weights, every "
                         "block int8)")
    metadata = _metadata(source)
    size = calibration_size([int(s) for s in metadata.get("board_sizes", "19").split(",")])
    encoding = metadata.get("input_encoding", INPUT_ENCODING)
    calibration = {size: calibration_planes(size, args.calibration, args.seed + 1, args.calibration_source,
                                            args.calibration_games, encoding)}
    if not args.aware_steps:
        quantize_int8(source, out, calibration, kernels="vnni" if args.quantize == "int8-vnni" else "any",
                      fp32_blocks=args.fp32_blocks)
        return
    from tabula.tools.learn.quantization_aware import AwareConfig

    # at the records' own komi (calibration_states draws komi from -20 to 20, which the ranges need to cover but
    # which spends the fine-tune on komi no game is played at: it kept fewer moves, docs/BENCHMARKS.md)
    states = positions(size, args.aware_positions, args.seed + 2, args.calibration_games, args.calibration_source)
    try:
        losses = quantize_int8_aware(source, out, states, AwareConfig(steps=args.aware_steps, seed=args.seed),
                                     calibration, log=lambda line: print(line, file=sys.stderr))
    except (ValueError, KeyError) as error:
        raise SystemExit(f"tabula export: --aware-steps: {source}: {error}") from None
    print(f"rounded outputs' loss against the fp32 file's on the {len(states)} positions: {losses['before']:.4f} "
          f"before, {losses['after']:.4f} after", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
