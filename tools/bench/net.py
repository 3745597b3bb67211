"""`tabula bench net WEIGHTS`: raw network throughput (positions/s) by batch size and thread count, for onnxruntime
fp32 and int8 and, for comparison, torch fp32 and bf16 autocast, all measured in one run; plus the accuracy cost of
int8 against fp32 on real positions.

    tabula bench net /tmp/r6x64.onnx [--batches 1,8,16,32] [--threads 1,2] [--seconds 0.5] [--int8 FILE]
                                     [--results FILE.jsonl]

WEIGHTS is a Tabula fp32 ONNX file or a Leela Zero weight file. Without ``--int8`` the int8 net is quantized here,
calibrated on positions other than those measured. Where torch is installed the network's FLOPs per position are
counted too, and each path's best rate is also given in TFLOP/s. ``--results`` appends one JSON line per path
measured (and per accuracy compared) to FILE.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
import time

import numpy as np

from tabula.engine.net.evaluator import OnnxEvaluator, first_line, legal_mask, masked_softmax

CPU_PATHS = ("onnx-fp32", "onnx-int8", "torch-fp32", "torch-bf16")
# Dense bf16 (and fp16) tensor-core peaks in TFLOP/s, no sparsity, from NVIDIA's datasheets, by a part of the name
# torch gives the device (first match wins: "H100 PCIe" before "H100", which is the SXM part).
BF16_PEAK_TFLOPS = (("H100 PCIe", 756.0), ("H100 NVL", 835.0), ("H100", 989.4), ("H200", 989.4), ("GH200", 989.4),
                    ("A100", 312.0), ("L40S", 362.0), ("L4", 121.0), ("A10", 125.0))
GPU_PATHS = ("onnx-cuda", "onnx-tensorrt", *(f"torch-cuda-{p}{e}" for p in ("fp16", "bf16", "fp32")
                                                 for e in ("", "-eager")))


def bf16_peak_tflops(device_name: str) -> float | None:
    """The datasheet's dense bf16 peak of a GPU named so by torch, in TFLOP/s; None for a GPU not in the table."""
    for part, peak in BF16_PEAK_TFLOPS:
        if part in device_name:
            return peak
    return None


