"""Rating maths for matches: win rates with Wilson intervals, Elo differences, and maximum-likelihood ratings of
several engines from a gauntlet or round robin (Bradley–Terry on the Elo scale, BayesElo-style virtual-draw prior).

Layer: tools, pure numpy; no engine imports. Scores are from the first-named player's view: a win is 1, a draw 0.5
(a draw counts as half a win to each side, as in the Elo system), a loss 0. Ratings are in Elo points, where a
difference of ``d`` means an expected score of ``1 / (1 + 10 ** (-d / 400))``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

Z_95 = 1.959963984540054  # two-sided 95% quantile of the standard normal
ELO_SCALE = 400.0 / math.log(10.0)  # d(Elo)/d(logit): 173.7...
DEFAULT_PRIOR_DRAWS = 2.0  # BayesElo's default: two virtual draws between every pair that met


def expected_score(elo_difference: float) -> float:
    """Expected score of a player rated ``elo_difference`` points above the opponent."""
    return 1.0 / (1.0 + 10.0 ** (-elo_difference / 400.0))


def elo_from_score(score: float) -> float:
    """Elo difference that gives this expected score in [0, 1]; ±inf at 0 and 1."""
    if not 0.0 <= score <= 1.0:
        raise ValueError(f"score {score} is outside [0, 1]")
    if score == 0.0:
        return -math.inf
    if score == 1.0:
        return math.inf
    return -400.0 * math.log10(1.0 / score - 1.0)


def wilson_interval(successes: float, trials: float, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval for a proportion; ``successes`` may be fractional (draws as halves).

    Returns (0, 1) for no trials. Unlike the normal approximation it stays inside [0, 1] and is sensible at 0/n and
    n/n, which small matches often give.
    """
    if trials <= 0:
        return 0.0, 1.0
    if not 0 <= successes <= trials:
        raise ValueError(f"{successes} successes out of {trials} trials")
    p = successes / trials
    z2 = z * z
    centre = (p + z2 / (2 * trials)) / (1 + z2 / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / (1 + z2 / trials)
    # At 0/n and n/n the bound is exactly 0 or 1, but centre - half rounds to about 1e-18 (an Elo of -7000, not
    # -inf): clamp exactly there.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == trials else min(1.0, centre + half)
    return low, high


@dataclass(frozen=True)
class WinRate:
    """One player's results against another, with 95% intervals."""

    wins: int
    losses: int
    draws: int = 0
    z: float = Z_95

    @property
    def games(self) -> int:
        return self.wins + self.losses + self.draws

    @property
    def score(self) -> float:
        """Points per game in [0, 1]; 0.5 when no games were played."""
        return (self.wins + 0.5 * self.draws) / self.games if self.games else 0.5

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.wins + 0.5 * self.draws, self.games, self.z)

    @property
    def elo(self) -> float:
        return elo_from_score(self.score)

    @property
    def elo_interval(self) -> tuple[float, float]:
        """The Wilson interval mapped through ``elo_from_score`` (monotone, so the coverage carries over)."""
        low, high = self.interval
        return elo_from_score(low), elo_from_score(high)

    def describe(self) -> str:
        low, high = self.interval
        elo_low, elo_high = self.elo_interval
        return (f"{self.wins}-{self.losses}" + (f"-{self.draws}" if self.draws else "")
                + f" ({self.games} games): win rate {100 * self.score:.1f}% [{100 * low:.1f}, {100 * high:.1f}], "
                + f"Elo {format_elo(self.elo)} [{format_elo(elo_low)}, {format_elo(elo_high)}]")


def format_elo(value: float) -> str:
    if math.isinf(value):
        return "+inf" if value > 0 else "-inf"
    return f"{value:+.0f}"


# -- several players --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ratings:
    """Fitted ratings: ``elo[i]`` and its standard error ``stderr[i]`` (float64 [P]), both in Elo points.

    With an anchor, ``stderr`` is relative to the anchor (whose own is 0); without one, the ratings have mean
    ``offset`` and ``stderr`` describes each rating's deviation from that mean.
    """

    names: tuple[str, ...]
    elo: np.ndarray
    stderr: np.ndarray
    games: np.ndarray  # int64 [P]: real games each player played
    score: np.ndarray  # float64 [P]: real points each player scored

    def interval(self, index: int, z: float = Z_95) -> tuple[float, float]:
        return self.elo[index] - z * self.stderr[index], self.elo[index] + z * self.stderr[index]

    def table(self) -> str:
        """A text table, best first."""
        width = max([len(name) for name in self.names] + [6])
        lines = [f"{'rank':>4}  {'engine':<{width}}  {'Elo':>7}  {'±95%':>6}  {'games':>5}  {'score':>6}"]
        order = np.argsort(-self.elo, kind="stable")
        for rank, i in enumerate(order, 1):
            percent = 100 * self.score[i] / self.games[i] if self.games[i] else 0.0
            lines.append(f"{rank:>4}  {self.names[i]:<{width}}  {self.elo[i]:>7.0f}  {Z_95 * self.stderr[i]:>6.0f}"
                         f"  {self.games[i]:>5d}  {percent:>5.1f}%")
        return "\n".join(lines)


