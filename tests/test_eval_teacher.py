"""`tabula eval --teacher`: a network's agreement with a teacher on the same record positions. The network as its
own teacher agrees exactly; another network disagrees by sensible amounts; a teacher that cannot be loaded, or
does not play the records' size, is a message and exit code 2."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")  # the tiny networks are built with torch

from tabula.engine.net.evaluator import Evaluation  # noqa: E402
from tabula.tools.learn.evaluate import TeacherScores, main  # noqa: E402
from tests.records_helpers import game_sgf, handicap_sgf, play_game  # noqa: E402


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    folder = tmp_path_factory.mktemp("records")
    for i, result in enumerate(("B+R", "W+3.5")):
        (folder / f"g{i}.sgf").write_bytes(game_sgf(play_game(700 + i, moves=32), result=result, komi=6.5))
    return str(folder)


def figures(capsys, argv: list[str]) -> dict[str, float]:
    capsys.readouterr()
    assert main(argv) == 0
    return {name: float(value) for name, value in (line.split(": ") for line in capsys.readouterr().out.splitlines())}


def test_a_network_agrees_exactly_with_itself_as_teacher(tiny_aux_onnx, records, capsys):
    net = str(tiny_aux_onnx)
    lines = figures(capsys, [net, records, "--size", "19", "--teacher", net, "--teacher-every", "1"])
    assert lines["teacher_positions"] == lines["positions"]
    assert lines["teacher_policy_kl"] == pytest.approx(0.0, abs=1e-4)
    assert lines["teacher_top1"] == 1.0
    assert lines["teacher_value_mse"] == pytest.approx(0.0, abs=1e-4)
    assert lines["teacher_lead_mae"] == pytest.approx(0.0, abs=2e-3)  # both have a score head
    assert lines["teacher_value_bias_white"] == pytest.approx(0.0, abs=1e-4)
    assert lines["teacher_value_mse_moves_0_49"] == pytest.approx(0.0, abs=1e-4)  # the games are 32 moves long
    # the teacher's own figures, every position judged, are the network's
    assert lines["teacher_own_top1"] == pytest.approx(lines["top1"], abs=1e-4)
    assert lines["teacher_own_value_mse"] == pytest.approx(lines["value_mse"], abs=1e-3)


def test_another_teacher_disagrees_by_sensible_amounts(tiny_onnx, tiny_aux_onnx, records, capsys):
    lines = figures(capsys, [str(tiny_onnx), records, "--teacher", str(tiny_aux_onnx), "--teacher-every", "3"])
    assert lines["teacher_positions"] == -(-lines["positions"] // 3)  # the 1st, 4th, 7th ... position met
    assert 0.01 < lines["teacher_policy_kl"] < 20
    assert 0.0 <= lines["teacher_top1"] < 1.0
    assert 0.0 < lines["teacher_value_mse"] <= 4.0
    assert "teacher_lead_mae" not in lines  # tiny_onnx has no score head


def test_the_kl_is_the_teachers_over_the_networks():
    teacher = Evaluation(policy=np.array([[0.5, 0.5, 0.0]], np.float32), value=np.array([0.5], np.float32),
                         score=np.array([2.0], np.float32))
    net = Evaluation(policy=np.array([[0.25, 0.25, 0.5]], np.float32), value=np.array([-0.5], np.float32),
                     score=np.array([-1.0], np.float32))
    scores = TeacherScores()
    scores.add(net, teacher, np.array([2]), np.array([1.0]), np.array([1.0]))
    lines = dict(line.split(": ") for line in scores.lines())
    assert float(lines["teacher_policy_kl"]) == pytest.approx(np.log(2.0), abs=1e-4)
    assert float(lines["teacher_top1"]) == 0.0  # the network's likeliest is pass, the teacher's the first point
    assert float(lines["teacher_value_mse"]) == pytest.approx(1.0)
    assert float(lines["teacher_lead_mae"]) == pytest.approx(3.0)
    assert float(lines["teacher_own_value_mse"]) == pytest.approx(0.25)
    assert "teacher_value_bias_white" not in lines and "teacher_value_mse_moves_0_49" not in lines  # not given


def test_the_value_and_lead_are_also_told_by_stage_and_by_colour():
    def evaluation(values, leads):
        return Evaluation(policy=np.full((len(values), 3), 1 / 3, np.float32), value=np.array(values, np.float32),
                          score=np.array(leads, np.float32))

    teacher = evaluation([0.5, 0.5, -0.5, 0.0], [2.0, 2.0, -2.0, 0.0])
    net = evaluation([0.25, 0.5, -0.25, 0.5], [1.0, 2.0, -1.0, 4.0])  # less sure twice, white ahead by more once
    scores = TeacherScores()
    scores.add(net, teacher, np.zeros(4, int), np.zeros(4), np.zeros(4), moves=np.array([10, 49, 50, 260]),
               white=np.array([False, True, True, True]))
    lines = {k: float(v) for k, v in (line.split(": ") for line in scores.lines())}  # rounded to 3-4 places
    assert lines["teacher_value_slope"] == pytest.approx((0.125 + 0.25 + 0.125) / 0.75, abs=1e-3)
    # (net - teacher) from white's view: black to move -0.25 is +0.25 for white; then 0, +0.25, +0.5
    assert lines["teacher_value_bias_white"] == pytest.approx((0.25 + 0.0 + 0.25 + 0.5) / 4, abs=1e-3)
    assert lines["teacher_lead_bias_white"] == pytest.approx((1.0 + 0.0 + 1.0 + 4.0) / 4, abs=1e-3)
    assert lines["teacher_value_mse_moves_0_49"] == pytest.approx(0.0625 / 2, abs=1e-3)
    assert lines["teacher_value_mse_moves_50_99"] == pytest.approx(0.0625, abs=1e-3)
    assert lines["teacher_lead_mae_moves_200_up"] == pytest.approx(4.0, abs=1e-3)
    assert "teacher_value_mse_moves_100_149" not in lines  # no position there


def test_a_bad_teacher_is_a_message(tiny_onnx, records, tmp_path, capsys):
    bad = tmp_path / "bad.onnx"
    bad.write_text("not a network")
    for path, says in ((tmp_path / "missing.bin.gz", "no such file"), (bad, "cannot load the teacher")):
        capsys.readouterr()
        assert main([str(tiny_onnx), records, "--teacher", str(path)]) == 2
        assert says in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(tiny_onnx), records, "--teacher", str(tiny_onnx), "--teacher-every", "0"])


def test_handicap_games_are_dropped_unless_asked_and_then_judged_without_a_value_target(tiny_aux_onnx, tmp_path,
                                                                                          capsys):
    folder = tmp_path / "handicap"
    folder.mkdir()
    (folder / "h.sgf").write_bytes(handicap_sgf(5))
    net = str(tiny_aux_onnx)
    assert figures(capsys, [net, str(folder)])["positions"] == 0
    lines = figures(capsys, [net, str(folder), "--handicap", "policy", "--teacher", net, "--teacher-every", "1"])
    assert lines["positions"] == 40 and lines["teacher_positions"] == 40  # every move of the game, white first
    assert lines["value_positions"] == 0  # who won says nothing of a handicap game's positions
    assert lines["teacher_policy_kl"] == pytest.approx(0.0, abs=1e-4)
    assert figures(capsys, [net, str(folder), "--handicap", "value"])["value_positions"] == 40
