"""The komi as a network input (leelaz-18+komi): the plane, the zero-initialised extension of a trained network
(the same outputs, the score moving point for point with the komi), its files (ONNX, int8, checkpoints), the
trainer's and self-play's komi per game, handicap self-play, and the search's table of network results."""
from __future__ import annotations

import dataclasses
import json
import os

import numpy as np
import pytest

from tabula.engine.net.encodings import LEELAZ, LEELAZ_KOMI, encoding_named
from tabula.engine.net.features import (
    KOMI_INPUT_ENCODING,
    KOMI_PLANE,
    encode_batch,
    encode_batch_with_komi,
    komi_points,
)
from tabula.engine.rules.coords import BLACK, WHITE
from tabula.engine.rules.game import BONUS_N, GameState, Rules, handicap_points
from tabula.engine.rules.gomoku import GomokuState
from tests.conftest_network import as_the_file_computes, random_game

torch = pytest.importorskip("torch")

from tabula.engine.net.network import (  # noqa: E402
    POOLED,
    NetSpec,
    TabulaNet,
    export_onnx,
    komi_parity_wave,
    load_onnx,
    random_network,
    save_checkpoint,
    to_leelaz,
    with_komi_input,
    with_small_board_komi,
    with_small_board_komi_parity,
    with_small_board_score_komi,
)


def at_komi(states: list[GameState], komi: float, **rules) -> list[GameState]:
    out = []
    for state in states:
        state = state.copy()
        state.rules = Rules(komi=komi, **rules)
        out.append(state)
    return out


@pytest.fixture(scope="module")
def old_model():
    """A pooled 18-plane network with every head (score, ownership, small-board term, nonzero), as shipped."""
    spec = NetSpec(blocks=1, filters=8, head=POOLED, aux=True, small_board_value=True)
    model = random_network(spec, seed=5, calibration=[encode_batch(random_game(9, 40, 1))])
    with torch.no_grad():
        # its own generator: the global one's state depends on which tests ran before, and so would the model
        model.head.value_small_boards.weight.normal_(0.0, 0.3, generator=torch.Generator().manual_seed(5))
    return model


def outputs(model, planes: np.ndarray) -> tuple:
    with torch.no_grad():
        return tuple(t.numpy() for t in model(torch.from_numpy(planes)))


# -- the plane ----------------------------------------------------------------------------------------------------


def test_the_komi_plane_is_the_side_to_moves_komi_over_twenty():
    state = GameState(9, Rules(komi=6.5))
    assert komi_points(state) == -6.5  # black to move: the komi is against it
    state.play(40)
    assert komi_points(state) == 6.5
    planes = encode_batch_with_komi([GameState(9, Rules(komi=6.5)), state])
    assert planes.shape == (2, 19, 9, 9) and planes.dtype == np.float32
    assert np.all(planes[0, KOMI_PLANE] == np.float32(-6.5 / 20)) and np.all(planes[1, KOMI_PLANE] == np.float32(0.325))
    np.testing.assert_array_equal(planes[:, :18], encode_batch([GameState(9, Rules(komi=6.5)), state]))
    turned = encode_batch_with_komi([state, state], np.array([3, 5]))
    np.testing.assert_array_equal(turned[:, :18], encode_batch([state, state], np.array([3, 5])))
    assert np.all(turned[:, KOMI_PLANE] == np.float32(0.325))
    # the handicap bonus of the rules is what the count gives white: part of the komi seen
    handicap = GameState(9, Rules(komi=0.5, white_handicap_bonus=BONUS_N))
    handicap.place_handicap(handicap_points(9, 3))
    assert handicap.to_move == WHITE and komi_points(handicap) == 3.5


def test_go_positions_are_read_by_both_go_encodings_and_gomoku_by_neither():
    go, gomoku = GameState(9), GomokuState(9)
    assert LEELAZ.accepts(go) and LEELAZ_KOMI.accepts(go)
    assert not LEELAZ.accepts(gomoku) and not LEELAZ_KOMI.accepts(gomoku)
    assert not encoding_named("gomoku-4").accepts(go)
    assert encoding_named(KOMI_INPUT_ENCODING) is LEELAZ_KOMI and LEELAZ_KOMI.planes == 19
    assert LEELAZ_KOMI.trial_planes(7).shape == (1, 19, 7, 7)


# -- the network --------------------------------------------------------------------------------------------------


def test_an_extended_network_computes_what_it_did_and_its_score_moves_with_the_komi(old_model):
    """Zero new weights: at the reference komi (7.5) every output is the old network's bit for bit (fp32), on
    small boards and 19x19; at another komi only the score moves, by the komi's difference for the side to move."""
    extended = with_komi_input(old_model)
    assert extended.spec.input_encoding == KOMI_INPUT_ENCODING and extended.spec.komi_reference == 7.5
    for size in (9, 19):
        states = random_game(size, 12, 3)[1:]  # either side to move
        old = outputs(old_model, encode_batch(states))
        for komi in (7.5, 6.5, 0.5, -4.0, 30.5):
            new = outputs(extended, encode_batch_with_komi(at_komi(states, komi)))
            for index in (0, 1, 3):  # policy, value, ownership
                np.testing.assert_array_equal(new[index], old[index])
            black = np.array([s.to_move == BLACK for s in states])
            shift = np.where(black, 7.5 - komi, komi - 7.5)  # komi is white's: what black loses, white gains
            if komi == 7.5:
                np.testing.assert_array_equal(new[2], old[2])
            np.testing.assert_allclose(new[2] - old[2], shift, atol=1e-4)


def test_the_komi_terms_learn_the_value_and_the_trunk(old_model):
    extended = with_komi_input(old_model)
    states = random_game(9, 10, 4)[1:]
    low, high = (encode_batch_with_komi(at_komi(states, k)) for k in (0.5, 7.5))
    with torch.no_grad():
        extended.head.value_komi.weight.normal_(0.0, 1.0)
    assert not np.allclose(outputs(extended, low)[1], outputs(extended, high)[1])  # the value moves
    with torch.no_grad():
        extended.input_komi.weight.normal_(0.0, 1.0)
    assert not np.allclose(outputs(extended, low)[0], outputs(extended, high)[0])  # and the policy


