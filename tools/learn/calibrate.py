"""`tabula calibrate`: fit a network's small-board value offset to the results of the games it played.

    tabula calibrate SOURCES... --net NET-int8.onnx --out OUT-int8.onnx [--net NET.onnx --out OUT.onnx]
        [--sizes 9,13] [--max-games N]
    tabula calibrate --offset=K,KS,W,WS,M,MS --net NET-int8.onnx --out OUT-int8.onnx [--net NET.onnx --out OUT.onnx]

``--net`` names a Tabula network whose head reads the komi (``head_komi``: tabula-v2 and katago-v7 inputs), each
with the ``--out`` it becomes: the files of one network (its int8 file and its fp32 file, say), the first being the
one whose values are fitted, the file the engine runs. SOURCES are SGF files, directories or archives of its own
games on boards below 19x19 (`tabula selfplay --out DIR` writes them to DIR/sgf) at the komis it should be calibrated
at, each with a result. Every position of every game is read at the game's komi, as `tabula eval` reads it; the value
is taken back to the head's raw output x = atanh(value), and the six weights θ of the offset
(``PooledHead.value_offset_small_boards``) are fitted by maximum likelihood, P(the mover wins) = (1 + tanh(x + θ·f))
/ 2, where f are the head's komi features (the side to move's komi, its parity wave and a constant, the mover's
term, each with its size-scaled copy) times the small-board scale (1 on 9x9, 0 on 19x19). Each OUT is its NET with
the offset added to its graph in front of the value's tanh (``add_offset``), everything else byte for byte: an int8
file keeps its quantized trunk, which quantizing again would not reproduce, and its measured metadata (resignation
thresholds, ownership share). A network that has the offset already gets the fit added to it (one calibrated
before the mover's term, with four weights, gets its offset's nodes made anew with the six).

Why an offset and not training: it depends on the komi and the side to move alone, so the search compares the same
moves nearly the same way (``PooledHead``), and six numbers fit in seconds from a few thousand games where training
the value would need the teacher's labels again to keep what it learned.

Printed (stdout): per size, komi and colour, the mover's mean predicted winrate against the share of those
positions the mover went on to win, before and after, and the weights. These are the games fitted: measure a
calibration on other games (`tabula eval OUT.onnx DIR/sgf --size 9`).

``--offset`` writes weights given, as a fit printed them (a model card's, say), into files that have no offset yet,
and reads no games: the same offset written again into the files of its network, or into a new export of the same
weights. Four weights are an offset fitted before the mover's term (its two at zero).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field

import numpy as np

from tabula.engine.data.records import RecordFilter, iter_records
from tabula.engine.net.network import OFFSET_PARAMETER, OFFSET_WEIGHTS, with_movers_weights
from tabula.engine.rules.coords import BLACK
from tabula.engine.rules.game import SIMPLE_KO, GameState, Rules

BATCH = 256  # positions a network call
NEWTON_STEPS = 25
# The value as read back through atanh: a value of exactly ±1 (an fp32 tanh saturates) would be infinite.
VALUE_LIMIT = 1.0 - 1e-6


@dataclass
class Positions:
    """What the fit reads of every position: the network's raw value, the offset's features, whether the mover
    went on to win, and the cell it belongs to (board size, komi, the mover: 1 black, 0 white)."""

    raw: list[np.ndarray] = field(default_factory=list)
    features: list[np.ndarray] = field(default_factory=list)
    won: list[np.ndarray] = field(default_factory=list)
    cells: list[np.ndarray] = field(default_factory=list)
    games: int = 0

    def add(self, raw: np.ndarray, features: np.ndarray, won: np.ndarray, cells: np.ndarray) -> None:
        self.raw.append(raw)
        self.features.append(features)
        self.won.append(won)
        self.cells.append(cells)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        if not self.raw:
            return np.zeros(0), np.zeros((0, OFFSET_WEIGHTS)), np.zeros(0), np.zeros((0, 3))
        return (np.concatenate(self.raw), np.concatenate(self.features), np.concatenate(self.won),
                np.concatenate(self.cells))


def offset_features(komi: np.ndarray, wave: np.ndarray, size: int) -> np.ndarray:
    """float64 [B, 6]: what ``PooledHead.value_offset_small_boards`` multiplies, its inputs (the side to move's komi
    / KOMI_SCALE and the parity wave, as the head reads them from the global planes, and the mover's constant 1)
    with their size-scaled copies (``network.with_size_term``), times the small-board scale."""
    scaled = (size - 14.0) / 10.0
    smallness = max(19.0 - size, 0.0) / 10.0
    ones = np.ones_like(komi)
    return (np.stack([komi, komi * scaled, wave, wave * scaled, ones, ones * scaled], axis=1).astype(np.float64)
            * smallness)


def fit_offset(raw: np.ndarray, features: np.ndarray, won: np.ndarray, ridge: float = 1e-3) -> np.ndarray:
    """θ maximising the likelihood of ``won`` (1 the mover won, 0 lost) under P = sigmoid(2 (raw + features·θ)):
    Newton's method from zero. The likelihood is concave in θ; features that are the same up to a factor (one board
    size alone makes a komi and its size-scaled copy proportional) are resolved by the least-squares step. A
    penalty of ``ridge`` × positions × |θ|² / 2 keeps θ finite where the results separate (a colour that won every
    game), where the likelihood alone would push every value to ±1."""
    theta = np.zeros(features.shape[1])
    for _ in range(NEWTON_STEPS):
        p = 1.0 / (1.0 + np.exp(-2.0 * (raw + features @ theta)))
        gradient = 2.0 * features.T @ (won - p) - ridge * len(raw) * theta
        hessian = 4.0 * (features * (p * (1.0 - p))[:, None]).T @ features + ridge * len(raw) * np.eye(len(theta))
        step = np.linalg.lstsq(hessian, gradient, rcond=None)[0]
        theta += step
        if np.max(np.abs(step)) < 1e-9:
            break
    return theta


def cell_table(raw: np.ndarray, features: np.ndarray, won: np.ndarray, cells: np.ndarray,
               theta: np.ndarray) -> list[str]:
    """Markdown rows: per (size, komi), the mover's mean predicted winrate against the share won, by colour, before
    and after the offset ``theta``."""
    before = (1.0 + np.tanh(raw)) / 2.0
    after = (1.0 + np.tanh(raw + features @ theta)) / 2.0
    rows = ["| board | komi | colour to move | positions | predicted before | predicted after | won |",
            "|---|---|---|---|---|---|---|"]
    for size, komi in sorted({(int(s), float(k)) for s, k, _ in cells}):
        for black, colour in ((1, "black"), (0, "white")):
            mask = (cells[:, 0] == size) & (cells[:, 1] == komi) & (cells[:, 2] == black)
            if mask.any():
                rows.append(f"| {size}×{size} | {komi:g} | {colour} | {int(mask.sum())} | {before[mask].mean():.3f} "
                            f"| {after[mask].mean():.3f} | {won[mask].mean():.3f} |")
    return rows


def read_games(evaluator, encoding, sources: list[str], sizes: list[int], max_games: int | None) -> Positions:
    """Every position of the kept games of each size with a winner, as the fit reads it."""
    komi_plane, wave_plane = encoding.plane_names.index("komi"), encoding.plane_names.index("komi_wave")
    positions = Positions()
    for size in sizes:
        reader, records = iter_records(sources, RecordFilter(size=size), max_games)
        states: list[GameState] = []
        won: list[float] = []

        def flush() -> None:
            if not states:
                return
            planes = encoding.encode_batch(states, None)
            value = evaluator.evaluate_encoded(states, planes).value.astype(np.float64)
            komi, wave = planes[:, komi_plane].mean(axis=(1, 2)), planes[:, wave_plane].mean(axis=(1, 2))
            black = np.asarray([s.to_move == BLACK for s in states], dtype=np.float64)
            cells = np.stack([np.full(len(states), size), np.asarray([s.rules.komi for s in states]), black], 1)
            positions.add(np.arctanh(np.clip(value, -VALUE_LIMIT, VALUE_LIMIT)), offset_features(komi, wave, size),
                          np.asarray(won), cells)
            states.clear()
            won.clear()

        for record in records:
            if record.value_weight <= 0 or record.winner == 0:
                continue  # no result to fit: a draw, a game lost on time, a handicap game
            positions.games += 1
            state = record.replay(Rules(komi=record.komi, superko=SIMPLE_KO), upto=0)
            for color, move in record.moves:
                state.to_move = color
                states.append(state.copy())
                won.append(1.0 if record.winner == color else 0.0)
                state.play(move, color)
                if len(states) >= BATCH:
                    flush()
        flush()
        print(f"{size}x{size}: {reader.report.format()}", file=sys.stderr)
    return positions


VALUE_OUTPUT = "value"
NODE_PREFIX = "/head/calibration/"  # under /head/: int8 quantization keeps the heads fp32 (export.after_heads)


def metadata_of(proto) -> dict[str, str]:
    """An ONNX file's metadata entries."""
    return {p.key: p.value for p in proto.metadata_props}


