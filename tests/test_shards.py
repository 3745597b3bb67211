"""Shards: the round trip of games through the file format, and the positions and targets the sampler builds."""
import numpy as np
import pytest

from tabula.engine.data.records import RecordFilter, parse_record
from tabula.engine.data.shards import (
    GAME_DTYPE,
    PositionSampler,
    ShardError,
    decode_move,
    encode_move,
    read_shard,
    shard_paths,
    write_shard,
)
from tabula.engine.net.features import NUM_SYMMETRIES, encode, transform_planes, transform_policy
from tabula.engine.rules.coords import BLACK, PASS, WHITE
from tests.records_helpers import game_sgf, handicap_sgf, learnable_records, play_game


@pytest.fixture(scope="module")
def records():
    games = learnable_records(12, moves=45)
    games.append(parse_record("h", handicap_sgf(7), RecordFilter(handicap="policy")))
    games.append(parse_record("p", game_sgf(play_game(8, moves=40) + [PASS, PASS], result="0")))
    return games


@pytest.fixture(scope="module")
def shard(records, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("shards") / "train-0000.tshard")
    write_shard(path, records)
    return path


def test_moves_encode_to_uint16_and_back():
    for color in (BLACK, WHITE):
        for move in (0, 18, 360, PASS):
            code = encode_move(color, move, 19)
            assert 0 <= code < 2 ** 16 and decode_move(code, 19) == (color, move)
    assert encode_move(BLACK, PASS, 25) == 625


def test_round_trip_keeps_every_game(records, shard):
    header, games, moves = read_shard(shard)
    assert header["games"] == len(records) and games.dtype == GAME_DTYPE
    for row, record in zip(games, records):
        offset, setup = int(row["offset"]), int(row["setup"])
        decoded = [decode_move(int(c), 19) for c in moves[offset + setup: offset + setup + int(row["moves"])]]
        assert decoded == record.moves
        assert [decode_move(int(c) & 0x7FFF, 19) for c in moves[offset: offset + setup]] == record.setup
        assert (int(row["winner"]), int(row["kind"]), float(row["komi"])) == (record.winner, record.result_kind,
                                                                              record.komi)
        assert int(row["value_weight"]) == (record.value_weight > 0)


def test_shards_are_small(records, shard):
    import os
    moves = sum(len(r.moves) for r in records)
    # random-looking made-up games compress worse than real ones; real Tygem games take ~1 byte a move
    assert os.path.getsize(shard) < 2.5 * moves + 40 * len(records) + 1000


def test_corrupt_files_raise_shard_error(shard, tmp_path):
    data = open(shard, "rb").read()
    for bad in (b"", b"NOTASHARD", data[:40], data[:-10]):
        path = tmp_path / "bad.tshard"
        path.write_bytes(bad)
        with pytest.raises(ShardError):
            read_shard(str(path))


def test_positions_are_the_replayed_games(records, shard):
    sampler = PositionSampler([shard])
    assert sampler.num_games == len(records)
    assert sampler.num_positions == sum(len(r.moves) for r in records)
    for game, record in enumerate(records):
        for k in (0, 7, len(record.moves) - 1):
            state, target, value, weight = sampler.state(game, k)
            expected = record.replay(upto=k)
            color, move = record.moves[k]
            assert state.board.color == expected.board.color and state.to_move == color
            assert target == (361 if move == PASS else move)
            assert value == (0.0 if record.winner == 0 else (1.0 if record.winner == color else -1.0))
            assert weight == (1.0 if record.value_weight > 0 else 0.0)
            expected.to_move = color
            np.testing.assert_array_equal(encode(state), encode(expected))


def test_value_targets_flip_with_the_side_to_move(records, shard):
    sampler = PositionSampler([shard])
    game = next(i for i, r in enumerate(records) if r.winner == BLACK and r.value_weight > 0)
    assert sampler.state(game, 0)[2] == 1.0 and sampler.state(game, 1)[2] == -1.0


def plain_and_turned(path: str):
    """Every 7th position of a shard without symmetries, the same under random symmetries, and those symmetries."""
    sampler = PositionSampler([path])
    positions = np.arange(0, sampler.num_positions, 7)
    plain = sampler.batch(np.random.default_rng(0), 0, symmetries=False, positions=positions)
    turned = sampler.batch(np.random.default_rng(5), 0, symmetries=True, positions=positions)
    chosen = np.random.default_rng(5).integers(0, NUM_SYMMETRIES, size=len(positions))
    return plain, turned, chosen


def test_symmetries_move_planes_and_targets_together(shard):
    plain, turned, chosen = plain_and_turned(shard)
    positions = np.arange(len(chosen))
    assert len(set(chosen.tolist())) > 4
    np.testing.assert_array_equal(turned.planes, transform_planes(plain.planes, chosen))
    one_hot = np.eye(362, dtype=np.float32)[plain.policy]
    np.testing.assert_array_equal(turned.policy, transform_policy(one_hot, chosen).argmax(axis=1))
    # the move played is on an empty point, in every frame
    for b in (plain, turned):
        flat = b.planes.reshape(len(positions), 18, 361)
        points = b.policy < 361
        rows = np.nonzero(points)[0]
        assert not flat[rows, 0, b.policy[points]].any() and not flat[rows, 8, b.policy[points]].any()
    np.testing.assert_array_equal(turned.value, plain.value)


