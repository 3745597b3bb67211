"""tools.learn.keeping: a kept run restored into an empty run directory, its marker file last."""
from __future__ import annotations

from tabula.tools.learn.keeping import restore_kept


def test_a_kept_run_is_restored_once_with_its_marker_and_without_skipped_files(tmp_path):
    keep, run = tmp_path / "keep", tmp_path / "run"
    (keep / "nets").mkdir(parents=True)
    for name, text in (("state.json", "s"), ("config.json", "c"), ("nets/a.onnx", "n"), ("log.jsonl", "l"),
                       ("half.tmp", "t")):
        (keep / name).write_text(text)
    assert restore_kept(str(run), str(keep), "state.json", skip=("log.jsonl",))
    restored = sorted(str(p.relative_to(run)) for p in run.rglob("*") if p.is_file())
    assert restored == ["config.json", "nets/a.onnx", "state.json"]
    (keep / "config.json").write_text("newer")
    assert not restore_kept(str(run), str(keep), "state.json")  # the run is here: nothing is copied over it
    assert (run / "config.json").read_text() == "c"


def test_named_files_that_exist_are_restored_and_nothing_without_a_kept_marker(tmp_path):
    keep, run = tmp_path / "keep", tmp_path / "run"
    keep.mkdir()
    (keep / "config.json").write_text("c")
    assert not restore_kept(str(run), str(keep), "checkpoint.pt", names=("config.json",))
    assert not restore_kept(str(run), "", "checkpoint.pt") and not run.exists()
    (keep / "checkpoint.pt").write_bytes(b"w")
    assert restore_kept(str(run), str(keep), "checkpoint.pt", names=("config.json", "metrics.jsonl"))
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint.pt", "config.json"]


def test_temporary_files_are_unique_and_gone_after_a_failure(tmp_path):
    import pytest

    from tabula.tools.learn.keeping import copy_atomic, settle_run_config

    source, target = tmp_path / "a.onnx", tmp_path / "out" / "a.onnx"
    source.write_text("n")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "a.onnx.tmp").mkdir()  # another writer's (or a dead one's) temporary name, not writable
    copy_atomic(str(source), str(target))
    assert target.read_text() == "n"
    with pytest.raises(FileNotFoundError):
        copy_atomic(str(tmp_path / "missing"), str(target))

    class Unwritable:
        def to_dict(self):
            return {"bad": object()}

    with pytest.raises(TypeError):
        settle_run_config(str(tmp_path / "out"), Unwritable(), (), "tabula train", "--run")
    # nothing left behind but the other writer's name; the files are whole
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.onnx", "a.onnx.tmp"]
    assert target.read_text() == "n"