def spec_of(proto):
    """The NetSpec a Tabula ONNX file (fp32 or int8) describes in its metadata; ValueError for another file."""
    from tabula.engine.net.network import NetSpec

    try:
        return NetSpec.from_dict(json.loads(metadata_of(proto)["architecture"]))
    except (KeyError, TypeError) as error:
        raise ValueError(f"not a Tabula network (no architecture in its metadata: {error})") from None


def padded(theta) -> np.ndarray:
    """An offset's weights as six: four (fitted before the mover's term) with the mover's two at zero. ValueError
    for another count."""
    theta = np.asarray(theta, dtype=np.float64).reshape(-1)
    if len(theta) not in (4, OFFSET_WEIGHTS):
        raise ValueError(f"an offset has {OFFSET_WEIGHTS} weights (or 4, before the mover's term), not {len(theta)}")
    return with_movers_weights(theta)


def remove_offset(proto) -> np.ndarray:
    """Take the offset's nodes and weights that ``add_offset`` put into ``proto`` (changed in place) out again, the
    value's Tanh reading the head's output as before; returns the weights it had, as six. ValueError where the graph
    has the offset's weight without those nodes."""
    from onnx import numpy_helper

    graph = proto.graph
    weight = [t for t in graph.initializer if t.name == OFFSET_PARAMETER]
    nodes = [node for node in graph.node if node.name.startswith(NODE_PREFIX)]
    add = [node for node in nodes if list(node.output) == [NODE_PREFIX + "value"]]
    tanh = [node for node in graph.node if node.op_type == "Tanh" and list(node.output) == [VALUE_OUTPUT]
            and list(node.input) == [NODE_PREFIX + "value"]]
    if len(weight) != 1 or len(add) != 1 or len(tanh) != 1:
        raise ValueError("its offset is not the one tabula calibrate writes (an exported copy): calibrate the file "
                         "it was exported from")
    theta = padded(numpy_helper.to_array(weight[0]))
    tanh[0].input[0] = add[0].input[0]
    for node in nodes:
        graph.node.remove(node)
    for tensor in [t for t in graph.initializer if t.name == OFFSET_PARAMETER or t.name.startswith(NODE_PREFIX)]:
        graph.initializer.remove(tensor)
    return theta


