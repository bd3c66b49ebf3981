#!/usr/bin/env python3
"""tools/record_program.py on a model that build_model() returns already wrapped, under torch
2.6 (tools/torch2.sh python -m unittest record_program_torch2_test): the units and the program
come from the model as --wrap gives them from the same model unwrapped, the settings are
PyTorch's own (the program's "fsdp" key), and the measured step is the unwrapped model's. Run
once as the recorder runs (a subprocess: the recorder starts a fake process group of world size
2 itself) and once in this process under a world-size-1 gloo group the test starts. Exit code
77 (ctest: skipped) without FSDP1 and fully_shard (torch before 2.6)."""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools")
sys.path.insert(0, TOOLS)

try:
    import torch
    from torch.distributed.fsdp import FSDPModule  # torch 2.6
except ImportError as e:
    print(f"record_program_torch2_test: needs torch 2.6's FSDP ({e}): skipped")
    sys.exit(77)

from recorder.load import load_function  # noqa: E402
from recorder.record import record  # noqa: E402
from recorder.wrapped_fsdp import unwrap_fsdp  # noqa: E402
from record_program_test import RECORDER  # noqa: E402

# Three blocks and a head; the blocks are the units. build_fsdp1 and build_fsdp2 wrap it as a
# user would before handing it to the recorder, block 1 with other settings than the rest.
MODEL = textwrap.dedent('''
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(16, 32)
            self.fc2 = nn.Linear(32, 16)
        def forward(self, x):
            return x + self.fc2(torch.relu(self.fc1(x)))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(8, 16)
            self.blocks = nn.Sequential(Block(), Block(), Block())
            self.head = nn.Linear(16, 4)
        def forward(self, x):
            return self.head(self.blocks(self.embed(x)))

    def build_plain():
        return Net()

    def build_fsdp1():
        from torch.distributed.fsdp import (BackwardPrefetch, FullyShardedDataParallel as FSDP,
                                            MixedPrecision, ShardingStrategy)
        model = Net()
        cpu = torch.device("cpu")
        mp = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for k, block in enumerate(model.blocks):
            model.blocks[k] = FSDP(block, device_id=cpu, mixed_precision=mp,
                                   sharding_strategy=ShardingStrategy.SHARD_GRAD_OP,
                                   backward_prefetch=None if k == 1 else
                                   BackwardPrefetch.BACKWARD_PRE)
        return FSDP(model, device_id=cpu, mixed_precision=mp,
                    sharding_strategy=ShardingStrategy.SHARD_GRAD_OP)

    def build_fsdp2():
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        model = Net()
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16)
        for k, block in enumerate(model.blocks):
            fully_shard(block, mp_policy=mp, reshard_after_forward=k != 1)
        model.blocks[0].set_modules_to_forward_prefetch([model.blocks[2]])
        model.blocks[2].set_modules_to_backward_prefetch([model.blocks[1], model.blocks[0]])
        return fully_shard(model, mp_policy=mp)

    def make_batch():
        return torch.ones(2, 8)
''')

# Each block's unit: one flat parameter, its views the block's parameters (FSDP1).
BLOCK_FLAT = [[{"name": "flat_param_0", "numel": 1072, "views": [
    {"name": f"blocks.{k}.fc1.weight", "numel": 512, "dim0": 32},
    {"name": f"blocks.{k}.fc1.bias", "numel": 32},
    {"name": f"blocks.{k}.fc2.weight", "numel": 512, "dim0": 16},
    {"name": f"blocks.{k}.fc2.bias", "numel": 16}]}] for k in range(3)]

FSDP1_SETTINGS = {
    "sharding_strategy": "SHARD_GRAD_OP", "backward_prefetch": "BACKWARD_PRE",
    "forward_prefetch": False, "limit_all_gathers": True, "use_orig_params": False,
    "mixed_precision": {"param_dtype": "bfloat16", "reduce_dtype": "float32",
                        "buffer_dtype": None, "keep_low_precision_grads": False,
                        "cast_forward_inputs": False, "cast_root_forward_inputs": True},
    "cpu_offload": {"offload_params": False}}

FSDP2_MP = {"param_dtype": "bfloat16", "reduce_dtype": None, "output_dtype": None,
            "cast_forward_inputs": True}

# The settings of build_fsdp2's units that differ from the root's.
FSDP2_UNITS = {"blocks.0": {"modules_to_forward_prefetch": ["blocks.2"]},
               "blocks.1": {"reshard_after_forward": False},
               "blocks.2": {"modules_to_backward_prefetch": ["blocks.1", "blocks.0"]}}


