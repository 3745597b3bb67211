"""KaTrain's own engine driver (katrain.core.engine.KataGoEngine) against ``tabula analysis``, headless.

Run by tests/clients/test_katrain.py with a Python that has KaTrain installed (its GUI stays closed: only kivy's
``platform`` is read). Usage: katrain_driver.py COMMAND..., the command that starts ``tabula analysis``. Prints one
JSON line: what KaTrain made of the answers, read through its own GameNode.
"""
from __future__ import annotations

import json
import os
import shlex
import sys
import threading

os.environ.setdefault("KIVY_NO_ARGS", "1")
os.environ.setdefault("KIVY_NO_WINDOW", "1")
os.environ.setdefault("KIVY_NO_CONSOLELOG", "1")

from katrain.core.engine import KataGoEngine  # noqa: E402
from katrain.core.game_node import GameNode  # noqa: E402
from pysgf import Move  # noqa: E402


class HeadlessKaTrain:
    """What KataGoEngine asks of the KaTrain app: a log and a popup call."""

    def __init__(self):
        self.errors: list[str] = []
        self.lines: list[str] = []

    def log(self, message, level=0):
        self.lines.append(str(message))

    def __call__(self, message, *args):
        self.errors.append(f"{message} {args}")


def main(argv: list[str]) -> int:
    # KaTrain runs a custom command through the shell; exec makes the engine the process KaTrain ends on exit
    command = "exec " + " ".join(shlex.quote(word) for word in argv)
    katrain = HeadlessKaTrain()
    config = {"altcommand": command, "max_visits": 24, "fast_visits": 8, "max_time": 30.0, "wide_root_noise": 0.0,
              "_enable_ownership": True, "allow_recovery": False}
    engine = KataGoEngine(katrain, config)
    root = GameNode(properties={"SZ": "9", "KM": "6.5", "RU": "japanese"})
    nodes = [root]
    for player, vertex in [("B", "E5"), ("W", "C3"), ("B", "G7")]:
        nodes.append(nodes[-1].play(Move.from_gtp(vertex, player=player)))
    done = threading.Event()
    partial_seen = []
    pending = set(range(len(nodes)))

    def callback_for(index, node):
        def callback(analysis, partial):
            if partial:
                partial_seen.append(index)
                return
            node.set_analysis(analysis)
            pending.discard(index)
            if not pending:
                done.set()
        return callback

    errors = []
    for index, node in enumerate(nodes):
        engine.request_analysis(node, callback_for(index, node), error_callback=errors.append,
                                report_every=0.05 if index == 0 else None)
    finished = done.wait(120)
    report = {
        "finished": finished,
        "errors": errors + katrain.errors,
        "partial": len(partial_seen),
        "nodes": [{
            "complete": node.analysis_complete,
            "visits": (node.analysis.get("root") or {}).get("visits"),
            "winrate": node.winrate,
            "score": node.score,
            "candidates": [m["move"] for m in node.candidate_moves][:3],
            "ownership": len(node.ownership or []),
            "policy": len(node.policy or []),
        } for node in nodes],
    }
    print(json.dumps(report), flush=True)
    process = engine.katago_process
    engine.shutdown(finish=None)  # as KaTrain does on exit: end the process, do not wait for the reader threads
    if process is not None:
        process.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
