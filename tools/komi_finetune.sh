#!/usr/bin/env bash
# Issue 36: the shipped network made to see the komi, then fine-tuned so that its value and score are right at every
# komi; one chunk per call, resumable (rerun the same command to continue).
#
#   bash tools/komi_finetune.sh [MINUTES] [WORKERS]    # default 150 minutes, 2 self-play processes
#   QUICK=1 bash tools/komi_finetune.sh                # smoke test: a few games and steps, in runs/komi-quick
#   STAGE=6 bash tools/komi_finetune.sh [MINUTES] [WORKERS] [GENERATIONS]   # stage 6 (below; default 1 generation)
#   STAGE=7 bash tools/komi_finetune.sh [MINUTES] [WORKERS]   # stage 7: 19x19 handicap self-play (below)
#   STAGE=8 bash tools/komi_finetune.sh [MINUTES] [WORKERS]   # stage 8: the same from stage 7's, small boards too
#
# The start: the fifth small-board run's trainer checkpoint (weights/training/rl-small48s/train/checkpoint.pt, the
# shipped tabula-6x64-anysize), given the komi input by `tabula export --add-komi-input`: the leelaz-18+komi planes
# (a constant plane of the side to move's komi / 20), a zero convolution of that plane into the trunk, a zero linear
# term of it into the value's hidden layer, and the score's fixed komi path (engine/net/network.py, PooledHead),
# whose reference komi 7.5 makes the extended network's outputs at komi 7.5 the shipped ones, bit for bit in fp32.
#
# Stage 1, records (runs/komi/sl): 19x19 games at their recorded komi: Tom (7.5 and 6.5), Tygem 2015 (6.5) and KGS
# (0.5, 5.5, 6.5 and 7.5 even games; its handicap games kept for the policy only, since their results measure a
# gap of strength the position does not show: engine/data/records.py). Only the komi terms and the value and score
# heads train (--train-only input_komi,head.value,head.score_fc), the batch norms keep the start's statistics: what
# the network knows of the moves stays. The records are seen at other komis too (--komi-spread 5: each position of a
# counted game has its komi moved by a normal draw of 5 points, its result that of its margin there; resigned games
# keep theirs): at their own komis alone (6.5 and 7.5, a few KGS games at 0.5 and 5.5) 800 steps at SGD's lr 0.002
# left the value the same at every komi from -7.5 to 15.5 (docs/TRAINING.md). AdamW, since the komi weights start at
# zero. Tygem 2016 stays held out.
# Stages 2 and 3 (2026-11-26; kept in weights/training/komi/{rl,rl2}, the commands in git history and
# docs/TRAINING.md): self-play on 9x9 and 13x13 trained the value's and score's komi terms that every size shares;
# the small boards learned the komi but 19x19 got worse (white to move 18 points too pessimistic on held-out
# records), and the values swung from generation to generation at a constant rate.
# Stage 4, self-play (runs/komi/rl4, 2026-11-27, to generation 27; kept in weights/training/komi/rl4): stage 1's
# network given a komi term that only boards below 19x19 see (`tabula export --add-small-board-komi`: k times the
# value features' mean, k and k(size-14)/10, scaled by max(19 - size, 0)/10, zero at first), and only that term and
# the small-board value term train (--train-only head.value_komi_small_boards,head.value_small_boards): 19x19 stays
# stage 1's bit for bit, so no records anchor it. Self-play on 9x9 and 13x13 at komi 5 +- 4 (0.5 to 7.5, the komis a
# server offers, within one spread) and a tenth of handicap games of 2 to 4 stones at komi 0.5; every game counted
# (--resign-ceiling 0), seen at its own komi (generations 1-24 also at a komi moved by a normal draw of 6 points,
# --train-komi-spread 6: that overstated what a point is worth, since play adapts to the komi; docs/TRAINING.md);
# AdamW at lr 0.0005, each generation's network the moving average of the weights (--ema-decay 0.998, about 5
# generations), every candidate accepted (--gate-games 0). The first training waited for about 1,000 games
# (--min-positions 40000: the recorded positions, the full-visit moves, about 40 a game).
# Stage 5 (runs/komi/rl5), now the step after stage 1: stage 4's last network given the komi parity term
# (`tabula export --add-small-board-komi-parity`: KataGo's parity wave of the komi in the same small-board map, zero
# at first; under area scoring 9x9's and 13x13's margins are odd, so komi 5.5 and 6.5 decide the same games, which a
# value linear in the komi cannot show: stage 4 gave white 5-12 points too much at 5.5-7.5), trained with stage 4's
# two terms, everything else as stage 4 at --train-komi-spread 0 for its generations 1-20, which calibrated the
# 9x9 value but let the score's komi slope fall to 0.40; from generation 21 the games are also seen at a komi moved
# by a normal draw of 6 points for the score alone (--train-komi-spread 6 --train-komi-spread-score-only: the moved
# margin is the lead the score should learn, the moved result overstates a point; docs/TRAINING.md).
# Stage 6 (runs/komi/rl6, STAGE=6): stage 5's generation 80 (the default's network) given the small-board score komi
# term (`tabula export --add-small-board-score-komi`: a straight line in the komi through the reference komi added to
# the score alone on boards below 19x19, zero at first), and only that term trains, on the games of stage 5's window
# played within a point of komi 7.5 (where this machine still has it; else self-play refills the window) at the same
# moved komi for the score (--train-komi-spread 6 --train-komi-spread-score-only): stage 5's small-board value terms
# feed the score's hidden layer too, and pulled 9x9's score slope back to 0.75 points a komi point; the term gives
# it back while the value stays bit for bit, and so does the score at komi 7.5 and on 19x19. Two weights, so a
# higher learning rate and no moving average. One generation (more would add self-play at every komi to the window).
# Stage 7 (runs/komi/rl7, STAGE=7): 19x19 handicap self-play for the value, score and ownership heads, from the
# default's network (stage 6's). Giving 7 stones, Tabula lost 31 of 50 games to GNU Go level 10 (docs/STRENGTH.md),
# many with its search at 0.9 and over while both counts said its groups were dead: the 19x19 heads had learned
# from records (stage 1) and the shipped run, never from a handicap position, and big groups' life in the crowded
# positions a handicap game makes is what they misjudge. Half the games are handicap games of 2 to 9 stones at komi
# 0.5 in which black searches a quarter of white's visits (--handicap-black-visits: the side giving the stones is
# the stronger player, as a bot giving handicap is; between equals white is lost from the first move and the games
# teach nothing to rank moves by), half even games at komi 7.5 +- 1 between equals. Every game is played to the end
# (--resign-ceiling 0) and counted. Only the value's convolution and layers, the score and the ownership train
# (--train-only; the trunk and the policy stay, so the policy of every size does too), batch norms frozen, AdamW
# at lr 0.0005, each generation the weights' moving average. The value's layers are every size's: trained on 19x19
# alone (generations 1-12) the small boards' value drifted (9x9's squared error on the even9 match games 0.30 to
# 0.72), so stage 8 (runs/komi/rl8, STAGE=8) goes on from stage 7's best kept with a quarter of the games 9x9 and a
# quarter 13x13 (--sizes 19,19,9,13: a run's sizes are fixed, so it is a run of its own), under the same komi and
# handicap draws; 9x9's and 13x13's values are checked against stage 6's before a generation is used
# (docs/TRAINING.md, "Stage 7").
# --keep copies what resumes each stage to weights/training/komi/{sl,rl5} (commit that folder after a chunk); on a
# new machine the next call restores the run from there. The shards (runs/komi/records-*) are made again where they
# are missing (the archives are in ../shared/data/games).
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-150}
WORKERS=${2:-2}
TABULA=${TABULA:-tabula}
GAMES=${GAMES:-../shared/data/games}
START_CHECKPOINT=weights/training/rl-small48s/train/checkpoint.pt
TRAINED=input_komi,head.value,head.score_fc