def test_only_a_pooled_go_network_without_it_takes_the_komi_input(old_model):
    with pytest.raises(ValueError, match="pooled head"):
        with_komi_input(TabulaNet(NetSpec(blocks=1, filters=8, board_size=9)))
    with pytest.raises(ValueError, match="already"):
        with_komi_input(with_komi_input(old_model))
    with pytest.raises(ValueError, match="Go's"):
        with_komi_input(TabulaNet(NetSpec(blocks=1, filters=8, head=POOLED, input_encoding="gomoku-4")))
    with pytest.raises(ValueError, match="pooled head"):
        NetSpec(blocks=1, filters=8, input_encoding=KOMI_INPUT_ENCODING)
    with pytest.raises(ValueError, match="Leela Zero"):
        to_leelaz(with_komi_input(old_model))
    # the reference komi is written only where the network has the input: other files' metadata is unchanged
    assert "komi_reference" not in old_model.spec.to_dict()
    assert NetSpec.from_dict(with_komi_input(old_model, 6.5).spec.to_dict()).komi_reference == 6.5


def nine_by_nine_records(tmp_path, seed: int) -> str:
    """A directory of shards: 8 training and 2 validation 9x9 records, at komi 0.5 and 7.5 in turn."""
    from tabula.engine.data.records import RecordFilter, parse_record
    from tabula.engine.data.shards import write_shard
    from tests.records_helpers import game_sgf, play_game

    data = tmp_path / "data"
    data.mkdir()
    records = [parse_record(f"g{i}", game_sgf(play_game(seed + i, moves=24, size=9), size=9,
                                              komi=(0.5, 7.5)[i % 2], result=("B+3.5", "W+10.5")[i % 2]),
                            RecordFilter(size=9, min_moves=10)) for i in range(10)]
    write_shard(str(data / "train-0000.tshard"), records[:8], size=9)
    write_shard(str(data / "val-0000.tshard"), records[8:], size=9)
    return str(data)


def assert_a_small_board_term(before, grown, weight, komis: tuple[float, float], sizes: tuple[int, ...], seed: int):
    """``grown`` (``before`` with a new term whose ``weight`` is zero) computes what ``before`` did at both
    ``komis``; with ``weight`` made random, it moves the value's gap between the two komis on the small boards, and
    19x19's outputs stay exactly ``before``'s."""
    positions = {size: random_game(size, 12, seed)[1:] for size in sizes}
    for states in positions.values():
        for komi in komis:
            planes = encode_batch_with_komi(at_komi(states, komi))
            for then, now in zip(outputs(before, planes), outputs(grown, planes)):
                np.testing.assert_array_equal(now, then)
    with torch.no_grad():
        weight.normal_(0.0, 1.0, generator=torch.Generator().manual_seed(seed))
    for size, states in positions.items():
        low, high = (encode_batch_with_komi(at_komi(states, k)) for k in komis)
        if size == 19:
            for planes in (low, high):
                for then, now in zip(outputs(before, planes), outputs(grown, planes)):
                    np.testing.assert_array_equal(now, then)
        else:
            assert not np.allclose(outputs(grown, low)[1] - outputs(grown, high)[1],
                                   outputs(before, low)[1] - outputs(before, high)[1])


def test_the_small_board_komi_term_moves_small_boards_and_leaves_19x19_bit_for_bit(old_model, tmp_path):
    """Added with zero weights it changes nothing; trained (here: random weights) it moves the value of 9x9 and
    13x13 with the komi, and 19x19's outputs stay the extended network's exactly; the flag survives the ONNX file."""
    extended = with_komi_input(old_model)
    grown = with_small_board_komi(extended)
    assert grown.spec.small_board_komi and "small_board_komi" not in extended.spec.to_dict()
    with pytest.raises(ValueError, match="already"):
        with_small_board_komi(grown)
    with pytest.raises(ValueError, match="komi input"):
        with_small_board_komi(old_model)
    with pytest.raises(ValueError, match="komi input"):
        NetSpec(blocks=1, filters=8, head=POOLED, aux=True, small_board_komi=True)
    assert_a_small_board_term(extended, grown, grown.head.value_komi_small_boards.weight, (0.5, 7.5), (9, 13, 19), 5)
    path = str(tmp_path / "grown.onnx")
    export_onnx(grown, path, "tests", board_sizes=[9, 19])
    loaded = load_onnx(path)
    assert loaded.spec.small_board_komi
    np.testing.assert_array_equal(loaded.head.value_komi_small_boards.weight.detach().numpy(),
                                  grown.head.value_komi_small_boards.weight.detach().numpy())


def test_tabula_export_adds_the_small_board_komi_term_and_the_trainer_keeps_it(old_model, tmp_path):
    """``--add-small-board-komi`` (alone on a komi network, or with ``--add-komi-input``); a network without the
    komi input is refused with a message; a run started from such a checkpoint trains the term and keeps it."""
    from tabula.tools.learn.export import main
    from tabula.tools.learn.train import TrainConfig, load_training_checkpoint, train

    checkpoint = str(tmp_path / "old.pt")
    save_checkpoint(old_model, checkpoint)
    with pytest.raises(SystemExit, match="komi input"):
        main(["--add-small-board-komi", checkpoint, str(tmp_path / "no.onnx")])
    both, start = str(tmp_path / "both.onnx"), str(tmp_path / "both.pt")
    assert main(["--add-komi-input", "--add-small-board-komi", "--board-sizes", "9,19", checkpoint, both,
                 "--checkpoint-out", start]) == 0
    assert load_onnx(both).spec.small_board_komi
    with pytest.raises(SystemExit, match="already"):
        main(["--add-small-board-komi", both, str(tmp_path / "twice.onnx")])
    data = nine_by_nine_records(tmp_path, 500)
    config = TrainConfig(data=data, out=str(tmp_path / "run"), blocks=1, filters=8, head=POOLED, aux=True,
                         small_board_value=True, steps=4, chunk_steps=2, batch=8, optimizer="adamw", lr=1e-2,
                         warmup_steps=0, workers=0, threads=1, precision="fp32", val_every=4, val_positions=16,
                         log_every=2, export=True, init=start, input_encoding=KOMI_INPUT_ENCODING,
                         train_only="head.value_komi_small_boards", komi_spread=4.0)
    assert train(config, log=lambda line: None)["step"] == 2
    assert train(dataclasses.replace(config, chunk_steps=0), log=lambda line: None)["step"] == 4  # resumed
    saved = load_training_checkpoint(str(tmp_path / "run" / "checkpoint.pt"))
    assert saved["spec"]["small_board_komi"]
    assert saved["state_dict"]["head.value_komi_small_boards.weight"].abs().sum() > 0  # trained from zero
    assert load_onnx(str(tmp_path / "run" / "model.onnx")).spec.small_board_komi


