"""KataGo's ``kata-raw-nn``: the network's raw outputs for the current position, in KataGo's names, order and number
formats, so that a position can be compared with KataGo's answer line by line (``tools/check/raw_nn_compare``).

Layer: gtp (registers into ``gtp.commands.TABLE`` when imported). Works for every network Tabula plays: its own ONNX
networks and KataGo's (the ``katago-v7`` encoding).

``kata-raw-nn [COLOR] SYMMETRY [OPTIMISM]`` as KataGo parses it: an optional colour to evaluate for (default: the side
to move; the other colour sees the position as KataGo's then does, with no history), SYMMETRY an index 0..7 in
KataGo's numbering (``engine.net.features.katago_symmetry``) or ``all`` (each of the 8 in turn, as KataGo answers:
the blocks follow one another, without KataGo's blank line between them, which would end a GTP reply), and an
optimism in [0, 1], accepted only where it is the network's own (its ``policy_optimism`` metadata, KataGo's networks):
a network's policy optimism is fixed when it is exported.

Each block, everything from white's view as KataGo's: ``symmetry S``, ``whiteWin``, ``whiteLoss``, ``noResult`` (6
decimals), then where the network has them ``whiteLead``, ``whiteScoreSelfplay``, ``whiteScoreSelfplaySq`` (3
decimals), then ``policy`` and one row per board row from the top (``%8.6f`` each, ``NAN`` on illegal points),
``policyPass``, and where the network has ownership ``whiteOwnership`` and its rows (``%9.7f``). KataGo's
``varTimeLeft``, ``shorttermWinlossError`` and ``shorttermScoreError`` are left out: no Tabula network outputs them.
A network without win/loss/no-result outputs (Tabula's own) gives whiteWin and whiteLoss from its value and
noResult 0; its score head, where it has one, is whiteLead.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from tabula.engine.net.evaluator import Evaluation, UnsupportedBoardSizeError
from tabula.engine.net.features import NUM_SYMMETRIES, katago_symmetry
from tabula.engine.rules.coords import BLACK, WHITE
from tabula.engine.rules.game import GameState

from .commands import TABLE, Session
from .protocol import GtpError

COMMAND = "kata-raw-nn"
ALL = "all"
# Encodings whose networks were trained with board rows from the top (KataGo's), while Tabula's planes run from the
# bottom: KataGo's symmetry index differs from Tabula's in bit 0 for them (features.katago_symmetry). A network
# that says whether it is KataGo's (OnnxEvaluator.katago_network) is taken at its word instead: a Tabula network
# reading katago-v7 was trained on Tabula's rows.
TOP_FIRST_ENCODINGS = frozenset({"katago-v7"})
_USAGE = f"for {COMMAND} (expected an optional color, a symmetry 'all' or index [0-7], and an optional optimism [0-1])"


@dataclass
class RawOutputs:
    """One evaluation of one position, from white's view, as ``kata-raw-nn`` prints it."""

    symmetry: int  # KataGo's index
    white_win: float
    white_loss: float
    no_result: float
    policy: np.ndarray  # float64 [N*N+1], Tabula's flat order then pass; NaN on illegal moves
    white_lead: float | None = None
    white_score_selfplay: float | None = None
    white_score_selfplay_sq: float | None = None
    white_ownership: np.ndarray | None = None  # float64 [N*N] in [-1, 1], Tabula's flat order


def parse_arguments(words: tuple[str, ...], to_move: int) -> tuple[int, list[int], float | None]:
    """(the colour to evaluate for, KataGo's symmetry indices to answer, the policy optimism asked for or None) from
    the command's words, as KataGo's ``parseRawNNArgs`` reads them; GtpError with KataGo's wording otherwise."""
    index = 0
    color = to_move
    if words and words[0].lower() in ("b", "black", "w", "white"):
        color = BLACK if words[0].lower().startswith("b") else WHITE
        index = 1
    if index >= len(words):
        raise GtpError(f"Expected a symmetry argument 'all' or index [0-7] {_USAGE}")
    word = words[index].lower()
    if word == ALL:
        symmetries = list(range(NUM_SYMMETRIES))
    elif re.fullmatch(r"[+-]?[0-9]+", word) and 0 <= int(word) < NUM_SYMMETRIES:
        symmetries = [int(word)]
    else:
        raise GtpError(f"Expected a symmetry argument 'all' or index [0-7] but got '{words[index]}' {_USAGE}")
    index += 1
    optimism = None
    if index < len(words):
        try:
            optimism = float(words[index])
        except ValueError:
            optimism = math.nan
        if not (0.0 <= optimism <= 1.0):
            raise GtpError(f"Expected an optimism value in [0,1] but got '{words[index]}' {_USAGE}")
        index += 1
    if index < len(words):
        raise GtpError(f"Unexpected extra argument '{words[index]}' {_USAGE}")
    return color, symmetries, optimism


def check_optimism(network, optimism: float | None) -> None:
    """GtpError unless ``optimism`` is None or the network's own (``policy_optimism`` in its metadata)."""
    if optimism is None:
        return
    own = getattr(network, "metadata", {}).get("policy_optimism")
    try:
        if own is not None and math.isclose(float(own), optimism, abs_tol=1e-9):
            return
    except ValueError:
        pass
    fixed = f" (this network's is {own})" if own is not None else " (this network has none)"
    raise GtpError(f"the policy optimism cannot be changed here: a network's is fixed when it is exported{fixed}")


