"""The search as a move generator: time and visit limits, temperature, pass and resignation rules, cleanup,
ownership for final_status_list, pondering and per-move logs.

Layer: above search and playout, below player (``engine/player.py`` builds it through ``from_config``).
"""
from __future__ import annotations

import logging
import random
import threading
from pathlib import Path
from typing import Callable

import numpy as np

from . import playout
from .config import EngineConfig, SearchConfig
from .coords import BLACK, PASS, RESIGN, WHITE, format_vertex
from .evaluator import Evaluator
from .game import GameState
from .search import Candidate, Search, SearchResult

log = logging.getLogger("tabula.search")

DEFAULT_TIME_S = 5.0  # a move's budget when neither the clock nor the configuration limits it
PASS_CHECK_PLAYOUTS = 24  # random playouts behind the dead-stone-aware count checked before passing (~0.05 s 19x19)
SETTLED_OWNERSHIP = 0.5  # see _settled
OWNERSHIP_PLAYOUTS = 200  # the search behind the ownership of final_status_list with a network that has the head


def pass_rules(state: GameState, result: SearchResult, move: int, priors: dict[int, float] | None = None,
               lead: float | None = None) -> int:
    """Pass to end a won game after the opponent's pass; never pass into a lost count.

    ``lead``: our lead if the game ended now (default: the Tromp-Taylor count, as self-play scores games).
    ``priors`` (move -> root prior) choose among the non-eye legal moves when the search offers nothing but a pass;
    without them the first such move is taken. Self-play applies the same rules, so it ends games as matches do.
    """
    color = state.to_move
    score = state.area_score() * (1.0 if color == BLACK else -1.0) if lead is None else lead
    opponent_passed = bool(state.moves) and state.moves[-1] == (3 - color, PASS)
    if opponent_passed and score > 0:
        return PASS
    if move == PASS and score < 0:
        others = [c.move for c in result.candidates if c.move != PASS]
        if others:
            return others[0]
        board = state.board
        padded = board.geometry.padded
        fallback = [m for m in state.legal_moves() if not board.is_own_eye(padded[m], color)]
        if fallback:
            return max(fallback, key=lambda m: priors.get(m, 0.0)) if priors else fallback[0]
    return move


def _settled(state: GameState, owned: np.ndarray, point: int) -> bool:
    """Whether an empty point is inside one side's territory: its empty region touches stones of that colour only,
    and the random playouts give it to that side too (at least ``SETTLED_OWNERSHIP`` of black's-view ownership),
    so that a region whose walls are still in doubt does not count."""
    board = state.board
    owner = board.area_owners()[board.geometry.padded[point]]
    if owner == BLACK:
        return float(owned[point]) >= SETTLED_OWNERSHIP
    if owner == WHITE:
        return float(owned[point]) <= -SETTLED_OWNERSHIP
    return False


