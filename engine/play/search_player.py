"""The search as a move picker: time and visit limits, cleanup, ownership for final_status_list, pondering and
per-move logs; the move itself is decided by ``engine.play.decision.MoveDecider``, as in self-play.

Layer: above search and playout, below player (``engine/play/player.py`` builds it through ``from_config``).
"""
from __future__ import annotations

import importlib.resources
import logging
import random
import threading
import time
from pathlib import Path
from typing import Callable, Protocol

import numpy as np

from tabula.engine.config import CALIBRATED, EngineConfig, PlayConfig, ResignThresholds, SearchConfig
from tabula.engine.net.evaluator import Evaluator, evaluate_all_symmetries
from tabula.engine.play.decision import MoveDecider, opponent_passed
from tabula.engine.play.judging import count_without, judge_dead_stones
from tabula.engine.play.result import Candidate, SearchResult
from tabula.engine.play.search import Rollout, Search
from tabula.engine.rules import playout
from tabula.engine.rules.coords import BLACK, PASS, format_vertex
from tabula.engine.rules.game import GameState
from tabula.engine.rules.interface import has_pass

log = logging.getLogger("tabula.search")

DEFAULT_TIME_S = 5.0  # a move's budget when neither the clock nor the configuration limits it
# The full count after the opponent's pass (dead stones judged by playouts and the rollout policy) took about 2 s on
# 19x19 and 0.4 s on 13x13 here; until a board size's first count is timed, it is expected to cost this a point.
COUNT_S_PER_POINT = 2.0 / 361
# The full count is made only where it is expected to take at most this share of the move's budget; under a shorter
# budget the decider falls back to its quick estimate (a move in byo-yomi must not run past its period).
COUNT_BUDGET_SHARE = 0.5


class JudgingRollouts(Protocol):
    """What judges dead stones beside random playouts: ``engine.rollout.rollout.PolicyRollouts``."""

    def ownership(self, state: GameState, rng: np.random.Generator, count: int) -> np.ndarray: ...


