"""`tabula arena`: games between two in-process players of any game (gomoku's network, pure MCTS and random
baselines), colours alternating, with each colour's results and the win rate's 95% interval.

    tabula arena --game gomoku --size 9 --games 50 net:weights/tabula-gomoku9.onnx pure:5000 --out runs/arena/g9
    tabula arena --game gomoku --size 9 --games 20 pure:1000 random

Players: ``net:FILE.onnx`` (the network's search, through the same move picker as ``tabula gtp``:
``SearchPicker`` and ``MoveDecider``; ``--visits``, ``--c-puct``), ``pure:N`` (pure MCTS with N random-rollout
playouts a move, the AlphaZero gomoku chapter's baseline), ``random``. The first player takes black in even-numbered
games. Games run in ``--parallel`` processes, each game seeded from ``--seed`` and its number, so a rerun replays
them. With ``--out``: OUT/games/NNNN.sgf, OUT/results.jsonl (a line a game) and OUT/config.json.

(Go matches go through GTP engines with `tabula match`; the arena is for games without a GTP.)
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from tabula.engine.play import game_loop
from tabula.engine.play.picker import MovePicker
from tabula.engine.play.pure_mcts import PureMctsPicker, RandomPicker
from tabula.engine.rules.coords import BLACK, WHITE
from tabula.engine.rules.games import GOMOKU, GameSpec
from tabula.tools.compete.elo import elo_from_score, format_elo, wilson_interval


@dataclass(frozen=True)
class ArenaConfig:
    """One arena run; built by ``main`` and saved as OUT/config.json."""

    players: tuple[str, str]
    game: str = GOMOKU
    n_in_row: int = 5
    size: int = 9
    games: int = 20
    visits: int = 400  # net: players' visits a move
    c_puct: float = 0.0  # net: players' exploration weight (0: the search's default)
    parallel: int = 1
    seed: int = 1

    def __post_init__(self) -> None:
        GameSpec(self.game, self.n_in_row).check_size(self.size)
        if self.games < 1 or self.parallel < 1 or self.visits < 1 or self.c_puct < 0:
            raise ValueError("--games, --parallel and --visits must be at least 1, --c-puct at least 0")
        for spec in self.players:
            parse_player(spec)


def parse_player(spec: str) -> tuple[str, str]:
    """(kind, argument) of a player spec; ValueError for a bad one."""
    kind, _, argument = spec.partition(":")
    if kind == "random" and not argument:
        return kind, ""
    if kind == "pure" and argument.isdigit() and int(argument) > 0:
        return kind, argument
    if kind == "net" and argument:
        return kind, argument
    raise ValueError(f"bad player {spec!r}: net:FILE.onnx, pure:PLAYOUTS or random")


def network_picker(path: str, visits: int, c_puct: float, seed: int) -> MovePicker:
    """A network's search as a ``MovePicker``: the picker ``tabula gtp`` plays through (the search, then
    ``MoveDecider``), one search thread, the best move (no temperature, no resignation)."""
    from tabula.engine.config import SearchConfig
    from tabula.engine.net.evaluator import OnnxEvaluator
    from tabula.engine.play.search_player import best_move_picker

    search = SearchConfig(visits=visits, threads=1, **({"c_puct": c_puct} if c_puct else {}))
    evaluator = OnnxEvaluator(path, rng=np.random.default_rng(seed), threads=1, provider="cpu", log=None)
    return best_move_picker(evaluator, search, seed)


def make_picker(spec: str, config: ArenaConfig, seed: int) -> MovePicker:
    """The picker of a player spec (``parse_player``)."""
    kind, argument = parse_player(spec)
    if kind == "net":
        return network_picker(argument, config.visits, config.c_puct, seed)
    if kind == "pure":
        return PureMctsPicker(playouts=int(argument), rng=random.Random(seed))
    return RandomPicker(random.Random(seed))


def play_game(config: ArenaConfig, number: int) -> dict:
    """Game ``number``: the first player black when it is even. Returns its record (with the SGF)."""
    spec = GameSpec(config.game, config.n_in_row)
    first_black = number % 2 == 0
    order = (0, 1) if first_black else (1, 0)  # player index of black, of white
    pickers = {BLACK: make_picker(config.players[order[0]], config, config.seed * 100_003 + 2 * number),
               WHITE: make_picker(config.players[order[1]], config, config.seed * 100_003 + 2 * number + 1)}
    state = spec.new_state(config.size)
    end = game_loop.play_game(state, pickers, max_moves=config.size * config.size)
    winner, result, seconds = end.winner, end.result, end.seconds
    names = [config.players[order[0]], config.players[order[1]]]
    return {"game": number, "black": order[0], "white": order[1], "winner": {BLACK: "B", WHITE: "W"}.get(winner, "0"),
            "result": result, "moves": len(state.moves), "seconds": {"black": round(seconds[BLACK], 3),
                                                                      "white": round(seconds[WHITE], 3)},
            "sgf": spec.sgf(state, names[0], names[1], result).decode()}


def first_player_points(records: list[dict]) -> float:
    """The first player's points over ``records`` (results.jsonl lines): 1 a win, 0.5 a draw."""
    return sum(1.0 if r["winner"] == ("B" if r["black"] == 0 else "W") else 0.5 if r["winner"] == "0" else 0.0
               for r in records)


