"""int8 files that are right on every CPU: ``tabula export --quantize int8`` writes 7-bit weights (which
onnxruntime's saturating int8 kernels on CPUs without VNNI compute exactly) and says so in the metadata; the
start-up check accepts them; ``tools/check/int8_cpu`` shows what a CPU, or an emulated one, computes."""
from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tabula.engine.net.int8_check import fallback_note, quantized_for_every_cpu
from tabula.tools.check.int8_cpu import cpu_features, int8_kernels


def _weights_and_metadata(path) -> tuple[list[np.ndarray], dict[str, str]]:
    """The int8 weight tensors (convolution kernels) of an ONNX file, and its metadata."""
    import onnx
    from onnx import numpy_helper

    proto = onnx.load(str(path))
    weights = [numpy_helper.to_array(t) for t in proto.graph.initializer
               if t.data_type == onnx.TensorProto.INT8 and len(t.dims) == 4]
    return weights, {p.key: p.value for p in proto.metadata_props}


@pytest.fixture(scope="module")
def int8_files(tiny_onnx, tmp_path_factory):
    """The tiny network as net.onnx and, quantized by ``tabula export`` in both formats, net-int8.onnx (the
    default) and vnni-int8.onnx (``--quantize int8-vnni``)."""
    from tabula.tools.learn.export import main

    folder = tmp_path_factory.mktemp("int8")
    shutil.copy(tiny_onnx, folder / "net.onnx")
    assert main(["--quantize", "int8", "--calibration", "4", str(folder / "net.onnx"),
                 str(folder / "net-int8.onnx")]) == 0
    assert main(["--quantize", "int8-vnni", "--calibration", "4", str(folder / "net.onnx"),
                 str(folder / "vnni-int8.onnx")]) == 0
    return folder


def test_export_quantize_int8_writes_7_bit_weights_and_says_so(int8_files):
    weights, metadata = _weights_and_metadata(int8_files / "net-int8.onnx")
    assert weights and max(int(np.abs(w.astype(np.int32)).max()) for w in weights) <= 64
    assert metadata["precision"] == "int8" and metadata["int8_kernels"] == "any"
    assert "7-bit weights, the input convolutions fp32" in metadata["provenance"]
    assert quantized_for_every_cpu(metadata)


def test_export_quantize_int8_vnni_writes_the_8_bit_weights(int8_files):
    weights, metadata = _weights_and_metadata(int8_files / "vnni-int8.onnx")
    assert max(int(np.abs(w.astype(np.int32)).max()) for w in weights) == 127
    # every convolution of the trunk; the default format keeps the one that reads the input planes fp32
    assert len(weights) == 3 and len(_weights_and_metadata(int8_files / "net-int8.onnx")[0]) == 2
    assert metadata["int8_kernels"] == "vnni" and not quantized_for_every_cpu(metadata)


def test_the_start_up_check_accepts_a_7_bit_file(int8_files):
    from tabula.engine.net.evaluator import OnnxEvaluator

    lines = []
    evaluator = OnnxEvaluator(int8_files / "net-int8.onnx", symmetry="identity", log=lines.append)
    assert evaluator.metadata["precision"] == "int8" and len(lines) == 1
    assert "fp32 file" not in lines[0] and "int8" in lines[0], lines


def test_the_shipped_int8_default_is_quantized_for_every_cpu():
    default = os.path.join("weights", open("weights/DEFAULT").read().split()[0])
    weights, metadata = _weights_and_metadata(default)
    if metadata.get("precision") != "int8":
        pytest.skip(f"the default {default} is not int8")
    assert metadata["int8_kernels"] == "any" and max(int(np.abs(w.astype(np.int32)).max()) for w in weights) <= 64


def test_a_disagreeing_file_is_explained_by_its_format():
    assert "no VNNI" in fallback_note({}, "/w/net.onnx", 0.44)
    assert "no VNNI" in fallback_note({"int8_kernels": "vnni"}, "/w/net.onnx", 0.44)
    note = fallback_note({"int8_kernels": "any"}, "/w/net.onnx", 0.44)
    assert "no VNNI" not in note and "7-bit" in note and "net.onnx" in note and "44%" in note


def test_unknown_int8_format_is_refused(tiny_onnx, tmp_path):
    from tabula.tools.learn.export import quantize_int8

    with pytest.raises(ValueError, match="no int8 format"):
        quantize_int8(str(tiny_onnx), str(tmp_path / "x.onnx"), {19: np.zeros((4, 18, 19, 19), np.float32)},
                      kernels="int4")