class SearchPicker:
    """A ``GoMovePicker`` (engine/play/picker.py) by a PUCT search.

    Fixed for its life: ``search`` (the tree, reused from move to move), ``config`` (the search's), ``play`` and the
    ``decider`` that applies it; ``clock`` (seconds) times the searches. ``last_search`` is the search behind the
    latest picked move (chat, analysis). Not thread-safe: one caller at a time (the GTP loop); ``stop`` may be
    called from any thread.
    """

    name = "search"

    def __init__(self, evaluator: Evaluator, config: SearchConfig | None = None,
                 rng: np.random.Generator | None = None, playout_rng: random.Random | None = None,
                 play: PlayConfig | None = None, resign_by_size: dict[int, ResignThresholds] | None = None,
                 rollout: Rollout | None = None, judging_rollouts: Callable[[], JudgingRollouts] | None = None,
                 ownership_by_size: dict[int, float] | None = None, clock: Callable[[], float] = time.monotonic):
        self.play = play or PlayConfig()
        self.rng = rng if rng is not None else np.random.default_rng()
        self.playout_rng = playout_rng or random.Random(int(self.rng.integers(1 << 62)))
        self.search = Search(evaluator, config or SearchConfig(), self.rng, rollout, clock=clock)
        self.config = self.search.config  # threads, batch and batches in flight resolved for where the network runs
        self.decider = MoveDecider(self.play, self.rng, self.playout_rng)
        self._count_cost_s: dict[int, float] = {}  # board size -> seconds the latest full count took
        # the calibrated resignation thresholds of each board size's network, where the configuration leaves it to them
        self.resign_by_size = resign_by_size or {}
        # ... and the share of dead-stone judging measured for each board size's network's ownership head, likewise
        self.ownership_by_size = ownership_by_size or {}
        self.last_search: SearchResult | None = None
        self._stop = threading.Event()
        # Loads the rollout policy that judges dead stones, when first asked (its tables take a second to build).
        self._load_judging_rollouts = judging_rollouts
        self._judging_rollouts: JudgingRollouts | None = None

    @property
    def board_sizes(self) -> tuple[int, ...] | None:
        """The sizes the network plays (None: any)."""
        return getattr(self.search.evaluator, "board_sizes", None)

    # -- GoMovePicker ----------------------------------------------------------------------------------------------

    def pick(self, state: GameState, budget_s: float | None = None,
             on_progress: Callable[[list[Candidate]], None] | None = None, progress_interval_s: float = 1.0,
             spend_all: bool = False) -> int:
        """A move for the side to move in ``state``: the search, then ``MoveDecider``'s temperature,
        pass and resignation rules. ``budget_s``: seconds it may take (None: the configured visits/playouts only).
        ``on_progress``: the candidates every ``progress_interval_s`` during the search (genmove_analyze).
        After the opponent's pass the referee's count (``referee_count``) is made first and its time taken from the
        search's budget, where the budget leaves room for it (``COUNT_BUDGET_SHARE``). ``spend_all``: the clock
        loses what the move leaves unspent (a byo-yomi period), so the search does not stop early."""
        sampling = len(state.moves) < self.play.temperature_moves
        started = self.search.clock()
        count = self._count_before_passing(state, budget_s)
        if budget_s is not None:
            budget_s = max(0.0, budget_s - (self.search.clock() - started))
        result = self._search(state, budget_s, noise=self.config.noise,
                              early_stop=self.config.early_stop and not sampling and not spend_all,
                              on_progress=on_progress,
                              progress_interval_s=progress_interval_s)
        calibrated = self.resign_by_size.get(state.size)
        threshold = None if calibrated is None else calibrated.for_game(state.size, getattr(state, "handicap", 0))
        move = self.decider.decide(state, result, self.search.root_priors(), resign_winrate=threshold,
                                   count=count).move
        self._log(state, result, move)
        return move

    def _count_before_passing(self, state: GameState, budget_s: float | None) -> float | None:
        """The referee's count where the opponent has just passed (so that a pass would end the game) and the move's
        budget has room for it; None otherwise (the decider then estimates the count quickly)."""
        if not (self.play.referee_aware and has_pass(state) and opponent_passed(state)):
            return None
        expected_s = self._count_cost_s.get(state.size, COUNT_S_PER_POINT * state.size * state.size)
        if budget_s is not None and expected_s > COUNT_BUDGET_SHARE * budget_s:
            log.debug("no full count before passing: %.2f s expected, %.2f s to move", expected_s, budget_s)
            return None
        started = self.search.clock()
        count = self.referee_count(state)
        self._count_cost_s[state.size] = self.search.clock() - started
        return count

    def pick_cleanup(self, state: GameState, budget_s: float | None = None, spend_all: bool = False) -> int:
        """kgs-genmove_cleanup: capture the opponent's dead stones first and pass only when none are left.

        Dead stones are judged by ``ownership``; the search chooses among the liberties of dead strings (or any
        legal move when none of them can be played), never passing while dead stones remain."""
        color = state.to_move
        self.last_search = None
        dead = [p for p in self.dead_stones(state) if state.color_at(p) == 3 - color]
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
        result = self._search(state, budget_s, noise=False, early_stop=self.config.early_stop and not spend_all,
                              allowed=targets)
        move = result.move if result.move != PASS else targets[0]
        self._log(state, result, move)
        return move

    def ownership(self, state: GameState) -> np.ndarray:
        """float32 [N*N] in [-1, 1], black's view, by which final_status_list, final_score and cleanup judge dead
        stones: the mean of random playouts' ownership and of the rollout policy's (``PlayConfig``'s counts), or
        the random playouts alone where there is no rollout policy; then ``PlayConfig.ownership_network`` of it
        from the network's ownership head, where the network has one.

        Random playouts capture what has no eyes however the shape reads, but throw live groups away now and then,
        and break a seki at random; the rollout policy plays the moves that decide life. A network's ownership head
        is only as good as what it learned: one taught the playouts' own verdicts lowered the agreement with GNU
        Go's dead stones, one taught by KataGo's ownership raised it (docs/RELIABILITY.md, "Dead stones against
        GNU Go")."""
        owned = playout.ownership(state, self.playout_rng, self.play.ownership_playouts)
        rollouts = self._rollouts_for_judging() if self.play.ownership_rollouts > 0 else None
        if rollouts is not None:
            rng = np.random.default_rng(self.playout_rng.getrandbits(63))
            owned = 0.5 * (owned + rollouts.ownership(state, rng, self.play.ownership_rollouts))
        share = self.ownership_share(state.size)
        if share > 0:
            evaluation = evaluate_all_symmetries(self.search.evaluator, [state])
            if evaluation.ownership is not None:
                network = evaluation.ownership[0]
                owned = (1.0 - share) * owned + share * (network if state.to_move == BLACK else -network)
        return owned

    def ownership_share(self, size: int) -> float:
        """The share of ``ownership``'s map taken from the network's ownership head on this board size: the
        configuration's, or where it leaves it to the network (CALIBRATED) the network's own, 0 where it has none."""
        share = self.play.ownership_network
        return self.ownership_by_size.get(size, 0.0) if share == CALIBRATED else share

    def dead_stones(self, state: GameState) -> list[int]:
        """Flat points of the stones judged dead: ``ownership``'s verdict, near-even strings judged again without
        the clearly dead stones, near-even groups in seki kept, and the count checked against the network's score
        (``engine.play.judging``)."""
        return judge_dead_stones(state, self.ownership, self._network_score(state))

    def referee_count(self, state: GameState) -> float:
        """The count a referee would make now (black's view, komi included), the dead stones ``dead_stones``'s:
        what ``final_score`` says. The decider's count after the opponent's pass, when passing ends the game."""
        return count_without(state, self.dead_stones(state))

    def handicap_stones(self, state: GameState, count: int) -> list[int] | None:
        """place_free_handicap's stones, chosen by the network as KataGo chooses extra black stones (its
        playExtraBlack at temperature 0): one at a time, each the most likely black move of the policy (the mean
        over the 8 symmetries) with the stones so far on ``state``'s empty board and black to move again. A point
        touching an earlier stone is passed over while another is legal: a stone beside a stone adds little to a
        handicap. Fewer than ``count`` where the board runs out of legal points, as GTP allows."""
        size = state.size
        position = GameState(size, state.rules)
        board = position.board  # holds only the stones chosen so far, all black
        geometry = board.geometry
        chosen: list[int] = []
        for _ in range(count):
            policy = np.asarray(evaluate_all_symmetries(self.search.evaluator, [position]).policy[0])[:size * size]
            legal = [point for point in range(size * size) if position.legal(point, BLACK)]
            if not legal:
                break
            apart = [point for point in legal
                     if all(board.color[n] != BLACK for n in geometry.neighbors[geometry.padded[point]])]
            point = max(apart or legal, key=lambda p: (float(policy[p]), -p))
            position.place_setup(point, BLACK)  # black stays to move: the next stone is black's again
            chosen.append(point)
        return chosen

    def _network_score(self, state: GameState) -> float | None:
        """The network's expected final margin (black's view, komi included, the mean over the 8 symmetries), or
        None from a network without a score head."""
        evaluation = evaluate_all_symmetries(self.search.evaluator, [state])
        if evaluation.score is None:
            return None
        score = float(evaluation.score[0])
        return score if state.to_move == BLACK else -score

    def _rollouts_for_judging(self) -> JudgingRollouts | None:
        """The rollout policy behind ``ownership``, loaded once; None (random playouts alone, with a warning)
        where there is none or its file cannot be read: a GUI asking for dead stones still gets an answer."""
        if self._judging_rollouts is None and self._load_judging_rollouts is not None:
            try:
                self._judging_rollouts = self._load_judging_rollouts()
            except (OSError, ValueError) as error:
                log.warning("dead stones judged by random playouts alone: no rollout policy (%s)", error)
            self._load_judging_rollouts = None
        return self._judging_rollouts

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

    def search_position(self, state: GameState, stop: threading.Event) -> SearchResult:
        """A search of ``state`` with the configured visits (5 s where none are set), ended early by ``stop``:
        what GoGui's analysis views show."""
        visits = self.config.visits_for(state) or None
        time_s = None if visits or self.config.playouts else DEFAULT_TIME_S
        return self.search.run(state, visits=visits, time_s=time_s, stop=stop, early_stop=False)

    def network_policy(self, state: GameState) -> np.ndarray:
        """The network's move probabilities for ``state`` (float32 [N*N+1], pass last), without a search."""
        return np.asarray(self.search.evaluator.evaluate([state]).policy[0])

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

    # -- running the search ---------------------------------------------------------------------------------------

    def _search(self, state: GameState, budget_s: float | None, noise: bool, early_stop: bool,
                allowed: list[int] | None = None, on_progress: Callable[[list[Candidate]], None] | None = None,
                progress_interval_s: float = 1.0) -> SearchResult:
        config = self.config
        time_s = budget_s
        if time_s is None and not config.visits and not config.playouts:
            time_s = DEFAULT_TIME_S
        result = self.search.run(state, time_s=time_s, noise=noise, allowed=allowed, early_stop=early_stop,
                                 on_progress=on_progress, progress_interval_s=progress_interval_s)
        self.last_search = result
        return result

    def _log(self, state: GameState, result: SearchResult, move: int) -> None:
        """One line a move at INFO (the move, its search, the winrate of the move played, or of the first candidate
        where it is not one); at DEBUG the five first candidates follow in the same record."""
        if not log.isEnabledFor(logging.INFO):
            return
        size = state.size
        played = [c for c in result.candidates if c.move == move] or result.candidates[:1]
        winrate = f", winrate {100 * played[0].winrate:.1f}%" if played else ""
        lines = [f"move {len(state.moves) + 1}: {format_vertex(move, size)} after {result.playouts} playouts "
                 f"({result.root_visits} visits, {result.reused_visits} reused) in {result.elapsed_s:.2f} s"
                 f"{winrate}, {result.playouts_per_s:.0f} playouts/s, batch {result.mean_batch:.1f}, "
                 f"cache hits {result.cache_hits}, nodes {self.search.tree_nodes()}"]
        if not log.isEnabledFor(logging.DEBUG):
            log.info(lines[0])
            return
        for candidate in result.candidates[:5]:
            pv = " ".join(format_vertex(m, size) for m in candidate.pv[:12])
            lines.append(f"  {format_vertex(candidate.move, size):>5} {candidate.visits:6d} visits "
                         f"{100 * candidate.winrate:5.1f}% (lcb {100 * candidate.lcb_winrate:5.1f}%) "
                         f"prior {100 * candidate.prior:5.1f}%  pv {pv}")
        log.info("\n".join(lines))


