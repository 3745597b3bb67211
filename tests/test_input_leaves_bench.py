"""`tabula bench input-leaves` runs on a tiny tabula-v2 network and reports the encoding's cost and its parts."""
from __future__ import annotations

import re

import pytest

from tabula.tools.bench import input_leaves


@pytest.fixture(scope="module")
def tiny_v2_onnx(tmp_path_factory):
    from tabula.engine.net.network import AGZ, NetSpec, export_onnx, random_network

    model = random_network(NetSpec(blocks=1, filters=8, head=AGZ, board_size=9, input_encoding="tabula-v2"), seed=2)
    path = tmp_path_factory.mktemp("net") / "v2.onnx"
    export_onnx(model, path, provenance="tests: random seed 2")
    return path


@pytest.mark.slow  # the export of the network: about 3 s
def test_bench_input_leaves_times_the_leaves_a_search_asked_for(tiny_v2_onnx, capsys):
    assert input_leaves.main([str(tiny_v2_onnx), "--size", "9", "--moves", "1", "--playouts", "24",
                              "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"tabula-v2, 9x9: \d+ leaves in \d+ batches", out)
    for name in ("tabula-v2", "katago-v7 part", "reading planes part"):
        assert re.search(rf"  {name}\s+-?\d+\.\d{{3}}\n", out), out


def test_bench_input_leaves_refuses_a_missing_file(tmp_path, capsys):
    with pytest.raises(SystemExit):
        input_leaves.main([str(tmp_path / "none.onnx")])
    assert "no such file" in capsys.readouterr().err


@pytest.mark.slow
def test_bench_input_leaves_refuses_a_size_the_network_does_not_play(tiny_v2_onnx):
    with pytest.raises(SystemExit, match="not 13x13"):
        input_leaves.main([str(tiny_v2_onnx), "--size", "13", "--moves", "1", "--playouts", "8", "--rounds", "1"])
