"""A GTP engine run as a subprocess: send numbered commands, read replies under a deadline, and tell a refusal
(``? text``) from a crash, a hang or a malformed reply.

Layer: tools (imports nothing from the engine). ``tools/compete/match.py`` owns one ``GtpEngine`` per engine and side.
The engine's stderr goes straight to a log file so that a chatty engine can never fill a pipe and stall; its stdout is
read by one thread per engine into a queue, which is what lets every read have a timeout.
"""
from __future__ import annotations

import os
import queue
import shlex
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Callable, Sequence

DEFAULT_TIMEOUT_S = 30.0
QUIT_GRACE_S = 2.0  # how long ``close`` waits for an engine to leave after ``quit`` before killing it


class EngineError(Exception):
    """The engine can no longer be trusted to follow the protocol: restart it before using it again."""


class EngineCrashed(EngineError):
    """The engine's process exited or closed its stdout."""


class EngineTimeout(EngineError):
    """No complete reply within the deadline. ``elapsed_s`` is how long we waited."""

    def __init__(self, message: str, elapsed_s: float):
        super().__init__(message)
        self.elapsed_s = elapsed_s


class MalformedReply(EngineError):
    """The engine wrote something that is not a GTP reply, or a reply with the wrong id."""


class GtpFailure(Exception):
    """The engine answered ``? text``: it refused the command but is still in a known state."""

    def __init__(self, command: str, text: str):
        super().__init__(f"{command!r} failed: {text}")
        self.command = command
        self.text = text


def split_command(command: str | Sequence[str]) -> list[str]:
    """A command line as argv: a string is split the way a POSIX shell would, without running one."""
    return shlex.split(command) if isinstance(command, str) else list(command)