class Wrapped(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.model = os.path.join(cls.dir.name, "wrapped_net.py")
        with open(cls.model, "w") as f:
            f.write(MODEL)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def record(self, build, *extra, expect=0):
        out = os.path.join(self.dir.name, f"{build}.json")
        run = subprocess.run([*RECORDER, f"{self.model}:{build}", "--batch",
                              f"{self.model}:make_batch", *extra, "-o", out],
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, expect, run.stderr)
        if expect:
            return run.stderr
        with open(out) as f:
            return json.load(f)

    def test_fsdp1_units_settings_and_program_are_read_from_the_model(self):
        plain = self.record("build_plain", "--wrap", "Block")
        p = self.record("build_fsdp1")
        self.assertEqual(p["instances"], plain["instances"])
        self.assertEqual([i["name"] for i in p["instances"]],
                         ["root", "blocks.0", "blocks.1", "blocks.2"])
        self.assertEqual([i["params"] for i in p["instances"][1:]], BLOCK_FLAT)
        self.assertEqual(p["forward"], plain["forward"])
        self.assertEqual(p["fsdp"], {"implementation": "fsdp1", "settings": FSDP1_SETTINGS,
                                     "instances": {"blocks.1": {"backward_prefetch": None}}})
        # The step measured is the unwrapped model's: FSDP's own memory is gone before it.
        self.assertEqual(p["measured"]["marks"], plain["measured"]["marks"])
        self.assertEqual(p["measured"]["phase_peaks"], plain["measured"]["phase_peaks"])

    def test_fsdp2_units_settings_and_program_are_read_from_the_model(self):
        plain = self.record("build_plain", "--wrap", "Block", "--no-flatten")
        p = self.record("build_fsdp2")
        self.assertEqual(p["instances"], plain["instances"])  # each parameter its own
        self.assertEqual(p["forward"], plain["forward"])
        # Block 1 keeps its parameters gathered after forward; the root and the others do not.
        # Blocks 0 and 2 prefetch explicitly, the units named as the program's instances.
        self.assertEqual(p["fsdp"], {
            "implementation": "fsdp2",
            "settings": {"reshard_after_forward": True, "mp_policy": FSDP2_MP,
                         "offload_policy": None, "modules_to_forward_prefetch": [],
                         "modules_to_backward_prefetch": []},
            "instances": FSDP2_UNITS})
        self.assertEqual(p["measured"]["marks"], plain["measured"]["marks"])
        self.assertEqual(p["measured"]["phase_peaks"], plain["measured"]["phase_peaks"])

    def test_wrap_with_a_wrapped_model_is_an_error(self):
        for build in ("build_fsdp1", "build_fsdp2"):
            with self.subTest(build):
                err = self.record(build, "--wrap", "Block", "--no-measure", expect=2)
                self.assertIn("record_program: error: build_model() returned a model already "
                              "wrapped with fsdp", err)
                self.assertIn("--wrap and --wrap-policy apply only to an unwrapped model", err)
        err = self.record("build_fsdp1", "--no-flatten", "--no-measure", expect=2)
        self.assertIn("--no-flatten does not apply", err)


class UnderAOneRankGlooGroup(unittest.TestCase):
    """The user's own process group is used as it is: at world size 1 FSDP1 makes every
    strategy NO_SHARD, and that is what the settings say; the parameters are the model's."""

    @classmethod
    def setUpClass(cls):
        import torch.distributed as dist
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        cls.dir = tempfile.TemporaryDirectory()
        path = os.path.join(cls.dir.name, "wrapped_net_gloo.py")
        with open(path, "w") as f:
            f.write(MODEL)
        cls.fns = {name: load_function(f"{path}:{name}", name)
                   for name in ("build_plain", "build_fsdp1", "build_fsdp2", "make_batch")}

    @classmethod
    def tearDownClass(cls):
        import torch.distributed as dist
        dist.destroy_process_group()
        cls.dir.cleanup()

    def record(self, build, wrap=(), flatten=True):
        program, rec = record(self.fns[build], self.fns["make_batch"], list(wrap), None, "cpu",
                              "test", flatten=flatten)
        self.assertFalse(rec.own_group)
        return program

    def test_fsdp1(self):
        plain = self.record("build_plain", ["Block"])
        p = self.record("build_fsdp1")
        self.assertEqual(p["instances"], plain["instances"])
        self.assertEqual(p["forward"], plain["forward"])
        self.assertEqual(p["fsdp"]["settings"]["sharding_strategy"], "NO_SHARD")
        self.assertEqual(p["fsdp"]["instances"], {"blocks.1": {"backward_prefetch": None}})

    def test_fsdp2(self):
        plain = self.record("build_plain", ["Block"], flatten=False)
        p = self.record("build_fsdp2")
        self.assertEqual(p["instances"], plain["instances"])
        self.assertEqual(p["forward"], plain["forward"])
        self.assertEqual(p["fsdp"]["instances"], FSDP2_UNITS)

    def test_unwrapped_parameters_are_the_models(self):
        torch.manual_seed(1)
        wrapped = self.fns["build_fsdp2"]()
        model, instances, _ = unwrap_fsdp(wrapped)
        torch.manual_seed(1)
        plain = self.fns["build_plain"]()
        self.assertEqual(len(instances), 4)
        self.assertFalse([m for m in model.modules() if isinstance(m, FSDPModule)])
        for (name, p), (plain_name, q) in zip(model.named_parameters(), plain.named_parameters()):
            self.assertEqual(name, plain_name)
            self.assertIs(type(p), torch.nn.Parameter)
            self.assertTrue(torch.equal(p, q), name)


if __name__ == "__main__":
    unittest.main()
