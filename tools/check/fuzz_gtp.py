"""GTP fuzzing: generated command lines against one running ``python -m tabula.gtp`` process, every reply checked.

    python -m tabula.tools.check.fuzz_gtp --lines 100000 --seed 1

Layer: tools. The engine is a subprocess over pipes; nothing here imports ``gtp``, so that what decides whether a
reply is expected (``expected_reply``) is an independent reading of the spec, section 3: control characters other
than HT and LF are dropped, HT is a space, ``#`` starts a comment, a blank line gets no reply, and a first word of
digits is an id that the reply echoes. A reply is ``=`` or ``?``, the id if one was given, then text, and ends at
the first empty line. The process must never die or hang (every reply has a deadline), and after the storm a known
game must still play correctly (``check_game``).

The engine runs in a scratch directory that also holds the junk SGF files it is asked to load, so that
``printsgf FILE`` can only write there.
"""
from __future__ import annotations

import argparse
import os
import queue
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REPLY_TIMEOUT_S = 20.0  # longest wait for one reply before the engine counts as hung
MEMORY_LIMIT_BYTES = 4 << 30  # address space of the engine: a runaway read fails there, not on the machine
LONG_LINE_BYTES = 1 << 20
STREAMING = ("lz-analyze", "analyze", "lz-genmove_analyze", "genmove_analyze", "kata-analyze")
# Commands that run random playouts (ownership): slow on big boards, so sent less often.
EXPENSIVE = ("final_score", "final_status_list", "kgs-genmove_cleanup", "kgs-game_over")
# Line kinds that trigger bugs already reported (see docs/RELIABILITY.md). The CI test leaves them out and has a
# strict xfail test for each, so that a fix shows up; the script sends them unless told otherwise. None at present
# ("huge-id", ids over 4,300 digits, is fixed).
KNOWN_BUGS: frozenset[str] = frozenset()

_CONTROL = {chr(c) for c in range(32) if c not in (9, 10)} | {chr(127)}
_REPLY_HEAD = re.compile(rb"^([=?])(\d*)(?: (.*))?$", re.DOTALL)


# -- what the spec says the reply should be -------------------------------------------------------------------------

def expected_reply(data: bytes) -> tuple[bool, str | None]:
    """(whether ``data``, one input line without its newline, gets a reply; the id it echoes, as digits without
    leading zeros, or None). Bytes that are not UTF-8 count as replaced characters, as the engine reads them."""
    text = data.decode("utf-8", errors="replace")
    kept = []
    for ch in text:
        if ch == "#":
            break
        if ch == "\t":
            kept.append(" ")
        elif ch not in _CONTROL:
            kept.append(ch)
    words = [word for word in "".join(kept).split(" ") if word]  # only space (and HT) separate: not NBSP etc.
    if not words:
        return False, None
    first = words[0]
    if first.isascii() and first.isdigit():
        return True, first.lstrip("0") or "0"
    return True, None


def check_reply(lines: list[bytes], expected_id: str | None) -> str | None:
    """The problem with one reply (its lines without the final empty one), or None when it is well-formed."""
    if not lines:
        return "empty reply"
    match = _REPLY_HEAD.match(lines[0])
    if match is None:
        return f"reply does not start with '=' or '?': {lines[0][:80]!r}"
    got_id = match.group(2).decode()
    got_id = (got_id.lstrip("0") or "0") if got_id else None
    if got_id != expected_id:
        return f"reply id {got_id} for a command with id {expected_id}"
    if match.group(1) == b"?" and not (match.group(3) or b"").strip():
        return "failure without a message"
    for line in lines:
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            return f"reply is not UTF-8: {line[:80]!r}"
        if b"\r" in line:
            return f"carriage return in reply: {line[:80]!r}"
    return None


# -- junk files -------------------------------------------------------------------------------------------------------