def test_a_run_that_trains_the_score_komi_term_alone_changes_nothing_else(old_model, tmp_path):
    """A fine-tune of one term: started from a checkpoint with the small-board score komi term, trained alone
    (``train_only``, batch norms frozen, as the komi fine-tune in docs/TRAINING.md runs it) at moved komis, the term
    learns from zero and every other weight and statistic stays the start's exactly; the trainer keeps the flag (its
    spec from the checkpoint it starts from)."""
    from tabula.tools.learn.train import TrainConfig, load_training_checkpoint, train

    start = str(tmp_path / "start.pt")
    save_checkpoint(with_small_board_score_komi(with_small_board_komi(with_komi_input(old_model))), start)
    config = TrainConfig(data=nine_by_nine_records(tmp_path, 600), out=str(tmp_path / "run"), blocks=1, filters=8,
                         head=POOLED, aux=True, small_board_value=True, steps=3, batch=8, optimizer="adamw", lr=1e-2,
                         warmup_steps=0, workers=0, threads=1, precision="fp32", val_every=3, val_positions=16,
                         log_every=3, export=False, init=start, input_encoding=KOMI_INPUT_ENCODING,
                         train_only="head.score_komi_small_boards", freeze_batchnorm=True, komi_spread=4.0)
    assert train(config, log=lambda line: None)["step"] == 3
    before = load_training_checkpoint(start)["state_dict"]
    saved = load_training_checkpoint(str(tmp_path / "run" / "checkpoint.pt"))
    assert saved["spec"]["small_board_score_komi"] and saved["spec"]["small_board_komi"]
    for name, weights in saved["state_dict"].items():
        if name == "head.score_komi_small_boards.weight":
            assert weights.abs().sum() > 0  # trained from zero
        else:
            assert torch.equal(weights, before[name]), name


def test_the_komi_parity_wave_is_zero_where_a_draw_is_possible():
    """KataGo's wave: on odd boards (odd area) the odd komis allow a draw, on even boards the even ones; ±0.5 halfway,
    the sign telling which side of the step a komi is on, and the same a hair off a komi (the plane's float)."""
    komi = torch.tensor([[-7.5], [-6.5], [0.5], [5.0], [5.5], [6.0], [6.5], [7.0], [7.5], [6.5], [7.5], [6.0],
                         [6.5 + 1e-6], [6.5 - 1e-6]])
    size = torch.tensor([[9.0]] * 9 + [[13.0], [10.0], [10.0], [9.0], [9.0]])
    expected = [-0.5, 0.5, -0.5, 0.0, 0.5, 0.0, -0.5, 0.0, 0.5, -0.5, -0.5, 0.0, -0.5, -0.5]
    # komi 5.5 and 6.5 lie between the same two drawable komis on 9x9 (5 and 7): opposite waves set them apart from
    # the line through them; 7.5, past the draw at 7, shares 5.5's
    np.testing.assert_allclose(komi_parity_wave(komi, size)[:, 0].numpy(), expected, atol=1e-5)
    assert komi_parity_wave(torch.tensor([[0.9999999]]), torch.tensor([[19.0]])).abs().item() < 1e-5


def saved_with_its_term(grown, flag: str, term: str, tmp_path) -> tuple[str, str]:
    """``grown`` written to ONNX and quantized to int8 (paths returned); the fp32 file loads with ``flag`` set and
    the head's ``term`` weights as they were."""
    from tabula.tools.learn.export import main

    fp32, int8 = str(tmp_path / f"{term}.onnx"), str(tmp_path / f"{term}-int8.onnx")
    export_onnx(grown, fp32, "tests", board_sizes=[9, 19])
    loaded = load_onnx(fp32)
    assert getattr(loaded.spec, flag)
    np.testing.assert_array_equal(getattr(loaded.head, term).weight.detach().numpy(),
                                  getattr(grown.head, term).weight.detach().numpy())
    assert main(["--quantize", "int8", "--calibration", "32", fp32, int8]) == 0
    return fp32, int8


@pytest.mark.slow  # a few seconds: the quick suite stays under 3 minutes
def test_the_komi_parity_term_moves_small_boards_by_parity_and_leaves_19x19_bit_for_bit(old_model, tmp_path):
    """Added with zero weights it changes nothing; trained (here: random weights) it moves 9x9's value apart at komi
    5.5 and 6.5 (which the komi term alone, linear in the komi, moves by a straight line), 19x19 stays exactly as it
    was; the flag survives the ONNX file, its int8 twin keeps the term in fp32, and the exporter adds it."""
    from tabula.tools.learn.export import main

    komi_net = with_small_board_komi(with_komi_input(old_model))
    with pytest.raises(ValueError, match="small-board komi term"):
        with_small_board_komi_parity(with_komi_input(old_model))
    with pytest.raises(ValueError, match="small-board komi term"):
        NetSpec(blocks=1, filters=8, head=POOLED, aux=True, input_encoding=KOMI_INPUT_ENCODING,
                small_board_komi_parity=True)
    grown = with_small_board_komi_parity(komi_net)
    assert grown.spec.small_board_komi_parity and "small_board_komi_parity" not in komi_net.spec.to_dict()
    with pytest.raises(ValueError, match="already"):
        with_small_board_komi_parity(grown)
    assert_a_small_board_term(komi_net, grown, grown.head.value_parity_small_boards.weight, (5.5, 6.5), (9, 19), 7)
    fp32, int8 = saved_with_its_term(grown, "small_board_komi_parity", "value_parity_small_boards", tmp_path)
    nine = random_game(9, 12, 7)[1:]
    for path in (fp32, int8):  # the wave read from the plane in the file: 5.5 and 6.5 apart as in torch
        net = as_the_file_computes(path, symmetry="identity")
        gap = net.evaluate(at_komi(nine, 5.5)).value - net.evaluate(at_komi(nine, 6.5)).value
        with torch.no_grad():
            torch_gap = (grown(torch.from_numpy(encode_batch_with_komi(at_komi(nine, 5.5))))[1]
                         - grown(torch.from_numpy(encode_batch_with_komi(at_komi(nine, 6.5))))[1]).numpy()
        np.testing.assert_allclose(gap, torch_gap, atol=1e-4 if path == fp32 else 0.1)
    checkpoint, both = str(tmp_path / "komi.pt"), str(tmp_path / "both.onnx")
    save_checkpoint(komi_net, checkpoint)
    komi_only = str(tmp_path / "komi-only.pt")
    save_checkpoint(with_komi_input(old_model), komi_only)
    with pytest.raises(SystemExit, match="small-board komi term"):
        main(["--add-small-board-komi-parity", komi_only, str(tmp_path / "refused.onnx")])
    assert main(["--add-small-board-komi-parity", "--board-sizes", "9,19", checkpoint, both]) == 0
    assert load_onnx(both).spec.small_board_komi_parity


