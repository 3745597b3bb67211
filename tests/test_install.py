"""Tabula installs like any Python tool: `pip install .` from a clean copy of the tree, and a wheel built by
`python -m build`, each in a fresh virtual environment of Debian's own Python, give a `tabula gtp` that plays a 19x19
move with the shipped network from any folder; site-packages gains one `tabula` package and no `engine`, `gtp` or
`tools`; `pip uninstall tabula` leaves nothing of it behind. Slow: it installs numpy and onnxruntime from the index.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_NETWORK = (ROOT / "weights" / "DEFAULT").read_text().strip()  # the file name weights/DEFAULT gives
# Debian's Python, as a new user has it; another one where this machine has no /usr/bin/python3 with venv.
SYSTEM_PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
COMMON_NAMES = {"engine", "gtp", "tools", "weights"}

pytestmark = pytest.mark.slow


def run(*command: str | Path, cwd: Path | str | None = None, timeout: int = 900, stdin: str | None = None,
        env: dict | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([str(part) for part in command], cwd=cwd, capture_output=True, text=True, input=stdin,
                          timeout=timeout, env=env)
    assert done.returncode == 0, f"{command} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def clean_copy(destination: Path) -> Path:
    """The files a clean clone of this tree has: tracked and new files that git does not ignore (so that the
    change under test is included, and no .venv, build output or run directory is)."""
    listed = run("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT).stdout
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return destination


def fresh_venv(path: Path) -> Path:
    run(SYSTEM_PYTHON, "-m", "venv", path)
    return path / "bin"


def site_packages(bin_dir: Path) -> Path:
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return Path(run(bin_dir / "python", "-c", code).stdout.strip())


def plays_19x19_from_anywhere(bin_dir: Path) -> None:
    """`tabula gtp` with no arguments, started in / (no source tree near), plays a 19x19 move with the shipped
    network (the network's line on stderr names it)."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = run(bin_dir / "tabula", "gtp", "--visits", "8", "--threads", "1", cwd="/", env=env, timeout=300,
               stdin="boardsize 19\nclear_board\ngenmove b\nquit\n")
    replies = [line for line in done.stdout.splitlines() if line.startswith(("=", "?"))]
    assert replies[:2] == ["=", "="] and replies[2].startswith("= ") and len(replies[2]) > 2, done.stdout
    assert "?" not in "".join(replies), done.stdout
    assert DEFAULT_NETWORK in done.stderr, done.stderr[-2000:]


def plays_gomoku_from_anywhere(bin_dir: Path) -> None:
    """`tabula gomocup` with no arguments, started in /, answers a Gomocup session with the shipped gomoku networks
    (9x9's, and the one for every size on 15x15)."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = run(bin_dir / "tabula", "gomocup", "--visits", "8", "--seed", "1", cwd="/", env=env, timeout=300,
               stdin="START 9\nBEGIN\nSTART 15\nBEGIN\nEND\n")
    replies = done.stdout.split()
    assert replies[0] == replies[2] == "OK" and re.fullmatch(r"\d,\d", replies[1]), done.stderr[-2000:]
    assert re.fullmatch(r"\d+,\d+", replies[3]) and "pure MCTS" not in done.stderr, done.stderr[-2000:]


def installed_names(bin_dir: Path) -> set[str]:
    return {entry.name for entry in site_packages(bin_dir).iterdir()}


def test_pip_install_dot_gives_a_tabula_that_plays_from_any_folder_and_uninstalls_cleanly(tmp_path):
    source = clean_copy(tmp_path / "clone")
    bin_dir = fresh_venv(tmp_path / "venv")
    before = installed_names(bin_dir)
    run(bin_dir / "pip", "install", "-q", source)
    added = installed_names(bin_dir) - before
    assert not added & COMMON_NAMES, added
    assert "tabula" in added
    plays_19x19_from_anywhere(bin_dir)
    plays_gomoku_from_anywhere(bin_dir)
    run(bin_dir / "pip", "uninstall", "-y", "-q", "tabula")
    left = {name for name in installed_names(bin_dir) - before if name.lower().startswith("tabula")}
    assert not left, left
    assert not (bin_dir / "tabula").exists()


def test_a_wheel_built_by_python_m_build_installs_the_same_and_holds_no_training_files(tmp_path):
    source = clean_copy(tmp_path / "clone")
    builder = fresh_venv(tmp_path / "build-venv")
    run(builder / "pip", "install", "-q", "build")
    run(builder / "python", "-m", "build", "--wheel", "--outdir", tmp_path / "dist", source)
    wheel = next((tmp_path / "dist").glob("tabula-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {"tabula", wheel.name.split("-py")[0] + ".dist-info"}
    assert not [name for name in names if "/training/" in name or name.endswith((".pt", ".safetensors"))]
    assert f"tabula/weights/{DEFAULT_NETWORK}" in names and "tabula/weights/DEFAULT" in names
    # the default's fp32 file, which a GPU runs in the int8 file's place (engine/net/int8_check.fp32_sibling)
    assert "tabula/weights/" + DEFAULT_NETWORK.replace("-int8.onnx", ".onnx") in names
    assert "tabula/weights/tabula-gomoku9-4x32.onnx" in names and "tabula/weights/DEFAULT-gomoku" in names
    assert "tabula/weights/tabula-gomoku-any-4x32.onnx" in names
    assert not [name for name in names if name.startswith("tabula/weights/tabula-4x32")]  # old networks stay out
    bin_dir = fresh_venv(tmp_path / "venv")
    run(bin_dir / "pip", "install", "-q", wheel)
    assert not installed_names(bin_dir) & COMMON_NAMES
    plays_19x19_from_anywhere(bin_dir)
    plays_gomoku_from_anywhere(bin_dir)


def test_the_editable_install_plays_from_any_folder():
    """The README's own install (`pip install -e .`, this test run's environment): `tabula` from /."""
    bin_dir = Path(sys.executable).parent
    if not (bin_dir / "tabula").exists():
        pytest.skip("this environment has no tabula command (not installed with pip install -e .)")
    plays_19x19_from_anywhere(bin_dir)
