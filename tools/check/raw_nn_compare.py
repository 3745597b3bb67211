"""Compare two engines' raw network outputs (``kata-raw-nn``) position by position: KataGo against Tabula on the
same network, or a network file against its int8 copy.

Layer: tools (imports the engine only to build position sets). Three steps, each a subcommand:

- ``positions``: a case file of positions, each the GTP commands that set it up (``boardsize``, ``clear_board``,
  ``komi``, ``kata-set-rules``, ``set_free_handicap``, ``play``) and a ``kata-raw-nn`` line. Positions come from
  SGF records (19x19, with their handicap stones) and from games GNU Go plays against itself (9x9 and 13x13), at
  varied komi and rules, with a share picked just after a ko capture or an atari.
- ``record``: one engine's replies to a case file, written after each case (a reference file: KataGo's, say).
- ``compare``: another engine's replies against a reference file: the same top move, the largest policy difference,
  the win rate and lead differences, overall and by board size, rules and kind of position.

A case file and a reference file have one format: ``#`` comment lines, then per case its GTP commands, the
``kata-raw-nn`` command, the reply's lines (reference files only) and a line ``end``.

    python -m tabula.tools.check.raw_nn_compare positions --sgf ARCHIVE... --count 200 --out cases.txt
    python -m tabula.tools.check.raw_nn_compare record --engine "katago gtp -model M -config C" cases.txt ref.txt
    python -m tabula.tools.check.raw_nn_compare compare --engine "tabula gtp --weights M" ref.txt
"""
from __future__ import annotations

import argparse
import json
import math
import random
import sys
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

RAW_NN = "kata-raw-nn"
RULES_CYCLE = ("chinese", "japanese", "tromp-taylor")
KOMI_CYCLE = (0.5, 5.5, 6.5, 7.5, 7.0, 3.5)
# The agreement bars of a network run by two engines (fp32 against fp32).
BARS = {"top_move": 0.99, "policy": 1e-3, "white_win": 1e-3, "white_lead": 0.05}


@dataclass
class Case:
    """One position: the GTP commands that set it up, the kata-raw-nn command, and a stored reply (or None)."""

    commands: list[str]
    query: str
    reply: list[str] | None = None
    tags: list[str] = field(default_factory=list)  # what kind of position (from a "# tags:" line), for reports

    @property
    def size(self) -> int:
        sizes = [int(c.split()[1]) for c in self.commands if c.startswith("boardsize ")]
        return sizes[-1] if sizes else 19

    @property
    def rules(self) -> str:
        names = [c.split(None, 1)[1] for c in self.commands if c.startswith("kata-set-rules ")]
        return names[-1] if names else "default"


def read_cases(text: str) -> tuple[list[str], list[Case]]:
    """(header comments, cases) of a case or reference file."""
    header: list[str] = []
    cases: list[Case] = []
    commands: list[str] = []
    tags: list[str] = []
    query: str | None = None
    reply: list[str] = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.startswith("#"):
            if line.startswith("# tags:"):
                tags = line[len("# tags:"):].split()
            elif not cases and not commands and query is None:
                header.append(line)
            continue
        if line == "end":
            if query is None:
                raise ValueError(f"case {len(cases) + 1} has no {RAW_NN} command")
            cases.append(Case(commands, query, reply or None, tags))
            commands, tags, query, reply = [], [], None, []
        elif query is not None:
            if line:
                reply.append(line)
        elif line.startswith(RAW_NN):
            query = line
        elif line:
            commands.append(line)
    if commands or query is not None:
        raise ValueError("the last case has no closing 'end' line")
    return header, cases


def open_text(path: str, mode: str = "r"):
    """A case or reference file, plain or compressed (.xz, .gz: the stored references in tests are)."""
    if path.endswith(".xz"):
        import lzma

        return lzma.open(path, mode + "t")
    if path.endswith(".gz"):
        import gzip

        return gzip.open(path, mode + "t")
    return open(path, mode)


def write_cases(header: Sequence[str], cases: Iterable[Case], out) -> None:
    for line in header:
        out.write(line + "\n")
    out.write("\n")
    for case in cases:
        if case.tags:
            out.write("# tags: " + " ".join(case.tags) + "\n")
        for command in case.commands:
            out.write(command + "\n")
        out.write(case.query + "\n")
        for line in case.reply or ():
            out.write(line + "\n")
        out.write("end\n")