@pytest.mark.slow  # a few seconds: the quick suite stays under 3 minutes
def test_the_small_board_score_komi_term_moves_the_small_board_score_alone(old_model, tmp_path):
    """Added with zero weights it changes nothing; trained (here: set) it adds to 9x9's and 13x13's score a straight
    line in the komi through the reference komi, and nothing else moves: the value everywhere, the score at the
    reference komi and on 19x19 bit for bit; the flag and the term survive the ONNX file and its int8 twin, and the
    exporter adds it (to a network with the komi input only)."""
    from tabula.engine.net.evaluator import OnnxEvaluator
    from tabula.tools.learn.export import main

    komi_net = with_small_board_komi_parity(with_small_board_komi(with_komi_input(old_model)))
    with pytest.raises(ValueError, match="komi input"):
        with_small_board_score_komi(old_model)
    with pytest.raises(ValueError, match="score head"):
        NetSpec(blocks=1, filters=8, head=POOLED, input_encoding=KOMI_INPUT_ENCODING, small_board_score_komi=True)
    grown = with_small_board_score_komi(komi_net)
    assert grown.spec.small_board_score_komi and "small_board_score_komi" not in komi_net.spec.to_dict()
    with pytest.raises(ValueError, match="already"):
        with_small_board_score_komi(grown)
    komis = (0.5, 7.5, 11.5)
    positions = {size: random_game(size, 12, 9)[1:] for size in (9, 13, 19)}
    planes = {(size, komi): encode_batch_with_komi(at_komi(states, komi))
              for size, states in positions.items() for komi in komis}
    for key, batch in planes.items():
        for then, now in zip(outputs(komi_net, batch), outputs(grown, batch)):
            np.testing.assert_array_equal(now, then)
    with torch.no_grad():
        grown.head.score_komi_small_boards.weight.copy_(torch.tensor([[0.5, 0.2]]))
    for (size, komi), batch in planes.items():
        before, after = outputs(komi_net, batch), outputs(grown, batch)
        for index in (0, 1, 3):  # policy, value, ownership
            np.testing.assert_array_equal(after[index], before[index])
        if size == 19 or komi == 7.5:
            np.testing.assert_array_equal(after[2], before[2])
            continue
        # white's komi moved by d points: the side to move's view of it (k - reference) / 20, times (0.5 + 0.2
        # (size - 14) / 10) and the smallness (19 - size) / 10, in tens of points; black to move sees -d
        d = komi - 7.5
        side = np.array([-1.0 if len(s.moves) % 2 == 0 else 1.0 for s in positions[size]])
        expected = 10.0 * side * d / 20.0 * (0.5 + 0.2 * (size - 14) / 10.0) * (19 - size) / 10.0
        np.testing.assert_allclose(after[2] - before[2], expected, atol=1e-4)
    fp32, int8 = saved_with_its_term(grown, "small_board_score_komi", "score_komi_small_boards", tmp_path)
    nine = positions[9]
    for path in (fp32, int8):  # the term in the file, in fp32 in the int8 twin's head: 0.5 to 7.5 moves the same
        net = OnnxEvaluator(path, symmetry="identity", provider="cpu", log=None)
        gap = net.evaluate(at_komi(nine, 0.5)).score - net.evaluate(at_komi(nine, 7.5)).score
        torch_gap = (outputs(grown, planes[(9, 0.5)])[2] - outputs(grown, planes[(9, 7.5)])[2])
        np.testing.assert_allclose(gap, torch_gap, atol=1e-3 if path == fp32 else 0.5)
    checkpoint, added = str(tmp_path / "komi.pt"), str(tmp_path / "added.onnx")
    save_checkpoint(with_komi_input(old_model), checkpoint)
    assert main(["--add-small-board-score-komi", "--board-sizes", "9,19", checkpoint, added]) == 0
    assert load_onnx(added).spec.small_board_score_komi


@pytest.fixture(scope="module")
def komi_onnx(old_model, tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("komi") / "komi.onnx")
    export_onnx(with_komi_input(old_model), path, "tests: komi", board_sizes=[7, 9, 19])
    return path


def test_the_evaluator_shows_the_network_the_komi_of_the_game(komi_onnx, old_model, tmp_path):
    from tabula.engine.net.evaluator import OnnxEvaluator

    evaluator = OnnxEvaluator(komi_onnx, symmetry="identity", provider="cpu", log=None)
    assert evaluator.encoding is LEELAZ_KOMI and evaluator.metadata["input_encoding"] == KOMI_INPUT_ENCODING
    assert "komi" in evaluator.metadata["input"]
    states = random_game(9, 6, 2)[1:]
    at_7, at_0 = (evaluator.evaluate(at_komi(states, k)) for k in (7.5, 0.5))
    black = np.array([s.to_move == BLACK for s in states])
    np.testing.assert_allclose(at_0.score - at_7.score, np.where(black, 7.0, -7.0), atol=1e-3)
    np.testing.assert_allclose(at_0.value, at_7.value, atol=1e-6)
    plain = str(tmp_path / "plain.onnx")
    export_onnx(old_model, plain, "tests", board_sizes=[9])
    old = OnnxEvaluator(plain, symmetry="identity", provider="cpu", log=None).evaluate(at_komi(states, 7.5))
    np.testing.assert_allclose(at_7.score, old.score, atol=1e-4)
    np.testing.assert_allclose(at_7.policy, old.policy, atol=1e-6)
    with pytest.raises(ValueError, match="another game"):
        evaluator.evaluate([GomokuState(9)])
    assert load_onnx(komi_onnx).spec.input_encoding == KOMI_INPUT_ENCODING  # converts back, as fp32 files do


