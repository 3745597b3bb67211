"""KataGo's networks as torch modules, built from a parsed model file (``katago_model``), and their export to ONNX
with Tabula's interface (the ``katago-v7`` encoding: one input ``planes``).

The computation is the one KataGo's CPU backend (Eigen) does: pre-activation residual blocks (batch norm, activation,
convolution), global pooling blocks (mean, mean scaled by the board's size, max), nested bottleneck blocks, and the
transformer blocks (RMS norm, attention with rotary position embeddings, SwiGLU feed-forward); the trunk's final norm
(batch norm or RMS norm); the policy head with its pass output as each model version has it; the value head (win /
loss / no result, score mean and stdev, lead, ownership); and the scalings KataGo's evaluator applies per model
version to the raw outputs. Masks: KataGo masks every normalised activation with the on-board plane (input plane 0)
so that a smaller board can sit in a larger input; with ``use_mask`` False (what the ONNX files use: Tabula's input
is exactly the board) the masks are left out, which changes nothing where plane 0 is all ones.

Outputs, all from the side to move's view: policy logits [B, N*N+1] (pass last), value = P(win) - P(loss) [B], score
= the lead in points [B], ownership [B, N*N] in [-1, 1], wdl = (win, loss, no result) [B, 3], score_mean [B],
score_stdev [B].

Layer: net; imports torch (training and export only, like ``network``).
"""
from __future__ import annotations

import json
import math
import os
import warnings
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from tabula.engine.net import katago_model
from tabula.engine.net.netfile import METADATA_FORMAT_VERSION

INPUT_ENCODING = "katago-v7"
NUM_SPATIAL = katago_model.NUM_SPATIAL_FEATURES
NUM_GLOBAL = katago_model.NUM_GLOBAL_FEATURES
NUM_PLANES = NUM_SPATIAL + NUM_GLOBAL
# The last, policy_optimistic, is KataGo's optimistic policy channel alone (its policyOptimism 1.0, which KataGo's
# search uses below the root; SearchConfig.optimistic_policy); "policy" mixes it in at the file's policy_optimism
OUTPUTS = ("policy", "value", "score", "ownership", "wdl", "score_mean", "score_stdev", "policy_optimistic")
BOARD_SIZES = tuple(range(2, 20))  # what KataGo's networks are trained on (and KataGo plays by default)
# Global input features read by the postprocessing: a ko rule other than simple, territory scoring
_GLOBAL_KO_NOT_SIMPLE = 6
DEFAULT_POLICY_OPTIMISM = katago_model.DEFAULT_POLICY_OPTIMISM
_GLOBAL_TERRITORY = 9


class KataGoNetworkError(ValueError):
    """A parsed KataGo model that Tabula cannot run (a part KataGo's CPU backend does not run either)."""


def _parameter(array: np.ndarray) -> nn.Parameter:
    return nn.Parameter(torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32)), requires_grad=False)


def _activation(layer: dict):
    kind = layer["activation"]
    if kind == "ACTIVATION_IDENTITY":
        return lambda x: x
    if kind == "ACTIVATION_RELU":
        return F.relu
    if kind == "ACTIVATION_MISH":
        return F.mish
    if kind == "ACTIVATION_SILU":
        return F.silu
    raise KataGoNetworkError(f"{layer['name']}: unknown activation {kind}")


