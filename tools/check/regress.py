"""`tabula regress`: run GNU Go style ``.tst`` regression files against a GTP engine and score them exactly as
GoGui's ``gogui-regress`` does.

Layer: tools (imports tools.compete.gtp_client only). The format is GNU Go's (``regression/*.tst``):

    # a comment
    boardsize 9                  <- a command without a number: sent for its effect
    play black E5
    10 genmove white             <- a numbered command is a test: the number is the test's name
    #? [!E5|resign]              <- its expected answer, on the very next line, as a regular expression

The rules are gogui-regress's (``net.sf.gogui.tools.regress.Regress``: ``handleLine``, ``handleTest``,
``handleLastResponse``; replies read by ``net.sf.gogui.gtp.GtpClient``):

- The answer is the reply as the engine wrote it, status and id included, from its first space on, with leading
  and trailing whitespace (every character up to U+0020) removed: ``=12 E5`` -> ``E5``; an empty ``=`` -> ``""``.
  A multi-line reply keeps its line breaks, so a pattern must match them (``\\n``, ``\\s+``, ``.*``).
- The pattern is a Java regular expression, compiled with ``MULTILINE | DOTALL``, case-sensitive, and must match
  the whole answer (``Matcher.matches()``): ``pass`` does not match ``PASS``, ``C3|D4`` does not match ``C33``.
  ``[!pattern]`` passes when the answer does not match; the text between the brackets is trimmed first.
- A ``?`` reply to a test is a failure whatever the pattern (``[!...]`` included): a refusal can never pass. A
  ``*`` right after the closing bracket marks an expected failure, so ``#? []*`` says "this command is refused"
  (``fail``), and an unexpected ``PASS`` then means the engine accepted it.
- A numbered command whose next line is not a ``#?`` line (or is an empty ``#?``) is a test too: it passes when
  the reply is ``=``. A ``#?`` line after a command without a number makes that command a test (its number is
  -1). A ``#?`` line that does not follow a command at once (a comment or blank line in between) and a pattern
  without its brackets are errors in the file. Test numbers may repeat.
- A refused command that is not a test is an error (gogui-regress's "Error" column); the run goes on.
- The engine runs in the ``.tst`` file's folder, so ``loadsgf games/x.sgf`` (and any other relative path the
  engine is given) is read from there. A relative program path (the first word of ``--engine``) that exists from
  where the runner starts is made absolute first; other relative paths in ``--engine`` are the engine's own
  business, read from the ``.tst`` file's folder. Each file gets a fresh engine.

Java and Python regular expressions differ; ``java_pattern`` translates what can be translated (``\\z``, ``\\Z``,
``\\Q...\\E``, ``\\h``, ``\\v``, ``\\R``, ``\\e``, ``(?<name>...)``, ASCII-only ``\\d \\w \\s`` and case folding)
and calls anything else that Java reads differently (a ``[`` or ``&&`` inside a character class, ``{`` that is
not a repetition, ``(?P...)``) a bad pattern. What is not gogui-regress's: ``FILE.tst:1,4-7`` runs only those
tests (setup commands, and tests without a number, always run), as GNU Go's ``regress.pike`` does; and the exit
status is 1 on any unexpected failure or error, where gogui-regress's counts only failed tests that have a
pattern. gogui-regress's HTML output and its ``name``/``version``/``cputime`` queries are left out.

Usage:
    tabula regress tests/regress/*.tst --engine "python3 -m tabula.gtp --player random"
    tabula regress tests/regress/ko.tst:3,5-7 --engine "/usr/games/gnugo --mode gtp" --verbose
"""
from __future__ import annotations

import argparse
import re
import sys
import time
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable, Sequence

from tabula.tools.compete.gtp_client import EngineError, GtpEngine, GtpFailure, split_command

DEFAULT_ENGINE = "python3 -m tabula.gtp"
DEFAULT_TIMEOUT_S = 60.0

_JAVA_SPACE = "".join(chr(code) for code in range(0x21))  # what java.lang.String.trim() removes


def java_trim(text: str) -> str:
    return text.strip(_JAVA_SPACE)


# -- Java regular expressions ----------------------------------------------------------------------------------------

_BREAKS = "\\n\\x0b\\f\\r\\x85\\u2028\\u2029"  # Java's \v, and its line terminators
_HORIZONTAL = " \\t\\xa0\\u1680\\u180e\\u2000-\\u200a\\u202f\\u205f\\u3000"  # Java's \h
_OUTSIDE = {"z": "\\Z", "Z": f"(?=(?:\\r\\n|[{_BREAKS}])?\\Z)", "h": f"[{_HORIZONTAL}]", "H": f"[^{_HORIZONTAL}]",
            "v": f"[{_BREAKS}]", "V": f"[^{_BREAKS}]", "R": f"(?:\\r\\n|[{_BREAKS}])", "e": "\\x1b"}