def white_view(evaluation: Evaluation, state: GameState, legal: np.ndarray, symmetry: int) -> RawOutputs:
    """The first position of ``evaluation`` (side to move's view, as every Evaluation) from white's view, with NaN
    on the moves ``legal`` (bool [N*N+1]) forbids. ``wdl``, ``score_mean`` and ``score_stdev`` are read where the
    evaluation has them (KataGo's networks); ``score`` is the lead."""
    sign = 1.0 if state.to_move == WHITE else -1.0
    wdl = getattr(evaluation, "wdl", None)
    if wdl is not None:
        win, loss, no_result = (float(v) for v in np.asarray(wdl, dtype=np.float64)[0])
    else:
        value = float(evaluation.value[0])
        win, loss, no_result = (1.0 + value) / 2.0, (1.0 - value) / 2.0, 0.0
    if sign < 0:
        win, loss = loss, win
    policy = np.where(legal, np.asarray(evaluation.policy[0], dtype=np.float64), math.nan)
    raw = RawOutputs(symmetry, win, loss, no_result, policy)
    if evaluation.score is not None:
        raw.white_lead = sign * float(evaluation.score[0])
    score_mean = getattr(evaluation, "score_mean", None)
    if score_mean is not None:
        mean = float(score_mean[0])
        raw.white_score_selfplay = sign * mean
        score_stdev = getattr(evaluation, "score_stdev", None)
        if score_stdev is not None:
            # KataGo's scoreMeanSq: (mean² + stdev²) given a result, times P(result); its mean is already unconditional
            result = 1.0 - no_result
            conditional = mean / result if result > 0 else 0.0
            raw.white_score_selfplay_sq = (conditional ** 2 + float(score_stdev[0]) ** 2) * result
    if evaluation.ownership is not None:
        raw.white_ownership = sign * np.asarray(evaluation.ownership[0], dtype=np.float64)
    return raw


def _rows_from_top(values: np.ndarray, size: int) -> list[np.ndarray]:
    """Flat points (y = 0 the bottom row) as KataGo prints them: rows from the top, each from left to right."""
    return list(np.asarray(values[: size * size]).reshape(size, size)[::-1])


def _probability(p: float) -> str:
    return "    NAN " if math.isnan(p) else f"{p:8.6f} "


def format_block(raw: RawOutputs, size: int) -> list[str]:
    """The lines of one symmetry's answer, each as KataGo writes it (rows keep KataGo's trailing space)."""
    lines = [f"symmetry {raw.symmetry}", f"whiteWin {raw.white_win:.6f}", f"whiteLoss {raw.white_loss:.6f}",
             f"noResult {raw.no_result:.6f}"]
    for name, value in (("whiteLead", raw.white_lead), ("whiteScoreSelfplay", raw.white_score_selfplay),
                        ("whiteScoreSelfplaySq", raw.white_score_selfplay_sq)):
        if value is not None:
            lines.append(f"{name} {value:.3f}")
    lines.append("policy")
    lines += ["".join(_probability(p) for p in row) for row in _rows_from_top(raw.policy, size)]
    lines.append("policyPass " + _probability(raw.policy[-1]))
    if raw.white_ownership is not None:
        lines.append("whiteOwnership")
        lines += ["".join(f"{v:9.7f} " for v in row) for row in _rows_from_top(raw.white_ownership, size)]
    return lines


def format_reply(blocks: list[RawOutputs], size: int) -> str:
    """The whole answer: the blocks one after another, trimmed at both ends as KataGo trims it."""
    return "\n".join(line for raw in blocks for line in format_block(raw, size)).strip()


def network_of(session: Session, size: int):
    """The network that evaluates ``size``x``size`` positions for the session's search player, with its encoding;
    GtpError where the player has none (the random player) or none plays that size."""
    search = getattr(session.player.picker, "search", None)
    evaluator = getattr(search, "evaluator", None)
    if evaluator is None or not hasattr(evaluator, "evaluate_symmetry"):
        raise GtpError(f"{COMMAND} needs a network (the search player, --player search)")
    network = evaluator
    network_for = getattr(evaluator, "network_for", None)
    try:
        if network_for is not None:
            network = network_for(size)
        elif size not in getattr(evaluator, "board_sizes", (size,)):
            raise UnsupportedBoardSizeError(f"the network does not play {size}x{size}")
    except UnsupportedBoardSizeError as error:
        raise GtpError(str(error)) from error
    return network


def raw_nn(session: Session, words: tuple[str, ...]) -> str:
    player = session.player
    color, symmetries, optimism = parse_arguments(words, player.state.to_move)
    state = player.state
    if color != state.to_move:
        # KataGo clears the history for a colour not to move: no superko bans (nor simple ko: the ban is the other
        # colour's here anyway); the network's inputs see no history either (katago_features)
        state = state.with_to_move(color)
        state.seen = set()
    network = network_of(session, state.size)
    check_optimism(network, optimism)
    encoding = getattr(getattr(network, "encoding", None), "name", "")
    # KataGo's networks (an OnnxEvaluator knows its file's kind; a Tabula network may read katago-v7 too)
    rows_from_top = getattr(network, "katago_network", encoding in TOP_FIRST_ENCODINGS)
    legal = state.legal_mask()
    blocks = []
    for symmetry in symmetries:
        transform = katago_symmetry(symmetry, rows_from_top=rows_from_top)
        try:
            evaluation = network.evaluate_symmetry([state], transform)
        except UnsupportedBoardSizeError as error:
            raise GtpError(str(error)) from error
        blocks.append(white_view(evaluation, state, legal, symmetry))
    return format_reply(blocks, state.size)


@TABLE.command(COMMAND, family="analysis")
def kata_raw_nn(session: Session, *words: str) -> str:
    """``kata-raw-nn [COLOR] SYMMETRY [OPTIMISM]``: the network's raw outputs (module docstring)."""
    return raw_nn(session, words)


__all__ = ["RawOutputs", "parse_arguments", "check_optimism", "white_view", "format_block", "format_reply",
           "network_of", "raw_nn", "TOP_FIRST_ENCODINGS"]
