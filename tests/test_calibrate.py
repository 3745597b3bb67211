"""The small-board value offset (``NetSpec.small_board_value_offset``) and `tabula calibrate`, which fits it: zero
at first; then the komi and side to move alone move the value, never on 19x19; the fit finds a known offset; the
command writes a network that computes the offset it printed, with the source's measured metadata."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

torch = pytest.importorskip("torch")

from tabula.engine.net import network  # noqa: E402
from tabula.engine.net.encodings import encoding_named  # noqa: E402
from tabula.engine.net.evaluator import OnnxEvaluator  # noqa: E402
from tabula.engine.rules.coords import BLACK, WHITE  # noqa: E402
from tabula.engine.rules.game import Rules  # noqa: E402
from tabula.engine.rules.sgf import write_sgf  # noqa: E402
from tabula.tools.learn import calibrate  # noqa: E402
from tests.conftest_network import random_game  # noqa: E402

V2 = "tabula-v2"
THETA = (0.8, -0.5, 0.3, 0.2, 0.15, -0.1)


def student(seed: int = 0) -> network.TabulaNet:
    torch.manual_seed(seed)
    spec = network.NetSpec(blocks=1, filters=8, head=network.POOLED, aux=True, input_encoding=V2, head_komi=True)
    return network.TabulaNet(spec).eval()


def positions(size: int, komi: float) -> list:
    states = random_game(size, 12, seed=size)[::3]
    for state in states:
        state.rules = Rules(komi=komi, superko=state.rules.superko)
    return states


def raw_values(model: network.TabulaNet, states: list) -> tuple[np.ndarray, np.ndarray]:
    planes = encoding_named(V2).encode_batch(states, None)
    with torch.no_grad():
        return model.train_outputs(torch.from_numpy(planes))["value"].numpy(), planes


def with_offset(model: network.TabulaNet, theta=THETA) -> network.TabulaNet:
    grown = network.with_small_board_value_offset(model)
    with torch.no_grad():
        grown.head.value_offset_small_boards.weight.copy_(torch.tensor([theta]))
    return grown


def test_a_zero_offset_computes_what_the_network_computed():
    model = student()
    grown = network.with_small_board_value_offset(model)
    assert grown.spec.small_board_value_offset and "small_board_value_offset" not in model.spec.to_dict()
    for size in (9, 19):
        planes = torch.from_numpy(encoding_named(V2).encode_batch(positions(size, 7.5), None))
        with torch.no_grad():
            for before, after in zip(model(planes), grown(planes)):
                assert torch.equal(before, after)


def test_the_offset_is_the_komi_features_the_tool_reads_and_zero_on_19x19():
    model, grown = student(), with_offset(student())
    encoding = encoding_named(V2)
    komi, wave = encoding.plane_names.index("komi"), encoding.plane_names.index("komi_wave")
    for size in (9, 13):
        for komi_points in (0.5, 6.5, 7.5):
            states = positions(size, komi_points)
            before, planes = raw_values(model, states)
            after, _ = raw_values(grown, states)
            features = calibrate.offset_features(planes[:, komi].mean(axis=(1, 2)), planes[:, wave].mean(axis=(1, 2)),
                                                 size)
            assert np.allclose(after - before, features @ np.asarray(THETA), atol=1e-5)
            movers = np.asarray([s.to_move for s in states])
            assert (movers == BLACK).any() and (movers == WHITE).any()
            # the side to move's komi and wave flip with the mover: their terms are one number of the game, and
            # the mover's term is the same for either colour
            mover = (19 - size) / 10 * (THETA[4] + THETA[5] * (size - 14) / 10)
            black, white = (after - before)[movers == BLACK] - mover, (after - before)[movers == WHITE] - mover
            assert np.allclose(black, black[0], atol=1e-5) and np.allclose(white, -black[0], atol=1e-5)
    states = positions(19, 7.5)
    assert np.array_equal(raw_values(model, states)[0], raw_values(grown, states)[0])


def test_the_spec_refuses_the_offset_without_the_heads_komi():
    with pytest.raises(ValueError, match="head_komi"):
        network.NetSpec(head=network.POOLED, input_encoding=V2, small_board_value_offset=True)
    with pytest.raises(ValueError, match="head_komi"):
        network.with_small_board_value_offset(network.TabulaNet(network.NetSpec(head=network.POOLED, blocks=1,
                                                                                filters=8)))
    with pytest.raises(ValueError, match="already"):
        network.with_small_board_value_offset(with_offset(student()))


def test_the_fit_finds_a_known_offset():
    rng = np.random.default_rng(5)
    count = 40000
    raw = rng.normal(0.0, 0.6, count)
    features = rng.normal(0.0, 0.3, (count, 6))
    truth = np.asarray([0.4, -0.2, 0.25, 0.1, 0.15, -0.1])
    won = (rng.random(count) < 1.0 / (1.0 + np.exp(-2.0 * (raw + features @ truth)))).astype(np.float64)
    assert np.allclose(calibrate.fit_offset(raw, features, won), truth, atol=0.05)
    # one size alone: the komi and its size-scaled copy are proportional, and the fit stays finite
    single = np.stack([features[:, 0], -0.5 * features[:, 0], features[:, 2], -0.5 * features[:, 2],
                       np.ones(count), -0.5 * np.ones(count)], axis=1)
    theta = calibrate.fit_offset(raw, single, won)
    assert np.all(np.isfinite(theta))
    # results that separate (the mover always won): the penalty keeps the offset from pushing values to ±1
    separated = calibrate.fit_offset(raw, features, np.ones(count))
    assert np.all(np.isfinite(separated)) and np.max(np.abs(features @ separated)) < 3.0


def games(directory, size: int, komi: float, count: int, winner: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for seed in range(count):
        state = random_game(size, 40, seed=100 * size + seed)[-1]
        state.rules = Rules(komi=komi, superko=state.rules.superko)
        (directory / f"{size}-{seed}.sgf").write_bytes(write_sgf(state, result=f"{winner}+R"))


def exported(tmp_path, name: str = "net.onnx"):
    net = tmp_path / name
    network.export_onnx(student(), net, "test", [9, 13, 19])
    proto = onnx.load(net)
    network.set_metadata(proto, {**{p.key: p.value for p in proto.metadata_props}, "resign_winrate": "9:0.2"})
    onnx.save(proto, net)
    return net


def values(path, states) -> np.ndarray:
    return OnnxEvaluator(str(path), symmetry="identity", log=None).evaluate(states).value


def test_the_graphs_offset_computes_what_the_torch_head_computes(tmp_path):
    net = exported(tmp_path)
    proto = onnx.load(net)
    calibrate.add_offset(proto, np.asarray(THETA))
    out = tmp_path / "out.onnx"
    onnx.save(proto, out)
    loaded = network.load_onnx(out)  # the torch network the file describes: PooledHead's offset, its weights read
    assert loaded.spec.small_board_value_offset
    assert np.allclose(loaded.head.value_offset_small_boards.weight.detach().numpy(), [THETA])
    for size in (9, 13, 19):
        for komi in (0.5, 7.5):
            states = positions(size, komi)
            planes = torch.from_numpy(encoding_named(V2).encode_batch(states, None))
            with torch.no_grad():
                torch_value = loaded(planes)[1].numpy()
            assert np.allclose(values(out, states), torch_value, atol=1e-5)
    states = positions(19, 7.5)
    assert np.array_equal(values(net, states), values(out, states))
    # the rest of the graph byte for byte: every weight the file had is there unchanged
    before = {t.name: t.SerializeToString() for t in onnx.load(net).graph.initializer}
    after = {t.name: t.SerializeToString() for t in proto.graph.initializer}
    assert all(after[name] == data for name, data in before.items())


def four_weight_file(tmp_path, theta4) -> str:
    """A file calibrated before the mover's term: its offset's nodes read the komi and wave planes alone, with four
    weights (as the shipped default's files were until the mover's term)."""
    from onnx import numpy_helper

    proto = onnx.load(exported(tmp_path, "four.onnx"))
    calibrate.add_offset(proto, np.asarray(theta4))
    encoding = encoding_named(V2)
    older = {calibrate.NODE_PREFIX + "input_planes": np.asarray([encoding.plane_names.index("komi"),
                                                                 encoding.plane_names.index("komi_wave")], np.int64),
             calibrate.NODE_PREFIX + "matrix": np.asarray([2, 2], np.int64),
             calibrate.OFFSET_PARAMETER: np.asarray([theta4], np.float32)}
    for tensor in proto.graph.initializer:
        if tensor.name in older:
            tensor.CopyFrom(numpy_helper.from_array(older[tensor.name], tensor.name))
    path = tmp_path / "four-calibrated.onnx"
    onnx.save(proto, path)
    return str(path)


def test_a_file_calibrated_before_the_movers_term_loads_and_calibrates_again(tmp_path):
    """A file whose offset has four weights (the komi's and the wave's): torch reads them with the mover's at zero,
    and a fit added to them makes the offset's nodes anew with the six weights summed."""
    four = np.asarray(THETA[:4])
    path = four_weight_file(tmp_path, four)
    proto = onnx.load(path)
    assert len(calibrate.offset_of(proto)) == 4
    loaded = network.load_onnx(path)
    assert np.allclose(loaded.head.value_offset_small_boards.weight.detach().numpy()[0], list(four) + [0.0, 0.0])
    encoding = encoding_named(V2)
    komi, wave = encoding.plane_names.index("komi"), encoding.plane_names.index("komi_wave")
    bare = onnx.load(path)
    assert np.allclose(calibrate.remove_offset(bare), list(four) + [0.0, 0.0])
    assert calibrate.offset_of(bare) is None
    assert not [n for n in bare.graph.node if n.name.startswith(calibrate.NODE_PREFIX)]
    without = tmp_path / "without.onnx"
    onnx.save(bare, without)
    for size in (9, 13):  # the four-weight graph computes the komi's and the wave's terms, and torch agrees
        states = positions(size, 6.5)
        planes = encoding.encode_batch(states, None)
        features = calibrate.offset_features(planes[:, komi].mean(axis=(1, 2)), planes[:, wave].mean(axis=(1, 2)), size)
        moved = np.arctanh(values(path, states)) - np.arctanh(values(without, states))
        assert np.allclose(moved, features[:, :4] @ four, atol=1e-4), size
        with torch.no_grad():
            assert np.allclose(values(path, states), loaded(torch.from_numpy(planes))[1].numpy(), atol=1e-5)
    calibrate.add_offset(proto, np.asarray(THETA))
    out = tmp_path / "out.onnx"
    onnx.save(proto, out)
    total = np.asarray(list(four) + [0.0, 0.0]) + np.asarray(THETA)
    assert np.allclose(calibrate.offset_of(onnx.load(out)), total, atol=1e-6)
    for size in (9, 13):
        states = positions(size, 6.5)
        planes = encoding.encode_batch(states, None)
        features = calibrate.offset_features(planes[:, komi].mean(axis=(1, 2)), planes[:, wave].mean(axis=(1, 2)), size)
        moved = np.arctanh(values(out, states)) - np.arctanh(values(without, states))
        assert np.allclose(moved, features @ total, atol=1e-4), size
        with torch.no_grad():
            torch_value = network.load_onnx(out)(torch.from_numpy(planes))[1].numpy()
        assert np.allclose(values(out, states), torch_value, atol=1e-5)
    states = positions(19, 6.5)
    assert np.array_equal(values(without, states), values(out, states))


