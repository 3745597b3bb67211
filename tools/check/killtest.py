"""Kill safety: SIGKILL `tabula match` or `tabula rl` at random moments, rerun the same command, and check after every
kill that no finished game, result or checkpoint was lost or corrupted, and that no process outlived the kill.

Layer: tools. The target runs as a subprocess in a session (and process group) of its own, marked by an environment
variable that its children inherit, so that every process it started can be found in /proc, even the engines that
``tools.compete.gtp_client`` puts in sessions of their own. The run directory is read back with the readers the target
itself uses (``tools.compete.results.read_results``, ``engine.data.replay``) and with independent ones (sgfmill,
onnxruntime, ``torch.load(weights_only=True)``).

    python3 -m tabula.tools.check.killtest match --out runs/kill/match --kills 10 --seed 1
    python3 -m tabula.tools.check.killtest rl --out runs/kill/rl --kills 10 --seed 1 --generations 3

Options after ``--`` replace the target's default workload (``DEFAULT_MATCH`` / ``DEFAULT_RL``). One line per kill
(when, what was on disk before and after), then a summary; exits 1 when any check fails.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

TOKEN_VARIABLE = "TABULA_KILLTEST"
ROOT = Path(__file__).resolve().parents[2]

DEFAULT_MATCH = ["--games", "24", "--size", "9", "--parallel", "2", "--names", "random", "gnugo-1",
                 "--engines", "python3 -m tabula.gtp --player random", "/usr/games/gnugo --mode gtp --level 1"]
DEFAULT_RL = ["--blocks", "1", "--filters", "8", "--size", "9", "--visits", "8", "--fast-visits", "0",
              "--games-per-generation", "4", "--min-positions", "16", "--train-steps", "4", "--batch", "16",
              "--gate-games", "2", "--gate-visits", "4", "--workers", "2", "--train-threads", "1"]


# -- what is on disk ------------------------------------------------------------------------------------------------


@dataclass
class Snapshot:
    """A run directory as read after a launch ended.

    ``items``: every finished thing (a game, its SGF, a network, a result line) by key, with a digest of its
    content: a later snapshot must hold each one unchanged. ``levels``: counters that must never go down (trained
    steps, the generation). ``bad``: things that are there but unreadable or inconsistent (corrupted).
    """

    items: dict[str, str] = field(default_factory=dict)
    levels: dict[str, int] = field(default_factory=dict)
    bad: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    torn_lines: int = 0  # JSON lines cut short by a kill (tolerated: the readers skip them, the game is replayed)
    litter: list[str] = field(default_factory=list)  # temporary files a kill left behind
    counts: dict[str, int] = field(default_factory=dict)  # for the figure lines


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def json_lines(path: Path) -> tuple[list[tuple[int, dict]], int]:
    """(line number, record) of every line that parses as a JSON object, and the number of lines that do not."""
    if not path.exists():
        return [], 0
    parsed, torn = [], 0
    for number, line in enumerate(path.read_bytes().split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            torn += 1
            continue
        if isinstance(record, dict):
            parsed.append((number, record))
        else:
            torn += 1
    return parsed, torn


def canonical(record: dict) -> str:
    return digest(json.dumps(record, sort_keys=True).encode())


def temporary_files(directory: Path) -> list[str]:
    if not directory.is_dir():
        return []
    return sorted(str(p) for p in directory.rglob("*") if ".tmp" in p.name and p.is_file())


class Checked:
    """Files verified once per content: a digest already seen needs no second parse."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], str | None] = {}

    def check(self, path: Path, verify) -> tuple[str, str | None]:
        """(digest, problem or None); ``verify(data)`` raises or returns a problem text for bad content."""
        data = path.read_bytes()
        key = (str(path), digest(data))
        if key not in self._seen:
            try:
                self._seen[key] = verify(data)
            except Exception as error:  # noqa: BLE001 - any failure to read is what we are looking for
                self._seen[key] = f"{type(error).__name__}: {error}"
        return key[1], self._seen[key]


def sgf_moves(data: bytes):
    """(root node, number of move nodes) of an SGF file, parsed by sgfmill."""
    from sgfmill import sgf

    game = sgf.Sgf_game.from_bytes(data)
    moves = sum(1 for node in game.get_main_sequence() if node.get_move()[0] is not None)
    return game, moves


