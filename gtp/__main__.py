"""Entry point: ``tabula gtp`` / ``python -m tabula.gtp``. Builds the EngineConfig from argv, then serves GTP on stdio.

stdout carries only GTP replies; logs go to stderr.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import logging
import sys

from tabula.engine.config import BACKENDS, PRECISIONS, EngineConfig
from tabula.engine.play.player import PICKERS, Player
from tabula.engine.rules.game import POSITIONAL, SIMPLE_KO, SITUATIONAL, Rules, UnsupportedRulesError, parse_rules

from .commands import Session, serve
from .flags import Flag, add_flags, from_flags

# Modules that register further command families into commands.TABLE when imported (e.g. "tabula.gtp.analysis").
# A module listed here but not yet written is skipped.
EXTENSION_MODULES: list[str] = ["tabula.gtp.analysis", "tabula.gtp.raw_nn"]
TERMINAL_HINT = ("tabula: ready for GTP commands, e.g. `boardsize 9`, `genmove b`, `play w E5`, `showboard`, `quit`\n"
                 "tabula: to play on a board, give a GUI (Sabaki, GoGui, Lizzie) this command with its full path "
                 "(see the README)")
LOG_LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
SEARCH_LOGGER = "tabula.search"  # a line a move (playouts, time, winrate) at INFO, its candidates at DEBUG


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="tabula gtp", usage="%(prog)s [options]",
        description="Play Go over the Go Text Protocol on stdin/stdout: a GUI (Sabaki, GoGui, Lizzie) or a server "
                    "bridge (gtp2ogs, kgsGtp) starts this command and talks to it; typed at a terminal, try "
                    "`genmove b`, `showboard`, `list_commands`, `quit`.")
    add_engine_arguments(parser)
    groups = _groups(parser)
    groups["analysis"].add_argument(
        "--ogs-chat", action="store_true",
        help="write MALKOVICH:/DISCUSSION: chat lines to stderr after each genmove (gtp2ogs relays them to the OGS "
             "game chat; off by default so other GUIs' consoles stay quiet)")
    _state_defaults(parser)
    return parser.parse_args(argv)


GROUPS = {  # title -> what its options are for, in the order `tabula gtp --help` lists them
    "playing": "the game and how the engine plays it",
    "search": "how much and how each move is searched",
    "time": "the clock (GTP time_settings and time_left set the game's clock; in byo-yomi a move searches its whole "
            "period less the lag buffer, since a period's unspent time is lost)",
    "network": "the network files and what runs them",
    "analysis": "output for GUIs, servers and people watching",
    "advanced": "search and evaluation terms that need measuring before a change",
}


def _groups(parser: argparse.ArgumentParser) -> dict[str, argparse._ArgumentGroup]:
    """The option groups of ``parser``, made once, in GROUPS' order."""
    made = {group.title: group for group in parser._action_groups}
    return {title: made.get(title) or parser.add_argument_group(title, text) for title, text in GROUPS.items()}


def _state_defaults(parser: argparse.ArgumentParser) -> None:
    """Append the default to every option's help that does not state one yet."""
    for action in parser._actions:
        help_text = action.help or ""
        if action.help is argparse.SUPPRESS or "default" in help_text.lower() or not action.option_strings \
                or action.dest == "help":
            continue
        shown = {True: "on", False: "off"}.get(action.default, "%(default)s") \
            if isinstance(action.default, bool) else "%(default)s"
        action.help = f"{help_text} (default {shown})" if help_text else f"default {shown}"