if [ -n "${QUICK:-}" ]; then
    RUNS=runs/komi-quick
    KEEP=$RUNS/keep
    PREPARE=(--max-games 60 --games-per-shard 40 --val-fraction 0.2 --ownership-playouts 2 --quiet)
    TOM=("$GAMES/kgs-KGS-2017_01-19-733-.tar.gz")
    TYGEM=("$GAMES/kgs-KGS-2017_03-19-717-.tar.gz")
    KGS=("$GAMES/kgs-KGS-2017_02-19-525-.tar.gz")
    SL=(--steps 4 --batch 16 --warmup-steps 0 --val-every 4 --val-positions 64 --log-every 2 --checkpoint-every 4)
    RL=(--sizes 9 --visits 8 --fast-visits 4 --games-per-generation 2 --window-games 20 --min-positions 1
        --train-steps 2 --batch 16 --warmup-steps 0 --generations 1)
    RL6=()
else
    RUNS=runs/komi
    KEEP=weights/training/komi
    PREPARE=(--quiet)
    TOM=("$GAMES/tom-9d.tar.xz")
    TYGEM=("$GAMES/tygem-9d-2015.tar.xz")
    KGS=("$GAMES"/kgs-KGS-*.tar.gz)
    SL=(--steps 1500 --batch 256 --warmup-steps 50 --schedule cosine --val-every 250 --val-positions 4096
        --log-every 50)
    RL=(--sizes 9,13 --visits 64 --fast-visits 16 --games-per-generation 50 --window-games 2000
        --min-positions 40000 --train-steps 300 --batch 128 --warmup-steps 50)
    RL6=(--train-steps 600 --min-positions 10000)
