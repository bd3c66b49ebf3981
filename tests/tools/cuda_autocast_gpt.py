"""tools/examples/tiny_gpt.py without dropout, with the casts CUDA's torch.autocast(bf16) makes
written out by hand, so that the CPU can check bucketsim's `transformer --autocast bf16`.

PyTorch 1.13's CPU autocast follows other op lists than CUDA's (layer_norm is not on its fp32
list and fails on a bf16 input), so the oracle cannot run CPU autocast; CUDA's lists
(aten/src/ATen/autocast_mode.cpp) say: linear and matmul run in the autocast dtype on cast
copies of their operands and weights (only fp32 leaf weights are cached, each weight here is
used once); layer_norm and nll_loss in fp32; softmax and log_softmax as softmax(x,
dtype=float32); embedding, GeLU, masked_fill and the residual adds in their input's dtype.
Autocast also casts each bias once and caches the copy until the autocast region ends; here
each bias copy dies after its op (the preset leaves bias copies out: a few KiB per layer).
"""

import math
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "tools", "examples"))
import tiny_gpt  # noqa: E402

LOW = torch.bfloat16


def linear(module, x):
    bias = module.bias.to(LOW) if module.bias is not None else None
    return F.linear(x.to(LOW), module.weight.to(LOW), bias)


def layer_norm(module, x):
    return F.layer_norm(x.float(), module.normalized_shape, module.weight, module.bias,
                        module.eps)


class Block(nn.Module):
    def __init__(self, block):
        super().__init__()
        self.block = block

    def forward(self, x):
        attn, mlp = self.block.attn, self.block.mlp
        b, s, h = x.shape
        d = h // attn.heads

        def heads(t):
            return t.view(b, s, attn.heads, d).transpose(1, 2)

        y = layer_norm(self.block.ln1, x)
        q, k, v = heads(linear(attn.q, y)), heads(linear(attn.k, y)), heads(linear(attn.v, y))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
        mask = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        probs = F.softmax(scores, dim=-1, dtype=torch.float32)
        out = (probs.to(LOW) @ v).transpose(1, 2).reshape(b, s, h)
        x = x + linear(attn.proj, out)
        return x + linear(mlp.out, F.gelu(linear(mlp.fc, layer_norm(self.block.ln2, x))))


class GPT(nn.Module):
    def __init__(self, checkpointing=False):
        super().__init__()
        self.checkpointing = checkpointing
        self.gpt = tiny_gpt.build_model(dropout=0.0)
        self.blocks = nn.ModuleList(Block(block) for block in self.gpt.blocks)

    def forward(self, idx, targets):
        g = self.gpt
        b, s = idx.shape
        x = g.tok(idx) + g.pos(torch.arange(s, device=idx.device))
        for block in self.blocks:
            x = checkpoint(block, x) if self.checkpointing else block(x)
        logits = linear(g.head, layer_norm(g.ln_f, x))
        log_probs = F.log_softmax(logits.view(b * s, -1), dim=-1, dtype=torch.float32)
        return F.nll_loss(log_probs, targets.view(b * s))


def build_model():
    return GPT()


def build_model_checkpointed():
    return GPT(checkpointing=True)


make_batch = tiny_gpt.make_batch