def sgf_mismatch(data: bytes, source: str, result: str, moves: int, name: str | None = None) -> str | None:
    """How an SGF file disagrees with what ``source`` says of the game (result, number of moves, GN), or None."""
    sgf_game, sgf_move_count = sgf_moves(data)
    root = sgf_game.get_root()
    problems = []
    if name is not None and root.get("GN") != name:
        problems.append(f"GN {root.get('GN')!r}")
    if root.get("RE") != result:
        problems.append(f"RE {root.get('RE')!r}, {source} says {result!r}")
    if sgf_move_count != moves:
        problems.append(f"{sgf_move_count} moves, {source} says {moves}")
    return "; ".join(problems) or None


# -- processes ------------------------------------------------------------------------------------------------------


def tagged_processes(token: str) -> list[tuple[int, str]]:
    """(pid, command line) of every live process whose environment carries ``TOKEN_VARIABLE=token``."""
    marker = f"{TOKEN_VARIABLE}={token}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                if marker not in handle.read().split(b"\0"):
                    continue
            with open(f"/proc/{name}/stat") as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    continue  # exited; only a wait is missing
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                command = handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        found.append((int(name), command))
    return found


@dataclass
class Launch:
    """One run of the target command."""

    index: int
    argv: list[str]
    log: Path
    kill_at_s: float | None  # None: run to the end
    killed: bool = False
    returncode: int | None = None
    wall_s: float = 0.0
    alive_at_kill: int = 0  # the target's processes still alive just after the SIGKILL (engines in own sessions)
    gone_after_s: float = 0.0  # how long the last of them took to exit
    leaked: list[str] = field(default_factory=list)  # alive after the grace period (then killed by us)
    timed_out: bool = False


