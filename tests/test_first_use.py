"""What a new user meets first: `tabula --version`, `tabula gtp --help` grouped with every default, one stderr line
per move (the candidates at --verbose), and `tabula match` saying where its games go and how a game goes."""
from __future__ import annotations

from tabula.tools import cli


def test_version(capsys) -> None:
    assert cli.main(["--version"]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("tabula ") and out.split()[1][0].isdigit()
    assert "--version" in cli.usage()
