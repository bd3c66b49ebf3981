"""A Llama-3-shaped decoder written as the reference implementations write it (Meta's llama3
model.py, torchtitan's models/llama3): rotary embedding through torch.view_as_complex with a
complex64 `freqs_cis` buffer, grouped-query attention with repeat_kv, SwiGLU feed-forward,
RMSNorm computing in x.float(), F.scaled_dot_product_attention(..., is_causal=True), logits
upcast for an fp32 cross-entropy. Our own code; the shapes are Llama 3's.

Record it (torch 2.x: scaled_dot_product_attention), e.g. the 8B shape on meta for an H100 run:

    tools/torch2.sh python tools/record_program.py tools/examples/llama.py:build_model_8b \\
        --batch tools/examples/llama.py:make_batch_8b --wrap TransformerBlock --no-flatten \\
        --device meta --dtype bf16 --optimizer adamw --optimizer-impl foreach -o llama-8b.json

(traces/llama3-8b.program.json is that recording, for the benchmark, bench/program_bench.cc;
Tools.RecordTarget checks it is what the recorder writes.)

`build_model(**overrides)` / `make_batch(**overrides)` take CONFIG's keys; LLAMA_ENV (a JSON
object of CONFIG keys, e.g. '{"n_layers": 2}') overrides the named builders' shapes, so a test
or a script can record and run the same model at another depth without another file.
"""

import json
import math
import os

import torch
import torch.nn.functional as F
from torch import nn

# Llama 3 8B (params.json of Meta's release): dim 4096, 32 layers, 32 heads, 8 KV heads, FFN
# multiplier 1.3 rounded up to a multiple of 1024 (hidden 14,336), vocab 128,256, rope theta
# 500,000; trained at sequence 8192 (torchtitan's llama3_8b.toml: seq_len 8192, batch 1-2).
CONFIG_8B = dict(dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, vocab=128256,
                 ffn_dim_multiplier=1.3, multiple_of=1024, norm_eps=1e-5, rope_theta=500000.0,
                 batch=2, seq=8192)
# The same architecture small enough to run for real on a CPU.
CONFIG = dict(dim=256, n_layers=2, n_heads=8, n_kv_heads=2, vocab=2048, ffn_dim_multiplier=None,
              multiple_of=64, norm_eps=1e-5, rope_theta=500000.0, batch=2, seq=128)


def _config(base, overrides):
    c = dict(base)
    c.update(json.loads(os.environ.get("LLAMA_ENV", "{}")))
    c.update(overrides)
    unknown = set(c) - set(CONFIG)
    if unknown:
        raise ValueError(f"llama: unknown config keys {sorted(unknown)} (known: {sorted(CONFIG)})")
    return c


