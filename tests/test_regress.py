"""`tabula regress`: the .tst parser and the scoring, both as gogui-regress has them (a refused test fails, `*`
makes a failure expected, the pattern is a case-sensitive Java regular expression matched against the whole reply,
line breaks included), the exit status, and every shipped tests/regress/*.tst file run against the random player."""
from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from tabula.tools.check.regress import (
    EXPECTED_FAIL,
    FAIL_,
    PASS_,
    UNEXPECTED_PASS,
    Case,
    Setup,
    TstSyntaxError,
    gogui_answer,
    java_pattern,
    main,
    parse_selection,
    parse_tst,
    run_file,
)

ROOT = Path(__file__).resolve().parent.parent
SUITES = sorted((ROOT / "tests" / "regress").glob("*.tst"))
ENGINE = f"{sys.executable} -m tabula.gtp --player random"


@pytest.fixture(autouse=True)
def importable_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """`python -m tabula.gtp` must find the package wherever the runner starts it (in the .tst file's folder)."""
    path = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + (os.pathsep + path if path else ""))


def run_text(tmp_path: Path, text: str, name: str = "inline") -> dict[int, tuple[str, str, bool]]:
    """Run an inline .tst text against the random player: test number -> (verdict, answer, refused)."""
    suite = tmp_path / f"{name}.tst"
    suite.write_text(text)
    report = run_file(suite, ENGINE, report=lambda line: None)
    assert not report.errors, report.errors
    return {o.test.number: (o.verdict, o.answer, o.refused) for o in report.outcomes}


def test_the_shipped_suites_cover_the_rules() -> None:
    assert {p.stem for p in SUITES} >= {"captures", "ko", "superko", "legality", "genmove", "handicap", "scoring"}


@pytest.mark.parametrize("path", SUITES, ids=[p.stem for p in SUITES])
def test_shipped_suite_passes_with_the_random_player(path: Path) -> None:
    """What gogui-regress would report as a clean run: no unexpected failure or pass, no error. An expected
    failure is there only to say that a move is refused (`#? []*`), and the engine must refuse it."""
    lines: list[str] = []
    report = run_file(path, ENGINE, report=lines.append)
    assert report.ok, "\n".join(lines + report.errors)
    assert report.outcomes and not report.count(UNEXPECTED_PASS), "\n".join(lines)
    for outcome in report.outcomes:
        assert outcome.verdict == PASS_ or (outcome.verdict == EXPECTED_FAIL and outcome.refused and
                                            outcome.test.pattern == ""), (outcome, lines)


def test_parse_tst_reads_tests_as_gogui_regress_does() -> None:
    steps = parse_tst("# comment\nboardsize 9\n\n1 play b e5\n#? []\n"
                      "2\tgenmove w\n  #?  [ ! E5|pass ]  \n"
                      "30 final_score\n#? [B\\+.*]*\n"
                      "40 name\n"  # a test without a pattern: it passes when the command is accepted
                      "41 version\n#?\n"  # the same with an empty "#?" line
                      "showboard\n#? [.*X.*]\n"  # a pattern makes a command without a number a test: number -1
                      "-5 name\n"  # a negative number is no number: a setup command, sent as it is
                      "2 undo\n#? []\n")  # numbers may repeat
    assert steps == [
        Setup("boardsize 9", 2),
        Case(1, "1 play b e5", "", False, False, 4),
        Case(2, "2 genmove w", " E5|pass", True, False, 6),  # trimmed inside the brackets, not after the "!"
        Case(30, "30 final_score", "B\\+.*", False, True, 8),
        Case(40, "40 name", None, line=10),
        Case(41, "41 version", None, line=11),
        Case(-1, "showboard", ".*X.*", line=13),
        Setup("-5 name", 15),
        Case(2, "2 undo", "", line=16),
    ]