def add_engine_arguments(parser: argparse.ArgumentParser, play: bool = True,
                         search_help: dict[str, str] | None = None) -> None:
    """The options of the engine's configuration (``build_config`` reads them), in the groups of GROUPS: the network,
    the search and the rules, and with ``play`` the player, the clock and play's own (``tabula analysis`` takes all
    but those). ``search_help``: help texts of search options for a command whose defaults differ from gtp's."""
    defaults = EngineConfig()
    group = _groups(parser)
    # Every option that sets a configuration field is made from the field (gtp/flags.py add_flags), which checks its
    # value: a bad one is argparse's one-line error. Only --superko (no help text) and --weights (repeated, where
    # add_flags takes a comma-separated list) and --rules (a name or JSON, checked by parse_rules) are written here.
    add_flags(group["playing"], defaults, {} if not play else {
        "player": Flag("move picker (default: %(default)s)", choices=tuple(sorted(PICKERS))),
        "board_size": Flag("initial board size (default 19, or the smallest size the networks play without 19)",
                           name="--size"),
    })
    if play:  # tabula analysis takes the rules and komi from each query
        add_flags(group["playing"], defaults.rules, {"komi": "initial komi"})
        group["playing"].add_argument(
            "--rules", default=None, type=_rules_argument, metavar="RULES",
            help="the ruleset, as kata-set-rules takes it: japanese, korean, chinese, aga, tromp-taylor, ... or "
                 "KataGo's JSON (default: area scoring, positional superko)")
        group["playing"].add_argument("--superko", default=None, choices=[POSITIONAL, SITUATIONAL, SIMPLE_KO],
                                      help=f"the ko rule (default {defaults.rules.superko}, or the one --rules names)")
    add_flags(group["playing"], defaults, {"seed": Flag("random seed (default: fresh each run)", kind=int)})
    group["network"].add_argument(
        "--weights", action="append", default=[], metavar="FILE",
        help="network file: ONNX, or KataGo's model file (.bin.gz, .bin, .txt.gz: converted to ONNX on first use and "
             "cached, which needs torch); repeat for networks of other board sizes (the first that plays a size is "
             "used for it). Default: the shipped networks named in weights/DEFAULT")
    add_flags(group["search"], defaults.search, {
        "visits": "visits per move on every board size (0: no limit; default: by board size, 400 on 19x19, "
                  "1600 on 9x9, 854 on 13x13: about the same time a move)",
        "playouts": "new playouts per move (0: no limit)",
        "threads": "search threads (default 0: 1 where the network runs on a GPU, 2 on the CPU)",
        "lcb": "let a move whose lower confidence bound is above the most visited move's mean be chosen",
        "root_symmetries": "evaluate the root under all 8 symmetries and average",
        **(search_help or {}),
    })
    add_flags(group["network"], defaults.search, {
        "batch_size": "leaves per network call, at most (searches bounded by visits use fewer; default 0: 64 on a "
                      "GPU, 8 on the CPU)",
        "batches_in_flight": "batches each search thread keeps at the network at once (default 0: 2 on a GPU, "
                             "1 on the CPU); with 2-3 one thread descends while a GPU runs the earlier batches",
        "adaptive_batch": "shrink the batch for searches bounded by visits (at most one leaf in flight per "
                          "--playouts-per-leaf playouts)",
        "playouts_per_leaf": "a search bounded by visits keeps at most one leaf in flight per this many of its "
                             "playouts (default 0: 1024 on the CPU, one leaf a thread at the default visits; 32 on "
                             "a GPU)",
    })
    add_flags(group["advanced"], defaults.search, {
        "rollout_mix": "AlphaGo's mixed evaluation: each leaf's value is (1 - λ)·network + λ·one rollout of the "
                       "fast rollout policy (λ in [0, 1]; default 0: the network alone)",
        "static_score_utility": "weight in [0, 1] of KataGo's static score utility: moves are ranked by value + "
                                "weight·(2/π)·atan(score / 2N), so that far behind or ahead the score still counts "
                                "(default %(default)s; winrates reported stay the value)",
        "dynamic_score_utility": "weight in [0, 1] of the dynamic score utility: (2/π)·atan((score - centre) / "
                                 "(scale·N)), centred on the root's expected score (default %(default)s)",
        "dynamic_score_scale": "the dynamic score utility's scale, points per board line (default %(default)s)",
        "dynamic_score_zero_weight": "how far the dynamic centre moves from the expected score towards 0, in [0, 1] "
                                     "(default %(default)s)",
        "ownership_score": "the share in [0, 1] of each position's score taken from the ownership head's area count "
                           "instead of the score head, which compresses big margins (default %(default)s)",
        "atari_prior": "the least prior in [0, 1] of a move that captures, or gives a liberty to, a string in atari "
                       "of --atari-min-stones stones or more, which the network may rate about 0 (0: the network's "
                       "priors alone; default %(default)s)",
        "atari_min_stones": "the smallest string in atari whose capture or escape --atari-prior applies to "
                            "(default %(default)s)",
        "cpuct_utility_stdev_scale": "KataGo's variance-scaled exploration, in [0, 1]: each node's c_puct times "
                                     "1 + scale·(σ/prior - 1), σ the spread of its utilities, so that where every "
                                     "move is equally lost the search still ranks them (default %(default)s)",
        "cpuct_utility_stdev_prior": "the spread σ counts as at first (default %(default)s)",
        "cpuct_utility_stdev_prior_weight": "how many visits that prior counts for (default %(default)s)",
        "c_puct": "the exploration weight c in Q + c·P·√N/(1+n), utilities in [-1, 1] (KataGo's: 1.0; "
                  "default %(default)s)",
        "cpuct_log": "c grows with a node's visits N: c + this·ln((N + base) / base) (KataGo's: 0.45; 0: constant; "
                     "default %(default)s)",
        "cpuct_log_base": "the base of --cpuct-log (KataGo's: 500; default %(default)s)",
        "fpu_reduction": "an unvisited move's utility is its parent's less this·√(the prior mass visited) "
                         "(KataGo's: 0.2; default %(default)s)",
        "fpu_root_reduction": "the same at the root (KataGo's: 0.1; default %(default)s)",
        "fpu_search_mean": "the unvisited moves' utility starts from the parent's search mean, weighted by the "
                           "square of the prior mass visited, rather than the network's utility alone (KataGo's "
                           "fpuParentWeightByVisitedPolicy)",
        "subtree_value_bias": "KataGo's subtree value bias correction, in [0, 1]: each evaluation is corrected by "
                              "this share of how far the search ended from the network after the same local move "
                              "pattern elsewhere in the tree (KataGo's: 0.45; 0: off; default %(default)s)",
        "optimistic_policy": "below the root, priors from the network's optimistic policy (KataGo's networks of "
                             "model version 12 and later: KataGo's policyOptimism 1; the root keeps the file's "
                             "policy, at optimism 0.2 for a converted network; elsewhere no change)",
        "subtree_value_bias_exponent": "the weight of a node in its pattern's mean: its children's visits to this "
                                       "power (KataGo's: 0.85; default %(default)s)",
    })
    add_flags(group["network"], defaults.net, {
        "rollout_weights": Flag("the rollout policy (.npz) of --rollout-mix and of the dead-stone judgement "
                                "(default: the shipped weights/rollout-patterns.npz)", name="--rollout-weights",
                                metavar="FILE"),
    }, prefix="net_")
    if play:
        add_flags(group["time"], defaults.time, {
            "max_time_per_move_s": Flag("at most this many seconds per move (0: only the clock limits)",
                                        name="--time")})
        add_flags(group["time"], defaults.time, {
            "lag_buffer_s": Flag("seconds kept back from every period and from the main time for network lag; "
                                 "on a short clock at most a quarter of a move's time (default %(default)s)",
                                 name="--lag-buffer")})
    add_flags(group["network"], defaults.net, {
        "provider": Flag("what runs the network: auto picks TensorRT, CUDA, torch on CUDA, then the CPU, the first "
                         "that works, and says which on stderr (default: %(default)s)", name="--provider",
                         choices=BACKENDS),
        "precision": Flag("precision on a GPU (auto: fp16)", name="--precision", choices=PRECISIONS),
    }, prefix="net_")
    add_flags(group["network"], defaults.net, {
        "threads": "onnxruntime threads per network call on the CPU (default 0: the cores shared among the "
                   "search threads, or onnxruntime's own choice for one search thread)",
    }, prefix="net_")
    add_flags(group["playing"], defaults.play, {} if not play else {
        "ponder": "think on the opponent's time until the next command",
        "temperature_moves": "play the first N moves in proportion to visits^(1/temperature) instead of the most "
                             "visited (Leela Zero's --randomcnt): engine-vs-engine matches need it, or deterministic "
                             "engines replay one game (default 0)",
        "temperature": "the temperature of --temperature-moves (default 1)",
        "resign_winrate": "resign below this winrate for several moves in a row (0: never resign; default -1: the "
                          "threshold calibrated for the network, never resigning with one that has none)",
        "ownership_network": "the share in [0, 1] of the dead-stone judgement (final_status_list, final_score, "
                             "cleanup) taken from the network's ownership head, the rest from random playouts and "
                             "rollouts (default -1: the share measured for the network, 0 where none was)",
    })
    if play:  # the per-move lines come from the player, which tabula analysis does not have
        group["analysis"].add_argument("-v", "--verbose", action="store_true",
                                       help="after each move's line on stderr, its five first candidates (visits, "
                                            "winrate, prior, principal variation)")
    group["advanced"].add_argument("--log-level", default=None, type=str.upper, choices=LOG_LEVELS,
                                   help="stderr logging level of every logger (default: WARNING, plus one line a "
                                        "move at INFO)")
    for unused in [g for g in group.values() if not g._group_actions]:  # without ``play``: no clock options
        parser._action_groups.remove(unused)


