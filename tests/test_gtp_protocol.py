"""GTP framing (a pure function), the command table, error mapping, streaming commands, and a fuzz test."""
from __future__ import annotations

import io
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tabula.gtp.commands import CommandTable, Session, serve
from tabula.gtp.protocol import GtpError, format_failure, format_success, parse_command, preprocess
from tests.conftest import make_session


@pytest.mark.parametrize("line, cleaned", [
    ("name\n", "name"),
    ("  name  ", "name"),
    ("\tplay\tb\td4", "play b d4"),
    ("play b d4 # a comment", "play b d4"),
    ("# only a comment", None),
    ("", None),
    ("   \t \r\n", None),
    ("na\x00me\x1b", "name"),
    ("name\x7f", "name"),
    ("1 name", "1 name"),
])
def test_preprocess(line: str, cleaned: str | None) -> None:
    assert preprocess(line) == cleaned


def test_parse_command() -> None:
    assert parse_command("12 play b d4") == parse_command("12   play  b d4")
    command = parse_command("12 play b d4")
    assert (command.id, command.name, command.args) == ("12", "play", ("b", "d4"))
    assert parse_command("007 name").id == "7" and parse_command("000 name").id == "0"  # as int() would read them
    assert parse_command("9" * 5000).id == "9" * 5000  # any length: int() refuses more than 4,300 digits
    assert parse_command("play b").id is None
    assert parse_command("7").name == ""
    assert parse_command("-1 name").name == "-1"  # ids are non-negative integers only
    assert parse_command("١ name").id is None  # a non-ASCII digit is not an id


def test_format() -> None:
    assert format_success(None) == "=\n\n"
    assert format_success(3, "D4") == "=3 D4\n\n"
    assert format_failure(None, "illegal move") == "? illegal move\n\n"
    assert format_failure(5, "cannot undo") == "?5 cannot undo\n\n"
    assert format_failure("5", "") == format_failure("5", " \n ") == "?5 failed\n\n"
    # a blank line inside a reply would end it early
    assert format_success(None, "a\n\nb\n") == "= a\n \nb\n\n"


def test_table_rejects_duplicates_and_converts_by_type() -> None:
    table = CommandTable()

    @table.command("add")
    def add(session: Session, a: int, b: float = 0.5) -> str:
        return f"{a + b:g}"

    with pytest.raises(ValueError):
        table.command("add")(add)
    session = Session(player=make_session().player, table=table)
    assert session.dispatch("add 1") == "= 1.5\n\n"
    assert session.dispatch("add 1 2") == "= 3\n\n"
    assert session.dispatch("add") == "? syntax error\n\n"
    assert session.dispatch("add 1 2 3") == "? syntax error\n\n"
    assert session.dispatch("add x") == "? syntax error\n\n"
    assert session.dispatch("add 1_0") == "? syntax error\n\n"
    assert table.names() == ["add"]


def test_internal_error_keeps_serving(caplog) -> None:
    table = CommandTable()

    @table.command("boom")
    def boom(session: Session) -> str:
        raise ZeroDivisionError("oops")

    @table.command("fail")
    def fail(session: Session) -> str:
        raise GtpError("a clear message")

    session = Session(player=make_session().player, table=table)
    assert session.dispatch("3 boom") == "?3 internal error\n\n"
    assert "ZeroDivisionError" in caplog.text
    assert session.dispatch("fail") == "? a clear message\n\n"


@pytest.mark.parametrize("bug", [ValueError("a bad value deep in the engine"), KeyError("missing"),
                                 IndexError("list index out of range")])
def test_an_unexpected_exception_in_a_handler_is_an_internal_error_not_the_clients_mistake(bug, caplog) -> None:
    """A plain ValueError (or KeyError, ...) from inside a handler is an engine bug: ``? internal error`` with the
    traceback logged, never ``? syntax error``; and the next command is served as usual."""
    from tabula.gtp.commands import TABLE

    table = CommandTable()
    table.handlers = dict(TABLE.handlers)  # the real commands, and one more that fails

    @table.command("tabula-buggy")
    def buggy(session: Session, size: int) -> str:
        raise bug

    session = Session(player=make_session().player, table=table)
    assert session.dispatch("7 tabula-buggy 9") == "?7 internal error\n\n"
    assert "internal error in tabula-buggy" in caplog.text and "Traceback" in caplog.text
    assert type(bug).__name__ in caplog.text
    assert session.dispatch("tabula-buggy nine") == "? syntax error\n\n"  # its arguments are still checked
    assert session.dispatch("8 play b D4") == "=8\n\n"
    assert session.dispatch("9 name") == "=9 Tabula\n\n"


