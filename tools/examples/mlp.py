"""A four-layer MLP (the smallest of the recorder's oracle models, tests/tools/oracle_test.py);
build_model_shared applies one layer four times (a parameter read by several ops).

    /usr/bin/python3 tools/record_program.py tools/examples/mlp.py:build_model \
        --batch tools/examples/mlp.py:make_batch --wrap Layer -o mlp.json
"""

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

WIDTH, DEPTH, BATCH, IN, OUT = 512, 4, 64, 256, 64


class Layer(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return torch.relu(self.fc(x))


class MLP(nn.Module):
    def __init__(self, checkpointing=False, shared=False):
        super().__init__()
        self.checkpointing = checkpointing
        self.inp = nn.Linear(IN, WIDTH)
        # shared: one Layer applied DEPTH times (its weight gets one gradient per use, summed)
        if shared:
            self.layers = nn.ModuleList([Layer(WIDTH)] * DEPTH)
        else:
            self.layers = nn.ModuleList(Layer(WIDTH) for _ in range(DEPTH))
        self.out = nn.Linear(WIDTH, OUT)

    def forward(self, x):
        x = self.inp(x)
        for layer in self.layers:
            x = checkpoint(layer, x) if self.checkpointing else layer(x)
        return self.out(x)


def build_model():
    torch.manual_seed(0)
    return MLP()


def build_model_checkpointed():
    torch.manual_seed(0)
    return MLP(checkpointing=True)


def build_model_shared():
    torch.manual_seed(0)
    return MLP(shared=True)


def make_batch():
    return torch.randn(BATCH, IN, generator=torch.Generator().manual_seed(1))