# The shipped networks: weights/DEFAULT names the files `tabula gtp` plays with when no --weights is given, one a
# line; each plays the board sizes in its metadata, and the first file that plays a size is used for it.
# Package data of tabula.weights, found the same way in a checkout, an editable install and an installed wheel.
WEIGHTS_DIR = Path(str(importlib.resources.files("tabula.weights")))
DEFAULT_ROLLOUT_WEIGHTS = "rollout-patterns.npz"  # the shipped rollout policy, in WEIGHTS_DIR


class NoNetworkError(FileNotFoundError):
    """The search was asked to play with no network given and none shipped."""


def default_weights(pointer_name: str = "DEFAULT") -> list[Path]:
    """The shipped networks the file ``pointer_name`` in WEIGHTS_DIR names, one a line (``#`` comments); Go's by
    default. NoNetworkError where the pointer is missing, names none, or names a file that is not there."""
    pointer = WEIGHTS_DIR / pointer_name
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


def best_move_picker(evaluator: Evaluator, search: SearchConfig, seed: int) -> SearchPicker:
    """The search as a plain ``MovePicker`` for fronts without GTP's game settings (the Gomocup front end, the
    arena): the best move every time, never resigning."""
    return SearchPicker(evaluator, search, rng=np.random.default_rng(seed),
                           play=PlayConfig(resign_winrate=0.0, temperature_moves=0))


