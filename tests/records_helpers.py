"""Small SGF game records made up for the records, shards and training tests: legal games, and bad ones."""
from __future__ import annotations

import io
import os
import tarfile
import zipfile

import numpy as np

from tabula.engine.rules.coords import PASS
from tabula.engine.rules.game import SIMPLE_KO, GameState, Rules


def sgf_point(move: int, size: int) -> str:
    if move == PASS:
        return ""
    y, x = divmod(move, size)
    return "abcdefghijklmnopqrs"[x] + "abcdefghijklmnopqrs"[size - 1 - y]


def play_game(seed: int, moves: int = 40, size: int = 19, random_opening: int = 2,
              handicap: list[int] = ()) -> list[int]:
    """A legal game: ``random_opening`` random moves, then the first legal point of one fixed order, so that a
    network can learn to predict most moves. With ``handicap`` points, black's stones are set up and white starts."""
    rng = np.random.default_rng(seed)
    order = np.random.default_rng(12345).permutation(size * size).tolist()
    state = GameState(size, Rules(superko=SIMPLE_KO))
    if handicap:
        state.place_handicap(list(handicap))
    played = []
    for i in range(moves):
        legal = set(state.legal_moves())
        if not legal:
            move = PASS
        elif i < random_opening:
            move = int(rng.choice(sorted(legal)))
        else:
            move = next(p for p in order if p in legal)
        state.play(move)
        played.append(move)
    return played


def game_sgf(moves: list[int], size: int = 19, result: str | None = "B+R", komi: float = 6.5,
             header: str = "", first_color: str = "B") -> bytes:
    root = f"GM[1]FF[4]SZ[{size}]KM[{komi}]" + (f"RE[{result}]" if result is not None else "") + header
    colors = "BW" if first_color == "B" else "WB"
    body = "".join(f";{colors[i % 2]}[{sgf_point(m, size)}]" for i, m in enumerate(moves))
    return f"(;{root}{body})".encode()


def handicap_sgf(seed: int) -> bytes:
    """A legal two-stone handicap game (black D16 and Q4 set up, white moves first)."""
    points = [15 * 19 + 3, 3 * 19 + 15]
    return game_sgf(play_game(seed, handicap=points), result="W+R", komi=0.5, header="HA[2]AB[dd][pp]",
                    first_color="W")


def sample_records() -> tuple[dict[str, bytes], dict[str, int], int]:
    """(file name -> SGF bytes, expected drops per reason, expected kept games)."""
    files: dict[str, bytes] = {}
    for i in range(6):
        files[f"good{i}.sgf"] = game_sgf(play_game(i), result=["B+R", "W+3.5", "B+T", "W+F", "0", "W+Resign"][i])
    files["dup.sgf"] = files["good0.sgf"]
    files["small.sgf"] = game_sgf(play_game(20, size=9), size=9)
    files["garbage.sgf"] = b"this is not SGF at all"
    files["truncated.sgf"] = b"(;GM[1]SZ[19]RE[B+R];B[dd];W[p"
    illegal = play_game(21)
    illegal[10] = illegal[3]  # a stone on an occupied point
    files["illegal.sgf"] = game_sgf(illegal)
    files["noresult.sgf"] = game_sgf(play_game(22), result=None)
    files["void.sgf"] = game_sgf(play_game(23), result="Void")
    files["badresult.sgf"] = game_sgf(play_game(24), result="B+lots")
    files["handicap.sgf"] = handicap_sgf(25)
    files["short.sgf"] = game_sgf(play_game(26, moves=10))
    files["readme.txt"] = b"not a record"
    expected = {"unreadable SGF": 2, "other board size": 1, "no result": 2, "unparseable result": 1,
                "handicap or setup stones": 1, "too short": 1, "illegal move": 1, "duplicate": 1}
    return files, expected, 6


def write_archives(directory: str, files: dict[str, bytes]) -> dict[str, str]:
    """The same files as a folder, a tar.gz, a tar.xz and a zip; returns kind -> path."""
    folder = os.path.join(directory, "folder")
    os.makedirs(os.path.join(folder, "sub"))
    for i, (name, data) in enumerate(sorted(files.items())):
        with open(os.path.join(folder, "sub" if i % 2 else "", name), "wb") as handle:
            handle.write(data)
    paths = {"folder": folder}
    for kind, mode in (("tar.gz", "w:gz"), ("tar.xz", "w:xz")):
        path = os.path.join(directory, f"games.{kind}")
        with tarfile.open(path, mode) as archive:
            for name, data in sorted(files.items()):
                info = tarfile.TarInfo(f"games/{name}")
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
        paths[kind] = path
    path = os.path.join(directory, "games.zip")
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in sorted(files.items()):
            archive.writestr(f"games/{name}", data)
    paths["zip"] = path
    return paths


def learnable_records(count: int, moves: int = 40):
    """Records of ``count`` distinct learnable games, parsed and checked."""
    from tabula.engine.data.records import parse_record

    results = ["B+R", "W+R", "B+2.5", "W+T"]
    return [parse_record(f"g{i}", game_sgf(play_game(1000 + i, moves=moves), result=results[i % 4]))
            for i in range(count)]
