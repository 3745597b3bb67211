#!/usr/bin/env bash
# What a session lent a GPU runs, in ONE call of the device tool (10 minutes a command, 15 minutes of device time a
# session with the machine's start, a fresh machine each time): mostly `tabula distill`, the student network taught
# by KataGo's g170e-b15c192, the one thing here that only a GPU does at scale (docs/TRAINING.md, "Teacher labels").
# The GPU figures of earlier sessions are in docs/BENCHMARKS.md ("GPU") and are not measured again.
#
# Before the call, here (once a checkout; both paths are git-ignored):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux2014_x86_64 -d .whl sgfmill==1.1.1
#   tabula export --from-katago /work/katago-models/g170e-b15c192-s1672170752-d466197061.bin.gz /tmp/b15.onnx --no-int8
#   python3 -m tabula.tools.learn.fp16_pack pack /tmp/b15.onnx runs/teacher/   # float16, xz: 64 MiB travel
#   { git ls-files -z; git ls-files -z -o --exclude-standard; printf '%s\0' .whl runs/teacher; } \
#       | du -c --block-size=1 --files0-from=- | tail -1   # what travels, as du counts it: under 67108864 (64 MiB)
# The call: the device tool's run, command `bash tools/gpu_session.sh`, timeout_s 580, carry [".whl", "runs/teacher"]
# (then give_back). Inside BUDGET seconds (default 530), each step under its own time limit:
#   1. nvidia-smi, and the environment line (versions, the GPU, its measured bf16 matmul rate);
#   2. tabula distill for about 7 minutes (--max-minutes; the first chunk's labelling stops at 80% of it, the
#      chunk then trains, and the checkpoint and the student's ONNX are written before the step's limit): self-play
#      of the teacher on 9x9, 13x13 and 19x19 (even and handicap games, komi drawn around 7), every position
#      labelled, played and labelled in one process a core, the teacher on the GPU (--provider auto: the torch
#      backend there), a 6x64 tabula-v2 student trained on the GPU, 100 steps of 256 a chunk. It STARTS from the
#      kept run, weights/training/distill/ (KEPT) where that has a checkpoint of the same teacher, with the kept
#      run's training settings and those of its focus records that are in the tree, else from today's network
#      (INIT; --init);
#   3. while time is left: tabula bench net of the teacher (a KataGo network's positions/s on the GPU), then bench
#      net and bench search of the student just trained (a tabula-v2 network's throughput and playouts/s on the
#      GPU, its features computed in Python).
# What comes back in $OUT, written as it comes: gpu_session.log (every command, its output, exit status and
# seconds), results.jsonl (one JSON line per figure and per step), and distill-checkpoint.pt (halved),
# distill-model.onnx, distill-metrics.jsonl (the kept run's lines, then this session's chunks), distill-config.json.
# The next CPU session commits them as the kept run (docs/TRAINING.md says how) and goes on from there.
#
# The lent machine has no sgfmill (carried as a wheel in .whl; WHEELS names another folder) and no game records:
# the positions are self-play and the focus records in the tree. QUICK=1 runs the same steps with a tiny random
# teacher (packed and unpacked as the real one is) and a tiny student on a CPU machine; TIME_SCALE (a whole number)
# stretches every limit there.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/tabula-gpu-out}
work=${WORK:-/tmp/tabula-gpu-work}  # the teacher and the run: not under $OUT (8 files come back at most)
mkdir -p "$out" "$work"
log=$out/gpu_session.log
results=$out/results.jsonl
export PYTHONUNBUFFERED=1
scale=${TIME_SCALE:-1}
budget=$(( ${BUDGET:-530} * scale ))
deadline=$((SECONDS + budget))
cores=$(nproc)
cli=(python3 -m tabula.tools.cli)
kept=${KEPT:-weights/training/distill}  # the kept run the GPU goes on from: checkpoint.pt, config.json, metrics.jsonl
teachers=${TEACHERS:-runs/teacher}

if [ "${QUICK:-0}" = 1 ]; then
  # the student, board sizes, self-play games a chunk, label workers, label batch; training batch, steps a chunk
  student=(1x8 9,13,19 4 2 16); training=(16 3)
  distill_minutes=$(awk "BEGIN { print 0.15 * $scale }"); after=20  # seconds kept for the bench after it
  playouts=48
else
  # one label worker a core (the games' moves and the student's planes are Python); a worker plays 8 of the 128
  # games a chunk in lockstep, so its teacher calls hold up to 8 positions of a size: the CUDA graphs go to 16
  student=(6x64 9,13,19,19 128 "$cores" 16); training=(256 100)
  distill_minutes=7; after=90  # the checkpoint halved (15 s), the teacher's bench (45 s at most), the student's
  playouts=1600
fi

# sgfmill, which tabula distill imports (through the game records), is not on the lent machine: installed from the
# carried wheel, outside the system's packages.
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
note "tabula GPU session: budget $budget s, QUICK=${QUICK:-0}, $(date -u +%FT%TZ)"
python3 -c "import sgfmill" 2>/dev/null || note "no sgfmill (carry .whl): tabula distill will fail"

