"""Entry point: ``tabula analysis``. Builds the engine's configuration and the AnalysisConfig from argv, loads the
networks, then serves KataGo's JSON analysis protocol on stdio (``gtp.analysis_engine``).

stdout carries only protocol lines; logs go to stderr.
"""
from __future__ import annotations

import argparse
import dataclasses
import io
import sys

from tabula.engine.config import EngineConfig

from .__main__ import add_engine_arguments, build_config, configure_logging
from .analysis_engine import REPORT_AS, AnalysisConfig, AnalysisEngine, line_writer, serve
from .flags import Flag, add_flags, from_flags

# Search threads per position where --threads is not given: positions searched at once are what fills the batches
# (KataGo's numSearchThreadsPerAnalysisThread is 1 in its analysis example too).
ANALYSIS_SEARCH_THREADS = 1


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="tabula analysis",
        description="Analyse Go positions over KataGo's JSON analysis protocol: one query a line on stdin, "
                    "answers on stdout in completion order (KaTrain and other analysis-engine clients).")
    add_flags(parser, AnalysisConfig, {
        "analysis_threads": "positions searched at once, their network evaluations batched together (default 0: "
                            "4 where the network runs on the CPU, 16 on a GPU)",
        "report_as": Flag("whose view win rates, scores and ownership are reported from, as KataGo's "
                          "reportAnalysisWinratesAs (default %(default)s; a query's overrideSettings may change it)",
                          choices=REPORT_AS),
        "max_queued_turns": "turns waiting to be searched at most; past it stdin is read only as turns start "
                            "(default %(default)s)",
        "pv_len": "moves of each principal variation after its first, unless a query says (default %(default)s)",
        "warn_unused_fields": "a warning line for each query field KataGo's protocol does not have",
        "max_batch": "positions per network call at most, over all searches (default %(default)s)",
        "quit_without_waiting": "at the end of input, stop the searches and drop the queued turns instead of "
                                "answering them (KataGo's -quit-without-waiting)",
    })
    add_engine_arguments(parser, play=False, search_help={  # this command's default (build_analysis_config)
        "threads": f"search threads per position (default 0: {ANALYSIS_SEARCH_THREADS}; the positions searched at "
                   "once fill the batches)"})
    return parser.parse_args(argv)


def build_analysis_config(args: argparse.Namespace) -> tuple[EngineConfig, AnalysisConfig]:
    """The one place argv becomes configuration: the engine's (one search thread per position unless --threads
    says otherwise) and the analysis engine's."""
    config = build_config(args)
    if not args.threads:
        config = dataclasses.replace(config, search=dataclasses.replace(config.search,
                                                                        threads=ANALYSIS_SEARCH_THREADS))
    return config, from_flags(AnalysisConfig, args)


def load_evaluator(config: EngineConfig):
    """The networks of ``config`` behind one evaluator (each board size to the first network that plays it)."""
    import numpy as np

    from tabula.engine.net.evaluator import available_cores, load_networks
    from tabula.engine.play.search_player import default_weights

    paths = list(config.net.weights) or default_weights()
    net = config.net.for_search(config.search, available_cores())
    evaluator, _ = load_networks(paths, np.random.SeedSequence(config.seed), symmetry="random", threads=net.threads,
                                 provider=net.provider, precision=net.precision, max_batch=net.max_batch,
                                 batch_hint=config.search.batch_size, cache_dir=net.cache_dir or None)
    return evaluator


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    configure_logging(args.log_level)
    config, analysis = build_analysis_config(args)
    try:
        evaluator = load_evaluator(config)
    except (OSError, ValueError) as error:
        print(f"tabula analysis: {error}", file=sys.stderr)
        return 1
    stdout = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", newline="\n", write_through=True)
    engine = AnalysisEngine(evaluator, config.search, analysis, line_writer(stdout), seed=config.seed)
    # KataGo's own words: some clients wait for this line on stderr before they send a query
    print("Started, ready to begin handling requests", file=sys.stderr, flush=True)
    stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
    serve(engine, stdin)
    return 0


if __name__ == "__main__":
    sys.exit(main())
