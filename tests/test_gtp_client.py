"""The GTP subprocess client against the scriptable fake engine: replies, refusals, crashes, hangs, bad replies."""
from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from tabula.tools.compete.gtp_client import (
    EngineCrashed,
    EngineError,
    EngineTimeout,
    GtpEngine,
    GtpFailure,
    MalformedReply,
)

ROOT = Path(__file__).resolve().parents[1]
FAKE = [sys.executable, str(ROOT / "tests" / "fake_gtp_engine.py")]


@pytest.fixture(autouse=True)
def repo_on_path(monkeypatch):
    # The fake engine imports engine.rules.game; the subprocess inherits this.
    monkeypatch.setenv("PYTHONPATH", str(ROOT))


def fake(*options: str, **kwargs) -> GtpEngine:
    return GtpEngine(FAKE + list(options), label="fake", **kwargs)


def test_replies_ids_and_refusals(tmp_path):
    with fake("--name", "Faker", stderr_path=tmp_path / "fake.log") as engine:
        assert engine.identity() == "Faker 1.0"
        assert engine.send("protocol_version") == "2"
        assert "genmove" in engine.send("list_commands").split("\n")
        assert engine.known_command("kgs-time_settings")
        with pytest.raises(GtpFailure) as refused:
            engine.send("frobnicate")
        assert refused.value.text == "unknown command"
        assert engine.try_send("frobnicate") is None
        assert not engine.broken  # a refusal leaves the engine usable
        engine.send("boardsize 9")
        assert engine.send("genmove b").upper() != "PASS"
    assert engine.process.returncode == 0
    assert "got: 1 name" in (tmp_path / "fake.log").read_text()  # stderr captured, ids sent


def test_crash_is_detected_and_reaped():
    engine = fake("--crash-at", "1")
    engine.send("boardsize 9")
    with pytest.raises(EngineCrashed, match="exit status 3"):
        engine.send("genmove b")
    assert engine.broken
    with pytest.raises(EngineError):
        engine.send("name")
    assert engine.close() == 3


def test_hang_times_out_and_is_killed(fake_clock):
    """A read gives up at the first look at the clock past its deadline (a fake clock that each look moves 0.25 s
    on); the engine is then broken, and ``close`` kills it rather than wait out its hour-long sleep."""
    def ticking() -> float:
        fake_clock.advance(0.25)
        return fake_clock()

    engine = fake("--hang-at", "1", clock=ticking)
    engine.send("boardsize 9")
    with pytest.raises(EngineTimeout) as timeout:
        engine.send("genmove b", timeout_s=0.5)
    assert 0.5 <= timeout.value.elapsed_s <= 0.5 + 0.25
    assert engine.broken
    engine.close(quit_timeout_s=0.2)
    assert engine.process.returncode == -signal.SIGKILL


@pytest.mark.parametrize("option", ["--malformed-at", "--wrong-id-at"])
def test_malformed_replies(option):
    with fake(option, "1") as engine:
        engine.send("boardsize 9")
        with pytest.raises(MalformedReply):
            engine.send("genmove b")
        assert engine.broken


def test_engine_that_exits_at_start():
    engine = fake("--crash-at-start")
    with pytest.raises(EngineCrashed):
        engine.identity()
    assert engine.close() == 4


def test_missing_program():
    with pytest.raises(EngineCrashed, match="cannot start"):
        GtpEngine("/nonexistent/engine --mode gtp")


def test_close_is_idempotent():
    engine = fake()
    assert engine.close() == 0
    assert engine.close() == 0