# -- replies -------------------------------------------------------------------------------------------------------

@dataclass
class RawOutputs:
    """A kata-raw-nn reply: scalars by KataGo's names, the policy [N, N] (NaN: illegal), pass, ownership [N, N]."""

    scalars: dict[str, float]
    policy: np.ndarray
    policy_pass: float
    ownership: np.ndarray | None

    def policy_vector(self) -> np.ndarray:
        """float64 [N*N+1]: the policy rows top to bottom, then pass."""
        return np.append(self.policy.reshape(-1), self.policy_pass)


def parse_reply(lines: Sequence[str], size: int) -> RawOutputs:
    """Parse a kata-raw-nn reply (its lines without the ``=``); ValueError for a malformed one."""
    scalars: dict[str, float] = {}
    policy = ownership = None
    policy_pass = math.nan
    index = 0

    def grid(start: int) -> np.ndarray:
        if start + size > len(lines):
            raise ValueError(f"the reply ends inside a {size}x{size} grid")
        rows = [[float(v) for v in lines[start + r].split()] for r in range(size)]
        if any(len(row) != size for row in rows):
            raise ValueError(f"a {size}x{size} grid has a row of another length")
        return np.array(rows, dtype=np.float64)

    while index < len(lines):
        words = lines[index].split()
        if not words:
            index += 1
            continue
        if words[0].startswith("="):  # the reply's first line, as a transcript keeps it
            words = ([words[0][1:]] if words[0] != "=" else []) + words[1:]
            if not words:
                index += 1
                continue
        name = words[0]
        if name == "policy":
            policy = grid(index + 1)
            index += 1 + size
        elif name == "whiteOwnership":
            ownership = grid(index + 1)
            index += 1 + size
        elif name == "policyPass":
            policy_pass = float(words[1])
            index += 1
        else:
            if len(words) == 2:
                scalars[name] = float(words[1])
            index += 1
    if policy is None:
        raise ValueError("the reply has no policy")
    return RawOutputs(scalars, policy, policy_pass, ownership)


@dataclass
class Difference:
    same_top: bool
    policy: float  # the largest |difference| over the legal points and pass
    white_win: float
    white_lead: float
    ownership: float
    legal_differs: bool  # a point one engine calls legal and the other not


def difference(a: RawOutputs, b: RawOutputs) -> Difference:
    pa, pb = a.policy_vector(), b.policy_vector()
    legal_a, legal_b = ~np.isnan(pa), ~np.isnan(pb)
    both = legal_a & legal_b
    top_a = int(np.argmax(np.where(legal_a, pa, -1.0)))
    top_b = int(np.argmax(np.where(legal_b, pb, -1.0)))
    own = math.nan
    if a.ownership is not None and b.ownership is not None:
        own = float(np.max(np.abs(a.ownership - b.ownership)))

    def scalar(name: str) -> float:
        if name in a.scalars and name in b.scalars:
            return abs(a.scalars[name] - b.scalars[name])
        return math.nan

    return Difference(same_top=top_a == top_b, policy=float(np.max(np.abs(pa[both] - pb[both]))),
                      white_win=scalar("whiteWin"), white_lead=scalar("whiteLead"), ownership=own,
                      legal_differs=bool(np.any(legal_a != legal_b)))


def summarize(rows: Sequence[tuple[Case, Difference]], bars: dict[str, float] = BARS) -> dict:
    """Counts and worst differences, overall and by board size, rules and tag; ``passes`` against the bars."""

    def block(selected: Sequence[tuple[Case, Difference]]) -> dict:
        diffs = [d for _, d in selected]
        worst = {key: float(np.nanmax([getattr(d, key) for d in diffs])) if diffs else math.nan
                 for key in ("policy", "white_win", "white_lead", "ownership")}
        return {"positions": len(diffs), "same_top": sum(d.same_top for d in diffs),
                "same_top_share": (sum(d.same_top for d in diffs) / len(diffs)) if diffs else math.nan,
                "legal_differs": sum(d.legal_differs for d in diffs), **{f"max_{k}": v for k, v in worst.items()}}

    groups: dict[str, dict] = {}
    for label, key in (("size", lambda c: f"{c.size}x{c.size}"), ("rules", lambda c: c.rules)):
        for value in sorted({key(c) for c, _ in rows}):
            groups[f"{label} {value}"] = block([(c, d) for c, d in rows if key(c) == value])
    for tag in sorted({t for c, _ in rows for t in c.tags}):
        groups[f"tag {tag}"] = block([(c, d) for c, d in rows if tag in c.tags])
    overall = block(rows)
    passes = bool(rows) and overall["same_top_share"] >= bars["top_move"] and overall["max_policy"] <= bars["policy"] \
        and overall["max_white_win"] <= bars["white_win"] and overall["max_white_lead"] <= bars["white_lead"] \
        and overall["legal_differs"] == 0
    return {"overall": overall, "groups": groups, "bars": bars, "passes": passes}


