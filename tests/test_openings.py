"""`tabula openings`: lines through the network's likeliest moves, merged by symmetry, chosen near an even game."""
from __future__ import annotations

import numpy as np
import pytest

from tabula.engine.net.evaluation import Evaluation
from tabula.engine.rules.coords import BLACK, parse_vertex
from tabula.engine.rules.game import GameState, Rules
from tabula.tools.compete import openings
from tabula.tools.compete.match import read_openings


class CornerEvaluator:
    """Prefers the 3-3 points, then the centre; black's chance is 0.5 plus 0.1 a black stone on the lower half."""

    def evaluate_averaged(self, states):
        size = states[0].size
        policy = np.full((len(states), size * size + 1), 1e-4, np.float32)
        for vertex, prior in (("C3", 0.3), ("G7", 0.3), ("C7", 0.3), ("G3", 0.3), ("E5", 0.2)):
            policy[:, parse_vertex(vertex, size)] = prior
        for i, state in enumerate(states):
            policy[i, [m for _, m in state.moves]] = 0.0
        policy /= policy.sum(axis=1, keepdims=True)
        black = np.array([sum(1 for c, m in s.moves if c == BLACK and m // size < size // 2) for s in states])
        chance = 0.5 + 0.1 * black
        sign = np.array([1.0 if s.to_move == BLACK else -1.0 for s in states], np.float32)
        value = (sign * (2.0 * chance - 1.0)).astype(np.float32)
        return Evaluation(policy=policy, value=value, score=(sign * 2.0 * black).astype(np.float32))


def test_symmetric_positions_share_a_key():
    keys = set()
    for vertex in ("C3", "G7", "C7", "G3"):
        state = GameState(9, Rules(komi=7.5))
        state.play(parse_vertex(vertex, 9))
        keys.add(openings.position_key(state))
    assert len(keys) == 1
    other = GameState(9, Rules(komi=7.5))
    other.play(parse_vertex("E5", 9))
    assert openings.position_key(other) not in keys


def test_lines_grow_through_likely_moves_once_each_up_to_symmetry():
    lines = openings.grow(CornerEvaluator(), GameState(9, Rules(komi=7.5)), moves=2, width=5, min_prior=0.1)
    texts = [line.text(9) for line in lines]
    first_moves = {text.split()[0] for text in texts}
    assert len(first_moves & {"C3", "G7", "C7", "G3"}) == 1 and "E5" in first_moves  # one corner stands for all
    assert all(len(text.split()) == 2 for text in texts) and len(set(texts)) == len(texts)
    chances = {line.text(9): line.black_chance for line in lines}
    assert all(0.5 <= c <= 0.6 + 1e-6 for c in chances.values())
    assert any(line.black_lead == pytest.approx(2.0) for line in lines)  # black's stone on the lower half


def test_choose_keeps_the_window_nearest_one_half_first():
    made = [openings.Line([i], None, chance) for i, chance in enumerate((0.9, 0.52, 0.31, 0.45, 0.2))]
    assert [line.moves[0] for line in openings.choose(made, 3, 0.3, 0.7)] == [1, 3, 2]
    assert [line.moves[0] for line in openings.choose(made, 1, 0.3, 0.7)] == [1]


def test_a_written_book_is_what_tabula_match_reads(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(openings, "load_networks", lambda paths, seed: (CornerEvaluator(), []))
    book = tmp_path / "book.txt"
    assert openings.main(["--weights", "any.onnx", "--moves", "2", "--width", "5", "--min-prior", "0.1",
                          "--window", "0.5,0.7", "--out", str(book)]) == 0
    lines = read_openings(str(book), 9, 7.5, 0, "fixed")
    assert lines and all(len(line.split()) == 2 for line in lines)
    assert book.read_text().startswith("# ")
    assert openings.main(["--weights", "any.onnx", "--window", "0.9,0.95", "--moves", "1", "--out",
                          str(tmp_path / "none.txt")]) == 1  # nothing in the window: said, and a failing status
    with pytest.raises(SystemExit):
        openings.main(["--weights", "any.onnx", "--window", "0.7,0.3"])