fi
START_DIR=$RUNS/start
START=$START_DIR/komi-start.pt
RECORDS=$RUNS/records-tom,$RUNS/records-tygem,$RUNS/records-kgs

if [ ! -f "$START" ]; then
    mkdir -p "$START_DIR"
    $TABULA export --add-komi-input --komi-reference 7.5 "$START_CHECKPOINT" "$START_DIR/komi-start.onnx" \
        --checkpoint-out "$START.tmp"
    mv "$START.tmp" "$START"
fi

prepare() {  # prepare NAME HANDICAP ARCHIVE...: shards of the 19x19 records, once
    local name=$1 handicap=$2
    shift 2
    if [ ! -f "$RUNS/records-$name/dataset.json" ]; then
        rm -rf "$RUNS/records-$name.tmp"
        nice -n 5 $TABULA prepare "$@" --out "$RUNS/records-$name.tmp" --handicap "$handicap" "${PREPARE[@]}"
        rm -rf "$RUNS/records-$name"
        mv "$RUNS/records-$name.tmp" "$RUNS/records-$name"
    fi
}
stage1_step() {  # the step stage 1's kept checkpoint reached (0: none)
    python3 -c 'import sys, torch; print(torch.load(sys.argv[1], weights_only=True)["step"])' "$KEEP/sl/checkpoint.pt" \
        2>/dev/null || echo 0
}
STAGE1_STEPS=${SL[1]}  # --steps N

# Stage 1 until it completes (its model.onnx is written at its last step); it needs the records' shards.
if [ ! -f "$RUNS/sl/model.onnx" ] && [ "$(stage1_step)" -lt "$STAGE1_STEPS" ]; then
    prepare tom drop "${TOM[@]}"
    prepare tygem drop "${TYGEM[@]}"
    prepare kgs policy "${KGS[@]}"
    exec nice -n 5 $TABULA train --data "$RECORDS" --out "$RUNS/sl" --keep "$KEEP/sl" --init "$START" \
        --input-encoding leelaz-18+komi --blocks 6 --filters 64 --head pooled --aux --small-board-value \
        --train-only "$TRAINED" --freeze-batchnorm --optimizer adamw --lr 0.0005 --ema-decay 0.999 --komi-spread 5 \
        --threads 2 --workers 1 --max-minutes "$MINUTES" "${SL[@]}"
fi

grown_start() {  # grown_start OUT RUN FLAG: the best network kept of the run RUN given a zero term (tabula export FLAG)
    local out=$1 run=$2 flag=$3 best
    if [ ! -f "$out" ]; then
        best=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["best"])' "$KEEP/$run/state.json")
        $TABULA export "$flag" "$KEEP/$run/$best" "$out.tmp.onnx"
        mv "$out.tmp.onnx" "$out"
    fi
}

