"""GTP behaviour as transcripts: tests/gtp/*.gtp replayed through the real loop, pipelined, with a fixed seed.

Transcript format: ``> text`` is an input line sent as written; ``>e text`` is sent after decoding Python escapes
(``\\t``, ``\\x01``, ``\\xff`` for invalid UTF-8). The lines after an input, up to the next input, are its
expected reply without the closing blank line; ``*`` matches any text (random moves). An input followed by no
reply lines must produce no reply. ``{tmp}`` in an input is a folder holding the SGF files of ``SGF_FILES``.
Lines starting with ``#`` are comments (no reply starts with ``#``). The engine is the random player, or with a line
``# weights: FILE`` (a file of weights/) the search player on that network.
"""
from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tabula.gtp.commands import Session, serve
from tests.conftest import SEED, make_session

TRANSCRIPTS = sorted((Path(__file__).parent / "gtp").glob("*.gtp"))
ROOT = Path(__file__).resolve().parent.parent

SGF_FILES = {
    "game.sgf": b"(;GM[1]FF[4]SZ[9]KM[5.5]PB[Alice]PW[Bob];B[ee];W[gc];B[cg];W[];B[dc])",
    "handicap.sgf": b"(;GM[1]FF[4]SZ[9]KM[0.5]HA[2]AB[cc][gg];W[ee];B[ce])",
    "setup.sgf": b"(;GM[1]FF[4]SZ[5]KM[0]AB[aa][bb]AW[cc]PL[W])",
    "garbage.sgf": b"this is not an sgf file",
    "illegal.sgf": b"(;GM[1]FF[4]SZ[9];B[ee];W[ee])",
    "offboard.sgf": b"(;GM[1]FF[4]SZ[9];B[ee];W[zz])",
    "huge.sgf": b"(;GM[1]FF[4]SZ[31];B[ee])",
    "bad_komi.sgf": b"(;GM[1]FF[4]SZ[9]KM[lots];B[ee])",
    "empty.sgf": b"",
}


@dataclass
class Exchange:
    line: bytes
    expected: list[str]  # reply lines; empty: no reply at all


def parse_transcript(text: str, tmp: str = "") -> list[Exchange]:
    exchanges: list[Exchange] = []
    for raw in text.splitlines():
        if raw.startswith(">e ") or raw == ">e":
            body = raw[3:].replace("{tmp}", tmp)
            exchanges.append(Exchange(body.encode("latin-1").decode("unicode_escape").encode("latin-1"), []))
        elif raw.startswith("> ") or raw == ">":
            exchanges.append(Exchange(raw[2:].replace("{tmp}", tmp).encode("utf-8"), []))
        elif not exchanges or raw.startswith("#"):
            continue  # comments
        elif raw.strip():
            exchanges[-1].expected.append(raw)
    return exchanges


def matches(expected: str, actual: str) -> bool:
    pattern = ".*".join(re.escape(part) for part in expected.split("*"))
    return re.fullmatch(pattern, actual, flags=re.DOTALL) is not None


def _normalise(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.split("\n"))


def transcript_session(text: str) -> Session:
    """The random player, or the search player on the network a ``# weights: FILE`` line names."""
    for line in text.splitlines():
        if line.startswith("# weights: "):
            from tabula.engine.config import EngineConfig, NetConfig
            from tabula.engine.play.player import Player
            from tabula.gtp.__main__ import load_extensions

            load_extensions()
            weights = ROOT / "weights" / line[len("# weights: "):].strip()
            config = EngineConfig(seed=SEED, board_size=19, player="search",
                                  net=NetConfig(weights=(str(weights),), threads=1, provider="cpu"))
            return Session(player=Player.from_config(config), config=config)
    return make_session()


