"""``kata-raw-nn``: KataGo's symmetry numbering against Tabula's, the answer's format and white's view, the arguments
as KataGo parses them, and (slow, where the katrain network is on disk) KataGo's own answers reproduced."""
from __future__ import annotations

import math
import os
from types import SimpleNamespace

import numpy as np
import pytest

from tabula.engine.net.evaluator import Evaluation, masked_softmax
from tabula.engine.net.features import NUM_SYMMETRIES, encode_batch, katago_symmetry, symmetry_tables
from tabula.engine.play.player import Player
from tabula.engine.rules.coords import BLACK, WHITE, parse_vertex
from tabula.engine.rules.game import GameState
from tabula.gtp.commands import Session
from tabula.gtp.protocol import GtpError
from tabula.gtp.raw_nn import format_reply, parse_arguments, white_view
from tests.conftest import make_session
from tests.katago_reference import MODELS_DIR

# -- KataGo's symmetries ----------------------------------------------------------------------------------------------


def katago_input_positions(size: int, symmetry: int) -> np.ndarray:
    """int [N, N, 2]: for each cell (h, w) of the tensor KataGo's network reads under ``symmetry``, the (x, y) of the
    board point it holds (y = 0 KataGo's top row): KataGo's ``copyWithSymmetry`` (nninputs.cpp, NCHW, forward) as
    index arithmetic, written out again here as the test's oracle."""
    transpose, flip_x, flip_y = bool(symmetry & 4), bool(symmetry & 2), bool(symmetry & 1)
    if transpose:
        flip_x, flip_y = flip_y, flip_x
    h_base, h_stride, w_base, w_stride = 0, size, 0, 1
    if flip_y:
        h_base, h_stride = (size - 1) * h_stride, -h_stride
    if flip_x:
        w_base, w_stride = (size - 1) * w_stride, -w_stride
    if transpose:
        h_stride, w_stride = w_stride, h_stride
    cells = np.empty((size * size, 2), dtype=np.int64)
    for h in range(size):
        for w in range(size):
            cells[h_base + h * h_stride + w_base + w * w_stride] = (w, h)
    return cells.reshape(size, size, 2)


@pytest.mark.parametrize("size", [2, 5, 6])
def test_katago_symmetries_are_tabulas_in_a_networks_own_frame(size: int):
    forward = symmetry_tables(size)[0][:, : size * size]
    for symmetry in range(NUM_SYMMETRIES):
        cells = katago_input_positions(size, symmetry)
        # The network's rows as its own planes run (KataGo's from the top; Tabula's own from the bottom): same index.
        own_frame = (cells[..., 1] * size + cells[..., 0]).reshape(-1)
        assert np.array_equal(forward[katago_symmetry(symmetry)], own_frame)
        # KataGo's networks read Tabula's bottom-first planes: (x, y) from the top is Tabula's (x, N-1-y).
        tabula_points = ((size - 1 - cells[..., 1]) * size + cells[..., 0]).reshape(-1)
        assert np.array_equal(forward[katago_symmetry(symmetry, rows_from_top=True)], tabula_points)


def test_katago_symmetry_refuses_other_indices():
    for bad in (-1, 8, 1.0):
        with pytest.raises(ValueError):
            katago_symmetry(bad)  # type: ignore[arg-type]


def test_an_asymmetric_position_reaches_the_network_as_katago_puts_it():
    """Black stones at C1, D1, A2 and white at E4 on 5x5: under each KataGo symmetry, Tabula's planes under the mapped
    symmetry are the tensor KataGo builds, cell by cell (KataGo's rows from the top)."""
    size = 5
    state = GameState(size)
    for vertex, color in (("C1", BLACK), ("D1", BLACK), ("A2", BLACK), ("E4", WHITE)):
        state.place_setup(parse_vertex(vertex, size), color)
    state.to_move = BLACK
    for symmetry in range(NUM_SYMMETRIES):
        planes = encode_batch([state], np.array([katago_symmetry(symmetry, rows_from_top=True)]))[0]
        cells = katago_input_positions(size, symmetry)
        for h in range(size):
            for w in range(size):
                x, y_from_top = cells[h, w]
                color = state.color_at((size - 1 - y_from_top) * size + x)
                assert planes[0, h, w] == (color == BLACK) and planes[8, h, w] == (color == WHITE)


