"""The kata-raw-nn comparison tool: case files, reply parsing, differences and the agreement bars."""
from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pytest

from tabula.tools.check import raw_nn_compare as rc

DATA = Path(__file__).parent / "data" / "katago"
REFERENCE = DATA / "raw-nn-b10c384-200.txt.xz"


@pytest.fixture(scope="module")
def reference():
    with rc.open_text(str(REFERENCE)) as handle:
        return rc.read_cases(handle.read())


def test_the_stored_reference_covers_what_the_agreement_check_asks(reference):
    _, cases = reference
    assert len(cases) == 200
    assert all(case.reply for case in cases)
    assert {case.size for case in cases} == {9, 13, 19}
    assert {case.rules for case in cases} == {"chinese", "japanese", "tromp-taylor"}
    komis = {float(c.split()[1]) for case in cases for c in case.commands if c.startswith("komi ")}
    assert min(komis) == 0.5 and max(komis) == 7.5
    tags = {tag for case in cases for tag in case.tags}
    assert {"record", "play", "ko", "atari", "handicap"} <= tags
    assert any(c.startswith("set_free_handicap") for case in cases for c in case.commands)


def test_case_files_round_trip(reference):
    header, cases = reference
    out = io.StringIO()
    rc.write_cases(header, cases[:5], out)
    again_header, again = rc.read_cases(out.getvalue())
    assert again_header == header
    assert [(c.commands, c.query, c.reply, c.tags) for c in again] == \
        [(c.commands, c.query, c.reply, c.tags) for c in cases[:5]]


def test_a_case_without_its_end_line_is_refused():
    with pytest.raises(ValueError, match="end"):
        rc.read_cases("boardsize 9\nkata-raw-nn 0\n")
    with pytest.raises(ValueError, match="kata-raw-nn"):
        rc.read_cases("boardsize 9\nend\n")


def test_a_reply_parses_into_katagos_fields(reference):
    _, cases = reference
    case = cases[0]
    outputs = rc.parse_reply(case.reply, case.size)
    assert outputs.policy.shape == (case.size, case.size)
    assert outputs.ownership.shape == (case.size, case.size)
    assert math.isclose(outputs.scalars["whiteWin"] + outputs.scalars["whiteLoss"] + outputs.scalars["noResult"],
                        1.0, abs_tol=1e-5)
    legal = outputs.policy_vector()[~np.isnan(outputs.policy_vector())]
    assert math.isclose(legal.sum(), 1.0, abs_tol=1e-3)
    # occupied points are NaN: as many as there are stones on the board
    assert np.isnan(outputs.policy).sum() > 0 or len([c for c in case.commands if c.startswith("play")]) == 0
    cut = case.reply[: case.reply.index("policy") + 3]  # a reply that ends inside the policy rows
    with pytest.raises(ValueError, match="ends inside"):
        rc.parse_reply(cut, case.size)


def test_differences_and_bars(reference):
    _, cases = reference
    case = cases[3]
    ours = rc.parse_reply(case.reply, case.size)
    same = rc.difference(ours, rc.parse_reply(case.reply, case.size))
    assert same.same_top and same.policy == 0 and same.white_win == 0 and not same.legal_differs

    changed = rc.parse_reply(case.reply, case.size)
    vector = changed.policy_vector()
    legal = np.flatnonzero(~np.isnan(vector))
    lowest = legal[np.argmin(vector[legal])]
    if lowest == len(vector) - 1:
        changed.policy_pass = 2.0
    else:
        changed.policy.reshape(-1)[lowest] = 2.0  # now the top move
    changed.scalars["whiteLead"] += 0.5
    diff = rc.difference(ours, changed)
    assert not diff.same_top and diff.policy > 1.0 and diff.white_lead == pytest.approx(0.5)

    summary = rc.summarize([(case, same)] * 99 + [(case, diff)])
    assert summary["overall"]["same_top"] == 99
    assert not summary["passes"]  # one position 0.5 points off in the lead
    assert rc.summarize([(case, same)] * 10)["passes"]


def test_an_illegal_point_on_one_side_only_fails_the_bars(reference):
    _, cases = reference
    case = next(c for c in cases if any(line.startswith("play") for line in c.commands))
    ours = rc.parse_reply(case.reply, case.size)
    other = rc.parse_reply(case.reply, case.size)
    other.policy[np.isnan(other.policy)] = 0.0  # an occupied point called legal
    diff = rc.difference(ours, other)
    assert diff.legal_differs
    assert not rc.summarize([(case, diff)])["passes"]


STORED = {  # the stored reference -> the KataGo model file it was recorded with
    "raw-nn-b10c384-200.txt.xz": "b10c384h6nbttflrs.bin.gz",
    "raw-nn-b15c192-200.txt.xz": "g170e-b15c192-s1672170752-d466197061.bin.gz",
}


@pytest.mark.slow
@pytest.mark.parametrize("stored", sorted(STORED))
def test_tabula_on_katagos_network_meets_the_agreement_bars(stored):
    """The whole engine (KataGo's inputs, the converted network, kata-raw-nn over GTP) against KataGo 1.17.2's own
    replies on 200 positions, for the katrain networks where the model file is present."""
    import os
    import sys

    from tests.katago_reference import MODELS_DIR

    model = os.path.join(MODELS_DIR, STORED[stored])
    if not os.path.isfile(model):
        pytest.skip(f"no KataGo model file {model} (set TABULA_KATAGO_MODELS)")
    with rc.open_text(str(DATA / stored)) as handle:
        _, cases = rc.read_cases(handle.read())
    replies = rc.run_cases([sys.executable, "-m", "tabula.gtp", "--weights", model], cases, timeout_s=300)
    rows = [(c, rc.difference(rc.parse_reply(c.reply, c.size), rc.parse_reply(r, c.size)))
            for c, r in zip(cases, replies)]
    summary = rc.summarize(rows)
    assert summary["passes"], summary["overall"]
