#!/usr/bin/env bash
# Issue 18's self-play on the small boards: the supervised network continued by `tabula rl` on 9×9 and 13×13 in turn
# (one network for both), one chunk per call.
#
#   bash tools/rl_small.sh [MINUTES] [WORKERS]    # default 150 minutes, 2 self-play processes
#
# The second run (runs/rl-small48): the long supervised run's last weights, step 48,000 (its checkpoint as committed
# in 631dfc5, the network shipped since 2026-11-26), exported here; only a new run reads it. The first run (from
# step 39,834, runs/rl-small, kept in weights/training/rl-small; its script: `git show ef4a5cd:tools/rl_small.sh`)
# rejected every candidate: its value head learned the small boards' komi, but its policy fell below the supervised
# one (docs/TRAINING.md). A first try of this run with the first run's training (100 steps of lr 0.005 a
# generation) and the policy at a quarter of the loss lost 12 of its first 15 gating games at 400 visits; its batch
# norms' running statistics had moved 10-90% from the 19x19 records' to small-board self-play's. So this run fine-
# tunes gently: the batch norms frozen at the start's statistics (--freeze-batchnorm), lr 0.001 (twice the supervised
# run's last), 50 steps of 128 a generation (about 3 samples for each new recorded position), the policy's share of
# the loss a quarter of the value's (--policy-loss-weight 0.25), and candidates gated at the engine's 400 visits.
#
# --keep copies what resumes the run (settings, state, Elo and gating logs, the trainer's checkpoint, the best network)
# to weights/training/rl-small48 after every generation and at the stop: commit that folder after each chunk. On a
# new machine the next call restores the run from there and refills the replay window by self-play. The settings are
# fixed by the first call (config.json); later calls may change only the workers and the time
# (tools/learn/rl_loop.py, MUTABLE).
#
# 40 gating games (the sizes in turn), so that a lucky candidate is less likely to replace the best.
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-150}
WORKERS=${2:-2}
TABULA=${TABULA:-tabula}
RUN=rl-small48
START_DIR=runs/$RUN-start
START=$START_DIR/sl19-48000.onnx

if [ ! -f runs/$RUN/config.json ] && [ ! -f weights/training/$RUN/config.json ] && [ ! -f "$START" ]; then
    mkdir -p "$START_DIR"
    git show 631dfc5:weights/training/sl19/checkpoint.pt > "$START_DIR/checkpoint.pt"
    $TABULA export "$START_DIR/checkpoint.pt" "$START"
fi

exec nice -n 5 $TABULA rl --dir runs/$RUN --keep weights/training/$RUN \
    --start-from "$START" --sizes 9,13 --komi 7.5 \
    --visits 64 --fast-visits 16 --games-per-generation 50 --window-games 2000 --min-positions 1000 \
    --train-steps 50 --batch 128 --lr 0.001 --warmup-steps 50 --policy-loss-weight 0.25 --freeze-batchnorm \
    --gate-games 40 --gate-visits 400 \
    --train-threads 1 --train-workers 1 --workers "$WORKERS" --max-minutes "$MINUTES"
