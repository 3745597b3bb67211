"""Untrusted files: hostile SGF files through ``engine.rules.sgf`` and ``loadsgf`` (in process and over pipes), and
broken or malicious weight files through every loader (``OnnxEvaluator``, ``engine.net.leelaz``, ``engine.net.network``,
``tabula export``, ``tabula gtp --weights``). Each must give a clear error, leave the engine usable, and run no code
from the file.
"""
from __future__ import annotations

import gzip
import os
import pickle
import random
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tabula.engine.net.evaluator import NetworkFileError, OnnxEvaluator
from tabula.engine.net.leelaz import (
    ConvLayer,
    LeelazFormatError,
    LeelazWeights,
    format_leelaz,
    parse_leelaz,
    read_leelaz,
)
from tabula.engine.rules import sgf
from tabula.engine.rules.game import GameState, Rules
from tabula.tools.check.fuzz_gtp import ROOT, write_junk_sgf
from tests.conftest import SEED, make_session

TEN_MB = 10 * 1024 * 1024


# -- SGF ------------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hostile_sgf(tmp_path_factory) -> dict[str, Path]:
    """name -> path of every hostile SGF file (the fuzzer's set, plus the big ones)."""
    directory = tmp_path_factory.mktemp("sgf")
    names = write_junk_sgf(directory, random.Random(SEED))
    extra = {
        "value-10mb.sgf": b"(;SZ[9]GC[" + b"x" * TEN_MB + b"];B[ee])",
        "value-10mb-escapes.sgf": b"(;SZ[9]C[" + b"\\]" * (TEN_MB // 2) + b"];B[ee])",
        "deep-variations-3000.sgf": b"(;SZ[19](;B[dd](;W[pp]" + b"".join(
            b"(;" + (b"B" if i % 2 == 0 else b"W") + b"[]" for i in range(2998)) + b")" * 3000 + b")",
        "billion-laughs.sgf": b"(;SZ[9]" + b"(;C[lol]" * 30000 + b")" * 30000 + b")",
        "wide-tree.sgf": b"(;SZ[9]" + b"(;B[aa](;W[bb])(;W[cc]))" * 5000 + b")",
        "many-properties.sgf": b"(;SZ[9]" + b"XX[1]" * 100000 + b";B[aa])",
        "coords-negative.sgf": b"(;SZ[9];B[-1-1])",
        "unicode-name.sgf": "(;CA[UTF-8]SZ[9]PB[\u65e5\u672c\U0001f600]PW[\u202eevil];B[ee])".encode(),
        "ca-utf16-real.sgf": "(;CA[UTF-16]SZ[9];B[ee])".encode("utf-16"),
        "latin1.sgf": b"(;CA[ISO-8859-1]SZ[9]PB[\xe9\xe8];B[ee])",
        "pass-tt.sgf": b"(;SZ[19];B[tt];W[tt])",
        "move-number-words.sgf": b"(;SZ[9]MN[99999999999999999999];B[aa])",
    }
    for name, data in extra.items():
        (directory / name).write_bytes(data)
    names = names + list(extra)
    return {name: directory / name for name in names}


MUST_REFUSE = ["empty.sgf", "truncated.sgf", "random.sgf", "sz0.sgf", "sz1.sgf", "sz1000.sgf", "sz-huge.sgf",
               "sz-negative.sgf", "sz-rect.sgf", "sz26.sgf", "occupied.sgf", "suicide.sgf", "setup-occupied.sgf",
               "coords-zz.sgf", "coords-short.sgf", "coords-bytes.sgf", "coords-negative.sgf", "komi-inf.sgf",
               "komi-nan.sgf", "unknown-charset.sgf", "nul.sgf", "only-parens.sgf",
               "clear-points.sgf", "deep-variations.sgf", "a-directory.sgf"]
MUST_LOAD = ["valid.sgf", "many-moves.sgf", "value-10mb.sgf", "value-10mb-escapes.sgf", "deep-variations-3000.sgf",
             "billion-laughs.sgf", "wide-tree.sgf", "unicode-name.sgf", "latin1.sgf", "pass-tt.sgf"]
# Either outcome is fine for the rest (utf16-junk.sgf, ca-utf16-real.sgf: sgfmill needs an ASCII-compatible file).


def _read(path: Path) -> bytes:
    return path.read_bytes() if path.is_file() else b""


@pytest.mark.slow
def test_every_hostile_sgf_loads_or_raises_sgf_error(hostile_sgf: dict[str, Path]) -> None:
    outcomes = {}
    for name, path in hostile_sgf.items():
        try:
            state = sgf.load_state(_read(path), Rules())
        except sgf.SgfError as error:
            assert str(error).strip(), name
            outcomes[name] = "refused"
        else:
            assert isinstance(state, GameState) and 2 <= state.size <= 25, name
            outcomes[name] = "loaded"
    assert [n for n in MUST_REFUSE if outcomes[n] != "refused"] == []
    assert [n for n in MUST_LOAD if outcomes[n] != "loaded"] == []


def test_a_deep_variation_tree_reads_its_main_line(hostile_sgf: dict[str, Path]) -> None:
    state = sgf.load_state(_read(hostile_sgf["deep-variations-3000.sgf"]), Rules())
    assert len(state.moves) == 3000  # every nested variation is on the main line
    wide = sgf.load_state(_read(hostile_sgf["wide-tree.sgf"]), Rules())
    assert len(wide.moves) == 2  # the first variation's first child


def test_loadsgf_refuses_hostile_files_and_keeps_the_game(hostile_sgf: dict[str, Path]) -> None:
    session = make_session(size=9)
    for command in ("play b E5", "play w C3", "play b pass"):
        assert session.dispatch(command) == "=\n\n"
    before = session.dispatch("printsgf")
    for name in MUST_REFUSE:
        reply = session.dispatch(f"7 loadsgf {hostile_sgf[name]}")
        assert reply.startswith("?7 cannot load file"), (name, reply)
        assert session.dispatch("printsgf") == before, name
    for name in ("valid.sgf", "value-10mb.sgf", "unicode-name.sgf", "pass-tt.sgf"):  # the pipes test loads all
        assert session.dispatch(f"loadsgf {hostile_sgf[name]}") == "=\n\n", name
        assert session.dispatch("showboard").startswith("= ")
    assert session.dispatch("boardsize 9") == "=\n\n"
    assert session.dispatch("play b E5") == "=\n\n"
    assert session.dispatch("genmove w")[:2] == "= "


@pytest.mark.slow  # a few seconds: the quick suite stays under 3 minutes
def test_loadsgf_over_pipes_survives_every_hostile_file(hostile_sgf: dict[str, Path], tmp_path: Path) -> None:
    names = sorted(hostile_sgf)
    commands = [f"{i} loadsgf {hostile_sgf[name]}" for i, name in enumerate(names, start=1)]
    commands += ["9001 loadsgf " + str(hostile_sgf["value-10mb.sgf"]) + " 1", "9002 boardsize 9",
                 "9003 play b E5", "9004 printsgf", "quit"]
    done = subprocess.run([sys.executable, "-m", "tabula.gtp", "--player", "random", "--seed", str(SEED)],
                          input="\n".join(commands).encode() + b"\n", capture_output=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    replies = done.stdout.decode().split("\n\n")
    assert replies[-1] == ""
    by_id = {}
    for reply in replies[:-1]:
        head = reply.split(" ", 1)[0].split("\n", 1)[0]
        by_id[head[1:]] = reply
    assert len(by_id) == len(commands)  # quit answers too, without an id
    for i, name in enumerate(names, start=1):
        reply = by_id[str(i)]
        if name in MUST_REFUSE:
            assert reply.startswith(f"?{i} cannot load file"), (name, reply)
        elif name in MUST_LOAD:
            assert reply == f"={i}", (name, reply)
    assert by_id["9001"] == "=9001"
    assert by_id["9003"] == "=9003" and "B[ee]" in by_id["9004"]
    assert b"Traceback" not in done.stderr


class _Deadline(Exception):
    pass


def _within(seconds: float, function, *args):
    """``function(*args)``, stopped after ``seconds`` of this process's CPU time. CPU time, not wall time: the limits
    catch a quadratic path (minutes), and a shared machine's load must not fail them (a 150k-node parse took over
    2 s of wall time at load average 12)."""
    def expire(signum, frame):
        raise _Deadline(f"took more than {seconds} s of CPU time")

    previous = signal.signal(signal.SIGPROF, expire)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        return function(*args)
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def test_a_file_of_150000_moves_is_refused_or_loaded_quickly() -> None:
    data = b"(;SZ[9]" + b";B[];W[]" * 75000 + b")"
    try:
        _within(2.0, sgf.load_state, data, Rules())
    except sgf.SgfError:
        pass


def test_the_move_limit_is_exact_and_says_why() -> None:
    assert len(_within(2.0, sgf.load_state, b"(;SZ[9]" + b";B[];W[]" * 5000 + b")").moves) == sgf.MAX_MOVES
    with pytest.raises(sgf.SgfError, match="too many moves"):
        sgf.load_state(b"(;SZ[9]" + b";B[];W[]" * 5000 + b";B[])")
    with pytest.raises(sgf.SgfError, match="too many nodes"):
        sgf.load_state(b"(;SZ[9]" + b";C[x]" * sgf.MAX_NODES + b")")


def test_loadsgf_of_10000_moves_then_undo_and_printsgf_are_fast() -> None:
    session = make_session(size=9)
    moves = b"".join(b";B[%s%s];W[]" % (bytes([97 + i % 9]), bytes([97 + i // 9])) for i in range(40)) \
        + b";B[];W[]" * (5000 - 40)
    assert len(moves.split(b";")) - 1 == 10_000

    def load_undo_print() -> str:
        import tempfile

        with tempfile.NamedTemporaryFile(suffix=".sgf") as file:
            file.write(b"(;SZ[9]KM[0]" + moves + b")")
            file.flush()
            assert session.dispatch(f"loadsgf {file.name}") == "=\n\n"
        for _ in range(300):
            assert session.dispatch("undo") == "=\n\n"
        return session.dispatch("printsgf")

    printed = _within(5.0, load_undo_print)
    assert printed.count(";") == 10_000 - 300 + 1


def test_sgf_errors_always_say_what_is_wrong(hostile_sgf: dict[str, Path]) -> None:
    for name in ("coords-zz.sgf", "setup-range.sgf", "player-junk.sgf"):
        with pytest.raises(sgf.SgfError) as caught:
            sgf.load_state(_read(hostile_sgf[name]), Rules())
        assert not str(caught.value).rstrip().endswith(":"), (name, str(caught.value))


def test_loadsgf_refuses_an_endless_file(tmp_path: Path) -> None:
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    done = subprocess.run([sys.executable, "-m", "tabula.gtp", "--player", "random"],
                          input=b"1 loadsgf /dev/zero\n2 name\n", capture_output=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60, preexec_fn=limit)
    assert done.stdout.startswith(b"?1 cannot load file"), done.stdout[:200]
    assert b"=2 Tabula\n\n" in done.stdout


def test_loadsgf_refuses_big_files_and_devices_before_reading(tmp_path: Path) -> None:
    from tabula.gtp.commands import MAX_SGF_BYTES

    big = tmp_path / "big.sgf"
    with open(big, "wb") as file:
        file.write(b"(;SZ[9];B[ee])")
        file.truncate(MAX_SGF_BYTES + 1)  # sparse: no disk used, and loadsgf must not read it
    session = make_session(size=9)
    assert session.dispatch(f"1 loadsgf {big}") == "?1 cannot load file: larger than 16 MB\n\n"
    assert session.dispatch("2 loadsgf /dev/zero") == "?2 cannot load file: not a regular file\n\n"
    assert session.dispatch("3 name") == "=3 Tabula\n\n"


# -- weights --------------------------------------------------------------------------------------------------------

class Evil:
    """Unpickling this creates ``marker``: the proof that a loader ran code from a file."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture(scope="module")
def weights_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("weights")


def _onnx_net(path: Path, planes: int = 18, size: int = 9, width: int | None = None,
              names: tuple[str, str] = ("policy", "value"), policy_len: int | None = None, nan: bool = False,
              input_type: int | None = None, metadata: dict[str, str] | None = None) -> Path:
    """A linear stand-in network built with onnx.helper (no torch): planes -> Flatten -> MatMul -> policy, value."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    width = width or size
    flat = planes * size * width
    policy_len = policy_len or size * size + 1
    rng = np.random.default_rng(0)
    wp = rng.normal(0, 0.01, (flat, policy_len)).astype(np.float32)
    if nan:
        wp[:] = np.nan
    wv = rng.normal(0, 0.01, (flat, 1)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Cast", ["planes"], ["x"], to=TensorProto.FLOAT),
         helper.make_node("Flatten", ["x"], ["flat"], axis=1),
         helper.make_node("MatMul", ["flat", "wp"], [names[0]]),
         helper.make_node("MatMul", ["flat", "wv"], ["v1"]),
         helper.make_node("Reshape", ["v1", "shape"], ["v2"]),
         helper.make_node("Tanh", ["v2"], [names[1]])],
        "stand-in",
        [helper.make_tensor_value_info("planes", input_type or TensorProto.FLOAT, ["batch", planes, size, width])],
        [helper.make_tensor_value_info(names[0], TensorProto.FLOAT, ["batch", policy_len]),
         helper.make_tensor_value_info(names[1], TensorProto.FLOAT, ["batch"])],
        [numpy_helper.from_array(wp, "wp"), numpy_helper.from_array(wv, "wv"),
         numpy_helper.from_array(np.array([-1], dtype=np.int64), "shape")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    for key, value in (metadata or {}).items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.save(model, str(path))
    return path


@pytest.fixture(scope="module")
def good_onnx(weights_dir: Path) -> Path:
    return _onnx_net(weights_dir / "good.onnx")


def test_the_stand_in_network_is_valid(good_onnx: Path) -> None:
    evaluator = OnnxEvaluator(good_onnx, symmetry="identity", log=None)
    result = evaluator.evaluate([GameState(9)])
    assert result.policy.shape == (1, 82) and np.isclose(result.policy.sum(), 1.0)


def _bad_onnx_files(directory: Path, good: Path) -> dict[str, Path]:
    from onnx import TensorProto

    data = good.read_bytes()
    files: dict[str, Path] = {}

    def raw(name: str, content: bytes) -> None:
        files[name] = directory / name
        files[name].write_bytes(content)

    raw("truncated.onnx", data[: len(data) // 2])
    raw("truncated-tail.onnx", data[:-7])
    raw("random.onnx", random.Random(SEED).randbytes(50_000))
    raw("empty.onnx", b"")
    raw("text.onnx", b"2\n1.0 2.0\n")
    raw("pickle.onnx", pickle.dumps(Evil(str(directory / "ran-onnx"))))
    files["missing.onnx"] = directory / "no-such-file.onnx"
    files["directory.onnx"] = directory
    files["wrong-planes.onnx"] = _onnx_net(directory / "wrong-planes.onnx", planes=17)
    files["wrong-outputs.onnx"] = _onnx_net(directory / "wrong-outputs.onnx", names=("p", "v"))
    files["wrong-policy-length.onnx"] = _onnx_net(directory / "wrong-policy-length.onnx", policy_len=81)
    files["nan.onnx"] = _onnx_net(directory / "nan.onnx", nan=True)
    files["int-input.onnx"] = _onnx_net(directory / "int-input.onnx", input_type=TensorProto.INT64)
    files["not-square.onnx"] = _onnx_net(directory / "not-square.onnx", width=7)
    files["bad-sizes-metadata.onnx"] = _onnx_net(directory / "bad-sizes-metadata.onnx",
                                                 metadata={"board_sizes": "9,lots"})
    files["huge-size-metadata.onnx"] = _onnx_net(directory / "huge-size-metadata.onnx",
                                                 metadata={"board_sizes": "9" * 5000})
    files["wrong-encoding.onnx"] = _onnx_net(directory / "wrong-encoding.onnx", metadata={"input_encoding": "x"})
    return files


def test_onnx_evaluator_refuses_broken_networks_clearly(weights_dir: Path, good_onnx: Path) -> None:
    for name, path in _bad_onnx_files(weights_dir, good_onnx).items():
        with pytest.raises(NetworkFileError) as caught:
            OnnxEvaluator(path, symmetry="identity", log=None)
        message = str(caught.value)
        assert str(path) in message and len(message) > len(str(path)) + 5, (name, message)
        assert "\n" not in message, (name, message)
    assert not (weights_dir / "ran-onnx").exists()
    # The process is still fine: the good network loads and evaluates.
    assert OnnxEvaluator(good_onnx, symmetry="identity", log=None).evaluate([GameState(9)]).value.shape == (1,)


def _lz_weights(filters: int = 2, size: int = 9, hidden: int = 4) -> LeelazWeights:
    rng = np.random.default_rng(1)

    def layer(outputs: int, inputs: int, kernel: int) -> ConvLayer:
        return ConvLayer(rng.normal(0, 0.1, (outputs, inputs, kernel, kernel)).astype(np.float32),
                         np.zeros(outputs, np.float32), np.zeros(outputs, np.float32), np.ones(outputs, np.float32))

    points = size * size
    return LeelazWeights(
        layer(filters, 18, 3), [layer(filters, filters, 3), layer(filters, filters, 3)], layer(2, filters, 1),
        rng.normal(0, 0.1, (points + 1, 2 * points)).astype(np.float32), np.zeros(points + 1, np.float32),
        layer(1, filters, 1), rng.normal(0, 0.1, (hidden, points)).astype(np.float32), np.zeros(hidden, np.float32),
        rng.normal(0, 0.1, (1, hidden)).astype(np.float32), np.zeros(1, np.float32))


def _bad_leelaz_texts() -> dict[str, bytes]:
    good = format_leelaz(_lz_weights())
    lines = good.split("\n")

    def replace(index: int, text: str) -> bytes:
        changed = list(lines)
        changed[index] = text
        return "\n".join(changed).encode()

    return {
        "empty": b"",
        "only-version": b"1\n",
        "version-3": ("3" + good[1:]).encode(),
        "version-huge": ("9" * 5000 + good[1:]).encode(),
        "version-words": ("one" + good[1:]).encode(),
        "truncated-lines": "\n".join(lines[:-4]).encode(),
        "truncated-bytes": good.encode()[: len(good) // 2],
        "missing-number": replace(2, " ".join(lines[2].split()[:-1])),
        "extra-number": replace(3, lines[3] + " 1.5"),
        "wrong-count-fc": replace(len(lines) - 9, " ".join(lines[len(lines) - 9].split()[:-3])),
        "nan": replace(1, "nan " + " ".join(lines[1].split()[1:])),
        "inf": replace(4, " ".join(["inf"] * len(lines[4].split()))),
        "overflow": replace(1, "1e39 " + " ".join(lines[1].split()[1:])),
        "words": replace(5, "zero one two"),
        "negative-variance": replace(4, " ".join(["-5"] * len(lines[4].split()))),
        "empty-line": replace(6, ""),
        "non-ascii": good.encode().replace(b"0", b"\xd9\xa0", 1),
        "binary": random.Random(SEED).randbytes(20_000),
        "pickle": pickle.dumps(Evil("/nonexistent/ran-leelaz")),
        "corrupt-gzip": gzip.compress(good.encode())[:200],
        "gzip-of-junk": gzip.compress(b"\x00\xff" * 1000),
    }


def test_leelaz_reader_refuses_broken_files_clearly(weights_dir: Path) -> None:
    good = format_leelaz(_lz_weights())
    assert parse_leelaz(good).board_size == 9  # the fixture itself is valid
    for name, data in _bad_leelaz_texts().items():
        path = weights_dir / f"{name}.txt"
        path.write_bytes(data)
        with pytest.raises(LeelazFormatError) as caught:
            read_leelaz(path)
        assert str(path) in str(caught.value) and caught.value.problem, name
    path = weights_dir / "good.txt.gz"
    path.write_bytes(gzip.compress(good.encode()))
    assert read_leelaz(path).blocks == 1


@pytest.fixture(scope="module")
def evil_files(weights_dir: Path) -> tuple[dict[str, Path], Path]:
    """Pickles that create ``marker`` when unpickled: a raw pickle and a torch checkpoint carrying one."""
    import torch

    marker = weights_dir / "code-ran"
    files = {"raw.pkl": weights_dir / "evil.pkl", "checkpoint.pt": weights_dir / "evil.pt"}
    files["raw.pkl"].write_bytes(pickle.dumps({"spec": Evil(str(marker))}))
    torch.save({"spec": Evil(str(marker)), "state_dict": {}}, files["checkpoint.pt"])
    # Positive control: plain unpickling does run the code (elsewhere), so "no marker" below means something.
    control = weights_dir / "control"
    pickle.loads(pickle.dumps(Evil(str(control))))
    assert control.exists()
    control.unlink()
    assert not marker.exists()
    return files, marker


def test_no_loader_runs_code_from_a_pickle(evil_files, weights_dir: Path) -> None:
    from tabula.engine.net.network import NetworkFileError as NetworkError
    from tabula.engine.net.network import load_checkpoint, load_onnx
    from tabula.tools.learn.train import load_training_checkpoint

    files, marker = evil_files
    for path in files.values():
        with pytest.raises(NetworkError):
            load_checkpoint(path)
        with pytest.raises(NetworkFileError):
            OnnxEvaluator(path, log=None)
        with pytest.raises(NetworkFileError):
            load_onnx(path)
        with pytest.raises(LeelazFormatError):
            read_leelaz(path)
        with pytest.raises(Exception):  # torch's UnpicklingError: weights_only refuses the global
            load_training_checkpoint(str(path))
        with pytest.raises(sgf.SgfError):
            sgf.load_state(path.read_bytes())
    assert not marker.exists()


def test_tabula_export_runs_no_code_from_a_pickle(evil_files, weights_dir: Path) -> None:
    from tabula.tools.learn import export

    files, marker = evil_files
    for path in files.values():
        for argv in ([str(path), str(weights_dir / "out.onnx")], ["--to-leelaz", str(path), str(weights_dir / "o.txt")],
                     ["--from-leelaz", str(path), str(weights_dir / "out.onnx")]):
            with pytest.raises((SystemExit, ValueError)):
                export.main(argv)
    assert not marker.exists()
    assert not (weights_dir / "out.onnx").exists()


def test_tabula_export_refuses_a_broken_file_without_a_traceback(weights_dir: Path) -> None:
    from tabula.tools.learn import export

    path = weights_dir / "truncated-for-export.txt"
    path.write_bytes(_bad_leelaz_texts()["truncated-lines"])
    with pytest.raises(SystemExit) as caught:
        export.main(["--from-leelaz", str(path), str(weights_dir / "never.onnx")])
    assert caught.value.code != 0 and str(path) in str(caught.value.code)


def test_gtp_with_the_random_player_never_opens_the_weights(evil_files, tmp_path: Path) -> None:
    """``--weights`` only matters to the search player; the random player starts and plays whatever it names."""
    files, marker = evil_files
    done = subprocess.run([sys.executable, "-m", "tabula.gtp", "--player", "random",
                           "--weights", str(files["raw.pkl"])],
                          input=b"1 name\n2 boardsize 9\n3 genmove b\nquit\n", capture_output=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=30)
    assert done.returncode == 0 and done.stdout.startswith(b"=1 Tabula\n\n"), done.stderr.decode()[-1000:]
    assert not marker.exists()


def test_gtp_startup_refuses_bad_weights_with_one_line(weights_dir: Path, good_onnx: Path, monkeypatch,
                                                       capsys) -> None:
    """``main`` with the search player and a broken network: status 1 and one line naming the file."""
    from tabula.engine.play import player, search_player
    from tabula.gtp import __main__ as gtp_main

    monkeypatch.setitem(player.PICKERS, "search", search_player.from_config)  # whether or not registered yet
    for name, bad in _bad_onnx_files(weights_dir, good_onnx).items():
        assert gtp_main.main(["--player", "search", "--weights", str(bad)]) == 1, name
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("tabula gtp: ") and str(bad) in lines[0], (name, lines)
    assert not (weights_dir / "ran-onnx").exists()


def test_gtp_startup_with_bad_weights_exits_cleanly_once_search_is_registered(weights_dir: Path, good_onnx: Path,
                                                                              tmp_path: Path) -> None:
    """The real process: ``python -m tabula.gtp --player search --weights BROKEN`` exits non-zero, naming the file."""
    from tabula.engine.play.player import PICKERS

    if "search" not in PICKERS:
        pytest.skip("the search player is not registered in engine.play.player.PICKERS yet")
    bad = _bad_onnx_files(weights_dir, good_onnx)["random.onnx"]
    done = subprocess.run([sys.executable, "-m", "tabula.gtp", "--player", "search", "--weights", str(bad)],
                          input=b"1 name\n", capture_output=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert done.returncode != 0
    assert str(bad).encode() in done.stderr and done.stdout == b""


def test_the_engine_is_usable_after_every_refusal(hostile_sgf: dict[str, Path]) -> None:
    """A last end-to-end check in one session: hostile loads interleaved with play, then a normal game."""
    session = make_session(size=9)
    for name in MUST_REFUSE[:8]:
        session.dispatch(f"loadsgf {hostile_sgf[name]}")
        assert session.dispatch("play b E5").startswith(("=", "? illegal move"))
    assert session.dispatch("clear_board") == "=\n\n"
    for move in ("play b E5", "play w E4", "play b D4", "play w pass", "play b F4", "play w pass", "play b E3"):
        assert session.dispatch(move) == "=\n\n", move
    board = session.dispatch("showboard")
    assert "O" not in board.split("\n", 2)[2]  # E4 was captured


def test_writing_a_10000_move_game_is_fast() -> None:
    from tabula.engine.rules.coords import PASS

    state = GameState(9)
    for _ in range(10_000):
        state.play(PASS)
    data = _within(1.0, sgf.write_sgf, state)
    assert data.count(b";") == 10_001
