"""A larger student started from a trained smaller one that computes the same function: more blocks, more filters,
or both, so that a network grown from the kept student loses none of what it learned and trains on from there
(Net2Net, Chen, Goodfellow and Shlens 2016: Net2WiderNet and Net2DeeperNet).

Wider (``filters`` f -> F): every new channel copies an old one, chosen in turn (``j -> j mod f``), the trunk's and
each block's inner channels alike. A layer that writes channels takes the copied channel's weights and batch-norm
parameters (running statistics included), so every copy carries its original's activation; a layer that reads them
splits each original's incoming weights among its copies, so their sum is what it read before. The split is drawn at
random (shares that sum to 1, near equal), not equal: copies with equal outgoing weights would get equal gradients and
stay copies for ever, and unequal ones make them drift apart as they train. Batch norm in training mode keeps this
too: a copy's batch statistics are its original's.

Deeper (``blocks`` b -> B): the new blocks go in evenly among the old ones, each the identity at first: a residual
block adds ``second(relu(first(x)))`` to a trunk that is already rectified, so with its second batch norm's scale and
shift at zero it adds nothing. Its convolutions start random, so the gradient reaches the zero scale at once.

The heads and the input convolution keep their widths (the pooled head's ``head_channels``, ``value_hidden``); only
their trunk side grows. Exact up to float rounding: a test checks the outputs.
"""
from __future__ import annotations

from dataclasses import replace

import torch

from tabula.engine.net.network import NetSpec, TabulaNet

# How unequal the random split of a copied channel's outgoing weights is: shares 1/n * (1 + U(-SPREAD, SPREAD)),
# normalised to sum to 1.
SPREAD = 0.1


def can_grow(source: NetSpec, target: NetSpec) -> bool:
    """Whether ``grown`` maps a network of ``source`` onto ``target``: the same everything but at least as many
    blocks and filters, and more of one of them."""
    same_rest = replace(source, blocks=target.blocks, filters=target.filters).same_weights(target)
    larger = target.blocks >= source.blocks and target.filters >= source.filters
    return same_rest and larger and (target.blocks, target.filters) != (source.blocks, source.filters)


def _channel_map(old: int, new: int) -> torch.Tensor:
    """long [new]: the old channel each new channel copies (the old ones themselves first)."""
    return torch.arange(new) % old


def _split(mapping: torch.Tensor, old: int, generator: torch.Generator) -> torch.Tensor:
    """float [new]: each new channel's share of its original's outgoing weights; the shares of one original's copies
    sum to 1."""
    shares = 1.0 + (torch.rand(len(mapping), generator=generator, dtype=torch.float64) * 2.0 - 1.0) * SPREAD
    totals = torch.zeros(old, dtype=torch.float64).index_add_(0, mapping, shares)
    return (shares / totals[mapping]).float()


def _write(module_state: dict[str, torch.Tensor], prefix: str, mapping: torch.Tensor) -> None:
    """A ConvBN's output channels, widened: the convolution's rows and the batch norm's parameters and statistics
    of each copied channel."""
    module_state[f"{prefix}.conv.weight"] = module_state[f"{prefix}.conv.weight"][mapping]
    for name in ("weight", "bias", "running_mean", "running_var"):
        module_state[f"{prefix}.bn.{name}"] = module_state[f"{prefix}.bn.{name}"][mapping]


def _read(weight: torch.Tensor, mapping: torch.Tensor, shares: torch.Tensor) -> torch.Tensor:
    """A convolution's input channels (dim 1), widened: each copy reads its original's weights times its share."""
    return weight[:, mapping] * shares.view(1, -1, *([1] * (weight.dim() - 2)))


def grown(source: TabulaNet, target: NetSpec, seed: int = 0) -> TabulaNet:
    """A network of ``target`` computing ``source``'s outputs (see the module); ValueError where ``can_grow`` does
    not hold."""
    spec = source.spec
    if not can_grow(spec, target):
        raise ValueError(f"cannot grow a {spec.blocks}x{spec.filters} network of {spec.input_encoding} into a "
                         f"{target.blocks}x{target.filters} one of {target.input_encoding} (the same network, with "
                         "at least as many blocks and filters, is needed)")
    generator = torch.Generator().manual_seed(seed)
    old, new = spec.filters, target.filters
    mapping = _channel_map(old, new)
    have = {name: value.detach().clone() for name, value in source.state_dict().items()}

    def shares() -> torch.Tensor:  # a fresh random split for each layer that reads widened channels
        return _split(mapping, old, generator)

    state: dict[str, torch.Tensor] = {}
    # the input convolution writes the trunk
    state.update({k: v for k, v in have.items() if k.startswith(("input.", "input_komi."))})
    _write(state, "input", mapping)
    if "input_komi.weight" in state:  # the komi input's convolution adds to the trunk too (leelaz-18+komi)
        state["input_komi.weight"] = state["input_komi.weight"][mapping]
    # the old blocks, widened: the first convolution reads the trunk and writes the inner channels, the second
    # reads those and writes the trunk
    old_blocks = []
    for index in range(spec.blocks):
        block = {k.split(".", 2)[2]: v for k, v in have.items() if k.startswith(f"tower.{index}.")}
        block["first.conv.weight"] = _read(block["first.conv.weight"], mapping, shares())
        _write(block, "first", mapping)
        block["second.conv.weight"] = _read(block["second.conv.weight"], mapping, shares())
        _write(block, "second", mapping)
        old_blocks.append(block)
    # the heads read the trunk
    for name, value in have.items():
        if name.startswith("head."):
            state[name] = value
    for prefix in ("head.policy_conv", "head.value_conv"):
        state[f"{prefix}.conv.weight"] = _read(state[f"{prefix}.conv.weight"], mapping, shares())

    model = TabulaNet(target)
    fresh = model.state_dict()
    # the new blocks' places in the grown tower, evenly spread (2 of 4: the second and the fourth)
    extra = target.blocks - spec.blocks
    places = {int((k + 0.5) * target.blocks / extra) for k in range(extra)}
    remaining = iter(old_blocks)
    for index in range(target.blocks):
        prefix = f"tower.{index}."
        block = None if index in places else next(remaining)
        if block is None:  # a new block: random convolutions (the fresh model's), zero second batch norm
            state[prefix + "second.bn.weight"] = torch.zeros_like(fresh[prefix + "second.bn.weight"])
            state[prefix + "second.bn.bias"] = torch.zeros_like(fresh[prefix + "second.bn.bias"])
            for name, value in fresh.items():
                if name.startswith(prefix) and name not in state:
                    state[name] = value
        else:
            state.update({prefix + name: value for name, value in block.items()})
    for name, value in fresh.items():  # anything the source has no counterpart for (batch counters) stays fresh
        state.setdefault(name, value)
    model.load_state_dict(state)
    return model


__all__ = ["SPREAD", "can_grow", "grown"]
