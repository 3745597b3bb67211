"""GTP fuzzing, CI size: 3,000 generated lines against one ``python -m tabula.gtp --player random`` over pipes, every
reply checked, then a known game. The 100,000-line run is ``python -m tabula.tools.check.fuzz_gtp``
(docs/RELIABILITY.md).

The fuzzer's own pieces (what reply a line should get, what a well-formed reply is) are tested here too, because
the storm is only as good as its checks.
"""
from __future__ import annotations

import random
import sys

import pytest

from tabula.tools.check.fuzz_gtp import KNOWN_BUGS, LineGenerator, check_reply, expected_reply, run_fuzz, write_junk_sgf
from tests.conftest import SEED, make_session

CI_LINES = 3000


@pytest.mark.slow  # a few seconds: the quick suite stays under 3 minutes
def test_storm_of_3000_lines_leaves_a_working_engine() -> None:
    report = run_fuzz(CI_LINES, SEED, skip_kinds=KNOWN_BUGS, reply_timeout_s=15.0)
    assert report.ok, report.summary()
    assert report.lines == CI_LINES
    assert report.replies["="] > 500 and report.replies["?"] > 500 and report.replies["none"] > 0, report.summary()
    assert len(report.by_kind) >= 15, report.summary()


@pytest.mark.parametrize("line, wanted", [
    (b"name", (True, None)),
    (b"12 name", (True, "12")),
    (b"007 name", (True, "7")),
    (b"0 name", (True, "0")),
    (b"12", (True, "12")),
    (b"", (False, None)),
    (b"   \t ", (False, None)),
    (b"# 12 name", (False, None)),
    (b"12 name # comment", (True, "12")),
    (b"\x01\x02\x7f", (False, None)),
    (b"1\x002 name", (True, "12")),  # a control character inside the id is dropped, joining the digits
    (b"1\tname", (True, "1")),
    (b"\xff name", (True, None)),  # invalid UTF-8 becomes U+FFFD, a command name
    (b"\xd9\xa1 name", (True, None)),  # Arabic-Indic digit one: not an id
    (b"-1 name", (True, None)),
    (b"+1 name", (True, None)),
])
def test_expected_reply_follows_the_spec(line: bytes, wanted: tuple[bool, str | None]) -> None:
    assert expected_reply(line) == wanted


@pytest.mark.parametrize("reply, command_id, problem", [
    ([b"= Tabula"], None, None),
    ([b"=12 Tabula"], "12", None),
    ([b"=012 x"], "12", None),
    ([b"?3 illegal move"], "3", None),
    ([b"= ", b"  A B", b" 1 . ."], None, None),
    ([b"=12"], "12", None),
    ([], None, "empty reply"),
    ([b"Tabula"], None, "does not start"),
    ([b"=1 x"], "12", "reply id 1"),
    ([b"= x"], "12", "reply id None"),
    ([b"=12 x"], None, "reply id 12"),
    ([b"?"], None, "without a message"),
    ([b"=12x"], "12", "does not start"),
    ([b"= \xff"], None, "not UTF-8"),
])
def test_check_reply(reply: list[bytes], command_id: str | None, problem: str | None) -> None:
    found = check_reply(reply, command_id)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


def test_generator_covers_every_command_and_is_reproducible(tmp_path) -> None:
    commands = make_session().table.names()
    junk = write_junk_sgf(tmp_path, random.Random(1))

    def lines(seed: int) -> list[bytes]:
        generator = LineGenerator(random.Random(seed), commands, junk)
        return [generator.next().data for _ in range(5000)]

    first = lines(SEED)
    assert first == lines(SEED)
    sent = b"\n".join(first)
    missing = [c for c in commands if c != "quit" and c.encode() not in sent]
    assert not missing
    assert all(b"\n" not in line for line in first)


@pytest.mark.slow  # a few seconds: the quick suite stays under 3 minutes
def test_generator_never_writes_outside_its_directory(tmp_path) -> None:
    """printsgf FILE writes FILE: the fuzzer may only name files in the engine's scratch directory."""
    commands = make_session().table.names()
    generator = LineGenerator(random.Random(SEED), commands, write_junk_sgf(tmp_path, random.Random(1)))
    for _ in range(20000):
        words = generator.next().data.split()
        if b"printsgf" in words[:2]:
            target = words[words.index(b"printsgf") + 1:]
            assert not target or (b".." not in target[0] and (not target[0].startswith(b"/")
                                                              or target[0] == b"/dev/null")), words


def test_an_id_of_5000_digits_gets_a_reply() -> None:
    """Ids are kept as digit strings: any length is echoed (Python's int() refuses more than 4,300 digits)."""
    session = make_session()
    reply = session.dispatch("9" * 5000 + " name")
    assert reply.startswith(("=", "?")) and reply.endswith("\n\n")
    assert reply == "=" + "9" * 5000 + " Tabula\n\n"
    assert session.dispatch("000" + "7" * 5000 + " name") == "=" + "7" * 5000 + " Tabula\n\n"
    assert session.dispatch("1 name") == "=1 Tabula\n\n"


def test_the_process_survives_an_id_of_5000_digits(tmp_path) -> None:
    import subprocess

    from tabula.tools.check.fuzz_gtp import ROOT

    lines = b"9" * 5000 + b" name\n1 name\n"
    done = subprocess.run([sys.executable, "-m", "tabula.gtp", "--player", "random"], input=lines, capture_output=True,
                          cwd=tmp_path, env={"PYTHONPATH": str(ROOT)}, timeout=30)
    assert b"=1 Tabula\n\n" in done.stdout
    assert done.stdout.startswith(b"=" + b"9" * 5000 + b" Tabula\n\n")
