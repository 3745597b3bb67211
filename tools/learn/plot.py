"""`tabula plot RUNDIR [--out FILE.png]`: what a run directory's logs show.

A `tabula train` run (RUNDIR/metrics.jsonl): loss, policy accuracy and value MSE against the samples seen (steps ×
batch, from RUNDIR/config.json; steps where it is missing), and the auxiliary heads' validation losses where the run
has them (default RUNDIR/loss.png). A `tabula rl` run (RUNDIR/elo.jsonl): the accepted networks' Elo against self-play
games, rejected candidates as crosses (default RUNDIR/elo.png). With ``--arena DIR...`` (`tabula arena --out`
directories whose first player is one of the run's networks, ``net:.../gen-NNNN.onnx``): the learning curve instead,
the Elo and each arena's score (95% Wilson interval) against the hours the run ran (a pause between chunks, any gap
of more than ``--gap-minutes`` between generations, counted as one median step), one line per opponent.
A `tabula distill` run (RUNDIR/metrics.jsonl with the teacher's losses): the policy KL from the teacher, the
teacher's top move and the value MSE, on the batches trained and on each chunk's new labels before training on them
(held out; a running mean over FRESH_CHUNKS chunks, weighted by positions), against the run's CPU hours (wall hours
where its metrics predate ``cpu_s``) (default RUNDIR/loss.png). With ``--match CHUNK:DIR...`` (`tabula match --out`
directories whose first engine played the run's student after chunk CHUNK, e.g. its RUNDIR/snapshots file; or
``CHUNK:DIR:NAME``, the engine NAME of DIR, so that one `tabula match --gauntlet` of every snapshot against one
anchor draws the whole curve): a fourth panel, the strength curve, each match's score (95% Wilson interval) at that
chunk's hours, one line per opponent, board size and handicap.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

METRICS = "metrics.jsonl"  # written by tools/learn/train.py
ELO = "elo.jsonl"  # written by tools/learn/rl_loop.py: one line per evaluated candidate


def read_jsonl(path: str) -> list[dict]:
    """Lines of a JSON-lines file or of its compressed copy (a kept match's ``results.jsonl.xz``; [] if there is
    neither); a line cut short by a kill is skipped."""
    from tabula.tools.compete.results import read_jsonl_text

    found = []
    for line in read_jsonl_text(path).splitlines():
        try:
            found.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return found


def read_metrics(run_dir: str) -> tuple[list[dict], list[dict]]:
    """(train lines, validation lines) of RUNDIR/metrics.jsonl."""
    records = read_jsonl(os.path.join(run_dir, METRICS))
    return ([r for r in records if r.get("kind") != "val"], [r for r in records if r.get("kind") == "val"])


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


FRESH_CHUNKS = 5  # chunks in the running mean of a distill run's fresh (held-out) losses


def read_match(directory: str, engine: str = "") -> dict:
    """A `tabula match --out` directory's first engine's points (1 a win, 0.5 a draw; void games left out) against
    its second, the games counted, the opponent's name, the board size and the handicap; ``engine``: the engine of
    that name instead, against the one engine it played (a gauntlet's anchor, say). ValueError where it is no match,
    has no such engine, or the engine has no games or played several opponents."""
    from pathlib import Path

    from tabula.tools.compete.match import load_config
    from tabula.tools.compete.results import pair_score, read_results

    try:
        config = load_config(Path(directory) / "config.json")
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{directory}: no `tabula match --out` directory ({error})") from None
    names = list(config.names) if config.names else [str(e) for e in config.engines]
    if engine and engine not in names:
        raise ValueError(f"{directory}: no engine named {engine!r} (its engines: {', '.join(names)})")
    index = names.index(engine) if engine else 0
    games = [r for r in read_results(Path(directory) / "results.jsonl") if index in (r["black"], r["white"])]
    if not engine:
        games = [r for r in games if 1 in (r["black"], r["white"])]
    opponents = {r["white"] if r["black"] == index else r["black"] for r in games}
    if len(opponents) > 1:
        raise ValueError(f"{directory}: {engine} played {len(opponents)} engines; the curve takes one opponent")
    scores = [s for s in (pair_score(index, r) for r in games) if s is not None]
    if not scores:
        raise ValueError(f"{directory}: no finished games of {engine or 'its first two engines'}")
    return {"points": sum(scores), "games": len(scores), "opponent": names[opponents.pop()], "size": config.size,
            "handicap": config.handicap}


def parse_matches(items: list[str]) -> list[tuple[int, str, str]]:
    """``--match CHUNK:DIR`` or ``CHUNK:DIR:NAME`` items as (chunk, directory, engine name or ""); ValueError for
    one that is not."""
    found = []
    for item in items:
        chunk, _, directory = item.partition(":")
        engine = ""
        if directory and not os.path.isdir(directory) and ":" in directory:
            directory, _, engine = directory.rpartition(":")
        if not chunk.isdigit() or not directory:
            raise ValueError(f"--match is CHUNK:DIR or CHUNK:DIR:NAME (the student after chunk CHUNK played DIR's "
                             f"first engine, or is its engine NAME), not {item!r}")
        if not os.path.isdir(directory):
            raise ValueError(f"--match {item}: no such directory")
        found.append((int(chunk), directory, engine))
    return found


def plot_distill(run_dir: str, out: str | None = None, matches: list[tuple[int, str, str]] = ()) -> str:
    """A `tabula distill` run's RUNDIR/metrics.jsonl (one line a chunk) as three panels against its compute, and with
    ``matches`` ((chunk, `tabula match` directory, the student's engine name there or "" for its first engine)) a
    fourth: the student's score in them."""
    from tabula.tools.compete.elo import wilson_interval

    rows = [r for r in read_jsonl(os.path.join(run_dir, METRICS)) if _distill_line(r)]
    cpu = all(r.get("cpu_s") is not None for r in rows)
    hours = [r["cpu_s" if cpu else "elapsed_s"] / 3600 for r in rows]
    hours_at = {r["chunk"]: h for r, h in zip(rows, hours) if "chunk" in r}
    series: dict[str, list[tuple[float, float, float, float]]] = {}
    for chunk, directory, engine in matches:
        if chunk not in hours_at:
            raise ValueError(f"--match {chunk}:{directory}: {run_dir} has no chunk {chunk}")
        match = read_match(directory, engine)
        low, high = wilson_interval(match["points"], match["games"])
        score = match["points"] / match["games"]
        stones = f", handicap {match['handicap']}" if match["handicap"] else ""
        label = f"against {match['opponent']} ({match['size']}x{match['size']}{stones})"
        series.setdefault(label, []).append((hours_at[chunk], 100 * score, 100 * (score - low), 100 * (high - score)))
    plt = _pyplot()
    figure, axes = plt.subplots(1, 4 if matches else 3, figsize=(20 if matches else 15, 4.2))
    for ax, (trained, fresh, title) in zip(axes, (("policy_kl", "fresh_policy_kl", "policy KL from the teacher"),
                                                  ("top1", "fresh_top1", "the teacher's top move"),
                                                  ("value_mse", "fresh_value_mse", "value MSE"))):
        ax.plot(hours, [r.get(trained, float("nan")) for r in rows], label="batches trained")
        held = [(h, r[fresh], r.get("labelled", 1)) for h, r in zip(hours, rows) if fresh in r]
        if held:
            ax.plot([h for h, _, _ in held], [v for _, v, _ in held], ".", alpha=0.3, color="tab:orange")
            mean = [sum(v * n for _, v, n in held[max(0, i - FRESH_CHUNKS + 1):i + 1])
                    / sum(n for _, _, n in held[max(0, i - FRESH_CHUNKS + 1):i + 1]) for i in range(len(held))]
            ax.plot([h for h, _, _ in held], mean, color="tab:orange",
                    label=f"new labels before training (mean of {FRESH_CHUNKS} chunks)")
        ax.set_title(title)
        ax.set_xlabel("CPU hours (this process)" if cpu else "wall hours")
        ax.grid(alpha=0.3)
        ax.legend()
    if matches:
        ax = axes[3]
        for label, points in sorted(series.items()):
            points.sort()
            ax.errorbar([p[0] for p in points], [p[1] for p in points],
                        yerr=[[p[2] for p in points], [p[3] for p in points]], fmt="o-", capsize=3, label=label)
        ax.axhline(50, color="grey", linewidth=0.8)
        ax.set_ylim(0, 100)
        ax.set_title("the student's score, % (95% interval)")
        ax.set_xlabel(axes[0].get_xlabel())
        ax.set_xlim(axes[0].get_xlim())  # the same hours as the losses beside it
        ax.grid(alpha=0.3)
        ax.legend()
    figure.suptitle(os.path.basename(os.path.normpath(run_dir)))
    return _save(plt, figure, out or os.path.join(run_dir, "loss.png"))


def _distill_line(record: dict) -> bool:
    # a chunk trained has the teacher's KL; one stopped before its first step has only the fresh losses
    return "policy_kl" in record or "fresh_policy_kl" in record


def is_distill_run(run_dir: str) -> bool:
    return any(_distill_line(r) for r in read_jsonl(os.path.join(run_dir, METRICS)))


def plot_training(run_dir: str, out: str | None = None) -> str | None:
    """RUNDIR/metrics.jsonl as three panels; returns the image's path, or None when there are no metrics."""
    train, val = read_metrics(run_dir)
    if not train and not val:
        return None
    plt = _pyplot()
    aux = [name for name in ("val_ownership_loss", "val_score_loss", "val_reply_loss") if val and name in val[-1]]
    figure, axes = plt.subplots(1, 4 if aux else 3, figsize=(20 if aux else 15, 4.2))
    loss_ax, acc_ax, value_ax = axes[:3]
    batch, unit = _samples_per_step(run_dir)
    steps = [r["step"] * batch for r in train]
    vsteps = [r["step"] * batch for r in val]
    loss_ax.plot(steps, [r["loss"] for r in train], label="train total")
    loss_ax.plot(steps, [r["policy_loss"] for r in train], label="train policy CE")
    if val:
        loss_ax.plot(vsteps, [r["val_policy_loss"] for r in val], "o-", label="val policy CE")
    loss_ax.set_title("loss")
    acc_ax.plot(steps, [r["top1"] for r in train], label="train top-1")
    if val:
        acc_ax.plot(vsteps, [r["val_top1"] for r in val], "o-", label="val top-1")
        acc_ax.plot(vsteps, [r["val_top5"] for r in val], "o-", label="val top-5")
    acc_ax.set_title("policy accuracy")
    value_ax.plot(steps, [r["value_mse"] for r in train], label="train")
    if val:
        value_ax.plot(vsteps, [r["val_value_mse"] for r in val], "o-", label="val")
    value_ax.set_title("value MSE")
    if aux:
        for name in aux:
            axes[3].plot(vsteps, [r.get(name, float("nan")) for r in val], "o-", label=name[4:].replace("_", " "))
        axes[3].set_title("auxiliary heads (val)")
    for ax in axes:
        ax.set_xlabel(unit)
        ax.grid(alpha=0.3)
        ax.legend()
    figure.suptitle(os.path.basename(os.path.normpath(run_dir)))
    return _save(plt, figure, out or os.path.join(run_dir, "loss.png"))


def _samples_per_step(run_dir: str) -> tuple[int, str]:
    """(samples a step sees, the x axis's name): the run's batch from config.json, or 1 and "step"."""
    try:
        with open(os.path.join(run_dir, "config.json")) as handle:
            return int(json.load(handle)["batch"]), "samples seen"
    except (OSError, ValueError, KeyError, TypeError):
        return 1, "step"


def _save(plt, figure, out: str) -> str:
    figure.tight_layout()
    figure.savefig(out, dpi=100)
    plt.close(figure)
    return out


def plot_elo(run_dir: str, out: str | None = None) -> str:
    """RUNDIR/elo.jsonl: the accepted networks' Elo (generation 0 = 0) against self-play games; returns the path."""
    history = read_jsonl(os.path.join(run_dir, ELO))
    plt = _pyplot()
    accepted = [h for h in history if h["accepted"]]
    figure, ax = plt.subplots(figsize=(7, 4.2))
    ax.plot([0] + [h["games"] for h in accepted], [0.0] + [h["elo"] for h in accepted], "o-", label="accepted")
    rejected = [h for h in history if not h["accepted"]]
    if rejected:
        ax.plot([h["games"] for h in rejected], [h["elo"] for h in rejected], "x", color="grey", label="rejected")
    ax.set_xlabel("self-play games")
    ax.set_ylabel("Elo (generation 0 = 0)")
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(os.path.basename(os.path.normpath(run_dir)))
    return _save(plt, figure, out or os.path.join(run_dir, "elo.png"))


def running_hours(history: list[dict], gap_minutes: float) -> dict[int, float]:
    """Each generation's hours into the run, from the times in elo.jsonl: the time between consecutive generations
    counts unless it is longer than ``gap_minutes`` (the run was stopped), in which case the gap counts as the
    median step. Generation 0 is at 0."""
    rows = sorted((h["generation"], h["time"]) for h in history if "time" in h)
    if not rows:
        return {0: 0.0}
    steps = sorted(b - a for (_, a), (_, b) in zip(rows, rows[1:]))
    median = steps[len(steps) // 2] if steps else 0.0
    hours, elapsed, previous = {0: 0.0, rows[0][0]: median / 3600}, median, rows[0][1]
    for generation, time in rows[1:]:
        step = time - previous
        elapsed += step if step <= gap_minutes * 60 else median
        hours[generation] = elapsed / 3600
        previous = time
    return hours


def read_arena(directory: str) -> dict | None:
    """An arena directory's first player's generation, its opponent, its points (1 a win, 0.5 a draw: the arena's
    own count) and its games; None where the first player is no ``gen-NNNN`` network or there are no games."""
    from tabula.tools.compete.arena import first_player_points

    try:
        with open(os.path.join(directory, "config.json")) as handle:
            players = json.load(handle)["players"]
    except (OSError, ValueError, KeyError):
        return None
    if not isinstance(players, list) or len(players) < 2:
        return None
    found = re.search(r"gen-(\d+)\.onnx$", players[0])
    results = read_jsonl(os.path.join(directory, "results.jsonl"))
    if found is None or not results:
        return None
    return {"generation": int(found[1]), "opponent": players[1], "points": first_player_points(results),
            "games": len(results)}


def plot_curve(run_dir: str, arenas: list[str], out: str | None = None, gap_minutes: float = 10.0) -> str:
    """The learning curve: Elo and the arenas' scores against the hours the run ran; returns the path."""
    from tabula.tools.compete.elo import wilson_interval

    history = read_jsonl(os.path.join(run_dir, ELO))
    hours = running_hours(history, gap_minutes)
    plt = _pyplot()
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6.4), sharex=True)
    accepted = [h for h in history if h["accepted"] and h["generation"] in hours]
    top.plot([0.0] + [hours[h["generation"]] for h in accepted], [0.0] + [h["elo"] for h in accepted], "o-",
             markersize=3)
    top.set_ylabel("gating Elo (generation 0 = 0)")
    top.grid(alpha=0.3)
    top.set_title(f"{os.path.basename(os.path.normpath(run_dir))}: the learning curve")
    by_opponent: dict[str, list[dict]] = {}
    for directory in arenas:
        arena = read_arena(directory)
        if arena is None or arena["generation"] not in hours:
            print(f"tabula plot: {directory} left out: no arena games of one of this run's generations",
                  file=sys.stderr)
            continue
        by_opponent.setdefault(arena["opponent"], []).append(arena)
    def natural(item: tuple[str, list]) -> list:  # pure:1000 before pure:5000 before pure:10000
        return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", item[0])]

    for opponent, rows in sorted(by_opponent.items(), key=natural):
        rows.sort(key=lambda row: row["generation"])
        x = [hours[row["generation"]] for row in rows]
        score = [row["points"] / row["games"] for row in rows]
        bounds = [wilson_interval(row["points"], row["games"]) for row in rows]
        below = [s - low for s, (low, _) in zip(score, bounds)]
        above = [high - s for s, (_, high) in zip(score, bounds)]
        bottom.errorbar(x, [100 * s for s in score], yerr=[[100 * b for b in below], [100 * a for a in above]],
                        fmt="o-", capsize=3, label=f"against {opponent}")
    bottom.set_ylim(0, 100)
    bottom.set_ylabel("score, % (95% interval)")
    bottom.set_xlabel(f"hours the run ran (pauses over {gap_minutes:g} minutes left out)")
    bottom.grid(alpha=0.3)
    if by_opponent:
        bottom.legend()
    return _save(plt, figure, out or os.path.join(run_dir, "curve.png"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tabula plot", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", metavar="RUNDIR", help="a `tabula train`, `tabula rl` or `tabula distill` run "
                                                          "directory")
    parser.add_argument("--out", default=None, help="image file (default RUNDIR/loss.png, RUNDIR/elo.png or, with "
                                                    "--arena, RUNDIR/curve.png)")
    parser.add_argument("--arena", nargs="+", default=[], metavar="DIR",
                        help="an rl run: `tabula arena --out` directories of its networks, for the learning curve")
    parser.add_argument("--match", nargs="+", default=[], metavar="CHUNK:DIR[:NAME]",
                        help="a distill run: `tabula match --out` directories whose first engine played the "
                             "student after chunk CHUNK (or whose engine NAME did: one gauntlet for all the "
                             "snapshots), for the strength curve")
    parser.add_argument("--gap-minutes", type=float, default=10.0,
                        help="with --arena: a longer time between generations is a pause (default 10)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.arena and not os.path.exists(os.path.join(args.run_dir, ELO)):
        parser.error(f"--arena needs a `tabula rl` run directory ({args.run_dir} has no {ELO})")
    if not args.gap_minutes > 0:
        parser.error("--gap-minutes must be above 0")
    if args.match and not is_distill_run(args.run_dir):
        parser.error(f"--match needs a `tabula distill` run directory ({args.run_dir} is none)")
    if is_distill_run(args.run_dir):
        try:
            out = plot_distill(args.run_dir, args.out, parse_matches(args.match))
        except ValueError as error:
            parser.error(str(error))
    elif os.path.exists(os.path.join(args.run_dir, METRICS)):
        out = plot_training(args.run_dir, args.out)
        if out is None:
            print(f"tabula plot: no metrics in {args.run_dir}", file=sys.stderr)
            return 1
    elif args.arena:
        out = plot_curve(args.run_dir, args.arena, args.out, args.gap_minutes)
    elif os.path.exists(os.path.join(args.run_dir, ELO)):
        out = plot_elo(args.run_dir, args.out)
    else:
        print(f"tabula plot: {args.run_dir} has neither {METRICS} (a `tabula train` run) nor {ELO} "
              f"(a `tabula rl` run)", file=sys.stderr)
        return 2
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
