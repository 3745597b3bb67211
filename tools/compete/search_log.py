"""How much each Tabula engine of a match searched: its per-move log lines, assigned to the games they belong to.

    python3 -m tabula.tools.compete.search_log runs/strength/lambda-19              # medians per engine
    python3 -m tabula.tools.compete.search_log runs/strength/lambda-19 --write DIR  # and DIR/engineK.txt, a line a move

`tabula gtp` logs one line per searched move to stderr (``tabula.search: move 12: D4 after 959 playouts ... in
0.81 s, winrate 55.2%, ...``; the candidates follow at ``--verbose``), and `tabula match` keeps each engine's stderr
in OUT/logs/engineK-wW.log, one file per engine and worker, the games one after another. A game's lines are told
apart by the move number starting again, or by the engine starting again. Each run of lines is given to the finished
game (OUT/games/*.sgf) whose moves it names, so the lines of a game cut short by a stop and replayed on resume are
left out (counted as unmatched) rather than counted twice.

The logs are big (about 70 KB a 19×19 game) and stay in runs/; ``--write OUT/searched`` keeps what the resignation
calibration needs of them (`tabula resign`: each searched move's playouts, seconds and winrate, about 30 bytes), to be
kept with the games. A match directory without logs is read from its ``searched/`` (``searched_moves``), and one with
both from both: a match resumed on another machine logs only its new games.
"""
from __future__ import annotations

import argparse
import functools
import re
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from tabula.engine.rules.coords import format_vertex
from tabula.engine.rules.sgf import SgfError, read_sgf
from tabula.tools.compete.match import load_config
from tabula.tools.compete.settings import CONFIG_FILE, config_name

SEARCH_LINE = re.compile(r"tabula\.search: move (\d+): (\S+) after (\d+) playouts .* in ([\d.]+) s")
LINE_WINRATE = re.compile(r", winrate ([\d.]+)%")  # the move played's, on the search line itself
# The candidate lines that follow a search line (at `tabula gtp --verbose`): vertex, visits, winrate in percent
# (the root side to move's view).
CANDIDATE_LINE = re.compile(r"^\s+(\S+)\s+\d+ visits\s+([\d.]+)% \(lcb")
ENGINE_START = re.compile(r"^tabula: network ")  # the first line a `tabula gtp` process logs
LOG_NAME = re.compile(r"engine(\d+)-w\d+\.log$")
GAME_NAME = re.compile(r"(\d+)-(\d+)-\d+$")


@dataclass(frozen=True)
class SearchedMove:
    number: int  # 1-based move number in the game
    move: str  # GTP vertex, or "pass"
    playouts: int
    seconds: float
    # the searched winrate of the move played (of the search's first candidate where the move played is not one of
    # them, as after a pass or resignation decided by the count); None where the log has no candidate lines
    winrate: float | None = None


Assigned = dict[int, dict[str, list[SearchedMove]]]  # engine → finished game → its searched moves


def read_log(path: Path) -> list[list[SearchedMove]]:
    """The log's searched moves, one list per game in the order played."""
    games: list[list[SearchedMove]] = []
    started = True
    current: SearchedMove | None = None
    candidates: list[tuple[str, float]] = []

    def finish() -> None:
        if current is None:
            return
        winrates = dict(candidates)
        winrate = winrates.get(current.move, candidates[0][1] if candidates else current.winrate)
        games[-1].append(replace(current, winrate=winrate))

    for line in path.read_text(errors="replace").splitlines():
        if current is not None:
            candidate = CANDIDATE_LINE.match(line)
            if candidate:
                candidates.append((candidate[1], float(candidate[2]) / 100.0))
                continue
            finish()
            current, candidates = None, []
        if ENGINE_START.match(line):
            started = True  # a resumed match starts its engines again: what came before is another game
            continue
        found = SEARCH_LINE.search(line)
        if not found:
            continue
        on_line = LINE_WINRATE.search(line)
        searched = SearchedMove(int(found[1]), found[2], int(found[3]), float(found[4]),
                                float(on_line[1]) / 100.0 if on_line else None)
        if started or not games[-1] or searched.number <= games[-1][-1].number:
            games.append([])
            started = False
        current = searched
    finish()
    return games


def game_moves(path: Path) -> dict[int, str]:
    """Move number (1-based) → GTP vertex of a finished game's SGF."""
    record = read_sgf(path.read_bytes())
    return {number: format_vertex(move, record.size).upper() for number, (_, move) in enumerate(record.moves, 1)}


def _names(moves: dict[int, str], searched: SearchedMove) -> bool:
    """Whether a finished game's ``moves`` hold ``searched``: its move at that number, or, for a resignation (which
    no SGF move records), the game's end right before it."""
    if searched.move.lower() == "resign":
        return searched.number == len(moves) + 1
    return moves.get(searched.number) == searched.move.upper()


