#!/usr/bin/env bash
# The GPU measurements of docs/BENCHMARKS.md ("To measure on a GPU machine"), in ONE call of the device tool
# (10 minutes a command, 15 minutes of device time a session with the machine's start, a fresh machine each time):
#
#   OUT=$OUT bash tools/gpu_session.sh          # the device tool's run, timeout_s 540, carry [".whl"]
#   ... carry [".whl", "runs/teacher"]        # with a teacher for `tabula distill` in runs/teacher/ (step 2)
#
# The steps run in order of importance, each under its own time limit and all inside BUDGET seconds (default 480),
# so that a cut-short run still brings back what matters most: the environment and the GPU's bf16 matmul ceiling;
# a few minutes of `tabula distill` (a teacher's labels and a student trained on them, brought back as distill-*);
# raw network throughput of the shipped 6x64 (fp16/bf16/fp32 on the GPU, int8 and fp32 on the CPU); bench search at
# the likeliest best settings; raw throughput of random 10x128 and 20x256 networks; two minutes of `tabula train` on
# a 10x128 network (samples/s and MFU); bench search of the larger networks and the Python side's bound; tabula
# gtp's start on the GPU; the GPU tests; then a wider search grid while time is left.
#
# Everything goes to $OUT as it comes: gpu_session.log (every command and its output) and results.jsonl (one JSON
# line per figure, appended the moment it is measured, and one per step with its exit status and seconds), plus
# train-metrics.jsonl. The lent machine has no sgfmill (carried as a wheel in .whl; WHEELS names another folder)
# and no game archives: random networks are calibrated on random positions and the training reads random batches
# (tabula train --synthetic). QUICK=1 runs the same steps on tiny networks and budgets, to check the script on a
# CPU machine: the GPU paths then report themselves unavailable and the training runs on the CPU.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/tabula-gpu-out}
work=${WORK:-/tmp/tabula-gpu-work}  # networks and the training run: not under $OUT (8 files come back at most)
mkdir -p "$out" "$work"
log=$out/gpu_session.log
results=$out/results.jsonl
export PYTHONUNBUFFERED=1
# TIME_SCALE (a whole number, default 1) stretches every limit: the CPU tests run QUICK=1 on a machine that may be
# busy, where a limit sized for a GPU machine would fail a step that is only slow.
scale=${TIME_SCALE:-1}
budget=$(( ${BUDGET:-480} * scale ))
deadline=$((SECONDS + budget))
cores=$(nproc)
cli=(python3 -m tabula.tools.cli)

net6=weights/tabula-6x64-anysize.onnx  # the shipped network, fp32 (the GPU runs it in fp16 or bf16)
int8_6=weights/tabula-6x64-anysize-int8.onnx  # its int8 file, tabula gtp's default, which runs on the CPU only
search6=weights/tabula-6x64-sl.onnx  # the same tower with a 19x19-only head: one board size of CUDA graphs to start
int8_default=weights/$(cat weights/DEFAULT)  # tabula gtp's default: int8, run on a GPU through its fp32 file
gpu_paths=torch-cuda-fp16,torch-cuda-bf16,torch-cuda-fp32,onnx-tensorrt,onnx-cuda
if [ "${QUICK:-0}" = 1 ]; then
  mid=(1 8); big=(1 16); net_batches=1,8; big_batches=1,8; net_seconds=0.1; accuracy=32
  playouts=48; search_seconds=0.1; limit_search=60
  core6=("1 2 8" "2 1 8"); core_big="1 2 8"; grid=("$search6 1 3 16" "BIG 1 2 16")
  train=(1 8 32); train_seconds=6
  # student, sizes, self-play games a chunk, label batch, training batch, steps a chunk, label processes; the
  # random teacher
  distill=(1x8 9 4 16 16 3 0); distill_teacher=(1 8); distill_seconds=5
else
  mid=(10 128); big=(20 256); net_batches=1,8,16,32,64,128,256; big_batches=1,16,64,128,256; net_seconds=0.5
  accuracy=256; playouts=1600; search_seconds=1; limit_search=75
  # threads, batches in flight, batch: 1 2 64 is tabula gtp's GPU default (ON_GPU, chosen from the H200 run of
  # 2026-11-28, docs/BENCHMARKS.md), 2 2 8 the CPU's shape that a GPU had before it.
  core6=("1 2 64" "1 2 32" "2 2 8"); core_big="1 2 64"
  grid=("$search6 1 1 32" "$search6 1 3 64" "$search6 1 2 16" "$search6 1 2 128" "BIG 1 2 128" "BIG 1 3 128"
        "$search6 2 2 32" "BIG 1 2 32" "MID 1 2 128" "$search6 2 2 64")
  train=(10 128 256); train_seconds=120  # two minutes of training, or what the budget leaves
  # 64 games a chunk in 6 processes: their moves are played and KataGo's input features computed in Python, a few
  # ms a 19x19 position, so a chunk of more games would outlast the step before its first training step
  distill=(6x64 9,13,19,19 64 256 1024 20 6); distill_teacher=(10 128); distill_seconds=150