def ffn_hidden(dim, multiplier, multiple_of):
    """Llama's FeedForward width: 2/3 of 4 dim, times the multiplier, up to a multiple."""
    hidden = int(2 * 4 * dim / 3)
    if multiplier is not None:
        hidden = int(multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def precompute_freqs_cis(head_dim, end, theta):
    """The rotary frequencies as unit complex numbers, [end, head_dim / 2] complex64."""
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2)[: head_dim // 2].float() / head_dim))
    t = torch.arange(end, device=freqs.device, dtype=torch.float32)
    return torch.polar(torch.ones(end, head_dim // 2), torch.outer(t, freqs))


def apply_rotary_emb(xq, xk, freqs_cis):
    """Rotate q and k by position: pairs of features as complex numbers times freqs_cis."""
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def repeat_kv(x, n_rep):
    """[b, s, kv_heads, d] -> [b, s, kv_heads * n_rep, d]: each KV head shared by n_rep."""
    if n_rep == 1:
        return x
    b, s, kv_heads, d = x.shape
    return x[:, :, :, None, :].expand(b, s, kv_heads, n_rep, d).reshape(b, s, kv_heads * n_rep, d)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        return self._norm(x.float()).type_as(x) * self.weight


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_heads, self.n_kv_heads = c["n_heads"], c["n_kv_heads"]
        self.head_dim = c["dim"] // c["n_heads"]
        self.wq = nn.Linear(c["dim"], self.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(c["dim"], self.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(c["dim"], self.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(self.n_heads * self.head_dim, c["dim"], bias=False)

    def forward(self, x, freqs_cis):
        b, s, _ = x.shape
        xq = self.wq(x).view(b, s, self.n_heads, self.head_dim)
        xk = self.wk(x).view(b, s, self.n_kv_heads, self.head_dim)
        xv = self.wv(x).view(b, s, self.n_kv_heads, self.head_dim)
        xq, xk = apply_rotary_emb(xq, xk, freqs_cis)
        n_rep = self.n_heads // self.n_kv_heads
        keys, values = repeat_kv(xk, n_rep), repeat_kv(xv, n_rep)
        out = F.scaled_dot_product_attention(xq.transpose(1, 2), keys.transpose(1, 2),
                                             values.transpose(1, 2), is_causal=True)
        return self.wo(out.transpose(1, 2).contiguous().view(b, s, -1))


class FeedForward(nn.Module):
    def __init__(self, c):
        super().__init__()
        hidden = ffn_hidden(c["dim"], c["ffn_dim_multiplier"], c["multiple_of"])
        self.w1 = nn.Linear(c["dim"], hidden, bias=False)
        self.w2 = nn.Linear(hidden, c["dim"], bias=False)
        self.w3 = nn.Linear(c["dim"], hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = Attention(c)
        self.feed_forward = FeedForward(c)
        self.attention_norm = RMSNorm(c["dim"], c["norm_eps"])
        self.ffn_norm = RMSNorm(c["dim"], c["norm_eps"])

    def forward(self, x, freqs_cis):
        h = x + self.attention(self.attention_norm(x), freqs_cis)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    """Tokens (and labels) in; the mean cross-entropy of the next token out (with labels), in
    fp32 from upcast logits, else the logits."""

    def __init__(self, c):
        super().__init__()
        self.tok_embeddings = nn.Embedding(c["vocab"], c["dim"])
        self.layers = nn.ModuleList(TransformerBlock(c) for _ in range(c["n_layers"]))
        self.norm = RMSNorm(c["dim"], c["norm_eps"])
        self.output = nn.Linear(c["dim"], c["vocab"], bias=False)
        self.register_buffer("freqs_cis", precompute_freqs_cis(
            c["dim"] // c["n_heads"], c["seq"], c["rope_theta"]), persistent=True)

    def forward(self, tokens, labels=None):
        h = self.tok_embeddings(tokens)
        freqs_cis = self.freqs_cis[: tokens.shape[1]]
        for layer in self.layers:
            h = layer(h, freqs_cis)
        logits = self.output(self.norm(h))
        if labels is None:
            return logits
        return F.cross_entropy(logits.float().flatten(0, 1), labels.flatten())


def init_weights(model, std=0.02):
    """Normal(0, std) weights, RMSNorm's ones, the rotary buffer recomputed: what a model built
    on meta and materialized with to_empty needs before it trains."""
    for module in model.modules():
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=std / math.sqrt(2) if module is model.output
                            else std)
        elif isinstance(module, RMSNorm):
            nn.init.ones_(module.weight)
    head_dim = model.freqs_cis.shape[1] * 2
    with torch.no_grad():
        model.freqs_cis.copy_(precompute_freqs_cis(head_dim, model.freqs_cis.shape[0],
                                                   CONFIG["rope_theta"]))


def build_model(**overrides):
    torch.manual_seed(0)
    return Transformer(_config(CONFIG, overrides))


def make_batch(**overrides):
    c = _config(CONFIG, overrides)
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(c["vocab"], (c["batch"], c["seq"] + 1), generator=g)
    return idx[:, :-1].contiguous(), idx[:, 1:].contiguous()


def build_model_8b(**overrides):
    """Llama 3 8B's shape (8.03e9 parameters); build it on meta (record_program.py --device
    meta), never for real on a laptop."""
    return Transformer(_config(CONFIG_8B, overrides))


def make_batch_8b(**overrides):
    """Batch 2 of sequence 8192, as integer tokens; the recorder moves it to --device."""
    c = _config(CONFIG_8B, overrides)
    idx = torch.randint(c["vocab"], (c["batch"], c["seq"] + 1))
    return idx[:, :-1].contiguous(), idx[:, 1:].contiguous()
