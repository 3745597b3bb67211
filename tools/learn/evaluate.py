"""`tabula eval`: how well an ONNX network predicts the moves and results of SGF game records (onnxruntime only).

Every position of every kept game counts: the board before each move, with that move as the target. Top-k accuracy
reads the network's policy masked to legal moves (``OnnxEvaluator``, identity symmetry). Value MSE compares the value
(side to move's view) with the game's result (+1 win, -1 loss, 0 draw) over the positions of games whose result is a
value target (not time, forfeit or handicap; see engine/data/records.py). Records are filtered as `tabula prepare`
does (``--handicap policy`` keeps handicap games' positions, for the policy and a teacher's figures on the positions a
handicap game meets); the filter report goes to stderr, the figures to stdout in ``name: value`` lines. Calibration
per colour (``black_to_move_predicted`` against ``black_to_move_won``, the same for white): the mover's winrate by the
value head against the share of those positions the mover went on to win; ``--size`` reads one board size's records
(self-play SGF of 9x9, say) with a network that plays several.

Resignation (``resign_false_T`` lines): at each threshold T of ``RESIGN_THRESHOLDS``, the share of games with a
result in which the eventual winner's own winrate (the network's value) stayed under T for ``RESIGN_CONSECUTIVE``
of its moves in a row, after the first quarter of the board's points: the games that resigning at T would have
thrown away (AlphaGo Zero keeps this under 5%). The model card quotes them; ``--resign-winrate`` defaults follow.

``--komi K`` reads every record as played at komi K (a network that sees the komi then sees K): with the
``white_score_lead`` line, the mean of the score head's final margin from white's view over every position, it
measures how the predicted lead moves with the komi (point for point, for a network that has learned it).

``--visits N`` also searches every ``--every``-th position with N visits at the default search settings, as
``tabula gtp`` plays (a random symmetry per leaf, the root averaged over all 8), and reports how often the search's
move is the move played (``search_top1``) beside the raw policy's on the same positions (``policy_top1_searched``):
a search should never predict strong players' moves worse than its network alone.

``--teacher T --teacher-every K`` also has a teacher (a KataGo model file, its ONNX or a Tabula ONNX network: what
``tools/learn/teacher.Teacher`` loads) judge every K-th position with its network alone (``Teacher.evaluate``: what
``tabula distill`` labels with at ``--visits 0``, before the labels' storage rounds them), each network reading the
position in its own encoding, at the record's komi and rules as the network does. Over those positions
(``TeacherScores``): ``teacher_policy_kl``, the mean KL(teacher || network) in nats over the legal moves and pass
(both policies are masked to the same legal moves, pass last; the network's probabilities floored at ``KL_FLOOR``);
``teacher_top1``, how often the network's likeliest move is the teacher's; ``teacher_value_mse``, the mean squared
difference of the two values, each ``Evaluation.value``: the side to move's view in [-1, 1] (a Tabula network's
value head; a KataGo network's P(win) - P(loss)); ``teacher_value_slope``, the least-squares slope of the network's
value on the teacher's through the origin (1: as confident as the teacher; under 1, a value pulled towards 0, as
game results that often overturn the teacher's judgement teach it); ``teacher_value_bias_white``, the mean of
(network - teacher) values from white's view (above 0: the network favours white); ``teacher_lead_mae``, where both
have a score head, the mean absolute difference of the predicted leads in points (KataGo's lead, Tabula's score
head), and ``teacher_lead_bias_white``, the mean difference from white's view; ``teacher_value_mse_moves_A_B`` and
``teacher_lead_mae_moves_A_B``, the same over the positions after A to B moves (``TeacherScores.PHASES``); and, for
reference, the teacher's own ``teacher_own_top1`` (its likeliest move is the move played) and
``teacher_own_value_mse`` (its value against the game's result, over the positions whose result is a value target).
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from tabula.engine.config import NetConfig, PlayConfig, SearchConfig
from tabula.engine.data.records import RecordFilter, is_validation, iter_records
from tabula.engine.net.evaluator import Evaluation, OnnxEvaluator
from tabula.engine.play.search import Search
from tabula.engine.rules.coords import BLACK, PASS, WHITE
from tabula.engine.rules.game import SIMPLE_KO, GameState, Rules
from tabula.gtp.flags import Flag, add_flags, from_flags

TOP_K = 5
EVAL_SEARCH = SearchConfig(visits=0)  # tabula gtp's search, off unless --visits asks for it
EVAL_NET = NetConfig(provider="cpu")
RESIGN_THRESHOLDS = (0.02, 0.05, 0.10, 0.15, 0.20)
RESIGN_CONSECUTIVE = PlayConfig.resign_consecutive  # the engine's own rule: resignation as the decider applies it
KL_FLOOR = 1e-12  # the network's probability of a move, at least, in the KL: a float32 softmax can round to 0


class Scores:
    """Running sums over evaluated positions."""

    def __init__(self) -> None:
        self.games = 0
        self.positions = 0
        self.top1 = 0
        self.top5 = 0
        self.value_sq = 0.0
        self.value_positions = 0
        # per side to move (BLACK, WHITE): [positions, the mover's predicted winrate summed, the mover's wins summed]
        self.by_mover = {BLACK: [0.0, 0.0, 0.0], WHITE: [0.0, 0.0, 0.0]}
        self.positions_seen = 0  # positions met so far, evaluated or still in the batch
        # per position of a game with a result: (game number, the mover is the winner, move number, value)
        self.resign_rows: list[tuple[int, bool, int, float]] = []
        self.resign_games = 0

    def add(self, policy: np.ndarray, value: np.ndarray, targets: np.ndarray, z: np.ndarray,
            weight: np.ndarray, where: list[tuple[int, int, int]], movers: np.ndarray) -> None:
        """``where``: (game number, move number, first move resignation may happen) of each position; ``movers``:
        the colour to move in each (BLACK or WHITE)."""
        for color, row in self.by_mover.items():
            counted = (movers == color) & (weight > 0)
            row[0] += float(counted.sum())
            row[1] += float(((value[counted] + 1.0) / 2.0).sum())
            row[2] += float(((z[counted] + 1.0) / 2.0).sum())
        for (game, move_number, skip), result, mover_value in zip(where, z.tolist(), value.tolist()):
            if result != 0.0:  # games whose result is a value target, draws aside
                self.resign_rows.append((game, result > 0, move_number, skip, mover_value))
        top = np.argsort(-policy, axis=1, kind="stable")[:, :TOP_K]
        self.positions += len(targets)
        self.top1 += int((top[:, 0] == targets).sum())
        self.top5 += int((top == targets[:, None]).any(axis=1).sum())
        self.value_sq += float((((value - z) ** 2) * weight).sum())
        self.value_positions += int(weight.sum())

    def lines(self) -> list[str]:
        positions = max(self.positions, 1)
        mse = self.value_sq / self.value_positions if self.value_positions else float("nan")
        return [f"games: {self.games}", f"positions: {self.positions}",
                f"top1: {self.top1 / positions:.4f}", f"top5: {self.top5 / positions:.4f}",
                f"value_mse: {mse:.4f}", f"value_positions: {self.value_positions}"] + self.calibration_lines() \
            + self.resign_lines()

    def calibration_lines(self) -> list[str]:
        """Per side to move, the mover's winrate by the value head against the share of those positions the mover
        went on to win (a draw half): a value head calibrated for both colours has the two close for each. Self-play
        whose first player wins most games teaches a head that favours it."""
        lines = []
        for color, name in ((BLACK, "black"), (WHITE, "white")):
            positions, predicted, won = self.by_mover[color]
            for what, total in (("predicted", predicted), ("won", won)):
                lines.append(f"{name}_to_move_{what}: {total / positions if positions else float('nan'):.4f}")
        return lines

    def resign_lines(self) -> list[str]:
        """``resign_false_T: share`` for every threshold (see the module docstring)."""
        thrown = {t: set() for t in RESIGN_THRESHOLDS}
        runs: dict[tuple[int, float], int] = {}
        for game, winner, move_number, skip, value in self.resign_rows:
            if not winner:
                continue
            for t in RESIGN_THRESHOLDS:
                key = (game, t)
                runs[key] = runs.get(key, 0) + 1 if (value + 1.0) / 2.0 < t and move_number >= skip else 0
                if runs[key] >= RESIGN_CONSECUTIVE:
                    thrown[t].add(game)
        games = max(self.resign_games, 1)
        return [f"resign_games: {self.resign_games}"] + [
            f"resign_false_{t:.2f}: {len(thrown[t]) / games:.4f}" for t in RESIGN_THRESHOLDS]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tabula eval", description=__doc__)
    parser.add_argument("weights",
                        help="ONNX network, or rollout policy weights (.npz, `tabula train --model rollout`): "
                             "then only top-1 over every non-pass move")
    parser.add_argument("sources", nargs="+", metavar="ARCHIVE", help="tar.xz/tar.gz/zip archive, folder or SGF file")
    parser.add_argument("--max-games", type=int, default=None, help="stop after this many kept games")
    parser.add_argument("--split", choices=("all", "train", "val"), default="all",
                        help="only the games `tabula prepare` with --val-fraction would put on this side")
    parser.add_argument("--val-fraction", type=float, default=0.02)
    parser.add_argument("--batch", type=int, default=256, help="positions per network call")
    add_flags(parser, EVAL_NET, {"threads": "onnxruntime threads (0: onnxruntime decides)",
                                 "provider": Flag("auto | cpu | cuda | tensorrt", name="--provider")}, prefix="net_")
    parser.add_argument("--min-moves", type=int, default=30)
    parser.add_argument("--size", type=int, default=0,
                        help="read the records of this board size (default: the network's only size, else 19)")
    add_flags(parser, EVAL_SEARCH, {"visits": "also search positions with this many visits (0: no search)",
                                     "threads": "search threads (with --visits)"})
    parser.add_argument("--every", type=int, default=10, help="search every k-th position (with --visits)")
    parser.add_argument("--komi", type=float, default=None,
                        help="read every record at this komi instead of its own (a network that sees the komi)")
    parser.add_argument("--record-komi", type=float, default=None,
                        help="only the records played at this komi (an archive of several: Tom's 7.5 and 6.5)")
    parser.add_argument("--handicap", choices=("drop", "policy", "value"), default="drop",
                        help="games with handicap or setup stones: drop them (default), keep their moves "
                             "(policy, and a teacher's figures; no value target), or their results as well")
    parser.add_argument("--teacher", default=None,
                        help="also compare with this teacher (a KataGo model file, its ONNX, or a Tabula ONNX "
                             "network) on every --teacher-every-th position")
    parser.add_argument("--teacher-every", type=int, default=10,
                        help="the teacher judges every k-th position (with --teacher; a teacher is slow)")
    args = parser.parse_args(argv)
    if args.teacher_every < 1:
        parser.error("--teacher-every must be at least 1")
    return args


class SearchScores:
    """How often a search's move, and the raw policy's best move, is the move played, on the same positions."""

    def __init__(self, weights: str, config: SearchConfig, provider: str, net_threads: int = 0):
        evaluator = OnnxEvaluator(weights, symmetry="random", rng=np.random.default_rng(0), provider=provider,
                                  threads=net_threads, log=None)
        self.raw = OnnxEvaluator(weights, symmetry="identity", provider=provider, threads=net_threads, log=None)
        self.search = Search(evaluator, config, rng=np.random.default_rng(1))
        self.positions = self.search_hits = self.policy_hits = 0

    def add(self, state: GameState, target: int) -> None:
        move = self.search.run(state).move
        self.search_hits += (state.size * state.size if move == PASS else move) == target
        self.policy_hits += int(np.argmax(self.raw.evaluate([state]).policy[0])) == target
        self.positions += 1

    def lines(self) -> list[str]:
        positions = max(self.positions, 1)
        return [f"searched_positions: {self.positions}", f"search_top1: {self.search_hits / positions:.4f}",
                f"policy_top1_searched: {self.policy_hits / positions:.4f}"]


class TeacherScores:
    """A network's agreement with a teacher on the same positions (see the module docstring); both evaluations'
    rows are those positions, policies [B, N*N+1] over the legal moves with pass last, values the side to move's
    view in [-1, 1], scores the side to move's lead in points."""

    # the stages of a game the value and lead errors are also given for, by the moves played before the position
    PHASES = (0, 50, 100, 150, 200)

    def __init__(self) -> None:
        self.positions = 0
        self.kl = 0.0
        self.top1 = 0
        self.value_sq = 0.0
        self.value_cross = 0.0  # sum of net * teacher values: with value_teacher_sq, the net's slope on the teacher's
        self.value_teacher_sq = 0.0
        self.value_white = 0.0  # sum of (net - teacher) values from white's view
        self.lead_abs = 0.0
        self.lead_white = 0.0
        self.lead_positions = 0
        self.own_top1 = 0
        self.own_value_sq = 0.0
        self.own_value_positions = 0.0
        self.with_views = False  # whether the bias figures (white to move known) were added
        stages = len(self.PHASES)
        self.phase_positions, self.phase_value_sq, self.phase_lead_abs = (np.zeros(stages) for _ in range(3))

    def add(self, net: Evaluation, teacher: Evaluation, targets: np.ndarray, z: np.ndarray,
            weight: np.ndarray, moves: np.ndarray | None = None, white: np.ndarray | None = None) -> None:
        """``targets``: the moves played (pass: N*N); ``z``, ``weight``: the game's result from the side to move's
        view and whether it is a value target, as ``Scores.add`` takes them; ``moves``: the moves played before
        each position (none: no figures by stage); ``white``: whether white is to move (none: no bias figures)."""
        if net.policy.shape != teacher.policy.shape:
            raise ValueError(f"the teacher's policy has {teacher.policy.shape[1]} entries and the network's "
                             f"{net.policy.shape[1]}")
        p = teacher.policy.astype(np.float64)
        q = np.maximum(net.policy.astype(np.float64), KL_FLOOR)
        terms = np.where(p > 0, p * (np.log(np.where(p > 0, p, 1.0)) - np.log(q)), 0.0)
        self.kl += float(terms.sum())
        self.positions += len(p)
        teacher_best = np.argmax(teacher.policy, axis=1)
        self.top1 += int((np.argmax(net.policy, axis=1) == teacher_best).sum())
        net_value = net.value.astype(np.float64)
        value_off = net_value - teacher.value
        self.value_sq += float((value_off ** 2).sum())
        self.value_cross += float((net_value * teacher.value).sum())
        self.value_teacher_sq += float((teacher.value.astype(np.float64) ** 2).sum())
        views = None if white is None else np.where(np.asarray(white, bool), 1.0, -1.0)
        if views is not None:
            self.value_white += float((value_off * views).sum())
        lead_off = None
        if net.score is not None and teacher.score is not None:
            lead_off = net.score.astype(np.float64) - teacher.score
            self.lead_abs += float(np.abs(lead_off).sum())
            self.lead_positions += len(p)
            if views is not None:
                self.lead_white += float((lead_off * views).sum())
        if moves is not None:
            stage = np.searchsorted(self.PHASES, np.asarray(moves), side="right") - 1
            np.add.at(self.phase_positions, stage, 1.0)
            np.add.at(self.phase_value_sq, stage, value_off ** 2)
            if lead_off is not None:
                np.add.at(self.phase_lead_abs, stage, np.abs(lead_off))
        self.own_top1 += int((teacher_best == targets).sum())
        self.own_value_sq += float((((teacher.value.astype(np.float64) - z) ** 2) * weight).sum())
        self.own_value_positions += float(weight.sum())
        self.with_views = self.with_views or views is not None

    def lines(self) -> list[str]:
        positions = max(self.positions, 1)
        own_mse = self.own_value_sq / self.own_value_positions if self.own_value_positions else float("nan")
        lines = [f"teacher_positions: {self.positions}", f"teacher_policy_kl: {self.kl / positions:.4f}",
                 f"teacher_top1: {self.top1 / positions:.4f}", f"teacher_value_mse: {self.value_sq / positions:.4f}"]
        if self.value_teacher_sq > 0:
            lines.append(f"teacher_value_slope: {self.value_cross / self.value_teacher_sq:.4f}")
        if self.with_views:
            lines.append(f"teacher_value_bias_white: {self.value_white / positions:.4f}")
        if self.lead_positions:
            lines.append(f"teacher_lead_mae: {self.lead_abs / self.lead_positions:.3f}")
            if self.with_views:
                lines.append(f"teacher_lead_bias_white: {self.lead_white / self.lead_positions:.3f}")
        for k, first in enumerate(self.PHASES):
            count = self.phase_positions[k]
            if not count:
                continue
            last = f"{self.PHASES[k + 1] - 1}" if k + 1 < len(self.PHASES) else "up"
            lines.append(f"teacher_value_mse_moves_{first}_{last}: {self.phase_value_sq[k] / count:.4f}")
            if self.lead_positions:
                lines.append(f"teacher_lead_mae_moves_{first}_{last}: {self.phase_lead_abs[k] / count:.3f}")
        return lines + [f"teacher_own_top1: {self.own_top1 / positions:.4f}",
                        f"teacher_own_value_mse: {own_mse:.4f}"]


