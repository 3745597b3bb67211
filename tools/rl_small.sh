#!/usr/bin/env bash
# Issue 18's self-play on the small boards: the supervised network continued by `tabula rl` on 9×9 and 13×13 in turn
# (one network for both), one chunk per call.
#
#   bash tools/rl_small.sh [MINUTES] [WORKERS]    # default 150 minutes, 2 self-play processes
#
# The start: the long supervised run's committed checkpoint at step 39,834 (commit 18adf2f), exported here (the
# run's periodic checkpoint 166 steps later, step 40,000, had beaten the shipped step-18,076 network 55-8 in 63 games
# on 9x9, docs/STRENGTH.md). Only a new run reads it.
#
# The run directory is runs/rl-small (not in git). --keep copies what resumes it (settings, state, Elo and gating
# logs, the trainer's checkpoint, the best network) to weights/training/rl-small after every generation and at the
# stop: commit that folder after each chunk. On a new machine the next call restores the run from there and refills
# the replay window by self-play. The settings are fixed by the first call (config.json); later calls may change
# only the workers and the time (tools/learn/rl_loop.py, MUTABLE).
#
# Fine-tuning a network that learned from 10 million positions of records on a window of a few thousand self-play
# games: a learning rate a quarter of the loop's default, so that one generation's 100 steps nudge it rather than
# overwrite it, and 40 gating games (the sizes in turn) so that a lucky candidate is less likely to replace it.
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-150}
WORKERS=${2:-2}
TABULA=${TABULA:-tabula}
START_DIR=runs/rl-small-start
START=$START_DIR/sl19-39834.onnx

if [ ! -f runs/rl-small/config.json ] && [ ! -f weights/training/rl-small/config.json ] && [ ! -f "$START" ]; then
    mkdir -p "$START_DIR"
    git show 18adf2f:weights/training/sl19/checkpoint.pt > "$START_DIR/checkpoint.pt"
    $TABULA export "$START_DIR/checkpoint.pt" "$START"
fi

exec nice -n 5 $TABULA rl --dir runs/rl-small --keep weights/training/rl-small \
    --start-from "$START" --sizes 9,13 --komi 7.5 \
    --visits 64 --fast-visits 16 --games-per-generation 50 --window-games 2000 --min-positions 1000 \
    --train-steps 100 --batch 128 --lr 0.005 --warmup-steps 50 --gate-games 40 --gate-visits 64 \
    --train-threads 1 --train-workers 1 --workers "$WORKERS" --max-minutes "$MINUTES"