# -- arguments --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("words, expected", [
    (("0",), (BLACK, [0], None)), (("7",), (BLACK, [7], None)), (("all",), (BLACK, list(range(8)), None)),
    (("ALL",), (BLACK, list(range(8)), None)), (("w", "3"), (WHITE, [3], None)),
    (("White", "all"), (WHITE, list(range(8)), None)), (("b", "+2"), (BLACK, [2], None)),
    (("2", "0.2"), (BLACK, [2], 0.2)), (("w", "all", "1"), (WHITE, list(range(8)), 1.0)),
])
def test_arguments_as_katago_parses_them(words, expected):
    assert parse_arguments(words, BLACK) == expected


@pytest.mark.parametrize("words, message", [
    ((), "Expected a symmetry argument 'all' or index [0-7] for kata-raw-nn"),
    (("w",), "Expected a symmetry argument 'all' or index [0-7] for kata-raw-nn"),
    (("8",), "but got '8'"), (("-1",), "but got '-1'"), (("x", "1"), "but got 'x'"), (("1.5",), "but got '1.5'"),
    (("+-3",), "but got '+-3'"), (("--1",), "but got '--1'"),
    (("0", "2"), "Expected an optimism value in [0,1] but got '2'"), (("0", "nan"), "Expected an optimism value"),
    (("0", "0.5", "1"), "Unexpected extra argument '1'"),
])
def test_bad_arguments_get_katagos_message(words, message):
    with pytest.raises(GtpError) as error:
        parse_arguments(words, BLACK)
    assert message in str(error.value)


# -- the answer -------------------------------------------------------------------------------------------------------

def three_by_three(to_move: int) -> GameState:
    """3x3: black at A1, white at C3; ``to_move`` next."""
    state = GameState(3)
    state.place_setup(parse_vertex("A1", 3), BLACK)
    state.place_setup(parse_vertex("C3", 3), WHITE)
    state.to_move = to_move
    return state


def evaluation(**fields) -> Evaluation:
    """One position's outputs on 3x3: policy over the 10 moves (side to move's view), value 0.5."""
    policy = np.array([[0.0, 0.1, 0.05, 0.05, 0.2, 0.1, 0.1, 0.15, 0.0, 0.25]], dtype=np.float32)
    result = Evaluation(policy=policy, value=np.array([0.5], dtype=np.float32))
    for name, value in fields.items():
        setattr(result, name, value)
    return result


def test_tabulas_own_network_from_whites_view():
    state = three_by_three(BLACK)
    ownership = np.array([[-0.75, -0.5, -0.25, -0.125, 0.0, 0.125, 0.25, 0.5, 0.75]], dtype=np.float32)
    raw = white_view(evaluation(score=np.array([2.5], dtype=np.float32), ownership=ownership), state,
                     state.legal_mask(), 3)
    # Black to move with value +0.5: black wins 75 %, so white 25 %; black leads by 2.5.
    assert format_reply([raw], 3).split("\n") == [
        "symmetry 3",
        "whiteWin 0.250000",
        "whiteLoss 0.750000",
        "noResult 0.000000",
        "whiteLead -2.500",
        "policy",
        "0.100000 0.150000     NAN ",  # the top row (A3 B3 C3): C3 is white's stone
        "0.050000 0.200000 0.100000 ",
        "    NAN 0.100000 0.050000 ",  # the bottom row: A1 is black's stone
        "policyPass 0.250000 ",
        "whiteOwnership",
        "-0.2500000 -0.5000000 -0.7500000 ",  # the board's points 6..8 (row 3), black's ownership negated
        "0.1250000 -0.0000000 -0.1250000 ",  # -0: KataGo's printf writes the sign too
        "0.7500000 0.5000000 0.2500000",  # the reply is trimmed at its end, as KataGo's
    ]


