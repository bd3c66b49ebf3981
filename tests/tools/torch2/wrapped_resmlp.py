"""The resmlp example (tools/examples/resmlp.py) wrapped by its build function itself, each
Block a unit with settings of its own, as a user's script hands a wrapped model to
tools/record_program.py: the oracle (fsdp_oracle_test.py) records it as it is (the recorder
reads the units and each unit's settings from the model) and measures it as built
(fsdp_measure.py --as-built). Runs under torch 2.6 (tools/torch2.sh)."""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))), "tools", "examples"))

import resmlp  # noqa: E402
from resmlp import make_batch, make_batch_one  # noqa: E402,F401


def build_fsdp1_unit_settings():
    """FSDP1, FULL_SHARD, each Block its own backward_prefetch: PRE, None, POST, PRE (the
    root: PRE)."""
    from torch.distributed.fsdp import BackwardPrefetch, FullyShardedDataParallel as FSDP
    model = resmlp.build_model()
    cpu = torch.device("cpu")
    prefetch = [BackwardPrefetch.BACKWARD_PRE, None, BackwardPrefetch.BACKWARD_POST,
                BackwardPrefetch.BACKWARD_PRE]
    for k, block in enumerate(model.blocks):
        model.blocks[k] = FSDP(block, device_id=cpu, backward_prefetch=prefetch[k])
    return FSDP(model, device_id=cpu)


def build_fsdp2_unit_settings():
    """FSDP2, the last Block not resharded after forward (backward begins with it, as
    torchtitan wraps its last layer), and explicit prefetch lists that are not N-ahead: Block 0
    gathers Blocks 1 and 2 in forward, Block 2 gathers Block 3; in backward Block 3 gathers
    Block 1 (Block 2 then gathers itself in its pre-backward), Block 1 gathers Block 0."""
    from torch.distributed.fsdp import fully_shard
    model = resmlp.build_model()
    blocks = list(model.blocks)
    for k, block in enumerate(blocks):
        fully_shard(block, reshard_after_forward=k < len(blocks) - 1)
    fully_shard(model)
    blocks[0].set_modules_to_forward_prefetch([blocks[1], blocks[2]])
    blocks[2].set_modules_to_forward_prefetch([blocks[3]])
    blocks[3].set_modules_to_backward_prefetch([blocks[1]])
    blocks[1].set_modules_to_backward_prefetch([blocks[0]])
    return model
