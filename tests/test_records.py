"""Reading game records: every archive kind, exact counts per drop reason, results, dedup and the split."""
import hashlib

import numpy as np
import pytest

from tabula.engine.data.records import (
    DRAW,
    FORFEIT,
    REASONS,
    RESIGN,
    SCORE,
    TIME,
    RecordError,
    RecordFilter,
    is_validation,
    iter_records,
    iter_sgf_files,
    parse_record,
    parse_result,
)
from tabula.engine.rules.coords import BLACK, PASS, WHITE
from tests.records_helpers import game_sgf, handicap_sgf, play_game, sample_records, write_archives


@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    files, expected, kept = sample_records()
    return write_archives(str(tmp_path_factory.mktemp("records")), files), files, expected, kept


@pytest.mark.parametrize("kind", ["folder", "tar.gz", "tar.xz", "zip"])
def test_every_archive_kind_gives_the_same_exact_counts(archives, kind):
    paths, files, expected, kept = archives
    reader, records = iter_records([paths[kind]])
    records = list(records)
    report = reader.report
    assert report.read == len([n for n in files if n.endswith(".sgf")])
    assert {reason: report.dropped[reason] for reason in REASONS} == expected
    assert report.kept == kept == len(records)
    assert dict(report.no_value) == {"time": 1, "forfeit": 1}
    assert report.moves == sum(len(r.moves) for r in records)
    assert "games kept" in report.format()


def test_sgf_files_are_streamed_from_archives_without_non_sgf_members(archives):
    paths, files, _, _ = archives
    names = sorted(name.rsplit("/", 1)[-1] for name, _ in iter_sgf_files(paths["tar.xz"]))
    assert names == sorted(n for n in files if n.endswith(".sgf"))


def test_max_games_counts_kept_games(archives):
    paths = archives[0]
    reader, records = iter_records([paths["zip"], paths["folder"]], max_games=3)
    assert len(list(records)) == 3 and reader.report.kept == 3


def test_the_same_games_in_two_archives_are_read_once(archives):
    paths, _, _, kept = archives
    reader, records = iter_records([paths["tar.gz"], paths["zip"]])
    assert len(list(records)) == kept
    assert reader.report.dropped["duplicate"] == 1 + (kept + 1)  # the second archive holds dup.sgf too


@pytest.mark.parametrize("text, expected", [
    ("B+R", (BLACK, RESIGN)), ("W+Resign", (WHITE, RESIGN)), ("B+T", (BLACK, TIME)), ("W+Time", (WHITE, TIME)),
    ("B+F", (BLACK, FORFEIT)), ("W+Forfeit", (WHITE, FORFEIT)), ("B+3.5", (BLACK, SCORE)), ("w+0.5", (WHITE, SCORE)),
    ("0", (0, DRAW)), ("Draw", (0, DRAW)),
])
def test_results(text, expected):
    assert parse_result(text) == expected


@pytest.mark.parametrize("text, reason", [(None, "no result"), ("", "no result"), ("?", "no result"),
                                          ("Void", "no result"), ("B+lots", "unparseable result"),
                                          ("black won", "unparseable result")])
def test_bad_results(text, reason):
    with pytest.raises(RecordError) as error:
        parse_result(text)
    assert error.value.reason == reason


def test_a_record_replays_to_the_game_it_describes():
    moves = play_game(3, moves=50)
    record = parse_record("x", game_sgf(moves + [PASS], result="W+2.5"))
    assert [m for _, m in record.moves] == moves + [PASS]
    assert [c for c, _ in record.moves[:4]] == [BLACK, WHITE, BLACK, WHITE]
    assert record.winner == WHITE and record.value_weight == 1.0 and record.komi == 6.5
    state = record.replay(upto=10)
    assert len(state.moves) == 10 and state.to_move == BLACK


def test_tt_is_a_pass_on_19x19():
    data = game_sgf(play_game(4, moves=40)).replace(b")", b";B[tt];W[])")
    record = parse_record("x", data)
    assert [m for _, m in record.moves[-2:]] == [PASS, PASS]