def summary(config: ArenaConfig, records: list[dict]) -> str:
    """Each player's wins, losses and draws as black and as white, and the first player's score with its 95%
    interval and Elo difference."""
    lines = [f"{config.game} {config.size}x{config.size}, {len(records)} games, colours alternating",
             f"{'player':<40} {'as black W-L-D':>15} {'as white W-L-D':>15}"]
    for index, name in enumerate(config.players):
        cells = []
        for color in ("black", "white"):
            own = [r for r in records if r[color] == index]
            wins = sum(r["winner"] == color[0].upper() for r in own)
            draws = sum(r["winner"] == "0" for r in own)
            cells.append(f"{wins}-{len(own) - wins - draws}-{draws}")
        lines.append(f"{name:<40} {cells[0]:>15} {cells[1]:>15}")
    score = first_player_points(records)
    low, high = wilson_interval(score, len(records))
    lines.append(f"{config.players[0]} scores {score:g} of {len(records)} ({100 * score / len(records):.1f}% "
                 f"[{100 * low:.1f}, {100 * high:.1f}], Elo {format_elo(elo_from_score(score / len(records)))})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tabula arena", description=__doc__.split("\n")[0])
    parser.add_argument("players", nargs=2, help="net:FILE.onnx, pure:PLAYOUTS or random")
    defaults = ArenaConfig(players=("random", "random"))
    parser.add_argument("--game", default=defaults.game, choices=[GOMOKU], help="default %(default)s")
    parser.add_argument("--n-in-row", type=int, default=defaults.n_in_row, help="default %(default)s")
    parser.add_argument("--size", type=int, default=defaults.size, help="default %(default)s")
    parser.add_argument("--games", type=int, default=defaults.games, help="default %(default)s")
    parser.add_argument("--visits", type=int, default=defaults.visits, help="net players' visits (default 400)")
    parser.add_argument("--c-puct", type=float, default=defaults.c_puct,
                        help="net players' exploration weight (default: the search's own)")
    parser.add_argument("--parallel", type=int, default=defaults.parallel, help="games at once (default 1)")
    parser.add_argument("--seed", type=int, default=defaults.seed, help="default %(default)s")
    parser.add_argument("--out", type=Path, help="directory for the games, results.jsonl and config.json")
    args = parser.parse_args(argv)
    try:
        config = ArenaConfig(players=tuple(args.players), game=args.game, n_in_row=args.n_in_row, size=args.size,
                             games=args.games, visits=args.visits, c_puct=args.c_puct, parallel=args.parallel,
                             seed=args.seed)
    except ValueError as error:
        parser.error(str(error))
    for spec in config.players:
        kind, argument = parse_player(spec)
        if kind == "net" and not Path(argument).is_file():
            parser.error(f"{argument}: no such network file")
    if args.out:
        (args.out / "games").mkdir(parents=True, exist_ok=True)
        (args.out / "config.json").write_text(json.dumps(asdict(config), indent=1) + "\n")
        (args.out / "results.jsonl").write_text("")  # a rerun replays the same games: it starts the file again
        (args.out / "results.jsonl.xz").unlink(missing_ok=True)  # and a kept copy's, compressed, with it
    records = []
    with ProcessPoolExecutor(config.parallel) as pool:
        for record in pool.map(play_game, [config] * config.games, range(config.games)):
            records.append(record)
            if args.out:
                (args.out / "games" / f"{record['game']:04d}.sgf").write_text(record["sgf"])
                with open(args.out / "results.jsonl", "a") as handle:
                    handle.write(json.dumps({k: v for k, v in record.items() if k != "sgf"}) + "\n")
            print(f"[{len(records)}/{config.games}] game {record['game']}: {config.players[record['black']]} (B) vs "
                  f"{config.players[record['white']]} (W) {record['result']} in {record['moves']} moves",
                  file=sys.stderr)
    print(summary(config, records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