def assign(out: Path) -> tuple[Assigned, dict[int, int]]:
    """engine → game → its searched moves, and engine → runs of lines that match no finished game."""
    games: dict[str, dict[int, str]] = {}
    for path in sorted((out / "games").glob("*.sgf")):
        try:
            games[path.stem] = game_moves(path)
        except SgfError as error:
            print(f"search_log: {path}: {error}", file=sys.stderr)
    assigned: Assigned = {}
    unmatched: dict[int, int] = {}
    for log in sorted((out / "logs").glob("engine*-w*.log")):
        engine = int(LOG_NAME.search(log.name)[1])
        runs = read_log(log)
        free = set(range(len(runs)))
        for name, moves in games.items():
            if str(engine) not in GAME_NAME.match(name).groups():
                continue
            fits = [index for index in free if all(_names(moves, m) for m in runs[index])]
            if fits:
                # An interrupted game that opened as a finished one did matches it too: the whole game is the
                # longer run, or the later one (a replay comes after what it replays).
                best = max(fits, key=lambda index: (len(runs[index]), index))
                assigned.setdefault(engine, {})[name] = runs[best]
                free.discard(best)
        if free:
            unmatched[engine] = unmatched.get(engine, 0) + len(free)
    return assigned, unmatched


def summary(assigned: Assigned, unmatched: dict[int, int], name_of: Callable[[int], str]) -> str:
    lines = ["engine      games    moves  median playouts  median playouts/s  median s  longest s  unmatched runs"]
    for engine in sorted(set(assigned) | set(unmatched)):
        moves = [m for run in assigned.get(engine, {}).values() for m in run]
        name = name_of(engine)
        if not moves:
            lines.append(f"{name:<10} {0:>6} {0:>8}  {'-':>15}  {'-':>17}  {'-':>8}  {'-':>9}  "
                         f"{unmatched.get(engine, 0):>14}")
            continue
        rates = [m.playouts / m.seconds for m in moves if m.seconds > 0]
        lines.append(f"{name:<10} {len(assigned[engine]):>6} {len(moves):>8}  "
                     f"{statistics.median(m.playouts for m in moves):>15g}  "
                     f"{statistics.median(rates) if rates else 0:>17.0f}  "
                     f"{statistics.median(m.seconds for m in moves):>8.2f}  {max(m.seconds for m in moves):>9.2f}  "
                     f"{unmatched.get(engine, 0):>14}")
    return "\n".join(lines)


SEARCHED_DIR = "searched"  # a match directory's kept extract of its logs (write, read_written)
WRITTEN_NAME = re.compile(r"engine(\d+)\.txt$")


def write(assigned: Assigned, target: Path) -> None:
    """target/engineK.txt: ``game move-number move playouts seconds winrate`` (winrate ``-`` where the log had
    none), a line a searched move."""
    target.mkdir(parents=True, exist_ok=True)
    for engine, runs in assigned.items():
        with open(target / f"engine{engine}.txt", "w") as handle:
            for game in sorted(runs):
                for m in runs[game]:
                    winrate = "-" if m.winrate is None else f"{m.winrate:.4f}"
                    handle.write(f"{game} {m.number} {m.move} {m.playouts} {m.seconds:g} {winrate}\n")


def read_written(source: Path) -> Assigned:
    """What ``write`` wrote to ``source`` (lines of five fields, without the winrate, read too)."""
    assigned: Assigned = {}
    for path in sorted(source.glob("engine*.txt")):
        found = WRITTEN_NAME.search(path.name)
        if not found:
            continue
        runs = assigned.setdefault(int(found[1]), {})
        for number, line in enumerate(path.read_text().splitlines(), 1):
            fields = line.split()
            try:
                winrate = None if len(fields) < 6 or fields[5] == "-" else float(fields[5])
                runs.setdefault(fields[0], []).append(
                    SearchedMove(int(fields[1]), fields[2], int(fields[3]), float(fields[4]), winrate))
            except (IndexError, ValueError):
                raise ValueError(f"{path}:{number}: not a searched move: {line!r}") from None
    return assigned


def has_searched_moves(out: Path) -> bool:
    """Whether ``out`` holds engine logs or their kept extract (what ``searched_moves`` reads)."""
    return (out / "logs").is_dir() or (out / SEARCHED_DIR).is_dir()


def searched_moves(out: Path) -> tuple[Assigned, dict[int, int]]:
    """engine → game → its searched moves, from ``out``'s kept extract (``searched/``) and its logs, the logs
    first where both have a game; and the unmatched runs of the logs."""
    assigned = read_written(out / SEARCHED_DIR) if (out / SEARCHED_DIR).is_dir() else {}
    from_logs, unmatched = assign(out) if (out / "logs").is_dir() else ({}, {})
    for engine, runs in from_logs.items():
        assigned.setdefault(engine, {}).update(runs)
    return assigned, unmatched


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tabula.tools.compete.search_log",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path, help="a tabula match --out directory")
    parser.add_argument("--write", type=Path, metavar="DIR", help="write DIR/engineK.txt, a line a searched move")
    args = parser.parse_args(argv)
    if not has_searched_moves(args.out):
        print(f"search_log: {args.out}: no engine logs there, nor a {SEARCHED_DIR}/ extract", file=sys.stderr)
        return 2
    if (args.out / CONFIG_FILE).exists():
        name_of = functools.partial(config_name, load_config(args.out / CONFIG_FILE))
    else:
        name_of = "engine{}".format  # as its log file is named
    assigned, unmatched = searched_moves(args.out)
    if args.write:
        write(assigned, args.write)
    print(summary(assigned, unmatched, name_of))
    return 0


if __name__ == "__main__":
    sys.exit(main())
