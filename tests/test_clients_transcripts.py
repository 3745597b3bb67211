"""Client conventions that a transcript cannot express: OGS chat lines (``--ogs-chat``) on stderr and never on
stdout, and GoGui's ``# interrupt`` line (no reply; stops a streaming command and a running genmove search).

The OGS and KGS command sequences themselves are transcripts: tests/gtp/ogs.gtp and tests/gtp/kgs.gtp.
"""
from __future__ import annotations

import os
import random
import re
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from tabula.engine.config import PlayConfig, SearchConfig, TimeConfig
from tabula.engine.net.evaluator import UniformEvaluator
from tabula.engine.play.player import Player, RandomGoPicker
from tabula.engine.play.search_player import SearchPicker
from tabula.engine.rules.coords import PASS, RESIGN
from tabula.gtp.commands import TABLE, CommandTable, Session, serve
from tabula.gtp.protocol import is_interrupt, preprocess
from tests.test_gtp_transcripts import matches, parse_transcript

ROOT = Path(__file__).resolve().parent.parent
OGS = ROOT / "tests" / "gtp" / "ogs.gtp"
CHAT = re.compile(r"^(MALKOVICH|DISCUSSION|MAIN):", re.MULTILINE)  # what gtp2ogs relays to the game chat


def _run_engine(text: str, *flags: str) -> subprocess.CompletedProcess:
    stdin = b"".join(e.line + b"\n" for e in parse_transcript(text))
    return subprocess.run([sys.executable, "-m", "tabula.gtp", "--player", "random", "--seed", "5", *flags],
                          input=stdin, capture_output=True, timeout=60, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_ogs_chat_goes_to_stderr_only_and_changes_no_reply() -> None:
    text = OGS.read_text()
    chatty = _run_engine(text, "--ogs-chat")
    quiet = _run_engine(text)
    assert chatty.returncode == 0 and quiet.returncode == 0, chatty.stderr.decode()
    replies = chatty.stdout.decode().split("\n\n")[:-1]
    expected = [e for e in parse_transcript(text) if e.expected]
    assert len(replies) == len(expected)
    for exchange, actual in zip(expected, replies):
        assert matches("\n".join(exchange.expected), actual), (exchange.line, actual)
    assert chatty.stdout == quiet.stdout  # same seed, same game: the chat is a side channel only
    assert not CHAT.search(chatty.stdout.decode())
    assert not CHAT.search(quiet.stderr.decode())  # off by default

    chat = CHAT.findall(chatty.stderr.decode())
    lines = [line for line in chatty.stderr.decode().splitlines() if CHAT.match(line)]
    genmoves = sum(1 for e in parse_transcript(text) if e.line.split()[:1] == [b"genmove"])
    assert chat == ["MALKOVICH"] * genmoves, chatty.stderr.decode()
    for line in lines:
        assert re.fullmatch(r"MALKOVICH: move \d+ \([BW]\) ([A-HJ-T]\d+|pass): random player, no search", line)


class Scripted(RandomGoPicker):
    """A move picker that plays a fixed list of moves."""

    name = "scripted"

    def __init__(self, *moves: int):
        super().__init__(random.Random(0))
        self.moves = list(moves)

    def pick(self, state, budget_s=None, on_progress=None, progress_interval_s=1.0, spend_all=False):  # noqa: ANN001
        return self.moves.pop(0)

    def ownership(self, state):  # noqa: ANN001
        return np.zeros(state.size * state.size, dtype=np.float32)


def test_chat_summarises_a_search_and_announces_the_end_of_the_game() -> None:
    chat: list[str] = []
    picker = SearchPicker(UniformEvaluator(), SearchConfig(visits=24, threads=1, early_stop=False),
                                rng=np.random.default_rng(1), play=PlayConfig(resign_winrate=0.0))
    session = Session(player=Player(picker, size=9), chat=chat.append)
    assert session.dispatch("genmove b").startswith("= ")
    assert len(chat) == 1
    assert re.fullmatch(r"MALKOVICH: move 1 \(B\) [A-HJ]\d: 2[4-9] visits, winrate \d+\.\d% for black, "
                        r"PV [A-HJ]\d( [A-HJ]\d)*", chat[0]), chat[0]

    chat.clear()
    session = Session(player=Player(Scripted(PASS, RESIGN), size=9), chat=chat.append)
    session.dispatch("komi 0.5")
    session.dispatch("play b e5")
    session.dispatch("play w pass")
    assert session.dispatch("genmove b") == "= pass\n\n"  # white passed, black passes: the game is over
    assert chat == ["MALKOVICH: move 3 (B) pass: scripted player, no search",
                    "DISCUSSION: Tabula passes to end the game; by its count the result is B+80.5."]
    chat.clear()
    session.dispatch("undo")
    assert session.dispatch("genmove b") == "= resign\n\n"
    assert chat == ["MALKOVICH: move 3 (B) resign: scripted player, no search",
                    "DISCUSSION: Tabula resigns. Thank you for the game."]


def test_no_chat_without_a_sink_and_a_broken_sink_changes_no_reply() -> None:
    session = Session(player=Player(Scripted(RESIGN), size=9))
    assert session.dispatch("genmove w") == "= resign\n\n"

    def broken(line: str) -> None:
        raise BrokenPipeError("stderr is gone")

    session = Session(player=Player(Scripted(PASS), size=9), chat=broken)
    assert session.dispatch("genmove w") == "= pass\n\n"


# -- GoGui's interrupt ----------------------------------------------------------------------------------------------

def test_interrupt_line_is_a_comment() -> None:
    for line in ("# interrupt", "# interrupt\r\n", "  # INTERRUPT\n"):
        assert is_interrupt(line) and preprocess(line) is None
    assert not is_interrupt("# interrupted") and not is_interrupt("interrupt")


class Piped:
    """``serve`` on real pipes in a thread, so that a test can write lines while a command runs."""

    def __init__(self, session: Session):
        read_in, self._write_in = os.pipe()
        self._read_out, write_out = os.pipe()
        self._stdin = os.fdopen(read_in, "rb", buffering=0)
        self._stdout = os.fdopen(write_out, "wb")
        self.output = b""
        self._thread = threading.Thread(target=serve, args=(session, self._stdin, self._stdout), daemon=True)
        self._thread.start()

    def send(self, line: str) -> None:
        os.write(self._write_in, line.encode() + b"\n")

    def read_until(self, marker: bytes, timeout_s: float = 10.0) -> bytes:
        deadline = time.monotonic() + timeout_s
        while marker not in self.output:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no {marker!r} in {self.output!r}"
            ready, _, _ = select.select([self._read_out], [], [], remaining)
            if ready:
                self.output += os.read(self._read_out, 65536)
        return self.output

    def close(self) -> None:
        os.close(self._write_in)
        self._thread.join(timeout=10)
        self._stdin.close()
        self._stdout.close()
        os.close(self._read_out)


@pytest.fixture
def stream_table() -> CommandTable:
    table = CommandTable()
    table.handlers = dict(TABLE.handlers)

    @table.command("test-stream", streaming=True)
    def test_stream(session: Session) -> Iterator[str]:
        def lines() -> Iterator[str]:
            while not session.interrupt.wait(0.01):
                yield "tick"
        return lines()

    return table


def test_interrupt_line_stops_a_stream_and_gets_no_reply(stream_table: CommandTable) -> None:
    piped = Piped(Session(player=Player(Scripted(), size=9), table=stream_table))
    try:
        piped.send("1 test-stream")
        piped.read_until(b"tick\n")
        piped.send("# interrupt")
        piped.send("2 name")
        output = piped.read_until(b"=2 Tabula\n\n").decode()
    finally:
        piped.close()
    replies = output.split("\n\n")
    assert replies[-1] == "" and replies[-2] == "=2 Tabula" and len(replies) == 3, output
    head, *ticks = replies[0].split("\n")
    assert head == "=1" and ticks and set(ticks) == {"tick"}, output


def test_interrupt_line_ends_a_genmove_search_early(fake_clock) -> None:
    # The search's clock stands still: its 60 s budget never runs out, so only the interrupt can end the genmove
    # (read_until fails after 10 s without the reply).
    picker = SearchPicker(UniformEvaluator(), SearchConfig(visits=0, playouts=0, threads=1),
                                rng=np.random.default_rng(2), play=PlayConfig(resign_winrate=0.0), clock=fake_clock)
    player = Player(picker, size=9, time_config=TimeConfig(lag_buffer_s=0.0, max_time_per_move_s=60.0))
    piped = Piped(Session(player=player))
    try:
        piped.send("1 genmove b")
        deadline = time.monotonic() + 10
        while not picker.search.running:
            assert time.monotonic() < deadline, "the search never started"
            time.sleep(0.01)
        piped.send("# interrupt")
        output = piped.read_until(b"\n\n").decode()
        piped.send("2 name")
        output = piped.read_until(b"=2 Tabula\n\n").decode()
    finally:
        piped.close()
    assert re.fullmatch(r"=1 [A-HJ]\d\n\n=2 Tabula\n\n", output), output
