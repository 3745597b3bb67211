"""`tabula match`: games between GTP engines run as subprocesses, refereed by our own rules, saved as SGF, resumable,
and summarised as win rates and Elo.

Layer: tools. This module schedules the games, runs them on workers and owns the command line; the rest of a match
lives beside it by job: ``settings`` (MatchConfig, the time control), ``referee`` (one game: clocks, engines, every
move replayed through ``GameState`` so that an illegal move is caught by our rules as well as by the opponent's
refusal, scoring, SGF), ``results`` (results.jsonl and the summary), ``elo``, ``gtp_client``. One JSON line per
finished game goes to ``results.jsonl`` (appended and fsynced), which is what a rerun of the same command in the
same ``--out`` directory reads to skip finished games.

Usage:
    tabula match --out runs/gg --games 10 --size 9 "gnugo --mode gtp --level 1" "gnugo --mode gtp --level 5"
    tabula match --out runs/rr --games 4 --size 9 --engines "A" "B" "C" --anchor 2=1500
    tabula match --settings strength                      # the sets of tools/compete/sets/strength.json
    tabula match --settings strength --set even9          # one of them, into runs/even9 (resumable)
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.resources
import json
import math
import shlex
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from tabula.engine.rules.coords import BLACK, WHITE
from tabula.engine.rules.game import POSITIONAL, SIMPLE_KO, SITUATIONAL, GameState, Rules, handicap_points
from tabula.tools.compete.gtp_client import EngineError, GtpEngine
from tabula.tools.compete.referee import EnginePool, Game, GameSpec, opening_moves
from tabula.tools.compete.results import ResultsWriter, parse_anchor, read_results, summarise, write_atomic
from tabula.tools.compete.settings import (
    ABSOLUTE,
    BYOYOMI,
    CANADIAN,
    CONFIG_FILE,
    IDENTITY_FIELDS,
    NO_TIME,
    RESULTS_FILE,
    SCORING_METHODS,
    MatchConfig,
    TimeControl,
    config_name,
)

# -- the match ------------------------------------------------------------------------------------------------------


def schedule(config: MatchConfig) -> list[GameSpec]:
    """Every game of the match, in order: pairs (round robin, or the first engine against each other in a
    gauntlet), ``games`` per pair, colours alternating unless fixed. With openings, rounds 2k and 2k+1 play opening
    k (cycling through them), one with each colour assignment; with fixed colours round k plays opening k."""
    count = len(config.engines)
    if config.gauntlet:
        pairs = [(0, j) for j in range(1, count)]
    else:
        pairs = [(i, j) for i in range(count) for j in range(i + 1, count)]
    specs = []
    for round_ in range(config.games):
        for i, j in pairs:
            black, white = (i, j) if config.fixed_colors or round_ % 2 == 0 else (j, i)
            opening = -1
            if config.openings:
                opening = (round_ if config.fixed_colors else round_ // 2) % len(config.openings)
            specs.append(GameSpec(f"{i}-{j}-{round_:04d}", (i, j), round_, black, white, opening))
    return specs



def probe_names(config: MatchConfig, log_dir: Path) -> tuple[str, ...]:
    """Start each engine once and ask its name and version; labels that collide get their index appended.

    Raises EngineError when an engine cannot start: better to stop before the match than forfeit every game.
    """
    names = []
    for index, command in enumerate(config.engines):
        with GtpEngine(command, label=f"probe{index}", stderr_path=log_dir / f"probe{index}.log",
                       startup_timeout_s=config.startup_timeout_s) as engine:
            names.append(engine.identity())
    return tuple(f"{name} [{i}]" if names.count(name) > 1 else name for i, name in enumerate(names))


PROGRESS_EVERY_S = 10.0  # a game's progress line at most this often


def _progress_reporter(game_id: str, progress: Callable[[str], None],
                       clock: Callable[[], float] = time.monotonic) -> Callable[[Game], None]:
    """A Game's ``on_move``: a line with the moves played and each side's time so far, every PROGRESS_EVERY_S."""
    last = [clock()]

    def report(game: Game) -> None:
        now = clock()
        if now - last[0] < PROGRESS_EVERY_S:
            return
        last[0] = now
        used = {BLACK: 0.0, WHITE: 0.0}
        for color, _move, seconds, _left, _stones in game.log:
            used[color] += seconds
        progress(f"  {game_id}: move {len(game.log)}, black {used[BLACK]:.0f} s, white {used[WHITE]:.0f} s")
    return report


def run_match(config: MatchConfig, progress: Callable[[str], None] = print, max_minutes: float = 0.0,
              wind_down: threading.Event | None = None) -> list[dict]:
    """Play every game of the schedule not yet in the results file; returns all records (old and new).

    No game starts after ``max_minutes`` (0: no limit) or once ``wind_down`` is set; the games in flight finish and
    are recorded, so a long match runs in chunks that each end cleanly, and a rerun resumes it."""
    out = Path(config.out)
    log_dir = out / "logs"
    results_path = out / RESULTS_FILE
    done = {record["game"] for record in read_results(results_path)}
    pending = [spec for spec in schedule(config) if spec.game_id not in done]
    progress(f"{len(pending)} games to play; games in {out / 'games'}, results in {results_path}, engines' stderr "
             f"in {log_dir}")
    if done:
        progress(f"resuming: {len(done)} games already played, {len(pending)} to play")
    writer = ResultsWriter(results_path)
    stop = threading.Event()
    wind_down = wind_down or threading.Event()
    start_by = time.monotonic() + max_minutes * 60 if max_minutes > 0 else math.inf
    lock = threading.Lock()
    queue_ = list(reversed(pending))
    pools = [EnginePool(config, worker, log_dir) for worker in range(max(1, min(config.parallel, len(pending))))]
    errors: list[BaseException] = []
    finished = [0]

    def next_spec() -> GameSpec | None:
        with lock:
            starting = queue_ and not stop.is_set() and not wind_down.is_set() and time.monotonic() < start_by
            return queue_.pop() if starting else None

    def work(pool: EnginePool) -> None:
        try:
            while (spec := next_spec()) is not None:
                players = f"{config_name(config, spec.black)} (B) vs {config_name(config, spec.white)} (W)"
                progress(f"{spec.game_id}: {players} starts")
                game = Game(config, spec, pool, stop, on_move=_progress_reporter(spec.game_id, progress))
                record = game.play()
                if stop.is_set():
                    return  # the game was cut short by the interrupt, not by the engines: do not record it
                write_atomic(out / record["sgf"], game.sgf_bytes(record))
                writer.append(record)
                with lock:
                    finished[0] += 1
                    count = finished[0]
                progress(f"[{count}/{len(pending)}] {spec.game_id}: {players} {record['result']} "
                         f"({record['reason']}, {record['moves']} moves)")
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            errors.append(error)
            stop.set()
        finally:
            pool.close_all()

    threads = [threading.Thread(target=work, args=(pool,), name=f"match-worker-{pool.worker}", daemon=True)
               for pool in pools]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(timeout=0.2)
    except KeyboardInterrupt:
        stop.set()
        for pool in pools:
            pool.kill_all()
        for thread in threads:
            thread.join(timeout=10)
        raise
    if errors:
        raise errors[0]
    if queue_:
        why = "told to wind down" if wind_down.is_set() else f"the {max_minutes:g} minutes of --max-minutes are up"
        progress(f"{why}: no game started after it, {len(queue_)} left; rerun the same command to resume")
    return read_results(results_path)


# -- command line ---------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tabula match", description="Play games between GTP engines, save them as SGF and rate the engines.",
        epilog='example: tabula match --out runs/gg --size 9 --games 10 "gnugo --mode gtp --level 1" '
               '"gnugo --mode gtp --level 5"')
    parser.add_argument("commands", nargs="*", metavar="ENGINE", help="engine command lines (quote each one)")
    parser.add_argument("--engines", nargs="+", default=[], metavar="ENGINE", help="more engine command lines")
    parser.add_argument("--names", nargs="+", default=[], help="labels for the engines, in order")
    parser.add_argument("--out", required=True, help="output directory; rerun the same command there to resume")
    parser.add_argument("--games", type=int, default=2, help="games per pair of engines (default 2)")
    parser.add_argument("--size", type=int, default=9, help="board size (default 9)")
    parser.add_argument("--komi", type=float, default=7.5)
    parser.add_argument("--handicap", type=int, default=0, help="black handicap stones, 2..9 (default none)")
    parser.add_argument("--handicap-mode", choices=("fixed", "free"), default="fixed",
                        help="fixed: fixed_handicap to both engines (set_free_handicap where an engine has no such "
                             "placement); free: black chooses with place_free_handicap")
    parser.add_argument("--max-moves", type=int, default=0,
                        help="score a game as it stands after this many moves (default 3 * size^2)")
    parser.add_argument("--time-system", choices=(NO_TIME, ABSOLUTE, CANADIAN, BYOYOMI), default=NO_TIME)
    parser.add_argument("--main-time", type=float, default=0.0, help="main time per side, seconds")
    parser.add_argument("--period-time", type=float, default=0.0, help="canadian or byoyomi period, seconds")
    parser.add_argument("--stones", type=int, default=0, help="canadian: moves per period")
    parser.add_argument("--periods", type=int, default=0, help="byoyomi: number of periods")
    parser.add_argument("--grace", type=float, default=0.5, help="overrun forgiven before a loss on time, seconds")
    parser.add_argument("--move-timeout", type=float, default=0.0,
                        help="seconds without a reply to genmove that count as a hang (default: 60 s without a "
                             "clock, the clock plus the grace with one)")
    parser.add_argument("--command-timeout", type=float, default=30.0, help="seconds for any other command")
    parser.add_argument("--startup-timeout", type=float, default=120.0,
                        help="seconds for a new engine's first reply")
    parser.add_argument("--scoring", choices=SCORING_METHODS, default=None,
                        help="engines: both final_score replies when they agree (else the referee, else ours); "
                             "referee: the --referee engine; tromp-taylor: our count (default: referee if given, "
                             "else engines)")
    parser.add_argument("--referee", default="", help='referee engine, e.g. "gnugo --mode gtp --chinese-rules"')
    parser.add_argument("--engine-scores", action=argparse.BooleanOptionalAction, default=True,
                        help="ask both engines' final_score even where --scoring is not engines, to record "
                             "disagreements (GNU Go's can take seconds on an unfinished game)")
    parser.add_argument("--superko", choices=(POSITIONAL, SITUATIONAL, SIMPLE_KO), default=POSITIONAL,
                        help="the ko rule our referee enforces (simple: as GNU Go plays)")
    parser.add_argument("--parallel", type=int, default=1, help="games played at once")
    parser.add_argument("--max-minutes", type=float, default=0.0,
                        help="start no game after this many minutes; the games in flight finish, the exit status "
                             "is 3 where games are left, and rerunning the same command resumes (default 0: no "
                             "limit). SIGUSR1 does the same at once")
    parser.add_argument("--gauntlet", action="store_true", help="the first engine plays each other one")
    parser.add_argument("--fixed-colors", action="store_true", help="the first engine of each pair always has black")
    parser.add_argument("--anchor", default="", help="INDEX=ELO or NAME=ELO: fix one engine's rating in the table")
    parser.add_argument("--untimed", type=int, action="append", default=[], metavar="INDEX",
                        help="an engine (0 = the first; repeat for more) that plays without the clock, e.g. GNU Go "
                             "at a fixed --level in a timed match: it is told no time settings, never loses on time")
    parser.add_argument("--openings", metavar="FILE",
                        help="opening lines, one a line (GTP vertices, black first; white first after handicap "
                             "stones; # starts a comment): each is played out before the engines move, once with "
                             "each engine as black, so that a board size and komi one colour always wins still "
                             "measures the engines")
    parser.add_argument("--summary", action="store_true", help="print the summary of --out and play nothing")
    parser.add_argument("--settings", metavar="FILE",
                        help="a settings file of named sets of matches (JSON; a bare name is one that comes with "
                             "Tabula, e.g. strength); alone, it lists its sets")
    parser.add_argument("--set", metavar="NAME",
                        help="the set of --settings to play: its options, then those given here (default --out: "
                             "runs/NAME)")
    return parser


def config_from_args(args: argparse.Namespace) -> MatchConfig:
    engines = tuple(args.commands) + tuple(args.engines)
    time_control = TimeControl(args.time_system, args.main_time, args.period_time, args.stones, args.periods,
                               args.grace)
    if args.handicap == 1 or not 0 <= args.handicap <= 9:
        raise ValueError("--handicap must be 0 or 2..9")
    if args.handicap and args.handicap_mode == "fixed":
        handicap_points(args.size, args.handicap)  # raises where the GTP spec has no placement for this size
    if args.names and len(args.names) != len(engines):
        raise ValueError(f"{len(args.names)} names for {len(engines)} engines")
    untimed = tuple(sorted(set(args.untimed)))
    if any(not 0 <= index < len(engines) for index in untimed):
        raise ValueError(f"--untimed {' '.join(map(str, args.untimed))}: engines are numbered 0 to {len(engines) - 1}")
    openings = read_openings(args.openings, args.size, args.komi, args.handicap,
                             args.handicap_mode) if args.openings else ()
    scoring = args.scoring or ("referee" if args.referee else "engines")
    if scoring == "referee" and not args.referee:
        raise ValueError("--scoring referee needs --referee")
    return MatchConfig(engines=engines, out=args.out, names=tuple(args.names), games=args.games, size=args.size,
                       komi=args.komi, handicap=args.handicap, handicap_mode=args.handicap_mode,
                       max_moves=args.max_moves, time=time_control, move_timeout_s=args.move_timeout,
                       command_timeout_s=args.command_timeout, startup_timeout_s=args.startup_timeout,
                       scoring=scoring, referee=args.referee, engine_scores=args.engine_scores, superko=args.superko,
                       parallel=args.parallel, gauntlet=args.gauntlet, fixed_colors=args.fixed_colors,
                       anchor=args.anchor, untimed=untimed, openings=openings)


def read_openings(path: str, size: int, komi: float, handicap: int, handicap_mode: str) -> tuple[str, ...]:
    """The opening lines of a file, each checked on the match's board (ValueError naming the line)."""
    if handicap and handicap_mode == "free":
        raise ValueError("--openings cannot follow free handicap stones, which the engine places only in the game")
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"--openings {path}: {error}") from None
    start = GameState(size, Rules(komi=komi))
    if handicap:
        start.place_handicap(handicap_points(size, handicap))
    openings = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = " ".join(raw.split("#", 1)[0].replace(",", " ").split())
        if not line:
            continue
        try:
            opening_moves(line, start)
        except ValueError as error:
            raise ValueError(f"--openings {path}, line {number}: {error}") from None
        openings.append(line.upper())
    if not openings:
        raise ValueError(f"--openings {path}: no opening lines")
    return tuple(openings)