def test_quantizing_a_calibrated_file_keeps_its_offset(tmp_path):
    """The offset's nodes sit under /head/, which int8 quantization keeps fp32: the int8 file of a calibrated fp32
    file moves each value by the offset, as the fp32 file does, however far outside the calibration's range."""
    from tabula.tools.learn.export import calibration_planes, quantize_int8

    net = exported(tmp_path)
    proto = onnx.load(net)
    calibrate.add_offset(proto, np.asarray(THETA))
    calibrated = tmp_path / "calibrated.onnx"
    onnx.save(proto, calibrated)
    planes = {9: calibration_planes(9, 32, 1, "random", "", V2)}
    int8, calibrated_int8 = tmp_path / "int8.onnx", tmp_path / "calibrated-int8.onnx"
    quantize_int8(str(net), str(int8), planes)
    quantize_int8(str(calibrated), str(calibrated_int8), planes)
    assert [n for n in onnx.load(calibrated_int8).graph.node if n.name.startswith("/head/calibration/")]
    for size in (9, 13):
        states = positions(size, 7.5)
        _, encoded = raw_values(student(), states)
        encoding = encoding_named(V2)
        komi, wave = encoding.plane_names.index("komi"), encoding.plane_names.index("komi_wave")
        offset = calibrate.offset_features(encoded[:, komi].mean(axis=(1, 2)), encoded[:, wave].mean(axis=(1, 2)),
                                           size) @ np.asarray(THETA)
        moved = np.arctanh(values(calibrated_int8, states)) - np.arctanh(values(int8, states))
        assert np.allclose(moved, offset, atol=1e-4), size