_INSIDE = {"h": _HORIZONTAL, "v": _BREAKS, "e": "\\x1b"}
_REPETITION = re.compile(r"\{\d+(?:,\d*)?\}")
_NAMED = re.compile(r"\(\?<([A-Za-z][A-Za-z0-9]*)>")
_BACKREFERENCE = re.compile(r"\\k<([A-Za-z][A-Za-z0-9]*)>")


@lru_cache(maxsize=256)
def java_pattern(pattern: str) -> re.Pattern[str]:
    """``pattern`` read as ``java.util.regex.Pattern.compile(pattern, MULTILINE | DOTALL)`` reads it, as a Python
    pattern (use it with ``fullmatch``, as Java's ``matches()``). Raises re.error where Java would refuse the
    pattern or where Python cannot be made to read it the same way."""
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            escape = pattern[i + 1]
            if escape == "Q":  # \Q...\E quotes everything in between
                end = pattern.find("\\E", i + 2)
                end = len(pattern) if end < 0 else end
                out.append(re.escape(pattern[i + 2:end]))
                i = end + 2
                continue
            reference = _BACKREFERENCE.match(pattern, i)
            if reference and not in_class:
                out.append(f"(?P={reference.group(1)})")
                i = reference.end()
                continue
            table = _INSIDE if in_class else _OUTSIDE
            if in_class and escape in "HVR":
                raise re.error(f"\\{escape} inside a character class has no Python equivalent", pattern, i)
            out.append(table.get(escape, pattern[i:i + 2]))
            i += 2
            continue
        if in_class:
            if ch == "[" or pattern.startswith("&&", i):
                raise re.error("Java reads '[' and '&&' inside a character class as a nested class or an "
                               "intersection; escape them", pattern, i)
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            start = i + 1 + (pattern.startswith("^", i + 1))
            if pattern.startswith("]", start):  # a "]" first in a class is that character, in Java as in Python
                start += 1
            out.append(pattern[i:start])
            i = start
            continue
        elif ch == "{":
            repetition = _REPETITION.match(pattern, i)
            if not repetition or not out:
                raise re.error("Java reads '{' as a repetition count; escape it", pattern, i)
            out.append(repetition.group())
            i = repetition.end()
            continue
        elif pattern.startswith("(?", i):
            named = _NAMED.match(pattern, i)
            if named:
                out.append(f"(?P<{named.group(1)}>")
                i = named.end()
                continue
            if pattern[i + 2:i + 3] in ("P", "#", "("):
                raise re.error("Java has no (?P...), (?#...) or (?(...)...)", pattern, i)
        out.append(ch)
        i += 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # Python's "possible nested set" and the like
        try:
            return re.compile("".join(out), re.MULTILINE | re.DOTALL | re.ASCII)
        except FutureWarning as warning:
            raise re.error(f"Java reads this differently: {warning}", pattern) from None


# -- the file --------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    """A test: a numbered command, or any command with a ``#?`` pattern line after it."""

    number: int  # the command's number; -1 for a command without one
    command: str  # the line as sent, number included (as gogui-regress sends it)
    pattern: str | None  # the regular expression between the brackets, "!" removed; None: no pattern
    negate: bool = False  # [!pattern]
    expect_failure: bool = False  # "*" after the brackets
    line: int = 0  # where the command is, 1-based

    @property
    def expected(self) -> str:
        """The expectation as gogui-regress prints it."""
        return "" if self.pattern is None else ("!" if self.negate else "") + self.pattern

    def passes(self, answer: str, refused: bool = False) -> bool:
        """gogui-regress's verdict on a reply (before ``*``): a refusal fails; an answer must match the whole
        pattern, or for ``[!...]`` must not."""
        if refused:
            return False
        if self.pattern is None:
            return True
        return (java_pattern(self.pattern).fullmatch(answer) is not None) != self.negate


@dataclass(frozen=True)
class Setup:
    """A command without a number and without a pattern: sent for its effect; a refusal is an error."""

    command: str
    line: int


Step = Case | Setup


class TstSyntaxError(ValueError):
    pass


