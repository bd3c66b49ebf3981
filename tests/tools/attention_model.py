"""A small attention model written as Llama reference implementations write it, for the
recorder's --target tests (record_target_test.py): a token embedding, one attention block with
rotary embedding through view_as_complex on a complex64 freqs_cis buffer, grouped-query
attention expanded as repeat_kv does, F.scaled_dot_product_attention(is_causal=True) on [B, H,
S, D] transposes of [B, S, H, D] projections, the output's transpose(1, 2).contiguous() into the
out-projection, and a cross-entropy loss on logits.float(). Shapes from the environment:
ATTN_SEQ (sequence length, default 256), ATTN_MASK=1 (a bool attn_mask in place of
is_causal)."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F
B, H, KV, D, V = 2, 4, 2, 32, 100
S = int(os.environ.get("ATTN_SEQ", "256"))
MASK = os.environ.get("ATTN_MASK") == "1"
DIM = H * D


def freqs(seq, d):
    f = 1.0 / (10000 ** (torch.arange(0, d, 2)[: d // 2].float() / d))
    t = torch.arange(seq).float()
    return torch.polar(torch.ones(seq, d // 2), torch.outer(t, f))


class Attn(nn.Module):
    def __init__(s):
        super().__init__()
        s.wq = nn.Linear(DIM, H * D, bias=False); s.wk = nn.Linear(DIM, KV * D, bias=False)
        s.wv = nn.Linear(DIM, KV * D, bias=False); s.wo = nn.Linear(H * D, DIM, bias=False)
    def forward(s, x, fc):
        b, n, _ = x.shape
        q = s.wq(x).view(b, n, H, D); k = s.wk(x).view(b, n, KV, D); v = s.wv(x).view(b, n, KV, D)
        qc = torch.view_as_complex(q.float().reshape(b, n, H, -1, 2))
        kc = torch.view_as_complex(k.float().reshape(b, n, KV, -1, 2))
        f = fc.view(1, n, 1, -1)
        q = torch.view_as_real(qc * f).flatten(3).type_as(q)
        k = torch.view_as_real(kc * f).flatten(3).type_as(k)
        k = k[:, :, :, None, :].expand(b, n, KV, H // KV, D).reshape(b, n, H, D)
        v = v[:, :, :, None, :].expand(b, n, KV, H // KV, D).reshape(b, n, H, D)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if MASK:
            mask = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        else:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return s.wo(o.transpose(1, 2).contiguous().view(b, n, -1))


class M(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb = nn.Embedding(V, DIM); s.a = Attn(); s.out = nn.Linear(DIM, V, bias=False)
        s.register_buffer("fc", freqs(S, D), persistent=False)
    def forward(s, ids, labels):
        h = s.emb(ids); h = h + s.a(h, s.fc)
        return F.cross_entropy(s.out(h).float().flatten(0, 1), labels.flatten(0, 1))


def build_model(): return M()


def make_batch(): return (torch.randint(0, V, (B, S)), torch.randint(0, V, (B, S)))