def load_config(path: Path) -> MatchConfig:
    data = json.loads(path.read_text(encoding="utf-8"))
    data["time"] = TimeControl(**data["time"])
    for key in ("engines", "names", "untimed", "openings"):
        if key in data:  # a match from before --untimed has none
            data[key] = tuple(data[key])
    return MatchConfig(**data)


def check_resumable(saved: MatchConfig, wanted: MatchConfig) -> None:
    """A rerun may change the number of games, the parallelism, timeouts and the anchor, nothing else."""
    old, new = saved.to_dict(), wanted.to_dict()
    if not wanted.names:
        new["names"] = old["names"]
    changed = [key for key in IDENTITY_FIELDS if old[key] != new[key]]
    if changed:
        raise ValueError(f"{saved.out} holds a different match (changed: {', '.join(changed)}); "
                         "use another --out directory")


# -- settings files: a named set of matches ---------------------------------------------------------------------

SETS_DIR = Path(__file__).with_name("sets")  # the settings files that come with Tabula
# the options of a settings file whose values are command lines (their placeholders shell-quoted); others are paths
COMMAND_OPTIONS = ("engines", "referee")


def settings_path(name: str) -> Path:
    """A settings file given by path, or by the name of one in SETS_DIR ("strength": sets/strength.json)."""
    path = Path(name)
    if path.suffix == "" and not path.exists():
        path = SETS_DIR / f"{name}.json"
    if not path.is_file():
        shipped = ", ".join(sorted(p.stem for p in SETS_DIR.glob("*.json")))
        raise ValueError(f"no settings file {name!r} (those that come with Tabula: {shipped})")
    return path