def from_config(config: EngineConfig) -> SearchPicker:
    """The ``search`` entry of ``engine.play.player.PICKERS``: ONNX networks under a random symmetry per leaf."""
    from tabula.engine.net.evaluator import available_cores, load_networks  # onnxruntime loads only when chosen

    seed = np.random.SeedSequence(config.seed)
    net_seed, search_seed, playout_seed = seed.spawn(3)
    paths = list(config.net.weights) or default_weights()
    net = config.net.for_search(config.search, available_cores())
    evaluator, networks = load_networks(paths, net_seed, symmetry="random", threads=net.threads,
                                        provider=net.provider, precision=net.precision, max_batch=net.max_batch,
                                        batch_hint=config.search.batch_size, cache_dir=net.cache_dir or None)
    search = config.search.for_network(on_gpu=any(network.on_gpu for network in networks))
    # the settings measured for each size's network, where the configuration leaves them to it
    resign_by_size: dict[int, ResignThresholds] = {}
    ownership_by_size: dict[int, float] = {}
    for network in reversed(networks):  # the first network that plays a size is the one that plays it
        for size in network.board_sizes:
            if config.play.resign_winrate == CALIBRATED:
                resign_by_size[size] = network.resign_thresholds or ResignThresholds()
            if config.play.ownership_network == CALIBRATED:
                ownership_by_size[size] = network.ownership_share or 0.0
    from tabula.engine.rollout.rollout import PolicyRollouts

    rollout_path = config.net.rollout_weights or str(WEIGHTS_DIR / DEFAULT_ROLLOUT_WEIGHTS)
    # Building the policy's tables takes a second: at start-up only when the search mixes rollouts in or the user
    # named a file (a bad one is then an error at once, not a quieter judgement of dead stones later); otherwise
    # when dead stones are first judged.
    policy = None
    if search.rollout_mix > 0 or config.net.rollout_weights:
        policy = PolicyRollouts.load(rollout_path)
    return SearchPicker(evaluator, search, rng=np.random.default_rng(search_seed),
                           playout_rng=random.Random(int(playout_seed.generate_state(1)[0])), play=config.play,
                           resign_by_size=resign_by_size, ownership_by_size=ownership_by_size,
                           rollout=policy if search.rollout_mix > 0 else None,
                           judging_rollouts=lambda: policy or PolicyRollouts.load(rollout_path))


__all__ = ["SearchPicker", "best_move_picker", "from_config", "default_weights", "NoNetworkError", "DEFAULT_TIME_S"]