class GtpEngine:
    """One GTP engine subprocess. Use as a context manager, or call ``close()``: the process is always reaped.

    Fields fixed at start: ``argv``, ``label``, ``stderr_path``, ``clock`` (seconds, monotonic: what reply
    deadlines are measured on; tests pass a fake one). ``broken`` becomes true after any ``EngineError``;
    the owner should then ``close()`` and start a new one. Not thread-safe: one thread drives one engine.
    """

    def __init__(self, command: str | Sequence[str], *, label: str = "", stderr_path: str | Path | None = None,
                 cwd: str | Path | None = None, env: dict[str, str] | None = None,
                 startup_timeout_s: float = DEFAULT_TIMEOUT_S, clock: Callable[[], float] = time.monotonic):
        self.argv = split_command(command)
        self.clock = clock
        if not self.argv:
            raise ValueError("empty engine command")
        self.label = label or Path(self.argv[0]).name
        self.stderr_path = Path(stderr_path) if stderr_path else None
        self.broken = False
        # The last reply as the engine wrote it: its lines (status and id included, line ends and the closing
        # blank line removed), for callers that must read it exactly, e.g. as gogui-regress does.
        self.last_reply: list[str] = []
        self._next_id = 1
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: IO[bytes] | int
        if self.stderr_path:
            self.stderr_path.parent.mkdir(parents=True, exist_ok=True)
            self._stderr = open(self.stderr_path, "ab")
        else:
            self._stderr = subprocess.DEVNULL
        try:
            # A session of its own: closing kills the engine's children too, and a Ctrl-C meant for the match does
            # not reach the engines before the match has had the chance to record what it was doing.
            self.process = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=self._stderr, cwd=cwd, env=env, start_new_session=True)
        except OSError as error:
            self._close_stderr()
            raise EngineCrashed(f"cannot start {self.argv[0]!r}: {error}") from error
        self._reader = threading.Thread(target=self._read_stdout, name=f"gtp-read-{self.label}", daemon=True)
        self._reader.start()
        self.startup_timeout_s = startup_timeout_s

    # -- lifetime --------------------------------------------------------------------------------------------------

    def __enter__(self) -> "GtpEngine":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self, quit_timeout_s: float = QUIT_GRACE_S) -> int | None:
        """Ask the engine to quit, kill it if it will not, and reap it. Returns its exit status. Idempotent."""
        if self.process.poll() is None and not self.broken:
            try:
                self.send("quit", timeout_s=quit_timeout_s)
            except (EngineError, GtpFailure):
                pass
        if self.process.stdin and not self.process.stdin.closed:
            try:
                self.process.stdin.close()
            except OSError:
                pass
        try:
            # A broken engine has crashed (it is gone) or hangs (it will not leave): no point waiting long.
            status = self.process.wait(timeout=min(quit_timeout_s, 0.2) if self.broken else quit_timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            status = self.process.wait()
        self._reader.join(timeout=1.0)
        self._close_stderr()
        return status

    def memory_mb(self) -> dict[str, float] | None:
        """The engine process's resident memory now and at its peak (VmRSS, VmHWM), in MiB; None where /proc
        does not say (not Linux, or the process is gone). Children of the engine are not counted."""
        try:
            with open(f"/proc/{self.process.pid}/status") as status:
                fields = dict(line.split(":", 1) for line in status if ":" in line)
            return {"rss": round(int(fields["VmRSS"].split()[0]) / 1024, 1),
                    "peak": round(int(fields["VmHWM"].split()[0]) / 1024, 1)}
        except (OSError, KeyError, ValueError):
            return None

    def kill(self) -> None:
        """Kill the engine and its children now (SIGKILL to its session); ``close`` still reaps it."""
        self.broken = True
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            self.process.kill()

    def _close_stderr(self) -> None:
        if not isinstance(self._stderr, int) and not self._stderr.closed:
            self._stderr.close()

    def _read_stdout(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        try:
            for raw in stdout:
                self._lines.put(raw.decode("utf-8", errors="replace"))
        except (OSError, ValueError):
            pass
        self._lines.put(None)  # end of file: the engine is gone or has closed its stdout

    # -- commands --------------------------------------------------------------------------------------------------

    def send(self, command: str, timeout_s: float | None = DEFAULT_TIMEOUT_S) -> str:
        """Send one command and return the text of a ``=`` reply (possibly several lines, stripped).

        Raises GtpFailure on a ``?`` reply, and an EngineError (after which ``broken`` is true) on a crash, a
        timeout or a malformed reply. ``timeout_s`` None waits for ever.
        """
        if self.broken:
            raise EngineError(f"{self.label}: engine is broken, restart it")
        command_id = self._next_id
        self._next_id += 1
        line = f"{command_id} {command.strip()}\n"
        try:
            assert self.process.stdin is not None
            self.process.stdin.write(line.encode())
            self.process.stdin.flush()
        except (OSError, ValueError) as error:
            self.broken = True
            raise EngineCrashed(f"{self.label}: cannot write {command!r}: {error}{self._exit_note()}") from error
        status, text = self._read_reply(command, command_id, timeout_s)
        if status == "?":
            raise GtpFailure(command, text)
        return text

    def try_send(self, command: str, timeout_s: float | None = DEFAULT_TIMEOUT_S) -> str | None:
        """``send`` that returns None where the engine refused the command (EngineError still propagates)."""
        try:
            return self.send(command, timeout_s)
        except GtpFailure:
            return None

    def _read_reply(self, command: str, command_id: int, timeout_s: float | None) -> tuple[str, str]:
        start = self.clock()
        deadline = None if timeout_s is None else start + timeout_s
        body: list[str] = []
        status = ""
        self.last_reply = []
        while True:
            remaining = None if deadline is None else deadline - self.clock()
            if remaining is not None and remaining <= 0:
                self.broken = True
                elapsed = self.clock() - start
                raise EngineTimeout(f"{self.label}: no reply to {command!r} within {timeout_s:g} s", elapsed)
            try:
                raw = self._lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if raw is None:
                self.broken = True
                self._lines.put(None)  # stay at end of file for any later read
                if command == "quit" and not body:
                    return "=", ""
                raise EngineCrashed(f"{self.label}: engine exited during {command!r}{self._exit_note()}")
            line = raw.rstrip("\r\n").replace("\t", " ")
            if not status:
                if not line.strip():
                    continue  # stray blank lines before a reply are harmless
                head = line[0]
                if head not in "=?":
                    self.broken = True
                    raise MalformedReply(f"{self.label}: reply to {command!r} starts with {line[:80]!r}")
                word, _, rest = line[1:].partition(" ")
                if word and word != str(command_id):
                    self.broken = True
                    raise MalformedReply(f"{self.label}: reply to {command!r} has id {word!r}, "
                                         f"expected {command_id}")
                status = head
                body.append(rest)
                self.last_reply.append(raw.rstrip("\r\n"))
                continue
            if not line.strip():
                return status, "\n".join(body).strip()
            body.append(line)
            self.last_reply.append(raw.rstrip("\r\n"))

    def _exit_note(self) -> str:
        try:
            code = self.process.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            return ""
        return f" (exit status {code})"

    # -- conveniences ----------------------------------------------------------------------------------------------

    def known_command(self, name: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> bool:
        return self.try_send(f"known_command {name}", timeout_s) == "true"

    def identity(self, timeout_s: float | None = None) -> str:
        """``name version`` as the engine reports them, e.g. ``GNU Go 3.8``; the first command sent at start."""
        timeout_s = self.startup_timeout_s if timeout_s is None else timeout_s
        name = self.try_send("name", timeout_s) or self.label
        version = self.try_send("version", timeout_s) or ""
        return f"{name} {version}".strip()
