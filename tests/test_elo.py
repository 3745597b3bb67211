"""Rating maths on known cases: Elo from score, Wilson intervals, maximum-likelihood ratings."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tabula.tools.compete.elo import ELO_SCALE, WinRate, elo_from_score, expected_score, fit_ratings, wilson_interval


def test_elo_from_score_known_values():
    assert elo_from_score(0.5) == 0.0
    assert elo_from_score(0.75) == pytest.approx(190.85, abs=0.01)  # 400 log10(3)
    assert elo_from_score(10 / 11) == pytest.approx(400.0)
    assert elo_from_score(0.0) == -math.inf and elo_from_score(1.0) == math.inf
    for diff in (-500.0, -35.0, 0.0, 120.0):
        assert elo_from_score(expected_score(diff)) == pytest.approx(diff)
    with pytest.raises(ValueError):
        elo_from_score(1.5)


def test_wilson_interval_known_values():
    low, high = wilson_interval(8, 10)
    assert (low, high) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson_interval(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    for trials in (1, 3, 10, 100, 1000, 12345):  # exactly 0 and 1 at the extremes, not 1e-18 or 1 - 1e-16
        assert wilson_interval(0, trials)[0] == 0.0 and wilson_interval(trials, trials)[1] == 1.0
    low, high = wilson_interval(500, 1000)
    assert (low + high) / 2 == pytest.approx(0.5) and high - low == pytest.approx(2 * 1.96 * 0.0158, abs=1e-3)


def test_win_rate_counts_draws_as_halves():
    rate = WinRate(wins=6, losses=2, draws=2)
    assert rate.games == 10 and rate.score == 0.7
    assert rate.interval == wilson_interval(7, 10)
    low, high = rate.elo_interval
    assert low < rate.elo < high
    assert "6-2-2 (10 games)" in rate.describe()
    assert WinRate(0, 0).score == 0.5


def test_a_whitewash_prints_an_infinite_elo_bound():
    assert "Elo -inf [-inf, -566]" in WinRate(wins=0, losses=100).describe()
    assert "Elo +inf [+566, +inf]" in WinRate(wins=100, losses=0).describe()


def test_two_players_plain_maximum_likelihood_matches_the_score():
    results = [(0, 1, 1.0)] * 3 + [(0, 1, 0.0)]
    ratings = fit_ratings(["a", "b"], results, prior_draws=0, anchor=1, anchor_elo=1000)
    assert ratings.elo[1] == 1000
    assert ratings.elo[0] - 1000 == pytest.approx(elo_from_score(0.75), abs=1e-6)
    # Fisher information of n games at p: n p (1 - p); the standard error is its inverse square root.
    assert ratings.stderr[0] == pytest.approx(ELO_SCALE / math.sqrt(4 * 0.75 * 0.25), rel=1e-6)
    assert ratings.stderr[1] == 0.0
    assert list(ratings.games) == [4, 4] and list(ratings.score) == [3, 1]


def test_prior_keeps_a_perfect_score_finite_and_shrinks():
    results = [(0, 1, 1.0)] * 4
    ratings = fit_ratings(["a", "b"], results)  # 2 virtual draws: score 5 of 6
    assert ratings.elo[0] - ratings.elo[1] == pytest.approx(elo_from_score(5 / 6), abs=1e-6)
    assert ratings.elo.mean() == pytest.approx(0.0)
    with pytest.raises(ValueError, match="no finite maximum"):
        fit_ratings(["a", "b"], results, prior_draws=0)


def test_round_robin_recovers_consistent_ratings():
    true = np.array([200.0, 0.0, -100.0])
    results = []
    for i in range(3):
        for j in range(i + 1, 3):
            p = expected_score(true[i] - true[j])
            wins = round(1000 * p)  # a large exact-proportion sample: the fit should land on the truth
            results += [(i, j, 1.0)] * wins + [(i, j, 0.0)] * (1000 - wins)
    ratings = fit_ratings(["a", "b", "c"], results, prior_draws=0, anchor=1)
    assert ratings.elo == pytest.approx(true, abs=3.0)
    centred = fit_ratings(["a", "b", "c"], results, prior_draws=0, offset=1500)
    assert centred.elo.mean() == pytest.approx(1500)
    assert np.diff(centred.elo) == pytest.approx(np.diff(ratings.elo))
    assert "rank" in centred.table() and centred.table().index(" a ") < centred.table().index(" c ")


def test_draws_count_half():
    results = [(0, 1, 0.5)] * 10 + [(0, 1, 1.0)] * 2
    ratings = fit_ratings(["a", "b"], results, prior_draws=0)
    assert ratings.elo[0] - ratings.elo[1] == pytest.approx(elo_from_score(7 / 12), abs=1e-6)


def test_disconnected_players_are_rejected():
    with pytest.raises(ValueError, match="do not all meet"):
        fit_ratings(["a", "b", "c", "d"], [(0, 1, 1.0), (2, 3, 0.0)])
    with pytest.raises(ValueError, match="bad pairing"):
        fit_ratings(["a", "b"], [(0, 0, 1.0)])