def test_an_unexpected_exception_over_the_pipes_logs_its_traceback_on_stderr_and_the_loop_goes_on() -> None:
    """``tabula gtp`` itself, with one more command that has a bug: stdout gets only the replies, stderr the
    traceback."""
    code = ("import sys; from tabula.gtp.commands import TABLE; "
            "TABLE.command('tabula-buggy')(lambda session: {}['no such key']); "
            "from tabula.gtp.__main__ import main; sys.exit(main(['--player', 'random']))")
    done = subprocess.run([sys.executable, "-c", code], input=b"1 tabula-buggy\n2 name\n", capture_output=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == b"?1 internal error\n\n=2 Tabula\n\n"
    err = done.stderr.decode()
    assert "internal error in tabula-buggy" in err and "Traceback" in err and "KeyError: 'no such key'" in err


@pytest.mark.parametrize("line, reply", [
    ("boardsize x", "? syntax error"),
    ("boardsize 1", "? unacceptable size"),
    ("boardsize 26", "? unacceptable size"),
    ("komi x", "? syntax error"),
    ("komi nan", "? unacceptable komi"),
    ("play b", "? syntax error"),
    ("play x D4", "? invalid color"),
    ("play b Z99", "? invalid coordinate"),
    ("play b D4\nplay w D4", "? illegal move"),
    ("undo", "? cannot undo"),
    ("fixed_handicap 1", "? invalid number of stones"),
    ("play b D4\nfixed_handicap 2", "? board not empty"),
    ("set_free_handicap D4 D4", "? bad vertex list"),
    ("time_settings 10 x 0", "? syntax error"),
    ("time_settings 10 -5 1", "? syntax error"),
    ("time_left b inf 0", "? syntax error"),
    ("kgs-time_settings fischer 10 5", "? syntax error"),
    ("final_status_list living", "? syntax error"),
    ("loadsgf /no/such/file.sgf", "? cannot load file"),
    ("frobnicate", "? unknown command"),
])
def test_bad_arguments_still_answer_the_specs_messages(session, line: str, reply: str) -> None:
    *setup, last = line.split("\n")
    for earlier in setup:
        assert session.dispatch(earlier).startswith("=")
    assert session.dispatch(last) == reply + "\n\n"


def test_player_bug_is_internal_error(session) -> None:
    import random

    from tabula.engine.play.player import RandomGoPicker

    class Broken(RandomGoPicker):
        name = "broken"

        def pick(self, state, budget_s=None, on_progress=None, progress_interval_s=1.0, spend_all=False):
            return 10_000

        def ownership(self, state):
            raise RuntimeError

    session.player.picker = Broken(random.Random(0))
    assert session.dispatch("genmove b") == "? internal error\n\n"
    assert session.dispatch("play b d4") == "=\n\n"


def test_streaming_command_stops_on_next_input() -> None:
    """A streaming handler writes ``=`` at once, lines until input arrives, then the closing blank line."""
    table = CommandTable()
    closed = threading.Event()

    @table.command("count", streaming=True)
    def count(session: Session, interval: float) -> Iterator[str]:
        if interval <= 0:
            raise GtpError("syntax error")

        def lines() -> Iterator[str]:
            try:
                n = 0
                while not session.interrupt.wait(interval):
                    n += 1
                    yield f"info {n}"
            finally:
                closed.set()

        return lines()

    @table.command("name")
    def name(session: Session) -> str:
        return "x"

    session = Session(player=make_session().player, table=table)

    class SlowInput(io.RawIOBase):
        """Gives the first line, then the second only after a pause, as a user typing would."""

        def __init__(self) -> None:
            self.parts = [b"1 count 0.01\n", b"2 name\n"]

        def readline(self, size: int = -1) -> bytes:
            if not self.parts:
                return b""
            if len(self.parts) == 1:
                time.sleep(0.2)
            return self.parts.pop(0)

        def fileno(self) -> int:
            raise io.UnsupportedOperation

    stdout = io.BytesIO()
    serve(session, SlowInput(), stdout)
    text = stdout.getvalue().decode()
    assert closed.is_set()
    assert re.fullmatch(r"=1\n(info \d+\n)+\n=2 x\n\n", text), text
    # bad arguments fail before anything is written
    assert session.dispatch("count -1") == "? syntax error\n\n"
    # pipelined: the next line is already waiting, so the stream ends at once
    stdout = io.BytesIO()
    serve(session, io.BytesIO(b"count 0.01\nname\n"), stdout)
    assert re.fullmatch(r"=\n(info \d+\n)*\n= x\n\n", stdout.getvalue().decode())


def test_idle_task_runs_between_commands() -> None:
    session = make_session()
    calls = []

    def idle(interrupt: threading.Event) -> None:
        calls.append(1)
        interrupt.wait(5)

    session.idle_task = idle
    stdout = io.BytesIO()
    serve(session, io.BytesIO(b"name\n"), stdout)
    assert stdout.getvalue() == b"= Tabula\n\n"


def test_serve_survives_a_line_that_breaks_the_framing(monkeypatch) -> None:
    """Whatever goes wrong with one line becomes a ``?`` reply; the loop goes on with the next line."""
    from tabula.gtp import commands

    real = commands.parse_command

    def fragile(line: str):
        if "boom" in line:
            raise RuntimeError("framing bug")
        return real(line)

    monkeypatch.setattr(commands, "parse_command", fragile)
    stdout = io.BytesIO()
    assert serve(make_session(), io.BytesIO(b"1 boom\n2 name\n"), stdout) == 0
    assert stdout.getvalue() == b"? internal error\n\n=2 Tabula\n\n"
    # a failure after parsing (here: formatting the reply) still echoes the id
    monkeypatch.setattr(commands, "format_success", lambda *args: 1 / 0)
    stdout = io.BytesIO()
    serve(make_session(), io.BytesIO(b"3 name\n"), stdout)
    assert stdout.getvalue() == b"?3 internal error\n\n"


def test_log_level_default_keeps_the_search_summary_and_an_explicit_level_rules_all() -> None:
    import logging

    from tabula.gtp.__main__ import SEARCH_LOGGER, configure_logging, parse_args

    root, search = logging.getLogger(), logging.getLogger(SEARCH_LOGGER)
    saved = root.level, search.level
    try:
        assert parse_args([]).log_level is None and parse_args(["--log-level", "error"]).log_level == "ERROR"
        configure_logging(None)
        assert root.getEffectiveLevel() == logging.WARNING and search.getEffectiveLevel() == logging.INFO
        configure_logging("ERROR")
        assert search.getEffectiveLevel() == logging.ERROR  # --log-level silences the search summary too
        configure_logging("DEBUG")
        assert search.getEffectiveLevel() == logging.DEBUG
    finally:
        root.setLevel(saved[0])
        search.setLevel(saved[1])


def refused(argv: list[str], capsys) -> str:
    """The one error line ``tabula gtp ARGV`` exits with (argparse's, status 2), after its usage lines."""
    from tabula.gtp.__main__ import parse_args

    with pytest.raises(SystemExit) as exit_:
        parse_args(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return [line for line in err.splitlines() if line.startswith("tabula gtp: error: ")][0]


def test_batches_in_flight_from_the_command_line(capsys) -> None:
    from tabula.gtp.__main__ import build_config, parse_args

    assert build_config(parse_args([])).search.batches_in_flight == 0  # chosen with the network: 2 on a GPU
    assert build_config(parse_args(["--batches-in-flight", "3"])).search.batches_in_flight == 3
    assert refused(["--batches-in-flight", "-3"], capsys) == \
        "tabula gtp: error: argument --batches-in-flight: must be 0 or more, not -3"


def test_network_threads_from_the_command_line(capsys) -> None:
    from tabula.gtp.__main__ import build_config, parse_args

    assert build_config(parse_args([])).net.threads == 0  # chosen with the search threads
    assert build_config(parse_args(["--net-threads", "3"])).net.threads == 3
    assert refused(["--net-threads", "-1"], capsys) == \
        "tabula gtp: error: argument --net-threads: must be 0 or more, not -1"


def test_rollout_mix_and_weights_from_the_command_line(capsys) -> None:
    from tabula.gtp.__main__ import build_config, parse_args

    assert build_config(parse_args([])).search.rollout_mix == 0.0  # the network's value alone
    config = build_config(parse_args(["--rollout-mix", "0.5", "--rollout-weights", "r.npz"]))
    assert config.search.rollout_mix == 0.5 and config.net.rollout_weights == "r.npz"
    for bad in ("-0.5", "1.01", "nan"):
        assert refused(["--rollout-mix", bad], capsys).endswith(f"--rollout-mix: must be in [0, 1], not {bad}")


def test_temperature_moves_from_the_command_line(capsys) -> None:
    """Engine-vs-engine matches vary their games with --temperature-moves (deterministic engines replay one)."""
    from tabula.gtp.__main__ import build_config, parse_args

    assert build_config(parse_args([])).play.temperature_moves == 0  # the most visited move, always
    play = build_config(parse_args(["--temperature-moves", "8", "--temperature", "0.5"])).play
    assert (play.temperature_moves, play.temperature) == (8, 0.5)
    assert build_config(parse_args(["--temperature", "0"])).play.temperature == 0  # the search's own move
    for bad in (["--temperature-moves", "-1"], ["--temperature", "-0.5"], ["--temperature", "nan"]):
        assert refused(bad, capsys).endswith(f"argument {bad[0]}: must be 0 or more, not {bad[1]}")


@pytest.mark.parametrize("argv, error", [
    (["--threads", "-1"], "argument --threads: must be 0 or more, not -1"),
    (["--visits", "-2"], "argument --visits: must be 0 or more (or -1: by board size), not -2"),
    (["--visits", "many"], "argument --visits: invalid int value: 'many'"),
    (["--resign-winrate", "1"], "argument --resign-winrate: must be in [0, 1), or -1: the network's calibrated "
                                "threshold, not 1.0"),
    (["--time", "-2"], "argument --time: must be 0 or more, not -2.0"),
    (["--lag-buffer", "inf"], "argument --lag-buffer: must be 0 or more, not inf"),
    (["--size", "26"], "argument --size: must be 0 or in 2..25, not 26"),
    (["--seed", "-1"], "argument --seed: must be 0 or more (or None: a fresh seed), not -1"),
    (["--provider", "tpu"], "argument --provider: must be one of auto, tensorrt, cuda, cpu, torch, not 'tpu'"),
    (["--batch-size", "-1"], "argument --batch-size: must be 0 or more, not -1"),
    (["--komi", "nan"], "argument --komi: invalid float value: 'nan'"),  # Rules checks it
])
def test_a_bad_flag_value_is_one_argparse_error_line_checked_by_the_configuration(argv, error, capsys) -> None:
    assert refused(argv, capsys) == f"tabula gtp: error: {error}"


def test_a_bad_flag_value_over_the_command_line_exits_2_without_a_traceback() -> None:
    done = subprocess.run([sys.executable, "-m", "tabula.gtp", "--threads", "-1"], input=b"", capture_output=True,
                          timeout=60)
    assert done.returncode == 2 and done.stdout == b""
    assert done.stderr.decode().splitlines()[-1] == "tabula gtp: error: argument --threads: must be 0 or more, not -1"


def test_every_configuration_checks_its_own_fields() -> None:
    from tabula.engine.config import (
        BY_BOARD_SIZE,
        CALIBRATED,
        ConfigError,
        EngineConfig,
        NetConfig,
        PlayConfig,
        SearchConfig,
        TimeConfig,
    )

    for make, field, bad in [(SearchConfig, "visits", -2), (SearchConfig, "threads", -1),
                             (SearchConfig, "rollout_mix", 1.5), (SearchConfig, "dirichlet_alpha", 0.0),
                             (SearchConfig, "noise_weight", float("nan")), (PlayConfig, "resign_winrate", 1.0),
                             (PlayConfig, "resign_winrate", -0.5), (PlayConfig, "temperature", -1.0),
                             (PlayConfig, "resign_consecutive", 0), (TimeConfig, "lag_buffer_s", -0.1),
                             (NetConfig, "max_batch", 0), (NetConfig, "precision", "fp8"),
                             (EngineConfig, "board_size", 1), (EngineConfig, "seed", -3)]:
        with pytest.raises(ConfigError) as error:
            make(**{field: bad})
        assert error.value.field == field and str(error.value).startswith(f"{make.__name__}.{field} must be")
    assert PlayConfig(resign_winrate=CALIBRATED).resign_winrate == CALIBRATED and PlayConfig(resign_winrate=0.0)
    assert SearchConfig(visits=0, playouts=0) and EngineConfig(board_size=0) and EngineConfig(board_size=25)
    assert SearchConfig(visits=BY_BOARD_SIZE).visits == BY_BOARD_SIZE


def test_the_engines_default_visits_go_by_board_size_and_a_given_number_holds_on_every_size():
    """The entry point's budget: 400 on 19x19 and larger, 400·361/N² on smaller boards up to 1,600 (about the time
    of a 19x19 move); --visits N is N everywhere, and the library's SearchConfig keeps its flat 400."""
    from tabula.engine.config import BY_BOARD_SIZE, EngineConfig, SearchConfig
    from tabula.engine.rules.game import GameState
    from tabula.gtp.__main__ import build_config, parse_args

    default = build_config(parse_args([])).search
    assert default.visits == BY_BOARD_SIZE == EngineConfig().search.visits
    boards = {n: GameState(n) for n in (5, 9, 13, 19, 25)}
    assert [default.visits_for(boards[n]) for n in (5, 9, 13, 19, 25)] == [1600, 1600, 854, 400, 400]
    given = build_config(parse_args(["--visits", "100"])).search
    assert [given.visits_for(boards[n]) for n in (9, 13, 19)] == [100, 100, 100]
    assert build_config(parse_args(["--visits", "0"])).search.visits_for(boards[9]) == 0
    assert SearchConfig().visits_for(boards[9]) == 400


@pytest.mark.parametrize("content", [None, b"not an npz at all"])
@pytest.mark.parametrize("mix", ["0.5", "0"])
def test_a_missing_or_malformed_rollout_weights_file_is_a_clear_error_at_start_up(tmp_path, capsys, content, mix):
    """Also at λ = 0: the named file still judges dead stones, and a user who names one wants to know at once."""
    from tabula.gtp.__main__ import main

    path = tmp_path / "rollout.npz"
    if content is not None:
        path.write_bytes(content)
    network = str(Path(__file__).resolve().parent.parent / "weights" / "tabula-4x32-rl9d.onnx")
    assert main(["--weights", network, "--rollout-mix", mix, "--rollout-weights", str(path)]) == 1
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("tabula gtp: ") and str(path) in error and "rollout weights file" in error


REPLY = re.compile(r"(=|\?)\d*( [^\n]*)?(\n[^\n]+)*\n\n")


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(
    st.text(max_size=30),
    st.sampled_from(["play", "genmove", "boardsize", "komi", "undo", "loadsgf", "time_left", "final_score",
                     "set_free_handicap", "fixed_handicap", "kgs-time_settings", "final_status_list", "showboard"])
    .flatmap(lambda c: st.lists(st.sampled_from(["b", "w", "x", "d4", "A1", "pass", "9", "-1", "1e400", "nan",
                                                 "2", "25", "26", "abc", "\x00", "#"]), max_size=4)
             .map(lambda args: " ".join([c, *args])))), min_size=1, max_size=8))
def test_fuzz_replies_are_well_formed(lines: list[str]) -> None:
    session = make_session(size=5)
    for line in lines:
        if line.startswith("loadsgf"):
            continue  # would read files named by the fuzzer
        reply = session.dispatch(line)
        if reply:
            assert REPLY.fullmatch(reply), (line, reply)
        if session.quit:
            break


def test_cputime_counts_this_process_cpu_seconds(session) -> None:
    first = float(session.dispatch("cputime")[2:].strip())
    deadline = time.process_time() + 0.05
    while time.process_time() < deadline:
        pass
    second = float(session.dispatch("cputime")[2:].strip())
    assert 0.0 <= first and second >= first + 0.04


def test_time_settings_0_1_0_means_no_time_limit(session) -> None:
    from tabula.engine.play.timecontrol import NONE
    assert session.dispatch("time_settings 300 0 0") == "=\n\n"
    assert session.dispatch("time_settings 0 1 0") == "=\n\n"
    assert session.player.time_settings.kind == NONE
