"""A small GPT in plain PyTorch: bucketsim's example of "bring your own model".

    /usr/bin/python3 tools/record_program.py tools/examples/tiny_gpt.py:build_model \
        --batch tools/examples/tiny_gpt.py:make_batch --wrap Block -o tiny-gpt.json

The shape is the one bucketsim's transformer preset describes with `--attention unfused`
(src/gen/transformer_preset.cc; `--dropout 0` for build_model_no_dropout):
token and learned position embeddings, pre-layernorm blocks of causal self-attention (separate
Q, K, V projections with biases, softmax, dropout, output projection, dropout) and a GeLU MLP
(dropout), a final layernorm and an untied LM head, cross-entropy against the next tokens.
`Block` is the class to give --wrap; CONFIG and the build_* functions below give other sizes.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

# layers, hidden, heads, seq, micro-batch, vocab, MLP hidden (0: 4 x hidden), dropout
CONFIG = dict(layers=2, hidden=128, heads=4, seq=64, batch=2, vocab=512, ffn=0, dropout=0.1,
              checkpointing=False)
# A 7B-class configuration (GPT-3 6.7B: 32 layers, hidden 4096, MLP 4 x hidden; seq 4096,
# checkpointed blocks): 6.7e9 parameters, for --device meta only.
CONFIG_7B = dict(layers=32, hidden=4096, heads=32, seq=4096, batch=1, vocab=32000, ffn=0,
                 dropout=0.1, checkpointing=True)


class Attention(nn.Module):
    def __init__(self, hidden, heads, dropout, sdpa=False):
        super().__init__()
        self.heads = heads
        self.sdpa = sdpa
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, hidden)
        self.v = nn.Linear(hidden, hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.attn_drop = nn.Dropout(dropout)
        self.proj_drop = nn.Dropout(dropout)

    def forward(self, x):
        b, s, h = x.shape
        d = h // self.heads

        def heads(t):
            return t.view(b, s, self.heads, d).transpose(1, 2)  # b, a, s, d

        q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
        if self.sdpa:  # torch >= 2.0: one fused kernel, no s x s tensor kept
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_drop.p if
                                                 self.training else 0.0, is_causal=True)
            return self.proj_drop(self.proj(out.transpose(1, 2).reshape(b, s, h)))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
        mask = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        probs = self.attn_drop(F.softmax(scores, dim=-1))
        out = (probs @ v).transpose(1, 2).reshape(b, s, h)
        return self.proj_drop(self.proj(out))


class MLP(nn.Module):
    def __init__(self, hidden, ffn, dropout):
        super().__init__()
        self.fc = nn.Linear(hidden, ffn)
        self.out = nn.Linear(ffn, hidden)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.drop(self.out(F.gelu(self.fc(x))))


class Block(nn.Module):
    def __init__(self, hidden, heads, ffn, dropout, sdpa=False):
        super().__init__()
        self.ln1 = nn.LayerNorm(hidden)
        self.attn = Attention(hidden, heads, dropout, sdpa)
        self.ln2 = nn.LayerNorm(hidden)
        self.mlp = MLP(hidden, ffn, dropout)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, layers, hidden, heads, seq, vocab, ffn, dropout, checkpointing,
                 sdpa=False, use_reentrant=None, **_):
        super().__init__()
        self.checkpointing = checkpointing
        # torch.utils.checkpoint's use_reentrant, passed only when set (torch 1.13's default
        # is reentrant; 2.x warns unless it is given).
        self.checkpoint_kwargs = {} if use_reentrant is None else {"use_reentrant": use_reentrant}
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(seq, hidden)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(hidden, heads, ffn or 4 * hidden, dropout, sdpa)
                                    for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, idx, targets):
        b, s = idx.shape
        x = self.tok(idx) + self.pos(torch.arange(s, device=idx.device))
        for block in self.blocks:
            x = checkpoint(block, x, **self.checkpoint_kwargs) if self.checkpointing else block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(b * s, -1), targets.view(b * s))


class CausalLM(GPT):
    """The forward as nanoGPT's and Hugging Face's causal LMs write it: the token and position
    embeddings are local variables (alive until forward returns, past their last reader, the
    sum), and so is `logits`; the loss is computed inside forward from the shifted logits
    (logits[:, :-1] against idx[:, 1:]), whose reshape copies them. The real run still holds all
    three at the loss, where the forward's peak is: bucketsim must know how long the Python code
    keeps them (the recorder's `releases`)."""

    def forward(self, idx):
        b, s = idx.shape
        tok_emb = self.tok(idx)
        pos_emb = self.pos(torch.arange(s, device=idx.device))
        x = self.drop(tok_emb + pos_emb)
        for block in self.blocks:
            x = checkpoint(block, x, **self.checkpoint_kwargs) if self.checkpointing else block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)),
                               idx[:, 1:].reshape(-1))


def build_model(**overrides):
    torch.manual_seed(0)
    return GPT(**dict(CONFIG, **overrides))