# -- engines -------------------------------------------------------------------------------------------------------

def run_cases(engine_command: str | Sequence[str], cases: Sequence[Case], timeout_s: float,
              on_reply=None) -> list[list[str]]:
    """Each case's commands through one engine (a fresh ``clear_board`` each), and its kata-raw-nn reply lines."""
    from tabula.tools.compete.gtp_client import GtpEngine

    replies = []
    with GtpEngine(engine_command, label="engine") as engine:
        for number, case in enumerate(cases, start=1):
            for command in case.commands:
                engine.send(command, timeout_s=timeout_s)
            reply = engine.send(case.query, timeout_s=timeout_s)
            lines = [line for line in reply.splitlines() if line.strip()]
            replies.append(lines)
            if on_reply is not None:
                on_reply(number, case, lines)
    return replies


# -- position sets -------------------------------------------------------------------------------------------------

def _vertex(point: int, size: int) -> str:
    from tabula.engine.rules.coords import format_vertex

    return format_vertex(point, size)


def _color_letter(color: int) -> str:
    from tabula.engine.rules.coords import BLACK

    return "b" if color == BLACK else "w"


def _after_ko_capture(state) -> bool:
    from tabula.engine.rules.board import NO_POINT

    return state.board.ko != NO_POINT


def _after_atari(state) -> bool:
    """Whether the side to move has a string in atari (it may run, or be laddered)."""
    board = state.board
    for pad in board.geometry.padded:
        if board.color[pad] == state.to_move and len(board.string_liberties(pad)) == 1:
            return True
    return False


def _case(size: int, komi: float, rules: str, handicap: Sequence[int], moves: Sequence[tuple[int, int]],
          tags: list[str], symmetry: int = 0) -> Case:
    commands = [f"boardsize {size}", "clear_board", f"komi {komi:g}", f"kata-set-rules {rules}"]
    if handicap:
        commands.append("set_free_handicap " + " ".join(_vertex(p, size) for p in handicap))
    commands += [f"play {_color_letter(color)} {_vertex(move, size)}" for color, move in moves]
    return Case(commands, f"{RAW_NN} {symmetry}", tags=tags)


def _pick(states_moves: list[tuple[object, int]], rng: random.Random, want: str) -> int | None:
    """A move count to stop after: just after a ko capture, an atari, or anywhere past the opening."""
    if want == "ko":
        found = [n for state, n in states_moves if _after_ko_capture(state)]
    elif want == "atari":
        found = [n for state, n in states_moves if _after_atari(state)]
    else:
        found = [n for _, n in states_moves]
    return rng.choice(found) if found else None


def _kinds(count: int) -> list[str]:
    """A quarter just after a ko capture, a quarter with a string in atari, the rest anywhere."""
    return [("ko", "atari", "any", "any")[i % 4] for i in range(count)]