class SearchGenerator:
    """Implements ``engine.player.MoveGenerator`` with a PUCT search.

    Fixed for its life: ``search`` (the tree, reused from move to move), ``config``. Per game: the counts of
    consecutive hopeless moves behind resignation. ``last_result`` is the latest search's result (analysis, logs).
    Not thread-safe: one caller at a time (the GTP loop); ``stop`` may be called from any thread.
    """

    name = "search"

    def __init__(self, evaluator: Evaluator, config: SearchConfig | None = None,
                 rng: np.random.Generator | None = None, playout_rng: random.Random | None = None):
        self.config = config or SearchConfig()
        self.rng = rng if rng is not None else np.random.default_rng()
        self.playout_rng = playout_rng or random.Random(int(self.rng.integers(1 << 62)))
        self.search = Search(evaluator, self.config, self.rng)
        self.last_result: SearchResult | None = None
        # Analysis during genmove (lz-genmove_analyze): called with the candidates every interval.
        self.on_progress: Callable[[list[Candidate]], None] | None = None
        self.progress_interval_s = 1.0
        self._hopeless = {BLACK: 0, WHITE: 0}
        self._last_move_number = -1
        self._stop = threading.Event()

    @property
    def board_sizes(self) -> tuple[int, ...] | None:
        """The sizes the network plays (None: any)."""
        return getattr(self.search.evaluator, "board_sizes", None)

    # -- MoveGenerator ---------------------------------------------------------------------------------------------

    def generate(self, state: GameState, color: int, budget_s: float | None) -> int:
        """A move for ``color`` (the side to move in ``state``): the search's choice, then the pass and
        resignation rules. ``budget_s``: seconds it may take (None: the configured visits/playouts only)."""
        state = self._as_to_move(state, color)
        self._new_game_check(state)
        config = self.config
        temperature = config.temperature if len(state.moves) < config.temperature_moves else 0.0
        result = self._search(state, budget_s, noise=config.noise, early_stop=config.early_stop and not temperature)
        move = self._sample(result, temperature) if temperature else result.move
        move = self._pass_rules(state, result, move)
        if self._should_resign(state, color, result):
            move = RESIGN
        self._log(state, result, move)
        return move

    def generate_cleanup(self, state: GameState, color: int, budget_s: float | None) -> int:
        """kgs-genmove_cleanup: capture the opponent's dead stones first and pass only when none are left.

        Dead stones are judged by ``ownership``; the search chooses among the liberties of dead strings (or any
        legal move when none of them can be played), never passing while dead stones remain."""
        state = self._as_to_move(state, color)
        owned = self.ownership(state)
        dead = [p for p in playout.dead_stones(state, owned) if state.color_at(p) == 3 - color]
        if not dead:
            return PASS
        board = state.board
        geometry = board.geometry
        liberties = {geometry.flat[lib] for p in dead for lib in board.string_liberties(geometry.padded[p])}
        targets = [m for m in sorted(liberties)
                   if state.legal(m) and not board.is_own_eye(geometry.padded[m], color)]
        if not targets:
            targets = [m for m in state.legal_moves() if not board.is_own_eye(geometry.padded[m], color)]
        if not targets:
            return PASS
        result = self._search(state, budget_s, noise=False, early_stop=self.config.early_stop, allowed=targets)
        move = result.move if result.move != PASS else targets[0]
        self._log(state, result, move)
        return move

    def ownership(self, state: GameState) -> np.ndarray:
        """float32 [N*N] in [-1, 1], black's view: with a network that has an ownership head, the average over a
        short search's tree (final_status_list, final_score and cleanup judge dead stones by it); otherwise from
        random playouts of the position."""
        # A network tells whether it has the head by its first answer.
        if self.search.has_score or self.search.evaluator.evaluate([state]).ownership is not None:
            self.search.run(state, visits=0, playouts=OWNERSHIP_PLAYOUTS, early_stop=False)
            owned = self.search.ownership()
            if owned is not None:
                return owned
        return playout.ownership(state, self.playout_rng, self.config.ownership_playouts)

    # -- pondering, analysis and stopping ------------------------------------------------------------------------

    def ponder(self, state: GameState, interrupt: threading.Event) -> None:
        """Search ``state`` until ``interrupt`` is set (the GTP loop's idle task); the tree is kept for the next
        move. Returns at once for a finished game."""
        if state.is_game_over() or interrupt.is_set():
            return
        self.search.run(state, visits=0, playouts=0, stop=interrupt, early_stop=False)

    def analyze(self, state: GameState, stop: threading.Event,
                on_progress: Callable[[list[Candidate]], None], interval_s: float) -> SearchResult:
        """Search ``state`` until ``stop`` is set, reporting the candidates every ``interval_s`` seconds."""
        return self.search.run(state, visits=0, playouts=0, stop=stop, early_stop=False,
                               on_progress=on_progress, progress_interval_s=interval_s)

    @property
    def has_score(self) -> bool:
        """Whether the network has score and ownership heads (known after its first evaluation)."""
        return self.search.has_score

    def tree_ownership(self) -> np.ndarray | None:
        """The search tree's ownership of each point (float32 [N*N], black's view), or None without an ownership
        head. Usable during a search."""
        return self.search.ownership()

    def stop(self) -> None:
        """End the running search early (GoGui's interrupt); its best move so far is played."""
        self.search.stop()

    # -- the rules around the search -----------------------------------------------------------------------------

    def _search(self, state: GameState, budget_s: float | None, noise: bool, early_stop: bool,
                allowed: list[int] | None = None) -> SearchResult:
        config = self.config
        time_s = budget_s
        if time_s is None and not config.visits and not config.playouts:
            time_s = DEFAULT_TIME_S
        result = self.search.run(state, time_s=time_s, noise=noise, allowed=allowed, early_stop=early_stop,
                                 on_progress=self.on_progress, progress_interval_s=self.progress_interval_s)
        self.last_result = result
        return result

    @staticmethod
    def _as_to_move(state: GameState, color: int) -> GameState:
        if state.to_move == color:
            return state
        state = state.copy()
        state.to_move = color
        return state

    def _new_game_check(self, state: GameState) -> None:
        if len(state.moves) < self._last_move_number:
            self._hopeless = {BLACK: 0, WHITE: 0}
        self._last_move_number = len(state.moves)

    def _sample(self, result: SearchResult, temperature: float) -> int:
        """A root move drawn in proportion to visits^(1/temperature) (self-play's opening moves)."""
        candidates = [c for c in result.candidates if c.visits > 0]
        if not candidates:
            return result.move
        visits = np.array([c.visits for c in candidates], dtype=np.float64)
        weights = visits ** (1.0 / max(temperature, 1e-3))
        weights /= weights.sum()
        return candidates[int(self.rng.choice(len(candidates), p=weights))].move

    def _pass_rules(self, state: GameState, result: SearchResult, move: int) -> int:
        """``pass_rules`` with the count that a referee removing dead stones would make, where it matters.

        A Tromp-Taylor count calls our dead stones alive: a weak network that passes while it leads by that count
        lets the opponent kill everything (a 9x9 match saw B+73.5 after white passed at move 18 "ahead"). So
        before passing, the lead is also estimated from random-playout ownership, and the smaller lead decides.

        After the opponent's pass, a move on a point that is already settled (inside either side's territory:
        ``_settled``) changes nothing under area counting and costs a point
        under territory counting (KGS, OGS's Japanese rules, GNU Go as referee). Such a move becomes a pass, or a
        resignation where the count says the game is lost and resigning is on."""
        color = state.to_move
        opponent_passed = bool(state.moves) and state.moves[-1] == (3 - color, PASS)
        sign = 1.0 if color == BLACK else -1.0
        counted = lead = state.area_score() * sign
        owned = None
        if (move == PASS and lead >= 0) or opponent_passed:
            owned = playout.ownership(state, self.playout_rng, PASS_CHECK_PLAYOUTS)
            estimated = (float(owned.sum()) - state.rules.komi) * sign
            lead = min(lead, estimated)
        move = pass_rules(state, result, move, self.search.root_priors(), lead=lead)
        # Where only the opponent's dead stones make the plain count a loss, removing them is what moves are for.
        cleaning_up = counted < 0 < estimated if owned is not None else False
        if opponent_passed and move not in (PASS, RESIGN) and not cleaning_up and _settled(state, owned, move):
            return RESIGN if lead < 0 and self.config.resign_winrate > 0 else PASS
        return move

    def _should_resign(self, state: GameState, color: int, result: SearchResult) -> bool:
        """Leela Zero's rule, made patient: the winrate under the threshold for ``resign_consecutive`` moves in a
        row, never in the first quarter of the board's points, and a lower threshold as white in handicap games."""
        config = self.config
        if config.resign_winrate <= 0 or not result.candidates:
            return False
        area = state.size * state.size
        moves = len(state.moves)
        if moves <= area // 4:
            self._hopeless[color] = 0
            return False
        threshold = config.resign_winrate
        if state.handicap > 0 and color == WHITE:
            # White's network is pessimistic in handicap games; blend towards the full threshold as moves pass.
            blend = min(1.0, moves / (0.6 * area))
            threshold = blend * threshold + (1.0 - blend) * threshold / (1 + state.handicap)
        winrate = (result.value + 1.0) / 2.0
        self._hopeless[color] = self._hopeless[color] + 1 if winrate < threshold else 0
        return self._hopeless[color] >= config.resign_consecutive

    def _log(self, state: GameState, result: SearchResult, move: int) -> None:
        if not log.isEnabledFor(logging.INFO):
            return
        size = state.size
        lines = [f"move {len(state.moves) + 1}: {format_vertex(move, size)} after {result.playouts} playouts "
                 f"({result.root_visits} visits, {result.reused_visits} reused) in {result.elapsed_s:.2f} s, "
                 f"{result.playouts_per_s:.0f} playouts/s, batch {result.mean_batch:.1f}, "
                 f"cache hits {result.cache_hits}, nodes {self.search.tree_nodes()}"]
        for candidate in result.candidates[:5]:
            pv = " ".join(format_vertex(m, size) for m in candidate.pv[:12])
            lines.append(f"  {format_vertex(candidate.move, size):>5} {candidate.visits:6d} visits "
                         f"{100 * candidate.winrate:5.1f}% (lcb {100 * candidate.lcb_winrate:5.1f}%) "
                         f"prior {100 * candidate.prior:5.1f}%  pv {pv}")
        log.info("\n".join(lines))