def add_offset(proto, theta: np.ndarray) -> None:
    """Add the small-board value offset ``theta`` (six weights, or four with the mover's at zero) to a Tabula
    network's ONNX graph (``proto``, changed in place): to its ``OFFSET_PARAMETER`` where it has six, else as new nodes
    in front of the Tanh that gives the ``value`` output (an offset of four weights, made before the mover's term,
    taken out first and its weights added), computing what ``PooledHead`` computes from the input planes (the komi,
    komi_wave and on_board planes' means, the board's side from the input's shape). ValueError where the graph has no
    such Tanh, or lost the weight's name to an optimizer (a file quantized from one that had the offset: calibrate
    its fp32 file and quantize that)."""
    from onnx import TensorProto, helper, numpy_helper

    from tabula.engine.net.network import NetSpec, set_metadata

    theta = padded(theta)
    graph = proto.graph
    metadata = metadata_of(proto)
    architecture = json.loads(metadata["architecture"])
    plane_names = NetSpec.from_dict(architecture).encoding.plane_names
    weights = {t.name: t for t in graph.initializer}
    if OFFSET_PARAMETER in weights:
        existing = numpy_helper.to_array(weights[OFFSET_PARAMETER]).reshape(-1).astype(np.float64)
        if len(existing) == OFFSET_WEIGHTS:
            weights[OFFSET_PARAMETER].CopyFrom(numpy_helper.from_array((existing + theta)[None, :].astype(np.float32),
                                                                    OFFSET_PARAMETER))
            return
        theta = theta + remove_offset(proto)
    elif architecture.get("small_board_value_offset"):
        raise ValueError("its graph has the offset under another name (an optimized or quantized copy): calibrate "
                         "the fp32 file it was made from, then quantize that")
    tanh = [node for node in graph.node if node.op_type == "Tanh" and list(node.output) == [VALUE_OUTPUT]]
    if len(tanh) != 1:
        raise ValueError("no Tanh node gives its value output")
    planes = graph.input[0].name
    p = NODE_PREFIX

    def constant(name: str, value) -> str:
        graph.initializer.append(numpy_helper.from_array(np.asarray(value), p + name))
        return p + name

    inputs = constant("input_planes", np.asarray([plane_names.index(name) for name in ("komi", "komi_wave",
                                                                                       "on_board")], np.int64))
    side_axis = constant("side_axis", np.asarray(2, np.int64))
    graph.initializer.append(numpy_helper.from_array(theta[None, :].astype(np.float32), OFFSET_PARAMETER))
    nodes = [
        helper.make_node("Gather", [planes, inputs], [p + "input_planes_out"], axis=1),
        # [B, 3]: the side to move's komi / KOMI_SCALE, the parity wave (each a plane of one value) and 1
        helper.make_node("ReduceMean", [p + "input_planes_out"], [p + "features"], axes=[2, 3], keepdims=0),
        helper.make_node("Shape", [planes], [p + "shape"]),
        helper.make_node("Gather", [p + "shape", side_axis], [p + "side_int"], axis=0),
        helper.make_node("Cast", [p + "side_int"], [p + "side"], to=TensorProto.FLOAT),
        # with_size_term's (size - 14) / 10, and the small-board scale max(19 - size, 0) / 10
        helper.make_node("Sub", [p + "side", constant("fourteen", np.float32(14.0))], [p + "from14"]),
        helper.make_node("Div", [p + "from14", constant("ten", np.float32(10.0))], [p + "size_term"]),
        helper.make_node("Sub", [constant("nineteen", np.float32(19.0)), p + "side"], [p + "below19"]),
        helper.make_node("Relu", [p + "below19"], [p + "below19_relu"]),
        helper.make_node("Div", [p + "below19_relu", p + "ten"], [p + "smallness"]),
        # [[θ0, θ1], [θ2, θ3], [θ4, θ5]]: features @ it = [θ0 k + θ2 w + θ4, θ1 k + θ3 w + θ5], the plain terms
        # and the size-scaled ones
        helper.make_node("Reshape", [OFFSET_PARAMETER, constant("matrix", np.asarray([3, 2], np.int64))],
                         [p + "weight"]),
        helper.make_node("MatMul", [p + "features", p + "weight"], [p + "terms"]),
        helper.make_node("Reshape", [p + "size_term", constant("one", np.asarray([1], np.int64))],
                         [p + "size_term_1"]),
        helper.make_node("Concat", [constant("unit", np.asarray([1.0], np.float32)), p + "size_term_1"],
                         [p + "scales"], axis=0),
        helper.make_node("Mul", [p + "terms", p + "scales"], [p + "scaled_terms"]),
        helper.make_node("ReduceSum", [p + "scaled_terms", p + "one"], [p + "summed"], keepdims=0),
        helper.make_node("Mul", [p + "summed", p + "smallness"], [p + "offset"]),
        helper.make_node("Add", [tanh[0].input[0], p + "offset"], [p + "value"]),
    ]
    tanh[0].input[0] = p + "value"
    position = list(graph.node).index(tanh[0])
    for offset, node in enumerate(nodes):
        node.name = p + node.output[0].rsplit("/", 1)[-1]
        graph.node.insert(position + offset, node)
    architecture["small_board_value_offset"] = True
    NetSpec.from_dict(architecture)  # the spec still holds (head_komi)
    set_metadata(proto, {**metadata, "architecture": json.dumps(architecture, sort_keys=True)})