if [ "${STAGE:-5}" = 7 ] || [ "${STAGE:-5}" = 8 ]; then
    # stage 7 from the default's network as committed (a quick run starts from it too); stage 8 from stage 7's
    # best kept, its own run and window, a quarter of its games 9x9 and a quarter 13x13
    RUN7=rl${STAGE}
    case "$STAGE" in
        7) FROM=rl6; SIZES7=19;;
        8) FROM=rl7; SIZES7=19,19,9,13;;
    esac
    START7=weights/training/komi/$FROM/$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["best"])' \
        weights/training/komi/$FROM/state.json)
    if [ -n "${QUICK:-}" ]; then
        RL7=(--sizes 9 --visits 8 --fast-visits 4 --games-per-generation 2 --window-games 20 --min-positions 1
             --train-steps 2 --batch 16 --warmup-steps 0 --generations 1 --max-handicap 4)
    else
        RL7=(--sizes "$SIZES7" --visits 64 --fast-visits 16 --games-per-generation 40 --window-games 800
             --min-positions 5000 --train-steps 100 --batch 128 --warmup-steps 20 --max-handicap 9)
    fi
    exec nice -n 5 $TABULA rl --dir "$RUNS/$RUN7" --keep "$KEEP/$RUN7" --start-from "$START7" \
        --komi 7.5 --komi-spread 1 --handicap-fraction 0.5 --handicap-black-visits 0.25 \
        --train-only head.value_conv,head.value_fc1,head.value_fc2,head.score_fc,head.ownership_points \
        --freeze-batchnorm --policy-loss-weight 0 --optimizer adamw --lr 0.0005 --ema-decay 0.99 \
        --gate-games 0 --resign-ceiling 0 \
        --train-threads 1 --train-workers 1 --workers "$WORKERS" --max-minutes "$MINUTES" "${RL7[@]}"
fi

if [ "${STAGE:-5}" = 6 ]; then
    START6=$RUNS/start6.onnx
    grown_start "$START6" rl5 --add-small-board-score-komi
    if [ ! -f "$RUNS/rl6/state.json" ] && [ ! -f "$KEEP/rl6/state.json" ] && [ -d "$RUNS/rl5/replay" ]; then
        # only the games played at a komi within a point of the reference (7.5, near 9x9's fair komi): the term sees
        # the komi alone, not which part of it was moved, so games at their own 0.5 (where black plays safe and wins
        # by a point or two) would teach it the opposite of the moved komi's point for point
        mkdir -p "$RUNS/rl6/replay"
        python3 - "$RUNS/rl5/replay" "$RUNS/rl6/replay" <<'PY'
import glob, os, shutil, sys
from tabula.engine.data.shards import read_shard
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.tshard"))):
    if abs(float(read_shard(path)[1]["komi"][0]) - 7.5) <= 1.0:
        shutil.copy(path, sys.argv[2])
PY
    fi
    exec nice -n 5 $TABULA rl --dir "$RUNS/rl6" --keep "$KEEP/rl6" --start-from "$START6" \
        --komi 5 --komi-spread 4 --handicap-fraction 0.1 --max-handicap 4 \
        --train-only head.score_komi_small_boards --freeze-batchnorm --policy-loss-weight 0 \
        --optimizer adamw --lr 0.002 --ema-decay 0 --train-komi-spread 6 --train-komi-spread-score-only \
        --gate-games 0 --resign-ceiling 0 --generations "${3:-1}" \
        --train-threads 1 --train-workers 1 --workers "$WORKERS" --max-minutes "$MINUTES" "${RL[@]}" "${RL6[@]}"
fi

# Stage 5 from stage 4's last network (its kept copy: weights/training/komi/rl4, state.json names it), given the
# komi parity term; its window starts with stage 4's games where this machine still has them (a generation that
# trains at once), else self-play fills it first (--min-positions).
START5=$RUNS/start5.onnx
grown_start "$START5" rl4 --add-small-board-komi-parity
if [ ! -f "$RUNS/rl5/state.json" ] && [ ! -f "$KEEP/rl5/state.json" ] && [ -d "$RUNS/rl4/replay" ]; then
    mkdir -p "$RUNS/rl5/replay"
    cp "$RUNS"/rl4/replay/*.tshard "$RUNS/rl5/replay/"
fi
exec nice -n 5 $TABULA rl --dir "$RUNS/rl5" --keep "$KEEP/rl5" --start-from "$START5" \
    --komi 5 --komi-spread 4 --handicap-fraction 0.1 --max-handicap 4 \
    --train-only head.value_komi_small_boards,head.value_small_boards,head.value_parity_small_boards \
    --freeze-batchnorm --policy-loss-weight 0 \
    --optimizer adamw --lr 0.0005 --ema-decay 0.998 --train-komi-spread 6 --train-komi-spread-score-only \
    --gate-games 0 --resign-ceiling 0 \
    --train-threads 1 --train-workers 1 --workers "$WORKERS" --max-minutes "$MINUTES" "${RL[@]}"
