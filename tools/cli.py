"""The `tabula` console command: a table of subcommands, each imported only when it runs."""
from __future__ import annotations

import importlib
import importlib.metadata
import sys

# subcommand -> (module with a main(argv) function, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "gtp": ("tabula.gtp.__main__", "run the engine over the Go Text Protocol on stdin/stdout"),
    "analysis": ("tabula.gtp.analysis_main",
                 "analyse positions over KataGo's JSON analysis protocol on stdin/stdout (KaTrain)"),
    "bench": ("tabula.tools.bench", "benchmarks: board, net, search, visits, rollout, movetime"),
    "export": ("tabula.tools.learn.export", "convert networks: Leela Zero text weights <-> ONNX, random networks"),
    "match": ("tabula.tools.compete.match", "play matches between GTP engines and rate them"),
    "openings": ("tabula.tools.compete.openings", "balanced opening lines for tabula match --openings, by a network"),
    "arena": ("tabula.tools.compete.arena", "games between in-process players of gomoku: networks, pure MCTS, random"),
    "resign": ("tabula.tools.compete.resign_calibration",
               "calibrate the resignation threshold from matches played with resignation off"),
    "regress": ("tabula.tools.check.regress", "run GNU Go style .tst regression files against a GTP engine"),
    "prepare": ("tabula.tools.learn.prepare",
                "SGF archives and folders -> compact training shards, with filter counts"),
    "train": ("tabula.tools.learn.train", "supervised training on prepared shards (resumable); --model rollout"),
    "eval": ("tabula.tools.learn.evaluate",
             "move-prediction accuracy and value MSE of an ONNX network on SGF archives"),
    "calibrate": ("tabula.tools.learn.calibrate",
                  "fit a network's small-board value offset to the results of its own games"),
    "plot": ("tabula.tools.learn.plot", "plot a training run's loss and accuracy, or an RL run's Elo"),
    "selfplay": ("tabula.tools.learn.selfplay", "self-play games with a network into a replay store and SGF"),
    "rl": ("tabula.tools.learn.rl_loop",
           "the AlphaGo Zero loop: self-play, train, gate; start, stop and resume one directory"),
    "distill": ("tabula.tools.learn.distill",
                "a student network taught by a stronger one: label with the teacher and train, in chunks"),
    "gomocup": ("tabula.tools.gomocup", "freestyle gomoku over the Gomocup AI protocol (piskvork) on stdin/stdout"),
}


def version() -> str:
    """The installed distribution's version (a checkout run without installing says so)."""
    try:
        return importlib.metadata.version("tabula")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def usage() -> str:
    lines = ["usage: tabula COMMAND [options]", "       tabula --version", "", "commands:"]
    lines += [f"  {name:<10} {text}" for name, (_, text) in SUBCOMMANDS.items()]
    lines.append("\n`tabula COMMAND --help` describes each command.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    if argv[0] in ("-V", "--version"):
        print(f"tabula {version()}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in SUBCOMMANDS:
        print(f"tabula: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(SUBCOMMANDS[name][0])
    return module.main(rest) or 0


if __name__ == "__main__":
    sys.exit(main())
