#!/usr/bin/env python3
"""Tests of tools/record_program.py and its measured step (tools/recorder/measure.py) on real PyTorch (Debian's
python3-torch under /usr/bin/python3): the program of a small MLP worked out by hand, the meta
device giving the same program as the CPU, checkpoint regions, the schema, the measured block
(every byte of the MLP's step derived below) and the errors. Exit code 77 (ctest: skipped) when
torch is missing."""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOOLS = os.path.join(ROOT, "tools")
TOOL = os.path.join(TOOLS, "record_program.py")
EXAMPLES = os.path.join(TOOLS, "examples")
SCHEMA = os.path.join(ROOT, "traces", "program-v1.schema.json")
sys.path.insert(0, TOOLS)

try:
    import torch
except ImportError:
    print("record_program_test: torch is not installed (tools/setup.sh): skipped")
    sys.exit(77)

from recorder import measure, optimizer  # noqa: E402

# The recorder as the tests run it: any warning it gives (torch 2's TypedStorage deprecation,
# say) is an error, so a recording that warns fails its test.
RECORDER = [sys.executable, "-W", "error::UserWarning", "-W", "error::FutureWarning",
            "-W", "error::DeprecationWarning", TOOL, "--target", "cpu"]

# A model small enough to derive every byte: Linear(8, 16) -> relu -> Linear(16, 4) on a 2x8
# batch, the second layer in its own instance (class Head).
MODEL = textwrap.dedent('''
    import torch
    from torch import nn
    from torch.utils.checkpoint import checkpoint

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(16, 4)
        def forward(self, x):
            return self.fc(x)

    class Net(nn.Module):
        def __init__(self, ckpt=False):
            super().__init__()
            self.ckpt = ckpt
            self.fc = nn.Linear(8, 16)
            self.head = Head()
        def forward(self, x):
            h = torch.relu(self.fc(x))
            return checkpoint(self.head, h) if self.ckpt else self.head(h)

    def build_model():
        return Net()

    def build_checkpointed():
        return Net(ckpt=True)

    def make_batch():
        return torch.ones(2, 8)

    def wrap_head(module, name):
        return name == "head"

    class Repeat(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 4)
        def forward(self, x):
            repeats = torch.full((x.shape[0],), 2, dtype=torch.long, device=x.device)
            return self.fc(x.repeat_interleave(repeats, dim=0))

    def build_repeat():
        return Repeat()

    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)
        def forward(self, x):
            return self.fc(torch.relu(self.fc(x)))

    def build_twice():
        return Twice()

    class Local(nn.Module):
        def forward(self, x):
            a = torch.relu(x)
            b = a * 2
            return b + 1  # a, a local, lives until forward returns

    class WithLocal(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 16)
            self.local = Local()
        def forward(self, x):
            return checkpoint(self.local, self.fc(x))

    def build_with_local():
        return WithLocal()

    NOT_CALLABLE = 3

    class TiedLM(nn.Module):  # the LM head's weight is the embedding's
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 8)
            self.head = nn.Linear(8, 10, bias=False)
            self.head.weight = self.emb.weight
        def forward(self, idx):
            return self.head(self.emb(idx))

    def build_tied():
        return TiedLM()

    def make_ids():
        return torch.tensor([[1, 2, 3], [4, 5, 6]])

    class Logits(nn.Module):  # a dict output without a loss
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 4)
        def forward(self, x):
            return {"logits": self.fc(x)}

    def build_logits():
        return Logits()

    class CausalLM(nn.Module):  # Hugging Face's conventions: model(**batch) -> {"loss", ...}
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 8)
            self.head = nn.Linear(8, 10)
        def forward(self, input_ids=None, labels=None, use_cache=True):
            logits = self.head(self.emb(input_ids))
            loss = nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 10),
                                               labels[:, 1:].reshape(-1))
            return {"loss": loss, "logits": logits}

    def build_causal():
        return CausalLM()

    class GradModeBranch(nn.Module):  # another op under no_grad than with grad
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 4)
        def forward(self, x):
            h = self.fc(x)
            return (h * 2 if torch.is_grad_enabled() else h + 1).sum()

    def build_grad_mode_branch():
        return GradModeBranch()

    def make_dict_batch():
        ids = torch.tensor([[1, 2, 3], [4, 5, 6]])
        return {"input_ids": ids, "labels": ids.clone(), "use_cache": False}

    def make_nested_batch():
        return {"input_ids": [torch.ones(2)]}

    def build_raises():
        raise ValueError("no such config")

    class OutOfRange(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(4, 8)
        def forward(self, idx):
            return self.emb(idx + 10)

    def build_out_of_range():
        return OutOfRange()
''')


class RecorderCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.model = os.path.join(cls.dir.name, "net.py")
        with open(cls.model, "w") as f:
            f.write(MODEL)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def record(self, build="build_model", *extra, expect=0, batch="make_batch"):
        out = os.path.join(self.dir.name, "out.json")
        if os.path.exists(out):
            os.unlink(out)
        run = subprocess.run([*RECORDER, f"{self.model}:{build}", "--batch",
                              f"{self.model}:{batch}", *extra, "-o", out],
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, expect, run.stderr)
        if expect != 0:
            self.assertFalse(os.path.exists(out))
            return run.stderr
        with open(out) as f:
            return json.load(f)


class Program(RecorderCase):
    def test_mlp_program_by_hand(self):
        p = self.record("build_model", "--wrap", "Head", "--no-measure")
        self.assertEqual(p["format"], "bucketsim-program")
        # root owns fc (8*16 + 16 = 144), the Head instance its fc (16*4 + 4 = 68); each flat
        # parameter's views are the original parameters, named as the model names them, each
        # weight with its size in dim 0 (its output features).
        self.assertEqual(p["instances"], [
            {"name": "root", "params": [{"name": "flat_param_0", "numel": 144, "views": [
                {"name": "fc.weight", "numel": 128, "dim0": 16},
                {"name": "fc.bias", "numel": 16}]}]},
            {"name": "head", "params": [{"name": "flat_param_0", "numel": 68, "views": [
                {"name": "head.fc.weight", "numel": 64, "dim0": 4},
                {"name": "head.fc.bias", "numel": 4}]}]}])
        self.assertEqual(p["inputs"], [{"id": "t0", "bytes": 64, "dtype": "fp32",
                                        "shape": [2, 8], "name": "batch[0]"}])
        self.assertEqual(p["forward"], [
            {"op": "gather", "instance": "root"},
            # addmm(bias, x, W^T): 2*2*8*16 FLOPs; AddmmBackward keeps x (the batch) and makes
            # the gradients of W (through TBackward, which passes it on) and of the bias.
            {"op": "run", "name": "fc:addmm", "flops": 512.0, "uses": ["root"],
             "param_reads": ["fc.weight", "fc.bias"],
             "inputs": ["t0"], "saves": [{"tensor": "t0"}],
             "outputs": [{"id": "t1", "bytes": 128, "dtype": "fp32", "shape": [2, 16],
                          "requires_grad": True}]},
            # relu keeps its result, which the head's addmm keeps as its input too.
            {"op": "run", "name": "root:relu", "flops": 32.0, "inputs": ["t1"],
             "saves": [{"tensor": "t2"}],
             "outputs": [{"id": "t2", "bytes": 128, "dtype": "fp32", "shape": [2, 16],
                          "requires_grad": True}]},
            {"op": "gather", "instance": "head"},
            {"op": "run", "name": "head.fc:addmm", "flops": 256.0, "uses": ["head"],
             "param_reads": ["head.fc.weight", "head.fc.bias"], "inputs": ["t2"],
             "saves": [{"tensor": "t2"}],
             "outputs": [{"id": "t3", "bytes": 32, "dtype": "fp32", "shape": [2, 4],
                          "requires_grad": True}]},
            {"op": "end_forward", "instance": "head"},
            {"op": "end_forward", "instance": "root"},
            # the loss: a mean (MeanBackward keeps sizes only).
            {"op": "run", "name": "root:mean", "flops": 1.0, "inputs": ["t3"],
             "outputs": [{"id": "t4", "bytes": 4, "dtype": "fp32", "shape": [],
                          "requires_grad": True}]},
        ])
        self.assertEqual(p["loss"], "t4")
        self.assertNotIn("optimizer", p)  # no --optimizer

    def test_param_reads_of_a_module_applied_twice(self):
        # Each addmm's backward makes a gradient of the weight and the bias (bucketsim sums
        # the two, as the AccumulateGrad node's input buffer does); own parameters carry no
        # views. The same on meta, where nothing runs: the reads come from the autograd graph.
        for device in ("cpu", "meta"):
            with self.subTest(device):
                p = self.record("build_twice", "--no-flatten", "--no-measure", "--device", device)
                self.assertEqual(p["instances"], [{"name": "root", "params": [
                    {"name": "fc.weight", "numel": 64, "dim0": 8},
                    {"name": "fc.bias", "numel": 8}]}])
                reads = [(op["name"], op.get("param_reads")) for op in p["forward"]
                         if op["op"] == "run" and op.get("uses")]
                self.assertEqual(reads, [("fc:addmm", ["fc.weight", "fc.bias"])] * 2)

    def test_wrap_policy_is_the_same_as_wrap(self):
        by_class = self.record("build_model", "--wrap", "Head", "--no-measure")
        by_policy = self.record("build_model", "--wrap-policy", f"{self.model}:wrap_head",
                                "--no-measure")
        self.assertEqual(by_policy["instances"], by_class["instances"])
        self.assertEqual(by_policy["forward"], by_class["forward"])

    def test_meta_records_the_same_program(self):
        cpu = self.record("build_model", "--wrap", "Head", "--no-measure")
        meta = self.record("build_model", "--wrap", "Head", "--device", "meta")
        self.assertNotIn("measured", meta)
        self.assertEqual(meta["forward"], cpu["forward"])
        self.assertEqual(meta["instances"], cpu["instances"])

    def test_meta_runs_an_op_without_a_meta_kernel_on_cpu_and_says_so(self):
        # repeat_interleave with a tensor of repeats and no output_size has no meta kernel
        # (torch 1.13 and 2.6; 2.6 has one for an int number of repeats).
        out = os.path.join(self.dir.name, "repeat.json")
        run = subprocess.run([*RECORDER, f"{self.model}:build_repeat", "--batch",
                              f"{self.model}:make_batch", "--device", "meta", "-o", out],
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("record_program: note: no meta kernel in torch", run.stderr)
        self.assertIn("for: repeat_interleave; they ran on CPU ones of the same shapes: where "
                      "an output's size depends on values", run.stderr)
        with open(out) as f:
            p = json.load(f)
        self.assertIn("run on CPU for want of a meta kernel: repeat_interleave",
                      p["description"])
        # The repeats are values meta does not have: all ones, the linear layer sees a 2x8
        # batch (2*2*8*4 FLOPs), not the real 4x8. The stderr note says so.
        addmm = [op for op in p["forward"] if op.get("name") == "fc:addmm"]
        self.assertEqual(addmm[0]["flops"], 128.0)

    def test_gradient_kinds_are_measured_on_cpu(self):
        # The GPT's Q, K and V are viewed as (b, s, a, d) and transposed: ViewBackward then
        # reshapes a transposed gradient, which copies for Q and V. The formulas say pass (what
        # meta records); the hooked backward on CPU says new. The views to (b, s, a, d) are
        # the ones of shape [2, 64, 4, 32] (torch 2's matmul reshapes by view too, where
        # 1.13's called _reshape_alias).
        path = os.path.join(EXAMPLES, "tiny_gpt.py")
        programs = {}
        for device in ("cpu", "meta"):
            out = os.path.join(self.dir.name, f"gpt-{device}.json")
            run = subprocess.run([*RECORDER, f"{path}:build_model", "--batch",
                                  f"{path}:make_batch", "--device", device, "--no-measure",
                                  "-o", out], capture_output=True, text=True)
            self.assertEqual(run.returncode, 0, run.stderr)
            with open(out) as f:
                programs[device] = [op["inputs"][0] for op in json.load(f)["forward"]
                                    if op.get("name") == "blocks.0.attn:view"
                                    and op["outputs"][0]["shape"] == [2, 64, 4, 32]]
        self.assertEqual(len(programs["cpu"]), 3)  # q, k and v
        self.assertEqual([i["grad"] for i in programs["meta"]], ["pass"] * 3)
        # K is transposed again for Q K^T: its gradient arrives in view-compatible layout.
        kinds = ["new" if isinstance(i, str) else i["grad"] for i in programs["cpu"]]
        self.assertEqual(kinds, ["new", "pass", "new"])

    def test_checkpoint_region(self):
        p = self.record("build_checkpointed", "--wrap", "Head", "--no-measure")
        ops = [op["op"] for op in p["forward"]]
        self.assertEqual(ops, ["gather", "run", "run", "run", "checkpoint_begin", "gather",
                               "run", "end_forward", "checkpoint_end", "end_forward", "run"])
        # Recorded on CPU, checkpoint keeps the CPU RNG state, torch.get_rng_state(): 5056 B
        # of Mersenne Twister state on its ctx, alive until the loss is dropped (held).
        self.assertEqual(p["forward"][3], {
            "op": "run", "name": "root:checkpoint rng state",
            "outputs": [{"id": "t3", "bytes": 5056, "dtype": "uint8", "shape": [5056],
                         "name": "cpu rng state", "requires_grad": False}]})
        self.assertEqual(p["held"], ["t3"])
        # The region keeps its input, the relu's result; inside, the head's addmm saves it
        # too (what the recompute keeps).
        self.assertEqual(p["forward"][4]["saves"], [{"tensor": "t2"}])
        self.assertEqual(p["forward"][6]["saves"], [{"tensor": "t2"}])

    def test_a_non_reentrant_region_says_so(self):
        # resmlp checkpoints each Block with use_reentrant=False: every checkpoint_begin says
        # "reentrant": false (the emitter then stops the recompute early, as torch 2.x does);
        # the default (reentrant) leaves the key out.
        resmlp = os.path.join(EXAMPLES, "resmlp.py")
        out = os.path.join(self.dir.name, "resmlp-ckpt.json")
        run = subprocess.run([*RECORDER, f"{resmlp}:build_model_checkpointed", "--batch",
                              f"{resmlp}:make_batch", "--wrap", "Block", "--device", "meta",
                              "-o", out], capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        with open(out) as f:
            begins = [op for op in json.load(f)["forward"] if op["op"] == "checkpoint_begin"]
        self.assertEqual([op.get("reentrant") for op in begins], [False] * 4)
        p = self.record("build_checkpointed", "--wrap", "Head", "--no-measure")
        self.assertNotIn("reentrant", p["forward"][4])

    def test_module_calls(self):
        # Every module call but the root's, parents first: the ops its forward ran, without its
        # own instance's gather and end_forward (head: ops 4..5, between gather 3 and
        # end_forward 5), what gen program --checkpoint makes regions of.
        p = self.record("build_model", "--wrap", "Head", "--no-measure")
        self.assertEqual([op.get("name", op["op"]) for op in p["forward"]][3:6],
                         ["gather", "head.fc:addmm", "end_forward"])
        self.assertEqual(p["modules"], [
            {"name": "fc", "class": "Linear", "ops": [1, 2]},
            {"name": "head", "class": "Head", "ops": [4, 5]},
            {"name": "head.fc", "class": "Linear", "ops": [4, 5]}])
        # A checkpointed call: the region is the caller's, the call inside it.
        p = self.record("build_checkpointed", "--wrap", "Head", "--no-measure")
        self.assertEqual(p["modules"][1], {"name": "head", "class": "Head", "ops": [6, 7]})
        self.assertEqual(p["forward"][6]["name"], "head.fc:addmm")

    def test_a_local_outlives_its_last_reader_in_a_checkpointed_region(self):
        # Under no_grad (the real forward of the region) relu's result is freed when Local's
        # forward returns, after the add, not after the mul that reads it last: the add
        # releases it. The same on meta.
        for device in ("cpu", "meta"):
            with self.subTest(device):
                p = self.record("build_with_local", "--no-measure", "--device", device)
                runs = {op["name"]: op for op in p["forward"] if op["op"] == "run"}
                relu = runs["local:relu"]["outputs"][0]["id"]
                self.assertEqual(runs["local:add"]["releases"], [relu])
                self.assertNotIn("releases", runs["local:mul"])

    def test_a_local_outlives_its_last_reader_in_the_forward(self):
        # Hugging Face's causal LM: `logits` (addmm's storage) is a local of forward, alive
        # until it returns, past its last reader (the copy of its shifted slice); so is that
        # copy, cross_entropy's argument. The real forward holds both at the loss, where its
        # peak is: nll_loss, the last run, releases them. The same on meta.
        for device in ("cpu", "meta"):
            with self.subTest(device):
                p = self.record("build_causal", "--no-measure", "--device", device,
                                batch="make_dict_batch")
                runs = [op for op in p["forward"] if op["op"] == "run"]
                made = {}  # the first run of each name: the logits' slice is cloned first
                for op in runs:
                    made.setdefault(op["name"], op["outputs"][0]["id"])
                self.assertEqual(runs[-1]["name"], "root:nll_loss_forward")
                self.assertEqual(runs[-1]["releases"], [made["head:addmm"], made["root:clone"]])
                self.assertEqual([op["name"] for op in runs if "releases" in op],
                                 ["root:nll_loss_forward"])

    def test_a_forward_that_runs_other_ops_under_no_grad_keeps_its_recorded_lifetimes(self):
        out = os.path.join(self.dir.name, "branch.json")
        run = subprocess.run([*RECORDER, f"{self.model}:build_grad_mode_branch", "--batch",
                              f"{self.model}:make_batch", "--no-measure", "-o", out],
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("warning: the forward did not run again under no_grad as recorded (code "
                      "that branches on grad mode or random numbers?): the Python lifetimes of "
                      "its tensors are left out\n", run.stderr)
        with open(out) as f:
            runs = [op for op in json.load(f)["forward"] if op["op"] == "run"]
        self.assertEqual([op["name"].split(":")[-1] for op in runs], ["addmm", "mul", "sum"])
        self.assertFalse(any("releases" in op for op in runs))

    def test_batch_sizes(self):
        # The example GPT at batch sizes 2, 3 and 4: one program at 2, with what each sample
        # adds (Tools.Oracle holds it against real runs at 6 and 8). At batch size 1 its
        # attention takes a view where 2 copies: refused, with the op.
        gpt = os.path.join(EXAMPLES, "tiny_gpt.py")
        out = os.path.join(self.dir.name, "batched.json")
        for sizes, code in (("2,3,4", 0), ("1,2,3", 2)):
            with self.subTest(sizes):
                run = subprocess.run([*RECORDER, f"{gpt}:build_model", "--batch",
                                      f"{gpt}:make_batch_sized", "--batch-sizes", sizes,
                                      "--device", "meta", "-o", out],
                                     capture_output=True, text=True)
                self.assertEqual(run.returncode, code, run.stderr)
        # torch 1.13 names the view _reshape_alias, torch 2.6 view.
        self.assertRegex(run.stderr, r"record_program: error: --batch-sizes: at batch size 2 the "
                         r"forward is not the one at 1 \(op 24: 'blocks.0.attn:clone' where 1 has "
                         r"'blocks.0.attn:(_reshape_alias|view)'\): the model runs other ops there")
        with open(out) as f:
            p = json.load(f)
        self.assertEqual(p["batch"], {"size": 2, "checked": [2, 3, 4]})
        self.assertTrue(p["description"].endswith(", batch size 2"))
        # The tokens and the targets (int64, seq 64) grow with each sample; the positions
        # (arange) do not.
        self.assertEqual([(i["bytes"], i["bytes_per_sample"]) for i in p["inputs"]],
                         [(2 * 64 * 8, 64 * 8)] * 2)
        arange = next(op for op in p["forward"] if op.get("name") == "root:arange")
        self.assertEqual(arange["outputs"][0]["bytes"], 64 * 8)
        self.assertNotIn("bytes_per_sample", arange["outputs"][0])

    def test_seq_lens(self):
        # The example GPT at batch sizes 2, 3, 4 by lengths 16, 24, 32, 40 (twelve recordings on
        # meta): one program at (2, 16) with each tensor's growth (Tools.Oracle holds it against
        # real runs at shapes not recorded). The tokens grow with b x s, the causal mask with
        # s^2 alone, the attention scores with b x s^2.
        gpt = os.path.join(EXAMPLES, "tiny_gpt.py")
        out = os.path.join(self.dir.name, "shaped.json")
        run = subprocess.run([*RECORDER, f"{gpt}:build_model", "--batch",
                              f"{gpt}:make_batch_shaped", "--batch-sizes", "2,3,4", "--seq-lens",
                              "16,24,32,40", "--device", "meta", "-o", out],
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        with open(out) as f:
            p = json.load(f)
        self.assertEqual(p["seq"], {"length": 16, "checked": [16, 24, 32, 40]})
        self.assertTrue(p["description"].endswith(", batch size 2, sequence length 16"))
        self.assertEqual([(i["bytes"], i["bytes_per_sample"], i["bytes_per_token"],
                           i["bytes_per_sample_token"]) for i in p["inputs"]],
                         [(2 * 16 * 8, 16 * 8, 2 * 8, 8)] * 2)
        outputs = {op["name"]: op["outputs"][0] for op in p["forward"] if op["op"] == "run"}
        mask = outputs["blocks.0.attn:ones"]
        self.assertEqual((mask["bytes_per_token"], mask["bytes_per_token2"]), (2 * 16, 1))
        self.assertNotIn("bytes_per_sample", mask)
        scores = next(t for op in p["forward"] for t in op.get("outputs", [])
                      if t.get("shape") == [2 * 4, 16, 16] and t["dtype"] == "fp32")
        self.assertEqual(scores["bytes_per_sample_token2"], 4 * 4)  # 4 heads of fp32
        # Fewer than four lengths: refused before anything is recorded.
        run = subprocess.run([*RECORDER, f"{gpt}:build_model", "--batch",
                              f"{gpt}:make_batch_shaped", "--seq-lens", "16,24,32", "--device",
                              "meta", "-o", out], capture_output=True, text=True)
        self.assertEqual(run.returncode, 2)
        self.assertIn("record_program: error: --seq-lens 16,24,32: expected at least 4 distinct "
                      "sequence lengths >= 1", run.stderr)

    def test_seq_lens_alone(self):
        # The causal LM at lengths 32, 16, 24 and 40 alone: the program at 32, its tensors and
        # runs grown by the length only. At length 1 its attention takes a view where 2 copies:
        # refused, with the op.
        gpt = os.path.join(EXAMPLES, "tiny_gpt.py")
        out = os.path.join(self.dir.name, "long.json")

        def record(lengths):
            return subprocess.run([*RECORDER, f"{gpt}:build_model_causal_lm", "--batch",
                                   f"{gpt}:make_batch_causal_lm_shaped", "--seq-lens", lengths,
                                   "--device", "meta", "-o", out], capture_output=True, text=True)
        run = record("1,2,3,4")
        self.assertEqual(run.returncode, 2, run.stderr)
        # torch 1.13 names the view _reshape_alias, torch 2.6 view.
        self.assertRegex(run.stderr, r"record_program: error: --seq-lens: at sequence length 2 the "
                         r"forward is not the one at sequence length 1 \(op \d+: "
                         r"'[\w.]+:clone' where sequence length 1 has "
                         r"'[\w.]+:(_reshape_alias|view)'\): the model runs other ops there; "
                         r"give lengths that run the same ones")
        run = record("32,16,24,40")
        self.assertEqual(run.returncode, 0, run.stderr)
        with open(out) as f:
            text = f.read()
        p = json.loads(text)
        self.assertEqual(p["seq"], {"length": 32, "checked": [16, 24, 32, 40]})
        self.assertNotIn("batch", p)
        self.assertTrue(p["description"].endswith(", sequence length 32"))
        self.assertNotIn("_per_sample", text)
        self.assertEqual(p["inputs"][0]["bytes_per_token"], 2 * 8)  # batch 2 of int64 tokens
        self.assertNotIn("bytes_per_token2", p["inputs"][0])
        self.assertIn("flops_per_token2", text)  # the scores' matmuls

    def test_autocast(self):
        # The example GPT's forward under CPU autocast (bf16): its linear layers' weights and
        # inputs cast (_to_copy) and computed in bf16, the program's `autocast` key set
        # (Tools.Oracle holds it against real runs under autocast). Not on meta.
        gpt = os.path.join(EXAMPLES, "tiny_gpt.py")
        out = os.path.join(self.dir.name, "autocast.json")
        run = subprocess.run([*RECORDER, f"{gpt}:build_model", "--batch", f"{gpt}:make_batch",
                              "--wrap", "Block", "--autocast", "bf16", "--no-measure", "-o", out],
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        with open(out) as f:
            p = json.load(f)
        self.assertEqual(p["autocast"], "bf16")
        self.assertIn(", under cpu autocast bf16", p["description"])
        runs = {op["name"]: op for op in p["forward"] if op["op"] == "run"}
        self.assertEqual(runs["blocks.0.attn.q:addmm"]["outputs"][0]["dtype"], "bf16")
        self.assertIn("blocks.0.attn.q:_to_copy", runs)
        run = subprocess.run([*RECORDER, f"{gpt}:build_model", "--batch", f"{gpt}:make_batch",
                              "--autocast", "bf16", "--device", "meta", "-o", out],
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, 2)
        self.assertIn("record_program: error: --autocast: autocast does not apply to meta "
                      "tensors", run.stderr)

    def test_examples_validate_against_the_schema(self):
        try:
            import jsonschema
        except ImportError:  # torch 2.6's root (tools/torch2.sh) has no python3-jsonschema
            self.skipTest(f"jsonschema is not installed for {sys.executable}")
        with open(SCHEMA) as f:
            schema = json.load(f)
        for name, model, wrap in (("mlp", "mlp.py:build_model_checkpointed", "Layer"),
                                  ("convnet", "convnet.py:build_model", "BatchNorm2d"),
                                  ("gpt", "tiny_gpt.py:build_model_checkpointed", "Block")):
            with self.subTest(name):
                out = os.path.join(self.dir.name, name + ".json")
                path = os.path.join(EXAMPLES, model)
                run = subprocess.run([*RECORDER, path, "--batch",
                                      f"{path.split(':')[0]}:make_batch", "--wrap", wrap,
                                      "--device", "meta", "-o", out],
                                     capture_output=True, text=True)
                self.assertEqual(run.returncode, 0, run.stderr)
                with open(out) as f:
                    jsonschema.validate(json.load(f), schema)


class Measured(RecorderCase):
    def test_every_byte_of_the_step(self):
        p = self.record("build_model", "--wrap", "Head", "--optimizer", "sgd-momentum")
        m = p["measured"]
        self.assertEqual(m["device"], "cpu")
        marks = {x["name"]: x["allocated_bytes"] for x in m["marks"]}
        # Every allocation counts rounded up to 512 B. start: four parameters (W1 512 B, b1
        # 64 B, W2 256 B, b2 16 B) and the batch (64 B): 5 x 512.
        # after fwd: + relu's result (fc's output died with relu, not in place; the head's
        # output after the mean) and the loss: 7 x 512.
        # after bwd: relu's result released, four parameter gradients, the loss: 10 x 512.
        # after step: + four momentum buffers. done: gradients and the loss dropped: 9 x 512.
        self.assertEqual(marks, {"start": 5 * 512, "after fwd": 7 * 512,
                                 "after bwd": 10 * 512, "after step": 14 * 512,
                                 "done": 9 * 512})

    def test_optimizer_key_says_what_the_step_was_measured_with(self):
        # Only what was given is in the key (gen program takes torch's defaults for the target
        # where the rest is absent); the measured step ran with the recording device's: on the
        # CPU torch picks the for-loop, AdamW decays by 0.01. Adam's state is three tensors per parameter, one 512 B block each here:
        # exp_avg, exp_avg_sq and the step count (a 4 B tensor, on the CPU whatever the
        # implementation; on CUDA a CPU tensor unless fused): after step = after bwd + 12 x 512.
        for flags, key, ran in ((["--optimizer", "adamw"], {"name": "adamw"},
                                 "(for-loop, weight decay 0.01)"),
                                (["--optimizer", "adam", "--optimizer-impl", "foreach",
                                  "--weight-decay", "0.1"],
                                 {"name": "adam", "impl": "foreach", "weight_decay": 0.1},
                                 "(foreach, weight decay 0.1)")):
            with self.subTest(key["name"]):
                p = self.record("build_model", *flags)
                self.assertEqual(p["optimizer"], key)
                self.assertIn(f"; optimizer {key['name']} {ran}", p["measured"]["note"])
                marks = {x["name"]: x["allocated_bytes"] for x in p["measured"]["marks"]}
                self.assertEqual(marks["after step"], marks["after bwd"] + 12 * 512)

    def test_sentinel_pairs_are_counted(self):
        # Figures from a hand-written event list: 1000 B, mark, +600 -600, mark, ...
        s = measure.MARK_BYTES
        events = [1000, s, -s, 600, -600, s, -s, 100, s, -s, s, -s, -100, s, -s]
        marks, peaks = measure.figures_from_events(events)
        self.assertEqual([m[0] for m in marks], [1000, 1000, 1100, 1100, 1000])
        self.assertEqual([m[1] for m in marks], [1024, 1024, 1536, 1536, 1024])
        self.assertEqual([p[0] for p in peaks], [1600, 1100, 1100, 1100])
        self.assertEqual([p[1] for p in peaks], [2048, 1536, 1536, 1536])  # 1024 + 1024


class Errors(RecorderCase):
    def test_missing_function(self):
        err = self.record("no_such_fn", expect=2)
        self.assertIn(f"model: '{self.model}' defines no 'no_such_fn' (it defines: ", err)
        self.assertIn("build_model", err)

    def test_missing_file(self):
        run = subprocess.run([*RECORDER, "nope.py:build_model", "--batch",
                              "nope.py:make_batch", "-o", "x.json"], capture_output=True,
                             text=True)
        self.assertEqual(run.returncode, 2)
        self.assertIn("model: no such file 'nope.py'", run.stderr)

    def test_spec_without_function(self):
        run = subprocess.run([*RECORDER, self.model, "--batch",
                              f"{self.model}:make_batch", "-o", "x.json"],
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, 2)
        self.assertIn("must be FILE.py:FUNCTION", run.stderr)

    def test_not_callable(self):
        err = self.record("NOT_CALLABLE", expect=2)
        self.assertIn("is not callable", err)

    def test_unknown_wrap_class(self):
        err = self.record("build_model", "--wrap", "TransformerBlock", expect=2)
        self.assertIn("--wrap TransformerBlock: the model has no module of that class (its "
                      "classes: Head, Linear, Net)", err)

    def test_an_unknown_flag_gets_the_closest_one(self):
        err = self.record("build_model", "--wrapp", "Head", expect=2)
        self.assertIn("record_program: error: unknown flag '--wrapp'; did you mean '--wrap'? "
                      "(see 'record_program.py --help')", err)
        err = self.record("build_model", "--no-mesure", expect=2)
        self.assertIn("did you mean '--no-measure'?", err)

    def test_optimizer_settings_need_the_optimizer(self):
        err = self.record("build_model", "--weight-decay", "0.1", expect=2)
        self.assertIn("--weight-decay needs --optimizer", err)

    def test_fused_where_this_torch_has_none(self):
        if "cpu" in optimizer.fused_devices():
            self.skipTest(f"torch {torch.__version__} has fused optimizers on the CPU")
        err = self.record("build_model", "--optimizer", "adam", "--optimizer-impl", "fused",
                          expect=2)
        self.assertIn(f"--optimizer-impl fused: torch {torch.__version__}'s fused Adam does not "
                      "run on cpu (only on cuda); --no-measure records the program", err)
        err = self.record("build_model", "--optimizer", "sgd", "--optimizer-impl", "fused",
                          expect=2)
        self.assertIn("SGD has no fused implementation", err)

    def test_build_model_returns_no_module(self):
        err = self.record("make_batch", expect=2)
        self.assertIn("net.py:make_batch() returned Tensor, not a torch.nn.Module", err)

    def test_a_raising_function_is_named_with_its_line(self):
        err = self.record("build_raises", expect=2)
        self.assertIn("net.py:build_raises() raised ValueError: no such config, at net.py:", err)
        self.assertIn(" in build_raises: `raise ValueError(\"no such config\")`", err)

    def test_a_raising_forward_names_the_module_and_the_line(self):
        err = self.record("build_out_of_range", "--no-measure", expect=2, batch="make_ids")
        self.assertIn("the model's forward raised IndexError: index out of range in self, in "
                      "module 'emb' (Embedding), at net.py:", err)
        self.assertIn(" in forward: `return self.emb(idx + 10)`", err)

    def test_a_tied_weight_split_across_instances_is_refused(self):
        err = self.record("build_tied", "--wrap", "Embedding", expect=2, batch="make_ids")
        self.assertIn("a parameter is shared across FSDP instances: 'emb.weight' (instance "
                      "'emb'), 'head.weight' (instance 'root')", err)
        # In one instance (the root's) it is recorded, once, by its first name.
        program = self.record("build_tied", "--no-measure", batch="make_ids")
        self.assertEqual([p["name"] for p in program["instances"][0]["params"][0]["views"]],
                         ["emb.weight"])

    def test_a_dict_output_needs_its_loss(self):
        err = self.record("build_logits", expect=2)
        self.assertIn("the forward returned a dict without a 'loss' (its keys: 'logits'): give "
                      "the model what it computes its loss from", err)

    def test_a_dict_batch_is_the_forwards_keyword_arguments(self):
        program = self.record("build_causal", batch="make_dict_batch")
        self.assertEqual([i["name"] for i in program["inputs"]],
                         ["batch['input_ids']", "batch['labels']"])
        self.assertEqual([i["shape"] for i in program["inputs"]], [[2, 3], [2, 3]])
        self.assertIn("measured", program)
        # The loss is the model's own: cross_entropy's output, a scalar.
        loss = next(o for op in program["forward"] if op["op"] == "run"
                    for o in op["outputs"] if o["id"] == program["loss"])
        self.assertEqual(loss["shape"], [])

    def test_a_nested_batch_is_refused(self):
        err = self.record("build_causal", expect=2, batch="make_nested_batch")
        self.assertIn("net.py:make_nested_batch()['input_ids'] is a list: the forward's arguments "
                      "must be tensors or plain values", err)


if __name__ == "__main__":
    unittest.main()