def test_the_search_never_mixes_network_results_of_two_komi(komi_onnx):
    """The table of network results is keyed by position, not komi: a search at another komi starts it afresh."""
    from tabula.engine.config import SearchConfig
    from tabula.engine.net.evaluator import OnnxEvaluator
    from tabula.engine.play.search import Search

    evaluator = OnnxEvaluator(komi_onnx, symmetry="identity", provider="cpu", log=None)
    search = Search(evaluator, SearchConfig(visits=8, threads=1, batch_size=4), np.random.default_rng(0))
    state = random_game(9, 5, 7)[-1]
    scores: dict[float, list[float]] = {}
    for komi in (7.5, 0.5, 7.5):
        search.run(at_komi([state], komi)[0])
        scores.setdefault(komi, []).append(search.tree.root.score)  # the network's score of the root
    assert scores[7.5][0] == pytest.approx(scores[7.5][1], abs=1e-5)
    sign = 1.0 if state.to_move == BLACK else -1.0
    assert scores[0.5][0] - scores[7.5][0] == pytest.approx(7.0 * sign, abs=1e-3)


def test_tabula_eval_reads_the_records_at_another_komi_and_reports_the_mean_lead(komi_onnx, tmp_path, capsys):
    from tabula.tools.learn.evaluate import main
    from tests.records_helpers import game_sgf, play_game

    for i in range(2):
        (tmp_path / f"g{i}.sgf").write_bytes(game_sgf(play_game(500 + i, moves=31), result="W+R", komi=6.5))
    leads = {}
    for komi in (None, 0.5, 7.5):
        capsys.readouterr()
        assert main([komi_onnx, str(tmp_path), "--size", "19"] + ([] if komi is None else ["--komi", str(komi)])) == 0
        lines = dict(line.split(": ") for line in capsys.readouterr().out.splitlines())
        leads[komi] = float(lines["white_score_lead"])
    # the extension's fixed path: white's predicted lead moves point for point with the komi (a little less at
    # three decimals)
    assert leads[7.5] - leads[0.5] == pytest.approx(7.0, abs=2e-3)
    assert leads[7.5] - leads[None] == pytest.approx(1.0, abs=2e-3)
    # --record-komi keeps the records played at that komi only
    (tmp_path / "g2.sgf").write_bytes(game_sgf(play_game(502, moves=31), result="B+R", komi=7.5))
    for record_komi, games in (("6.5", 2), ("7.5", 1), ("0.5", 0)):
        capsys.readouterr()
        assert main([komi_onnx, str(tmp_path), "--size", "19", "--record-komi", record_komi]) == 0
        assert dict(line.split(": ") for line in capsys.readouterr().out.splitlines())["games"] == str(games)


# -- files --------------------------------------------------------------------------------------------------------


@pytest.mark.slow  # a few seconds: the quick suite stays under 3 minutes
def test_tabula_export_adds_the_komi_input_and_quantizes_it(old_model, tmp_path):
    """``--add-komi-input`` from a checkpoint or an ONNX file; ``--to-leelaz`` refused; an int8 file calibrated with
    the komi plane still sees the komi, its score's path from it exactly, beyond the calibrated range too."""
    from tabula.engine.net.evaluator import OnnxEvaluator
    from tabula.tools.learn.export import main

    checkpoint = str(tmp_path / "old.pt")
    save_checkpoint(old_model, checkpoint)
    fp32, grown = str(tmp_path / "komi.onnx"), str(tmp_path / "komi.pt")
    assert main(["--add-komi-input", "--board-sizes", "9,19", checkpoint, fp32, "--checkpoint-out", grown]) == 0
    assert torch.load(grown, weights_only=True)["spec"]["input_encoding"] == KOMI_INPUT_ENCODING
    with pytest.raises(SystemExit, match="no komi input"):
        main(["--add-komi-input", "--to-leelaz", fp32, str(tmp_path / "lz.txt")])
    with pytest.raises(SystemExit, match="Leela Zero"):
        main(["--to-leelaz", fp32, str(tmp_path / "lz.txt")])
    with pytest.raises(SystemExit, match="already"):
        main(["--add-komi-input", fp32, str(tmp_path / "twice.onnx")])
    int8 = str(tmp_path / "komi-int8.onnx")
    assert main(["--quantize", "int8", "--calibration", "64", fp32, int8]) == 0
    quantized = OnnxEvaluator(int8, symmetry="identity", provider="cpu", log=None)
    reference = OnnxEvaluator(fp32, symmetry="identity", provider="cpu", log=None)
    states = random_game(19, 30, 2)[10::4]
    black = np.array([s.to_move == BLACK for s in states])
    for komi in (7.5, 0.5):
        exact = reference.evaluate(at_komi(states, komi))
        approximate = quantized.evaluate(at_komi(states, komi))
        assert np.abs(approximate.score - exact.score).max() < 1.0
    # the heads stay fp32 and read the komi there: its path to the score is exact, at any komi
    for komi in (0.5, 30.5):
        shift = quantized.evaluate(at_komi(states, komi)).score - quantized.evaluate(at_komi(states, 7.5)).score
        np.testing.assert_allclose(shift, np.where(black, 7.5 - komi, komi - 7.5), atol=1e-3)


# -- data ---------------------------------------------------------------------------------------------------------


def test_samples_carry_each_games_komi_and_the_trainer_adds_the_plane(tmp_path):
    from tabula.engine.data.records import RecordFilter, parse_record
    from tabula.engine.data.shards import PositionSampler, write_shard
    from tabula.tools.learn.train import batch_tensors, network_planes
    from tests.records_helpers import game_sgf, play_game

    even = [parse_record(f"e{k}", game_sgf(play_game(300 + i, moves=20, size=9), size=9, komi=k),
                         RecordFilter(size=9, min_moves=10)) for i, k in enumerate((0.5, 6.5, 7.5))]
    stones = handicap_points(9, 2)
    moves = play_game(310, moves=20, size=9, handicap=stones)
    setup = "AB" + "".join(f"[{chr(97 + p % 9)}{chr(97 + 8 - p // 9)}]" for p in stones)
    handicap = parse_record("h", game_sgf(moves, size=9, komi=0.5, header=f"HA[2]{setup}", first_color="W"),
                            RecordFilter(size=9, min_moves=10, handicap="policy"))
    assert handicap.value_weight == 0 and handicap.handicap == 2
    valued = parse_record("h", game_sgf(moves, size=9, komi=0.5, header=f"HA[2]{setup}", first_color="W",
                                        result="W+4.5"), RecordFilter(size=9, min_moves=10, handicap="value"))
    assert valued.value_weight == 1 and valued.margin == -4.5  # kept as a value and score target on request
    path = str(tmp_path / "train-0000.tshard")
    write_shard(path, even + [handicap], size=9)
    sampler = PositionSampler([path])
    positions = np.arange(sampler.num_positions)
    batch = sampler.batch(np.random.default_rng(0), 0, symmetries=True, positions=positions)
    games, ks = sampler.locate(positions)
    expected = [komi_points(sampler.state(g, k)[0]) for g, k in zip(games.tolist(), ks.tolist())]
    np.testing.assert_array_equal(batch.komi, np.asarray(expected, dtype=np.float32))
    assert set(np.abs(batch.komi).tolist()) == {0.5, 6.5, 7.5}
    assert sampler.state(3, 0)[0].handicap == 2 and batch.komi[games == 3][0] == 0.5  # white first, komi +0.5
    tensors = batch_tensors(batch)
    planes = network_planes(tensors["planes"], tensors["komi"], LEELAZ_KOMI)
    assert planes.shape[1] == 19 and torch.equal(planes[:, :18], tensors["planes"])
    assert torch.allclose(planes[:, 18, 4, 4], tensors["komi"] / 20)
    assert network_planes(tensors["planes"], tensors["komi"], LEELAZ) is tensors["planes"]