def load_teacher(path: str, args: argparse.Namespace, size: int):
    """The ``Teacher`` of ``--teacher``, or a message saying why there is none (a file that is no network, a
    teacher that does not play the records' size)."""
    from tabula.tools.learn.teacher import Teacher

    try:
        teacher = Teacher(path, provider=args.net_provider, threads=args.net_threads, batch=args.batch,
                          log=lambda line: print(line, file=sys.stderr))
    except (ValueError, OSError) as error:  # NetworkFileError and LabelError are ValueErrors
        return f"tabula eval: cannot load the teacher {path}: {error}"
    if size not in teacher.board_sizes:
        return (f"tabula eval: the teacher {path} does not play {size}x{size} (it plays "
                f"{', '.join(map(str, teacher.board_sizes))})")
    return teacher


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.weights.endswith(".npz") and args.teacher:
        print("tabula eval: --teacher compares ONNX networks, not the rollout policy", file=sys.stderr)
        return 2
    if args.weights.endswith(".npz"):
        from tabula.tools.learn.rollout_train import evaluate_records  # the rollout policy: numpy, no network
        result = evaluate_records(args.weights, args.sources, args.max_games, args.min_moves,
                                  lambda record: args.split == "all" or is_validation(
                                      record.key(), args.val_fraction) == (args.split == "val"))
        print(json.dumps(result["filter"]), file=sys.stderr)
        for name in ("games", "positions", "passes", "top1", "learnable", "loss"):
            print(f"{name}: {result[name]:.4f}" if isinstance(result[name], float) else f"{name}: {result[name]}")
        return 0
    evaluator = OnnxEvaluator(args.weights, symmetry="identity", threads=args.net_threads, provider=args.net_provider)
    size = args.size or (evaluator.board_sizes[0] if len(evaluator.board_sizes) == 1 else 19)
    if size not in evaluator.board_sizes:
        print(f"tabula eval: {args.weights} does not play {size}x{size} (it plays "
              f"{', '.join(map(str, evaluator.board_sizes))})", file=sys.stderr)
        return 2
    teacher = None
    if args.teacher:
        teacher = load_teacher(args.teacher, args, size)
        if isinstance(teacher, str):
            print(teacher, file=sys.stderr)
            return 2
    teacher_scores = TeacherScores()
    reader, records = iter_records(args.sources, RecordFilter(size=size, min_moves=args.min_moves,
                                                                  handicap=args.handicap))
    scores = Scores()
    search = from_flags(EVAL_SEARCH, args)
    searches = SearchScores(args.weights, search, args.net_provider, args.net_threads) if search.visits else None
    states: list[GameState] = []
    targets: list[int] = []
    values: list[float] = []
    weights: list[float] = []
    where: list[tuple[int, int, int]] = []
    movers: list[int] = []
    taught: list[int] = []  # the rows of the batch that the teacher judges
    white_lead = [0.0, 0]  # the score head's final margin from white's view: sum, positions
    started = time.time()

    def flush() -> None:
        if not states:
            return
        evaluation = evaluator.evaluate(states)
        if evaluation.score is not None:
            white_lead[0] += float(np.sum(evaluation.score * np.where(np.asarray(movers) == WHITE, 1.0, -1.0)))
            white_lead[1] += len(states)
        scores.add(evaluation.policy, evaluation.value, np.asarray(targets), np.asarray(values, dtype=np.float32),
                   np.asarray(weights, dtype=np.float32), where, np.asarray(movers))
        if teacher is not None and taught:
            rows = np.asarray(taught)
            teacher_scores.add(_rows(evaluation, rows), teacher.evaluate([states[i] for i in taught]),
                               np.asarray(targets)[rows], np.asarray(values, dtype=np.float64)[rows],
                               np.asarray(weights, dtype=np.float64)[rows],
                               moves=np.asarray([where[i][1] for i in taught]),
                               white=np.asarray(movers)[rows] == WHITE)
        taught.clear()
        where.clear()
        movers.clear()
        states.clear()
        targets.clear()
        values.clear()
        weights.clear()

    for record in records:
        if args.split != "all" and is_validation(record.key(), args.val_fraction) != (args.split == "val"):
            continue
        if args.record_komi is not None and record.komi != args.record_komi:
            continue
        scores.games += 1
        scores.resign_games += record.value_weight > 0 and record.winner != 0
        komi = record.komi if args.komi is None else args.komi
        state = record.replay(Rules(komi=komi, superko=SIMPLE_KO), upto=0)  # the setup stones and handicap count
        for color, move in record.moves:
            state.to_move = color
            position = state.copy()
            states.append(position)
            target = record.size * record.size if move < 0 else move
            targets.append(target)
            if searches is not None and scores.positions_seen % args.every == 0:
                searches.add(position, target)
            if teacher is not None and scores.positions_seen % args.teacher_every == 0:
                taught.append(len(states) - 1)
            scores.positions_seen += 1
            values.append(0.0 if record.winner == 0 else (1.0 if record.winner == color else -1.0))
            weights.append(record.value_weight)
            movers.append(color)
            values[-1] *= 1.0 if record.value_weight > 0 else 0.0  # no result, no resignation question
            where.append((scores.games, len(position.moves),
                          int(PlayConfig.resign_after * record.size * record.size)))
            state.play(move, color)
            if len(states) >= args.batch:
                flush()
        if args.max_games is not None and scores.games >= args.max_games:
            break
    flush()
    print(reader.report.format(), file=sys.stderr)
    print(f"tabula eval: {time.time() - started:.1f} s", file=sys.stderr)
    lines = scores.lines() + (searches.lines() if searches is not None else []) + (
        teacher_scores.lines() if teacher is not None else [])
    if white_lead[1]:
        lines.append(f"white_score_lead: {white_lead[0] / white_lead[1]:.3f}")
    print("\n".join(lines))
    return 0


def _rows(evaluation: Evaluation, rows: np.ndarray) -> Evaluation:
    """The evaluation of some of its positions."""
    return Evaluation(policy=evaluation.policy[rows], value=evaluation.value[rows],
                      score=None if evaluation.score is None else evaluation.score[rows])


if __name__ == "__main__":
    sys.exit(main())