def test_katago_outputs_from_whites_view_and_lines_kept_to_what_the_network_has():
    state = three_by_three(WHITE)
    wdl = np.array([[0.7, 0.2, 0.1]], dtype=np.float32)
    raw = white_view(evaluation(wdl=wdl, score=np.array([1.25], dtype=np.float32),
                                score_mean=np.array([1.8], dtype=np.float32),
                                score_stdev=np.array([3.0], dtype=np.float32)), state, state.legal_mask(), 0)
    lines = format_reply([raw], 3).split("\n")
    assert lines[:7] == ["symmetry 0", "whiteWin 0.700000", "whiteLoss 0.200000", "noResult 0.100000",
                         "whiteLead 1.250", "whiteScoreSelfplay 1.800",
                         # KataGo's scoreMeanSq: ((1.8 / 0.9)² + 3²) * 0.9
                         f"whiteScoreSelfplaySq {(2.0 ** 2 + 9.0) * 0.9:.3f}"]
    assert "whiteOwnership" not in lines and lines[-1] == "policyPass 0.250000"
    # Black to move: win and loss trade places, the scores change sign, noResult stays.
    state.to_move = BLACK
    black = white_view(evaluation(wdl=wdl, score_mean=np.array([1.8], dtype=np.float32)), state,
                       state.legal_mask(), 0)
    assert (black.white_win, black.white_loss, black.no_result) == pytest.approx((0.2, 0.7, 0.1))
    assert black.white_score_selfplay == pytest.approx(-1.8) and black.white_lead is None
    assert black.white_score_selfplay_sq is None  # no stdev: the line is left out


def test_a_ko_ban_is_nan():
    state = GameState(5)
    for vertex in ("B2", "C2", "A3", "D3", "B4", "C4", "C3", "B3"):  # white B3 captures C3: a ko
        state.play(parse_vertex(vertex, 5))
    legal = state.legal_mask()
    c3 = parse_vertex("C3", 5)
    assert not legal[c3]
    policy = masked_softmax(np.zeros((1, 26), dtype=np.float32), legal[None])
    raw = white_view(Evaluation(policy=policy, value=np.zeros(1, dtype=np.float32)), state, legal, 0)
    rows = format_reply([raw], 5).split("\n")[5:10]
    assert rows[2].split()[2] == "NAN"  # row 3 from the top, column C
    assert sum(row.count("NAN") for row in rows) == int((~legal).sum())


# -- over GTP ---------------------------------------------------------------------------------------------------------

class FixedNetwork:
    """A stand-in network that records the symmetries it is asked for; ``encoding`` as a network file names it."""

    def __init__(self, encoding: str, sizes=(9,)):
        self.encoding = SimpleNamespace(name=encoding)
        self.board_sizes = tuple(sizes)
        self.asked: list[int] = []

    def evaluate_symmetry(self, states, symmetry: int) -> Evaluation:
        self.asked.append(symmetry)
        legal = states[0].legal_mask()
        return Evaluation(policy=(legal / legal.sum()).astype(np.float32)[None],
                          value=np.array([symmetry / 10.0], dtype=np.float32))


def session_with(network) -> Session:
    picker = SimpleNamespace(search=SimpleNamespace(evaluator=network), name="fixed", stop=lambda: None,
                                board_sizes=None)
    return Session(player=Player(picker, size=9))


@pytest.mark.parametrize("encoding, transforms", [("katago-v7", [1, 0, 3, 2, 5, 4, 7, 6]),
                                                  ("leelaz-18", list(range(8))), ("leelaz-18+komi", list(range(8)))])
def test_each_symmetry_goes_to_the_network_in_its_own_numbering(encoding: str, transforms: list[int]):
    network = FixedNetwork(encoding)
    session = session_with(network)
    reply = session.dispatch("kata-raw-nn all")
    assert reply.startswith("= symmetry 0\n") and reply.endswith("\n\n") and "\n\n" not in reply[:-2]
    assert [line for line in reply.split("\n") if line.startswith("symmetry") or line.startswith("= symmetry")] == [
        ("= " if s == 0 else "") + f"symmetry {s}" for s in range(8)]
    assert network.asked == transforms
    network.asked.clear()
    assert session.dispatch("kata-raw-nn 5").startswith("= symmetry 5\nwhiteWin")
    assert network.asked == [transforms[5]]


def test_an_optimism_is_taken_only_where_it_is_the_networks_own():
    network = FixedNetwork("katago-v7")
    network.metadata = {"policy_optimism": "0.2"}
    session = session_with(network)
    assert session.dispatch("kata-raw-nn 0 0.2").startswith("= symmetry 0")
    assert session.dispatch("kata-raw-nn 0 0.5") == ("? the policy optimism cannot be changed here: a network's is "
                                                    "fixed when it is exported (this network's is 0.2)\n\n")
    assert session_with(FixedNetwork("leelaz-18")).dispatch("kata-raw-nn 0 0").endswith("(this network has none)\n\n")