def write_junk_sgf(directory: Path, rng: random.Random) -> list[str]:
    """Hostile and malformed SGF files for ``loadsgf``; returns their names (relative to ``directory``)."""
    valid = b"(;GM[1]FF[4]SZ[9]KM[7.5];B[ee];W[ce];B[dd];W[cd];B[dc];W[cc];B[ed])"
    files = {
        "empty.sgf": b"",
        "valid.sgf": valid,
        "truncated.sgf": valid[: len(valid) // 2],
        "random.sgf": rng.randbytes(4096),
        "random-sgfish.sgf": b"(;" + bytes(rng.choice(b"()[];:\\ABWSZKMaz19") for _ in range(4096)),
        "sz0.sgf": b"(;SZ[0];B[aa])",
        "sz1.sgf": b"(;SZ[1])",
        "sz1000.sgf": b"(;SZ[1000];B[aa])",
        "sz-huge.sgf": b"(;SZ[" + b"9" * 5000 + b"])",
        "sz-negative.sgf": b"(;SZ[-19])",
        "sz-rect.sgf": b"(;SZ[19:9];B[aa])",
        "sz26.sgf": b"(;SZ[26];B[zz])",
        "deep-variations.sgf": b"(;SZ[9]" + b"(;B[aa]" * 3000 + b")" * 3000 + b")",
        "nested-empty.sgf": b"(;SZ[9]" + b"(;" * 20000 + b")" * 20000 + b")",
        "many-variations.sgf": b"(;SZ[9]" + b"(;B[aa])" * 5000 + b")",
        "utf16-junk.sgf": b"(;CA[UTF-16]SZ[9]PB[\xff\xfe\x00j\xd8unk];B[aa])",
        "bad-utf8.sgf": b"(;CA[UTF-8]SZ[9]PB[\xc3\x28\xff\xfe];B[aa])",
        "unknown-charset.sgf": b"(;CA[no-such-encoding]SZ[9];B[aa])",
        "coords-zz.sgf": b"(;SZ[9];B[zz])",
        "coords-short.sgf": b"(;SZ[9];B[a])",
        "coords-bytes.sgf": b"(;SZ[9];B[\xff\xff])",
        "occupied.sgf": b"(;SZ[9];B[aa];W[aa])",
        "suicide.sgf": b"(;SZ[9]AW[ba][ab];B[aa])",
        "setup-occupied.sgf": b"(;SZ[9]AB[aa:ii]AW[ee])",
        "setup-range.sgf": b"(;SZ[19]AB[aa:zz])",
        "clear-points.sgf": b"(;SZ[9]AB[aa];AE[aa])",
        "komi-inf.sgf": b"(;SZ[9]KM[1e999];B[aa])",
        "komi-nan.sgf": b"(;SZ[9]KM[nan])",
        "handicap-huge.sgf": b"(;SZ[9]HA[99999999999999999999]AB[cc][gg])",
        "player-junk.sgf": b"(;SZ[9]PL[x];B[aa])",
        "big-comment.sgf": b"(;SZ[9]GC[" + b"x" * LONG_LINE_BYTES + b"];B[aa])",
        "nul.sgf": b"\x00" * 1000,
        "only-parens.sgf": b"(" * 10000,
        "two-games.sgf": valid + valid.replace(b"SZ[9]", b"SZ[13]"),
        "sz25-corner.sgf": b"(;SZ[25];B[yy];W[aa])",
    }
    # 10,000 passes: replaying is quadratic in the number of moves, so this is about the longest file that loads
    # within the reply timeout (tests/test_untrusted_files.py has the longer one).
    files["many-moves.sgf"] = b"(;SZ[9]" + b";B[];W[]" * 5000 + b")"
    for name, data in files.items():
        (directory / name).write_bytes(data)
    (directory / "a-directory.sgf").mkdir(exist_ok=True)
    return sorted(files) + ["a-directory.sgf"]


# -- the generator ----------------------------------------------------------------------------------------------------

_WORDS = ["", "b", "w", "B", "W", "black", "white", "BLACK", "bl", "x", "pass", "PASS", "resign", "A1", "a1",
          "T19", "t19", "Z99", "I5", "i5", "J9", "A0", "A-1", "A26", "Z25", "ZZ", "AA1", "1A", "A1.5", "1", "0",
          "-1", "-0", "+5", "2", "3", "9", "19", "25", "26", "1000", "1e9", "1e999", "-1e999", "nan", "NaN", "-nan",
          "inf", "-inf", "Infinity", "0x10", "1_000", "0.5", "-0.5", "7.5", "1e-320", "9" * 30, "9" * 400,
          "\u00e9", "\u65e5\u672c", "\u00bd", "\u0661\u0662", "\u00b2", "\U0001f600", "\ufffd", "true", "false",
          "on", "None", "null", "%s", "%n", "{}", "\\", "'", '"', "\u200b", "\ufeff",
          "absolute", "byoyomi", "canadian", "fischer", "none", "alive", "dead", "seki", "interval", "minmoves"]


@dataclass
class FuzzLine:
    data: bytes  # without the newline
    kind: str  # generator category, for the figures
    stop_after: bool = False  # a streaming command: send a line right after it to stop it


class LineGenerator:
    """Command lines, valid and hostile, drawn from ``rng``. ``commands`` is the engine's ``list_commands``."""

    def __init__(self, rng: random.Random, commands: list[str], junk_files: list[str],
                 skip_kinds: frozenset[str] = frozenset()):
        self.rng = rng
        self.commands = commands
        self.junk_files = junk_files
        self.skip_kinds = skip_kinds
        self.size = 19  # the board size the engine last accepted, as far as we know
        kinds = [
            (30, self.valid_play), (28, self.mutated_command), (4, self.unknown_command), (5, self.random_bytes),
            (2, self.control_and_comments), (3, self.boardsize), (3, self.undo_burst), (2, self.after_game_end),
            (3, self.time_junk), (1.2, self.loadsgf_junk), (1, self.huge_id), (1, self.handicap),
            (0.5, self.long_line), (0.15, self.expensive), (0.15, self.streaming), (0.02, self.very_long_line),
        ]
        self._weights = [w for w, _ in kinds]
        self._makers = [m for _, m in kinds]
        self._pending: list[FuzzLine] = []

    def next(self) -> FuzzLine:
        while not self._pending:
            made = self.rng.choices(self._makers, self._weights)[0]()
            self._pending = [line for line in (made if isinstance(made, list) else [made])
                             if line.kind not in self.skip_kinds]
        return self._pending.pop(0)

    # -- helpers

    def _id(self) -> str:
        r = self.rng.random()
        if r < 0.15:
            return ""
        if r < 0.85:
            return f"{self.rng.randrange(1, 100_000)} "
        return self.rng.choice(["0 ", "007 ", f"{10 ** 18 + self.rng.randrange(1000)} ", "00 ",
                                f"{self.rng.randrange(1 << 64)} "])

    def _line(self, text: str, kind: str, **extra) -> FuzzLine:
        return FuzzLine((self._id() + text).encode("utf-8", errors="surrogatepass"), kind, **extra)

    def _vertex(self, size: int | None = None) -> str:
        size = size or self.size
        rng = self.rng
        if rng.random() < 0.05:
            return rng.choice(["pass", "PASS", "resign"])
        x, y = rng.randrange(size), rng.randrange(size)
        letters = "ABCDEFGHJKLMNOPQRSTUVWXYZ"
        letter = letters[x] if x < len(letters) else "A" + letters[x - len(letters)]
        return f"{letter if rng.random() < 0.7 else letter.lower()}{y + 1}"

    def _color(self) -> str:
        return self.rng.choice(["b", "w", "black", "white", "B", "W"])

    def _word(self) -> str:
        rng = self.rng
        r = rng.random()
        if r < 0.6:
            return rng.choice(_WORDS) or "x"
        if r < 0.75:
            return self._vertex(rng.randrange(1, 30))
        if r < 0.85:
            return repr(rng.uniform(-1e6, 1e6))
        if r < 0.95:
            return str(rng.randrange(-10 ** 6, 10 ** 6))
        return "".join(chr(rng.randrange(0x21, 0x2FFF)) for _ in range(rng.randrange(1, 8)))

    # -- the kinds

    def valid_play(self) -> FuzzLine | list[FuzzLine]:
        r = self.rng.random()
        if r < 0.7:
            return self._line(f"play {self._color()} {self._vertex()}", "play")
        if r < 0.85:
            return self._line(f"genmove {self._color()}", "genmove")
        if r < 0.9:
            return self._line("reg_genmove " + self._color(), "genmove")
        if r < 0.95:
            return self._line(self.rng.choice(["showboard", "printsgf", "name", "version", "protocol_version",
                                               "list_commands", "known_command play", "clear_board"]), "query")
        return self._line(f"komi {self.rng.choice(['0', '6.5', '7.5', '-3', '0.5'])}", "query")

    def mutated_command(self) -> FuzzLine:
        rng = self.rng
        name = rng.choice(self.commands)
        if name in STREAMING:
            return self.streaming()
        if name in EXPENSIVE and rng.random() < 0.9:
            name = "showboard"
        if name == "quit":
            name = "known_command"  # the storm runs in one process
        if name == "printsgf":
            return self._line("printsgf " + rng.choice(["", "out.sgf", "x y", "b", "\u00e9.sgf", "a-directory.sgf",
                                                        "no-such-dir/x.sgf", "/dev/null"]), "args")
        if name == "loadsgf":
            return self.loadsgf_junk()
        count = rng.choice([0, 0, 1, 1, 2, 2, 3, 4, rng.randrange(5, 40)])
        words = [self._word() for _ in range(count)]
        return self._line(" ".join([name, *words]), "args")

    def unknown_command(self) -> FuzzLine:
        rng = self.rng
        name = rng.choice(["foo", "PLAY", "Play", "pla", "play_", "genmove_black", "boardsize9", "=", "?", "=1",
                           "lz-", "kgs-", "gogui-", "\u00e9", "\x7fplay", "list-commands", "exit", "QUIT",
                           self._word()])
        return self._line(" ".join([name] + [self._word() for _ in range(rng.randrange(3))]), "unknown")

    def random_bytes(self) -> FuzzLine:
        rng = self.rng
        data = rng.randbytes(rng.choice([1, 2, 5, 20, 100, 1000]))
        if rng.random() < 0.3:
            data = rng.choice([b"play b ", b"1 boardsize ", b"genmove ", b"komi ", b"2 loadsgf "]) + data
        return FuzzLine(data.replace(b"\n", b" "), "bytes")

    def control_and_comments(self) -> FuzzLine:
        rng = self.rng
        return FuzzLine(rng.choice([
            b"", b"   ", b"\t", b"# a comment", b"1 name # comment", b"#", b"\r", b"2 name\r", b"3\tname",
            b"4 na\x01me", b"\x00\x00", b"5 \x7fname", b"\x1b[31m6 name", b"7 version\x00junk", b"8 pro#tocol",
            b"  9   name   ", b"10\x0bname", b"# 11 name", b"12 known_command\tplay", b"\xef\xbb\xbf13 name",
        ]), "control")

    def boardsize(self) -> list[FuzzLine]:
        rng = self.rng
        size = rng.choice([rng.randrange(2, 26), rng.randrange(2, 26), rng.randrange(2, 12), rng.choice(
            [0, 1, -1, 26, 100, 10 ** 9, 19]), 9, 19])
        lines = [self._line(f"boardsize {size}", "boardsize")]
        if 2 <= size <= 25:
            self.size = size
        if rng.random() < 0.5:
            lines.append(self._line("clear_board", "boardsize"))
        return lines

    def undo_burst(self) -> list[FuzzLine]:
        return [self._line("undo", "undo") for _ in range(self.rng.randrange(1, 12))]

    def after_game_end(self) -> list[FuzzLine]:
        lines = [self._line("play b pass", "ended"), self._line("play w pass", "ended")]
        lines += [self._line(f"play {self._color()} {self._vertex()}", "ended") for _ in range(3)]
        lines.append(self._line(f"genmove {self._color()}", "ended"))
        return lines

    def time_junk(self) -> list[FuzzLine]:
        lines = [self._time_line()]
        if self.rng.random() < 0.5:  # the clock is read by the next genmove
            lines.append(self._line(f"genmove {self._color()}", "time"))
        return lines

    def _time_line(self) -> FuzzLine:
        rng = self.rng

        def number() -> str:
            return rng.choice([self._word(), str(rng.randrange(-5, 3600)), "0", "nan", "inf", "-1", "1e308"])

        r = rng.random()
        if r < 0.4:
            words = [number() for _ in range(rng.choice([3, 3, 3, 2, 4]))]
            return self._line("time_settings " + " ".join(words), "time")
        if r < 0.7:
            mode = rng.choice(["none", "absolute", "byoyomi", "canadian", "fischer", "junk", ""])
            words = [number() for _ in range(rng.randrange(0, 5))]
            return self._line(" ".join([rng.choice(["kgs-time_settings", "kata-time_settings"]), mode, *words]),
                              "time")
        return self._line(f"time_left {rng.choice([self._color(), 'x'])} {number()} {number()}", "time")

    def loadsgf_junk(self) -> FuzzLine:
        rng = self.rng
        name = rng.choice(self.junk_files + ["no-such-file.sgf", "", "/dev/null", "."])
        extra = rng.choice(["", "", str(rng.randrange(-3, 40)), "0", "-1", self._word(), "1 2"])
        return self._line(f"loadsgf {name} {extra}".rstrip(), "loadsgf")

    def huge_id(self) -> FuzzLine:
        rng = self.rng
        if rng.random() < 0.3:
            return FuzzLine(b"9" * rng.choice([4301, 5000, 20000]) + b" name", "huge-id")
        return FuzzLine(f"{'9' * rng.choice([19, 20, 100, 1000, 4300])} name".encode(), "big-id")

    def handicap(self) -> list[FuzzLine]:
        rng = self.rng
        lines = [self._line("clear_board", "handicap")] if rng.random() < 0.7 else []
        command = rng.choice(["fixed_handicap", "place_free_handicap", "set_free_handicap"])
        if command == "set_free_handicap":
            words = " ".join(self._vertex() for _ in range(rng.randrange(0, 12)))
        else:
            words = rng.choice([str(rng.randrange(-2, 12)), str(rng.randrange(2, 700)), self._word()])
        return lines + [self._line(f"{command} {words}", "handicap")]

    def long_line(self) -> FuzzLine:
        rng = self.rng
        n = rng.choice([4096, 65536])
        head = rng.choice(["play b ", "name ", "komi ", "", "#", "boardsize ", "known_command "])
        return self._line(head + "".join(rng.choice("abcdefghij 1234567890#\t") for _ in range(n)), "long")

    def very_long_line(self) -> FuzzLine:
        head = self.rng.choice([b"play b ", b"name ", b"", b"12 loadsgf "])
        fill = self.rng.choice([b"x", b"9", b" ", b"\xff", b"\x01"])
        return FuzzLine(head + fill * LONG_LINE_BYTES, "huge-id" if head + fill == b"9" else "long-1mb")

    def expensive(self) -> FuzzLine:
        name = self.rng.choice([c for c in EXPENSIVE if c in self.commands])
        args = {"final_status_list": " " + self.rng.choice(["dead", "alive", "seki", "x"]),
                "kgs-genmove_cleanup": " " + self._color()}.get(name, "")
        return self._line(name + args, "expensive")

    def streaming(self) -> FuzzLine:
        rng = self.rng
        name = rng.choice([c for c in STREAMING if c in self.commands] or ["lz-analyze"])
        words = rng.choice(["", "b", "w 10", "interval 5", "b 1", "x", "-1", "b interval", "10 minmoves 3"])
        return self._line(f"{name} {words}".rstrip(), "streaming", stop_after=True)


# -- the driver -----------------------------------------------------------------------------------------------------

class EngineDied(Exception):
    pass


class ReplyTimeout(Exception):
    pass


class GtpPipe:
    """An engine subprocess: raw lines in, raw reply lines out through a reader thread (so reads can time out)."""

    def __init__(self, argv: list[str], cwd: Path, stderr_path: Path, memory_limit_bytes: int = MEMORY_LIMIT_BYTES):
        env = {**os.environ, "PYTHONPATH": str(ROOT)}

        def limit() -> None:
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit_bytes, memory_limit_bytes))

        self._stderr = open(stderr_path, "ab")
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                        cwd=cwd, env=env, preexec_fn=limit)
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        pending = b""
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                self._lines.put(line)
        if pending:
            self._lines.put(pending)
        self._lines.put(None)

    def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(data + b"\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError) as error:
            raise EngineDied(f"stdin closed: {error}") from None

    def reply(self, timeout_s: float) -> list[bytes]:
        """The next reply's lines, without the empty line that ends it."""
        deadline = time.monotonic() + timeout_s
        lines: list[bytes] = []
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise ReplyTimeout(f"no complete reply in {timeout_s:g} s (got {len(lines)} lines)") from None
            if line is None:
                self._lines.put(None)
                raise EngineDied(f"stdout closed (exit status {self.process.wait(5)})")
            if line == b"":
                return lines
            lines.append(line)

    def pending(self) -> int:
        return self._lines.qsize()

    def close(self) -> int | None:
        try:
            self.send(b"quit")
            self.process.wait(timeout=5)
        except (EngineDied, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait(timeout=5)
        self._stderr.close()
        return self.process.returncode

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=5)
        self._stderr.close()


@dataclass
class FuzzReport:
    lines: int = 0
    bytes_sent: int = 0
    by_kind: Counter = field(default_factory=Counter)  # generator category -> lines
    replies: Counter = field(default_factory=Counter)  # "=", "?", "none" (blank or comment lines)
    failures: Counter = field(default_factory=Counter)  # "? text" -> count (text cut to 40 characters)
    max_latency_s: float = 0.0
    slowest: str = ""
    latency_by_kind: dict[str, float] = field(default_factory=dict)  # category -> its slowest reply
    errors: list[str] = field(default_factory=list)  # crashes, hangs, malformed replies, internal errors
    restarts: int = 0
    game_check: list[str] = field(default_factory=list)  # problems in the valid game after the storm
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.errors and not self.game_check and self.restarts == 0

    def summary(self) -> str:
        out = [f"lines sent: {self.lines} ({self.bytes_sent / 1e6:.1f} MB) in {self.elapsed_s:.1f} s",
               "replies: " + ", ".join(f"{k} {v}" for k, v in sorted(self.replies.items())),
               f"max reply latency: {self.max_latency_s * 1000:.0f} ms ({self.slowest})",
               "lines by kind: " + ", ".join(f"{k} {v}" for k, v in self.by_kind.most_common()),
               "slowest reply by kind (ms): " + ", ".join(
                   f"{k} {v * 1000:.0f}" for k, v in sorted(self.latency_by_kind.items(), key=lambda kv: -kv[1])),
               "most frequent failures: " + "; ".join(f"{k!r} {v}" for k, v in self.failures.most_common(12)),
               f"engine restarts: {self.restarts}",
               f"errors: {len(self.errors)}"]
        out += [f"  {e}" for e in self.errors[:40]]
        out.append("game after the storm: " + ("ok" if not self.game_check else "FAILED"))
        out += [f"  {e}" for e in self.game_check]
        return "\n".join(out)


PLAYER_OPTIONS = {
    "random": ["--player", "random"],
    # The shipped networks at a few visits: genmove and the analysis commands run the real search, quickly.
    "search": ["--player", "search", "--visits", "8", "--threads", "1"],
}


def engine_argv(seed: int, player: str = "random") -> list[str]:
    return [sys.executable, "-m", "tabula.gtp", *PLAYER_OPTIONS[player], "--seed", str(seed)]


def _show(data: bytes, limit: int = 100) -> str:
    return repr(data[:limit]) + (f"...({len(data)} bytes)" if len(data) > limit else "")


def run_fuzz(lines: int, seed: int, skip_kinds: frozenset[str] = frozenset(),
             reply_timeout_s: float = REPLY_TIMEOUT_S, workdir: Path | None = None,
             progress: bool = False, player: str = "random") -> FuzzReport:
    """Send ``lines`` generated lines to one engine, check every reply, then play a known game on it."""
    rng = random.Random(seed)
    report = FuzzReport()
    scratch = Path(tempfile.mkdtemp(prefix="tabula-fuzz-", dir=workdir))
    started = time.monotonic()
    try:
        junk = write_junk_sgf(scratch, rng)
        stderr_path = scratch / "engine.stderr"
        pipe = GtpPipe(engine_argv(seed, player), scratch, stderr_path)
        pipe.send(b"list_commands")
        commands = [line.decode().lstrip("= ").strip() for line in pipe.reply(60)]
        commands = [c for c in commands if c]
        generator = LineGenerator(rng, commands, junk, skip_kinds)
        last: list[bytes] = []  # the most recent lines, for reproducers
        for number in range(lines):
            line = generator.next()
            last = (last + [line.data])[-5:]
            to_send = [line.data]
            if line.stop_after:
                to_send.append(b"999999 name")
            report.lines += 1
            report.by_kind[line.kind] += 1
            report.bytes_sent += len(line.data) + 1
            try:
                start = time.monotonic()
                for data in to_send:
                    pipe.send(data)
                for data in to_send:
                    wanted, wanted_id = expected_reply(data)
                    if not wanted:
                        report.replies["none"] += 1
                        continue
                    reply = pipe.reply(reply_timeout_s)
                    problem = check_reply(reply, wanted_id)
                    if problem:
                        report.errors.append(f"line {number} ({line.kind}) {_show(data)}: {problem}")
                        continue
                    report.replies[reply[0][:1].decode()] += 1
                    if reply[0].startswith(b"?"):
                        text = reply[0].split(b" ", 1)[1].decode(errors="replace")[:40]
                        report.failures[text] += 1
                        if text.startswith("internal error"):
                            report.errors.append(f"line {number} ({line.kind}) {_show(data)}: internal error")
                latency = time.monotonic() - start
                if latency > report.latency_by_kind.get(line.kind, 0.0):
                    report.latency_by_kind[line.kind] = latency
                if latency > report.max_latency_s:
                    report.max_latency_s, report.slowest = latency, f"{line.kind}: {_show(line.data, 60)}"
            except (EngineDied, ReplyTimeout) as error:
                what = "died" if isinstance(error, EngineDied) else "hung"
                report.errors.append(f"line {number} ({line.kind}): engine {what}: {error}; last lines: "
                                     + " | ".join(_show(d, 60) for d in last))
                pipe.kill()
                report.restarts += 1
                pipe = GtpPipe(engine_argv(seed + report.restarts, player), scratch, stderr_path)
                pipe.send(b"name")  # wait for the start-up, which is not a reply latency
                pipe.reply(60)
                generator.size = 19
            if progress and number and number % 10000 == 0:
                print(f"  {number} lines, {len(report.errors)} errors, {time.monotonic() - started:.0f} s",
                      file=sys.stderr, flush=True)
        if pipe.pending():
            report.errors.append(f"{pipe.pending()} unexpected output lines after the storm")
        try:
            report.game_check = check_game(pipe, reply_timeout_s)
        except (EngineDied, ReplyTimeout) as error:
            report.game_check = [f"engine failed during the game check: {error}"]
        status = pipe.close()
        if status not in (0, None):
            report.game_check.append(f"exit status {status} after quit")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report.elapsed_s = time.monotonic() - started
    return report


# -- the valid game after the storm ---------------------------------------------------------------------------------

# 9x9, komi 7.5: black walls column D, white walls column F (column E is neutral), and black captures a white stone
# on C5. Every stone is plainly alive: black owns A-D (36 points), white F-J (36 points), so W+7.5.
_WALLS = [("b", f"D{y}") for y in range(1, 10)] + [("w", f"F{y}") for y in range(1, 10)]
_CAPTURE = [("w", "C5"), ("b", "B5"), ("b", "C4"), ("b", "C6")]  # C6 takes C5
GAME = _WALLS + _CAPTURE


def _expected_stones(moves: list[tuple[str, str]]) -> dict[str, set[str]]:
    """Stones after ``moves`` by sgfmill's own rules (an implementation independent of the engine)."""
    from sgfmill import boards

    board = boards.Board(9)
    for color, vertex in moves:
        board.play(*_rowcol(vertex), color)
    return _stones_of(board)


def _rowcol(vertex: str) -> tuple[int, int]:
    return int(vertex[1:]) - 1, "ABCDEFGHJ".index(vertex[0])


def _stones_of(board) -> dict[str, set[str]]:
    stones: dict[str, set[str]] = {"b": set(), "w": set()}
    for color, (row, col) in board.list_occupied_points():
        stones[color].add(f"{'ABCDEFGHJ'[col]}{row + 1}")
    return stones


def _showboard_stones(lines: list[str]) -> dict[str, set[str]]:
    stones: dict[str, set[str]] = {"b": set(), "w": set()}
    for line in lines:
        match = re.match(r"^\s*(\d+)\s+(.*?)\s+\1\s*$", line)
        if not match:
            continue
        cells = [c for c in match.group(2) if c in ".+XO"]
        for col, cell in enumerate(cells):
            if cell in "XO":
                stones["b" if cell == "X" else "w"].add(f"{'ABCDEFGHJ'[col]}{match.group(1)}")
    return stones


def _sgf_stones(text: str) -> dict[str, set[str]]:
    from sgfmill import boards, sgf

    game = sgf.Sgf_game.from_string(text)
    board = boards.Board(game.get_size())
    for node in game.get_main_sequence():
        color, point = node.get_move()
        if color is not None and point is not None:
            board.play(point[0], point[1], color)
    return _stones_of(board)


def check_game(pipe: GtpPipe, timeout_s: float = REPLY_TIMEOUT_S) -> list[str]:
    """Play ``GAME`` on the engine and check it with showboard, printsgf, undo and the score; the problems found."""
    problems: list[str] = []
    counter = iter(range(1, 1_000_000))

    def ask(command: str) -> tuple[bool, str]:
        command_id = next(counter)
        pipe.send(f"{command_id} {command}".encode())
        reply = pipe.reply(timeout_s)
        problem = check_reply(reply, str(command_id))
        if problem:
            problems.append(f"{command}: {problem}")
            return False, ""
        head = reply[0].decode()
        body = [head[1 + len(str(command_id)):].removeprefix(" ")] + [line.decode() for line in reply[1:]]
        return head.startswith("="), "\n".join(body)

    def expect(command: str, wanted: str | None = "") -> str:
        ok, text = ask(command)
        if not ok:
            problems.append(f"{command} -> ?{text}")
        elif wanted is not None and text.strip() != wanted:
            problems.append(f"{command} -> {text.strip()!r}, expected {wanted!r}")
        return text

    for command in ("time_settings 0 1 0", "boardsize 9", "clear_board", "komi 7.5"):
        expect(command)
    expect("name", "Tabula")
    expect("known_command play", "true")
    for color, vertex in GAME:
        expect(f"play {color} {vertex}")
    final = _expected_stones(GAME)
    assert "C5" not in final["w"]  # the capture this game is built around

    def board_is(wanted: dict[str, set[str]], when: str) -> None:
        shown = _showboard_stones(expect("showboard", None).split("\n"))
        if shown != wanted:
            problems.append(f"showboard {when}: black {sorted(shown['b'])} white {sorted(shown['w'])}")
        sgf_text = expect("printsgf", None)
        try:
            stones = _sgf_stones(sgf_text)
        except ValueError as error:
            problems.append(f"printsgf {when} is not SGF: {error}")
            return
        if stones != wanted:
            problems.append(f"printsgf {when}: black {sorted(stones['b'])} white {sorted(stones['w'])}")

    board_is(final, "after the capture")
    expect("undo")
    board_is(_expected_stones(GAME[:-1]), "after undoing the capture")
    expect("play b C6")
    expect("play w A1")  # an illegal-looking but legal move inside black's area, then taken back
    expect("undo")
    if ask("play b D5")[0]:  # occupied: must be refused and change nothing
        problems.append("play b D5 on an occupied point was accepted")
    board_is(final, "after an occupied-point move")
    expect("play b pass")
    expect("play w pass")
    dead = expect("final_status_list dead", None).strip()
    if dead:
        problems.append(f"final_status_list dead -> {dead!r} in a position with no dead stones")
    expect("final_score", "W+7.5")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tabula.tools.check.fuzz_gtp", description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=REPLY_TIMEOUT_S, help="seconds allowed for one reply")
    parser.add_argument("--skip-known-bugs", action="store_true",
                        help="leave out the line kinds of bugs already reported "
                             f"({', '.join(sorted(KNOWN_BUGS)) or 'none at present'})")
    parser.add_argument("--player", choices=sorted(PLAYER_OPTIONS), default="random",
                        help="the engine's move picker: random (fast), or search with the shipped networks")
    args = parser.parse_args(argv)
    report = run_fuzz(args.lines, args.seed, KNOWN_BUGS if args.skip_known_bugs else frozenset(), args.timeout,
                      progress=True, player=args.player)
    print(report.summary())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