def run_transcript_text(text: str, tmp: str = "") -> list[tuple[str, str, str]]:
    """Replay a transcript through ``serve`` in one pipelined write; (input, expected, actual) per reply."""
    exchanges = parse_transcript(text, tmp)
    stdin = io.BytesIO(b"".join(e.line + b"\n" for e in exchanges))
    stdout = io.BytesIO()
    serve(transcript_session(text), stdin, stdout)
    replies = stdout.getvalue().decode("utf-8").split("\n\n")
    assert replies[-1] == "", "output must end with a blank line"
    replies = replies[:-1]
    expected = [e for e in exchanges if e.expected]
    assert len(replies) == len(expected), f"{len(replies)} replies to {len(expected)} expected:\n" + \
        "\n---\n".join(replies)
    return [(e.line.decode("latin-1"), _normalise("\n".join(e.expected)), _normalise(actual))
            for e, actual in zip(expected, replies)]


@pytest.fixture
def sgf_dir(tmp_path: Path) -> Path:
    for name, data in SGF_FILES.items():
        (tmp_path / name).write_bytes(data)
    return tmp_path


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=[p.stem for p in TRANSCRIPTS])
def test_transcript(path: Path, sgf_dir: Path) -> None:
    for line, expected, actual in run_transcript_text(path.read_text(), str(sgf_dir)):
        assert matches(expected, actual), f"> {line}\nexpected:\n{expected}\nactual:\n{actual}"


def test_transcripts_exist() -> None:
    assert {p.stem for p in TRANSCRIPTS} >= {"admin", "setup", "play", "handicap", "score", "time", "sgf"}


def test_subprocess_end_to_end_pipelined() -> None:
    """The real ``python -m tabula.gtp``: pipelined input with ids, comments and invalid UTF-8; clean exit on quit."""
    script = (b"1 boardsize 9\n# comment\n2 komi 6.5\n3 play b e5\n4 genmove w\n5 play b e5\n"
              b"\xff\xfe garbage\n6 undo\n7 undo\n8 undo\n9 showboard\n10 quit\nname\n")
    result = subprocess.run([sys.executable, "-m", "tabula.gtp", "--player", "random", "--seed", "3"], input=script,
                            capture_output=True, timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr.decode()
    replies = result.stdout.decode().split("\n\n")
    assert replies[-1] == ""
    replies = replies[:-1]
    assert replies[:3] == ["=1", "=2", "=3"]
    assert re.fullmatch(r"=4 [A-HJ][1-9]|=4 pass", replies[3])
    assert replies[4] == "?5 illegal move"
    assert replies[5] == "? unknown command"
    assert replies[6:9] == ["=6", "=7", "?8 cannot undo"]
    assert replies[9].startswith("=9 \n   A B C D E F G H J")
    assert replies[10] == "=10"
    assert len(replies) == 11


@pytest.mark.slow  # a few seconds: the quick suite stays under 3 minutes
def test_rollout_mix_plays_legal_moves_on_9x9() -> None:
    """``tabula gtp --rollout-mix 0.5``: AlphaGo's mixed evaluation with the shipped network and rollout policy
    plays legal moves."""
    from tabula.engine.rules.coords import parse_vertex
    from tabula.engine.rules.game import GameState

    moves = 4
    script = "boardsize 9\nclear_board\n" + "".join(f"genmove {'bw'[i % 2]}\n" for i in range(moves)) + \
        "name\nquit\n"
    result = subprocess.run([sys.executable, "-m", "tabula.gtp", "--rollout-mix", "0.5", "--visits", "16", "--threads",
                             "1", "--seed", "5"], input=script.encode(), capture_output=True, timeout=120, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr.decode()
    replies = result.stdout.decode().split("\n\n")
    assert replies[:2] == ["=", "="] and replies[-1] == ""
    state = GameState(9)
    for reply in replies[2: 2 + moves]:
        assert reply.startswith("= "), reply
        move = parse_vertex(reply[2:], 9)
        assert state.legal(move), reply
        state.play(move)
    assert replies[2 + moves:-1] == ["= Tabula", "="]


def test_subprocess_exits_on_eof() -> None:
    result = subprocess.run([sys.executable, "-m", "tabula.gtp", "--seed", "1"], input=b"name\n", capture_output=True,
                            timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0
    assert result.stdout == b"= Tabula\n\n"