def fit_ratings(names: Sequence[str], results: Iterable[tuple[int, int, float]], *,
                prior_draws: float = DEFAULT_PRIOR_DRAWS, anchor: int | None = None, anchor_elo: float = 0.0,
                offset: float = 0.0, tolerance: float = 1e-9, max_iterations: int = 200) -> Ratings:
    """Maximum-likelihood Elo ratings from game results, by Newton's method on the Bradley–Terry likelihood.

    Args:
        names: the players; results refer to them by index.
        results: (i, j, score of i) per game, with score 1, 0.5 or 0.
        prior_draws: virtual draws added between every pair that played at least once (BayesElo's ``prior``). They
            keep a player who won every game at a finite rating and shrink small samples towards equality; 0 gives
            the plain maximum-likelihood fit.
        anchor: index of a player whose rating is fixed at ``anchor_elo`` (e.g. GNU Go at a known rating). Without
            an anchor the ratings average ``offset``.

    Raises ValueError if some players are not connected to the others through games (their relative ratings
    would be undetermined), or if the fit has no finite maximum (possible only with ``prior_draws`` 0).
    """
    count = len(names)
    games = np.zeros((count, count))
    points = np.zeros((count, count))  # points[i, j]: what i scored against j
    for i, j, score in results:
        if i == j or not (0 <= i < count and 0 <= j < count):
            raise ValueError(f"bad pairing {i} vs {j}")
        if score not in (0, 0.5, 1):
            raise ValueError(f"score {score} is not 0, 0.5 or 1")
        games[i, j] += 1
        games[j, i] += 1
        points[i, j] += score
        points[j, i] += 1 - score
    real_games = games.sum(axis=1).astype(np.int64)
    real_points = points.sum(axis=1)
    met = games > 0
    games = games + prior_draws * met
    points = points + 0.5 * prior_draws * met
    if count > 1 and not _connected(met):
        raise ValueError("the players do not all meet, directly or through others: ratings are undetermined")

    reference = 0 if anchor is None else anchor
    free = [i for i in range(count) if i != reference]
    logit = np.zeros(count)  # ratings in natural-log units: Elo / ELO_SCALE
    hessian = np.zeros((count, count))
    for _ in range(max_iterations):
        difference = logit[:, None] - logit[None, :]
        p = 1.0 / (1.0 + np.exp(-difference))
        gradient = (points - games * p).sum(axis=1)
        weight = games * p * (1 - p)
        hessian = weight - np.diag(weight.sum(axis=1))  # negative semidefinite
        if not free:
            break
        reduced = hessian[np.ix_(free, free)]
        try:
            step = np.linalg.solve(reduced, -gradient[free])
        except np.linalg.LinAlgError as error:
            raise ValueError("the ratings have no finite maximum (a player won or lost every game; "
                             "use prior_draws > 0)") from error
        largest = np.abs(step).max()
        if largest > 2.0:  # damp: Newton on a logistic likelihood can overshoot far from the optimum
            step *= 2.0 / largest
        logit[free] += step
        if largest < tolerance:
            break
        if not np.all(np.isfinite(logit)) or np.abs(logit).max() > 50:
            raise ValueError("the ratings have no finite maximum (a player won or lost every game; "
                             "use prior_draws > 0)")

    covariance = np.zeros((count, count))  # of the ratings relative to the reference, in logit units
    if free:
        covariance[np.ix_(free, free)] = np.linalg.inv(-hessian[np.ix_(free, free)])
    if anchor is None:
        centring = np.eye(count) - 1.0 / count
        covariance = centring @ covariance @ centring.T
        elo = (logit - logit.mean()) * ELO_SCALE + offset
    else:
        elo = (logit - logit[anchor]) * ELO_SCALE + anchor_elo
    stderr = np.sqrt(np.clip(np.diag(covariance), 0.0, None)) * ELO_SCALE
    return Ratings(tuple(names), elo, stderr, real_games, real_points)


def _connected(met: np.ndarray) -> bool:
    reached = {0}
    frontier = [0]
    while frontier:
        i = frontier.pop()
        for j in np.flatnonzero(met[i]):
            if int(j) not in reached:
                reached.add(int(j))
                frontier.append(int(j))
    return len(reached) == len(met)