def test_calibrate_writes_the_fitted_offset_and_keeps_the_measured_metadata(tmp_path, capsys):
    net = exported(tmp_path)
    games(tmp_path / "sgf", 9, 7.5, 6, "B")  # black wins every game: black to move must rise, white to move fall
    out, copy = tmp_path / "out.onnx", tmp_path / "copy.onnx"
    assert calibrate.main([str(tmp_path / "sgf"), "--sizes", "9", "--net", str(net), "--out", str(out),
                           "--net", str(exported(tmp_path, "twin.onnx")), "--out", str(copy)]) == 0
    printed = capsys.readouterr().out
    assert "| 9×9 | 7.5 | black |" in printed and "| 9×9 | 7.5 | white |" in printed
    metadata = {p.key: p.value for p in onnx.load(out).metadata_props}
    assert metadata["resign_winrate"] == "9:0.2" and "tabula calibrate" in metadata["provenance"]
    states = positions(9, 7.5)
    before, after = values(net, states), values(out, states)
    movers = np.asarray([s.to_move for s in states])
    assert np.all(after[movers == BLACK] > before[movers == BLACK])
    assert np.all(after[movers == WHITE] < before[movers == WHITE])
    assert np.array_equal(values(copy, states), after)  # every --net gets the same offset
    states = positions(19, 7.5)
    assert np.array_equal(values(net, states), values(out, states))
    # again from the calibrated file: the fit adds to the offset it has, no second one
    again = tmp_path / "again.onnx"
    assert calibrate.main([str(tmp_path / "sgf"), "--sizes", "9", "--net", str(out), "--out", str(again)]) == 0
    weight = [t for t in onnx.load(again).graph.initializer if t.name == calibrate.OFFSET_PARAMETER]
    assert len(weight) == 1
    nodes = [n for n in onnx.load(again).graph.node if n.name.startswith("/head/calibration/")]
    assert len(nodes) == len([n for n in onnx.load(out).graph.node if n.name.startswith("/head/calibration/")])


