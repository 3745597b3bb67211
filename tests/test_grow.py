"""A larger student grown from a smaller one, computing the same function (tools/learn/grow.py, distill --init)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tabula.engine.net import features  # noqa: E402
from tabula.engine.net.encodings import TABULA_V2, encoding_named  # noqa: E402
from tabula.engine.net.network import POOLED, NetSpec, export_onnx, random_network  # noqa: E402
from tabula.tools.learn import distill, grow, transfer  # noqa: E402
from tests.conftest_network import random_game  # noqa: E402

SMALL = NetSpec(blocks=2, filters=8, head=POOLED, aux=True, head_channels=4, value_hidden=8,
                input_encoding=TABULA_V2)
LARGE = replace(SMALL, blocks=5, filters=13)


def planes(seed: int = 11) -> torch.Tensor:
    states = random_game(9, 60, seed=seed)[10::6]
    return torch.from_numpy(encoding_named(TABULA_V2).encode_batch(states, None))


def small_network():
    return random_network(SMALL, seed=3, calibration=[planes(5).numpy()])


def assert_same_outputs(a, b, x, atol=1e-4):
    with torch.no_grad():
        for want, got in zip(a(x), b(x)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), atol=atol)


def test_the_grown_network_computes_its_source():
    source = small_network().eval()
    target = grow.grown(source, LARGE, seed=1).eval()
    assert (target.spec.blocks, target.spec.filters) == (5, 13)
    assert_same_outputs(source, target, planes())


def test_in_training_mode_too_the_batch_statistics_of_a_copy_are_its_originals():
    source = small_network().train()
    target = grow.grown(source, LARGE, seed=1).train()
    assert_same_outputs(source, target, planes(), atol=2e-4)


def test_wider_only_and_deeper_only():
    source = small_network().eval()
    x = planes()
    for spec in (replace(SMALL, filters=16), replace(SMALL, blocks=4)):
        assert_same_outputs(source, grow.grown(source, spec).eval(), x)


def test_copies_do_not_stay_copies():
    """A copied channel's outgoing weights are split unequally, so the copies get different gradients."""
    source = small_network()
    target = grow.grown(source, replace(SMALL, filters=16), seed=2)
    first = target.tower[0].first.conv.weight  # reads the trunk: channel 8 copies channel 0
    ratio = (first[:, 8] / first[:, 0]).flatten()
    assert torch.allclose(ratio, ratio[0].expand_as(ratio))  # one share each, over the whole kernel
    assert not torch.allclose(first[:, 8], first[:, 0])
    # the copies' weights and their original's sum to what the original read
    np.testing.assert_allclose((first[:8, 8] + first[:8, 0]).detach().numpy(),
                               source.tower[0].first.conv.weight[:, 0].detach().numpy(), rtol=1e-5, atol=1e-7)


def test_the_new_blocks_start_as_the_identity_and_can_learn():
    target = grow.grown(small_network(), replace(SMALL, blocks=4))
    new = [i for i, block in enumerate(target.tower) if float(block.second.bn.weight.detach().abs().sum()) == 0.0]
    assert new == [1, 3]  # spread among the old blocks, not stacked at the end
    assert all(float(target.tower[i].first.conv.weight.detach().abs().sum()) > 0 for i in new)


def test_only_a_larger_network_of_the_same_kind_grows():
    assert grow.can_grow(SMALL, LARGE)
    assert not grow.can_grow(SMALL, SMALL)  # nothing to grow: the same network loads as it is
    assert not grow.can_grow(LARGE, SMALL)
    assert not grow.can_grow(SMALL, replace(SMALL, blocks=4, filters=6))  # wider in one, narrower in the other
    assert not grow.can_grow(SMALL, replace(LARGE, head_channels=8))  # the heads keep their widths
    assert not grow.can_grow(SMALL, replace(LARGE, input_encoding=features.KOMI_INPUT_ENCODING))
    with pytest.raises(ValueError, match="cannot grow a 5x13 network of tabula-v2 into a 2x8"):
        grow.grown(random_network(LARGE, seed=1), SMALL)


def test_distill_init_grows_an_onnx_student_and_transfers_then_grows_a_leelaz_network(tmp_path):
    source = small_network()
    path = str(tmp_path / "small.onnx")
    export_onnx(source, path, provenance="test")
    student = distill.initial_student(path, LARGE)
    assert (student.spec.blocks, student.spec.filters) == (5, 13)
    assert_same_outputs(source.eval(), student.eval(), planes())
    # a leelaz-18+komi network of a smaller trunk: mapped onto the student's inputs, then grown
    leelaz = replace(SMALL, input_encoding=features.KOMI_INPUT_ENCODING)
    states = random_game(9, 40, seed=5)[10::6]
    old = random_network(leelaz, seed=4, calibration=[features.encode_batch_with_komi(states)])
    old_path = str(tmp_path / "leelaz.onnx")
    export_onnx(old, old_path, provenance="test")
    student = distill.initial_student(old_path, LARGE).eval()
    mapped = transfer.transferred(distill.load_network(old_path, averaged=False), SMALL).eval()
    assert_same_outputs(mapped, student, planes())
    with pytest.raises(SystemExit, match="neither a 1x8 student"):
        distill.initial_student(path, replace(SMALL, blocks=1))
