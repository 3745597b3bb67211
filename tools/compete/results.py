"""`tabula match`'s results: results.jsonl (appended and fsynced, read back on resume) and the summary, win rates
and Elo, that a match prints. A match kept in docs/matches keeps its results xz-compressed beside the path
(``results.jsonl.xz``: the tree that travels to a lent GPU machine is bounded); every reader here takes either."""
from __future__ import annotations

import json
import lzma
import os
import sys
import threading
from collections import defaultdict
from pathlib import Path
from typing import Sequence

from tabula.tools.compete.elo import WinRate, fit_ratings
from tabula.tools.compete.settings import FAULT_KINDS, NO_TIME, MatchConfig, config_name


def compressed_path(path: Path | str) -> Path:
    """Where a JSON-lines file is kept compressed: ``path`` with ``.xz`` added."""
    return Path(f"{path}.xz")


def jsonl_exists(path: Path | str) -> bool:
    """Whether ``path`` or its compressed copy is there."""
    return Path(path).exists() or compressed_path(path).exists()


def _decompressed(packed: Path) -> str:
    """The text of an xz file, ending in a newline; where it is cut short or damaged, its whole lines before the
    damage, with a warning on stderr (fed to the decoder in small pieces, so that what it decoded before an error is
    kept)."""
    decoder = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
    pieces = []
    data = packed.read_bytes()
    try:
        for start in range(0, len(data), 4096):
            pieces.append(decoder.decompress(data[start:start + 4096]))
    except lzma.LZMAError:  # damaged: what came before is kept
        pass
    except EOFError:  # bytes after the stream's end: ignored
        pass
    text = b"".join(pieces).decode("utf-8", errors="replace")
    if not decoder.eof:
        text = text[: text.rfind("\n") + 1]  # the line the damage cut
        print(f"tabula: {packed}: not a whole xz file; read the {text.count(chr(10))} lines before its end or damage",
              file=sys.stderr)
    elif text and not text.endswith("\n"):
        text += "\n"
    return text


def read_jsonl_text(path: Path | str) -> str:
    """The text of a JSON-lines file: its compressed copy (``path.xz``) first where there is one, then ``path``
    itself (a kept match resumed appends plain lines beside its compressed ones); "" where neither is there. Where
    the plain file begins with the whole compressed text (``xz -dk`` kept both), the plain file alone."""
    packed = compressed_path(path)
    text = _decompressed(packed) if packed.exists() else ""
    if Path(path).exists():
        plain = Path(path).read_text(encoding="utf-8")
        text = plain if plain.startswith(text) else text + plain
    return text


def read_results(path: Path) -> list[dict]:
    """The finished games in a results file (or its compressed copy, ``read_jsonl_text``); a torn last line (the
    runner was killed mid-write) is ignored, and a game recorded twice keeps its last record."""
    by_game: dict[str, dict] = {}
    for line in read_jsonl_text(path).splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and "game" in record:
            by_game[record["game"]] = record
    return list(by_game.values())


class ResultsWriter:
    """Appends one JSON line per game and fsyncs it, so that a finished game survives a crash of the runner."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        if path.exists() and path.stat().st_size:
            with open(path, "rb") as existing:
                existing.seek(-1, os.SEEK_END)
                torn = existing.read(1) != b"\n"
            if torn:  # start on a fresh line after a torn write
                with open(path, "ab") as handle:
                    handle.write(b"\n")

    def append(self, record: dict) -> None:
        line = json.dumps(record, sort_keys=True) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)



# -- the summary ----------------------------------------------------------------------------------------------------


def summarise(config: MatchConfig, records: Sequence[dict]) -> str:
    """Text summary: per pair, wins and losses by colour, the win rate and Elo with 95% intervals; per engine,
    faults and mean time per move; with more than two engines, a fitted rating table."""
    lines = []
    count = len(config.engines)
    name = lambda index: config_name(config, index)  # noqa: E731
    by_pair: dict[tuple[int, int], list[dict]] = defaultdict(list)
    for record in records:
        by_pair[tuple(record["pair"])].append(record)
    lines.append(f"{len(records)} games, {config.size}x{config.size}, komi {config.komi:g}"
                 + (f", handicap {config.handicap}" if config.handicap else "")
                 + (f", {config.time.system} time" if config.time.system != NO_TIME else "")
                 + f", scoring: {config.scoring}")
    lines += [f"  engine {index}: {name(index)} <- {command}" for index, command in enumerate(config.engines)]
    for (i, j), games in sorted(by_pair.items()):
        stats = pair_stats(i, games)
        lines.append(f"\n{name(i)} vs {name(j)}")
        lines.append(f"  {name(i)} as black: {stats['black_wins']} wins, {stats['black_losses']} losses; "
                     f"as white: {stats['white_wins']} wins, {stats['white_losses']} losses"
                     + (f"; draws {stats['draws']}" if stats["draws"] else ""))
        if stats["void"]:
            lines.append(f"  void (no result): {stats['void']}")
        rate = WinRate(stats["black_wins"] + stats["white_wins"], stats["black_losses"] + stats["white_losses"],
                       stats["draws"])
        lines.append(f"  {name(i)}: {rate.describe()}")
        lines.append(f"  black won {stats['black_side_wins']} of {stats['decided']} decided games")
        fingerprints = [game["moves_sha1"] for game in games if game.get("moves_sha1")]
        if len(set(fingerprints)) < len(fingerprints):
            lines.append(f"  distinct games: {len(set(fingerprints))} of {len(fingerprints)} (the others repeat one "
                         "of them move for move: engines that play without randomness replay the same game; "
                         "vary them, e.g. with tabula gtp --temperature-moves)")
        if stats["disagreements"]:
            lines.append(f"  scoring or legality disagreements: {stats['disagreements']}")
    lines.append("")
    lines.append(engine_table(config, records))
    if count > 2:
        results = [(r["pair"][0], r["pair"][1], pair_score(r["pair"][0], r)) for r in records]
        results = [(i, j, s) for i, j, s in results if s is not None]
        anchor, anchor_elo = parse_anchor(config.anchor, config.names)
        try:
            ratings = fit_ratings([name(k) for k in range(count)], results, anchor=anchor,
                                  anchor_elo=anchor_elo)
            lines.append("\nratings (maximum likelihood, 2 virtual draws per pair"
                         + (f", {name(anchor)} fixed at {anchor_elo:g}" if anchor is not None else "") + ")")
            lines.append(ratings.table())
        except ValueError as error:
            lines.append(f"\nno rating table: {error}")
    return "\n".join(lines)


def pair_score(first: int, record: dict) -> float | None:
    """The first engine of the pair's score in one game: 1, 0.5, 0, or None for a void game."""
    winner = record["winner"]
    if winner is None:
        return 0.5 if record["result"] == "0" else None
    first_color = "B" if record["black"] == first else "W"
    return 1.0 if winner == first_color else 0.0


