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