def make_batch(**overrides):
    c = dict(CONFIG, **overrides)
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(c["vocab"], (c["batch"], c["seq"] + 1), generator=g)
    return idx[:, :-1].contiguous(), idx[:, 1:].contiguous()


def make_batch_sized(size):
    """make_batch at batch size `size`: the batch function of record_program.py --batch-sizes."""
    return make_batch(batch=size)


def make_batch_shaped(size=CONFIG["batch"], seq_len=CONFIG["seq"]):
    """make_batch at a batch size and a sequence length (up to CONFIG's 64 positions): the
    batch function of record_program.py --batch-sizes and --seq-lens."""
    return make_batch(batch=size, seq=seq_len)


def build_model_causal_lm():
    """CausalLM: the loss inside forward, on shifted logits; batch: make_batch_causal_lm."""
    torch.manual_seed(0)
    return CausalLM(**CONFIG)


def build_model_causal_lm_checkpointed():
    """CausalLM with every Block checkpointed (torch.utils.checkpoint, reentrant)."""
    torch.manual_seed(0)
    return CausalLM(**dict(CONFIG, checkpointing=True))


def make_batch_causal_lm():
    """The tokens alone (CausalLM shifts them itself)."""
    g = torch.Generator().manual_seed(1)
    return torch.randint(CONFIG["vocab"], (CONFIG["batch"], CONFIG["seq"]), generator=g)


def make_batch_causal_lm_shaped(size=CONFIG["batch"], seq_len=CONFIG["seq"]):
    """make_batch_causal_lm at a batch size and a sequence length (--batch-sizes, --seq-lens)."""
    g = torch.Generator().manual_seed(1)
    return torch.randint(CONFIG["vocab"], (size, seq_len), generator=g)


def build_model_checkpointed():
    return build_model(checkpointing=True)


def build_model_no_dropout():
    """Without dropout: on the CPU, dropout saves its noise in the activation dtype (PyTorch
    1.13's _dropout_impl: empty_like(input).bernoulli_(1 - p)), on CUDA a bool mask
    (native_dropout), which is what bucketsim's transformer preset describes; the oracle
    compares the preset with --dropout 0 against this model."""
    return build_model(dropout=0.0)


def build_model_checkpointed_no_dropout():
    return build_model(dropout=0.0, checkpointing=True)


def build_model_7b():
    return build_model(**CONFIG_7B)


def make_batch_7b():
    return make_batch(**CONFIG_7B)


def make_batch_7b_sized(size):
    """make_batch_7b at batch size `size` (record_program.py --batch-sizes)."""
    return make_batch(**dict(CONFIG_7B, batch=size))


def make_batch_7b_shaped(size=CONFIG_7B["batch"], seq_len=CONFIG_7B["seq"]):
    """make_batch_7b at a batch size and a sequence length up to its 4096 positions
    (record_program.py --batch-sizes, --seq-lens)."""
    return make_batch(**dict(CONFIG_7B, batch=size, seq=seq_len))


def build_model_sdpa():
    """Attention through torch 2.x's scaled_dot_product_attention, no dropout (the torch 2.6
    FSDP oracle's GPT, tests/tools/torch2/fsdp_oracle_test.py; record it under torch 2.x)."""
    return build_model(dropout=0.0, sdpa=True)


def build_model_sdpa_checkpointed():
    return build_model(dropout=0.0, sdpa=True, checkpointing=True, use_reentrant=False)


def every_other_addmm_policy():
    """A context_fn for checkpoint(..., use_reentrant=False): selective checkpointing in
    torchtitan's form (torchtitan 9dec370, parallelize_llama.py _get_custom_policy): attention's
    kernel saved, every other addmm (these linears have biases; Llama's are mm) saved and the
    others recomputed, counted per region forward and per phase (torch 2.6 asks the policy in
    the recompute too). bucketsim's what-if of the same: `gen program --checkpoint Block
    --checkpoint-impl no-reentrant --checkpoint-save addmm/2,<the attention op>`."""
    import collections
    import functools
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts
    attention = ("_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
                 "_scaled_dot_product_flash_attention_for_cpu")

    def policy(counts, ctx, func, *args, **kwargs):
        name = func.overloadpacket.__name__
        if name in attention:
            return CheckpointPolicy.MUST_SAVE
        if name == "addmm":
            phase = "recompute" if ctx.is_recompute else "forward"
            counts[phase] += 1
            if counts[phase] % 2:
                return CheckpointPolicy.MUST_SAVE
        return CheckpointPolicy.PREFER_RECOMPUTE

    return lambda: create_selective_checkpoint_contexts(
        functools.partial(policy, collections.defaultdict(int)))


def build_model_sdpa_sac():
    """build_model_sdpa with every Block checkpointed (non-reentrant) under
    every_other_addmm_policy, as torchtitan checkpoints Llama (preserve_rng_state=False;
    torch >= 2.4)."""
    model = build_model(dropout=0.0, sdpa=True, checkpointing=True, use_reentrant=False)
    model.checkpoint_kwargs.update(context_fn=every_other_addmm_policy(),
                                   preserve_rng_state=False)
    return model