def test_an_offset_given_writes_what_the_fit_printed(tmp_path, capsys):
    """``--offset`` with the weights a fit printed makes the file the fit made, reading no games."""
    net = exported(tmp_path)
    games(tmp_path / "sgf", 9, 7.5, 6, "W")
    fitted, given = tmp_path / "fitted.onnx", tmp_path / "given.onnx"
    assert calibrate.main([str(tmp_path / "sgf"), "--sizes", "9", "--net", str(net), "--out", str(fitted)]) == 0
    out = capsys.readouterr().out
    printed = out.rsplit("mover x size term): ", 1)[1].split(";")[0]
    option = out.rsplit("takes it: ", 1)[1].split()[0]
    assert option == "--offset=" + ",".join(f"{float(w):.4f}" for w in printed.split(", "))
    assert calibrate.main([option, "--net", str(net), "--out", str(given)]) == 0
    weight = {path: calibrate.offset_of(onnx.load(path)) for path in (fitted, given)}
    assert np.allclose(weight[given], weight[fitted], atol=5e-5)  # printed to four decimals
    states = positions(9, 0.5)
    assert np.allclose(values(given, states), values(fitted, states), atol=1e-4)
    metadata = {p.key: p.value for p in onnx.load(given).metadata_props}
    assert metadata["resign_winrate"] == "9:0.2" and ") given" in metadata["provenance"]
    # weights that start with a minus, after a space as well as after "="; a file with an offset refuses them
    negative = tmp_path / "negative.onnx"
    assert calibrate.main(["--offset", "-0.0162,-0.0942,-0.2934,-0.1632", "--net", str(net), "--out",
                           str(negative)]) == 0
    assert "(-0.0162, -0.0942, -0.2934, -0.1632) given" in {p.key: p.value for p in
                                                            onnx.load(negative).metadata_props}["provenance"]
    assert np.allclose(calibrate.offset_of(onnx.load(negative)), [-0.0162, -0.0942, -0.2934, -0.1632, 0.0, 0.0])
    with pytest.raises(ValueError, match="weights"):
        calibrate.padded([0.1, 0.2, 0.3])
    assert calibrate.main(["--offset=0,0,0,0", "--net", str(negative), "--out", str(tmp_path / "twice.onnx")]) == 2
    assert "offset already" in capsys.readouterr().err and not (tmp_path / "twice.onnx").exists()


