"""A training checkpoint kept in git at half the bytes.

Git keeps the live run's checkpoint (``tabula train``'s or ``tabula distill``'s), and the lent GPU machine receives
the repository within 64 MiB; an 8x96 student's checkpoint (weights, their average and Adam's two moments) is 23 MB
in float32. ``halve`` writes it with every float32 tensor in 16 bits. The run keeps its exact checkpoint where it
runs; the halved copy is what is committed and what a new machine resumes from.

    python3 -m tabula.tools.learn.halve runs/distill/RUN/checkpoint.pt weights/training/RUN/checkpoint.pt

Layer: a tool (torch).
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

from tabula.tools.learn import train as trainer


def halved(state: dict) -> dict:
    """A checkpoint (of ``tabula train`` or ``tabula distill``) with its float32 tensors in 16 bits, to keep in git at
    half the bytes: weights, their average and batch-norm statistics in float16 (rounding of about 5e-4 of a weight,
    well below one optimizer step), the optimizer's moments in bfloat16, whose range keeps Adam's squared gradients
    that float16 would flush to zero. A run resumed from it reads them back into float32 (torch casts weights and
    optimizer state to the parameters' type; ``WeightAverage.restore`` the average), so it goes on from the rounded
    weights rather than bit for bit."""
    return {k: _mapped(v, _moment_halved if k == "optimizer" else _weight_halved) for k, v in state.items()}


def _mapped(value, leaf):
    """``value`` (a checkpoint's nested dicts and lists) with ``leaf`` applied to everything else in it."""
    if isinstance(value, dict):
        return {k: _mapped(v, leaf) for k, v in value.items()}
    if isinstance(value, list):
        return [_mapped(v, leaf) for v in value]
    return leaf(value)


def _weight_halved(value):
    return value.to(torch.float16) if isinstance(value, torch.Tensor) and value.dtype == torch.float32 else value


def _moment_halved(value):
    if isinstance(value, torch.Tensor) and value.dtype == torch.float32 and value.dim() > 0:
        return value.to(torch.bfloat16)  # a 0-d tensor is Adam's step count: kept exact
    return value


class HalveError(ValueError):
    """A file that is not a training checkpoint, with the reason."""


def halve(source: str, target: str) -> tuple[int, int]:
    """``source`` halved into ``target`` (atomically; its folder made): (bytes before, bytes after). HalveError
    where ``source`` is not a checkpoint of ``tabula train`` or ``tabula distill``; ``target`` is then untouched."""
    try:
        state = trainer.load_training_checkpoint(source)
    except OSError:
        raise
    except Exception as error:  # torch raises many kinds for a file that is not one of its own
        raise HalveError(f"not a training checkpoint (torch cannot read it: {type(error).__name__})") from None
    if not isinstance(state, dict) or "state_dict" not in state:
        raise HalveError("not a training checkpoint (no state_dict)")
    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
    trainer.atomic_torch_save(halved(state), target)
    return os.path.getsize(source), os.path.getsize(target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tabula.tools.learn.halve",
                                     description="Write a training checkpoint with its float32 tensors in 16 bits.")
    parser.add_argument("source", help="a checkpoint.pt of tabula train or tabula distill")
    parser.add_argument("target", help="where the halved checkpoint goes")
    args = parser.parse_args(argv)
    try:
        before, after = halve(args.source, args.target)
    except (OSError, HalveError) as error:
        print(f"halve: {args.source}: {error}", file=sys.stderr)
        return 1
    print(f"wrote {args.target}: {after:,} bytes (from {before:,})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
