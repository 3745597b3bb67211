"""A student of KataGo's inputs started from a network of Leela Zero's (tools/learn/transfer.py, distill --init)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tabula.engine.net import features  # noqa: E402
from tabula.engine.net.encodings import TABULA_V2, encoding_named  # noqa: E402
from tabula.engine.net.network import POOLED, NetSpec, export_onnx, random_network  # noqa: E402
from tabula.tools.learn import distill, transfer  # noqa: E402
from tests.conftest_network import random_game  # noqa: E402

SOURCE = NetSpec(blocks=2, filters=16, head=POOLED, aux=True, head_channels=8, value_hidden=16,
                 input_encoding=features.KOMI_INPUT_ENCODING)
TARGET = NetSpec(blocks=2, filters=16, head=POOLED, aux=True, head_channels=8, value_hidden=16,
                 input_encoding=TABULA_V2)


def source_network():
    states = random_game(9, 40, seed=5)[10::6]
    model = random_network(SOURCE, seed=3, calibration=[features.encode_batch_with_komi(states)])
    with torch.no_grad():  # what the target has no place for: the side to move, the head's komi terms
        weight = model.input.conv.weight
        weight[:, 17] = weight[:, 16]
        model.input_komi.weight.normal_(0.0, 0.3)
        model.head.value_komi.weight.zero_()
    return model


def test_the_transferred_network_computes_its_source_where_the_history_is_the_present():
    source = source_network()
    target = transfer.transferred(source, TARGET).eval()
    states = random_game(9, 60, seed=11)[20::8]
    planes = features.encode_batch_with_komi(states)
    # every history plane the present one: what the sums of the history weights stand for
    planes[:, 1:8] = planes[:, 0:1]
    planes[:, 9:16] = planes[:, 8:9]
    v2 = encoding_named(TABULA_V2).encode_batch(states, None)
    with torch.no_grad():
        want = source(torch.from_numpy(planes))
        got = target(torch.from_numpy(v2))
    for a, b in zip(want, got):
        np.testing.assert_allclose(b.numpy(), a.numpy(), atol=2e-4)
    # the planes the source never saw start at zero weight
    weight = target.input.conv.weight
    used = [TARGET.encoding.plane_names.index(name) for name in ("on_board", "own_stones", "opp_stones", "komi")]
    others = [i for i in range(TARGET.encoding.planes) if i not in used]
    assert float(weight[:, others].abs().max()) == 0.0
    assert all(float(weight[:, i].abs().sum()) > 0 for i in used)


def test_only_a_leelaz_network_of_the_same_trunk_transfers():
    assert transfer.can_transfer(SOURCE, TARGET)
    assert not transfer.can_transfer(SOURCE, NetSpec(blocks=3, filters=16, head=POOLED, aux=True, head_channels=8,
                                                     value_hidden=16, input_encoding=TABULA_V2))
    assert not transfer.can_transfer(TARGET, TARGET)  # nothing to map: same encoding loads as it is
    with pytest.raises(ValueError, match="cannot start a 2x16 network of tabula-v2 from a 2x16 pooled network "
                                         "of tabula-v2"):
        transfer.transferred(random_network(TARGET, seed=1), TARGET)


def test_distill_init_takes_an_onnx_network_and_transfers_it(tmp_path):
    source = source_network()
    path = str(tmp_path / "source.onnx")
    export_onnx(source, path, provenance="test")
    student = distill.initial_student(path, TARGET)
    assert student.spec.input_encoding == TABULA_V2
    want = transfer.transferred(source, TARGET).state_dict()
    for name, value in student.state_dict().items():
        if name.startswith("head.reply_") or name.endswith("num_batches_tracked"):
            continue  # training only: never in an ONNX file
        assert torch.equal(value, want[name]), name
    # the same architecture and encoding loads as it is
    same = str(tmp_path / "student.onnx")
    export_onnx(student, same, provenance="test")
    again = distill.initial_student(same, TARGET)
    assert all(torch.equal(v, student.state_dict()[k]) for k, v in again.state_dict().items()
               if not k.startswith("head.reply_") and not k.endswith("num_batches_tracked"))
    with pytest.raises(SystemExit, match="neither a 1x16 student"):  # a smaller trunk: nothing to grow
        distill.initial_student(path, NetSpec(blocks=1, filters=16, head=POOLED, aux=True, head_channels=8,
                                              value_hidden=16, input_encoding=TABULA_V2))
    with pytest.raises(SystemExit, match="--init"):
        distill.initial_student(str(tmp_path / "missing.pt"), TARGET)