def test_calibrate_refuses_bad_input_with_a_message(tmp_path, capsys, tiny_aux_onnx):
    out = str(tmp_path / "o.onnx")
    with pytest.raises(SystemExit):
        calibrate.main([str(tmp_path), "--net", str(tmp_path / "missing.onnx"), "--out", out])
    assert "no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        calibrate.main([str(tmp_path), "--sizes", "19", "--net", str(tiny_aux_onnx), "--out", out])
    with pytest.raises(SystemExit):
        calibrate.main([str(tmp_path), "--net", str(tiny_aux_onnx), "--out", str(tiny_aux_onnx)])
    with pytest.raises(SystemExit):
        calibrate.main([str(tmp_path), "--net", str(tiny_aux_onnx)])
    with pytest.raises(SystemExit):
        calibrate.main([str(tmp_path), "--net", str(tiny_aux_onnx), "--out", str(tmp_path / "no" / "o.onnx")])
    assert "no such folder" in capsys.readouterr().err
    capsys.readouterr()
    assert calibrate.main([str(tmp_path), "--net", str(tiny_aux_onnx), "--out", out]) == 2
    assert "head" in capsys.readouterr().err
    (tmp_path / "junk.onnx").write_bytes(b"not a network")
    assert calibrate.main([str(tmp_path), "--net", str(tmp_path / "junk.onnx"), "--out", out]) == 2
    assert "junk.onnx" in capsys.readouterr().err
    for offset in ("1,2,3", "1,2,3,x", "1,2,3,nan", "1,2,3,4,5"):
        with pytest.raises(SystemExit):
            calibrate.main(["--offset", offset, "--net", str(tiny_aux_onnx), "--out", out])
        assert "six comma-separated numbers" in capsys.readouterr().err
    for extra in ([str(tmp_path)], ["--sizes", "9"], ["--max-games", "5"]):
        with pytest.raises(SystemExit):
            calibrate.main([*extra, "--offset", "0,0,0,0", "--net", str(tiny_aux_onnx), "--out", out])
        assert "not both" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        calibrate.main(["--net", str(tiny_aux_onnx), "--out", out])
    assert "SOURCES" in capsys.readouterr().err
    net = exported(tmp_path)
    assert calibrate.main([str(tmp_path), "--sizes", "9", "--net", str(net), "--out", out]) == 2
    assert "no position" in capsys.readouterr().err
    assert calibrate.main(["--offset", "0,0,0,0", "--net", str(tiny_aux_onnx), "--out", out]) == 2
    assert "head" in capsys.readouterr().err
    assert not (tmp_path / "o.onnx").exists()