# 1. What the machine is, and the GPU's bf16 matmul ceiling.
step 20 nvidia-smi -L
step 60 python3 - "$results" "$work/cuda" <<'EOF'
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
    record.update(gpu=torch.cuda.get_device_name(), bf16_peak_tflops=bf16_peak_tflops(torch.cuda.get_device_name()),
                  gpu_memory_gib=round(torch.cuda.get_device_properties(0).total_memory / 2 ** 30, 1))
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
    print("# no CUDA device that torch can use here: the teacher and the student run on the CPU")
EOF
cuda=$(cat "$work/cuda" 2>/dev/null || echo 0)

# 2. tabula distill. The teacher: $TEACHER, else the first packed file of runs/teacher/ (TEACHERS), unpacked here to
# float32 ONNX, else the first ONNX or KataGo model file there, else a random network with score and ownership heads
# (1x8 with QUICK=1, packed and unpacked as a real one is; 10x128 on a GPU: the labelling's speed only, its student
# taught nothing and not to be kept).
teacher=${TEACHER:-}
random_teacher=$work/random/teacher-random.onnx
if [ -z "$teacher" ] && [ "${QUICK:-0}" = 1 ]; then
  mkdir -p "$work/random"
  [ -f "$random_teacher" ] || step 90 "${cli[@]}" export --random --head pooled --aux --blocks 1 --filters 8 \
      --seed 54 --calibration-source random "$random_teacher"
  step 30 python3 -m tabula.tools.learn.fp16_pack pack "$random_teacher" "$work/packed/"
  teachers=$work/packed