@pytest.mark.parametrize("text", [
    "#? [pass]\n",  # a pattern at the start
    "1 genmove b\n# a comment between\n#? [pass]\n",  # not right after its command
    "1 genmove b\n\n#? [pass]\n",  # a blank line between
    "1 genmove b\n#? [pass]\n#? [E5]\n",  # two patterns
    "1 genmove b\n#? pass\n",  # no brackets
    "1 genmove b\n#? [pass] # why\n",  # anything after the bracket but "*"
    "1 genmove b\n#? [pass] *\n",
    "1 genmove b\n#? [(]\n",  # not a regular expression
    "1 genmove b\n#? [[A-H[J]]]\n",  # a nested class: Java and Python read it differently
    "1 genmove b\n#? [[A-J&&[^I]]1]\n",  # an intersection, Java only
    "1 genmove b\n#? [a{]\n",  # Java reads "{" as a repetition
    "1 genmove b\n#? [(?P<x>A)1]\n",  # Python only
])
def test_parse_tst_rejects_what_gogui_regress_rejects_or_reads_differently(text: str) -> None:
    with pytest.raises(TstSyntaxError):
        parse_tst(text)


def test_patterns_match_the_whole_answer_case_sensitively() -> None:
    alternatives = Case(1, "1 genmove b", "C3|D4")
    assert alternatives.passes("C3") and alternatives.passes("D4")
    assert not alternatives.passes("c3")  # Java patterns are case-sensitive, and so are GoGui's
    assert not alternatives.passes("C33") and not alternatives.passes("AC3")  # anchored at both ends, per branch
    assert Case(2, "2 genmove b", "(?i)pass").passes("PASS")  # unless the pattern says otherwise
    negated = Case(3, "3 genmove b", "pass|resign", negate=True)
    assert negated.passes("E5") and not negated.passes("pass") and negated.passes("PASS")
    assert Case(4, "4 play b a1", "").passes("") and not Case(4, "4 play b a1", "").passes(" ")


def test_a_refusal_always_fails() -> None:
    for case in (Case(1, "1 play b a1", "illegal move"), Case(2, "2 play b a1", "\\? illegal move"),
                 Case(3, "3 play b a1", "", negate=True), Case(4, "4 play b a1", "E5", negate=True),
                 Case(5, "5 play b a1", None), Case(6, "6 play b a1", ".*", expect_failure=True)):
        assert not case.passes("illegal move", refused=True)
        assert not case.passes("", refused=True)


def test_multi_line_answers_keep_their_line_breaks() -> None:
    answer = gogui_answer(["=7 B1 A2", "C1 E1"])
    assert answer == "B1 A2\nC1 E1"
    assert not Case(7, "7 final_status_list alive", "B1 A2 C1 E1").passes(answer)  # written on one line
    assert Case(7, "", "B1 A2\\nC1 E1").passes(answer)
    assert Case(7, "", "B1 A2\\s+C1 E1").passes(answer)
    assert Case(7, "", "B1.*E1").passes(answer)  # DOTALL: "." matches a line break
    assert Case(7, "", "B1 A2$\\n^C1 E1").passes(answer)  # MULTILINE: ^ and $ at every line
    assert Case(7, "", ".*^C1 E1$").passes(answer) and not Case(7, "", ".*^A2.*").passes(answer)
    assert Case(7, "", "B1 A2\\nC1 E1\\z").passes(answer) and Case(7, "", "\\QB1 A2\\E\\RC1\\hE1").passes(answer)


def test_the_answer_is_the_reply_from_its_first_space_on_trimmed() -> None:
    assert gogui_answer(["=12 E5"]) == "E5"
    assert gogui_answer(["= pass  "]) == "pass"
    assert gogui_answer(["="]) == "" and gogui_answer(["=3"]) == ""
    assert gogui_answer(["? illegal move"]) == "illegal move"
    assert gogui_answer(["= ", "   A B", " 1 . .  1"]) == "A B\n 1 . .  1"  # showboard's first line is empty
    assert gogui_answer(["=5", "two words"]) == "words"  # GoGui cuts at the first space of the whole reply


def test_java_patterns_translate() -> None:
    assert java_pattern("\\d+").fullmatch("12") and not java_pattern("\\d").fullmatch("\u0663")  # ASCII only
    assert java_pattern("a\\Z\\n").fullmatch("a\n") and not java_pattern("a\\z\\n").fullmatch("a\n")
    assert java_pattern("\\Q1+1\\E").fullmatch("1+1") and java_pattern("[\\Q-]\\E]+").fullmatch("-]")
    assert java_pattern("(?<c>[A-T])\\k<c>").fullmatch("DD")
    assert java_pattern("[]A]+").fullmatch("]A") and java_pattern("A{2,}").fullmatch("AAA")


