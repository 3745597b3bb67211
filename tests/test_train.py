"""Training: a tiny net overfits, a tiny run lowers the loss, a resumed run equals an uninterrupted one, checkpoints
survive a kill, and the run's outputs feed `tabula eval` and `tabula plot`."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tabula.engine.data.shards import PositionSampler, write_shard  # noqa: E402
from tabula.engine.net.network import NetSpec, TabulaNet, load_checkpoint  # noqa: E402
from tabula.tools.learn.train import (  # noqa: E402
    TrainConfig,
    atomic_torch_save,
    learning_rate,
    load_training_checkpoint,
    losses,
    train,
)
from tests.records_helpers import learnable_records, sample_records, write_archives  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("data")
    records = learnable_records(30, moves=40)
    write_shard(str(directory / "train-0000.tshard"), records[:24])
    write_shard(str(directory / "val-0000.tshard"), records[24:])
    return str(directory)


def tiny(data_dir: str, out: str, **changes) -> TrainConfig:
    settings = dict(data=data_dir, out=out, blocks=1, filters=8, steps=24, batch=16, optimizer="adamw", lr=3e-3,
                    warmup_steps=4, workers=0, threads=1, precision="fp32", val_every=12, val_positions=64,
                    log_every=4, export=False)
    settings.update(changes)
    return TrainConfig(**settings)


def quiet(*_args) -> None:
    pass


def test_a_tiny_net_overfits_a_tiny_batch(data_dir):
    torch.manual_seed(0)
    torch.set_num_threads(1)  # a tiny net gains nothing from threads, and loses much to a busy machine
    sampler = PositionSampler([os.path.join(data_dir, "train-0000.tshard")])
    batch = sampler.batch(np.random.default_rng(0), 8)
    model = TabulaNet(NetSpec(blocks=1, filters=8))
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-2)
    planes, policy, z, w = (torch.from_numpy(x) for x in (batch.planes, batch.policy, batch.value,
                                                          batch.value_weight))
    first = None
    for _ in range(60):
        logits, value = model(planes)
        policy_loss, value_loss = losses(logits, value, policy, z, w)
        loss = policy_loss + value_loss
        first = first if first is not None else loss.item()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert policy_loss.item() < 0.5 and value_loss.item() < 0.1 < first


def test_value_loss_ignores_positions_without_a_value_target():
    logits = torch.zeros(3, 362)
    value = torch.tensor([0.0, 0.0, 0.0])
    _, value_loss = losses(logits, value, torch.tensor([0, 1, 2]), torch.tensor([1.0, -1.0, 1.0]),
                           torch.tensor([1.0, 0.0, 0.0]))
    assert float(value_loss) == pytest.approx(1.0)


def test_learning_rate_schedule():
    config = TrainConfig(data="", out="", steps=100, lr=0.1, warmup_steps=10, lr_drops="0.5,0.8")
    assert learning_rate(config, 0) == pytest.approx(0.01)
    assert learning_rate(config, 20) == pytest.approx(0.1)
    assert learning_rate(config, 50) == pytest.approx(0.01)
    assert learning_rate(config, 99) == pytest.approx(0.001)


def read_metrics(run_dir: str) -> list[dict]:
    with open(os.path.join(run_dir, "metrics.jsonl")) as handle:
        return [json.loads(line) for line in handle]


def test_a_tiny_run_lowers_the_loss_and_writes_its_outputs(data_dir, tmp_path):
    out = str(tmp_path / "run")
    result = train(tiny(data_dir, out, steps=60), log=quiet)
    assert result["step"] == 60 and 0.0 <= result["val_top1"] <= 1.0
    lines = [r for r in read_metrics(out) if r["kind"] == "train"]
    assert lines[-1]["policy_loss"] < lines[0]["policy_loss"] - 1.0
    saved = json.load(open(os.path.join(out, "config.json")))
    assert saved["blocks"] == 1 and saved["steps"] == 60
    model = load_checkpoint(os.path.join(out, "checkpoint.pt"))  # the network module reads our checkpoints
    assert model.spec.filters == 8


def test_a_zero_policy_weight_trains_the_value_and_leaves_the_policy_head(data_dir, tmp_path):
    first, value_only = str(tmp_path / "first"), str(tmp_path / "value-only")
    train(tiny(data_dir, first, steps=4, weight_decay=0.0), log=quiet)
    before = load_training_checkpoint(os.path.join(first, "checkpoint.pt"))["state_dict"]
    train(tiny(data_dir, value_only, steps=8, weight_decay=0.0, policy_loss_weight=0.0,
               init=os.path.join(first, "checkpoint.pt")), log=quiet)
    after = load_training_checkpoint(os.path.join(value_only, "checkpoint.pt"))["state_dict"]
    for name in ("head.policy_fc.weight", "head.policy_fc.bias"):  # only the policy loss reaches these
        torch.testing.assert_close(after[name], before[name], rtol=0, atol=0)
    assert not torch.equal(after["head.value_fc2.weight"], before["head.value_fc2.weight"])


def test_frozen_batch_norms_keep_the_starting_statistics(data_dir, tmp_path):
    first, tuned, free = str(tmp_path / "first"), str(tmp_path / "tuned"), str(tmp_path / "free")
    train(tiny(data_dir, first, steps=4), log=quiet)
    start = os.path.join(first, "checkpoint.pt")
    before = load_training_checkpoint(start)["state_dict"]
    train(tiny(data_dir, tuned, steps=8, init=start, freeze_batchnorm=True), log=quiet)
    train(tiny(data_dir, free, steps=8, init=start), log=quiet)  # validation in between: train mode comes back
    frozen = load_training_checkpoint(os.path.join(tuned, "checkpoint.pt"))["state_dict"]
    moved = load_training_checkpoint(os.path.join(free, "checkpoint.pt"))["state_dict"]
    statistics = [k for k in before if k.endswith(("running_mean", "running_var"))]
    assert statistics
    for name in statistics:
        torch.testing.assert_close(frozen[name], before[name], rtol=0, atol=0)
    assert any(not torch.equal(moved[name], before[name]) for name in statistics)
    assert not torch.equal(frozen["input.conv.weight"], before["input.conv.weight"])  # the weights still learn


def test_train_only_the_value_head(data_dir, tmp_path):
    first, tuned = str(tmp_path / "first"), str(tmp_path / "tuned")
    train(tiny(data_dir, first, steps=4), log=quiet)
    start = os.path.join(first, "checkpoint.pt")
    before = load_training_checkpoint(start)["state_dict"]
    train(tiny(data_dir, tuned, steps=8, init=start, train_only="head.value", freeze_batchnorm=True,
               weight_decay=1e-2), log=quiet)
    after = load_training_checkpoint(os.path.join(tuned, "checkpoint.pt"))["state_dict"]
    moved = {name for name in before if not torch.equal(after[name], before[name])}
    assert moved and all(name.startswith("head.value") for name in moved)  # weight decay spares the others too
    with pytest.raises(SystemExit, match="names no parameter"):
        train(tiny(data_dir, str(tmp_path / "typo"), init=start, train_only="head.valeu"), log=quiet)


def test_train_only_the_small_board_value_term(tmp_path):
    """Self-play's komi fix: a pooled net given the zero small-board term, trained on 9×9 games with only the term
    free, moves the term and nothing else (so its 19×19 play is the start's, bit for bit)."""
    from tabula.engine.data.records import RecordFilter, parse_record
    from tabula.engine.net.network import POOLED, save_checkpoint, with_small_board_value
    from tests.records_helpers import game_sgf, play_game

    small = tmp_path / "data9"
    small.mkdir()
    records = [parse_record(f"g{i}", game_sgf(play_game(2000 + i, moves=30, size=9), size=9,
                                               result=["B+R", "W+7.5"][i % 2]), RecordFilter(size=9))
               for i in range(12)]
    write_shard(str(small / "train-0000.tshard"), records[:10], size=9)
    write_shard(str(small / "val-0000.tshard"), records[10:], size=9)
    torch.manual_seed(0)
    start_net = with_small_board_value(TabulaNet(NetSpec(blocks=1, filters=8, head=POOLED)))
    start = str(tmp_path / "start.pt")
    save_checkpoint(start_net, start)
    tuned = str(tmp_path / "tuned")
    train(tiny(str(small), tuned, steps=8, head=POOLED, small_board_value=True, init=start,
               train_only="head.value_small_boards", freeze_batchnorm=True, weight_decay=1e-2), log=quiet)
    before = start_net.state_dict()
    after = load_training_checkpoint(os.path.join(tuned, "checkpoint.pt"))["state_dict"]
    moved = {name for name in before if not torch.equal(after[name], before[name])}
    assert moved == {"head.value_small_boards.weight"}
    with pytest.raises(SystemExit, match="another architecture"):  # a run without the term refuses a start with it
        train(tiny(str(small), str(tmp_path / "other"), head=POOLED, init=start), log=quiet)
    with pytest.raises(SystemExit, match="needs the pooled head"):  # said before the run directory is made
        train(tiny(str(small), str(tmp_path / "agz"), small_board_value=True), log=quiet)
    assert not (tmp_path / "agz").exists()


def same_state(a: dict, b: dict) -> None:
    assert a["step"] == b["step"]
    for key in a["state_dict"]:
        torch.testing.assert_close(a["state_dict"][key], b["state_dict"][key], rtol=0, atol=0)
    for index, state in a["optimizer"]["state"].items():
        for key, value in state.items():
            torch.testing.assert_close(value, b["optimizer"]["state"][index][key], rtol=0, atol=0)


def comparable(lines: list[dict]) -> list[dict]:
    return [{k: v for k, v in line.items() if k not in ("elapsed_s", "samples_per_s", "cpu_s")} for line in lines]


def test_resuming_in_chunks_equals_an_uninterrupted_run(data_dir, tmp_path):
    whole, chunked = str(tmp_path / "whole"), str(tmp_path / "chunked")
    train(tiny(data_dir, whole), log=quiet)
    for _ in range(4):
        train(tiny(data_dir, chunked, chunk_steps=7), log=quiet)
    a = load_training_checkpoint(os.path.join(whole, "checkpoint.pt"))
    b = load_training_checkpoint(os.path.join(chunked, "checkpoint.pt"))
    same_state(a, b)
    assert comparable(read_metrics(whole)) == comparable(read_metrics(chunked))


def test_a_resumed_run_must_keep_its_architecture(data_dir, tmp_path):
    out = str(tmp_path / "run")
    train(tiny(data_dir, out, chunk_steps=2), log=quiet)
    with pytest.raises(SystemExit):
        train(tiny(data_dir, out, filters=16), log=quiet)


def test_a_failed_checkpoint_write_leaves_the_old_one(tmp_path, monkeypatch):
    path = str(tmp_path / "checkpoint.pt")
    atomic_torch_save({"step": 1, "weights": torch.ones(3)}, path)

    def broken_save(obj, handle):
        handle.write(b"half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError):
        atomic_torch_save({"step": 2, "weights": torch.zeros(3)}, path)
    monkeypatch.undo()
    assert load_training_checkpoint(path)["step"] == 1
    assert os.listdir(tmp_path) == ["checkpoint.pt"]


WRITER = """
import sys, torch
from tabula.tools.learn.train import atomic_torch_save
path = sys.argv[1]
step = 0
print("ready", flush=True)
while True:
    step += 1
    atomic_torch_save({"step": step, "weights": torch.full((200_000,), float(step))}, path)
"""


@pytest.mark.slow  # a few seconds: the quick suite stays under 3 minutes
def test_checkpoints_survive_sigkill_at_any_moment(tmp_path):
    path = str(tmp_path / "checkpoint.pt")
    for delay in (0.3,):
        process = subprocess.Popen([sys.executable, "-c", WRITER, path], cwd=ROOT, stdout=subprocess.PIPE,
                                   env={**os.environ, "PYTHONPATH": ROOT})
        assert process.stdout.readline().strip() == b"ready"
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        process.wait()
        if os.path.exists(path):
            state = load_training_checkpoint(path)
            assert bool((state["weights"] == float(state["step"])).all())


@pytest.mark.slow
def test_a_killed_training_process_resumes_to_the_same_result(data_dir, tmp_path):
    whole, killed = str(tmp_path / "whole"), str(tmp_path / "killed")
    train(tiny(data_dir, whole, steps=40, workers=1), log=quiet)
    command = [sys.executable, "-m", "tabula.tools.learn.train", "--data", data_dir, "--out", killed, "--blocks", "1",
               "--filters", "8", "--steps", "40", "--batch", "16", "--optimizer", "adamw", "--lr", "3e-3",
               "--warmup-steps", "4", "--workers", "1", "--threads", "1", "--precision", "fp32", "--val-every", "12",
               "--val-positions", "64", "--log-every", "4", "--no-export", "--checkpoint-every", "5"]
    env = {**os.environ, "PYTHONPATH": ROOT}
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    for line in process.stdout:
        if b"checkpoint at step 10" in line:
            break
    process.send_signal(signal.SIGKILL)
    process.wait()
    subprocess.run(command, cwd=ROOT, env=env, check=True, capture_output=True, timeout=300)
    same_state(load_training_checkpoint(os.path.join(whole, "checkpoint.pt")),
               load_training_checkpoint(os.path.join(killed, "checkpoint.pt")))


@pytest.mark.slow
def test_export_then_eval_and_plot(data_dir, tmp_path, capsys):
    from tabula.tools.learn import evaluate, plot

    out = str(tmp_path / "run")
    train(tiny(data_dir, out, steps=8, export=True), log=quiet)
    onnx_path = os.path.join(out, "model.onnx")
    assert os.path.exists(onnx_path)
    files, _, kept = sample_records()
    archives = write_archives(str(tmp_path / "records"), files)
    capsys.readouterr()
    assert evaluate.main([onnx_path, archives["tar.gz"], "--max-games", "4"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    names = [line.split(":")[0] for line in lines]
    assert names == ["games", "positions", "top1", "top5", "value_mse", "value_positions",
                     "black_to_move_predicted", "black_to_move_won", "white_to_move_predicted", "white_to_move_won",
                     "resign_games", "resign_false_0.02", "resign_false_0.05", "resign_false_0.10",
                     "resign_false_0.15", "resign_false_0.20"]
    shares = [float(line.split()[1]) for line in lines[11:]]
    assert all(0.0 <= a <= b <= 1.0 for a, b in zip(shares, shares[1:]))  # a higher threshold throws more away
    assert lines[0] == "games: 4" and 0.0 <= float(lines[2].split()[1]) <= float(lines[3].split()[1]) <= 1.0
    # the search's move prediction beside the raw policy's, on every 25th position
    assert evaluate.main([onnx_path, archives["tar.gz"], "--max-games", "4", "--visits", "8", "--every", "25",
                          "--threads", "1"]) == 0
    figures = dict(line.split(": ") for line in capsys.readouterr().out.strip().splitlines())
    positions = int(figures["positions"])
    assert int(figures["searched_positions"]) == (positions + 24) // 25
    assert 0.0 <= float(figures["search_top1"]) <= 1.0 and 0.0 <= float(figures["policy_top1_searched"]) <= 1.0
    assert plot.main([out, "--out", str(tmp_path / "loss.png")]) == 0
    assert os.path.getsize(tmp_path / "loss.png") > 1000


def test_prepare_writes_shards_and_counts(tmp_path, capsys):
    from tabula.tools.learn import prepare

    files, expected, kept = sample_records()
    archives = write_archives(str(tmp_path / "records"), files)
    out = str(tmp_path / "data")
    assert prepare.main([archives["tar.xz"], archives["zip"], "--out", out, "--val-fraction", "0.3",
                         "--quiet"]) == 0
    manifest = json.load(open(os.path.join(out, "dataset.json")))
    assert manifest["report"]["kept"] == kept
    assert manifest["report"]["dropped"]["duplicate"] == expected["duplicate"] + kept + 1
    assert sum(s["games"] for s in manifest["shards"]) == kept
    assert "too short" in capsys.readouterr().out
    assert prepare.main([archives["zip"], "--out", out, "--quiet"]) == 2  # never mixes into old shards


def test_a_new_run_can_start_from_another_runs_weights(data_dir, tmp_path):
    first, second = str(tmp_path / "first"), str(tmp_path / "second")
    train(tiny(data_dir, first, steps=6), log=quiet)
    source = os.path.join(first, "checkpoint.pt")
    train(tiny(data_dir, second, steps=2, lr=0.0, warmup_steps=0, init=source), log=quiet)
    a = load_training_checkpoint(source)["state_dict"]
    b = load_training_checkpoint(os.path.join(second, "checkpoint.pt"))["state_dict"]
    for key in a:
        if key.endswith("conv.weight") or key.endswith("fc1.weight"):
            torch.testing.assert_close(a[key], b[key], rtol=0, atol=0)
    assert json.load(open(os.path.join(second, "config.json")))["init"] == source


# -- the size-independent network's run: auxiliary targets, cosine schedule, weight average, kept checkpoint -------


@pytest.fixture(scope="module")
def counted_data_dir(tmp_path_factory):
    """Shards whose games carry a counted margin and a final ownership, as `tabula prepare` writes for counted games."""
    directory = tmp_path_factory.mktemp("counted")
    records = learnable_records(30, moves=40)
    for i, record in enumerate(records):
        record.margin = float(i % 7) - 3.5
        if i % 2 == 0:
            record.ownership = np.where(np.arange(361) % 19 < 9, 1, -1).astype(np.int8)
    write_shard(str(directory / "train-0000.tshard"), records[:24])
    write_shard(str(directory / "val-0000.tshard"), records[24:])
    return str(directory)


def test_cosine_schedule_warms_up_then_decays_to_its_floor():
    config = TrainConfig(data="d", out="o", lr=0.1, steps=1000, warmup_steps=100, schedule="cosine",
                         final_lr_fraction=0.01)
    assert learning_rate(config, 0) == pytest.approx(0.001)
    assert learning_rate(config, 99) == pytest.approx(0.1)
    assert learning_rate(config, 100) == pytest.approx(0.1)
    assert learning_rate(config, 550) == pytest.approx(0.1 * (0.01 + 0.99 * 0.5))
    assert learning_rate(config, 1000) == pytest.approx(0.001)
    rates = [learning_rate(config, s) for s in range(100, 1001, 50)]
    assert all(a >= b for a, b in zip(rates, rates[1:]))


@pytest.mark.slow  # a few seconds: the quick suite stays under 3 minutes
def test_an_aux_run_lowers_every_loss_and_exports_score_and_ownership(counted_data_dir, tmp_path):
    import onnxruntime as ort
    out = str(tmp_path / "aux")
    config = tiny(counted_data_dir, out, head="pooled", aux=True, steps=60, lr=1e-2, val_every=60, export=True,
                  ema_decay=0.9, schedule="cosine")
    train(config, log=quiet)
    lines = [line for line in read_metrics(out) if line["kind"] == "train"]
    for name in ("reply_loss", "score_loss", "ownership_loss"):
        assert lines[-1][name] < lines[0][name], name
    val = [line for line in read_metrics(out) if line["kind"] == "val"][-1]
    assert {"val_reply_loss", "val_score_loss", "val_ownership_loss", "val_score_mae"} <= set(val)
    session = ort.InferenceSession(os.path.join(out, "model.onnx"), providers=["CPUExecutionProvider"])
    assert [o.name for o in session.get_outputs()] == ["policy", "value", "score", "ownership"]
    planes = np.zeros((2, 18, 13, 13), np.float32)
    planes[:, 16] = 1.0
    policy, value, score, ownership = session.run(None, {"planes": planes})
    assert policy.shape == (2, 170) and value.shape == (2,) and score.shape == (2,) and ownership.shape == (2, 169)
    assert np.all(np.abs(ownership) <= 1.0)


def test_a_run_resumes_from_its_kept_checkpoint_on_a_new_machine(data_dir, tmp_path):
    """The run directory is lost (a replaced machine); the checkpoint kept under git resumes it exactly."""
    whole, lost, keep = str(tmp_path / "whole"), str(tmp_path / "lost"), str(tmp_path / "keep")
    train(tiny(data_dir, whole, ema_decay=0.8), log=quiet)
    train(tiny(data_dir, lost, ema_decay=0.8, keep=keep, chunk_steps=10), log=quiet)
    import shutil
    shutil.rmtree(lost)
    assert sorted(os.listdir(keep)) == ["checkpoint.pt", "config.json", "metrics.jsonl"]
    train(tiny(data_dir, lost, ema_decay=0.8, keep=keep), log=quiet)
    a = load_training_checkpoint(os.path.join(whole, "checkpoint.pt"))
    b = load_training_checkpoint(os.path.join(keep, "checkpoint.pt"))
    same_state(a, b)
    for name, value in a["ema_state_dict"].items():
        torch.testing.assert_close(value, b["ema_state_dict"][name], rtol=0, atol=0)
    assert comparable(read_metrics(whole)) == comparable(read_metrics(lost))


def test_a_resumed_run_refuses_other_data(data_dir, tmp_path):
    """Batch s is a function of (seed, s) and the shards: other shards would silently change the run."""
    out = str(tmp_path / "run")
    train(tiny(data_dir, out, chunk_steps=2), log=quiet)
    other = str(tmp_path / "other.tshard")
    write_shard(other, learnable_records(12, moves=40))
    with pytest.raises(SystemExit, match="other data"):
        train(tiny(data_dir, out), log=quiet, make_sampler=lambda paths: PositionSampler([other]))


def test_a_checkpoint_exports_its_averaged_weights(data_dir, tmp_path):
    out = str(tmp_path / "run")
    train(tiny(data_dir, out, ema_decay=0.5, steps=6), log=quiet)
    state = load_training_checkpoint(os.path.join(out, "checkpoint.pt"))
    averaged = load_checkpoint(os.path.join(out, "checkpoint.pt")).state_dict()
    raw = load_checkpoint(os.path.join(out, "checkpoint.pt"), averaged=False).state_dict()
    name = "input.conv.weight"
    torch.testing.assert_close(averaged[name], state["ema_state_dict"][name])
    torch.testing.assert_close(raw[name], state["state_dict"][name])
    assert not torch.equal(averaged[name], raw[name])


def test_resign_false_positives_count_games_the_winner_would_have_resigned():
    from tabula.tools.learn.evaluate import Scores
    scores = Scores()
    scores.resign_games = 2
    # game 1: the winner (its rows: winner=True) sat at winrate 3% for 3 moves after move 10; game 2: never low
    rows = [(1, True, 12, 10, -0.94), (1, False, 13, 10, 0.9), (1, True, 14, 10, -0.95), (1, True, 16, 10, -0.99),
            (2, True, 12, 10, 0.5), (2, True, 14, 10, -0.95), (2, True, 16, 10, 0.2), (2, True, 18, 10, -0.99),
            (1, True, 2, 10, -1.0)]
    scores.resign_rows = rows
    lines = dict(line.split(": ") for line in scores.resign_lines())
    assert lines["resign_false_0.05"] == "0.5000" and lines["resign_false_0.02"] == "0.0000"


def test_calibration_compares_each_colours_predicted_winrate_with_its_wins():
    from tabula.engine.rules.coords import BLACK, WHITE
    from tabula.tools.learn.evaluate import Scores
    scores = Scores()
    # two games: black won the first, white the second; a head that says black wins 75% wherever black moves
    movers = np.array([BLACK, WHITE, BLACK, WHITE, BLACK])
    value = np.array([0.5, -0.5, 0.5, -0.5, 0.9], dtype=np.float32)  # the mover's view
    z = np.array([1.0, -1.0, -1.0, 1.0, 0.0], dtype=np.float32)
    weight = np.array([1.0, 1.0, 1.0, 1.0, 0.0], dtype=np.float32)  # the last game has no result: not counted
    scores.add(np.full((5, 10), 0.1), value, np.zeros(5, dtype=int), z, weight, [(1, i, 99) for i in range(5)],
               movers)
    lines = dict(line.split(": ") for line in scores.calibration_lines())
    assert lines == {"black_to_move_predicted": "0.7500", "black_to_move_won": "0.5000",
                     "white_to_move_predicted": "0.2500", "white_to_move_won": "0.5000"}


def test_a_run_restored_from_its_kept_checkpoint_still_refuses_other_settings(data_dir, tmp_path):
    out, keep = str(tmp_path / "out"), str(tmp_path / "keep")
    train(tiny(data_dir, out, keep=keep, chunk_steps=4), log=quiet)
    import shutil
    shutil.rmtree(out)
    with pytest.raises(SystemExit, match="lr"):
        train(tiny(data_dir, out, keep=keep, lr=1e-2), log=quiet)


def test_the_weight_average_warms_up_so_the_initial_weights_fade():
    from tabula.tools.learn.train import WeightAverage
    model = TabulaNet(NetSpec(blocks=1, filters=8))
    average = WeightAverage(model, decay=0.999)
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(1.0)
    start = {k: v.clone() for k, v in average.state.items()}
    for step in range(1000):
        average.update(model, step)
    name = "input.conv.weight"
    # the initial weights' share: below 1% after 1,000 steps (it would be 37% at a constant 0.999)
    share = float(((average.state[name] - 1.0) / (start[name] - 1.0)).abs().max())
    assert share < 0.01


def test_tabula_train_hands_model_rollout_to_the_rollout_trainer() -> None:
    from tabula.tools.learn.train import requested_model
    assert requested_model(["--data", "d", "--model", "rollout", "--out", "o"]) == ("rollout",
                                                                                   ["--data", "d", "--out", "o"])
    assert requested_model(["--model=network", "--data", "d"]) == ("network", ["--data", "d"])
    assert requested_model(["--data", "d"]) == ("network", ["--data", "d"])