def _number(line: str) -> int | None:
    """gogui-regress's ``getId``: the word before the first space as a Java int (a sign allowed), None where
    there is none or it is negative."""
    head, space, _ = line.partition(" ")
    if not space or not re.fullmatch(r"[+-]?\d+", head):
        return None
    number = int(head)
    return number if 0 <= number < 2 ** 31 else None


def _pattern(body: str, index: int) -> tuple[str, bool, bool]:
    """``[pattern]`` or ``[pattern]*`` (trimmed) -> the pattern, negated, expected to fail (``handleTest``)."""
    expect_failure = body.endswith("*")
    if expect_failure:
        body = body[:-1]
    if not body.startswith("[") or not body.endswith("]"):
        raise TstSyntaxError(f"line {index}: expected '#? [pattern]' or '#? [pattern]*'")
    inner = java_trim(body[1:-1])
    negate = inner.startswith("!")
    pattern = inner[1:] if negate else inner
    try:
        java_pattern(pattern)
    except re.error as error:
        raise TstSyntaxError(f"line {index}: bad pattern {inner!r}: {error}") from error
    return pattern, negate, expect_failure


def parse_tst(text: str) -> list[Step]:
    """The steps of a ``.tst`` file, in order, read as gogui-regress reads them. A ``#?`` line that does not
    follow a command at once, a pattern without its brackets, and a pattern Java and Python would read
    differently are TstSyntaxErrors."""
    steps: list[Step] = []
    command: tuple[str, int] | None = None  # the command on the line before, still waiting for a "#?" line

    def close(pattern: tuple[str, bool, bool] | None = None) -> None:
        assert command is not None
        line, where = command
        number = _number(line)
        if number is None and pattern is None:
            steps.append(Setup(line, where))
        else:
            text, negate, expect_failure = pattern or (None, False, False)
            steps.append(Case(-1 if number is None else number, line, text, negate, expect_failure, where))

    for index, raw in enumerate(re.split(r"\r\n|\r|\n", text), start=1):
        line = java_trim(raw)
        if line.startswith("#?"):
            if command is None:
                raise TstSyntaxError(f"line {index}: '#?' line without a command on the line before it")
            body = java_trim(line[2:])
            close(_pattern(body, index) if body else None)
            command = None
            continue
        if command is not None:
            close()
            command = None
        if line and not line.startswith("#"):
            command = (line.replace("\t", " "), index)
    if command is not None:
        close()
    return steps


def parse_selection(argument: str) -> tuple[Path, set[int] | None]:
    """``FILE.tst`` or ``FILE.tst:1,4-7`` (regress.pike's form) -> the file and the test numbers (None: all)."""
    name, colon, numbers = argument.rpartition(":")
    if not colon or not re.fullmatch(r"[\d,\- ]+", numbers):
        return Path(argument), None
    chosen: set[int] = set()
    for part in numbers.split(","):
        part = part.strip()
        if "-" in part:
            low, _, high = part.partition("-")
            chosen.update(range(int(low), int(high) + 1))
        elif part:
            chosen.add(int(part))
    return Path(name), chosen


# -- running ---------------------------------------------------------------------------------------------------------

PASS_, FAIL_, EXPECTED_FAIL, UNEXPECTED_PASS = "pass", "FAIL", "fail", "PASS"  # gogui-regress's four words


@dataclass
class Outcome:
    test: Case
    answer: str  # gogui-regress's answer text: the reply from its first space on, trimmed
    verdict: str  # pass | FAIL | fail (expected) | PASS (unexpected)
    elapsed_s: float
    refused: bool = False  # the reply was "?"


@dataclass
class FileReport:
    path: Path
    outcomes: list[Outcome] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # refused setup commands, a crashed engine, a bad file
    elapsed_s: float = 0.0

    def count(self, verdict: str) -> int:
        return sum(1 for o in self.outcomes if o.verdict == verdict)

    @property
    def ok(self) -> bool:
        return not self.errors and not self.count(FAIL_)


def gogui_answer(reply: list[str]) -> str:
    """What gogui-regress matches: the full reply (its lines, then the closing blank line) from its first space
    on, trimmed; "" when it has no space."""
    full = "".join(line + "\n" for line in reply) + "\n"
    space = full.find(" ")
    return java_trim(full[space:]) if space >= 0 else ""


def _send(engine: GtpEngine, line: str, timeout_s: float) -> tuple[str, bool]:
    """Send a line as gogui-regress does and return its answer and whether it was refused. A leading number is
    the GTP id that gogui-regress sends with the command; our client numbers commands itself."""
    head, _, rest = line.partition(" ")
    command = rest if head.isascii() and head.isdigit() and rest.strip() else line
    try:
        engine.send(command, timeout_s=timeout_s)
        refused = False
    except GtpFailure:
        refused = True
    return gogui_answer(engine.last_reply), refused


