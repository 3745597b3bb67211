#!/usr/bin/env bash
# Issue 36's done-when matches of the default engine (`python3 -m tabula.gtp`, whatever weights/DEFAULT names, or
# NET=FILE.onnx: the default engine with that network, e.g. a candidate default before it ships), one set per call,
# resumable: rerun the same call to go on where it stopped (`tabula match --out` resumes; a game cut
# off by the time limit is played again).
#
#   bash tools/issue36_matches.sh SET [MINUTES] [PARALLEL]    # default: no time limit, 1 game at a time
#   bash tools/issue36_matches.sh list                        # the sets, with what the issue asks of each
#   TAG=-by-size bash tools/issue36_matches.sh even9          # a set played again apart from the first (its own
#                                                             # runs/issue36/SETTAG and docs/matches/issue36-SETTAG)
#   FLAGS="--atari-prior 0.1" TAG=-atari bash tools/issue36_matches.sh even13   # a candidate setting of the engine
#
# Every set but new-vs-old9 plays with resignation off, so that the games are played on for the resignation
# calibration (`tabula resign DIR...` reads the engines' logs afterwards: the issue asks for 200 games a size, and
# for the handicap games, hence the self-play sets), GNU Go 3.8 level 10 the opponent, GNU Go the referee.
# The games (config.json, results.jsonl, games/) and what the resignation calibration needs of the engines' logs
# (searched/: each searched move's winrate, `python3 -m tabula.tools.compete.search_log OUT --write OUT/searched`) are
# copied to docs/matches/issue36-SET after each call; the logs themselves stay in runs/issue36/SET (they are big). On
# a machine without runs/issue36/SET the call starts from the kept copy, so a set goes on across machines.
set -euo pipefail
cd "$(dirname "$0")/.."
SET=${1:?give a set: handicap7, handicap9, handicap-9-2, handicap-13-2, japanese19, even9, even13, even19, new-vs-old9, self9, self13, self19, self19hN or list}
MINUTES=${2:-0}
PARALLEL=${3:-1}
GNUGO=${GNUGO:-/usr/games/gnugo}
TABULA=${TABULA:-tabula}
AREA_REFEREE="$GNUGO --mode gtp --chinese-rules"
OPPONENT="$GNUGO --mode gtp --level 10"
ENGINE="python3 -m tabula.gtp${NET:+ --weights $NET}${FLAGS:+ $FLAGS}"
PLAYED_ON="$ENGINE --resign-winrate 0"  # the resignation calibration needs the games played on
# new-vs-old9's old default, before issue 36: the shipped network without the komi input, no score utility, the plain
# exploration (its own --weights, not ENGINE's: with NET set, ENGINE's would come first and play every size)
OLD="python3 -m tabula.gtp --weights weights/tabula-6x64-anysize-int8.onnx --static-score-utility 0"
OLD="$OLD --dynamic-score-utility 0"
OLD="$OLD --cpuct-utility-stdev-scale 0"

case "$SET" in
    list)
        cat <<'EOF'
handicap7     19x19, Tabula white giving GNU Go 7 fixed stones at komi 0.5: >= 70% of 50 games
handicap9     the same with 9 stones: >= 50% of 30 games
handicap-9-2  9x9, Tabula white giving GNU Go 2 fixed stones at komi 0.5, played on: 100 games (handicap-13-2:
              13x13, 50 games); no bar, the small boards' handicap strength and resignation
japanese19    19x19 under Japanese rules (GNU Go referees with its own count), komi 6.5: >= 90% of 50 games, and
              Tabula's final_score equal to GNU Go's in >= 95% of the games ended by two passes
even9         9x9 even games at komi 7.5: >= 95% of 100
even13        13x13, the same: >= 95% of 50
even19        19x19, the same: >= 95% of 50 (also the 19x19 resignation check: played on)
new-vs-old9   the new default against the one before issue 36, 9x9, komi 7.5: >= 60% of 100
self9         the resignation calibration's self-play, played on: 100 9x9 games at komi 7.5 (with even9, 200 a size)
self13        the same, 150 13x13 games (with even13, 200)
self19        the same, 120 19x19 games (with even19 and japanese19, 220: a few games are not counted)
self19hN      19x19 handicap self-play, N = 2, 3, 4, 5, 6, 7 or 9 stones at komi 0.5, played on: 30, 25, 20, 15, 5,
              15 and 15 games (125, with handicap7 and handicap9 200 handicap games for the handicap threshold, a
              few forfeits not counted); self9h2, self9h3 (100 games each), self13h2, self13h3, self13h4 (70 each):
              the same on the small boards