def test_batches_are_a_function_of_seed_and_step(shard):
    sampler = PositionSampler([shard])
    a = sampler.batch_for_step(3, 10, 16)
    b = sampler.batch_for_step(3, 10, 16)
    c = sampler.batch_for_step(3, 11, 16)
    np.testing.assert_array_equal(a.planes, b.planes)
    np.testing.assert_array_equal(a.policy, b.policy)
    assert not np.array_equal(a.policy, c.policy)
    assert a.planes.shape == (16, 18, 19, 19) and a.planes.dtype == np.float32


def test_shard_paths_by_split(tmp_path, records):
    for name in ("train-0001.tshard", "train-0000.tshard", "val-0000.tshard"):
        write_shard(str(tmp_path / name), records[:2])
    (tmp_path / "dataset.json").write_text("{}")
    assert [p.rsplit("/", 1)[-1] for p in shard_paths(str(tmp_path), "train")] == ["train-0000.tshard",
                                                                                   "train-0001.tshard"]
    assert len(PositionSampler(shard_paths(str(tmp_path), "train")).games) == 4


# -- auxiliary targets: the opponent's reply, the counted margin, the final ownership ------------------------------


@pytest.fixture(scope="module")
def counted_shard(tmp_path_factory):
    records = learnable_records(6, moves=41)
    owners = np.zeros(361, dtype=np.int8)
    owners[:100] = 1  # black's view: black owns the first 100 points, white the next 100, the rest nobody
    owners[100:200] = -1
    for i, record in enumerate(records):
        record.margin = 2.5 + i
        record.ownership = owners if i % 2 == 0 else None
    path = str(tmp_path_factory.mktemp("counted") / "train-0000.tshard")
    write_shard(path, records)
    return path, records, owners


def test_margins_and_owners_survive_the_round_trip(counted_shard):
    path, records, owners = counted_shard
    header, games, moves, stored = read_shard(path, with_owners=True)
    assert header["version"] == 2 and len(stored) == 3
    assert list(games["margin"]) == [r.margin for r in records]
    assert list(games["owner_row"]) == [0, -1, 1, -1, 2, -1]
    assert np.array_equal(stored[1], owners)


def test_aux_targets_are_from_the_movers_view(counted_shard):
    path, records, owners = counted_shard
    sampler = PositionSampler([path])
    positions = np.arange(sampler.num_positions)
    b = sampler.batch(np.random.default_rng(0), 0, symmetries=False, positions=positions)
    games, ks = sampler.locate(positions)
    for row, (game, k) in enumerate(zip(games.tolist(), ks.tolist())):
        record = records[game]
        mover = record.moves[k][0]
        sign = 1 if mover == BLACK else -1
        # a margin counts only where the result is a value target (not a game lost on time)
        counted = record.value_weight > 0
        assert b.score_weight[row] == (1.0 if counted else 0.0)
        assert b.score[row] == (sign * record.margin if counted else 0.0)
        last = k + 1 == len(record.moves)
        assert b.reply_weight[row] == (0.0 if last else 1.0)
        if not last:
            reply = record.moves[k + 1][1]
            assert b.reply[row] == (361 if reply == PASS else reply)
        assert b.ownership_weight[row] == (1.0 if game % 2 == 0 else 0.0)
        expected = sign * owners if game % 2 == 0 else np.zeros(361)
        assert np.array_equal(b.ownership[row], expected)


def test_aux_targets_turn_with_the_planes(counted_shard):
    plain, turned, chosen = plain_and_turned(counted_shard[0])
    positions = np.arange(len(chosen))
    owner_planes = plain.ownership.reshape(-1, 1, 19, 19)
    assert np.array_equal(turned.ownership, transform_planes(owner_planes, chosen).reshape(len(positions), -1))
    one_hot = np.zeros((len(positions), 362))
    one_hot[np.arange(len(positions)), plain.reply] = 1
    assert np.array_equal(transform_policy(one_hot, chosen).argmax(axis=1), turned.reply)


def test_a_version_1_shard_reads_without_margins_or_owners(counted_shard, tmp_path):
    """Shards written before version 2 (self-play windows of earlier runs) still load."""
    import json
    import lzma
    import struct

    from tabula.engine.data.shards import GAME_DTYPE_V1, MAGIC
    path, records, _ = counted_shard
    header, games, moves = read_shard(path)
    old = np.zeros(len(games), dtype=GAME_DTYPE_V1)
    for name in GAME_DTYPE_V1.names:
        old[name] = games[name]
    blobs = [lzma.compress(old.tobytes()), lzma.compress(moves.tobytes())]
    old_header = {"version": 1, "size": 19, "games": len(old), "moves": len(moves), "games_bytes": len(blobs[0]),
                  "moves_bytes": len(blobs[1]), "game_dtype": [list(item) for item in GAME_DTYPE_V1.descr]}
    raw = json.dumps(old_header).encode()
    v1 = tmp_path / "train-0000.tshard"
    v1.write_bytes(MAGIC + struct.pack("<I", len(raw)) + raw + blobs[0] + blobs[1])
    sampler = PositionSampler([str(v1)])
    b = sampler.batch(np.random.default_rng(0), 16)
    assert not b.score_weight.any() and not b.ownership_weight.any()
    assert np.all(np.isnan(sampler.games["margin"])) and np.all(sampler.games["owner_row"] == -1)
