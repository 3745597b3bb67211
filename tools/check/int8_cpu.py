"""Whether int8 network files compute what their fp32 file does on this CPU, or on an emulated one, and how fast.

    python -m tabula.tools.check.int8_cpu FP32.onnx INT8.onnx [INT8.onnx ...] [--emulate CPU]
        [--positions 500] [--games GLOB] [--size 19] [--per-game 8] [--skip-games 500]
        [--threads 1] [--batch 8] [--seconds 2]

For each int8 file, against the fp32 file: the share of positions where both pick the same move (among the legal
moves of real positions; of all points on random ones; with its 95% interval on real ones) and the mean and largest
|value difference|, on the random 19x19 positions of the engine's start-up check (``int8_check``:
``INT8_AGREEMENT["positions"]``) and on ``--positions`` positions of real games (``--games``: the ``--size`` games
of the archives, after the first ``--skip-games`` games of any size, ``--per-game`` from each, as ``tabula bench
net`` measures; random games where there are none). A network's match sets make the positions it meets in play:
``--games 'docs/matches/v2-*/games.tar.xz' --size 9 --per-game 1000 --skip-games 0`` takes every position of the
first 9x9 games found. Then the positions/s of every file at batch ``--batch``, in
interleaved rounds (the best round counts). And which int8 kernels onnxruntime's MLAS picks on the CPU the files
ran on, from that CPU's own cpuid.

``--emulate CPU`` runs the int8 files and the speed rounds (the fp32 file's too) under ``qemu-x86_64 -cpu CPU``
(Debian's qemu-user: ``apt-get install qemu-user``), e.g. ``Haswell-v4``, an AVX2 CPU without AVX-512 or VNNI: what
onnxruntime computes there, seen on a machine that has VNNI. The fp32 reference is computed natively. Times under
emulation are no speed figures: they are printed as ratios to the fp32 file and labelled emulated. Emulation is
slow, many times slower than the CPU itself: try few positions first.
"""
from __future__ import annotations

import argparse
import json
import mmap
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

# x86-64 machine code of ``void cpuid(uint32 leaf, uint32 subleaf, uint32 out[4])`` (System V calling convention):
# push rbx; mov eax, edi; mov ecx, esi; mov r8, rdx; cpuid; mov [r8], eax; mov [r8+4], ebx; mov [r8+8], ecx;
# mov [r8+12], edx; pop rbx; ret. Run in place, so that under qemu the emulated CPU answers.
_CPUID = bytes.fromhex("53 89f8 89f1 4989d0 0fa2 418900 41895804 41894808 4189500c 5b c3")
# ``uint32 xgetbv0(void)``: xor ecx, ecx; xgetbv; ret (the state the OS saves: AVX-512's registers or not)
_XGETBV = bytes.fromhex("31c9 0f01d0 c3")


def cpu_features() -> dict[str, bool] | None:
    """The features of the CPU this process runs on that decide onnxruntime's int8 kernels, read with the cpuid
    instruction itself (so an emulated CPU reports its own); None off x86-64 or where code cannot be run so."""
    if platform.machine().lower() not in ("x86_64", "amd64") or not hasattr(mmap, "PROT_EXEC"):
        return None
    import ctypes

    try:
        page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    except (OSError, ValueError):
        return None
    page.write(_CPUID + _XGETBV)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    cpuid = ctypes.CFUNCTYPE(None, ctypes.c_uint32, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint32))(address)
    xgetbv = ctypes.CFUNCTYPE(ctypes.c_uint32)(address + len(_CPUID))

    leaves = []
    for number, sub in ((1, 0), (7, 0), (7, 1)):
        out = (ctypes.c_uint32 * 4)()
        cpuid(number, sub, out)
        leaves.append(list(out))
    one, seven, seven_one = leaves
    os_avx = bool(one[2] >> 27 & 1) and xgetbv() & 0x6 == 0x6
    os_avx512 = os_avx and xgetbv() & 0xE0 == 0xE0
    features = {
        "fma": bool(one[2] >> 12 & 1), "avx2": bool(seven[1] >> 5 & 1) and os_avx,
        "avx512f": bool(seven[1] >> 16 & 1) and os_avx512,
        "avx512bw_dq_vl": seven[1] & 0xC0020000 == 0xC0020000 and os_avx512,
        "avx512_vnni": bool(seven[2] >> 11 & 1) and os_avx512, "avx_vnni": bool(seven_one[0] >> 4 & 1) and os_avx,
    }
    return features


