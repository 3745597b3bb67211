"""The head's komi (``NetSpec.head_komi``): zero at first, so that a student given it computes what it computed;
the score moves point for point through it at every size; ONNX files carry it; new distill students have it."""
from __future__ import annotations

import functools

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tabula.engine.net import features  # noqa: E402
from tabula.engine.net.encodings import encoding_named  # noqa: E402
from tabula.engine.net.network import (  # noqa: E402
    POOLED,
    NetSpec,
    TabulaNet,
    export_onnx,
    load_onnx,
    save_checkpoint,
)
from tabula.engine.rules.game import Rules  # noqa: E402
from tabula.tools.learn import distill  # noqa: E402
from tests.conftest_network import random_game  # noqa: E402

V2 = "tabula-v2"


def student(head_komi: bool, seed: int = 0) -> TabulaNet:
    torch.manual_seed(seed)
    model = TabulaNet(NetSpec(blocks=1, filters=8, head=POOLED, aux=True, input_encoding=V2, head_komi=head_komi))
    for module in model.modules():  # batch norms that are not the identity, so that the test sees the general case
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 2.0)
    return model.eval()


_ENCODED: dict[int, np.ndarray] = {}  # the planes of positions_at's tuples, by identity: encoding is the slow part


@functools.lru_cache(maxsize=None)
def positions_at(size: int, komi: float) -> tuple:
    states = random_game(size, 12, seed=size)[::4]
    for state in states:
        state.rules = Rules(komi=komi, superko=state.rules.superko)
    return tuple(states)


def outputs(model: TabulaNet, states: tuple) -> tuple[torch.Tensor, ...]:
    if id(states) not in _ENCODED:
        _ENCODED[id(states)] = encoding_named(V2).encode_batch(list(states), None)
    with torch.no_grad():
        return model(torch.from_numpy(_ENCODED[id(states)]))


def test_a_network_given_the_heads_komi_computes_what_it_computed():
    old = student(head_komi=False)
    extended = distill.with_head_komi(old)
    assert extended.spec.head_komi and not old.spec.head_komi
    for size in (9, 19):
        for before, after in zip(outputs(old, positions_at(size, 7.5)), outputs(extended, positions_at(size, 7.5))):
            assert torch.equal(before, after)


def test_the_score_moves_point_for_point_through_it_at_every_size():
    zero = student(head_komi=True)
    unit = student(head_komi=True)
    scaled = student(head_komi=True)
    with torch.no_grad():
        unit.head.score_head_komi.weight.copy_(torch.tensor([[1.0, 0.0]]))
        scaled.head.score_head_komi.weight.copy_(torch.tensor([[0.0, 1.0]]))
    for size in (9, 13, 19):
        for komi in (-3.0, 7.5, 15.0):
            states = positions_at(size, komi)
            stm_komi = torch.tensor([features.komi_points(s) for s in states])
            base, moved = outputs(zero, states), outputs(unit, states)
            assert torch.allclose(moved[2] - base[2], stm_komi, atol=1e-4)
            assert torch.allclose(outputs(scaled, states)[2] - base[2], stm_komi * (size - 14) / 10, atol=1e-4)
            assert torch.equal(moved[1], base[1])  # the score's path leaves the value alone


def test_the_value_reads_the_komi_and_its_parity_wave():
    zero = student(head_komi=True)
    wave_only = student(head_komi=True)
    komi_only = student(head_komi=True)
    with torch.no_grad():
        wave_only.head.value_head_komi.weight[:, 2:].normal_()  # the wave and its size-scaled copy
        komi_only.head.value_head_komi.weight[:, :2].normal_()
    # on 9x9 under area scoring the wave is 0 at komi 7 (a draw possible) and 0.5 either way at 6.5 and 7.5
    drawable, between = positions_at(9, 7.0), positions_at(9, 7.5)
    assert torch.equal(outputs(wave_only, drawable)[1], outputs(zero, drawable)[1])
    assert not torch.allclose(outputs(wave_only, between)[1], outputs(zero, between)[1])
    assert not torch.allclose(outputs(komi_only, drawable)[1], outputs(zero, drawable)[1])


def test_onnx_files_carry_it(tmp_path):
    model = student(head_komi=True)
    with torch.no_grad():
        model.head.value_head_komi.weight.normal_()
        model.head.score_head_komi.weight.copy_(torch.tensor([[1.0, 0.5]]))
    path = tmp_path / "student.onnx"
    export_onnx(model, path, "test", board_sizes=[9, 19])  # checks onnxruntime against torch
    back = load_onnx(path)
    assert back.spec.head_komi
    for a, b in zip(outputs(model, positions_at(9, 7.5)), outputs(back, positions_at(9, 7.5))):
        assert torch.equal(a, b)


def test_the_spec_refuses_it_where_there_is_no_komi_global_and_old_files_read_without_it():
    with pytest.raises(ValueError, match="komi"):
        NetSpec(head=POOLED, input_encoding="leelaz-18", head_komi=True)
    plain = NetSpec(head=POOLED, aux=True, input_encoding=V2)
    assert "head_komi" not in plain.to_dict()  # an older network's metadata stays as it was
    assert NetSpec.from_dict(plain.to_dict()).head_komi is False
    assert NetSpec.from_dict(NetSpec(head=POOLED, input_encoding=V2, head_komi=True).to_dict()).head_komi