def _rules_argument(text: str) -> str:
    """--rules as given, once parse_rules accepts it (an unknown or unplayable ruleset is argparse's error)."""
    try:
        parse_rules(text)
    except UnsupportedRulesError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def _rules(args: argparse.Namespace) -> Rules:
    """The rules of --rules, --komi and --superko (the defaults where a command has none of them)."""
    given, komi = getattr(args, "rules", None), getattr(args, "komi", Rules().komi)
    superko = getattr(args, "superko", None)
    rules = parse_rules(given, komi) if given else Rules(komi=komi)
    return dataclasses.replace(rules, superko=superko) if superko else rules


def build_config(args: argparse.Namespace) -> EngineConfig:
    """The one place argv becomes configuration (its values were checked as the options were parsed)."""
    defaults = EngineConfig()
    return EngineConfig(
        rules=_rules(args),
        search=from_flags(defaults.search, args),
        play=from_flags(defaults.play, args),
        time=from_flags(defaults.time, args),
        net=dataclasses.replace(from_flags(defaults.net, args, prefix="net_"), weights=tuple(args.weights)),
        player=getattr(args, "player", defaults.player),  # options a command without play leaves out
        board_size=getattr(args, "board_size", defaults.board_size),
        seed=args.seed,
    )


def load_extensions() -> None:
    """Register the command families that live outside gtp/commands.py."""
    for module in EXTENSION_MODULES:
        importlib.import_module(module)