def int8_kernels(features: dict[str, bool] | None) -> str:
    """Which u8 x s8 kernels MLAS (onnxruntime's CPU library) picks for these features, following its platform
    setup's order: AVX2 and FMA, then AVX-VNNI, then AVX-512 core, then AVX-512 VNNI, each overriding the last."""
    if features is None:
        return "unknown (not an x86-64 CPU, or cpuid could not be run)"
    if not (features["fma"] and features["avx2"]):
        return "SSE (no AVX2: 32-bit sums)"
    kernels = "AVX2 (vpmaddubsw: u8 x s8 pair sums saturate at 16 bits)"
    if features["avx_vnni"]:
        kernels = "AVX-VNNI (vpdpbusd: 32-bit sums)"
    if features["avx512f"] and features["avx512bw_dq_vl"]:
        kernels = "AVX-512 core, no VNNI (vpmaddubsw: u8 x s8 pair sums saturate at 16 bits)"
        if features["avx512_vnni"]:
            kernels = "AVX-512 VNNI (vpdpbusd: 32-bit sums)"
    return kernels


def _session(path: str, threads: int):
    import onnxruntime as ort

    from tabula.engine.net.evaluator import session_options

    return ort.InferenceSession(path, session_options(threads), providers=["CPUExecutionProvider"])