def test_errors_over_gtp():
    assert make_session().dispatch("kata-raw-nn 0") == \
        "? kata-raw-nn needs a network (the search player, --player search)\n\n"
    session = session_with(FixedNetwork("leelaz-18", sizes=(9,)))
    assert session.dispatch("kata-raw-nn 9").startswith("? Expected a symmetry argument")
    assert session.dispatch("boardsize 13") == "=\n\n"
    assert "13x13" in session.dispatch("kata-raw-nn 0")
    listed = make_session().dispatch("list_commands")
    assert "\nkata-raw-nn\n" in listed


def test_the_other_colour_is_evaluated_on_request():
    session = session_with(FixedNetwork("leelaz-18"))
    assert session.dispatch("play b e5") == "=\n\n"
    # White to move: value 0.3 for white under symmetry 3.
    assert session.dispatch("kata-raw-nn 3").split("\n")[1] == "whiteWin 0.650000"
    # Black asked for: value 0.3 for black.
    reply = session.dispatch("kata-raw-nn b 3").split("\n")
    assert reply[1] == "whiteWin 0.350000"
    assert sum(line.count("NAN") for line in reply) == 1  # E5 only


# -- KataGo's own answers (slow: the katrain network and KataGo's reference file) ----------------------------------

KATRAIN = os.path.join(MODELS_DIR, "b10c384h6nbttflrs.bin.gz")


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(KATRAIN), reason="the katrain network is not on this machine")
def test_katagos_answers_are_reproduced(tmp_path):
    """KataGo's network exported to ONNX, Tabula's search player on it: ``kata-raw-nn 0`` on KataGo's reference
    positions (9x9 Tromp-Taylor, 7x7 Chinese) agrees with KataGo's answer line by line."""
    pytest.importorskip("torch")
    from tabula.engine.config import EngineConfig, NetConfig
    from tabula.engine.net import katago_network
    from tabula.tools.check.raw_nn_compare import parse_reply
    from tests.katago_reference import read_reference, reference_path

    path = reference_path("b10c384")
    if not os.path.exists(path):
        pytest.skip("no KataGo reference file")
    net, model = katago_network.load(KATRAIN)
    onnx_path = tmp_path / "b10c384.onnx"
    katago_network.export_onnx(net, model, onnx_path, KATRAIN, check=False)
    config = EngineConfig(seed=1, board_size=19, player="search", net=NetConfig(weights=(str(onnx_path),), threads=1))
    session = Session(player=Player.from_config(config), config=config)
    cases = [case for case in read_reference(path) if case.size in (7, 9)]
    assert cases
    for case in cases:
        for command in case.commands:
            assert session.dispatch(command).startswith("="), command
        reply = session.dispatch("kata-raw-nn 0").rstrip("\n").split("\n")
        ours = parse_reply(reply, case.size)
        kata_policy = np.append(case.policy.reshape(-1), case.policy_pass)
        assert np.array_equal(np.isnan(ours.policy_vector()), np.isnan(kata_policy))
        assert np.nanmax(np.abs(ours.policy_vector() - kata_policy)) <= 1e-5
        for name in ("whiteWin", "whiteLoss", "noResult", "whiteLead", "whiteScoreSelfplay"):
            if name in ours.scalars:
                assert math.isclose(ours.scalars[name], case.scalars[name], abs_tol=2e-3), name
        assert np.max(np.abs(ours.ownership - case.ownership)) <= 1e-5


def test_the_colour_not_to_move_is_evaluated_without_superko_bans_as_katago_clears_the_history():
    session = session_with(FixedNetwork("leelaz-18"))
    assert session.dispatch("play b e5") == "=\n\n"
    state = session.player.state
    d4 = parse_vertex("D4", 9)
    after = state.copy()
    after.play(d4, BLACK)
    state.seen.add(after.board.hash)  # as if black's D4 here had been played before: positional superko
    state.peak_stones = after.stones
    assert not state.with_to_move(BLACK).legal_mask()[d4]
    rows = session.dispatch("kata-raw-nn b 0").split("\n")[5:14]
    assert rows[5].split()[3] != "NAN"  # row 4 from the bottom, column D
    assert sum(row.count("NAN") for row in rows) == 1  # E5 only
