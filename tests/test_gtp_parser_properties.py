"""Properties of the GTP framing in gtp/protocol.py, for any input: ``preprocess`` and ``parse_command`` never
raise, ids are parsed exactly when the first word is ASCII digits, comments and control characters go, formatting
and parsing round-trip, and a reply always ends at its one empty line. The dispatcher on top of them answers any
line with nothing (blank or comment) or exactly one well-formed reply.
"""
from __future__ import annotations

import re
import string

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from tabula.gtp.protocol import Command, format_failure, format_success, parse_command, preprocess
from tests.conftest import make_session

CONTROL = [chr(c) for c in range(32) if c not in (9, 10)] + [chr(127)]

any_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=200)
gtp_ish = st.lists(st.sampled_from(["play", "b", "w", "D4", "1", "007", " ", "\t", "#", "\n", "\r", "\x00", "\x7f",
                                    "\x1b", "name", "é", "\u00a0", "\ufffd", "12", "-3", "pass"]),
                   max_size=30).map("".join)
lines = st.one_of(any_text, gtp_ish)
word = st.text(alphabet=string.ascii_letters + string.digits + "-_.+=?!%&*()[]{}<>/\\'\"é日本", min_size=1,
               max_size=12)
name_word = word.filter(lambda w: not w.isdigit())
spaces = st.text(alphabet=" \t", min_size=1, max_size=4)


def _words(cleaned: str) -> list[str]:
    """The spec's words of a preprocessed line: separated by spaces only (tabs are spaces by then)."""
    return [w for w in cleaned.split(" ") if w]


@given(lines)
@example("9" * 4300 + " name")
@example("9" * 20000 + " name")
@example("1 name # comment\r")
def test_preprocess_and_parse_never_raise(line: str) -> None:
    cleaned = preprocess(line)
    if cleaned is None:
        return
    command = parse_command(cleaned)
    assert isinstance(command, Command)
    assert command.id is None or (command.id.isascii() and command.id.isdigit())


@given(st.binary(max_size=300))
def test_any_bytes_decoded_as_the_loop_does_parse(data: bytes) -> None:
    cleaned = preprocess(data.decode("utf-8", errors="replace"))
    if cleaned is not None:
        parse_command(cleaned)


@given(lines)
def test_preprocess_removes_comments_and_control_characters(line: str) -> None:
    cleaned = preprocess(line)
    if cleaned is None:
        assert not line.split("#", 1)[0].translate({ord(c): None for c in CONTROL}).strip(" \t\n")
        return
    assert cleaned == cleaned.strip(" ") and cleaned
    assert "#" not in cleaned and "\t" not in cleaned and "\n" not in cleaned
    assert not any(c in cleaned for c in CONTROL)


@given(lines)
def test_preprocess_is_idempotent(line: str) -> None:
    cleaned = preprocess(line)
    assert cleaned is None or preprocess(cleaned) == cleaned


@given(lines, st.text(max_size=50))
def test_everything_after_a_hash_is_ignored(line: str, comment: str) -> None:
    assume("#" not in line)
    assert preprocess(line + "#" + comment) == preprocess(line)


@given(lines, st.lists(st.tuples(st.integers(0, 300), st.sampled_from(CONTROL)), max_size=10))
def test_control_characters_anywhere_change_nothing(line: str, inserts: list[tuple[int, str]]) -> None:
    noisy = line
    for position, char in inserts:
        noisy = noisy[:position] + char + noisy[position:]
    assert preprocess(noisy) == preprocess(line)


@given(lines)
def test_tab_is_a_space(line: str) -> None:
    assert preprocess(line.replace(" ", "\t")) == preprocess(line.replace("\t", " "))


@given(lines)
@example("0" * 3 + "9" * 5000 + " name")
def test_an_id_is_parsed_iff_the_first_word_is_ascii_digits(line: str) -> None:
    cleaned = preprocess(line)
    assume(cleaned is not None)
    words = _words(cleaned)
    first = words[0]
    command = parse_command(cleaned)
    if first.isascii() and first.isdigit():
        assert command.id == (first.lstrip("0") or "0")
        if len(first) <= 4300:
            assert command.id == str(int(first))
        assert [command.name, *command.args] == (words[1:] or [""])
    else:
        assert command.id is None
        assert [command.name, *command.args] == words


@given(st.one_of(st.none(), st.integers(0, 10 ** 30)), name_word, st.lists(word, max_size=6), st.lists(spaces,
       min_size=8, max_size=8), st.text(max_size=20))
def test_a_command_round_trips(command_id: int | None, name: str, args: list[str], gaps: list[str],
                               comment: str) -> None:
    words = ([str(command_id)] if command_id is not None else []) + [name, *args]
    line = gaps[0]
    for i, w in enumerate(words):
        line += w + gaps[(i + 1) % len(gaps)]
    line += "#" + comment + "\n"
    expected_id = None if command_id is None else str(command_id)
    assert parse_command(preprocess(line)) == Command(expected_id, name, tuple(args))


_HEAD = re.compile(r"^([=?])(\d*)( |\n|$)")


@given(st.one_of(st.none(), st.integers(0, 10 ** 20)), any_text)
def test_a_reply_ends_at_its_only_empty_line(command_id: int | None, text: str) -> None:
    for reply, mark in ((format_success(command_id, text), "="), (format_failure(command_id, text), "?")):
        assert reply.endswith("\n\n")
        assert "\n\n" not in reply[:-2]
        head = _HEAD.match(reply)
        assert head is not None and head.group(1) == mark
        assert head.group(2) == ("" if command_id is None else str(command_id))
        if mark == "?" and text.strip():
            assert reply[len(head.group(0)):].strip(), "a failure always says why"


@given(st.text(alphabet=string.ascii_letters + string.digits + " .+-", min_size=1, max_size=80))
def test_a_one_line_reply_keeps_its_text(text: str) -> None:
    assume(text.strip() == text)
    assert format_success(5, text) == f"=5 {text}\n\n"
    assert format_failure(None, text) == f"? {text}\n\n"


@pytest.fixture(scope="module")
def session():
    return make_session(size=9)


_NAMES = [n for n in make_session().table.names()
          if n not in ("final_score", "final_status_list", "kgs-genmove_cleanup", "kgs-game_over", "quit",
                       "loadsgf", "printsgf")]


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(st.one_of(st.none(), st.integers(0, 10 ** 6)), st.sampled_from(_NAMES),
       st.lists(st.one_of(word, st.sampled_from(["nan", "inf", "-1", "0", "1e999", "b", "w", "A1", "T19", "pass"])),
                max_size=5),
       st.text(alphabet=" \t\x01\x7f#", max_size=3))
def test_the_dispatcher_answers_any_command_once(session, command_id: int | None, name: str, args: list[str],
                                                 noise: str) -> None:
    line = " ".join(([str(command_id)] if command_id is not None else []) + [name, *args]) + noise
    reply = session.dispatch(line)
    if preprocess(line) is None:
        assert reply == ""
        return
    assert reply.endswith("\n\n") and "\n\n" not in reply[:-2], reply
    head = _HEAD.match(reply)
    assert head is not None, reply
    assert head.group(2) == ("" if command_id is None else str(command_id))
    assert "internal error" not in reply, line


def test_only_space_and_tab_separate_words() -> None:
    assert parse_command(preprocess("1\u00a0name")) == Command(None, "1\u00a0name", ())
    assert preprocess("\u3000") == "\u3000"


def test_a_failure_with_a_blank_message_still_says_why() -> None:
    assert format_failure(3, " \n ").strip() != "?3"