def test_a_new_student_has_it_and_starts_from_a_network_without_it(tmp_path):
    config = distill.DistillConfig(teacher="t.onnx", run=str(tmp_path), student_arch="1x8")
    assert distill.student_spec(config).head_komi
    old = student(head_komi=False)
    save_checkpoint(old, tmp_path / "old.pt")
    started = distill.initial_student(str(tmp_path / "old.pt"), distill.student_spec(config)).eval()
    assert started.spec.head_komi
    for before, after in zip(outputs(old, positions_at(13, 6.5)), outputs(started, positions_at(13, 6.5))):
        assert torch.equal(before, after)
    grown = distill.initial_student(str(tmp_path / "old.pt"),
                                    distill.student_spec(distill.DistillConfig(teacher="t", run="r",
                                                                               student_arch="2x16"))).eval()
    assert grown.spec.head_komi and grown.spec.blocks == 2
    for before, after in zip(outputs(old, positions_at(9, 7.5)), outputs(grown, positions_at(9, 7.5))):
        assert torch.allclose(before, after, atol=1e-4)
    assert np.isfinite(outputs(grown, positions_at(19, 0.5))[2].numpy()).all()


@pytest.mark.slow
def test_a_run_begun_before_the_head_read_the_komi_goes_on_without_it(tiny_aux_onnx, tmp_path, monkeypatch):
    from dataclasses import replace

    from tests.test_distill import run_config

    new_spec = distill.student_spec
    monkeypatch.setattr(distill, "student_spec", lambda config: replace(new_spec(config), head_komi=False))
    distill.distill(run_config(tiny_aux_onnx, tmp_path / "run", chunks=1), log=lambda *_: None)
    monkeypatch.setattr(distill, "student_spec", new_spec)
    assert distill.distill(run_config(tiny_aux_onnx, tmp_path / "run", chunks=2), log=lambda *_: None)["step"] == 4
    before = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)
    assert not NetSpec.from_dict(before["spec"]).head_komi
    assert not any("head_komi" in name for name in before["state_dict"])
    # told to, a resume adds the paths, zero: at the chunk it has reached it trains nothing and keeps the rest
    distill.distill(run_config(tiny_aux_onnx, tmp_path / "run", chunks=2, add_head_komi=True), log=lambda *_: None)
    added = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)
    assert NetSpec.from_dict(added["spec"]).head_komi
    for name, tensor in added["state_dict"].items():
        if "head_komi" in name:
            assert not tensor.any()
        else:
            assert torch.equal(tensor, before["state_dict"][name]), name
    assert distill.distill(run_config(tiny_aux_onnx, tmp_path / "run", chunks=3), log=lambda *_: None)["step"] == 6
    trained = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)
    assert trained["state_dict"]["head.score_head_komi.weight"].any()  # the optimizer steps the new weights


def test_the_forward_makes_no_tensor_from_host_data():
    """The torch backend captures the forward in a CUDA graph, which refuses a copy from the host: the komi planes
    are read through an index on the module's device, where a Python list would make a host tensor at every call
    (aten.lift_fresh, then aten.index)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.append(str(func))
            return func(*args, **(kwargs or {}))

    model = student(head_komi=True)
    planes = torch.from_numpy(encoding_named(V2).encode_batch(list(positions_at(9, 7.5)), None))
    with torch.inference_mode(), Ops() as ops:
        model(planes)
    assert any("mean" in name for name in ops.names)  # the mode saw the forward's operators
    assert not [name for name in ops.names if "lift_fresh" in name or name.startswith("aten.index.")]


def test_an_int8_file_keeps_the_komi_path_in_fp32(tmp_path):
    """int8 quantization reaches the operators before the head that the file's graph gives it (a slice, a
    concatenation): the komi's Gather and mean stay fp32, so the score moves point for point even beyond the komis
    calibration saw (20 points)."""
    import onnxruntime as ort

    from tabula.tools.learn.export import calibration_planes, quantize_int8

    model = student(head_komi=True)
    with torch.no_grad():
        model.head.score_head_komi.weight.copy_(torch.tensor([[1.0, 0.0]]))
        model.head.value_head_komi.weight.normal_(generator=torch.Generator().manual_seed(1))
    fp32, int8 = str(tmp_path / "fp32.onnx"), str(tmp_path / "int8.onnx")
    export_onnx(model, fp32, "test", board_sizes=[9], check=False)
    quantize_int8(fp32, int8, {9: calibration_planes(9, 32, 1, "random", "", V2)})
    sessions = [ort.InferenceSession(path, providers=["CPUExecutionProvider"]) for path in (fp32, int8)]
    for komi in (7.5, 30.0, -25.0):
        planes = encoding_named(V2).encode_batch(list(positions_at(9, komi)), None)
        exact, quantized = (session.run(["score"], {"planes": planes})[0] for session in sessions)
        assert np.abs(exact - quantized).max() < 0.05, komi


def test_an_init_that_is_no_student_is_refused_with_a_message(tmp_path):
    """--init of a network without the komi planes that cannot become the student (an agz head, a pooled head of
    other widths, another game) gets distill's message, not the spec's error about the head's komi."""
    from tabula.engine.net.network import AGZ

    spec = distill.student_spec(distill.DistillConfig(teacher="t.onnx", run=str(tmp_path), student_arch="1x8"))
    for name, other in (("agz", NetSpec(blocks=1, filters=8, head=AGZ, board_size=9)),
                        ("narrow", NetSpec(blocks=1, filters=8, head=POOLED, head_channels=8)),
                        ("gomoku", NetSpec(blocks=1, filters=8, head=POOLED, input_encoding="gomoku-4"))):
        save_checkpoint(TabulaNet(other), tmp_path / f"{name}.pt")
        with pytest.raises(SystemExit, match="neither a 1x8 student"):
            distill.initial_student(str(tmp_path / f"{name}.pt"), spec)