def test_int8_kernels_follow_the_order_onnxruntime_picks_them_in():
    none = dict(fma=True, avx2=True, avx512f=False, avx512bw_dq_vl=False, avx512_vnni=False, avx_vnni=False)
    assert int8_kernels(none).startswith("AVX2") and "saturate" in int8_kernels(none)
    assert int8_kernels({**none, "avx_vnni": True}).startswith("AVX-VNNI")
    avx512 = {**none, "avx512f": True, "avx512bw_dq_vl": True}
    assert int8_kernels(avx512).startswith("AVX-512 core") and "saturate" in int8_kernels(avx512)
    # AVX-512 core overrides AVX-VNNI, as in onnxruntime's platform setup
    assert int8_kernels({**avx512, "avx_vnni": True}).startswith("AVX-512 core")
    assert int8_kernels({**avx512, "avx512_vnni": True}).startswith("AVX-512 VNNI")
    assert int8_kernels({**none, "avx2": False}).startswith("SSE") and int8_kernels(None).startswith("unknown")


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="cpuid is x86-64's")
def test_cpu_features_reads_this_cpu():
    features = cpu_features()
    assert features is not None and set(features) == {"fma", "avx2", "avx512f", "avx512bw_dq_vl", "avx512_vnni",
                                                      "avx_vnni"}
    flags = open("/proc/cpuinfo").read().split("\nflags", 2)[1].split("\n")[0].split() \
        if os.path.exists("/proc/cpuinfo") else None
    if flags:
        assert features["avx2"] == ("avx2" in flags) and features["avx512_vnni"] == ("avx512_vnni" in flags)


def test_int8_cpu_compares_each_int8_file_with_the_fp32_file(int8_files, capsys):
    from tabula.tools.check.int8_cpu import main

    files = [str(int8_files / n) for n in ("net.onnx", "net-int8.onnx", "vnni-int8.onnx")]
    assert main([*files, "--positions", "0", "--seconds", "0.2", "--batch", "2"]) == 0
    out = capsys.readouterr().out
    assert "# CPU (native): int8 kernels" in out and out.count("random: top-1") == 2
    assert "x fp32" in out and "positions/s" in out
    with pytest.raises(SystemExit, match="no such file"):
        main([files[0], str(int8_files / "missing-int8.onnx")])


def test_int8_cpu_measures_on_the_positions_of_games_of_any_size(int8_files, tmp_path, capsys):
    """``--size``, ``--per-game`` and ``--skip-games 0``: positions of the games of that size named (a 9x9 one among
    them is passed over), the share with its count and 95% interval; random games of that size where none are
    found; a clear error for a size the network does not play."""
    from tabula.tools.check.int8_cpu import main
    from tabula.tools.learn.export import sgf_positions

    (tmp_path / "a.sgf").write_text("(;GM[1]FF[4]SZ[19]KM[7.5];B[pd];W[dp];B[pp];W[dd];B[fq];W[cn])")
    (tmp_path / "b.sgf").write_text("(;GM[1]FF[4]SZ[9]KM[7.5];B[ee];W[cc];B[gg])")
    (tmp_path / "c.sgf").write_text("(;GM[1]FF[4]SZ[19]KM[7.5];B[qd];W[dc];B[pq];W[cp])")
    files = [str(int8_files / n) for n in ("net.onnx", "net-int8.onnx")]
    common = ["--per-game", "3", "--skip-games", "0", "--seconds", "0"]
    assert main([*files, "--games", str(tmp_path), "--size", "19", "--positions", "50", *common]) == 0
    out = capsys.readouterr().out
    assert f"real: 6 positions of 19x19 games of {tmp_path}" in out  # 3 of each 19x19 game's
    assert "real: top-1" in out and " of 6) [" in out
    assert len(sgf_positions(50, 1, str(tmp_path), per_game=100, size=9)) == 3  # the 9x9 game's, after each move
    assert len(sgf_positions(50, 1, str(tmp_path), per_game=100)) == 10  # 6 and 4 moves: 19x19 by default
    assert main([*files, "--games", str(tmp_path / "none"), "--positions", "5", *common]) == 0
    assert "real: 5 positions of random 19x19 games" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="plays 19x19, not 9x9"):
        main([*files, "--games", str(tmp_path), "--size", "9", *common])
    for bad in (["--size", "1"], ["--per-game", "0"], ["--skip-games", "-1"]):
        with pytest.raises(SystemExit, match="int8_cpu: "):
            main([*files, *bad])


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("qemu-x86_64") is None or platform.machine().lower() != "x86_64",
                    reason="needs qemu-user (apt-get install qemu-user) on x86-64")