def test_records_are_seen_at_other_komis_with_the_result_their_margin_gives_there(tmp_path):
    from tabula.engine.data.records import RecordFilter, parse_record
    from tabula.engine.data.shards import PositionSampler, write_shard
    from tests.records_helpers import game_sgf, play_game

    def record(seed: int, result: str, handicap: str = "value"):
        return parse_record(f"g{seed}", game_sgf(play_game(seed, moves=30, size=9), size=9, komi=7.5, result=result),
                            RecordFilter(size=9, min_moves=10, handicap=handicap))

    counted = [record(500, "B+2.5"), record(501, "W+0.5"), record(502, "B+40.5"), record(504, "B+3.5"),
               record(505, "W+1.5")]
    resigned = record(503, "W+R")  # no margin: it keeps its komi and its result
    path = str(tmp_path / "train-0000.tshard")
    write_shard(path, counted + [resigned], size=9)
    plain = PositionSampler([path])
    moved = PositionSampler([path], komi_spread=5.0)
    for sampler in (plain, moved):
        sampler.games["margin"][3] = -3.5  # a margin that contradicts its recorded winner (black): kept as played
        sampler.games["winner"][4], sampler.games["margin"][4] = 0, 0.0  # a draw: its margin is exact, it moves
    positions = np.arange(plain.num_positions)
    before = plain.batch(np.random.default_rng(3), 0, symmetries=False, positions=positions)
    after = moved.batch(np.random.default_rng(3), 0, symmetries=False, positions=positions)
    games, _ = plain.locate(positions)
    black = np.where(before.komi < 0, 1.0, -1.0)  # black moves where its komi is negative (white's 7.5)
    shift = (before.komi - after.komi) * black  # how far white's komi moved, in points
    assert np.all(shift * 2 == np.round(shift * 2)) and np.abs(shift).max() > 2 and np.std(shift) > 2
    # the mover's margin moves against the mover's komi, point for point, and the result is its sign
    np.testing.assert_allclose(after.score, before.score - shift * black, atol=1e-5)
    moved_rows = (shift != 0) & (before.score_weight > 0)
    np.testing.assert_array_equal(after.value[moved_rows], np.sign(after.score[moved_rows]))
    assert (after.value != before.value).any() and not (after.value[games == 2] != before.value[games == 2]).any()
    # the resigned game and the one whose margin contradicts its result keep their komi; the draw moves
    assert not shift[games == 5].any() and not shift[games == 3].any()
    assert shift[games == 4].any() and np.all(after.value[(games == 4) & (shift != 0)] != 0)
    # the planes, policy, ownership and weights are the game's own
    for name in ("planes", "policy", "value_weight", "score_weight", "ownership"):
        np.testing.assert_array_equal(getattr(after, name), getattr(before, name))
    with pytest.raises(ValueError, match="komi_spread"):
        PositionSampler([path], komi_spread=-1.0)
    # score only: the same moved komis and scores, and the moved positions train no value
    score_only = PositionSampler([path], komi_spread=5.0, moved_value=False)
    score_only.games["margin"][3] = -3.5
    score_only.games["winner"][4], score_only.games["margin"][4] = 0, 0.0
    only = score_only.batch(np.random.default_rng(3), 0, symmetries=False, positions=positions)
    for name in ("komi", "score", "score_weight", "value"):
        np.testing.assert_array_equal(getattr(only, name), getattr(after, name))
    assert not only.value_weight[shift != 0].any() and (shift != 0).any()
    np.testing.assert_array_equal(only.value_weight[shift == 0], before.value_weight[shift == 0])


def test_tabula_train_moves_the_komi_only_for_a_network_that_sees_it(tmp_path):
    from tabula.tools.learn.train import parse_args

    config = parse_args(["--data", "d", "--out", "o", "--komi-spread", "4", "--input-encoding", KOMI_INPUT_ENCODING])
    assert config.komi_spread == 4.0
    for bad in (["--komi-spread", "4"], ["--komi-spread", "-1", "--input-encoding", KOMI_INPUT_ENCODING],
                ["--komi-spread", "nan", "--input-encoding", KOMI_INPUT_ENCODING], ["--input-encoding", "nope"]):
        with pytest.raises(SystemExit):
            parse_args(["--data", "d", "--out", "o", *bad])