fi
r_mid=$work/r${mid[0]}x${mid[1]}.onnx
r_big=$work/r${big[0]}x${big[1]}.onnx

# sgfmill, which tabula gtp and tabula train import (through the game records), is not on the lent machine:
# installed from the carried wheel, outside the system's packages.
wheels=${WHEELS:-.whl}
if ! python3 -c "import sgfmill" 2>/dev/null && ls "$wheels"/sgfmill-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target "$work/site" "$wheels"/sgfmill-*.whl \
    && export PYTHONPATH=$work/site${PYTHONPATH:+:$PYTHONPATH}
fi

note() { echo "# $*" | tee -a "$log"; }
record() { echo "$1" >> "$results"; }  # one JSON line, as it comes
step() {  # step SECONDS COMMAND...: run and log one command under a time limit (and the session's budget)
  local seconds=$(($1 * scale)) left=$((deadline - SECONDS)) started=$SECONDS; shift
  local quoted=${*//\\/\\\\}; quoted=\"${quoted//\"/\\\"}\"  # the command as a JSON string
  echo "\$ $*" | tee -a "$log"
  if [ "$left" -lt 10 ]; then
    note "skipped: the session's $budget s are spent"
    record "{\"what\": \"step\", \"command\": $quoted, \"skipped\": true}"
    return 1
  fi
  [ "$seconds" -le "$left" ] || seconds=$left
  timeout -k 10 "$seconds" "$@" 2>&1 | tee -a "$log"  # -k: a process stuck in the driver ignores SIGTERM
  local rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || note "exit status $rc$([ "$rc" = 124 ] && echo ": over its ${seconds} s limit")"
  note "$((SECONDS - started)) s"
  record "{\"what\": \"step\", \"command\": $quoted, \"rc\": $rc, \"seconds\": $((SECONDS - started))}"
  return "$rc"
}
search() {  # search NET THREADS IN_FLIGHT BATCH: one bench search as tabula gtp would run it (--provider auto)
  step "$limit_search" "${cli[@]}" bench search "$1" --provider auto --threads "$2" --batches-in-flight "$3" \
      --batch-size "$4" --moves 2 --playouts "$playouts" --rounds 2 --seconds "$search_seconds" --results "$results"
}
export_net() {  # export_net BLOCKS FILTERS FILE: a random network, unless this machine still has it
  [ -f "$3" ] || step 90 "${cli[@]}" export --random --blocks "$1" --filters "$2" --seed "$1" \
      --calibration-source random "$3"
}
note "tabula GPU session: budget $budget s, QUICK=${QUICK:-0}, $(date -u +%FT%TZ)"
python3 -c "import sgfmill" 2>/dev/null || note "no sgfmill (carry .whl): tabula gtp and tabula train will fail"

# 1. What the machine is, and the GPU's bf16 matmul ceiling (MFU is also given against it).
step 20 nvidia-smi -L
step 90 python3 - "$results" "$work/cuda" <<'EOF'
import json, os, platform, sys
record = {"what": "env", "python": platform.python_version(), "cores": os.cpu_count()}
import numpy, onnxruntime
record.update(numpy=numpy.__version__, onnxruntime=onnxruntime.__version__,
              providers=onnxruntime.get_available_providers())
try:
    import torch
except ImportError:
    torch = None
record.update(torch=torch and torch.__version__, cuda=bool(torch and torch.cuda.is_available()))
if record["cuda"]:
    from tabula.tools.bench.net import bf16_peak_tflops
    record.update(gpu=torch.cuda.get_device_name(), bf16_peak_tflops=bf16_peak_tflops(torch.cuda.get_device_name()))
    n = 8192
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    for _ in range(3):
        a @ b
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(10):
        a @ b
    end.record()
    torch.cuda.synchronize()
    record["matmul_bf16_tflops"] = round(10 * 2 * n ** 3 / (start.elapsed_time(end) / 1000) / 1e12, 1)
print(json.dumps(record, sort_keys=True))
open(sys.argv[1], "a").write(json.dumps(record, sort_keys=True) + "\n")
open(sys.argv[2], "w").write("1" if record["cuda"] else "0")
if not record["cuda"]:
    print("# no CUDA device that torch can use here: the GPU paths below report themselves unavailable")
EOF
cuda=$(cat "$work/cuda" 2>/dev/null || echo 0)

# 2. Teacher labels (docs/TRAINING.md, "Teacher labels"): tabula distill labels self-play positions (every one of
# the games, which the teacher plays) with a teacher network on the GPU (the torch backend) and trains a 6x64
# student on them for a fixed few minutes; the student's checkpoint and ONNX and the run's metrics come back
# (distill-*). The teacher: $TEACHER, else the first file of runs/teacher/ (carry it:
# the device tool's carry [".whl", "runs/teacher"], with a KataGo network's ONNX conversion there, under 64 MiB),
# else a random network with score and ownership heads, which measures the speed and teaches nothing (QUICK=1
# always, unless TEACHER is set).
teacher=${TEACHER:-}
[ -z "$teacher" ] && [ "${QUICK:-0}" != 1 ] \
  && teacher=$(ls runs/teacher/*.onnx runs/teacher/*.bin.gz 2>/dev/null | head -1)
if [ -z "$teacher" ]; then
  teacher=$work/teacher-random.onnx
  note "no teacher carried (runs/teacher/): a random ${distill_teacher[0]}x${distill_teacher[1]} one, for speed only"
  [ -f "$teacher" ] || step 90 "${cli[@]}" export --random --head pooled --aux --blocks "${distill_teacher[0]}" \
      --filters "${distill_teacher[1]}" --seed 54 --calibration-source random "$teacher"
fi
if [ -f "$teacher" ]; then
  distill_device=$([ "$cuda" = 1 ] && echo cuda || echo cpu)
  rm -rf "$work/distill"
  step $((distill_seconds + 120)) "${cli[@]}" distill --teacher "$teacher" --run "$work/distill" \
      --student-arch "${distill[0]}" --provider "$([ "$cuda" = 1 ] && echo torch || echo cpu)" \
      --device "$distill_device" --sizes "${distill[1]}" --selfplay-games "${distill[2]}" \
      --label-batch "${distill[3]}" --batch "${distill[4]}" --steps-per-chunk "${distill[5]}" \
      --label-workers "${distill[6]}" --keep 1 --window-positions 2000000 --lr 0.002 --warmup-steps 20 \
      --max-minutes "$(awk "BEGIN { print $distill_seconds / 60 }")"
  for name in checkpoint.pt metrics.jsonl model.onnx; do
    cp "$work/distill/$name" "$out/distill-$name" 2>/dev/null
  done
  [ -s "$work/distill/metrics.jsonl" ] && record "{\"what\": \"distill\", \"teacher\": \"$(basename "$teacher")\", \
\"last_chunk\": $(tail -1 "$work/distill/metrics.jsonl")}"
fi

# 3. Raw throughput of the shipped 6x64: every GPU path (fp16 also without CUDA graphs, to see what they save), and
# the CPU's int8 and fp32 on all cores for comparison.
step 150 "${cli[@]}" bench net "$net6" --int8 "$int8_6" --size 19 --threads "$cores" --batches "$net_batches" \
    --seconds "$net_seconds" --rounds 2 --accuracy-positions "$accuracy" --paths "onnx-fp32,onnx-int8,$gpu_paths,torch-cuda-fp16-eager" \
    --results "$results"

# 4. bench search of the 6x64 at the likeliest best settings, then of the default network (through its fp32 file
# beside the int8 one, with its score and ownership heads) at tabula gtp's GPU default.
for setting in "${core6[@]}"; do search "$search6" $setting; done
search "$int8_default" ${core6[0]}

# 5. Raw throughput of 10x128 and 20x256 (random weights: speed only) on the GPU paths.
export_net "${mid[@]}" "$r_mid"
export_net "${big[@]}" "$r_big"
for net in "$r_mid" "$r_big"; do
  [ -f "$net" ] && step 120 "${cli[@]}" bench net "$net" --threads 1 --batches "$big_batches" \
      --seconds "$net_seconds" --rounds 2 --accuracy-positions 64 --paths "$gpu_paths" --results "$results"
done

# 6. Training: tabula train on random batches of a 10x128 network for two minutes (or what the budget leaves):
# samples/s, and the share of the GPU's bf16 peak the convolutions reach (MFU).
if [ "$cuda" = 1 ] || [ "${QUICK:-0}" = 1 ]; then
  device=$([ "$cuda" = 1 ] && echo cuda || echo cpu)
  left=$((deadline - SECONDS - 45))  # the MFU step and some slack stay inside the budget
  [ "$left" -lt "$train_seconds" ] && train_seconds=$left
  if [ "$train_seconds" -ge 10 ] || { [ "${QUICK:-0}" = 1 ] && [ "$train_seconds" -ge 3 ]; }; then
    rm -rf "$work/train"
    step $((train_seconds + 60)) "${cli[@]}" train --synthetic 19 --out "$work/train" --blocks "${train[0]}" \
        --filters "${train[1]}" --batch "${train[2]}" --steps 100000000 --device "$device" \
        --precision "$([ "$device" = cuda ] && echo bf16 || echo auto)" --workers "$((cores > 8 ? 6 : 1))" \
        --max-minutes "$(awk "BEGIN { print $train_seconds / 60 }")" --log-every "$([ "$device" = cuda ] && echo 50 || echo 5)" \
        --val-positions 0 --no-export --checkpoint-every 100000000 --checkpoint-minutes 1000
    cp "$work/train/metrics.jsonl" "$out/train-metrics.jsonl" 2>/dev/null
    step 60 python3 - "$work/train" "$results" <<'EOF'
import json, sys
from tabula.engine.net.network import NetSpec, TabulaNet
from tabula.tools.bench.net import forward_flops
run, results = sys.argv[1:3]
try:
    config = json.load(open(f"{run}/config.json"))
    rows = [r for r in map(json.loads, open(f"{run}/metrics.jsonl")) if r.get("kind") == "train"]
except OSError as error:
    sys.exit(f"no training figures: {error}")
if not rows:
    sys.exit("no training figures: the run logged no window")
env = [r for r in map(json.loads, open(results)) if r.get("what") == "env"][-1]
measured = rows[1:] or rows  # the first window holds cuDNN's tuning and the workers' start
# samples/s over the windows together: every window is log_every steps of one batch, so the harmonic mean
rate = len(measured) / sum(1 / r["samples_per_s"] for r in measured)
flops = 3 * forward_flops(TabulaNet(NetSpec(blocks=config["blocks"], filters=config["filters"])).eval(),
                          config["synthetic"])  # per sample: forward, and backward as twice the forward
record = {"what": "train", "device": config["device"], "gpu": env.get("gpu"), "blocks": config["blocks"],
          "filters": config["filters"], "batch": config["batch"], "size": config["synthetic"],
          "steps": rows[-1]["step"] if rows else 0, "windows": len(measured), "samples_per_s": round(rate, 1),
          "best_window_samples_per_s": round(max(r["samples_per_s"] for r in measured), 1),
          "gflop_per_sample": round(flops / 1e9, 3), "tflop_s": round(rate * flops / 1e12, 3)}
if env.get("bf16_peak_tflops"):
    record["mfu"] = round(record["tflop_s"] / env["bf16_peak_tflops"], 4)
    record["bf16_peak_tflops"] = env["bf16_peak_tflops"]
if env.get("matmul_bf16_tflops"):
    record["share_of_measured_matmul"] = round(record["tflop_s"] / env["matmul_bf16_tflops"], 4)
print(json.dumps(record, sort_keys=True))
open(results, "a").write(json.dumps(record, sort_keys=True) + "\n")
EOF
  else
    note "training skipped: $train_seconds s left for it"
  fi
else
  note "training skipped: no CUDA device here"
fi

# 7. bench search of the larger networks.
for net in "$r_mid" "$r_big"; do [ -f "$net" ] && search "$net" $core_big; done

# The Python side's bound on this machine's cores (an instant network), against which the searches above compare.
step 60 "${cli[@]}" bench search "$search6" --provider auto --instant-network --threads 1 --batch-size 32 --moves 2 \
    --playouts "$playouts" --rounds 2 --results "$results"

# 8. tabula gtp on the GPU by itself: which backend its stderr line names, and how long it takes to its first move,
# with the default (int8) network and with the shipped fp32 file (24 board sizes to check and capture graphs for).
printf 'name\nboardsize 19\ngenmove b\nquit\n' > "$work/gtp-input"
note "tabula gtp's input: name, boardsize 19, genmove b, quit"
step 90 "${cli[@]}" gtp --playouts $((playouts / 2)) --seed 1 < "$work/gtp-input"
step 120 "${cli[@]}" gtp --weights "$net6" --playouts $((playouts / 2)) --seed 1 < "$work/gtp-input"

# 9. The GPU backends against the CPU (tests marked gpu; they skip where there is no GPU).
step 150 python3 -m pytest -m gpu tests/test_gpu_backends.py -q -p no:cacheprovider

# 10. The wider search grid, while the budget lasts.
for entry in "${grid[@]}"; do
  set -- $entry
  net=${1/#MID/$r_mid}; net=${net/#BIG/$r_big}
  [ -f "$net" ] && search "$net" "$2" "$3" "$4"
done
note "done in $SECONDS s"