def positions_from_records(paths: Sequence[str], count: int, rng: random.Random, handicap_share: float = 0.4,
                           games_per_archive: int = 400) -> list[Case]:
    """``count`` 19x19 positions from SGF records: games with handicap stones (``set_free_handicap``) for about
    ``handicap_share`` of them, the rest even games; komi and rules cycle through the usual values."""
    from tabula.engine.data.records import iter_sgf_files
    from tabula.engine.rules.sgf import SgfError, read_sgf, replay

    even, handicap = [], []
    for path in paths:
        for number, (_, data) in enumerate(iter_sgf_files(path)):
            if number >= games_per_archive:
                break
            try:
                record = read_sgf(data)
            except SgfError:
                continue
            if record.size != 19 or len(record.moves) < 30:
                continue
            if record.setup:
                if record.handicap >= 2 and all(c == 1 for c, _ in record.setup) and len(record.setup) == \
                        record.handicap:
                    handicap.append(record)
            else:
                even.append(record)
    rng.shuffle(even)
    rng.shuffle(handicap)
    wanted_handicap = min(len(handicap), round(count * handicap_share))
    chosen = handicap[:wanted_handicap] + even[: count - wanted_handicap]
    cases = []
    for index, (record, kind) in enumerate(zip(chosen, _kinds(len(chosen)))):
        try:
            states = replay(record)  # every position, after 0, 1, 2, ... moves
        except SgfError:
            continue
        stop = _pick([(s, n) for n, s in enumerate(states) if n >= 10], rng, kind)
        if stop is None:
            stop, kind = rng.randrange(10, len(states)), "any"
        handicap_points = [p for _, p in record.setup]
        komi = 0.5 if handicap_points else KOMI_CYCLE[index % len(KOMI_CYCLE)]
        tags = ["record", kind] + (["handicap"] if handicap_points else [])
        cases.append(_case(19, komi, RULES_CYCLE[index % len(RULES_CYCLE)], handicap_points,
                           record.moves[:stop], tags))
    return cases


def gnugo_game(size: int, seed: int, handicap: int, max_moves: int, gnugo: str = "/usr/games/gnugo",
               level: int = 1) -> tuple[list[int], list[tuple[int, int]]]:
    """A game GNU Go plays against itself: (handicap points, (colour, move) list), at most ``max_moves`` moves."""
    from tabula.engine.rules.coords import BLACK, PASS, WHITE, parse_vertex
    from tabula.tools.compete.gtp_client import GtpEngine

    moves: list[tuple[int, int]] = []
    command = [gnugo, "--mode", "gtp", "--level", str(level), "--seed", str(seed), "--chinese-rules"]
    with GtpEngine(command, label="gnugo") as engine:
        engine.send(f"boardsize {size}")
        engine.send("clear_board")
        points: list[int] = []
        if handicap >= 2:
            points = [parse_vertex(v, size) for v in engine.send(f"fixed_handicap {handicap}").split()]
        color = WHITE if points else BLACK
        passes = 0
        while len(moves) < max_moves and passes < 2:
            reply = engine.send(f"genmove {'b' if color == BLACK else 'w'}").strip().lower()
            if reply == "resign":
                break
            move = parse_vertex(reply, size)
            passes = passes + 1 if move == PASS else 0
            moves.append((color, move))
            color = WHITE if color == BLACK else BLACK
    return points, moves


def positions_from_play(size: int, count: int, rng: random.Random, first_index: int = 0) -> list[Case]:
    """``count`` positions of ``size`` from GNU Go's games against itself, a fifth with 2-4 handicap stones."""
    from tabula.engine.rules.game import GameState, Rules
    from tabula.engine.rules.sgf import SgfError

    cases = []
    for index, kind in enumerate(_kinds(count)):
        handicap = rng.choice((2, 3, 4)) if index % 5 == 4 else 0
        points, moves = gnugo_game(size, rng.randrange(1 << 30), handicap, max_moves=size * size)
        state = GameState(size, Rules(komi=7.5))
        if points:
            state.place_handicap(points)
        states = [(state.copy(), 0)]
        try:
            for number, (color, move) in enumerate(moves, start=1):
                state.play(move, color)
                states.append((state.copy(), number))
        except (ValueError, SgfError):
            states = states[:-1]
        stop = _pick([s for s in states if s[1] >= 4], rng, kind)
        if stop is None:
            stop, kind = rng.randrange(0, len(states)), "any"
        komi = 0.5 if points else KOMI_CYCLE[(first_index + index) % len(KOMI_CYCLE)]
        tags = ["play", kind] + (["handicap"] if points else [])
        cases.append(_case(size, komi, RULES_CYCLE[(first_index + index) % len(RULES_CYCLE)], points,
                           moves[:stop], tags))
    return cases


# -- entry point ---------------------------------------------------------------------------------------------------