def test_handicap_games_can_be_kept_for_the_policy_only():
    with pytest.raises(RecordError):
        parse_record("h", handicap_sgf(5))
    record = parse_record("h", handicap_sgf(5), RecordFilter(handicap="policy"))
    assert record.handicap == 2 and len(record.setup) == 2 and record.value_weight == 0.0
    assert record.moves[0][0] == WHITE
    assert record.replay().color_at(15 * 19 + 3) == BLACK


def test_unknown_results_can_be_kept_without_a_value_target():
    record = parse_record("n", game_sgf(play_game(6), result=None), RecordFilter(require_result=False))
    assert record.value_weight == 0.0 and record.winner == 0


def test_garbage_never_raises_anything_but_record_error():
    for data in [b"", b"(", b"(;SZ[19]", b"(;SZ[abc];B[aa])", b"(;SZ[19]KM[x]RE[B+R];B[aa])", b"\xff\xfe(;)",
                 b"(;SZ[19]RE[B+R];B[zz])", b"(;SZ[19]RE[B+R]HA[x];B[aa])", b"(;SZ[30]RE[B+R];B[aa])"]:
        with pytest.raises(RecordError):
            parse_record("bad", data)


@pytest.mark.parametrize("data, reason", [
    (b"(;SZ[26]RE[B+R];B[aa])", "other board size"),  # sgfmill reads it; Tabula does not play it
    (b"(;SZ[19]RE[B+R]AE[aa];B[aa])", "handicap or setup stones"),
    (b"(;SZ[19]RE[B+R];B[aa];AB[bb];W[cc])", "handicap or setup stones"),  # setup after the first move
])
def test_what_the_sgf_reader_refuses_keeps_its_drop_reason(data, reason):
    for rules in (RecordFilter(min_moves=1), RecordFilter(min_moves=1, handicap="policy")):
        with pytest.raises(RecordError) as error:
            parse_record("x", data, rules)
        assert error.value.reason == reason


def test_split_is_deterministic_and_near_the_fraction():
    games = [game_sgf(play_game(100 + i, moves=30, random_opening=30)) for i in range(80)]
    keys = [parse_record(f"g{i}", data).key() for i, data in enumerate(games)]
    assert keys == [parse_record(f"other{i}", data).key() for i, data in enumerate(games)]
    assert len(set(keys)) == len(keys)
    assert not any(is_validation(key, 0.0) for key in keys)
    many = [hashlib.blake2b(b"%d" % i, digest_size=16).digest() for i in range(10000)]
    assert 900 <= sum(is_validation(key, 0.1) for key in many) <= 1100


# -- counted margins and final ownership (the score and ownership targets) ----------------------------------------


def test_result_margin_is_blacks_margin_for_counted_games_only():
    import math

    from tabula.engine.data.records import result_margin
    assert result_margin("B+3.5") == 3.5
    assert result_margin("W+0.5") == -0.5
    assert result_margin("0") == 0.0
    for text in ("B+R", "W+T", "B+F", "W+", None, "Void", "nonsense"):
        assert math.isnan(result_margin(text))


def _walls_record(result: str):
    """7x7: black's wall on column D, white's on column E; black owns A-D (28 points), white E-G (21)."""
    from tabula.engine.rules.coords import from_rowcol
    moves = []
    for row in range(7):
        moves += [from_rowcol((row, 3), 7), from_rowcol((row, 4), 7)]
    return parse_record("walls", game_sgf(moves, size=7, result=result, komi=0.5), RecordFilter(size=7, min_moves=1))


def test_final_ownership_labels_a_finished_game_that_agrees_with_its_result():
    import random

    from tabula.engine.data.records import final_ownership
    record = _walls_record("B+6.5")
    assert record.margin == 6.5
    labels = final_ownership(record, random.Random(0))
    expected = np.array([1 if x <= 3 else -1 for y in range(7) for x in range(7)], dtype=np.int8)
    assert np.array_equal(labels, expected)


def test_final_ownership_is_withheld_when_the_count_disagrees_with_the_result():
    import random

    from tabula.engine.data.records import final_ownership
    assert final_ownership(_walls_record("W+12.5"), random.Random(0)) is None
    assert final_ownership(_walls_record("B+R"), random.Random(0)) is None
