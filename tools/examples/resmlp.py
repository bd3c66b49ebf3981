"""A residual MLP over token embeddings: the model of the torch 2.6 FSDP oracle
(tests/tools/torch2/fsdp_measure.py; the table "Measured on one model" in
shared/reference/torch2_on_cpu.md).

A token embedding (vocabulary 1000, width 256), four pre-norm residual blocks
(`Block`: LayerNorm(256) -> Linear(256, 1024) -> GELU -> Linear(1024, 256), added to the block's
input), a final LayerNorm and a head Linear(256, 1000); a batch of 8 x 128 token ids. forward
returns the loss: cross-entropy of the logits against the input tokens themselves (no target
tensor to build or move), so log_softmax's output (4,096,000 B) lives until backward. Of the two
losses tried against the reference table (shared/reference/torch2_on_cpu.md) it is the closer
(FSDP1 FULL_SHARD: after fwd 52.91 MiB against the table's 51.87, forward peak 56.81 against
59.65, backward peak 62.73 against 61.62; the mean of the logits gives 49.00, 52.91, 57.99), but
neither reproduces the table: the table's model is not this one in some detail not yet found.
10,471,328 B of fp32 parameters. build_model_checkpointed runs each Block
under torch.utils.checkpoint (use_reentrant=False). Runs under torch 1.13 (the recorder) and 2.6.

    /usr/bin/python3 tools/record_program.py tools/examples/resmlp.py:build_model \
        --batch tools/examples/resmlp.py:make_batch --wrap Block -o resmlp.json
    tools/torch2.sh ranks 2 tests/tools/torch2/fsdp_measure.py \
        tools/examples/resmlp.py:build_model --batch tools/examples/resmlp.py:make_batch \
        --wrap Block --impl fsdp1 --json out.json
"""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

VOCAB, WIDTH, FFN, DEPTH, BATCH, SEQ = 1000, 256, 1024, 4, 8, 128


class Block(nn.Module):
    def __init__(self, unused=False):
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.fc1 = nn.Linear(WIDTH, FFN)
        self.fc2 = nn.Linear(FFN, WIDTH)
        # A parameter forward never uses (a dead branch): no gradient ever reaches it.
        self.unused = nn.Linear(WIDTH, 16) if unused else None

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class ResMLP(nn.Module):
    def __init__(self, checkpointing=False, positions=False, logits=False, unused=False):
        super().__init__()
        self.checkpointing = checkpointing
        self.logits = logits
        self.embed = nn.Embedding(VOCAB, WIDTH)
        # A learned position embedding as ViT's pos_embed: shape (1, SEQ, WIDTH), whose dim 0
        # (1) is smaller than any world size: FSDP2 gives all of it to rank 0.
        self.pos = nn.Parameter(torch.zeros(1, SEQ, WIDTH)) if positions else None
        self.blocks = nn.ModuleList(Block(unused) for _ in range(DEPTH))
        self.norm = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens):
        x = self.embed(tokens)
        if self.pos is not None:
            x = x + self.pos
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False) if self.checkpointing else block(x)
        logits = self.head(self.norm(x))
        if self.logits:
            return logits  # the step's loss is their mean (tools/recorder/step.py: to_loss)
        return F.cross_entropy(logits.view(-1, VOCAB), tokens.view(-1))


def build_model():
    torch.manual_seed(0)
    return ResMLP()


def build_model_checkpointed():
    torch.manual_seed(0)
    return ResMLP(checkpointing=True)


def build_model_positions():
    """With the (1, SEQ, WIDTH) position embedding: FSDP2's dim-0 sharding (torch.chunk) puts
    it whole on rank 0 and pads every rank's shard to it."""
    torch.manual_seed(0)
    return ResMLP(positions=True)


def build_model_unused():
    """Each Block with a Linear(256, 16) its forward never calls: FSDP2 leaves its parameters,
    which get no gradient, out of the Block's reduce-scatter (foreach_reduce's
    fsdp_params_with_grad); FSDP1's flat gradient has zeros for them."""
    torch.manual_seed(0)
    return ResMLP(unused=True)


def build_model_logits():
    """Forward returns the logits, the loss made outside it: what FSDP2's root output_dtype
    casts (MixedPrecisionPolicy(output_dtype=torch.float32), a copy of all the logits)."""
    torch.manual_seed(0)
    return ResMLP(logits=True)


def build_model_logits_bf16():
    """build_model_logits as a bf16 param_dtype computes it (see build_model_bf16)."""
    return build_model_logits().to(torch.bfloat16)


def make_batch():
    return torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(1))


def make_batch_one():
    """One sequence: activations small beside a Block's parameters (2 MiB in fp32), so that
    the all-gathers an FSDP prefetch issues early set the peaks."""
    return make_batch()[:1]


def build_model_bf16():
    """The model as MixedPrecision(param_dtype=torch.bfloat16) (FSDP1) or
    MixedPrecisionPolicy(param_dtype=torch.bfloat16) (FSDP2) computes it, every activation in
    bf16: the program to emit a bf16 run from (a program recorded in fp32 keeps fp32
    activations whatever --param-dtype says)."""
    return build_model().to(torch.bfloat16)
