"""Tabula's engine, in layers whose imports flow one way (a test checks it):

    rules  ->  net  ->  play
      \\          \\->  data
       \\->  rollout  ->  play (the search's leaf rollouts, the judgement of dead stones)

| package | module | owns |
|---|---|---|
| `rules/` | `coords.py` | moves (flat ints, `PASS`, `RESIGN`), GTP/SGF spellings, colours |
| | `board.py` | stones, strings and liberties, captures, simple ko, Zobrist hash |
| | `game.py` | `GameState` = board + history: superko, passes, komi, handicap, scoring |
| | `playout.py` | random playouts (the baseline player, ownership estimates, dead stones); liberty states |
| | `sgf.py` | the one SGF reader and writer (sgfmill): games to and from SGF |
| | `gomoku.py` | `GomokuState`: freestyle n-in-a-row on W×H boards, the second game behind the game interface |
| | `interface.py` | the `Game` protocol the search, self-play and the trainer run on, and its optional hooks |
| | `games.py` | `GameSpec`: the game chosen at an entry point (Go, gomoku), its positions, records and SGF |
| `net/` | `features.py` | `GameState` -> Leela Zero's 18 planes, the 8 dihedral transforms |
| | `netfile.py` | what a network file is: metadata version, the error for an unusable file |
| | `evaluation.py` | the `Evaluator` protocol, `Evaluation`, the stand-in `UniformEvaluator` |
| | `providers.py` | what can run a network here: cores, GPU, onnxruntime's providers and their options |
| | `onnx_evaluator.py` | `OnnxEvaluator`: a network file through onnxruntime, or torch on a GPU |
| | `int8_check.py` | an int8 file runs on the CPU only where it agrees with its fp32 file |
| | `network_set.py` | `NetworkSet` (each board size to its network) and `load_networks` |
| | `comparison.py` | comparing two runners of one network (start-up checks of backends, tests) |
| | `evaluator.py` | every evaluator name above in one import (`from tabula.engine.net.evaluator import X`) |
| | `batching.py` | `BatchingEvaluator`: the evaluate calls of many searches merged into batches (the analysis engine) |
| | `network.py`, `torch_backend.py` | the torch model and ONNX export (training only); the torch GPU backend |
| | `leelaz.py` | Leela Zero weight files |
| | `katago_model.py` | KataGo's model files: the reader and the writer (numpy); their cached ONNX conversion |
| | `katago_network.py` | KataGo's networks as torch modules and their ONNX export (conversion only) |
| | `katago_features.py` | `GameState` -> KataGo's V7 inputs (`katago-v7`): ladders, pass-alive areas, rules globals |
| | `reading_features.py` | AlphaGo's reading planes V7 lacks: liberties after a move, captures, self-atari, ladders |
| | `gomoku_features.py` | `GomokuState` -> the 4 "gomoku-4" planes; dihedral transforms of a pass-less policy |
| | `encodings.py` | input encodings by name (`leelaz-18`, `katago-v7`, `tabula-v2`, `gomoku-4`): planes, policy |
| `rollout/` | `patterns.py` | 3×3 and response patterns, self-/save-atari, distances, for many boards at once |
| | `policy.py` | the rollout policy: a linear softmax over the patterns, its .npz weights file |
| | `rollout.py` | rollouts: many positions played out in lockstep with the policy, scored by area; their ownership |
| `play/` | `tree.py` | the search tree: nodes, the table of network results, PUCT, virtual loss, backup, reuse |
| | `search.py` | `Search`, the driver: threads, batches to the evaluator, where a leaf's value comes from, stopping |
| | `result.py` | what a search found: candidates ordered by visits and LCB, principal variations, ownership |
| | `value_bias.py` | the buckets (local move patterns) of KataGo's subtree value bias correction |
| | `decision.py` | `MoveDecider`: a search result -> the move played (temperature, passes, resignation) |
| | `picker.py` | `MovePicker`, the one "pick a move" protocol (GTP, self-play, gating, arena); `GoMovePicker` |
| | `search_player.py` | `SearchPicker`: the search as a move picker: limits, cleanup, ownership, pondering |
| | `game_loop.py` | `play_game`: the one in-process loop where two pickers meet (self-play, gating, arena) |
| | `timecontrol.py` | clocks and the time budget of one move |
| | `player.py` | `Player`: owns the game, its move picker and clock: the one object GTP drives |
| | `pure_mcts.py` | the pickers of any game's baselines: pure MCTS (UCT, random rollouts, no network), random moves |
| `data/` | `records.py` | training records from SGF archives (via `rules/sgf.py`), counted filters, final ownership |
| | `shards.py` | compact training shards and their sampler |
| | `replay.py` | the self-play replay window, durable against kills |
| | `config.py` (top level) | frozen dataclasses, one per owner, built at entry points (options: gtp/flags.py) |

`engine` never imports `gtp` or `tools`; only `net/network.py`, `net/katago_network.py` and `net/torch_backend.py`
(and `tools/`) import torch.
"""