def test_under_an_emulated_avx2_cpu_the_default_format_passes_the_check_and_the_vnni_one_does_not(tmp_path):
    """The shipped fp32 network quantized both ways (few calibration positions), each loaded by the engine under
    qemu's Haswell (AVX2, FMA, no AVX-512, no VNNI): the 8-bit file hands over to its fp32 file, the 7-bit one
    plays.

    Emulation runs the network some hundred times slower, so the network is the shipped one (all its blocks and
    weights, where the 8-bit weights' saturation adds up) written for 9x9 alone, and the start-up check reads 32
    positions: there the 8-bit file agrees on 56% of moves with a value 0.14 off, the 7-bit one on 94% and 0.03."""
    from tabula.engine.net.network import export_onnx, load_onnx
    from tabula.tools.learn.export import main

    network = load_onnx("weights/tabula-6x64-komi-lead.onnx")
    for name, quantize in (("any", "int8"), ("vnni", "int8-vnni")):
        os.mkdir(tmp_path / name)
        export_onnx(network, tmp_path / name / "net.onnx", provenance="tests", board_sizes=[9])
        assert main(["--quantize", quantize, "--calibration", "64", str(tmp_path / name / "net.onnx"),
                     str(tmp_path / name / "net-int8.onnx")]) == 0
    script = ("import sys\nfrom tabula.engine.net import int8_check\n"
              "from tabula.engine.net.evaluator import OnnxEvaluator\n"
              "from tabula.tools.check.int8_cpu import cpu_features, int8_kernels\n"
              "int8_check.INT8_AGREEMENT['positions'] = 32\n"
              "print(int8_kernels(cpu_features()))\n"
              "OnnxEvaluator(sys.argv[1], symmetry='identity', threads=1, log=print)\n")
    runs = {name: subprocess.Popen(["qemu-x86_64", "-cpu", "Haswell-v4", sys.executable, "-c", script,
                                    str(tmp_path / name / "net-int8.onnx")],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for name in ("any", "vnni")}  # one core each
    notes = {}
    for name, run in runs.items():
        out, err = run.communicate(timeout=600)
        assert run.returncode == 0, err[-2000:]
        notes[name] = out
    assert all(note.startswith("AVX2 (vpmaddubsw") for note in notes.values()), notes
    assert "no VNNI, so the network runs from its fp32 file net.onnx" in notes["vnni"], notes
    assert "fp32 file" not in notes["any"] and ", int8)" in notes["any"], notes


@pytest.fixture(scope="module")
def two_block_onnx(tmp_path_factory):
    """A random 2-block network (9x9, 8 channels) as ONNX."""
    from tabula.engine.net.network import NetSpec, export_onnx, random_network

    path = tmp_path_factory.mktemp("two-blocks") / "net.onnx"
    export_onnx(random_network(NetSpec(blocks=2, filters=8, board_size=9), seed=3), path, provenance="tests")
    return path


def test_fp32_blocks_keeps_the_trunks_last_blocks_out_of_int8(two_block_onnx, tmp_path):
    from tabula.tools.learn.export import main

    counts = {}
    for blocks in (0, 1, 2):
        out = tmp_path / f"fp32-{blocks}-int8.onnx"
        extra = ["--fp32-blocks", str(blocks)] if blocks else []
        assert main(["--quantize", "int8-vnni", "--calibration", "4", *extra, str(two_block_onnx), str(out)]) == 0
        weights, metadata = _weights_and_metadata(out)
        counts[blocks] = len(weights)
        assert ("residual block" in metadata["provenance"]) == bool(blocks)
    # the input convolution and two a block; each block kept fp32 takes its two out of int8
    assert counts == {0: 5, 1: 3, 2: 1}


def test_fp32_blocks_beyond_the_trunk_or_without_quantize_is_refused(two_block_onnx, tmp_path):
    from tabula.tools.learn.export import main

    out = tmp_path / "x-int8.onnx"
    with pytest.raises(SystemExit, match="2 residual blocks"):
        main(["--quantize", "int8", "--calibration", "4", "--fp32-blocks", "3", str(two_block_onnx), str(out)])
    with pytest.raises(SystemExit, match="--quantize"):
        main(["--fp32-blocks", "1", str(two_block_onnx), str(out)])
    with pytest.raises(SystemExit, match="0 or more"):
        main(["--quantize", "int8", "--fp32-blocks", "-1", str(two_block_onnx), str(out)])
    assert not out.exists()
