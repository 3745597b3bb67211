#!/usr/bin/env bash
# Issue 18's self-play on the small boards: the supervised network continued by `tabula rl` on 9×9 and 13×13 in turn
# (one network for both), one chunk per call.
#
#   bash tools/rl_small.sh [MINUTES] [WORKERS]    # default 150 minutes, 2 self-play processes
#
# The third run (runs/rl-small48v): the value head alone. It starts from the long supervised run's last weights, step
# 48,000 (its checkpoint as committed in 631dfc5, the network shipped since 2026-11-26), exported here; only a new
# run reads it. Every other weight and the batch norms' statistics stay as they are (--train-only head.value,
# --freeze-batchnorm), so the policy is the supervised one bit for bit, while the value head learns the small
# boards' komi from the self-play's outcomes (the start puts black ahead on 9x9: docs/TRAINING.md). 50 steps of 128
# at lr 0.005 a generation; every candidate is accepted (--gate-games 0: with the policy fixed, a candidate differs
# only in its value, and a 40-game gate cannot see that), and the last is matched against the start at the
# engine's 400 visits afterwards.
#
# The earlier runs, each from its own script (`git show COMMIT:tools/rl_small.sh`): the first (ef4a5cd; from step
# 39,834, runs/rl-small, kept in weights/training/rl-small) trained everything, 100 steps of lr 0.005 a generation,
# and rejected every candidate: its value head learned the komi, its policy fell below the supervised one. The
# second (2a06c86; from step 48,000, runs/rl-small48, kept in weights/training/rl-small48) trained everything gently
# (frozen batch norms, lr 0.001, 50 steps, the policy's loss weighted 0.25): its first candidate scored 46% in 40
# gating games at 400 visits, its value half-way calibrated, but its policy still predicted the self-play's moves
# worse (top-1 on unseen 9x9 games 57.7% -> 56.8%, 13x13 60.7% -> 58.6%).
#
# --keep copies what resumes the run (settings, state, Elo and gating logs, the trainer's checkpoint, the best network)
# to weights/training/rl-small48v after every generation and at the stop: commit that folder after each chunk. On a
# new machine the next call restores the run from there and refills the replay window by self-play. The settings are
# fixed by the first call (config.json); later calls may change only the workers and the time
# (tools/learn/rl_loop.py, MUTABLE).
#
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-150}
WORKERS=${2:-2}
TABULA=${TABULA:-tabula}
RUN=rl-small48v
START_DIR=runs/rl-small48-start   # the second run's too
START=$START_DIR/sl19-48000.onnx

if [ ! -f runs/$RUN/config.json ] && [ ! -f weights/training/$RUN/config.json ] && [ ! -f "$START" ]; then
    mkdir -p "$START_DIR"
    git show 631dfc5:weights/training/sl19/checkpoint.pt > "$START_DIR/checkpoint.pt"
    $TABULA export "$START_DIR/checkpoint.pt" "$START"
fi

exec nice -n 5 $TABULA rl --dir runs/$RUN --keep weights/training/$RUN \
    --start-from "$START" --sizes 9,13 --komi 7.5 \
    --visits 64 --fast-visits 16 --games-per-generation 50 --window-games 2000 --min-positions 1000 \
    --train-steps 50 --batch 128 --lr 0.005 --warmup-steps 50 --train-only head.value --freeze-batchnorm \
    --policy-loss-weight 0 --gate-games 0 \
    --train-threads 1 --train-workers 1 --workers "$WORKERS" --max-minutes "$MINUTES"
