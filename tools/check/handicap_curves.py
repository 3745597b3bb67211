"""Issue 36's handicap measure as curves: Tabula's win rate giving GNU Go handicap, against what was varied.

    python3 -m tabula.tools.check.handicap_curves [--plot OUT.png] [SPEC ...]

Each SPEC is ``PANEL:X:LABEL:DIR``: a `tabula match --out` directory (results.jsonl), placed at X on the panel
PANEL. Without specs, the kept 19×19 sets of docs/matches (``DEFAULT_SETS``): the visits a move (the default
network), the generations of handicap self-play its value, score and ownership heads trained on (400 visits), and the
stones given. Prints a table (Markdown) of each set: games, Tabula's wins, the win rate with its 95% interval (Wilson),
and the same without the games GNU Go forfeited (crashes, illegal moves: won by no play of Tabula's); with
``--plot``, one panel per PANEL, the bar the issue sets drawn where there is one.

Why: the bar (≥ 70% of 50 games at 7 stones, ≥ 50% of 30 at 9) was not met by any setting tried; the issue asks,
where "done when" cannot hold, for the measured curves that say why.
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

from tabula.tools.compete.elo import wilson_interval
from tabula.tools.compete.results import pair_score, read_match
from tabula.tools.compete.settings import CONFIG_FILE, RESULTS_FILE

MATCHES = "docs/matches"
# PANEL:X:LABEL:DIR, the 19×19 handicap sets as kept (docs/STRENGTH.md says how each was played)
DEFAULT_SETS = (
    f"visits:100:100 visits:{MATCHES}/issue36-handicap7-v100",
    f"visits:400:400 visits (the default):{MATCHES}/issue36-handicap7-atari",
    f"visits:1600:1,600 visits:{MATCHES}/issue36-handicap7-v1600",
    f"training:0:the default's network:{MATCHES}/issue36-handicap7-atari",
    f"training:7:stage 7, generation 7:{MATCHES}/issue36-handicap7-rl7-gen7",
    f"training:21:stage 8, generation 10:{MATCHES}/issue36-handicap7-rl8-gen10",
    f"stones:7:7 stones:{MATCHES}/issue36-handicap7",  # both played before the atari floor (2026-11-27)
    f"stones:9:9 stones:{MATCHES}/issue36-handicap9",
)
PANELS = {  # title and x axis of each panel
    "visits": ("giving 7 stones, the default network", "visits a move (log scale)"),
    "training": ("giving 7 stones at 400 visits", "generations of 19×19 handicap self-play (stages 7 and 8)"),
    "stones": ("400 visits, the komi network before the atari floor", "handicap stones given"),
}
BARS = {7: (0.70, 50), 9: (0.50, 30)}  # the bar at each number of stones: win rate, games


@dataclass(frozen=True)
class HandicapSet:
    panel: str
    x: float
    label: str
    directory: str
    stones: int
    games: int
    won: int
    forfeits: int  # games won because GNU Go crashed or played an illegal move

    def rate(self, without_forfeits: bool = False) -> tuple[float, float, float]:
        """Win rate and its 95% interval, over all games or over those GNU Go did not forfeit."""
        won, games = (self.won - self.forfeits, self.games - self.forfeits) if without_forfeits else \
            (self.won, self.games)
        low, high = wilson_interval(won, games)
        return (won / games if games else 0.0), low, high


def parse_spec(spec: str) -> tuple[str, float, str, str]:
    """``PANEL:X:LABEL:DIR`` → its parts; ValueError saying what is wrong."""
    parts = spec.split(":", 3)
    if len(parts) != 4 or not all(parts):
        raise ValueError(f"{spec!r}: give PANEL:X:LABEL:DIR")
    panel, x, label, directory = parts
    try:
        return panel, float(x), label, directory
    except ValueError:
        raise ValueError(f"{spec!r}: X must be a number") from None


def read_set(panel: str, x: float, label: str, directory: str, player: str = "tabula") -> HandicapSet | None:
    """A match directory's results from ``player``'s view (a name of its config's ``names``); None where it has no
    results (not played, or not on this machine); ValueError where ``player`` is not one of its engines."""
    if not all(os.path.isfile(os.path.join(directory, name)) for name in (CONFIG_FILE, RESULTS_FILE)):
        return None
    index, results = read_match(directory, player)
    if not results:
        return None
    won = [r for r in results if pair_score(index, r) == 1.0]
    forfeits = [r for r in won if r.get("fault")]
    return HandicapSet(panel, x, label, directory, int(results[0].get("handicap") or 0), len(results), len(won),
                       len(forfeits))


def table(sets: list[HandicapSet]) -> str:
    lines = ["| panel | set | stones | games | Tabula won | win rate [95%] | without GNU Go's forfeits | the bar |",
             "|---|---|---|---|---|---|---|---|"]
    for s in sets:
        rate, low, high = s.rate()
        clean, clean_low, clean_high = s.rate(without_forfeits=True)
        bar = BARS.get(s.stones)
        bar_text = f"≥ {bar[0]:.0%} of {bar[1]}" if bar else ""
        lines.append(f"| {s.panel} | {s.label} ({os.path.basename(s.directory)}) | {s.stones} | {s.games} | {s.won} "
                     f"| {rate:.1%} [{low:.1%}, {high:.1%}] | {s.won - s.forfeits} of {s.games - s.forfeits}: "
                     f"{clean:.1%} [{clean_low:.1%}, {clean_high:.1%}] | {bar_text} |")
    return "\n".join(lines)


def pooled(sets: list[HandicapSet]) -> str:
    """Every game of each number of stones, each directory once, whatever its setting: what any of the settings
    tried wins at that handicap (a mixture of settings, not one engine's figure)."""
    lines = []
    for stones in sorted({s.stones for s in sets}):
        distinct = list({s.directory: s for s in sets if s.stones == stones}.values())
        every = HandicapSet("pooled", 0.0, "", "", stones, games=sum(s.games for s in distinct),
                            won=sum(s.won for s in distinct), forfeits=sum(s.forfeits for s in distinct))
        (rate, low, high), (clean, clean_low, clean_high) = every.rate(), every.rate(without_forfeits=True)
        plural = "s" if len(distinct) > 1 else ""
        lines.append(f"{stones} stones, all {len(distinct)} set{plural}: {every.won} of {every.games}, {rate:.1%} "
                     f"[{low:.1%}, {high:.1%}]; without GNU Go's forfeits {every.won - every.forfeits} of "
                     f"{every.games - every.forfeits}, {clean:.1%} [{clean_low:.1%}, {clean_high:.1%}]")
    return "\n".join(lines)


def plot(sets: list[HandicapSet], out: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = list(dict.fromkeys(s.panel for s in sets))
    figure, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4.2), squeeze=False)
    for axis, panel in zip(axes[0], panels):
        rows = sorted((s for s in sets if s.panel == panel), key=lambda s: s.x)
        for without, style, name in ((False, "o-", "all games"), (True, "s--", "without GNU Go's forfeits")):
            rates = [s.rate(without) for s in rows]
            axis.errorbar([s.x for s in rows], [100 * r for r, _, _ in rates],
                          yerr=[[100 * (r - low) for r, low, _ in rates], [100 * (high - r) for r, _, high in rates]],
                          fmt=style, capsize=3, label=name, alpha=1.0 if not without else 0.6)
        for s in rows:
            if s.stones in BARS and panel != "stones":
                axis.axhline(100 * BARS[s.stones][0], color="red", linewidth=1, linestyle=":")
        if panel == "stones":
            for stones, (bar, _) in BARS.items():
                axis.plot([stones - 0.3, stones + 0.3], [100 * bar] * 2, color="red", linewidth=2)
        if panel == "visits":
            axis.set_xscale("log")
            axis.set_xticks([s.x for s in rows], [f"{s.x:g}" for s in rows])
            axis.minorticks_off()
        if panel == "stones":
            axis.set_xticks(sorted({s.x for s in rows} | set(BARS)))
        title, xlabel = PANELS.get(panel, (panel, "x"))
        axis.set_title(title, fontsize=10)
        axis.set_xlabel(xlabel, fontsize=9)
        axis.set_ylabel("Tabula's win rate, % (95% interval)", fontsize=9)
        axis.set_ylim(0, 100)
        axis.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8, loc="upper left", title="red: the issue's bar", title_fontsize=8)
    figure.suptitle("19×19, Tabula (white) giving GNU Go 3.8 level 10 fixed handicap at komi 0.5", fontsize=11)
    figure.tight_layout()
    figure.savefig(out, dpi=110)
    plt.close(figure)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tabula.tools.check.handicap_curves",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("sets", nargs="*", metavar="SPEC", help="PANEL:X:LABEL:DIR (default: the kept 19×19 sets)")
    parser.add_argument("--plot", metavar="OUT.png", help="also draw the curves into this image")
    parser.add_argument("--player", default="tabula", help="whose wins count (the match's --names; default tabula)")
    args = parser.parse_args(argv)
    try:
        specs = [parse_spec(spec) for spec in (args.sets or DEFAULT_SETS)]
    except ValueError as error:
        parser.error(str(error))
    sets = []
    for panel, x, label, directory in specs:
        try:
            found = read_set(panel, x, label, directory, args.player)
        except ValueError as error:
            parser.error(str(error))
        if found is None:
            print(f"{directory}: no results, left out", file=sys.stderr)
        else:
            sets.append(found)
    if not sets:
        print("no set has results", file=sys.stderr)
        return 1
    print(table(sets))
    print(pooled(sets))
    if args.plot:
        print(f"wrote {plot(sets, args.plot)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
