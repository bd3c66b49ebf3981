"""The conv model of fairscale's FSDP memory test (tests/nn/data_parallel/test_fsdp_memory.py),
as bucketsim's fairscale-convnet preset describes it (src/gen/convnet_preset.cc): a
Conv(3, 64, k3)/BatchNorm/ReLU(inplace) stem, three Conv(k5, padding 2)/BatchNorm/ReLU(inplace)
blocks, AdaptiveAvgPool2d(1), Flatten, Linear(hidden_dim, 10). The test runs it at hidden_dim 128
on 2x3x224x224; the defaults here are smaller so that one CPU step takes a second
(`bucketsim gen fairscale-convnet --hidden-dim 32 --image-size 64` is the same model).
With checkpointing, the blocks run under torch.utils.checkpoint (the test's checkpoint_wrapper).

    /usr/bin/python3 tools/record_program.py tools/examples/convnet.py:build_model \
        --batch tools/examples/convnet.py:make_batch --wrap Conv2d --wrap BatchNorm2d -o c.json
"""

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

HIDDEN_DIM, BATCH, IMAGE_SIZE = 32, 2, 64


class Model(nn.Module):
    def __init__(self, hidden_dim=HIDDEN_DIM, checkpointing=False):
        super().__init__()
        self.checkpointing = checkpointing
        self.stem = nn.Sequential(nn.Conv2d(3, 64, kernel_size=3), nn.BatchNorm2d(64),
                                  nn.ReLU(inplace=True))
        self.blocks = nn.Sequential(
            nn.Conv2d(64, hidden_dim, kernel_size=5, padding=2), nn.BatchNorm2d(hidden_dim),
            nn.ReLU(inplace=True),
            nn.Conv2d(hidden_dim, hidden_dim, kernel_size=5, padding=2),
            nn.BatchNorm2d(hidden_dim), nn.ReLU(inplace=True),
            nn.Conv2d(hidden_dim, hidden_dim, kernel_size=5, padding=2),
            nn.BatchNorm2d(hidden_dim), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(output_size=(1, 1)), nn.Flatten())
        self.head = nn.Linear(hidden_dim, 10)

    def forward(self, x):
        x = self.stem(x)
        x = checkpoint(self.blocks, x) if self.checkpointing else self.blocks(x)
        return self.head(x)


def build_model():
    torch.manual_seed(0)
    return Model()


def build_model_checkpointed():
    torch.manual_seed(0)
    return Model(checkpointing=True)


def make_batch():
    return torch.randn(BATCH, 3, IMAGE_SIZE, IMAGE_SIZE, generator=torch.Generator().manual_seed(1))