def _outputs(session, planes: np.ndarray, batch: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """(policy logits, values) of ``planes``, run in batches."""
    name = session.get_inputs()[0].name
    runs = [session.run(["policy", "value"], {name: planes[i: i + batch]}) for i in range(0, len(planes), batch)]
    return np.concatenate([r[0] for r in runs]), np.concatenate([r[1].reshape(-1) for r in runs])


def run_files(files: list[str], sets: dict[str, np.ndarray], threads: int, batch: int, seconds: float,
              rounds: int = 3) -> dict:
    """On this CPU: the outputs of each file but the first (the reference, computed elsewhere) on each set of
    planes, then positions/s of every file at ``batch`` (interleaved rounds of ``seconds / rounds`` each, the best
    round counts) on the first set's planes, and the CPU's features."""
    sessions = [_session(path, threads) for path in files]
    outputs = {f"{i}/{name}/{part}": array for i, session in enumerate(sessions) if i > 0
               for name, planes in sets.items() for part, array in zip(("policy", "value"), _outputs(session, planes))}
    planes = next(iter(sets.values()))[:batch]
    speeds = [0.0] * len(files)
    if seconds > 0:
        for session in sessions:
            _outputs(session, planes, batch)  # warm up
        for _ in range(rounds):
            for i, session in enumerate(sessions):
                calls, start = 0, time.perf_counter()
                while True:
                    _outputs(session, planes, batch)
                    calls += 1
                    elapsed = time.perf_counter() - start
                    if elapsed >= seconds / rounds:
                        break
                speeds[i] = max(speeds[i], calls * len(planes) / elapsed)
    return {"outputs": outputs, "speeds": speeds, "features": cpu_features()}


def _emulated(cpu: str, files: list[str], sets: dict[str, np.ndarray], threads: int, batch: int,
              seconds: float) -> dict:
    """``run_files`` in a child process under ``qemu-x86_64 -cpu cpu``."""
    qemu = shutil.which("qemu-x86_64")
    if qemu is None:
        raise SystemExit("int8_cpu: --emulate needs qemu-x86_64 (Debian: apt-get install qemu-user)")
    with tempfile.TemporaryDirectory() as scratch:
        planes, results = os.path.join(scratch, "planes.npz"), os.path.join(scratch, "results.npz")
        np.savez(planes, **sets)
        command = [qemu, "-cpu", cpu, sys.executable, "-m", "tabula.tools.check.int8_cpu", "--worker", planes, results,
                   "--threads", str(threads), "--batch", str(batch), "--seconds", str(seconds), *files]
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            errors = [line for line in done.stderr.splitlines() if "TCG doesn't support" not in line]
            raise SystemExit(f"int8_cpu: under qemu-x86_64 -cpu {cpu} the run failed:\n" + "\n".join(errors[-10:]))
        with np.load(results) as stored:
            found = {key: stored[key] for key in stored.files}
    return {"outputs": {k: v for k, v in found.items() if "/" in k}, "speeds": list(found["speeds"]),
            "features": json.loads(str(found["features"]))}


def _worker(argv: list[str]) -> int:
    """``--worker PLANES.npz RESULTS.npz [--threads --batch --seconds] FILE...``: ``run_files`` into a file."""
    parser = argparse.ArgumentParser(prog="int8_cpu --worker")
    parser.add_argument("planes")
    parser.add_argument("results")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("files", nargs="+")
    args = parser.parse_args(argv)
    with np.load(args.planes) as stored:
        sets = {key: stored[key] for key in stored.files}
    found = run_files(args.files, sets, args.threads, args.batch, args.seconds)
    np.savez(args.results, **found["outputs"], speeds=np.array(found["speeds"]),
             features=np.array(json.dumps(found["features"])))
    return 0


def agreement(reference: tuple[np.ndarray, np.ndarray], other: tuple[np.ndarray, np.ndarray],
              legal: np.ndarray | None = None) -> tuple[float, float, float]:
    """(share of positions with the same top move, mean |value diff|, largest |value diff|); the top move among
    the ``legal`` moves where given."""
    (ref_logits, ref_value), (logits, value) = reference, other
    if legal is not None:
        ref_logits, logits = np.where(legal, ref_logits, -np.inf), np.where(legal, logits, -np.inf)
    difference = np.abs(ref_value.reshape(-1) - value.reshape(-1))
    return (float(np.mean(ref_logits.argmax(axis=1) == logits.argmax(axis=1))), float(difference.mean()),
            float(difference.max()))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tabula.tools.check.int8_cpu", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("fp32", help="the fp32 ONNX file")
    parser.add_argument("int8", nargs="+", help="int8 ONNX files of the same network")
    parser.add_argument("--emulate", metavar="CPU", help="run the int8 files under qemu-x86_64 -cpu CPU")
    parser.add_argument("--positions", type=int, default=500, help="real positions (0: the random ones only)")
    parser.add_argument("--games", default="", metavar="GLOB", help="SGF archives, folders or files of games "
                                                                    "(default: random games)")
    parser.add_argument("--size", type=int, default=19, help="the board size of the real positions")
    parser.add_argument("--per-game", type=int, default=8, help="positions drawn from each game")
    parser.add_argument("--skip-games", type=int, default=500, help="games of the archives passed over first")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=8, help="batch of the speed rounds")
    parser.add_argument("--seconds", type=float, default=2.0, help="time per file for speed, over 3 rounds (0: none)")
    return parser


