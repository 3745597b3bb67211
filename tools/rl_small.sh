#!/usr/bin/env bash
# Issue 18's self-play on the small boards: the supervised network continued by `tabula rl` on 9×9 and 13×13 in turn
# (one network for both), one chunk per call.
#
#   bash tools/rl_small.sh [MINUTES] [WORKERS]    # default 150 minutes, 2 self-play processes
#
# The fourth run (runs/rl-small48a): the value head alone, anchored by 19x19 records. It starts from the long
# supervised run's last weights, step 48,000 (its checkpoint as committed in 631dfc5, the network shipped since
# 2026-11-26), exported here; only a new run reads it. As the third run (--train-only head.value --freeze-batchnorm:
# the policy and the batch norms stay the start's, the value head learns the small boards' komi from the self-play's
# outcomes), but a third of the training batches are 19x19 record positions (--anchor-data: the 17,904 games of
# Tygem 2015, 3.9 million positions of a training year of the supervised run, prepared here; --max-games 20000 is
# above their number), so the value head, which every size shares, keeps the 19x19 records' results in view. The
# third run, without them, calibrated 9x9 and 13x13 and won 68-32 on 9x9, but its 19x19 held-out value MSE rose from
# 0.679 to 0.757 and it did not win on 13x13 or 19x19 (docs/TRAINING.md). 50 steps of 128 at lr 0.005 a generation;
# every candidate accepted (--gate-games 0: the policy is fixed); match the last against the start afterwards.
#
# The earlier runs, each from its own script (`git show COMMIT:tools/rl_small.sh`): the first (ef4a5cd; from step
# 39,834, runs/rl-small, kept in weights/training/rl-small) trained everything, 100 steps of lr 0.005 a generation,
# and rejected every candidate: its value head learned the komi, its policy fell below the supervised one. The
# second (2a06c86; from step 48,000, runs/rl-small48, kept in weights/training/rl-small48) trained everything gently
# (frozen batch norms, lr 0.001, 50 steps, the policy's loss weighted 0.25): its first candidate scored 45% in 40
# gating games at 400 visits, its value half-way calibrated, but its policy still predicted the self-play's moves
# worse. The third (1e5f146; runs/rl-small48v, kept in weights/training/rl-small48v) trained the value head alone.
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
RUN=rl-small48a
ANCHOR=runs/anchor19   # 19x19 record shards: `tabula prepare` is deterministic, so every machine makes the same
START_DIR=runs/rl-small48-start   # the second run's too
START=$START_DIR/sl19-48000.onnx

if [ ! -f runs/$RUN/config.json ] && [ ! -f weights/training/$RUN/config.json ] && [ ! -f "$START" ]; then
    mkdir -p "$START_DIR"
    git show 631dfc5:weights/training/sl19/checkpoint.pt > "$START_DIR/checkpoint.pt"
    $TABULA export "$START_DIR/checkpoint.pt" "$START"
fi
if [ ! -f "$ANCHOR/dataset.json" ]; then
    rm -rf "$ANCHOR"
    nice -n 5 $TABULA prepare ../shared/data/games/tygem-9d-2015.tar.xz --max-games 20000 --val-fraction 0 \
        --out "$ANCHOR" --quiet
fi

exec nice -n 5 $TABULA rl --dir runs/$RUN --keep weights/training/$RUN \
    --start-from "$START" --sizes 9,13 --komi 7.5 \
    --visits 64 --fast-visits 16 --games-per-generation 50 --window-games 2000 --min-positions 1000 \
    --train-steps 50 --batch 128 --lr 0.005 --warmup-steps 50 --train-only head.value --freeze-batchnorm \
    --policy-loss-weight 0 --gate-games 0 --anchor-data "$ANCHOR" --anchor-fraction 0.33 \
    --train-threads 1 --train-workers 1 --workers "$WORKERS" --max-minutes "$MINUTES"
