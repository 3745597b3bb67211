#!/usr/bin/env bash
# Issue 18's long supervised run of the size-independent network, one chunk per call.
#
#   bash tools/train_sl19.sh [MINUTES]        # default 150: trains that long, then stops with a checkpoint
#
# 1. Prepares the shards where this machine lacks them (runs/ is not kept when a machine is replaced). `tabula
#    prepare` is deterministic, so the shards are the same every time and the run resumes on the very batches it
#    would have drawn (the trainer checks the data's fingerprint). Tygem 2016 is held out whole as the validation
#    year; every other archive trains.
# 2. Trains: the first call starts the run, every later call resumes it, from runs/sl19/train/checkpoint.pt or,
#    on a new machine, from the checkpoint kept under git in weights/training/sl19/ (--keep). Commit that folder
#    after each chunk.
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-150}
GAMES=../shared/data/games
RUN=runs/sl19
TABULA=${TABULA:-tabula}

prepare() {  # prepare OUT ARCHIVE... [options]: nothing when OUT is complete; a half-written OUT starts again
    local out=$1
    shift
    if [ ! -f "$out/dataset.json" ]; then
        rm -rf "$out"
        nice -n 5 $TABULA prepare "$@" --out "$out" --quiet > "$out.log" 2>&1
    fi
}

mkdir -p "$RUN"
prepare "$RUN/val" "$GAMES/tygem-9d-2016.tar.xz" --val-fraction 1 &
prepare "$RUN/a" "$GAMES"/tygem-9d-200[5-8].tar.xz "$GAMES/tom-9d.tar.xz" "$GAMES"/kgs-*.tar.gz --val-fraction 0 &
prepare "$RUN/b" "$GAMES"/tygem-9d-2009.tar.xz "$GAMES"/tygem-9d-201[015].tar.xz --val-fraction 0 &
wait

exec nice -n 5 $TABULA train --data "$RUN/a,$RUN/b,$RUN/val" --out "$RUN/train" --keep weights/training/sl19 \
    --head pooled --aux --blocks 6 --filters 64 --batch 256 --steps 48000 --optimizer sgd --lr 0.05 \
    --schedule cosine --warmup-steps 1000 --final-lr-fraction 0.01 --weight-decay 1e-4 --ema-decay 0.999 \
    --threads 1 --workers 1 --val-every 1000 --val-positions 8192 --log-every 100 --checkpoint-minutes 10 \
    --max-minutes "$MINUTES"