def test_the_trainer_extends_an_18_plane_start_and_trains_the_komi_terms(old_model, tmp_path):
    from tabula.tools.learn.train import TrainConfig, load_training_checkpoint, train

    data = nine_by_nine_records(tmp_path, 400)
    start = str(tmp_path / "start.pt")
    save_checkpoint(old_model, start)
    lines: list[str] = []
    config = TrainConfig(data=data, out=str(tmp_path / "run"), blocks=1, filters=8, head=POOLED, aux=True,
                         small_board_value=True, steps=6, chunk_steps=4, batch=8, optimizer="adamw", lr=1e-2,
                         warmup_steps=0, workers=0, threads=1, precision="fp32", val_every=4, val_positions=16,
                         log_every=2, export=True, init=start, input_encoding=KOMI_INPUT_ENCODING)
    result = train(config, log=lines.append)
    assert any("extended with the komi input" in line for line in lines) and result["step"] == 4
    saved = load_training_checkpoint(str(tmp_path / "run" / "checkpoint.pt"))
    assert saved["spec"]["input_encoding"] == KOMI_INPUT_ENCODING
    for name in ("head.value_komi.weight", "input_komi.weight"):
        assert saved["state_dict"][name].abs().sum() > 0  # trained from zero
    # resumed (its reference komi read from its checkpoint), it completes and exports the komi network
    assert train(dataclasses.replace(config, chunk_steps=0), log=lambda line: None)["step"] == 6
    assert load_onnx(str(tmp_path / "run" / "model.onnx")).spec.input_encoding == KOMI_INPUT_ENCODING
    # an 18-plane run refuses the komi checkpoint
    with pytest.raises(SystemExit, match="another architecture"):
        train(dataclasses.replace(config, out=str(tmp_path / "plain"), input_encoding="leelaz-18",
                                  init=str(tmp_path / "run" / "checkpoint.pt")), log=lambda line: None)


# -- self-play ------------------------------------------------------------------------------------------------------


def test_selfplay_draws_komi_and_handicap_per_game_from_the_games_own_seed():
    from tabula.tools.learn.selfplay import SelfPlayConfig

    plain = SelfPlayConfig(sizes=(9,), komi=7.0)
    assert all(plain.game_start(9, seed) == (7.0, 0) for seed in range(20))
    spread = SelfPlayConfig(sizes=(9,), komi=7.0, komi_spread=3.0, handicap_fraction=0.25, max_handicap=3)
    starts = [spread.game_start(9, seed) for seed in range(400)]
    assert starts == [spread.game_start(9, seed) for seed in range(400)]  # a pure function of the seed
    komis = np.array([k for k, h in starts if h == 0])
    assert np.all(komis * 2 == np.round(komis * 2))  # half points
    assert 5.5 < komis.mean() < 8.5 and 2.0 < komis.std() < 4.0
    handicaps = [h for k, h in starts if h]
    assert 0.15 < len(handicaps) / len(starts) < 0.35 and set(handicaps) == {2, 3}
    assert all(k == 0.5 for k, h in starts if h)
    assert SelfPlayConfig(sizes=(5,), handicap_fraction=1.0).game_start(5, 1) == (7.5, 0)  # no placement on 5x5
    for bad in (dict(komi_spread=-1.0), dict(handicap_fraction=1.5), dict(max_handicap=12),
                dict(game="gomoku", komi_spread=2.0)):
        with pytest.raises(ValueError):
            SelfPlayConfig(sizes=(9,), **bad)


def test_a_handicap_selfplay_game_is_stored_with_its_stones_and_komi(tmp_path):
    from tabula.engine.data.replay import ReplaySampler, ReplayStore, read_game
    from tabula.engine.net.evaluator import UniformEvaluator
    from tabula.tools.learn.selfplay import NetBlob, SelfPlayConfig, SelfPlayTask, play_selfplay_game

    config = SelfPlayConfig(sizes=(7,), komi=7.5, visits=6, fast_visits=0, temperature_moves=2, batch_size=4,
                            max_moves_factor=1.0, handicap_fraction=1.0, max_handicap=2)
    task = SelfPlayTask(NetBlob("uniform", b""), config, seed=4, resign_threshold=0.0, resign_enabled=True, size=7)
    game, sgf = play_selfplay_game(task, evaluator=UniformEvaluator())
    assert game.komi == 0.5 and game.handicap == 2 and len(game.setup) == 2 and game.moves[0][0] == WHITE
    assert b"HA[2]" in sgf and b"AB[" in sgf
    record = game.record()
    final = record.replay()
    assert record.margin == float(record.ownership.sum()) - 0.5 and final.handicap == 2
    with ReplayStore(str(tmp_path / "replay"), 10) as store:
        path = store.append(game)
    back = read_game(path)
    assert (back.setup, back.handicap, back.komi) == (game.setup, 2, 0.5)
    batch = ReplaySampler([path]).batch(np.random.default_rng(0), 16)
    assert set(np.abs(batch.komi).tolist()) == {0.5}


def test_black_searches_less_in_a_handicap_selfplay_game_when_asked():
    """--handicap-black-visits: in a handicap game black's searches get that share of the visits (white is the
    stronger side, as a bot giving handicap is); an even game of the same run is played as before, both sides at
    the full visits, from one tree."""
    from tabula.engine.net.evaluator import UniformEvaluator
    from tabula.tools.learn.selfplay import NetBlob, SelfPlayConfig, SelfPlayTask, play_selfplay_game

    def played(seed: int, **settings):
        config = SelfPlayConfig(sizes=(7,), komi=7.5, visits=16, fast_visits=0, temperature_moves=2, batch_size=4,
                                max_moves_factor=0.5, prune_targets=False, **settings)
        task = SelfPlayTask(NetBlob("uniform", b""), config, seed=seed, resign_threshold=0.0, resign_enabled=False,
                            size=7)
        return play_selfplay_game(task, evaluator=UniformEvaluator())[0]

    game = played(4, handicap_fraction=1.0, max_handicap=2, handicap_black_visits=0.25)
    assert game.handicap == 2
    searched = {BLACK: [], WHITE: []}
    for (color, _), target in zip(game.moves, game.targets):
        searched[color].append(int(target[1].sum()))
    assert max(searched[BLACK]) <= 4 and max(searched[WHITE]) > 4
    equal = played(4, handicap_fraction=1.0, max_handicap=2)
    assert max(int(t[1].sum()) for (color, _), t in zip(equal.moves, equal.targets) if color == BLACK) > 4
    even = played(3, handicap_black_visits=0.25)
    assert even.handicap == 0 and even.moves == played(3).moves
    for bad in (0.0, 1.5):
        with pytest.raises(ValueError):
            SelfPlayConfig(sizes=(9,), handicap_black_visits=bad)