def _format_report(summary: dict) -> str:
    def line(label: str, block: dict) -> str:
        return (f"{label:<22} {block['positions']:>4} positions, same top move {block['same_top']:>4} "
                f"({block['same_top_share']:.1%}), max |policy diff| {block['max_policy']:.2e}, "
                f"max |whiteWin diff| {block['max_white_win']:.2e}, max |whiteLead diff| "
                f"{block['max_white_lead']:.3f}, max |ownership diff| {block['max_ownership']:.2e}"
                + (f", {block['legal_differs']} with other legal points" if block["legal_differs"] else ""))

    lines = [line("all", summary["overall"])]
    lines += [line(label, block) for label, block in summary["groups"].items()]
    lines.append("bars (" + ", ".join(f"{k} {v:g}" for k, v in summary["bars"].items()) + "): "
                 + ("met" if summary["passes"] else "NOT met"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tabula.tools.check.raw_nn_compare", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("positions", help="write a case file of positions")
    make.add_argument("--sgf", nargs="*", default=[], help="SGF archives or folders for the 19x19 positions")
    make.add_argument("--count", type=int, default=200, help="positions in all (default 200)")
    make.add_argument("--records-share", type=float, default=0.45,
                      help="the share from records (19x19); the rest from GNU Go's games, 9x9 and 13x13 halves")
    make.add_argument("--seed", type=int, default=0)
    make.add_argument("--out", required=True)
    record = commands.add_parser("record", help="run a case file through one engine and store its replies")
    record.add_argument("--engine", required=True, help="the engine's command line")
    record.add_argument("--timeout", type=float, default=120.0, help="seconds per GTP command (default 120)")
    record.add_argument("cases")
    record.add_argument("out")
    compare = commands.add_parser("compare", help="run a reference file's cases through an engine and compare")
    compare.add_argument("--engine", required=True, help="the engine's command line")
    compare.add_argument("--timeout", type=float, default=120.0, help="seconds per GTP command (default 120)")
    compare.add_argument("--json", help="also write the summary and each position's differences here")
    compare.add_argument("--top-move-bar", type=float, default=BARS["top_move"],
                         help=f"share of positions with the same top move (default {BARS['top_move']}; int8: 0.95)")
    compare.add_argument("reference")
    args = parser.parse_args(argv)

    if args.command == "positions":
        rng = random.Random(args.seed)
        from_records = round(args.count * args.records_share) if args.sgf else 0
        rest = args.count - from_records
        cases = positions_from_records(args.sgf, from_records, rng) if from_records else []
        cases += positions_from_play(9, rest // 2, rng)
        cases += positions_from_play(13, rest - rest // 2, rng, first_index=1)
        header = [f"# {len(cases)} positions for {RAW_NN}: 19x19 from records, 9x9 and 13x13 from GNU Go's games",
                  f"# made by: python -m tabula.tools.check.raw_nn_compare positions --count {args.count} "
                  f"--seed {args.seed} (and --sgf with the archives named below)",
                  "# archives: " + " ".join(p.rsplit("/", 1)[-1] for p in args.sgf)]
        with open(args.out, "w") as out:
            write_cases(header, cases, out)
        print(f"{len(cases)} positions -> {args.out}", file=sys.stderr)
        return 0

    with open_text(args.cases if args.command == "record" else args.reference) as handle:
        header, cases = read_cases(handle.read())

    if args.command == "record":
        with open_text(args.out, "w") as out:
            for line in header:
                out.write(line + "\n")
            out.write(f"# replies of: {args.engine}\n\n")

            def store(number: int, case: Case, lines: list[str]) -> None:
                case.reply = lines
                write_cases([], [case], out)
                out.flush()
                print(f"\r{number}/{len(cases)}", end="", file=sys.stderr, flush=True)

            run_cases(args.engine, cases, args.timeout, store)
        print(f"\n{len(cases)} replies -> {args.out}", file=sys.stderr)
        return 0

    missing = [i for i, c in enumerate(cases, start=1) if not c.reply]
    if missing:
        print(f"reference file: cases {missing[:5]} have no stored reply", file=sys.stderr)
        return 2
    replies = run_cases(args.engine, cases, args.timeout)
    rows = []
    for case, reply in zip(cases, replies):
        rows.append((case, difference(parse_reply(case.reply, case.size), parse_reply(reply, case.size))))
    summary = summarize(rows, {**BARS, "top_move": args.top_move_bar})
    print(_format_report(summary))
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"summary": summary, "positions": [
                {"commands": c.commands, "tags": c.tags, **d.__dict__} for c, d in rows]}, out, indent=1)
    return 0 if summary["passes"] else 1


if __name__ == "__main__":
    sys.exit(main())