def _argv(engine_command: str) -> list[str]:
    """The engine's command line, its program made absolute where it names a file from here (GtpClient does
    this before starting the engine in the test file's folder)."""
    argv = split_command(engine_command)
    if not argv:
        raise ValueError("empty engine command")
    if argv and Path(argv[0]).exists():
        argv[0] = str(Path(argv[0]).absolute())
    return argv


def _shown(answer: str, refused: bool) -> str:
    return ("? " if refused else "") + answer.replace("\n", "\\n")


def run_file(path: Path, engine_command: str, numbers: set[int] | None = None,
             timeout_s: float = DEFAULT_TIMEOUT_S, report: Callable[[str], None] = print,
             verbose: bool = False) -> FileReport:
    """Run one ``.tst`` file on a fresh engine started in the file's folder. ``numbers``: only these numbered
    tests (everything else always runs)."""
    result = FileReport(path)
    name = path.stem
    start = time.monotonic()
    try:
        steps = parse_tst(path.read_text(encoding="utf-8"))
        argv = _argv(engine_command)
    except (OSError, UnicodeDecodeError, TstSyntaxError, ValueError) as error:
        result.errors.append(f"{path}: {error}")
        report(f"{name}: ERROR {error}")
        return result
    try:
        with GtpEngine(argv, label=name, cwd=path.absolute().parent) as engine:
            for step in steps:
                if isinstance(step, Case) and numbers is not None and step.number >= 0 \
                        and step.number not in numbers:
                    continue
                began = time.monotonic()
                answer, refused = _send(engine, step.command, timeout_s)
                if isinstance(step, Setup):
                    if refused:
                        result.errors.append(f"{name} line {step.line}: setup command {step.command!r} "
                                             f"refused: {answer}")
                        report(f"{name}:{step.line} ERROR setup {step.command!r} refused: {answer}")
                    continue
                passed = step.passes(answer, refused)
                verdict = (UNEXPECTED_PASS if passed else EXPECTED_FAIL) if step.expect_failure else \
                    (PASS_ if passed else FAIL_)
                result.outcomes.append(Outcome(step, answer, verdict, time.monotonic() - began, refused))
                if verbose or verdict in (FAIL_, UNEXPECTED_PASS):
                    report(f"{name}:{step.number:<6} {verdict} {_shown(answer, refused)} [{step.expected}]")
    except EngineError as error:
        result.errors.append(f"{name}: engine failed: {error}")
        report(f"{name}: ERROR engine failed: {error}")
    result.elapsed_s = time.monotonic() - start
    return result


def summary(reports: Sequence[FileReport]) -> str:
    lines = []
    totals = {verdict: 0 for verdict in (PASS_, FAIL_, EXPECTED_FAIL, UNEXPECTED_PASS)}
    errors = 0
    for file_report in reports:
        counts = {verdict: file_report.count(verdict) for verdict in totals}
        for verdict, count in counts.items():
            totals[verdict] += count
        errors += len(file_report.errors)
        lines.append(f"{file_report.path.stem:<20} {_counts(counts, len(file_report.errors))}"
                     f"  {file_report.elapsed_s:6.2f} s")
    lines.append(f"{'total':<20} {_counts(totals, errors)}")
    return "\n".join(lines)


def _counts(counts: dict[str, int], errors: int) -> str:
    return (f"{counts[PASS_]:4d} passed, {counts[FAIL_]:3d} unexpected failures, {counts[EXPECTED_FAIL]:3d} expected "
            f"failures, {counts[UNEXPECTED_PASS]:3d} unexpected passes, {errors:2d} errors")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tabula regress", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="Exit status: 0 when no test failed unexpectedly and nothing went wrong, "
                                            "1 otherwise. Unexpected passes are reported but do not fail the run.")
    parser.add_argument("files", nargs="+", metavar="FILE.tst[:N,M-K]", help="regression files, optionally with "
                        "test numbers")
    parser.add_argument("--engine", default=DEFAULT_ENGINE, help='GTP engine command line (default: "%(default)s")')
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per command")
    parser.add_argument("--verbose", "-v", action="store_true", help="print every test, not only surprises")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    reports = []
    for argument in args.files:
        path, numbers = parse_selection(argument)
        reports.append(run_file(path, args.engine, numbers, args.timeout, verbose=args.verbose,
                                report=lambda line: print(line, flush=True)))
    print(summary(reports))
    return 0 if all(r.ok for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
