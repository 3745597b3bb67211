"""The project's shape: the README's test command is what CI runs, and imports flow one way."""
import ast
import configparser
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    blocks = re.findall(r"```sh\n(.*?)\n```", (ROOT / "README.md").read_text(), flags=re.S)
    return [block.strip() for block in blocks]


def test_readme_has_two_commands_and_ci_runs_the_test_one():
    start, test = readme_commands()[:2]
    assert "tabula gtp" in start
    assert "pytest" in test
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test in ci_lines
    for command in (start, test):  # Debian's Python refuses pip outside a virtual environment (PEP 668)
        assert "python3 -m venv .venv && . .venv/bin/activate" in command


def package_name(module: str) -> str:
    """The package a module belongs to: tabula.gtp.commands -> gtp, numpy.linalg -> numpy."""
    parts = module.split(".")
    return parts[1] if parts[0] == "tabula" and len(parts) > 1 else parts[0]


def imported_modules(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(package_name(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(package_name(node.module))
            if node.module == "tabula":
                names.update(alias.name for alias in node.names)
    return names


# The engine's modules that may import torch: the torch models and their ONNX export (training and conversion), and
# the torch GPU backend
TORCH_MODULES = ("network.py", "katago_network.py", "torch_backend.py")


def test_engine_never_imports_gtp_or_tools_and_only_network_imports_torch():
    for path in (ROOT / "engine").rglob("*.py"):
        names = imported_modules(path)
        assert not names & {"gtp", "tools"}, path
        if path.name not in TORCH_MODULES:
            assert "torch" not in names, f"{path.name} imports torch; only {', '.join(TORCH_MODULES)} may"


# What each layer of the engine may import (engine/__init__.py draws it); config sits beside rules.
LAYERS = {"rules": {"rules", "config"}, "net": {"rules", "net", "config"},
          "play": {"rules", "net", "rollout", "play", "config"}, "data": {"rules", "net", "data", "config"},
          "rollout": {"rules", "rollout", "config"}}


def engine_imports(path: pathlib.Path) -> set[str]:
    """The engine layers a module imports (tabula.engine.X.y -> X), lazy imports inside functions included."""
    tree = ast.parse(path.read_text())
    layers = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[:2] == ["tabula", "engine"]:
            parts = node.module.split(".")
            if len(parts) >= 3:
                layers.add(parts[2])
            else:
                layers.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[:2] == ["tabula", "engine"] and len(parts) >= 3:
                    layers.add(parts[2])
    return layers


def test_the_engine_layers_import_only_downwards():
    for layer, allowed in LAYERS.items():
        for path in (ROOT / "engine" / layer).glob("*.py"):
            assert engine_imports(path) <= allowed, f"{path.relative_to(ROOT)} imports {engine_imports(path) - allowed}"
    assert engine_imports(ROOT / "engine" / "config.py") <= {"rules"}
def test_gtp_startup_does_not_import_torch():
    # tabula gtp with its extensions, and tabula analysis: both start on numpy and onnxruntime alone
    code = ("import sys, tabula.gtp.__main__, tabula.engine.play.player, tabula.gtp.analysis_main; "
            "tabula.gtp.__main__.load_extensions(); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


@pytest.mark.slow
def test_the_default_player_loads_its_networks_without_torch_when_no_gpu_is_there():
    # On a machine with an NVIDIA GPU and no onnxruntime GPU provider, torch is the GPU path and is imported.
    code = ("import sys; from tabula.engine.config import EngineConfig; from tabula.engine.play.player import Player; "
            "from tabula.engine.net.evaluator import nvidia_gpu_present; Player.from_config(EngineConfig()); "
            "print('torch' in sys.modules, nvidia_gpu_present())")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    imported, gpu = out.stdout.split()
    if gpu == "False":
        assert imported == "False"
    from tabula.engine.play.search_player import default_weights
    assert out.stderr.count("tabula: network") == len(default_weights())  # one line a network, naming what runs it


def test_tabula_help_lists_the_subcommands():
    out = subprocess.run([sys.executable, "-m", "tabula.tools.cli", "--help"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0
    assert "gtp" in out.stdout and "bench" in out.stdout


def test_every_package_folder_is_listed_in_setup_cfg():
    """A new subpackage with an __init__.py must be named in setup.cfg's packages, or the wheel lacks it."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    listed = set(config["options"]["packages"].split())
    for top in ("engine", "gtp", "tools", "weights"):
        for init in (ROOT / top).rglob("__init__.py"):
            package = ".".join(("tabula", *init.parent.relative_to(ROOT).parts))
            assert package in listed, f"{package} is missing from setup.cfg's packages"


def test_the_lint_gate_runs_before_the_tests_and_fails_on_a_lint_error(tmp_path):
    test = readme_commands()[1]
    assert "ruff check ." in test and test.index("ruff check .") < test.index("pytest")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "clean.py").write_text('"""Nothing to say."""\nimport os\n\nprint(os.sep)\n')
    clean = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=tmp_path, capture_output=True, text=True)
    assert clean.returncode == 0, clean.stdout
    (tmp_path / "unused.py").write_text("import os\n")
    (tmp_path / "long.py").write_text(f"x = {'1 + ' * 40}1\n")
    dirty = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=tmp_path, capture_output=True, text=True)
    assert dirty.returncode != 0
    assert "F401" in dirty.stdout and "E501" in dirty.stdout