fi
if [ -z "$teacher" ]; then
  packed=$(ls "$teachers"/*.onnx16 2>/dev/null | head -1)
  if [ -n "$packed" ]; then
    rm -rf "$work/teacher"
    step 30 python3 -m tabula.tools.learn.fp16_pack unpack "$packed" "$work/teacher/" \
      && teacher=$(ls "$work"/teacher/*.onnx | head -1)
  else
    teacher=$(ls "$teachers"/*.onnx "$teachers"/*.bin.gz 2>/dev/null | head -1)
  fi
fi
if [ -z "$teacher" ]; then
  note "no teacher carried (runs/teacher/): a random 10x128 one, for the labelling's speed only"
  mkdir -p "$work/random"
  step 90 "${cli[@]}" export --random --head pooled --aux --blocks 10 --filters 128 --seed 54 \
      --calibration-source random "$random_teacher" && teacher=$random_teacher
fi
run=$work/distill
rm -rf "$run"
mkdir -p "$run"
resume=()
if [ -n "$teacher" ] && [ -f "$kept/checkpoint.pt" ] && [ -f "$kept/config.json" ]; then
  # The kept run's settings that a resumed run must share (distill's FIXED_ON_RESUME; its teacher's network is
  # checked here) and its other training settings, as options after this script's own (the last one counts).
  # Its config.json stays behind: the run writes its own, with this machine's paths.
  if python3 - "$kept/config.json" "$teacher" > "$work/resume-options" 2> "$work/resume-refused" <<'EOF'
import json, os, sys
config = json.load(open(sys.argv[1]))
def stem(path):
    name = os.path.basename(path)
    for end in (".bin.gz", ".onnx16", ".onnx"):
        name = name[: -len(end)] if name.endswith(end) else name
    return name
if config.get("teacher_network"):  # the network the kept run's teacher holds, whichever file
    from tabula.tools.learn.teacher import teacher_identity
    try:
        same = teacher_identity(sys.argv[2]) == config["teacher_network"]
    except ValueError as error:
        sys.exit(f"this teacher: {error}: a new run")
else:  # a run from before teacher_network: a KataGo model file's name begins its conversions' (and int8 export's)
    kept, here = stem(config["teacher"]), stem(sys.argv[2])
    same = here.startswith(kept) or kept.startswith(here)
if not same:
    sys.exit(f"the kept run's teacher is {os.path.basename(config['teacher'])}, this one "
             f"{os.path.basename(sys.argv[2])}: a new run")
for name in ("student_arch", "student_encoding", "zero_planes", "seed", "steps_per_chunk", "batch", "optimizer", "lr",
             "weight_decay", "warmup_steps", "ema_decay", "policy_weight", "value_weight", "score_weight",
             "ownership_weight", "outcome_mix"):
    if name in config:
        print("--" + name.replace("_", "-"))
        print(config[name])
if config.get("freeze_batchnorm"):  # a flag: frozen statistics stay frozen
    print("--freeze-batchnorm")
if config.get("lr_drops"):
    print("--lr-drops")
    print(config["lr_drops"])
# Its focus records (Tabula's own games, in the tree) where they are here: the main process labels them while the
# workers play, so that the GPU's chunks keep the positions the CPU's teach; game records (not in the tree) stay out.
focus = [path for path in config.get("focus_records", "").split(",") if path and os.path.isfile(path)]
if focus:
    print("--focus-records")
    print(",".join(focus))
    for name in ("focus_positions", "focus_per_game", "handicap_bonuses"):
        if name in config:
            print("--" + name.replace("_", "-"))
            print(config[name])
if "student_encoding" not in config:  # begun before the choice: its student reads leelaz-18+komi
    print("--student-encoding")
    print("leelaz-18+komi")
EOF
  then
    mapfile -t resume < "$work/resume-options"
    cp "$kept/checkpoint.pt" "$run/checkpoint.pt"
    [ -f "$kept/metrics.jsonl" ] && cp "$kept/metrics.jsonl" "$run/metrics.jsonl"
    note "going on from the kept run $kept: ${resume[*]}"
  else
    note "not going on from $kept: $(tail -1 "$work/resume-refused")"
  fi
fi
# A new run (nothing kept to go on from) starts from today's network, mapped onto the student's inputs
# (tools/learn/transfer.py); QUICK=1 from a random 1x8 network of the same kind. INIT="" starts from random weights.
init=()
if [ -n "$teacher" ] && [ ${#resume[@]} -eq 0 ]; then
  random_start=$work/random/init-random.onnx
  start=${INIT-$([ "${QUICK:-0}" = 1 ] && echo "$random_start" || echo weights/tabula-6x64-komi-lead.onnx)}
  if [ "$start" = "$random_start" ] && [ ! -f "$start" ]; then
    step 90 "${cli[@]}" export --random --head pooled --aux --blocks 1 --filters 8 --seed 55 \
        --calibration-source random --no-int8 "$start"
  fi
  if [ -n "$start" ] && [ -f "$start" ]; then
    init=(--init "$start")
    note "a new run, started from $start"
  elif [ -n "$start" ]; then
    note "no $start here: a new run from random weights"
  fi
fi
if [ -n "$teacher" ]; then
  left=$((deadline - SECONDS - 45 * scale - after))  # the step's slack past --max-minutes, and the bench after it
  minutes=$(awk "BEGIN { m = $left / 60; print (m < $distill_minutes ? m : $distill_minutes) }")
  if awk "BEGIN { exit !($minutes >= 0.2) }"; then
    step "$(awk "BEGIN { print int(($minutes * 60 + 45 * $scale) / $scale) + 1 }")" "${cli[@]}" distill \
        --teacher "$teacher" --run "$run" --student-arch "${student[0]}" --student-encoding tabula-v2 \
        --sizes "${student[1]}" --selfplay-games "${student[2]}" --keep 1 --komi 7 --komi-spread 1.5 \
        --handicap-fraction 0.2 --max-handicap 9 --label-workers "${student[3]}" --label-batch "${student[4]}" \
        --provider auto --teacher-threads 1 --device "$([ "$cuda" = 1 ] && echo cuda || echo cpu)" \
        --window-positions 2000000 --batch "${training[0]}" --steps-per-chunk "${training[1]}" --lr 0.001 \
        --warmup-steps 100 --max-minutes "$minutes" "${resume[@]}" "${init[@]}"
    # The checkpoint comes back halved (tools/learn/halve.py), as the kept run is committed: an 8x96's whole one is
    # over the 16 MiB a file that the device tool brings back.
    [ -f "$run/checkpoint.pt" ] && step 30 python3 -m tabula.tools.learn.halve "$run/checkpoint.pt" \
        "$out/distill-checkpoint.pt"
    for name in model.onnx metrics.jsonl config.json; do
      cp "$run/$name" "$out/distill-$name" 2>/dev/null
    done
    [ -s "$run/metrics.jsonl" ] && record "{\"what\": \"distill\", \"teacher\": \"$(basename "$teacher")\", \
\"resumed\": $([ ${#resume[@]} -gt 0 ] && echo true || echo false), \"last_chunk\": $(tail -1 "$run/metrics.jsonl")}"
  else
    note "distill skipped: $left s left for it"
  fi
else
  note "distill skipped: no teacher"
fi

# 3. While time is left: the teacher's raw throughput on every GPU path (a KataGo network's positions/s on the GPU,
# docs/KATAGO.md), the student's and the CPU's fp32, and the student's search at tabula gtp's GPU default (1 thread,
# 2 batches in flight of 64), then the Python side's bound for its planes.
if [[ "$teacher" == *.onnx ]] && [ -f "$teacher" ]; then  # bench net reads ONNX (not a .bin.gz teacher)
  step 45 "${cli[@]}" bench net "$teacher" --size 19 --threads "$cores" --batches 1,64,256 --seconds 0.5 \
      --rounds 2 --accuracy-positions 0 --paths onnx-fp32,torch-cuda-fp16,torch-cuda-bf16 --results "$results"
fi
student_net=$run/model.onnx
if [ -f "$student_net" ]; then
  step 45 "${cli[@]}" bench net "$student_net" --size 19 --threads "$cores" --batches 1,64,256 --seconds 0.5 \
      --rounds 2 --accuracy-positions 64 --paths onnx-fp32,torch-cuda-fp16,torch-cuda-bf16 --results "$results"
  for instant in "" --instant-network; do
    step 45 "${cli[@]}" bench search "$student_net" --provider auto $instant --threads 1 --batches-in-flight 2 \
        --batch-size 64 --moves 2 --playouts "$playouts" --rounds 2 --results "$results"
  done
fi
note "done in $SECONDS s"