@pytest.mark.slow
def test_verdicts_exit_status_selection_and_sgf_folder(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "games").mkdir()
    (tmp_path / "games" / "two.sgf").write_bytes(b"(;GM[1]FF[4]SZ[9]KM[5.5];B[ee];W[gc])")
    suite = tmp_path / "mixed.tst"
    suite.write_text("loadsgf games/two.sgf\n"  # read from the .tst file's folder, where the engine runs
                     "1 play b e5\n#? [\\? illegal move]\n"  # refused: a failure whatever the pattern
                     "2 play b g7\n#? []*\n"  # refused, expected: an expected failure
                     "3 play b a1\n#? []*\n"  # accepted, expected to fail: an unexpected pass
                     "4 play w b2\n#? [!]\n"  # the empty answer matches "": a failure
                     "5 play w b3\n"  # no pattern, accepted: a pass
                     "6 play w b3\n"  # no pattern, refused: a failure
                     "8 final_status_list dead\n#? [.*]\n"
                     "9 genmove b\n#? [PASS]*\n"  # case-sensitive: "pass" is not "PASS"
                     "showboard\n#? [\\s*A B C D E F G H J\\n.*]\n")  # a test numbered -1
    report = run_file(suite, ENGINE, report=lambda line: None)
    verdicts = {o.test.number: o.verdict for o in report.outcomes}
    assert not report.errors, report.errors
    assert verdicts == {1: FAIL_, 2: EXPECTED_FAIL, 3: UNEXPECTED_PASS, 4: FAIL_, 5: PASS_, 6: FAIL_, 8: PASS_,
                        9: EXPECTED_FAIL, -1: PASS_}
    assert main([str(suite), "--engine", ENGINE]) == 1
    out = capsys.readouterr().out
    assert "mixed:1      FAIL ? illegal move [\\? illegal move]" in out
    assert "mixed:3      PASS  []" in out and "mixed:4      FAIL  [!]" in out
    assert "mixed:6      FAIL ? illegal move []" in out
    assert "3 passed,   3 unexpected failures,   2 expected failures,   1 unexpected passes" in out.splitlines()[-1]
    # a selection runs those numbered tests only; an expected failure or an unexpected pass does not fail the run
    assert main([f"{suite}:2,3,5", "--engine", ENGINE]) == 0
    assert "2 passed,   0 unexpected failures,   1 expected failures,   1 unexpected passes" in \
        capsys.readouterr().out.splitlines()[-1]


def test_a_relative_engine_is_found_from_here_and_run_in_the_tst_folder(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    engine = tmp_path / "engine.sh"
    engine.write_text(f"#!/bin/sh\nexec {sys.executable} -m tabula.gtp --player random\n")
    engine.chmod(engine.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "one.sgf").write_bytes(b"(;GM[1]FF[4]SZ[9];B[ee])")
    suite = tmp_path / "suites" / "where.tst"
    suite.write_text("loadsgf one.sgf\n1 play b e5\n#? []*\n")
    monkeypatch.chdir(tmp_path)
    report = run_file(Path("suites/where.tst"), "./engine.sh", report=lambda line: None)
    assert not report.errors and [o.verdict for o in report.outcomes] == [EXPECTED_FAIL]


def test_refused_setup_and_missing_engine_are_errors(tmp_path: Path) -> None:
    suite = tmp_path / "setup.tst"
    suite.write_text("boardsize 99\n1 name\n#? [Tabula]\n")
    report = run_file(suite, ENGINE, report=lambda line: None)
    assert not report.ok and "boardsize 99" in report.errors[0]
    assert [o.verdict for o in report.outcomes] == [PASS_]
    report = run_file(suite, "/nonexistent/engine", report=lambda line: None)
    assert not report.ok and "engine failed" in report.errors[0]


def test_parse_selection_reads_regress_pike_numbers() -> None:
    assert parse_selection("ko.tst") == (Path("ko.tst"), None)
    assert parse_selection("dir/ko.tst:3,5-7") == (Path("dir/ko.tst"), {3, 5, 6, 7})