EOF
        exit 0;;
    handicap7|handicap9)
        STONES=${SET#handicap}
        GAMES=$([ "$STONES" = 7 ] && echo 50 || echo 30)
        # Tabula told the referee's rules, as kgsGtp tells it (kgs-rules chinese): GNU Go's Chinese count gives
        # white a point a handicap stone, which Tabula's default area rules do not (its counts were 7 points apart).
        # The first sets said KataGo's chinese (simple ko), which they keep so that they resume as played; a set
        # played again (TAG) is told chinese-kgs, positional superko as tabula match judges it (under simple ko a
        # repetition is legal to Tabula and forfeits the game)
        RULES=chinese
        [ -n "${TAG:-}" ] && RULES=chinese-kgs
        ARGS=(--games "$GAMES" --size 19 --komi 0.5 --handicap "$STONES" --handicap-mode fixed --fixed-colors
              --referee "$AREA_REFEREE" --names gnugo-10 tabula --engines "$OPPONENT" "$PLAYED_ON --rules $RULES");;
    handicap-9-2|handicap-13-2)
        # the small boards: Tabula white giving GNU Go 2 stones (what a server offers there), played on for the
        # resignation calibration's winners as white giving handicap, which self-play between equals rarely has
        SIZE=${SET#handicap-}
        SIZE=${SIZE%-*}
        GAMES=$([ "$SIZE" = 9 ] && echo 100 || echo 50)
        ARGS=(--games "$GAMES" --size "$SIZE" --komi 0.5 --handicap 2 --handicap-mode fixed --fixed-colors
              --referee "$AREA_REFEREE" --names gnugo-10 tabula --engines "$OPPONENT" "$PLAYED_ON --rules chinese-kgs");;
    japanese19)
        ARGS=(--games 50 --size 19 --komi 6.5 --referee "$GNUGO --mode gtp" --engine-scores
              --names tabula gnugo-10 --engines "$PLAYED_ON --rules japanese" "$OPPONENT");;
    even9|even13|even19)
        SIZE=${SET#even}
        GAMES=$([ "$SIZE" = 9 ] && echo 100 || echo 50)
        ARGS=(--games "$GAMES" --size "$SIZE" --komi 7.5 --referee "$AREA_REFEREE"
              --names tabula gnugo-10 --engines "$PLAYED_ON" "$OPPONENT");;
    self9|self13|self19)
        SIZE=${SET#self}
        GAMES=$(case "$SIZE" in 9) echo 100;; 13) echo 150;; *) echo 120;; esac)
        # two seeds and the first 8 moves drawn by visits, so that the games differ (as resign-self-9's)
        ARGS=(--games "$GAMES" --size "$SIZE" --komi 7.5 --referee "$AREA_REFEREE" --names tabula-a tabula-b
              --engines "$PLAYED_ON --temperature-moves 8 --seed 11" "$PLAYED_ON --temperature-moves 8 --seed 12");;
    self19h2|self19h3|self19h4|self19h5|self19h6|self19h7|self19h9|self9h2|self9h3|self13h2|self13h3|self13h4)
        SIZE=${SET%%h*}
        SIZE=${SIZE#self}
        STONES=${SET#self*h}
        GAMES=$(case "$SIZE-$STONES" in 19-2) echo 30;; 19-3) echo 25;; 19-4) echo 20;; 19-6) echo 5;; 19-*) echo 15;;
                9-*) echo 100;; *) echo 70;; esac)
        # both sides Tabula, so that the handicap threshold sees winners and losers of either colour; told the
        # referee's count, as in handicap7. KataGo's chinese has simple ko where tabula match judges positional
        # superko, so 3 of the first 120 games (2, 3, 4, 5, 7 and 9 stones) ended by a forfeit (a long cycle's
        # repetition, legal under simple ko); self19h6, which tops the 200 up, is told chinese-kgs (positional
        # superko, as kgsGtp's kgs-rules chinese), which the sets played before keep so that they resume as played;
        # the small boards' sets too
        RULES=chinese-kgs
        [ "$SIZE" = 19 ] && [ "$STONES" != 6 ] && RULES=chinese
        ARGS=(--games "$GAMES" --size "$SIZE" --komi 0.5 --handicap "$STONES" --handicap-mode fixed
              --referee "$AREA_REFEREE" --names tabula-a tabula-b
              --engines "$PLAYED_ON --rules $RULES --temperature-moves 8 --seed 11"
                        "$PLAYED_ON --rules $RULES --temperature-moves 8 --seed 12");;
    new-vs-old9)
        ARGS=(--games 100 --size 9 --komi 7.5 --referee "$AREA_REFEREE"
              --names new old --engines "$ENGINE --temperature-moves 8" "$OLD --temperature-moves 8");;
    *)
        echo "tools/issue36_matches.sh: unknown set $SET (try: list)" >&2
        exit 2;;
esac

OUT=runs/issue36/$SET${TAG:-}
KEPT=docs/matches/issue36-$SET${TAG:-}
mkdir -p "$OUT"
if [ ! -f "$OUT/config.json" ] && [ -f "$KEPT/config.json" ]; then
    cp -r "$KEPT"/. "$OUT"/  # config.json, results.jsonl, games/, searched/: tabula match resumes from them
fi
status=0
if [ "$MINUTES" != 0 ]; then
    # TERM, not INT: a job started in the background (nohup ... &) ignores SIGINT, and tabula match stops on TERM as
    # on Ctrl-C (the finished games saved)
    timeout --signal=TERM "${MINUTES}m" nice -n 5 $TABULA match --out "$OUT" --parallel "$PARALLEL" "${ARGS[@]}" \
        || status=$?
else
    nice -n 5 $TABULA match --out "$OUT" --parallel "$PARALLEL" "${ARGS[@]}" || status=$?
fi
mkdir -p "$KEPT"
cp "$OUT/config.json" "$KEPT/"
[ -f "$OUT/results.jsonl" ] && cp "$OUT/results.jsonl" "$KEPT/"
[ -d "$OUT/games" ] && cp -r "$OUT/games" "$KEPT/"
if [ -d "$OUT/logs" ]; then
    python3 -m tabula.tools.compete.search_log "$OUT" --write "$OUT/searched" > /dev/null && cp -r "$OUT/searched" "$KEPT/"
fi
$TABULA match --out "$OUT" --summary || true
# 124: the time limit ended this call (rerun to go on); anything else is the match's own status
[ "$status" = 124 ] && exit 0
exit "$status"
