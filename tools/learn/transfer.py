"""A student of KataGo's inputs (``katago-v7``, ``tabula-v2``) started from a trained network of Leela Zero's
(``leelaz-18``, ``leelaz-18+komi``) with the same trunk and pooled head: what it learned from millions of records
carries over, and distillation teaches from there rather than from random weights.

Only the input convolution changes meaning; the trunk and the heads copy as they are:
- own and opponent stones take the sum of the 8 history planes' weights of each colour (in the middle of a game the
  stones of the last 8 positions are nearly all the present ones);
- ``on_board`` takes the mean of the two side-to-move planes' weights (one of them is all ones on the board, the
  other all zeros; KataGo's inputs tell the side to move only through the komi's sign);
- the side to move's komi / 20, a global plane of ``katago-v7``, takes the komi plane's convolution (the same value:
  ``features.KOMI_SCALE`` is 20), divided by the batch norm's scale, which the source adds it after;
- every other plane (liberties, ko, last moves, ladders, areas, rules, the reading features) starts at zero weight.

What the target has no place for is dropped: the value's and score's komi terms of ``PooledHead`` and its small-board
terms (zero on 19x19). So the transferred network is near its source on 19x19 at komi 7.5, and further off elsewhere
until it trains (docs/TRAINING.md measures how near).
"""
from __future__ import annotations

import torch

from tabula.engine.net import features
from tabula.engine.net.encodings import KATAGO_V7_NAMES
from tabula.engine.net.network import POOLED, NetSpec, TabulaNet

SOURCES = (features.INPUT_ENCODING, features.KOMI_INPUT_ENCODING)
HISTORY = 8  # leelaz-18's positions of each colour: planes 0-7 the side to move's, 8-15 the opponent's


def can_transfer(source: NetSpec, target: NetSpec) -> bool:
    """Whether ``transferred`` maps a network of ``source`` onto ``target``: a leelaz encoding onto one that starts
    with katago-v7's planes, the same trunk and pooled head."""
    names = target.encoding.plane_names
    return (source.input_encoding in SOURCES and source.head == POOLED and target.head == POOLED
            and tuple(names[:len(KATAGO_V7_NAMES)]) == KATAGO_V7_NAMES
            and (source.blocks, source.filters, source.head_channels, source.value_hidden)
            == (target.blocks, target.filters, target.head_channels, target.value_hidden))


def transferred(source: TabulaNet, target: NetSpec) -> TabulaNet:
    """A network of ``target`` whose weights are ``source``'s, mapped as the module says; ValueError where
    ``can_transfer`` does not hold."""
    if not can_transfer(source.spec, target):
        raise ValueError(f"cannot start a {target.blocks}x{target.filters} network of {target.input_encoding} from "
                         f"a {source.spec.blocks}x{source.spec.filters} {source.spec.head} network of "
                         f"{source.spec.input_encoding} (a pooled leelaz-18 or leelaz-18+komi network of the same "
                         "trunk and head widths is needed)")
    model = TabulaNet(target)
    have = source.state_dict()
    state = model.state_dict()
    for name, value in state.items():
        if name != "input.conv.weight" and name in have and have[name].shape == value.shape:
            state[name] = have[name].clone()
    old = have["input.conv.weight"]  # [filters, 18, 3, 3]
    new = torch.zeros_like(state["input.conv.weight"])
    plane = {name: i for i, name in enumerate(target.encoding.plane_names)}
    new[:, plane["own_stones"]] = old[:, :HISTORY].sum(dim=1)
    new[:, plane["opp_stones"]] = old[:, HISTORY:2 * HISTORY].sum(dim=1)
    new[:, plane["on_board"]] = old[:, 2 * HISTORY:2 * HISTORY + 2].mean(dim=1)
    if "input_komi.weight" in have:
        # the source adds the komi's convolution after the input's batch norm; the target's goes through it
        scale = have["input.bn.weight"] / torch.sqrt(have["input.bn.running_var"] + source.input.bn.eps)
        new[:, plane["komi"]] = have["input_komi.weight"][:, 0] / scale[:, None, None]
    state["input.conv.weight"] = new
    model.load_state_dict(state)
    return model


__all__ = ["SOURCES", "can_transfer", "transferred"]