def load_sets(path: Path) -> dict[str, dict]:
    """The sets of a settings file: {"sets": {NAME: {"about": TEXT, OPTION: VALUE, ...}}}, OPTION a long option
    of `tabula match` without its dashes."""
    try:
        sets = json.loads(path.read_text(encoding="utf-8"))["sets"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path}: not a settings file ({error})") from None
    if not isinstance(sets, dict) or not all(isinstance(v, dict) for v in sets.values()):
        raise ValueError(f"{path}: \"sets\" must map each name to its options")
    return sets


def _placeholders(word: str, quote: bool = True) -> str:
    """{python}: this Python (so that the engines run from the same installation); {gnugo}: GNU Go's path;
    {weights}: the installed package's weights folder (a shipped network by name, from any working directory);
    {sets}: the folder of the shipped settings files (an opening book beside them). With ``quote``, shell-quoted,
    as the engines' command lines are split as a shell would (gtp_client): a path with spaces stays one word; a
    file option (``openings``) takes the path as it is."""
    gnugo = shutil.which("gnugo") or "/usr/games/gnugo"
    weights = str(importlib.resources.files("tabula.weights"))
    quoted = shlex.quote if quote else str
    return (word.replace("{python}", quoted(sys.executable)).replace("{gnugo}", quoted(gnugo))
            .replace("{weights}", quoted(weights)).replace("{sets}", quoted(str(SETS_DIR))))