def forward_flops(model, size: int) -> int:
    """Floating-point operations of one position's forward pass through ``model`` (a TabulaNet, every head its
    ``train_outputs`` runs, or a KataGoNet, whose attention products are left out) on a size x size board: 2 per
    multiply-add of each convolution and linear layer, from
    their shapes. Batch norms, activations, additions and pooling (a few per cent) are left out, as MFU counts do.
    A training step costs about 3 times this per sample (the backward pass twice the forward)."""
    import torch

    total = [0]

    def conv(module, _inputs, output):
        kernel = module.in_channels // module.groups * module.kernel_size[0] * module.kernel_size[1]
        total[0] += 2 * kernel * output[0].numel()  # output[0]: the first position's [C_out, H, W]

    def linear(module, inputs, _output):
        total[0] += 2 * module.in_features * module.out_features * (inputs[0][0].numel() // module.in_features)

    def matmul(module, inputs, _output):  # a weight [in, out] applied as x @ weight (KataGo's linear layers)
        rows, columns = module.weight.shape
        total[0] += 2 * rows * columns * (inputs[0][0].numel() // rows)

    hooks = [m.register_forward_hook(conv) for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    hooks += [m.register_forward_hook(matmul) for m in model.modules() if type(m).__name__ == "MatMul"]
    hooks += [m.register_forward_hook(linear) for m in model.modules() if isinstance(m, torch.nn.Linear)]
    katago = not hasattr(model, "spec")  # a KataGo network (katago_network.KataGoNet): all its outputs run
    # the model's own planes: 18, or 19 with the komi input (the shipped default); KataGo's 41
    planes = torch.zeros((1, model.initial_conv.conv.in_channels + model.initial_matmul.weight.shape[0] if katago
                          else model.spec.encoding.planes, size, size))
    planes[:, 0 if katago else (model.spec.encoding.size_planes or (16,))[0]] = 1.0  # a board, black to move
    try:
        with torch.no_grad():
            (model if katago else model.train_outputs)(planes)
    finally:
        for hook in hooks:
            hook.remove()
    return total[0]


def load_torch(path: str):
    """The torch module of an fp32 ONNX file: Tabula's network, or a KataGo network converted to ONNX."""
    from tabula.engine.net.evaluator import OnnxEvaluator

    if OnnxEvaluator(path, symmetry="identity", threads=1, provider="cpu", log=None).katago_network:
        from tabula.engine.net import katago_network

        return katago_network.load_onnx(path)
    from tabula.engine.net import network

    return network.load_onnx(path)


def append_results(path: str | None, records: list[dict]) -> None:
    """Append ``records`` to ``path`` as JSON lines at once, so that what was measured stays if the run is cut."""
    if not path:
        return
    with open(path, "a") as handle:
        handle.writelines(json.dumps(record, sort_keys=True) + "\n" for record in records)


def gpu_runner(path: str, fp32: str, max_batch: int):
    """The raw ``run`` of one GPU path: onnxruntime's CUDA or TensorRT provider, or the torch backend."""
    if path.startswith("onnx-"):
        return OnnxEvaluator(fp32, symmetry="identity", provider=path[5:], max_batch=max_batch, log=None).run
    from tabula.engine.net.torch_backend import TorchRunner

    precision = path.split("-")[2]
    return TorchRunner(fp32, device="cuda", precision=precision, cuda_graphs=not path.endswith("-eager"),
                       max_batch=max_batch).run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tabula bench net", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("weights", help="Tabula fp32 .onnx, or Leela Zero .txt/.gz")
    parser.add_argument("--batches", default="1,8,16,32")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--seconds", type=float, default=0.6, help="time per measurement, over all rounds")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the best one counts")
    parser.add_argument("--int8", help="an int8 ONNX file of the same net (default: quantize now)")
    parser.add_argument("--paths", default="onnx-fp32,onnx-int8,torch-fp32,torch-bf16",
                        help="comma-separated: onnx-fp32, onnx-int8, torch-fp32, torch-bf16 (CPU); onnx-cuda, "
                             "onnx-tensorrt, torch-cuda-fp16, torch-cuda-bf16, torch-cuda-fp32, each torch-cuda one "
                             "also with -eager (no CUDA graphs) (GPU)")
    parser.add_argument("--accuracy-positions", type=int, default=512)
    parser.add_argument("--games", default="", metavar="GLOB",
                        help="SGF archives (a glob) whose 19x19 games calibrate int8 and are measured (default: none, "
                             "random games)")
    parser.add_argument("--size", type=int, default=0,
                        help="board size measured (default: the largest the network plays up to 19, or the "
                             "smallest above)")
    parser.add_argument("--results", help="append each path's figures to this file as JSON lines")
    return parser


def throughput(run, planes: np.ndarray, seconds: float, warm_up: bool = True) -> float:
    """Positions per second of ``run(planes)``: timed calls until ``seconds`` have passed (at least one)."""
    if warm_up:
        run(planes)
    calls = 0
    start = time.perf_counter()
    while True:
        run(planes)
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return calls * len(planes) / elapsed


def accuracy(states, reference: tuple[np.ndarray, np.ndarray],
             other: tuple[np.ndarray, np.ndarray]) -> tuple[float, float, float]:
    """Cost of a faster path: (top-1 agreement of the masked policies, mean |value difference|, mean total variation
    distance of the policies), from raw (logits [B, N*N+1], value [B]) outputs on ``states``."""
    masks = np.stack([legal_mask(s) for s in states])
    a, b = masked_softmax(reference[0], masks), masked_softmax(other[0], masks)
    agree = float(np.mean(a.argmax(axis=1) == b.argmax(axis=1)))
    value_diff = float(np.mean(np.abs(reference[1] - other[1])))
    return agree, value_diff, float(np.mean(0.5 * np.abs(a - b).sum(axis=1)))


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    paths = args.paths.split(",")
    unknown = [repr(p) for p in paths if p not in CPU_PATHS + GPU_PATHS]
    if unknown:
        parser.error(f"unknown path {', '.join(unknown)}; known: {', '.join(CPU_PATHS + GPU_PATHS)}")
    from tabula.tools.learn.export import calibration_planes, calibration_size, positions, quantize_int8

    batches = [int(b) for b in args.batches.split(",")]
    thread_counts = [int(t) for t in args.threads.split(",")]
    with tempfile.TemporaryDirectory() as scratch:
        fp32 = args.weights
        try:
            if not fp32.endswith(".onnx"):
                from tabula.engine.net import network
                from tabula.engine.net.leelaz import read_leelaz

                fp32 = os.path.join(scratch, "fp32.onnx")
                network.export_onnx(network.from_leelaz(read_leelaz(args.weights)), fp32, "bench", check=False)
            probe = OnnxEvaluator(fp32, symmetry="identity", threads=1, provider="cpu", log=None)
        except OSError as error:
            raise SystemExit(f"tabula bench net: {args.weights}: {error.strerror or error}") from None
        except ValueError as error:  # a file that is not a network (the message names it)
            raise SystemExit(f"tabula bench net: {error}") from None
        size = args.size or calibration_size(list(probe.board_sizes))
        if size not in probe.board_sizes:
            raise SystemExit(f"tabula bench net: {args.weights} does not play {size}x{size}")
        print(f"# {args.weights}: {probe.metadata.get('architecture', '?')}, {size}x{size}", flush=True)
        int8 = args.int8
        if "onnx-int8" in paths and int8 is None:
            int8 = os.path.join(scratch, "int8.onnx")
            calibrated = calibration_size(list(probe.board_sizes))
            quantize_int8(fp32, int8, {calibrated: calibration_planes(calibrated, 256, seed=1, games=args.games,
                                                                      encoding=probe.encoding.name)})
        # Measured positions: real games of --games where there are any (19×19), else random games; games after
        # those used for calibration.
        states = positions(size, max(batches + [args.accuracy_positions]), seed=12345, games=args.games,
                           skip_games=500)
        # the network's own input planes (the komi plane too, for the shipped default)
        encode_batch = functools.partial(probe.encoding.encode_batch, symmetries=None)
        planes = encode_batch(states[: max(batches)])

        model = None
        if any(p.startswith("torch") and not p.startswith("torch-cuda") for p in paths):
            import torch

            from tabula.engine.net import network

            model = load_torch(fp32)
        flops = None  # per position, forward
        try:
            from tabula.engine.net import network

            flops = forward_flops(model or load_torch(fp32), size)
            print(f"# {flops / 1e9:.3f} GFLOP per position (convolutions and linear layers)", flush=True)
        except (ImportError, ValueError):  # no torch or onnx here, or a file torch cannot rebuild: positions/s only
            pass
        runners = {}
        for threads in thread_counts:
            for path in paths:
                if path in GPU_PATHS:
                    if threads == thread_counts[0]:  # the CPU threads do not matter to a GPU path
                        try:
                            runners[(path, threads)] = gpu_runner(path, fp32, max(batches))
                        except Exception as error:  # noqa: BLE001 - one path missing here must not stop the rest
                            # (a GPU machine with the CPU build of onnxruntime has no onnx-cuda, say)
                            print(f"# {path}: not available here: {first_line(error)}", flush=True)
                    continue
                if path.startswith("onnx"):
                    runners[(path, threads)] = OnnxEvaluator(fp32 if path == "onnx-fp32" else int8,
                                                             symmetry="identity", threads=threads, provider="cpu",
                                                             log=None, check_int8=False).run
                else:
                    dtype = torch.bfloat16 if path == "torch-bf16" else None

                    def run(x, dtype=dtype, threads=threads):
                        torch.set_num_threads(threads)
                        with torch.inference_mode(), torch.autocast("cpu", dtype=dtype or torch.float32,
                                                                    enabled=dtype is not None):
                            return model(torch.from_numpy(x))[:2]
                    runners[(path, threads)] = run
        # Paths take turns within each round and the best round counts, so that a burst of load on this shared
        # machine does not land on one path only.
        results = {key: [0.0] * len(batches) for key in runners}  # 0: not measured (a GPU path that failed)
        for round_ in range(args.rounds):
            for threads in thread_counts:
                for j, b in enumerate(batches):
                    for path in paths:
                        if (path, threads) not in runners:
                            continue
                        try:
                            speed = throughput(runners[(path, threads)], planes[:b], args.seconds / args.rounds,
                                               warm_up=round_ == 0)
                        except Exception as error:  # noqa: BLE001 - out of GPU memory at a large batch, say
                            if path not in GPU_PATHS:
                                raise
                            print(f"# {path}: failed at batch {b}, dropped: {first_line(error)}", flush=True)
                            del runners[(path, threads)]
                            continue
                        results[(path, threads)][j] = max(results[(path, threads)][j], speed)
            print(f"# round {round_ + 1}/{args.rounds} done", file=sys.stderr, flush=True)

        print("\npositions/s  " + " ".join(f"{'b=' + str(b):>8}" for b in batches))
        for (path, threads), values in results.items():
            print(f"{path:<11} t={threads}  " + " ".join(f"{v:8.0f}" for v in values))
        if flops:
            print(f"\nTFLOP/s at each path's best batch ({flops / 1e9:.3f} GFLOP per position):")
            for (path, threads), values in results.items():
                best = max(range(len(batches)), key=lambda j: values[j])
                print(f"{path:<11} t={threads}  {values[best] * flops / 1e12:8.2f} at b={batches[best]}")
        append_results(args.results, [
            {"what": "net", "weights": args.weights, "network": probe.describe(), "size": size, "path": path,
             "threads": threads,
             "positions_per_s": {str(b): round(v, 1) for b, v in zip(batches, values) if v > 0},
             "best_positions_per_s": round(max(values), 1),
             "best_batch": batches[max(range(len(batches)), key=lambda j: values[j])],
             "gflop_per_position": flops / 1e9 if flops else None}
            for (path, threads), values in results.items() if max(values) > 0])
        if ("onnx-fp32", thread_counts[0]) in results:
            base = results[("onnx-fp32", thread_counts[0])]
            print(f"\nratio to onnx-fp32 t={thread_counts[0]} at the same batch size:")
            for (path, threads), values in results.items():
                print(f"{path:<11} t={threads}  " + " ".join(f"{v / b:8.2f}" for v, b in zip(values, base)))
        sample = states[: args.accuracy_positions]
        if not sample:  # --accuracy-positions 0: speed only
            return 0
        sample_planes = encode_batch(sample)
        reference = OnnxEvaluator(fp32, symmetry="identity", threads=2, provider="cpu", log=None).run(sample_planes)
        costs = {}
        if int8 is not None:
            costs["onnx-int8"] = OnnxEvaluator(int8, symmetry="identity", threads=2, provider="cpu",
                                               log=None, check_int8=False).run(sample_planes)
        if model is not None and "torch-bf16" in paths:
            with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
                policy, value = model(torch.from_numpy(sample_planes))[:2]
            costs["torch-bf16"] = (policy.float().numpy(), value.float().numpy())
        for (path, threads), run in runners.items():
            if path in GPU_PATHS:
                try:
                    costs[path] = run(sample_planes)
                except Exception as error:  # noqa: BLE001 - its speeds above stand; its accuracy is unknown
                    print(f"# {path}: failed on the accuracy sample: {first_line(error)}", flush=True)
        for path, outputs in costs.items():
            agree, value_diff, tv = accuracy(sample, reference, outputs)
            print(f"{path} vs onnx-fp32 on {len(sample)} positions: top-1 agreement {agree:.1%}, "
                  f"mean |value diff| {value_diff:.4f}, mean policy total variation {tv:.4f}")
            append_results(args.results, [{"what": "net-accuracy", "weights": args.weights, "path": path,
                                           "positions": len(sample), "top1_agreement": agree,
                                           "mean_value_diff": value_diff, "mean_policy_tv": tv}])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