def calibrate_proto(proto, net: str, theta: np.ndarray, games: int | None) -> None:
    """``proto`` (the file ``net``, loaded) with ``theta`` added to its offset (``add_offset``) and its provenance
    extended (fitted to ``games`` games, or given where None), checked; ValueError where the offset cannot be
    added."""
    import onnx

    from tabula.engine.net.netfile import file_sha256
    from tabula.engine.net.network import set_metadata

    add_offset(proto, theta)
    metadata = metadata_of(proto)
    how = (f"fitted to {games} games" if games is not None
           else f"({', '.join(f'{t:+.6g}' for t in theta)}) given")
    metadata["provenance"] = (f"{metadata.get('provenance', '')}; then its small-board value offset {how} "
                              f"(tabula calibrate, from {os.path.basename(net)} sha256:{file_sha256(net)[:16]})")
    set_metadata(proto, metadata)
    onnx.checker.check_model(proto)


def offset_of(proto) -> np.ndarray | None:
    """The small-board value offset's weights a Tabula ONNX file has, or None where it has none."""
    from onnx import numpy_helper

    for tensor in proto.graph.initializer:
        if tensor.name == OFFSET_PARAMETER:
            return numpy_helper.to_array(tensor).reshape(-1).astype(np.float64)
    return None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    for i, arg in enumerate(argv[:-1]):  # weights that start with a minus: argparse would take them for an option
        if arg == "--offset":
            argv[i:i + 2] = [f"--offset={argv[i + 1]}"]
            break
    parser = argparse.ArgumentParser(prog="tabula calibrate", description=__doc__.split("\n\n")[0])
    parser.add_argument("sources", nargs="*", help="SGF files, directories or archives of the network's games")
    parser.add_argument("--net", action="append", required=True,
                        help="a Tabula ONNX file of the network (the first: the one whose values are fitted)")
    parser.add_argument("--out", action="append", required=True, help="where each --net goes, in order")
    parser.add_argument("--sizes", default=None, help="board sizes to read, each below 19 (default: 9,13)")
    parser.add_argument("--max-games", type=int, default=None, help="games a size at most (default: all)")
    parser.add_argument("--offset", default=None, metavar="K,KS,W,WS,M,MS",
                        help="write these six weights (komi, its size term, wave, its size term, mover, its size "
                             "term, as a fit printed them; four: the mover's at zero) instead of fitting, into "
                             "files without an offset: no SOURCES")
    args = parser.parse_args(argv)
    theta = None
    if args.offset is not None:
        try:
            theta = np.asarray([float(w) for w in args.offset.split(",")], dtype=np.float64)
        except ValueError:
            theta = np.zeros(0)
        if len(theta) not in (4, OFFSET_WEIGHTS) or not np.all(np.isfinite(theta)):
            parser.error(f"--offset {args.offset}: six comma-separated numbers (komi, komi x size term, wave, "
                         f"wave x size term, mover, mover x size term), or the first four")
        if args.sources or args.sizes is not None or args.max_games is not None:
            parser.error("--offset reads no games: give SOURCES (with --sizes, --max-games) or --offset, not both")
    elif not args.sources:
        parser.error("give the network's games (SOURCES), or --offset")
    args.sizes = "9,13" if args.sizes is None else args.sizes
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--sizes {args.sizes}: comma-separated board sizes")
    if not sizes or any(not 2 <= s < 19 for s in sizes):
        parser.error(f"--sizes {args.sizes}: sizes from 2 to 18 (the offset is zero on 19x19 and above)")
    if args.max_games is not None and args.max_games < 1:
        parser.error("--max-games: 1 or more")
    if len(args.net) != len(args.out):
        parser.error("give one --out for each --net")
    if set(map(os.path.abspath, args.out)) & set(map(os.path.abspath, args.net)) or len(set(args.out)) < len(args.out):
        parser.error("each --out a new file: neither a --net nor another --out")
    for path in [*args.net, *args.sources]:
        if not os.path.exists(path):
            parser.error(f"{path}: no such file or directory")
    for path in args.out:
        if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            parser.error(f"--out {path}: no such folder")

    import onnx
    from google.protobuf.message import DecodeError

    from tabula.engine.net.evaluator import NetworkFileError, OnnxEvaluator

    protos, specs = [], []
    for path in args.net:
        try:
            protos.append(onnx.load(path))
            specs.append(spec_of(protos[-1]))
        except (DecodeError, OSError, ValueError) as error:
            print(f"tabula calibrate: {path}: {error}", file=sys.stderr)
            return 2
    try:
        evaluator = OnnxEvaluator(args.net[0], symmetry="identity", log=None)
    except NetworkFileError as error:
        print(f"tabula calibrate: {error}", file=sys.stderr)
        return 2
    for path, spec in zip(args.net, specs):
        if not spec.head_komi:
            print(f"tabula calibrate: {path} does not read the komi in its head (a tabula-v2 or katago-v7 network "
                  f"with head_komi); it has no small-board value offset to fit", file=sys.stderr)
            return 2
        if spec.input_encoding != specs[0].input_encoding:
            print(f"tabula calibrate: {path} reads {spec.input_encoding}, {args.net[0]} {specs[0].input_encoding}: "
                  f"give the files of one network", file=sys.stderr)
            return 2
    games = None
    if theta is not None:
        for proto, path in zip(protos, args.net):
            existing = offset_of(proto)
            if existing is not None:
                print(f"tabula calibrate: {path} has a small-board value offset already "
                      f"({', '.join(f'{t:+.4f}' for t in existing)}): --offset writes into a file without "
                      f"one (the fit, from games, adds to it)", file=sys.stderr)
                return 2
    else:
        missing = [s for s in sizes if s not in evaluator.board_sizes]
        if missing:
            print(f"tabula calibrate: {args.net[0]} does not play {missing[0]}x{missing[0]}", file=sys.stderr)
            return 2
        positions = read_games(evaluator, specs[0].encoding, args.sources, sizes, args.max_games)
        raw, features, won, cells = positions.arrays()
        if len(raw) == 0:
            print("tabula calibrate: no position of a game with a winner in the sources", file=sys.stderr)
            return 2
        theta, games = fit_offset(raw, features, won), positions.games
        print("\n".join(cell_table(raw, features, won, cells, theta)))
        print(f"\noffset weights (komi, komi x size term, wave, wave x size term, mover, mover x size term): "
              f"{', '.join(f'{t:+.4f}' for t in theta)}; {len(raw)} positions of {positions.games} games")
    for proto, net in zip(protos, args.net):  # every file made before any is written: all of them or none
        try:
            calibrate_proto(proto, net, theta, games)
        except ValueError as error:
            print(f"tabula calibrate: {net}: {error}", file=sys.stderr)
            return 2
    total = offset_of(protos[0])
    print(f"the files' offset now, as a network without one takes it: "
          f"--offset={','.join(f'{t:.4f}' for t in total)}")
    try:
        for proto, out in zip(protos, args.out):
            onnx.save(proto, out + ".tmp")
    except OSError as error:
        for out in args.out:
            if os.path.exists(out + ".tmp"):
                os.remove(out + ".tmp")
        print(f"tabula calibrate: {error}", file=sys.stderr)
        return 2
    for out in args.out:  # each whole, after every one was written: a kill leaves no half-written file
        os.replace(out + ".tmp", out)
        print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