# The shipped networks: weights/DEFAULT names the files `tabula gtp` plays with when no --weights is given, one a
# line; each plays the board sizes in its metadata, and the first file that plays a size is used for it.
WEIGHTS_DIR = Path(__file__).resolve().parent.parent / "weights"


class NoNetworkError(FileNotFoundError):
    """The search was asked to play with no network given and none shipped."""


def default_weights() -> list[Path]:
    pointer = WEIGHTS_DIR / "DEFAULT"
    try:
        names = [line.strip() for line in pointer.read_text().splitlines()]
    except OSError:
        raise NoNetworkError(f"no network given (--weights) and no shipped default ({pointer} is missing)") from None
    paths = [WEIGHTS_DIR / name for name in names if name and not name.startswith("#")]
    if not paths:
        raise NoNetworkError(f"no network given (--weights) and {pointer} names none")
    for path in paths:
        if not path.is_file():
            raise NoNetworkError(f"the shipped default network {path} is missing")
    return paths


def from_config(config: EngineConfig) -> SearchGenerator:
    """The ``search`` entry of ``engine.player.GENERATORS``: ONNX networks under a random symmetry per leaf."""
    from .evaluator import NetworkSet, OnnxEvaluator, available_cores  # onnxruntime loads only when chosen

    seed = np.random.SeedSequence(config.seed)
    net_seed, search_seed, playout_seed = seed.spawn(3)
    paths = list(config.net.weights) or default_weights()
    net_rngs = [np.random.default_rng(s) for s in net_seed.spawn(len(paths))]
    net = config.net.for_search(config.search, available_cores())
    networks = [OnnxEvaluator(path, symmetry="random", rng=rng, threads=net.threads, provider=net.provider,
                              precision=net.precision, max_batch=net.max_batch, batch_hint=config.search.batch_size,
                              cache_dir=net.cache_dir or None) for path, rng in zip(paths, net_rngs)]
    evaluator = networks[0] if len(networks) == 1 else NetworkSet(networks)
    search = config.search.for_network(on_gpu=any(network.on_gpu for network in networks))
    return SearchGenerator(evaluator, search, rng=np.random.default_rng(search_seed),
                           playout_rng=random.Random(int(playout_seed.generate_state(1)[0])))


__all__ = ["SearchGenerator", "pass_rules", "from_config", "default_weights", "NoNetworkError", "DEFAULT_TIME_S"]