class Conv(nn.Module):
    def __init__(self, layer: dict):
        super().__init__()
        ky, kx, dy, dx = layer["ky"], layer["kx"], layer["dilation_y"], layer["dilation_x"]
        self.conv = nn.Conv2d(layer["in_channels"], layer["out_channels"], (ky, kx),
                              padding=(ky // 2 * dy, kx // 2 * dx), dilation=(dy, dx), bias=False)
        self.conv.weight = _parameter(np.transpose(layer["weights"], (3, 2, 0, 1)))  # [y, x, in, out] -> torch's

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


class MatMul(nn.Module):
    def __init__(self, layer: dict):
        super().__init__()
        self.weight = _parameter(layer["weights"])  # [in, out]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight


class NormAct(nn.Module):
    """A batch norm (folded into a scale and a bias, as KataGo folds it), its activation, then the board's mask."""

    def __init__(self, bn: dict, act: dict, use_mask: bool):
        super().__init__()
        channels = bn["channels"]
        scale = bn.get("scale", np.ones(channels, np.float32))
        bias = bn.get("bias", np.zeros(channels, np.float32))
        merged = (scale / np.sqrt(bn["variance"] + np.float32(bn["epsilon"]))).astype(np.float32)
        self.scale = _parameter(merged.reshape(1, -1, 1, 1))
        self.bias = _parameter((bias - merged * bn["mean"]).astype(np.float32).reshape(1, -1, 1, 1))
        self.act = _activation(act)
        self.use_mask = use_mask

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.act(x * self.scale + self.bias)
        return x * mask if self.use_mask else x


def global_pool(x: torch.Tensor, mask: torch.Tensor, mask_sum: torch.Tensor, use_mask: bool) -> torch.Tensor:
    """[B, 3C]: the mean, the mean scaled by (sqrt(board area) - 14) / 10, and the max over the board."""
    mean = x.sum(dim=(2, 3)) / mask_sum
    scaled = mean * ((mask_sum.sqrt() - 14.0) * 0.1)
    peak = (x + (mask - 1.0)).amax(dim=(2, 3)) if use_mask else x.amax(dim=(2, 3))
    return torch.cat([mean, scaled, peak], dim=1)


def value_pool(x: torch.Tensor, mask_sum: torch.Tensor) -> torch.Tensor:
    """[B, 3C]: the mean and two board-size terms of it (the value head's pooling)."""
    mean = x.sum(dim=(2, 3)) / mask_sum
    offset = mask_sum.sqrt() - 14.0
    return torch.cat([mean, mean * (offset * 0.1), mean * (offset * offset * 0.01 - 0.1)], dim=1)


class OrdinaryBlock(nn.Module):
    def __init__(self, block: dict, use_mask: bool):
        super().__init__()
        self.pre = NormAct(block["pre_bn"], block["pre_activation"], use_mask)
        self.regular = Conv(block["regular_conv"])
        self.mid = NormAct(block["mid_bn"], block["mid_activation"], use_mask)
        self.final = Conv(block["final_conv"])

    def forward(self, x, mask, mask_sum):
        return x + self.final(self.mid(self.regular(self.pre(x, mask)), mask))


class GlobalPoolingBlock(nn.Module):
    def __init__(self, block: dict, use_mask: bool):
        super().__init__()
        self.use_mask = use_mask
        self.pre = NormAct(block["pre_bn"], block["pre_activation"], use_mask)
        self.regular = Conv(block["regular_conv"])
        self.gpool = Conv(block["gpool_conv"])
        self.gpool_norm = NormAct(block["gpool_bn"], block["gpool_activation"], use_mask)
        self.gpool_to_bias = MatMul(block["gpool_to_bias"])
        self.mid = NormAct(block["mid_bn"], block["mid_activation"], use_mask)
        self.final = Conv(block["final_conv"])

    def forward(self, x, mask, mask_sum):
        a = self.pre(x, mask)
        pooled = global_pool(self.gpool_norm(self.gpool(a), mask), mask, mask_sum, self.use_mask)
        regular = self.regular(a) + self.gpool_to_bias(pooled)[:, :, None, None]
        return x + self.final(self.mid(regular, mask))


class NestedBottleneckBlock(nn.Module):
    def __init__(self, block: dict, use_mask: bool):
        super().__init__()
        self.pre = NormAct(block["pre_bn"], block["pre_activation"], use_mask)
        self.pre_conv = Conv(block["pre_conv"])
        self.blocks = nn.ModuleList(make_blocks(block["blocks"], use_mask))
        self.post = NormAct(block["post_bn"], block["post_activation"], use_mask)
        self.post_conv = Conv(block["post_conv"])

    def forward(self, x, mask, mask_sum):
        h = self.pre_conv(self.pre(x, mask))
        for block in self.blocks:
            h = block(h, mask, mask_sum)
        return x + self.post_conv(self.post(h, mask))


def rms_norm(x: torch.Tensor, weight: torch.Tensor, epsilon: float) -> torch.Tensor:
    """x [B, C, H, W] normalised over its channels at each point, times ``weight`` [1, C, 1, 1]. The sum of squares
    is taken in float32 (a no-op on float32 input), where fp16 would overflow."""
    wide = x.float()
    return x * torch.rsqrt((wide * wide).mean(dim=1, keepdim=True) + epsilon).to(x.dtype) * weight


class AttentionBlock(nn.Module):
    """Multi-head attention over the board's points (grouped key/value heads allowed), with rotary position
    embeddings of the points' x and y (learnt frequencies, or fixed ones from a theta)."""

    def __init__(self, block: dict, use_mask: bool):
        super().__init__()
        self.use_mask = use_mask
        self.heads, self.kv_heads = block["num_heads"], block["num_kv_heads"]
        self.q_dim, self.v_dim = block["q_head_dim"], block["v_head_dim"]
        norm = block["pre_norm"]
        self.norm_weight = _parameter(norm["weight"].reshape(1, -1, 1, 1))
        self.epsilon = float(np.float32(norm["epsilon"]))
        self.q_proj, self.k_proj = MatMul(block["q_proj"]), MatMul(block["k_proj"])
        self.v_proj, self.out_proj = MatMul(block["v_proj"]), MatMul(block["out_proj"])
        self.use_rope = bool(block["use_rope"])
        self.learnable = bool(block["learnable_rope"])
        pairs = self.q_dim // 2
        if self.use_rope and self.learnable:
            self.rope_freqs = _parameter(block["rope_freqs"])  # [kv heads, pairs, (x, y)]
        elif self.use_rope:
            half = pairs // 2
            index = np.arange(pairs)
            exponent = (2 * np.where(index < half, index, index - half)).astype(np.float32) / np.float32(pairs)
            freq = (np.float32(1.0) / np.power(np.float32(block["rope_theta"]), exponent)).astype(np.float32)
            # [1, pairs, (x, y)]: the first half of the pairs turn with y, the second with x
            self.rope_freqs = _parameter(np.stack([np.where(index < half, 0.0, freq),
                                                   np.where(index < half, freq, 0.0)], axis=1)[None])

    def _rope(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """x [B, heads, S, dim] with each pair of channels (2p, 2p+1) turned by its angle."""
        shape = x.shape
        pairs = x.reshape(shape[0], shape[1], shape[2], -1, 2)
        x0, x1 = pairs[..., 0], pairs[..., 1]
        turned = torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1)
        return turned.reshape(shape)

    def forward(self, x, mask, mask_sum):
        batch, channels, height, width = x.shape
        xn = rms_norm(x, self.norm_weight, self.epsilon)
        if self.use_mask:
            xn = xn * mask
        seq = xn.flatten(2).transpose(1, 2)  # [B, S, C]
        q = self.q_proj(seq).reshape(batch, -1, self.heads, self.q_dim).transpose(1, 2)
        k = self.k_proj(seq).reshape(batch, -1, self.kv_heads, self.q_dim).transpose(1, 2)
        v = self.v_proj(seq).reshape(batch, -1, self.kv_heads, self.v_dim).transpose(1, 2)
        group = self.heads // self.kv_heads
        if self.use_rope:
            ys = torch.arange(height, dtype=torch.float32, device=x.device)
            xs = torch.arange(width, dtype=torch.float32, device=x.device)
            freqs = self.rope_freqs.float()  # [kv heads or 1, pairs, 2]; angles in float32 whatever the precision
            angle = (xs[None, None, None, :] * freqs[:, :, 0, None, None]
                     + ys[None, None, :, None] * freqs[:, :, 1, None, None])  # [h, pairs, H, W]
            angle = angle.flatten(2).transpose(1, 2)  # [h, S, pairs]
            cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
            k = self._rope(k, cos, sin)
            if group > 1 and self.learnable:
                cos, sin = cos.repeat_interleave(group, dim=0), sin.repeat_interleave(group, dim=0)
            q = self._rope(q, cos, sin)
        if group > 1:
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = (q @ k.transpose(2, 3)) * (1.0 / math.sqrt(self.q_dim))
        if self.use_mask:
            keys = mask.flatten(1)[:, None, None, :]
            scores = scores.masked_fill(keys == 0, float("-inf"))
        attention = torch.softmax(scores, dim=-1) @ v  # [B, heads, S, v_dim]
        out = self.out_proj(attention.transpose(1, 2).reshape(batch, -1, self.heads * self.v_dim))
        out = out.transpose(1, 2).reshape(batch, channels, height, width)
        return x + (out * mask if self.use_mask else out)


class FeedForwardBlock(nn.Module):
    """SwiGLU feed-forward over the channels of each point."""

    def __init__(self, block: dict, use_mask: bool):
        super().__init__()
        if not block["use_swiglu"]:
            raise KataGoNetworkError(f"{block['name']}: a feed-forward block without SwiGLU (KataGo's CPU backend "
                                     "does not run these either)")
        self.use_mask = use_mask
        norm = block["pre_norm"]
        self.norm_weight = _parameter(norm["weight"].reshape(1, -1, 1, 1))
        self.epsilon = float(np.float32(norm["epsilon"]))
        self.linear1, self.gate, self.linear2 = (MatMul(block[k]) for k in ("linear1", "linear_gate", "linear2"))

    def forward(self, x, mask, mask_sum):
        batch, channels, height, width = x.shape
        seq = rms_norm(x, self.norm_weight, self.epsilon).flatten(2).transpose(1, 2)
        out = self.linear2(F.silu(self.linear1(seq)) * self.gate(seq))
        out = out.transpose(1, 2).reshape(batch, channels, height, width)
        return x + (out * mask if self.use_mask else out)


_BLOCKS = {
    "ordinary_block": OrdinaryBlock,
    "gpool_block": GlobalPoolingBlock,
    "nested_bottleneck_block": NestedBottleneckBlock,
    "transformer_attention_block": AttentionBlock,
    "transformer_ffn_block": FeedForwardBlock,
}


def make_blocks(blocks: list, use_mask: bool) -> list[nn.Module]:
    return [_BLOCKS[block["kind"]](block, use_mask) for block in blocks]


class TrunkTipRMSNorm(nn.Module):
    """The trunk's final RMS norm (over the channels of each point, or ``spatial``: over the whole board), with a
    scale and a bias per channel, then its activation."""

    def __init__(self, norm: dict, act: dict, use_mask: bool):
        super().__init__()
        self.gamma = _parameter(norm["gamma"].reshape(1, -1, 1, 1))
        self.beta = _parameter(norm["beta"].reshape(1, -1, 1, 1))
        self.epsilon = float(np.float32(norm["epsilon"]))
        self.spatial = bool(norm["spatial"])
        self.act = _activation(act)
        self.use_mask = use_mask

    def forward(self, x, mask, mask_sum):
        wide = x.float()  # sums of squares in float32, where fp16 would overflow
        if self.spatial:
            squares = (wide * wide * mask.float()) if self.use_mask else wide * wide
            mean = squares.sum(dim=(1, 2, 3), keepdim=True) / (mask_sum.float()[:, :, None, None] * x.shape[1])
        else:
            mean = (wide * wide).mean(dim=1, keepdim=True)
        y = self.act(x * torch.rsqrt(mean + self.epsilon).to(x.dtype) * self.gamma + self.beta)
        return y * mask if self.use_mask else y


class Heads(nn.Module):
    """The policy head (with its pass output) and the value head (win / loss / no result, scores, ownership)."""

    def __init__(self, model: dict, use_mask: bool, policy_optimism: float):
        super().__init__()
        self.use_mask = use_mask
        self.policy_optimism = float(policy_optimism)
        policy, value = model["policy_head"], model["value_head"]
        self.p1_conv, self.g1_conv = Conv(policy["p1_conv"]), Conv(policy["g1_conv"])
        self.g1_norm = NormAct(policy["g1_bn"], policy["g1_activation"], use_mask)
        self.gpool_to_bias = MatMul(policy["gpool_to_bias"])
        self.p1_norm = NormAct(policy["p1_bn"], policy["p1_activation"], use_mask)
        self.p2_conv = Conv(policy["p2_conv"])
        self.gpool_to_pass = MatMul(policy["gpool_to_pass"])
        self.pass_hidden = model["version"] >= 15
        if self.pass_hidden:
            self.pass_bias = _parameter(policy["gpool_to_pass_bias"]["weights"])
            self.pass_act = _activation(policy["pass_activation"])
            self.gpool_to_pass2 = MatMul(policy["gpool_to_pass2"])
        self.v1_conv = Conv(value["v1_conv"])
        self.v1_norm = NormAct(value["v1_bn"], value["v1_activation"], use_mask)
        self.v2_mul, self.v2_bias = MatMul(value["v2_mul"]), _parameter(value["v2_bias"]["weights"])
        self.v2_act = _activation(value["v2_activation"])
        self.v3_mul, self.v3_bias = MatMul(value["v3_mul"]), _parameter(value["v3_bias"]["weights"])
        self.sv3_mul, self.sv3_bias = MatMul(value["sv3_mul"]), _parameter(value["sv3_bias"]["weights"])
        self.ownership_conv = Conv(value["ownership_conv"])

    def forward(self, x, mask, mask_sum) -> tuple[torch.Tensor, ...]:
        g = self.g1_norm(self.g1_conv(x), mask)
        pooled = global_pool(g, mask, mask_sum, self.use_mask)
        p1 = self.p1_norm(self.p1_conv(x) + self.gpool_to_bias(pooled)[:, :, None, None], mask)
        policy = self.p2_conv(p1).flatten(2)  # [B, channels, N*N]
        if self.pass_hidden:
            passing = self.gpool_to_pass2(self.pass_act(self.gpool_to_pass(pooled) + self.pass_bias))
        else:
            passing = self.gpool_to_pass(pooled)
        policy = torch.cat([policy, passing[:, :, None]], dim=2)
        # the second channel (model versions 12 and later) is the optimistic policy; KataGo mixes it in by the
        # optimism. A network without it has one policy, whatever the optimism.
        optimistic = policy[:, 1] if policy.shape[1] >= 2 else policy[:, 0]
        if self.policy_optimism and policy.shape[1] >= 2:
            policy = policy[:, 0] + (optimistic - policy[:, 0]) * self.policy_optimism
        else:
            policy = policy[:, 0]
        v1 = self.v1_norm(self.v1_conv(x), mask)
        v2 = self.v2_act(self.v2_mul(value_pool(v1, mask_sum)) + self.v2_bias)
        value = self.v3_mul(v2) + self.v3_bias
        scores = self.sv3_mul(v2) + self.sv3_bias
        ownership = self.ownership_conv(v1).flatten(1)
        return policy, value, scores, ownership, optimistic


class KataGoNet(nn.Module):
    """A KataGo network: planes float32 [B, 41, N, N] (``katago-v7``) -> the outputs named in ``OUTPUTS``.

    ``policy_optimism``: how much of the optimistic policy channel (model versions 12 and later) the policy mixes
    in, as KataGo's ``policyOptimism``. The network reads the planes as they come (the ONNX files do so: Tabula's
    rows run from the bottom, so its identity is KataGo's symmetry 1, which ``gtp.raw_nn`` maps for KataGo's
    symmetry indices). ``tabula_rows``: the network flips the rows to KataGo's order first and the points back
    after, so that Tabula's identity computes KataGo's symmetry 0."""

    def __init__(self, model: dict, use_mask: bool = False, policy_optimism: float = DEFAULT_POLICY_OPTIMISM,
                 tabula_rows: bool = False):
        super().__init__()
        self.tabula_rows = tabula_rows
        if model["meta_encoder_version"] > 0:
            raise KataGoNetworkError(f"{model['name']}: a network with an SGF metadata encoder (a human-style "
                                     "model) needs metadata inputs Tabula does not give")
        self.name = model["name"]
        self.version = model["version"]
        self.use_mask = use_mask
        trunk = model["trunk"]
        self.initial_conv = Conv(trunk["initial_conv"])
        self.initial_matmul = MatMul(trunk["initial_matmul"])
        self.blocks = nn.ModuleList(make_blocks(trunk["blocks"], use_mask))
        if trunk["norm_kind"] == 0:
            self.tip = NormAct(trunk["tip_bn"], trunk["tip_activation"], use_mask)
            self._tip_is_rms = False
        else:
            self.tip = TrunkTipRMSNorm(trunk["tip_rms_norm"], trunk["tip_activation"], use_mask)
            self._tip_is_rms = True
        self.head = Heads(model, use_mask, policy_optimism)  # "head": what int8 quantization keeps in fp32
        post = model["postprocess"]
        self.score_mean_multiplier = float(post["score_mean_multiplier"])
        self.score_stdev_multiplier = float(post["score_stdev_multiplier"])
        self.lead_multiplier = float(post["lead_multiplier"])

    def trunk(self, planes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        spatial, globals_ = planes[:, :NUM_SPATIAL], planes[:, NUM_SPATIAL:, 0, 0]
        mask = planes[:, :1]
        mask_sum = mask.sum(dim=(2, 3))  # [B, 1]: the board's points
        x = self.initial_conv(spatial) + self.initial_matmul(globals_)[:, :, None, None]
        for block in self.blocks:
            x = block(x, mask, mask_sum)
        x = self.tip(x, mask, mask_sum) if self._tip_is_rms else self.tip(x, mask)
        return x, mask, mask_sum

    def raw(self, planes: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """KataGo's raw outputs: policy logits [B, N*N+1] (the main policy channel, the optimistic one mixed in by
        ``policy_optimism``, pass last), value logits [B, 3], score values [B, 4 or 6], ownership before tanh
        [B, N*N], the optimistic policy's logits alone [B, N*N+1] (the main policy's where the network has one)."""
        return self.head(*self.trunk(planes))

    def forward(self, planes: torch.Tensor) -> tuple[torch.Tensor, ...]:
        height, width = planes.shape[2], planes.shape[3]
        if self.tabula_rows:
            # Tabula's row 0 is the bottom row, KataGo's the top: the network sees KataGo's orientation (its
            # symmetry 0), and its points go back to Tabula's order below
            planes = planes.flip(2)
        policy, value_logits, scores, ownership, optimistic = self.raw(planes)
        if self.tabula_rows:
            def rows_back(logits: torch.Tensor) -> torch.Tensor:
                points = logits[:, :-1].reshape(-1, height, width).flip(1).reshape(-1, height * width)
                return torch.cat([points, logits[:, -1:]], dim=1)

            policy, optimistic = rows_back(policy), rows_back(optimistic)
            ownership = ownership.reshape(-1, height, width).flip(1).reshape(-1, height * width)
        # KataGo's evaluator: no result is impossible under a ko rule other than simple with area scoring
        ko_not_simple = planes[:, NUM_SPATIAL + _GLOBAL_KO_NOT_SIMPLE, 0, 0] > 0.5
        territory = planes[:, NUM_SPATIAL + _GLOBAL_TERRITORY, 0, 0] > 0.5
        impossible = ko_not_simple & ~territory
        no_result_possible = 1.0 - impossible.to(planes.dtype)
        # KataGo subtracts 1e5 from the logit; 1e4 gives the same zero and stays finite in fp16
        no_result_logit = torch.where(impossible, value_logits[:, 2] - 10000.0, value_logits[:, 2])
        wdl = torch.softmax(torch.stack([value_logits[:, 0], value_logits[:, 1], no_result_logit], dim=1), dim=1)
        wdl = torch.cat([wdl[:, :2], wdl[:, 2:] * no_result_possible[:, None]], dim=1)
        wdl = wdl / wdl.sum(dim=1, keepdim=True)
        result = 1.0 - wdl[:, 2]
        value = wdl[:, 0] - wdl[:, 1]
        score_mean = scores[:, 0] * self.score_mean_multiplier * result
        score_stdev = F.softplus(scores[:, 1]) * self.score_stdev_multiplier
        lead = scores[:, 2] * self.lead_multiplier * result
        return policy, value, lead, torch.tanh(ownership), wdl, score_mean, score_stdev, optimistic


def load(path: str | os.PathLike, use_mask: bool = False, tabula_rows: bool = False) -> tuple[KataGoNet, dict]:
    """(the network, its parsed model) of a KataGo model file."""
    model = katago_model.read_model(path)
    return KataGoNet(model, use_mask=use_mask, tabula_rows=tabula_rows).eval(), model


# -- ONNX --------------------------------------------------------------------------------------------------------


def architecture(model: dict) -> dict:
    """What ``OnnxEvaluator.describe`` and the metadata say of the network."""
    trunk = model["trunk"]
    return {"blocks": trunk["num_blocks"], "filters": trunk["trunk_channels"], "head": "katago",
            "katago_model": model["name"], "katago_version": model["version"],
            "block_kinds": katago_model.block_kinds(trunk["blocks"])}


def onnx_metadata(model: dict, source: str, board_sizes: Sequence[int] = BOARD_SIZES,
                  precision: str = "fp32", policy_optimism: float = DEFAULT_POLICY_OPTIMISM) -> dict[str, str]:
    return {
        "tabula_format": METADATA_FORMAT_VERSION,
        "architecture": json.dumps(architecture(model), sort_keys=True),
        "board_sizes": ",".join(str(s) for s in board_sizes),
        "input_encoding": INPUT_ENCODING,
        "input": f"planes float32 [batch, {NUM_PLANES}, N, N]: KataGo's {NUM_SPATIAL} spatial V7 features, then its "
                 f"{NUM_GLOBAL} global features each as a constant plane; the rows as given (KataGo's symmetry 0 has "
                 "row 0 at the top, Tabula's planes at the bottom)",
        "policy": "logits float32 [batch, N*N+1], points in the planes' order, pass last (KataGo's main policy, its "
                  "optimistic policy mixed in by policy_optimism)",
        "policy_optimism": f"{policy_optimism:g}",
        "value": "float32 [batch], P(win) - P(loss), side to move's view",
        "score": "float32 [batch], KataGo's lead in points, side to move's view",
        "ownership": "tanh float32 [batch, N*N], +1 owned by the side to move at the end",
        "wdl": "float32 [batch, 3], (win, loss, no result) probabilities, side to move's view",
        "score_mean": "float32 [batch], KataGo's score mean, side to move's view",
        "score_stdev": "float32 [batch], KataGo's score standard deviation",
        "policy_optimistic": "logits float32 [batch, N*N+1] as policy: KataGo's optimistic policy alone (optimism "
                             "1, its search's below the root), or the main policy where the network has none",
        "precision": precision,
        "provenance": f"converted from KataGo's {os.path.basename(source)}",
        "source": os.path.basename(source),
        "katago_structure": json.dumps(katago_model.structure(model), separators=(",", ":")),
    }


def empty_board_planes(size: int, komi: float = 7.5, batch: int = 1) -> np.ndarray:
    """float32 [batch, 41, N, N]: an empty board, black to move, area scoring, simple ko (trial runs)."""
    planes = np.zeros((batch, NUM_PLANES, size, size), dtype=np.float32)
    planes[:, 0] = 1.0
    planes[:, NUM_SPATIAL + 5] = -komi / 20.0
    return planes


def export_onnx(net: KataGoNet, model: dict, path: str | os.PathLike, source: str,
                board_sizes: Sequence[int] = BOARD_SIZES, check: bool = True) -> float:
    """Write the network as ONNX (dynamic batch, height and width) with Tabula's metadata. ``check``: compare
    onnxruntime with torch on random positions of the smallest, 9x9 and the largest size; returns the largest
    difference of any output."""
    import onnx

    path = os.fspath(path)
    net = net.eval()
    example = torch.from_numpy(random_planes(9, 2, seed=0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        axes = {"planes": {0: "batch", 2: "height", 3: "width"}, **{name: {0: "batch"} for name in OUTPUTS}}
        torch.onnx.export(net, (example,), path, input_names=["planes"], output_names=list(OUTPUTS),
                          dynamic_axes=axes, opset_version=17, do_constant_folding=False, dynamo=False)
    proto = onnx.load(path)
    del proto.metadata_props[:]
    for key, value in onnx_metadata(model, source, board_sizes, policy_optimism=net.head.policy_optimism).items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.save(proto, path)
    if not check:
        return 0.0
    return compare_with_onnx(net, path, sorted({min(board_sizes), 9, max(board_sizes)}))


def random_planes(size: int, count: int, seed: int = 0) -> np.ndarray:
    """float32 [count, 41, N, N]: random stones and features on a full board, random komi and rules (tests)."""
    rng = np.random.default_rng(seed + 1000 * size)
    planes = np.zeros((count, NUM_PLANES, size, size), dtype=np.float32)
    planes[:, 0] = 1.0
    stones = rng.random((count, size, size))
    planes[:, 1] = stones < 0.2
    planes[:, 2] = (stones >= 0.2) & (stones < 0.4)
    occupied = planes[:, 1] + planes[:, 2]
    for plane in range(3, 6):
        planes[:, plane] = occupied * (rng.random((count, size, size)) < 0.15)
    planes[:, 9:14] = rng.random((count, 5, size, size)) < 0.01
    globals_ = np.zeros((count, NUM_GLOBAL), dtype=np.float32)
    globals_[:, 5] = rng.normal(0.0, 7.5, count) / 20.0
    globals_[:, 6] = rng.random(count) < 0.5
    globals_[:, 9] = rng.random(count) < 0.5
    globals_[:, 18] = rng.uniform(-0.5, 0.5, count)
    planes[:, NUM_SPATIAL:] = globals_[:, :, None, None]
    return planes


def compare_with_onnx(net: KataGoNet, path: str, size: int | Sequence[int], tolerance: float = 2e-3) -> float:
    """Run torch and onnxruntime on the same random planes of a board size (or of each of several); raise if they
    differ. Returns the largest difference (probabilities for the policy; points / 20 for the scores)."""
    import onnxruntime as ort

    from tabula.engine.net.onnx_evaluator import session_options

    session = ort.InferenceSession(path, session_options(), providers=["CPUExecutionProvider"])
    largest = 0.0
    for each in ([size] if isinstance(size, int) else size):
        planes = random_planes(each, 2, seed=1)
        with torch.no_grad():
            expected = [t.numpy() for t in net(torch.from_numpy(planes))]
        diff = output_difference(expected, session.run(list(OUTPUTS), {"planes": planes}))
        if not diff <= tolerance:
            raise RuntimeError(f"{path}: onnxruntime and torch differ by {diff:g} on {each}x{each}")
        largest = max(largest, diff)
    return largest


def output_difference(expected: Sequence[np.ndarray], actual: Sequence[np.ndarray]) -> float:
    """Largest difference between two sets of outputs: policy as probabilities, scores in units of 20 points."""
    def softmax(x):
        x = x - x.max(axis=1, keepdims=True)
        e = np.exp(x)
        return e / e.sum(axis=1, keepdims=True)

    diffs = []
    for index, (e, a) in enumerate(zip(expected, actual)):
        if OUTPUTS[index] in ("policy", "policy_optimistic"):
            diffs.append(np.abs(softmax(e) - softmax(a)).max())
            continue
        scale = 20.0 if OUTPUTS[index] in ("score", "score_mean", "score_stdev") else 1.0
        diffs.append(np.abs(np.asarray(e) - np.asarray(a)).max() / scale)
    return float(max(diffs))


def load_onnx(path: str | os.PathLike, proto=None) -> KataGoNet:
    """Rebuild the torch network from an fp32 ONNX file that ``export_onnx`` wrote (its ``katago_structure``
    metadata and named initialisers): what the torch GPU backend runs. ``proto``: the file already loaded."""
    from tabula.engine.net.netfile import NetworkFileError, read_fp32_onnx

    path = os.fspath(path)
    metadata, tensors = read_fp32_onnx(path, "katago_structure", "KataGo structure", proto)
    optimism = float(metadata.get("policy_optimism", DEFAULT_POLICY_OPTIMISM))  # as the file's policy mixes it
    net = KataGoNet(katago_model.from_structure(json.loads(metadata["katago_structure"])), policy_optimism=optimism)
    state = net.state_dict()
    for name, value in state.items():
        if name not in tensors or tensors[name].shape != tuple(value.shape):
            raise NetworkFileError(path, f"parameter {name} missing or of the wrong shape")
        state[name] = torch.from_numpy(np.array(tensors[name]))
    net.load_state_dict(state)
    return net.eval()


__all__ = ["BOARD_SIZES", "INPUT_ENCODING", "KataGoNet", "KataGoNetworkError", "NUM_PLANES", "OUTPUTS",
           "architecture", "compare_with_onnx", "empty_board_planes", "export_onnx", "load", "load_onnx",
           "onnx_metadata", "output_difference", "random_planes"]
