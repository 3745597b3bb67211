"""The benchmark commands still run (on tiny budgets; their figures are measured by hand, not by tests)."""
from __future__ import annotations

import re

from tests.conftest_network import tiny_model, tiny_onnx  # noqa: F401
from tools import bench_net, bench_search


def test_bench_net_compares_onnxruntime_and_torch_on_the_cpu(tiny_onnx, capsys):
    assert bench_net.main([str(tiny_onnx), "--batches", "1,4", "--threads", "1", "--seconds", "0.02",
                           "--rounds", "1", "--paths", "onnx-fp32,torch-fp32", "--accuracy-positions", "8"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"onnx-fp32\s+t=1\s+\d+\s+\d+", out) and re.search(r"torch-fp32\s+t=1\s+\d+\s+\d+", out)


def test_bench_search_reports_efficiency(tiny_onnx, capsys):
    assert bench_search.main([str(tiny_onnx), "--moves", "1", "--playouts", "24", "--threads", "1", "--batch", "4",
                              "--seconds", "0.05", "--rounds", "1", "--provider", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "on CPUExecutionProvider" in out and re.search(r"efficiency = playouts/s / best raw at batch \d+ +\d", out)


def test_bench_search_with_an_instant_network_replays_the_recorded_outputs(tiny_onnx, capsys):
    assert bench_search.main([str(tiny_onnx), "--moves", "2", "--playouts", "32", "--threads", "1", "--batch", "4",
                              "--rounds", "2", "--instant-network"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"playouts/s, best round +\d+", out)
    # one search thread: the replay grows exactly the recorded tree
    assert re.search(r"had not seen: 0 in 128 playouts", out)
    split = re.search(r"descent ([\d.]+), evaluator ([\d.]+) .*expansion and backup (-?[\d.]+)", out)
    assert split and float(split.group(1)) > 0 and float(split.group(2)) > 0
