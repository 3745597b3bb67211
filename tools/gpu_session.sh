#!/usr/bin/env bash
# The GPU measurements of docs/BENCHMARKS.md ("To measure on a GPU machine"), in two parts that each fit one call of
# the device tool (10 minutes a command, 30 minutes of device time a session, a fresh machine likely for each call):
#
#   bash tools/gpu_session.sh 1     # environment, GPU tests, raw network throughput, the Python side's bound
#   bash tools/gpu_session.sh 2     # bench search on the GPU: threads x batches in flight x batch size
#
# Everything goes to $OUT/partN.log (the device tool brings $OUT back) as it runs. Each step has its own time limit
# and the part as a whole BUDGET seconds (default 540), so that a slow step costs its own results only. The lent
# machine has no sgfmill and no game archives: the random networks are calibrated on random positions. QUICK=1 runs
# the same steps on tiny networks and budgets, to check the script on a CPU machine (the GPU paths then report
# themselves unavailable).
set -uo pipefail
cd "$(dirname "$0")/.."
part=${1:?usage: gpu_session.sh 1|2}
out=${OUT:-/tmp/tabula-gpu-out}
nets=${NETS:-/tmp/tabula-gpu-nets}  # kept between the parts when the machine stays warm
mkdir -p "$out" "$nets"
log="$out/part$part.log"
export PYTHONUNBUFFERED=1

if [ "${QUICK:-0}" = 1 ]; then
  specs=("1 8 1" "1 16 2" "2 16 3"); big=r2x16; batches_net=1,8,32; batches_search=(8); playouts=48
  threads=(1 2); flights=(2 1); limit=60; raw_seconds=0.1
else
  # Part 2 in order of what matters most, since the budget may end it early: the batches that can fill an H100
  # first, 2 in flight (the GPU default) before 1 and 3, one search thread before two; batch 16 last.
  specs=("6 64 1" "10 128 2" "20 256 3"); big=r20x256; batches_net=1,8,16,32,64,128,256
  batches_search=(64 32 128 16); playouts=1600; threads=(1 2); flights=(2 1 3); limit=45; raw_seconds=1
fi

# sgfmill, which tabula gtp imports, is not on the lent machine: a session carries it as a wheel in .whl (see
# docs/BENCHMARKS.md; WHEELS names another folder) and it is installed beside the networks, outside the system's
# packages.
wheels=${WHEELS:-.whl}
if ! python3 -c "import sgfmill" 2>/dev/null && ls "$wheels"/sgfmill-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target "$nets/site" "$wheels"/sgfmill-*.whl \
    && export PYTHONPATH=$nets/site${PYTHONPATH:+:$PYTHONPATH}
fi

deadline=$((SECONDS + ${BUDGET:-540}))  # the whole part stays inside one 10-minute device call
step() {  # step SECONDS COMMAND...: run and log one command under a time limit (and the part's budget)
  local seconds=$1 left=$((deadline - SECONDS)); shift
  echo "\$ $*" | tee -a "$log"
  if [ "$left" -lt 10 ]; then echo "# skipped: the part's ${BUDGET:-540} s are spent" | tee -a "$log"; return; fi
  [ "$seconds" -le "$left" ] || seconds=$left
  timeout -k 10 "$seconds" "$@" 2>&1 | tee -a "$log"  # -k: a process stuck in the driver ignores SIGTERM
  local rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || echo "# exit status $rc$([ "$rc" = 124 ] && echo ": over its ${seconds} s limit")" | tee -a "$log"
}

export_nets() {  # the random networks of the table, unless this machine still has them
  for spec in "${specs[@]}"; do
    set -- $spec
    [ -f "$nets/r$1x$2.onnx" ] || step 240 python3 -m tabula.tools.cli export --random --blocks "$1" --filters "$2" \
        --seed "$3" --calibration-source random "$nets/r$1x$2.onnx"
  done
}

case $part in
1)
  step 30 nvidia-smi -L
  step 60 python3 -c "import onnxruntime, torch; print('onnxruntime', onnxruntime.__version__,
onnxruntime.get_available_providers()); print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
  step 30 nproc
  export_nets
  step 240 python3 -m pytest -m gpu tests/test_gpu_backends.py -q
  # The issue's "done when": tabula gtp picks the GPU by itself and says so on stderr (needs sgfmill, above).
  printf 'name\nboardsize 19\ngenmove b\ngenmove w\nquit\n' > "$nets/gtp-input"
  echo "# tabula gtp's input: name, boardsize 19, genmove b, genmove w, quit" | tee -a "$log"
  step 120 python3 -m tabula.tools.cli gtp --weights weights/tabula-6x64-sl.onnx --playouts $((playouts / 2)) \
      --seed 1 < "$nets/gtp-input"
  for spec in "${specs[@]}"; do
    set -- $spec
    step 120 python3 -m tabula.tools.cli bench net "$nets/r$1x$2.onnx" --threads 1 --batches $batches_net --rounds 2 \
        --accuracy-positions 256 \
        --paths torch-cuda-fp16,torch-cuda-fp16-eager,torch-cuda-bf16,torch-cuda-fp32,onnx-cuda,onnx-tensorrt
  done
  for b in 8 32 64; do
    step 90 python3 -m tabula.tools.cli bench search weights/tabula-6x64-sl.onnx --instant-network --threads 1 \
        --batch-size "$b" --moves 3 --playouts $((playouts / 2)) --rounds 2
  done
  ;;
2)
  export_nets
  search() {  # search NET THREADS IN_FLIGHT BATCH: one bench search on the GPU
    step "$limit" python3 -m tabula.tools.cli bench search "$nets/$1.onnx" --provider auto --threads "$2" \
        --batches-in-flight "$3" --batch-size "$4" --moves 2 --playouts "$playouts" --rounds 2 --seconds "$raw_seconds"
  }
  first=${batches_search[0]}
  for spec in "${specs[@]}"; do  # every network once, at the likely best setting: the table's core, first
    set -- $spec
    search "r$1x$2" "${threads[0]}" "${flights[0]}" "$first"
  done
  for b in "${batches_search[@]}"; do for f in "${flights[@]}"; do for t in "${threads[@]}"; do
    [ "$b/$f/$t" = "$first/${flights[0]}/${threads[0]}" ] || search "$big" "$t" "$f" "$b"
  done; done; done
  for spec in "${specs[@]:0:2}"; do
    set -- $spec
    for b in "${batches_search[@]:1}"; do search "r$1x$2" "${threads[0]}" "${flights[0]}" "$b"; done
  done
  ;;
*)
  echo "usage: gpu_session.sh 1|2" >&2
  exit 2
  ;;
esac
echo "# part $part done" | tee -a "$log"