def test_an_rl_run_extends_its_start_network_with_the_komi_input(old_model, tmp_path):
    from tabula.engine.net.evaluator import OnnxEvaluator
    from tabula.tools.learn.rl_loop import INIT_CHECKPOINT, RLConfig, adopt_start_network, initial_network

    start = str(tmp_path / "start.onnx")
    export_onnx(old_model, start, "tests", board_sizes=[7, 9])
    rl = RLConfig(blocks=1, filters=8, start_from=start, input_encoding=KOMI_INPUT_ENCODING)
    adopted = adopt_start_network(rl, (7,))
    assert adopted.input_encoding == KOMI_INPUT_ENCODING and adopted.head == POOLED
    assert adopt_start_network(dataclasses.replace(rl, input_encoding=""), (7,)).input_encoding == ""
    with pytest.raises(SystemExit, match="gomoku-4"):
        adopt_start_network(dataclasses.replace(rl, input_encoding="gomoku-4"), (7,))
    first = str(tmp_path / "gen-0000.onnx")
    initial_network(first, adopted, 7, str(tmp_path), KOMI_INPUT_ENCODING)
    evaluator = OnnxEvaluator(first, symmetry="identity", provider="cpu", log=None)
    assert evaluator.encoding is LEELAZ_KOMI and evaluator.board_sizes == (7, 9)
    assert torch.load(os.path.join(str(tmp_path), INIT_CHECKPOINT), weights_only=True)["spec"]["input_encoding"] \
        == KOMI_INPUT_ENCODING
    assert json.loads(evaluator.metadata["architecture"])["komi_reference"] == 7.5


def test_self_play_windows_are_seen_at_other_komis_when_the_run_asks(tmp_path):
    from tabula.engine.data.replay import MixedSizeSampler, ReplayStore
    from tabula.engine.net.evaluator import UniformEvaluator
    from tabula.tools.learn.rl_loop import RLConfig, check_sizes, window_sampler
    from tabula.tools.learn.selfplay import NetBlob, SelfPlayConfig, SelfPlayTask, play_selfplay_game

    config = SelfPlayConfig(sizes=(7,), komi=7.5, visits=4, fast_visits=0, temperature_moves=30, batch_size=4)
    with ReplayStore(str(tmp_path / "replay"), 10) as store:
        for seed in range(3):
            task = SelfPlayTask(NetBlob("uniform", b""), config, seed=seed, resign_threshold=0.0,
                                resign_enabled=False, size=7)
            store.append(play_selfplay_game(task, evaluator=UniformEvaluator())[0])
        paths = store.paths()
    rl = RLConfig(blocks=1, filters=8, head="pooled", input_encoding=KOMI_INPUT_ENCODING, train_komi_spread=6.0)
    sampler = window_sampler(rl)(paths)
    assert isinstance(sampler, MixedSizeSampler)
    plain = MixedSizeSampler(paths).batch(np.random.default_rng(1), 256)
    assert set(np.abs(plain.komi).tolist()) == {7.5}  # the games' own komi
    moved = sampler.batch(np.random.default_rng(1), 256)
    assert np.all(moved.komi * 2 == np.round(moved.komi * 2)) and np.std(np.abs(moved.komi)) > 2  # half points
    # the result is the moved margin's sign, from the mover's view
    np.testing.assert_array_equal(moved.value, np.sign(moved.score))
    # --train-komi-spread-score-only: the same batch, the moved positions without a value target
    score_only = window_sampler(dataclasses.replace(rl, train_komi_spread_score_only=True))(paths)
    only = score_only.batch(np.random.default_rng(1), 256)
    np.testing.assert_array_equal(only.score, moved.score)
    shifted = np.abs(only.komi) != 7.5
    assert shifted.any() and not only.value_weight[shifted].any() and only.value_weight[~shifted].all()
    check_sizes(rl, config)
    for bad in (dict(train_komi_spread=-1.0), dict(train_komi_spread=float("nan")),
                dict(input_encoding="", train_komi_spread=2.0)):
        with pytest.raises(SystemExit, match="train-komi-spread"):
            check_sizes(dataclasses.replace(rl, **bad), config)
    for bad in (-0.1, 1.0, float("nan")):
        with pytest.raises(SystemExit, match="ema-decay"):
            check_sizes(dataclasses.replace(rl, ema_decay=bad), config)
    from tabula.tools.learn.rl_loop import train_config

    assert train_config(str(tmp_path), dataclasses.replace(rl, ema_decay=0.99), config).ema_decay == 0.99
    # anchored by records: the records' counted games move too, by the same spread
    from tabula.engine.data.records import RecordFilter, parse_record
    from tabula.engine.data.replay import AnchoredSampler
    from tabula.engine.data.shards import write_shard
    from tests.records_helpers import game_sgf, play_game

    records = tmp_path / "records"
    records.mkdir()
    write_shard(str(records / "train-0000.tshard"),
                [parse_record(f"g{seed}", game_sgf(play_game(seed, moves=20, size=7), size=7, komi=7.5,
                                                    result="B+3.5"), RecordFilter(size=7, min_moves=10))
                 for seed in range(3)], size=7)
    anchored = window_sampler(dataclasses.replace(rl, anchor_data=str(records), anchor_fraction=0.5))(paths)
    assert isinstance(anchored, AnchoredSampler)
    assert anchored.anchor.komi_spread == anchored.window.samplers[7].komi_spread == 6.0


def test_a_resumed_run_may_change_its_komi_spread_and_lower_its_resignation_ceiling(tmp_path):
    from tabula.tools.learn.rl_loop import STATE, Loop, RLConfig, settle_config
    from tabula.tools.learn.selfplay import SelfPlayConfig

    directory = str(tmp_path / "run")
    selfplay = SelfPlayConfig(sizes=(7,), visits=4, fast_visits=0, batch_size=4)
    rl = RLConfig(blocks=1, filters=8, head="pooled", input_encoding=KOMI_INPUT_ENCODING, resign_ceiling=0.2)
    settle_config(directory, rl, selfplay)
    changed = dataclasses.replace(rl, train_komi_spread=6.0, resign_ceiling=0.0, min_positions=40000)
    assert settle_config(directory, changed, selfplay)[0] == changed
    with pytest.raises(SystemExit, match="lr"):
        settle_config(directory, dataclasses.replace(changed, lr=0.5), selfplay)
    # a run that had calibrated a threshold of 10%: under the new ceiling of 0 nobody resigns, from the first game on
    with open(os.path.join(directory, STATE), "w") as handle:
        json.dump({"generation": 3, "best": "nets/gen-0002.onnx", "best_generation": 2, "best_elo": 0.0,
                   "resign_threshold": 0.1, "selfplay_target": 150, "train_target": 200, "train_generation": 2},
                  handle)
    assert Loop(directory, changed, selfplay, log=lambda *_: None).state["resign_threshold"] == 0.0
    assert Loop(directory, rl, selfplay, log=lambda *_: None).state["resign_threshold"] == 0.1  # under a 0.2 ceiling
