#!/usr/bin/env bash
# Issue 18's self-play on the small boards: the supervised network continued by `tabula rl` on 9×9 and 13×13 in turn
# (one network for both), one chunk per call.
#
#   bash tools/rl_small.sh [MINUTES] [WORKERS]    # default 150 minutes, 2 self-play processes
#
# The fifth run (runs/rl-small48s): the small-board value term alone. It starts from the long supervised run's last
# weights, step 48,000 (its checkpoint as committed in 631dfc5, the network shipped since 2026-11-26), exported here
# and given the pooled value head's small-board term (tabula export --add-small-board-value: zero, scaled by
# max(19 - size, 0) / 10, so 19x19 values stay the start's bit for bit). Only that term trains (--train-only
# head.value_small_boards; the batch norms keep the start's statistics), 100 steps of 128 at lr 0.005 a generation,
# on the self-play games' outcomes; every candidate accepted (--gate-games 0). Why: the third run (the whole value
# head) calibrated 9x9 and won 68-32 there but its 19x19 value got worse and it did not win on 13x13 or 19x19; the
# fourth (the same, a third of its batches 19x19 records) held 19x19 closer but still lost 43-57 there in 100 games
# at generation 27, and won 9x9 only 54-46 (docs/TRAINING.md).
#
# The earlier runs, each from its own script (`git show COMMIT:tools/rl_small.sh`): the first (ef4a5cd; from step
# 39,834, runs/rl-small, kept in weights/training/rl-small) trained everything, 100 steps of lr 0.005 a generation,
# and rejected every candidate: its value head learned the komi, its policy fell below the supervised one. The
# second (2a06c86; from step 48,000, runs/rl-small48, kept in weights/training/rl-small48) trained everything gently
# (frozen batch norms, lr 0.001, 50 steps, the policy's loss weighted 0.25): its first candidate scored 45% in 40
# gating games at 400 visits, its value half-way calibrated, but its policy still predicted the self-play's moves
# worse. The third (1e5f146; runs/rl-small48v, kept in weights/training/rl-small48v) trained the value head alone;
# the fourth (68b2470; runs/rl-small48a, kept in weights/training/rl-small48a) the same, anchored by the 17,904
# games of Tygem 2015 (--anchor-data, a third of the batches).
#
# --keep copies what resumes the run (settings, state, Elo and gating logs, the trainer's checkpoint, the best network)
# to weights/training/$RUN after every generation and at the stop: commit that folder after each chunk. On a
# new machine the next call restores the run from there and refills the replay window by self-play. The settings are
# fixed by the first call (config.json); later calls may change only the workers and the time
# (tools/learn/rl_loop.py, MUTABLE).
#
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-150}
WORKERS=${2:-2}
TABULA=${TABULA:-tabula}
RUN=rl-small48s
START_DIR=runs/rl-small48-start   # the second run's too
START=$START_DIR/sl19-48000.onnx
GROWN=$START_DIR/sl19-48000-small-board-value.onnx

if [ ! -f runs/$RUN/config.json ] && [ ! -f weights/training/$RUN/config.json ] && [ ! -f "$GROWN" ]; then
    mkdir -p "$START_DIR"
    git show 631dfc5:weights/training/sl19/checkpoint.pt > "$START_DIR/checkpoint.pt"
    $TABULA export "$START_DIR/checkpoint.pt" "$START"
    $TABULA export --add-small-board-value "$START" "$GROWN"
fi

exec nice -n 5 $TABULA rl --dir runs/$RUN --keep weights/training/$RUN \
    --start-from "$GROWN" --sizes 9,13 --komi 7.5 \
    --visits 64 --fast-visits 16 --games-per-generation 50 --window-games 2000 --min-positions 1000 \
    --train-steps 100 --batch 128 --lr 0.005 --warmup-steps 50 --train-only head.value_small_boards \
    --freeze-batchnorm --policy-loss-weight 0 --gate-games 0 \
    --train-threads 1 --train-workers 1 --workers "$WORKERS" --max-minutes "$MINUTES"