def main(argv: list[str]) -> int:
    if argv[:1] == ["--worker"]:
        return _worker(argv[1:])
    args = build_parser().parse_args(argv)
    if args.positions < 0 or args.skip_games < 0 or min(args.threads, args.batch, args.per_game) < 1:
        raise SystemExit("int8_cpu: --positions and --skip-games must be 0 or more, --threads, --batch and "
                         "--per-game 1 or more")
    if not 2 <= args.size <= 25:
        raise SystemExit("int8_cpu: --size must be 2 to 25")
    from tabula.engine.net.comparison import comparison_planes
    from tabula.engine.net.encodings import encoding_named
    from tabula.engine.net.int8_check import INT8_AGREEMENT
    from tabula.engine.rules.interface import batch_legal_masks
    from tabula.tools.compete.elo import wilson_interval
    from tabula.tools.learn.export import random_positions, sgf_positions

    files = [args.fp32, *args.int8]
    for path in files:
        if not os.path.isfile(path):
            raise SystemExit(f"int8_cpu: {path}: no such file")
    try:
        reference_session = _session(args.fp32, args.threads)
    except Exception as error:  # onnxruntime's own exception types: a file it cannot load
        raise SystemExit(f"int8_cpu: {args.fp32}: not an ONNX network onnxruntime can load ({error})") from None
    metadata = reference_session.get_modelmeta().custom_metadata_map
    encoding = encoding_named(metadata.get("input_encoding", "leelaz-18"))
    try:
        sizes = [int(size) for size in metadata.get("board_sizes", "19").split(",")]
    except ValueError:  # a file whose sizes this cannot read: onnxruntime says so on the first batch if need be
        sizes = [args.size]
    if args.positions and args.size not in sizes:
        raise SystemExit(f"int8_cpu: {args.fp32} plays {', '.join(f'{n}x{n}' for n in sizes)}, not "
                         f"{args.size}x{args.size}")
    sets = {"random": comparison_planes(19, count=INT8_AGREEMENT["positions"], encoding=encoding)}
    legal = {"random": None}
    if args.positions:
        source = f"{args.size}x{args.size} games of {args.games}"
        try:
            states = sgf_positions(args.positions, 12345, args.games, args.per_game, args.skip_games, size=args.size)
        except (OSError, ImportError):  # no games of that size named, or no sgfmill to read them
            states = random_positions(args.size, args.positions, 12345)
            source = f"random {args.size}x{args.size} games"
        sets["real"], legal["real"] = encoding.encode_batch(states, None), batch_legal_masks(states)
    reference = {name: _outputs(reference_session, planes) for name, planes in sets.items()}
    where = f"emulated {args.emulate}" if args.emulate else "native"
    if args.emulate:
        found = _emulated(args.emulate, files, sets, args.threads, args.batch, args.seconds)
    else:
        found = run_files(files, sets, args.threads, args.batch, args.seconds)
    print(f"# CPU ({where}): int8 kernels {int8_kernels(found['features'])}; features {found['features']}")
    real = f"; real: {len(sets['real'])} positions of {source}" if args.positions else ""
    print(f"# random: the {len(sets['random'])} random 19x19 positions of the start-up check{real}")
    for index, path in enumerate(args.int8, start=1):
        parts = []
        for name in sets:
            other = (found["outputs"][f"{index}/{name}/policy"], found["outputs"][f"{index}/{name}/value"])
            top1, mean, largest = agreement(reference[name], other, legal[name])
            interval = ""
            if legal[name] is not None:
                same, count = round(top1 * len(legal[name])), len(legal[name])
                low, high = wilson_interval(same, count)
                interval = f" ({same:,} of {count:,}) [{low:.2%}, {high:.2%}]"
            parts.append(f"{name}: top-1 {top1:.1%}{interval}, |value diff| mean {mean:.3f} max {largest:.3f}")
        print(f"{path} ({where}): " + "; ".join(parts))
    speeds = found["speeds"]
    if args.seconds > 0 and speeds[0] > 0:
        label = "emulated, not a speed figure: ratio to fp32 only" if args.emulate else "positions/s"
        print(f"# speed at batch {args.batch}, {args.threads} thread(s) ({label})")
        for path, speed in zip(files, speeds):
            figure = "" if args.emulate else f"{speed:9.0f} positions/s, "
            print(f"{path}: {figure}{speed / speeds[0]:.2f}x fp32")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