def settings_argv(parser: argparse.ArgumentParser, options: dict) -> list[str]:
    """The command-line words of one set's options (``about`` is its description), for ``parser`` to read before
    the words typed after them, which override them."""
    actions = {a.option_strings[0][2:]: a for a in parser._actions if a.option_strings}
    words: list[str] = []
    for key, value in options.items():
        if key == "about":
            continue
        action = actions.get(key)
        if action is None or key in ("settings", "set", "summary"):
            raise ValueError(f"unknown option {key!r} in a settings file")
        values = value if isinstance(value, list) else [value]
        command = key in COMMAND_OPTIONS
        values = [_placeholders(v, quote=command) if isinstance(v, str) else v for v in values]
        if isinstance(value, bool):
            if isinstance(action, argparse.BooleanOptionalAction):
                words.append(f"--{key}" if value else f"--no-{key}")
            elif value:
                words.append(f"--{key}")
        elif isinstance(action, argparse._AppendAction):
            for item in values:
                words += [f"--{key}", str(item)]
        else:
            words += [f"--{key}", *(str(item) for item in values)]
    return words


def expand_settings(parser: argparse.ArgumentParser, argv: list[str]) -> list[str] | None:
    """argv with ``--settings FILE --set NAME`` replaced by the set's options (and ``--out runs/NAME`` unless argv
    gives one). None when ``--settings`` came without ``--set``: the sets were listed instead."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--settings")
    pre.add_argument("--set")
    known, rest = pre.parse_known_args(argv)
    if known.settings is None:
        if known.set is not None:
            raise ValueError("--set needs --settings")
        return argv
    path = settings_path(known.settings)
    sets = load_sets(path)
    if known.set is None:
        print(f"sets of {path} (tabula match --settings {known.settings} --set NAME [--out DIR]):")
        for name, options in sets.items():
            print(f"  {name:<14} {options.get('about', '')}")
        return None
    if known.set not in sets:
        raise ValueError(f"no set {known.set!r} in {path} (it has {', '.join(sets)})")
    return ["--out", str(Path("runs") / known.set)] + settings_argv(parser, sets[known.set]) + rest


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        argv = expand_settings(parser, sys.argv[1:] if argv is None else list(argv))
    except ValueError as error:
        parser.error(str(error))
    if argv is None:
        return 0
    args = parser.parse_args(argv)
    if not args.max_minutes >= 0:
        parser.error("--max-minutes must be 0 (no limit) or more")
    out = Path(args.out)
    config_path = out / CONFIG_FILE
    if args.summary:
        if not config_path.exists():
            parser.error(f"no {CONFIG_FILE} in {out}")
        saved = load_config(config_path)
        print(summarise(saved, read_results(out / RESULTS_FILE)))
        return 0
    # SIGUSR1 from here on (the engines' probe included): the games in flight finish, no other starts
    wind_down = threading.Event()

    def finish_in_flight(_signum, _frame):
        wind_down.set()
        print("SIGUSR1: the games in flight finish, no other starts", flush=True)

    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGUSR1, finish_in_flight) if main_thread else None
    try:
        return _play(parser, args, wind_down)
    finally:
        if main_thread:
            signal.signal(signal.SIGUSR1, previous if previous is not None else signal.SIG_DFL)


GAMES_LEFT = 3  # main's exit status where --max-minutes or SIGUSR1 stopped the match with games still to play


def _play(parser: argparse.ArgumentParser, args: argparse.Namespace, wind_down: threading.Event) -> int:
    out = Path(args.out)
    config_path = out / CONFIG_FILE
    try:
        config = config_from_args(args)
        if len(config.engines) < 2:
            parser.error("give at least two engine command lines")
        if config_path.exists():
            saved = load_config(config_path)
            check_resumable(saved, config)
            config = dataclasses.replace(config, names=saved.names)
    except ValueError as error:
        parser.error(str(error))
    out.mkdir(parents=True, exist_ok=True)
    if not config.names:
        try:
            config = dataclasses.replace(config, names=probe_names(config, out / "logs"))
        except EngineError as error:
            print(f"tabula match: {error}", file=sys.stderr)
            return 1
    try:
        parse_anchor(config.anchor, config.names)
    except ValueError as error:
        parser.error(str(error))
    write_atomic(config_path, (json.dumps(config.to_dict(), indent=2) + "\n").encode())

    def terminate(_signum, _frame):
        raise KeyboardInterrupt

    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, terminate) if main_thread else None
    try:
        records = run_match(config, progress=lambda line: print(line, flush=True), max_minutes=args.max_minutes,
                            wind_down=wind_down)
    except KeyboardInterrupt:
        print("\ninterrupted: finished games are saved; rerun the same command to resume", file=sys.stderr)
        records = read_results(out / RESULTS_FILE)
        print(summarise(config, records))
        return 130
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
    print()
    print(summarise(config, records))
    print(f"\ngames and results: {out}/ (`tabula match --out {out} --summary` prints this again)")
    played = {record["game"] for record in records}
    return GAMES_LEFT if any(spec.game_id not in played for spec in schedule(config)) else 0


__all__ = ["main", "run_match", "schedule", "probe_names", "build_parser", "load_config", "config_from_args",
           "check_resumable"]


if __name__ == "__main__":
    sys.exit(main())