def pair_stats(first: int, games: Sequence[dict]) -> dict[str, int]:
    stats = dict.fromkeys(("black_wins", "black_losses", "white_wins", "white_losses", "draws", "void",
                           "disagreements", "black_side_wins", "decided"), 0)
    for record in games:
        score = pair_score(first, record)
        colour = "black" if record["black"] == first else "white"
        stats["disagreements"] += bool(record.get("disagreement"))
        if score is None:
            stats["void"] += 1
        elif score == 0.5:
            stats["draws"] += 1
        else:
            stats[f"{colour}_{'wins' if score == 1.0 else 'losses'}"] += 1
            stats["decided"] += 1
            stats["black_side_wins"] += record["winner"] == "B"
    return stats


def engine_table(config: MatchConfig, records: Sequence[dict]) -> str:
    """Per engine: games, faults by kind, resignations and mean wall time per move."""
    count = len(config.engines)
    games = [0] * count
    seconds = [0.0] * count
    moves = [0] * count
    slowest = [0.0] * count
    faults = [defaultdict(int) for _ in range(count)]
    resigns = [0] * count
    for record in records:
        for side in ("black", "white"):
            index = record[side]
            games[index] += 1
            seconds[index] += record["time_s"][side]
            moves[index] += record["timed_moves"][side]
            slowest[index] = max(slowest[index], record["max_move_s"][side])
        if record.get("fault"):
            faults[record["fault"]["engine"]][record["fault"]["kind"]] += 1
        if record["result"].endswith("+R"):
            resigns[record["white"] if record["winner"] == "B" else record["black"]] += 1
    width = max([len(config_name(config, i)) for i in range(count)] + [6])
    head = f"{'engine':<{width}}  {'games':>5}  " + "  ".join(f"{k:>9}" for k in FAULT_KINDS)
    lines = [head + f"  {'resigned':>8}  {'ms/move':>8}  {'max s':>6}"]
    for index in range(count):
        mean_ms = 1000 * seconds[index] / moves[index] if moves[index] else 0.0
        lines.append(f"{config_name(config, index):<{width}}  {games[index]:>5}  "
                     + "  ".join(f"{faults[index][k]:>9}" for k in FAULT_KINDS)
                     + f"  {resigns[index]:>8}  {mean_ms:>8.1f}  {slowest[index]:>6.2f}")
    return "\n".join(lines)


def parse_anchor(text: str, names: Sequence[str]) -> tuple[int | None, float]:
    """``INDEX=ELO`` or ``NAME=ELO`` (a name as shown in the summary) to (index, rating)."""
    if not text:
        return None, 0.0
    key, _, value = text.rpartition("=")
    if not key:
        raise ValueError(f"--anchor {text!r}: expected INDEX=ELO or NAME=ELO")
    if key.isdigit():
        return int(key), float(value)
    if key in names:
        return list(names).index(key), float(value)
    raise ValueError(f"--anchor {text!r}: no engine named {key!r} (engines: {', '.join(names)})")