def configure_logging(level: str | None, verbose: bool = False) -> None:
    """Logs go to stderr. ``level`` None: warnings, plus one line a move at INFO (what a user watching stderr
    wants), and with ``verbose`` the move's candidates (the search logger at DEBUG); an explicit level applies to
    every logger, the search's included."""
    logging.basicConfig(stream=sys.stderr, format="%(name)s: %(message)s")
    logging.getLogger().setLevel(level or "WARNING")  # also where basicConfig found handlers and did nothing
    search_level = logging.INFO if level is None else logging.NOTSET
    logging.getLogger(SEARCH_LOGGER).setLevel(logging.DEBUG if verbose else search_level)


def write_chat(line: str) -> None:
    """One chat line on stderr, whole and flushed (gtp2ogs reads stderr line by line)."""
    sys.stderr.write(line.replace("\n", " ") + "\n")
    sys.stderr.flush()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    configure_logging(args.log_level, args.verbose)
    config = build_config(args)
    load_extensions()
    try:
        player = Player.from_config(config)
    except (OSError, ValueError) as error:
        # A missing or unusable network: say so plainly rather than with a traceback.
        print(f"tabula gtp: {error}", file=sys.stderr)
        return 1
    session = Session(player=player, config=config, chat=write_chat if args.ogs_chat else None)
    from .analysis import install_pondering

    install_pondering(session)
    if sys.stdin.isatty():  # a person at a terminal, not a GUI: say what to type
        print(TERMINAL_HINT, file=sys.stderr, flush=True)
    return serve(session, sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    sys.exit(main())
