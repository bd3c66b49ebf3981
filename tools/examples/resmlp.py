"""A residual MLP over token embeddings: the model of the torch 2.6 FSDP oracle
(tests/tools/torch2/fsdp_measure.py; the table "Measured on one model" in
shared/reference/torch2_on_cpu.md).

A token embedding (vocabulary 1000, width 256), four pre-norm residual blocks
(`Block`: LayerNorm(256) -> Linear(256, 1024) -> GELU -> Linear(1024, 256), added to the block's
input), a final LayerNorm and a head Linear(256, 1000); a batch of 8 x 128 token ids. The loss is
the mean of the logits (tools/torch_memory.py's to_loss takes the mean of a non-scalar output),
which reproduces the reference table; cross-entropy would keep the log-softmax output (3.91 MiB
more at "after fwd"). 10,471,328 B of fp32 parameters. build_model_checkpointed runs each Block
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
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.fc1 = nn.Linear(WIDTH, FFN)
        self.fc2 = nn.Linear(FFN, WIDTH)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class ResMLP(nn.Module):
    def __init__(self, checkpointing=False):
        super().__init__()
        self.checkpointing = checkpointing
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(DEPTH))
        self.norm = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False) if self.checkpointing else block(x)
        return self.head(self.norm(x))


def build_model():
    torch.manual_seed(0)
    return ResMLP()


def build_model_checkpointed():
    torch.manual_seed(0)
    return ResMLP(checkpointing=True)


def make_batch():
    return torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(1))