def run_launch(launch: Launch, token: str, kill_scope: str, leak_grace_s: float, timeout_s: float) -> Launch:
    """Start the target, SIGKILL it at ``kill_at_s`` (or let it finish within ``timeout_s``), then wait for every
    process it started to go; those still alive after ``leak_grace_s`` are leaks."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    env[TOKEN_VARIABLE] = token
    env.setdefault("PYTHONUNBUFFERED", "1")
    started = time.monotonic()
    with open(launch.log, "wb") as log:
        process = subprocess.Popen(launch.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                   env=env, start_new_session=True, cwd=ROOT)
        try:
            try:
                launch.returncode = process.wait(timeout=launch.kill_at_s if launch.kill_at_s is not None
                                                 else timeout_s)
            except subprocess.TimeoutExpired:
                launch.killed = launch.kill_at_s is not None
                launch.timed_out = launch.kill_at_s is None
                if kill_scope == "group":
                    os.killpg(process.pid, signal.SIGKILL)
                else:
                    process.kill()
                launch.returncode = process.wait()
        except BaseException:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise
    launch.wall_s = time.monotonic() - started
    ended = time.monotonic()
    remaining = tagged_processes(token)
    launch.alive_at_kill = len(remaining)
    while remaining and time.monotonic() - ended < leak_grace_s:
        time.sleep(0.05)
        remaining = tagged_processes(token)
    launch.gone_after_s = time.monotonic() - ended if launch.alive_at_kill else 0.0
    for pid, command in remaining:
        launch.leaked.append(f"{pid} {command}")
        try:
            os.kill(pid, signal.SIGKILL)  # a process of this launch: clean up before the next one
        except ProcessLookupError:
            pass
    return launch


def log_tail(path: Path, lines: int = 15) -> str:
    text = path.read_bytes().decode(errors="replace").replace("\r", "\n")
    return "\n".join("    " + line for line in [line for line in text.splitlines() if line.strip()][-lines:])


# -- targets --------------------------------------------------------------------------------------------------------


class MatchTarget:
    """`tabula match`: results.jsonl, games/*.sgf; a rerun of the same command resumes."""

    name = "match"

    def __init__(self, out: Path, options: Sequence[str]):
        self.out = out
        self.options = list(options)
        self.checked = Checked()

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "tabula.tools.cli", "match", "--out", str(self.out), *self.options]

    def scheduled(self) -> int | None:
        from tabula.tools.compete import match, settings

        path = self.out / settings.CONFIG_FILE
        return len(match.schedule(match.load_config(path))) if path.exists() else None

    def snapshot(self) -> Snapshot:
        from tabula.tools.compete import results, settings

        snap = Snapshot()
        parsed, snap.torn_lines = json_lines(self.out / settings.RESULTS_FILE)
        seen: dict[str, int] = {}
        records: dict[str, dict] = {}
        for _number, record in parsed:
            game = record.get("game")
            if not isinstance(game, str):
                snap.bad.append(f"results.jsonl: a line without a game id: {record!r:.80}")
                continue
            seen[game] = seen.get(game, 0) + 1
            records[game] = record
        snap.duplicates = sorted(f"game {g} recorded {n} times" for g, n in seen.items() if n > 1)
        theirs = {r["game"] for r in results.read_results(self.out / settings.RESULTS_FILE)}
        if theirs != set(records):
            snap.bad.append(f"tools.compete.results.read_results reads {len(theirs)} games, "
                            f"the lines hold {len(records)}")
        for game, record in sorted(records.items()):
            snap.items[f"record {game}"] = canonical(record)
            path = self.out / record.get("sgf", f"games/{game}.sgf")
            if not path.exists():
                snap.bad.append(f"game {game}: recorded without its SGF {path.name}")
                continue

            def verify(data: bytes, record=record) -> str | None:
                return sgf_mismatch(data, "the record", record["result"], record["moves"], record["game"])

            sgf_digest, problem = self.checked.check(path, verify)
            snap.items[f"sgf {game}"] = sgf_digest
            if problem:
                snap.bad.append(f"{path.relative_to(self.out)}: {problem}")
        snap.litter = temporary_files(self.out)
        snap.counts = {"games": len(records)}
        return snap

    def allowed_to_vanish(self, key: str, now: Snapshot) -> bool:
        return False

    def remaining(self, snap: Snapshot) -> int:
        scheduled = self.scheduled()
        return 1 if scheduled is None else scheduled - snap.counts["games"]

    def figure(self, before: Snapshot, after: Snapshot) -> str:
        return f"games {before.counts['games']} -> {after.counts['games']}"

    def extend(self) -> str:
        """Double ``--games`` (a rerun may change it); returns what changed."""
        games = int(self.options[self.options.index("--games") + 1]) if "--games" in self.options else 2
        self.options = [o for i, o in enumerate(self.options)
                        if o != "--games" and (i == 0 or self.options[i - 1] != "--games")]
        self.options += ["--games", str(2 * games)]
        return f"--games {games} -> {2 * games}"

    def resumed(self, launch: Launch, before: Snapshot) -> bool:
        """Whether the launch's log shows it resumed (when there was something to resume)."""
        if not before.counts["games"] or not launch.log.exists():
            return True
        text = launch.log.read_bytes().decode(errors="replace")
        return "resuming:" in text or not text.strip()  # killed before it printed anything

    def final_problems(self, snap: Snapshot) -> tuple[list[str], list[str]]:
        scheduled = self.scheduled()
        problems = []
        if scheduled is None:
            problems.append("no config.json")
        elif snap.counts["games"] != scheduled:
            problems.append(f"{snap.counts['games']} games recorded, {scheduled} scheduled")
        return problems, []

    def summary_counts(self, snap: Snapshot) -> str:
        return f"{snap.counts['games']}/{self.scheduled()} games"


class RLTarget:
    """`tabula rl`: state.json, replay/ (one shard per game), sgf/, train/checkpoint.pt, nets/*.onnx, gating.jsonl,
    elo.jsonl; the same command (with the generations still to play) resumes."""

    name = "rl"

    def __init__(self, out: Path, options: Sequence[str], generations: int):
        self.out = out
        self.options = list(options)
        self.generations = generations
        self.checked = Checked()

    def state(self) -> dict | None:
        path = self.out / "state.json"
        return json.loads(path.read_text()) if path.exists() else None

    def config(self) -> dict | None:
        path = self.out / "config.json"
        return json.loads(path.read_text()) if path.exists() else None

    def argv(self) -> list[str]:
        state = self.state()
        finished = state["generation"] - 1 if state else 0
        left = max(1, self.generations - finished)  # stops at the wanted generation, whatever the kills did
        return [sys.executable, "-m", "tabula.tools.cli", "rl", "--dir", str(self.out), *self.options,
                "--generations", str(left)]

    def snapshot(self) -> Snapshot:
        from tabula.engine.data.replay import game_files, read_game

        snap = Snapshot()
        try:
            state = self.state()
        except (OSError, ValueError) as error:
            snap.bad.append(f"state.json: {error}")
            state = None
        config = self.config()
        window = config["rl"]["window_games"] if config else 0
        replay = game_files(str(self.out / "replay"))
        total = replay[-1][0] + 1 if replay else 0
        for seq, path in replay:
            file_digest, problem = self.checked.check(Path(path), lambda _data, path=path: read_game(path) and None)
            snap.items[f"replay {seq}"] = file_digest
            if problem:
                snap.bad.append(f"replay/{os.path.basename(path)}: {problem}")
                continue
            sgf_path = self.out / "sgf" / f"{seq:09d}.sgf"
            if not sgf_path.exists():
                snap.bad.append(f"game {seq}: in the replay store without its SGF")
                continue

            def verify_sgf(data: bytes, path=path) -> str | None:
                replayed = read_game(path)
                return sgf_mismatch(data, "the replay store", replayed.result, len(replayed.moves))

            sgf_digest, problem = self.checked.check(sgf_path, verify_sgf)
            snap.items[f"sgf {seq}"] = sgf_digest
            if problem:
                snap.bad.append(f"sgf/{sgf_path.name}: {problem}")
        nets = sorted((self.out / "nets").glob("gen-*.onnx")) if (self.out / "nets").is_dir() else []
        nets = [p for p in nets if ".tmp" not in p.name]
        for path in nets:
            net_digest, problem = self.checked.check(path, check_onnx)
            snap.items[f"net {path.name}"] = net_digest
            if problem:
                snap.bad.append(f"nets/{path.name}: {problem}")
        steps = 0
        checkpoint = self.out / "train" / "checkpoint.pt"
        if checkpoint.exists():
            _, problem = self.checked.check(checkpoint, check_checkpoint)
            if problem:
                snap.bad.append(f"train/checkpoint.pt: {problem}")
            else:
                steps = checkpoint_step(checkpoint)
        if state is not None:
            best = self.out / state["best"]
            if not best.exists():
                snap.bad.append(f"state.json names {state['best']}, which is not there")
            else:
                _, problem = self.checked.check(best, check_onnx)
                if problem:
                    snap.bad.append(f"the best network {state['best']}: {problem}")
            snap.levels["generation"] = state["generation"]
            snap.levels["tasks issued"] = state.get("tasks_issued", 0)
        snap.levels["trained steps"] = steps
        snap.levels["games played"] = total
        gating, torn_gating = json_lines(self.out / "gating.jsonl")
        elo, torn_elo = json_lines(self.out / "elo.jsonl")
        snap.torn_lines = torn_gating + torn_elo
        for kind, lines, key in (("gating", gating, lambda r: f"{r['generation']}/{r['game']}"),
                                 ("elo", elo, lambda r: f"{r['generation']}")):
            seen: dict[str, int] = {}
            for _number, record in lines:
                name = f"{kind} {key(record)}"
                seen[name] = seen.get(name, 0) + 1
                if seen[name] == 1:
                    snap.items[name] = canonical(record)
            snap.duplicates += [f"{name} recorded {n} times" for name, n in seen.items() if n > 1]
        snap.litter = temporary_files(self.out)
        snap.counts = {"games": len(replay), "total": total, "window": window, "steps": steps, "nets": len(nets),
                       "gating": len(gating), "generation": state["generation"] if state else 0}
        return snap

    def allowed_to_vanish(self, key: str, now: Snapshot) -> bool:
        """Games older than the window are evicted by design (their SGFs stay, but are checked only against a
        shard that is still there)."""
        if not key.startswith(("replay ", "sgf ")) or not now.counts["window"]:
            return False
        return int(key.split()[1]) < now.counts["total"] - now.counts["window"]

    def remaining(self, snap: Snapshot) -> int:
        return self.generations - (snap.counts["generation"] - 1 if snap.counts["generation"] else 0)

    def figure(self, before: Snapshot, after: Snapshot) -> str:
        b, a = before.counts, after.counts
        return (f"gen {b['generation']} -> {a['generation']}, games {b['total']} -> {a['total']}, "
                f"steps {b['steps']} -> {a['steps']}, nets {b['nets']} -> {a['nets']}, "
                f"gating games {b['gating']} -> {a['gating']}")

    def resumed(self, launch: Launch, before: Snapshot) -> bool:
        return True  # the levels and items checks say whether anything was redone from scratch

    def extend(self) -> str:
        """Double the generations the whole run plays; returns what changed."""
        self.generations *= 2
        return f"generations {self.generations // 2} -> {self.generations}"

    def final_problems(self, snap: Snapshot) -> tuple[list[str], list[str]]:
        """(problems, differences from an uninterrupted run of the same schedule)."""
        problems, differences = [], []
        config = self.config()
        wanted = self.generations
        if snap.counts["generation"] != wanted + 1:
            problems.append(f"state.json is at generation {snap.counts['generation']}, wanted {wanted + 1}")
        elo = {key for key in snap.items if key.startswith("elo ")}
        if elo != {f"elo {g}" for g in range(1, wanted + 1)}:
            problems.append(f"elo.jsonl holds {sorted(elo)}, wanted generations 1..{wanted}")
        nets = {key for key in snap.items if key.startswith("net ")}
        if nets != {f"net gen-{g:04d}.onnx" for g in range(wanted + 1)}:
            problems.append(f"nets/ holds {sorted(nets)}, wanted gen-0000..gen-{wanted:04d}")
        if config:
            rl = config["rl"]
            games = wanted * rl["games_per_generation"]
            if snap.counts["total"] != games:
                differences.append(f"{snap.counts['total']} self-play games, an uninterrupted run plays {games}")
            steps = wanted * rl["train_steps"]
            extra = (snap.counts["steps"] - steps) / rl["train_steps"]
            if snap.counts["steps"] != steps:
                chunks = f"{extra:g} extra chunk{'s' if extra != 1 else ''} of {rl['train_steps']} steps"
                differences.append(f"the trainer is at step {snap.counts['steps']}, an uninterrupted run stops at "
                                   f"{steps} ({chunks})")
            gating = wanted * rl["gate_games"]
            if snap.counts["gating"] != gating:
                problems.append(f"{snap.counts['gating']} gating games recorded, wanted {gating}")
        return problems, differences

    def summary_counts(self, snap: Snapshot) -> str:
        c = snap.counts
        return (f"generation {c['generation']}, {c['total']} games, {c['steps']} trained steps, {c['nets']} nets, "
                f"{c['gating']} gating games")


def check_onnx(data: bytes) -> str | None:
    """Loads with onnxruntime and evaluates an empty board to finite numbers."""
    import numpy as np
    import onnxruntime

    from tabula.engine.net.evaluator import session_options

    session = onnxruntime.InferenceSession(data, session_options(1), providers=["CPUExecutionProvider"])
    spec = session.get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in spec.shape]
    outputs = session.run(None, {spec.name: np.zeros(shape, dtype=np.float32)})
    if not all(np.all(np.isfinite(o)) for o in outputs):
        return "non-finite outputs"
    return None


def check_checkpoint(data: bytes) -> str | None:
    import io

    import torch

    state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    missing = {"spec", "state_dict", "optimizer", "step"} - set(state)
    if missing:
        return f"no {', '.join(sorted(missing))}"
    if not all(torch.isfinite(v).all() for v in state["state_dict"].values() if v.is_floating_point()):
        return "non-finite weights"
    return None


def checkpoint_step(path: Path) -> int:
    import torch

    return int(torch.load(path, map_location="cpu", weights_only=True)["step"])


# -- the test -------------------------------------------------------------------------------------------------------


@dataclass
class Totals:
    kills: int = 0
    resumes: int = 0
    failed_launches: int = 0
    lost: int = 0
    corrupted: int = 0
    duplicated: int = 0
    torn_lines: int = 0
    leaked: int = 0
    slowest_exit_s: float = 0.0
    problems: list[str] = field(default_factory=list)


def compare(target, before: Snapshot, after: Snapshot, totals: Totals) -> tuple[int, int]:
    """Count what ``after`` lost or changed of ``before``; returns (lost, corrupted) of this step."""
    lost = [key for key in before.items if key not in after.items and not target.allowed_to_vanish(key, after)]
    changed = [key for key in before.items if key in after.items and before.items[key] != after.items[key]]
    lowered = [f"{k} {before.levels[k]} -> {after.levels.get(k, 0)}" for k in before.levels
               if after.levels.get(k, 0) < before.levels[k]]
    new_bad = [b for b in after.bad if b not in before.bad]
    for text, entries in (("lost", lost), ("changed after it was finished", changed), ("went down", lowered),
                          ("corrupted", new_bad)):
        for entry in entries:
            totals.problems.append(f"{text}: {entry}")
    new_duplicates = [d for d in after.duplicates if d not in before.duplicates]
    totals.problems += [f"duplicated: {d}" for d in new_duplicates]
    totals.duplicated += len(new_duplicates)
    totals.lost += len(lost) + len(lowered)
    totals.corrupted += len(changed) + len(new_bad)
    return len(lost) + len(lowered), len(changed) + len(new_bad)


def run(target, kills: int, seed: int, window_s: tuple[float, float], kill_scope: str, leak_grace_s: float,
        final_timeout_s: float, log_dir: Path, strict: bool = False) -> int:
    """Kill the target ``kills`` times, then let it finish; returns 0 when every check passed.

    A run that ends before its kill (a fast machine) has its schedule doubled (``target.extend()``, at most
    ``kills + 4`` times) and is rerun: the kills must land, the workload is only their vehicle."""
    rng = random.Random(seed)
    log_dir.mkdir(parents=True, exist_ok=True)
    token = f"{os.getpid()}-{seed}-{time.time_ns()}"
    totals = Totals()
    started = time.monotonic()
    before = target.snapshot()
    if before.items:
        print(f"killtest {target.name}: {target.out} already holds a run ({target.summary_counts(before)}); "
              "continuing it")
    index = extensions = final_launches = 0
    while True:
        killing = totals.kills < kills
        if not killing and final_launches == 0 and target.remaining(before) <= 0:
            break  # the last kill landed after the work was done: a rerun would only add more of it
        if not killing and final_launches >= 3:
            totals.problems.append("the run did not finish in 3 launches after the kills")
            break
        if killing and target.remaining(before) <= 0:
            if extensions >= kills + 4:  # doubling: four more make the work 16 times longer
                totals.problems.append(f"the run was complete after {totals.kills} of {kills} kills, {extensions} "
                                       "times; give it more work or an earlier --window")
                break
            extensions += 1
            print(f"killtest {target.name}: the run is complete before kill {totals.kills + 1}; "
                  f"{target.extend()}", flush=True)
        kill_at = rng.uniform(*window_s) if killing else None
        launch = run_launch(Launch(index, target.argv(), log_dir / f"launch-{index:02d}.log", kill_at), token,
                            kill_scope, leak_grace_s, final_timeout_s)
        index += 1
        after = target.snapshot()
        lost, corrupted = compare(target, before, after, totals)
        totals.torn_lines = after.torn_lines
        totals.leaked += len(launch.leaked)
        totals.slowest_exit_s = max(totals.slowest_exit_s, launch.gone_after_s)
        totals.problems += [f"launch {launch.index}: leaked {entry}" for entry in launch.leaked]
        failed = not launch.killed and (launch.returncode != 0 or launch.timed_out)
        if launch.index > 0 and not failed:
            totals.resumes += 1  # a rerun of the same command after a kill, which ran until killed or to the end
        if not target.resumed(launch, before):
            totals.problems.append(f"launch {launch.index} did not resume (log {launch.log})")
        print(figure_line(target, launch, before, after, lost, corrupted, totals.kills + launch.killed, kills),
              flush=True)
        before = after
        if launch.killed:
            totals.kills += 1
            continue
        if failed:
            totals.failed_launches += 1
            what = "timed out" if launch.timed_out else f"exit {launch.returncode}"
            totals.problems.append(f"launch {launch.index} {what} (log {launch.log}):\n{log_tail(launch.log)}")
            break
        if not killing:
            final_launches += 1
            if target.remaining(after) <= 0:
                break
    return report(target, totals, before, strict, time.monotonic() - started)


def figure_line(target, launch: Launch, before: Snapshot, after: Snapshot, lost: int, corrupted: int, kill: int,
                kills: int) -> str:
    """One line per launch: when it was killed (or how it ended), what was on disk before and after."""
    exits = (f"{launch.alive_at_kill} process{'es' if launch.alive_at_kill > 1 else ''} left, gone after "
             f"{launch.gone_after_s:.1f} s" if launch.alive_at_kill else "no process left")
    if launch.killed:
        head = f"kill {kill:2d}/{kills}: at {launch.kill_at_s:5.1f} s"
    else:
        what = "timed out" if launch.timed_out else f"exit {launch.returncode}"
        head = f"run  {launch.index:2d}: {what} after {launch.wall_s:.1f} s"
        if launch.kill_at_s is not None:
            head += f" (before its kill at {launch.kill_at_s:.1f} s)"
    return (f"{head}, {target.figure(before, after)}; {exits}, leaked {len(launch.leaked)}, lost {lost}, "
            f"corrupted {corrupted}")


def report(target, totals: Totals, final: Snapshot, strict: bool, wall_s: float) -> int:
    """The final checks and the summary; returns the exit status."""
    problems, differences = target.final_problems(final)
    totals.problems += [f"final: {p}" for p in problems]
    totals.problems += [f"corrupted: {b}" for b in final.bad if f"corrupted: {b}" not in totals.problems]
    if strict:
        totals.problems += [f"differs from an uninterrupted run: {d}" for d in differences]
    print(f"killtest {target.name}: {totals.kills} kills, {totals.resumes} resumes ({totals.failed_launches} failed); "
          f"final {target.summary_counts(final)}; lost {totals.lost}, corrupted {totals.corrupted}, "
          f"duplicated {totals.duplicated}, torn lines {totals.torn_lines}, leaked processes {totals.leaked} "
          f"(slowest exit after a kill {totals.slowest_exit_s:.1f} s), temporary files left {len(final.litter)}; "
          f"wall {wall_s:.0f} s")
    for difference in differences:
        print(f"  differs from an uninterrupted run: {difference}")
    for problem in totals.problems:
        print(f"  FAIL {problem}")
    print("FAIL" if totals.problems else "PASS")
    return 1 if totals.problems else 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    workload: list[str] | None = None
    if "--" in argv:
        at = argv.index("--")
        argv, workload = argv[:at], argv[at + 1:]
    parser = argparse.ArgumentParser(prog="python3 -m tabula.tools.check.killtest", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target", choices=("match", "rl"))
    parser.add_argument("--out", required=True, help="the run directory (match --out, rl --dir)")
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1, help="seeds the kill times")
    parser.add_argument("--window", type=float, nargs=2, default=None, metavar=("MIN_S", "MAX_S"),
                        help="kill at a uniform time in this range after each start (match 2 12, rl 3 25)")
    parser.add_argument("--generations", type=int, default=3, help="rl: generations the whole run plays")
    parser.add_argument("--kill-scope", choices=("group", "leader"), default="group",
                        help="SIGKILL the target's process group (default), or only its first process")
    parser.add_argument("--leak-grace", type=float, default=5.0,
                        help="seconds the target's processes may outlive a kill (engines leave at EOF)")
    parser.add_argument("--final-timeout", type=float, default=1800.0, help="seconds for the last, unkilled run")
    parser.add_argument("--logs", default=None, help="the target's output, one file per start (default OUT/killtest)")
    parser.add_argument("--strict", action="store_true",
                        help="also fail when the finished run differs from an uninterrupted one (games, steps)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.target == "match":
        target = MatchTarget(out, DEFAULT_MATCH if workload is None else workload)
        window = tuple(args.window or (2.0, 12.0))
    else:
        target = RLTarget(out, DEFAULT_RL if workload is None else workload, args.generations)
        window = tuple(args.window or (3.0, 25.0))
    if not 0 <= window[0] <= window[1] or not math.isfinite(window[1]):
        parser.error("--window needs 0 <= MIN_S <= MAX_S")
    out.mkdir(parents=True, exist_ok=True)
    logs = Path(args.logs) if args.logs else out / "killtest"
    return run(target, args.kills, args.seed, window, args.kill_scope, args.leak_grace, args.final_timeout, logs,
               strict=args.strict)


if __name__ == "__main__":
    sys.exit(main())
