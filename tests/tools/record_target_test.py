#!/usr/bin/env python3
"""tools/record_program.py --target: a recording on meta or cpu written as the target device's
kernels save and allocate (tools/recorder/target.py), under torch 2.6 (tools/torch2.sh: torch
1.13 has no scaled_dot_product_attention). The model is attention_model.py (rotary embedding
through a complex64 buffer, GQA expanded, causal SDPA, fp32 loss), in bf16 (--dtype bf16).

The CUDA flash formula is ../shared/reference/cuda_from_cpu.md 2.3's: with N = B x H x S x D,
flash saves q, k, v and its output (bf16, 4 x 2N) and an fp32 logsumexp [B, H, S] (4 B H S),
its output the out-projection's input (one storage); its backward makes softmax_d fp32
[B, H, round128(S)] and dq_accum fp32 [B, round128(S), H, round32(D)] besides dq, dk, dv. The
math path a meta recording otherwise takes saves fp32 q, k, v and the fp32 B x H x S x S
probabilities instead."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(HERE, "..", "..", "tools")
MODEL = os.path.join(HERE, "attention_model.py")
B, H, D = 2, 4, 32


def round_up(n, m):
    return (n + m - 1) // m * m


def storages(program):
    """Program tensor id -> (bytes of its storage, the id that owns the storage)."""
    owner, size = {}, {}
    for t in program["inputs"]:
        owner[t["id"]], size[t["id"]] = t["id"], t["bytes"]
    for op in program["forward"]:
        for e in op.get("outputs", []):
            owner[e["id"]] = owner[e["alias"]] if "alias" in e else e["id"]
            size[e["id"]] = size[owner[e["id"]]] if "alias" in e else e["bytes"]
    return owner, size


def saved_bytes(program, run):
    """The bytes a run's saves hold: each storage it saves once, and its fresh saves."""
    owner, size = storages(program)
    stores = {owner[s["tensor"]] for s in run["saves"] if "tensor" in s}
    return sum(size[t] for t in stores) + \
        sum(s["bytes"] for s in run["saves"] if "tensor" not in s)


class RecordTarget(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="record_target.")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def record(self, *flags, device="meta", seq=256, mask=False, expect=0):
        path = os.path.join(self.tmp.name, f"p{len(os.listdir(self.tmp.name))}.json")
        env = dict(os.environ, ATTN_SEQ=str(seq), ATTN_MASK="1" if mask else "0")
        run = subprocess.run([sys.executable, os.path.join(TOOLS, "record_program.py"),
                              f"{MODEL}:build_model", "--batch", f"{MODEL}:make_batch",
                              "--wrap", "Attn", "--dtype", "bf16", "--no-measure",
                              "--device", device, *flags, "-o", path],
                             capture_output=True, text=True, env=env)
        self.assertEqual(run.returncode, expect, run.stderr)
        if expect:
            return run.stderr
        with open(path) as f:
            return json.load(f), run.stderr

    def record_llama(self, *flags):
        """tools/examples/llama.py (2 blocks) recorded on meta for CUDA: the program and the
        recorder's stdout."""
        llama = os.path.join(TOOLS, "examples", "llama.py")
        path = os.path.join(self.tmp.name, f"llama{len(os.listdir(self.tmp.name))}.json")
        run = subprocess.run([sys.executable, os.path.join(TOOLS, "record_program.py"),
                              f"{llama}:build_model", "--batch", f"{llama}:make_batch",
                              "--wrap", "TransformerBlock", "--device", "meta", *flags,
                              "-o", path], capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        with open(path) as f:
            return json.load(f), run.stdout

    @staticmethod
    def attention_run(program):
        runs = [op for op in program["forward"] if op["op"] == "run" and
                "attention" in op["name"]]
        assert len(runs) == 1, [op["name"] for op in runs]
        return runs[0]

    def test_llama_8b_on_meta_saves_cuda_flash_per_block(self):
        """tools/examples/llama.py at Llama 3 8B's shape, unmodified (complex64 rotary buffer,
        GQA through repeat_kv, causal SDPA), recorded on meta for an H100: each of its 32 blocks
        runs CUDA's flash kernel and saves the flash formula's bytes, 538,968,064 (the math
        path a meta recording took before saved 17,985,175,552)."""
        llama = os.path.join(TOOLS, "examples", "llama.py")
        path = os.path.join(self.tmp.name, "llama-8b.json")
        run = subprocess.run([sys.executable, os.path.join(TOOLS, "record_program.py"),
                              f"{llama}:build_model_8b", "--batch", f"{llama}:make_batch_8b",
                              "--wrap", "TransformerBlock", "--no-flatten", "--device", "meta",
                              "--dtype", "bf16", "--optimizer", "adamw", "--optimizer-impl",
                              "foreach", "-o", path],
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("8,030,261,248 parameters", run.stdout + run.stderr)
        with open(path) as f:
            program = json.load(f)
        # The program shipped for the benchmark (bench/program_bench.cc) is this recording.
        with open(os.path.join(TOOLS, "..", "traces", "llama3-8b.program.json")) as f:
            shipped = json.load(f)
        self.assertEqual({k: v for k, v in shipped.items() if k != "description"},
                         {k: v for k, v in program.items() if k != "description"},
                         "traces/llama3-8b.program.json is not what the recorder writes now: "
                         "record it again (the command in tools/examples/llama.py)")
        self.assertEqual(program["target"]["attention"], {"flash": 32})
        runs = [op for op in program["forward"]
                if op["op"] == "run" and "scaled_dot_product" in op["name"]]
        self.assertEqual(len(runs), 32)
        b, h, s, d = 2, 32, 8192, 128
        for run in runs:
            self.assertTrue(run["name"].endswith("_scaled_dot_product_flash_attention"), run["name"])
            self.assertEqual(saved_bytes(program, run), 4 * 2 * b * h * s * d + 4 * b * h * s)
        self.assertEqual(4 * 2 * b * h * s * d + 4 * b * h * s, 538_968_064)
        rotary = next(t for t in program["inputs"] if t.get("name") == "buffer freqs_cis")
        self.assertEqual((rotary["dtype"], rotary["bytes"]), ("complex64", 8192 * 64 * 8))

    def test_the_models_own_fp32_casts_are_counted_where_they_are_no_ops(self):
        """llama.py's x.float() (RMSNorm, rotary q and k) and logits.float(): in an fp32
        recording no-ops that no run shows, counted in target.fp32_upcasts; in a bf16 one
        copies, recorded as runs, so none is counted."""
        # 2 blocks: 2 norms each and the final one, q and k per block, the logits.
        self.assertEqual(self.record_llama()[0]["target"]["fp32_upcasts"],
                         {"calls": 2 * 2 + 1 + 2 * 2 + 1,
                          "modules": ["Attention", "RMSNorm", "Transformer"]})
        self.assertNotIn("fp32_upcasts", self.record_llama("--dtype", "bf16")[0]["target"])

    def test_an_fp32_recording_records_the_bf16_run_beside_it(self):
        """llama.py recorded in fp32 on meta (--mixed-precision auto, the default) also holds the
        model recorded in bf16 (its low_precision key): its own x.float() copies, flash
        attention, event for event what a --dtype bf16 recording is
        (tools/device/program_diff.py: no difference), which gen program --activation-dtype
        param-dtype then emits (tests/gen/model_program_file_test.cc); --mixed-precision off leaves
        it out, and a bf16 recording has none."""
        sys.path.insert(0, os.path.join(TOOLS, "device"))
        import program_diff
        recorded = self.record_llama
        fp32, said = recorded()
        self.assertIn("and its bf16 recording (low_precision)", said)
        bf16, _ = recorded("--dtype", "bf16")
        twin = fp32["low_precision"]
        self.assertEqual(twin["dtype"], "bf16")
        self.assertEqual(twin["target"]["attention"], {"flash": 2})
        self.assertEqual(fp32["target"]["attention"], {"efficient": 2})
        keys = set(twin) - {"dtype", "target"}
        self.assertLessEqual({"inputs", "forward", "loss", "modules"}, keys)
        self.assertEqual("held" in keys, "held" in bf16)
        shown, total = program_diff.differences({k: twin[k] for k in keys},
                                                {k: bf16[k] for k in keys}, 5)
        self.assertEqual(total, 0, shown)
        self.assertNotIn("low_precision", bf16)
        self.assertNotIn("low_precision", recorded("--mixed-precision", "off")[0])
        self.assertIn("low_precision", recorded("--mixed-precision", "bf16")[0])
        stderr = self.record("--mixed-precision", "bf16", expect=2)
        self.assertIn("--mixed-precision bf16: the recording is not fp32 (--dtype bf16", stderr)

    def test_a_selective_checkpointing_policy_is_recorded_as_it_decides(self):
        """tiny_gpt.py's build_model_sdpa_sac checkpoints each Block with a context_fn whose
        policy saves attention and every other addmm: the recorder asks it of every op the
        region dispatches, as torch does, and marks what it saves ("policy": "save"), attention
        by the target's op (CUDA's flash kernel on a meta recording for CUDA)."""
        gpt = os.path.join(TOOLS, "examples", "tiny_gpt.py")
        path = os.path.join(self.tmp.name, "gpt-sac.json")
        run = subprocess.run([sys.executable, os.path.join(TOOLS, "record_program.py"),
                              f"{gpt}:build_model_sdpa_sac", "--batch", f"{gpt}:make_batch",
                              "--wrap", "Block", "--device", "meta", "--mixed-precision", "off",
                              "-o", path], capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        with open(path) as f:
            program = json.load(f)
        saved = [op["name"] for op in program["forward"] if op.get("policy") == "save"]
        per_block = ["attn.q:addmm", "attn.v:addmm",
                     "attn:_scaled_dot_product_efficient_attention", "mlp.fc:addmm"]
        self.assertEqual(saved, [f"blocks.{b}.{name}" for b in range(2) for name in per_block])
        begins = [op for op in program["forward"] if op["op"] == "checkpoint_begin"]
        self.assertEqual([b.get("reentrant") for b in begins], [False, False])

    def test_meta_records_cuda_flash_saves(self):
        program, err = self.record()
        run = self.attention_run(program)
        s = 256
        n = B * H * s * D
        self.assertTrue(run["name"].endswith(":_scaled_dot_product_flash_attention"), run["name"])
        self.assertEqual(saved_bytes(program, run), 4 * 2 * n + 4 * B * H * s)
        self.assertEqual([(w["name"], w["bytes"]) for w in run["workspace"]],
                         [("softmax_d", 4 * B * H * round_up(s, 128)),
                          ("dq_accum", 4 * B * round_up(s, 128) * H * round_up(D, 32))])
        self.assertEqual(program["target"], {"device": "cuda", "gpu": "sm90",
                                             "attention": {"flash": 1}})
        self.assertIn(", for cuda sm90", program["description"])
        self.assertNotIn("warning", err)
        # The output is the out-projection's input: only views of it in between, no copy.
        forward = program["forward"]
        at = forward.index(run)
        out = run["outputs"][0]["id"]
        owner, _ = storages(program)
        mm = next(op for op in forward[at + 1:] if op["name"].endswith(":mm"))
        self.assertTrue(any(owner[i if isinstance(i, str) else i["tensor"]] == out
                            for i in mm["inputs"]), mm)
        self.assertTrue(all(all("alias" in e for e in op["outputs"])
                            for op in forward[at + 1:forward.index(mm)] if op["op"] == "run"))

    def test_meta_and_cpu_recordings_for_cuda_are_the_same_program(self):
        meta, _ = self.record()
        cpu, _ = self.record(device="cpu")

        def shape(p):
            return [(op["op"], op.get("name"), op.get("inputs"),
                     [(e["id"], e["bytes"], e["dtype"], e.get("alias")) for e in
                      op.get("outputs", [])], op.get("saves"), op.get("workspace"),
                     op.get("releases")) for op in p["forward"]]
        self.assertEqual(shape(meta), shape(cpu))
        self.assertEqual(meta["target"], cpu["target"])

    def test_target_cpu_on_meta_is_the_cpu_flash_kernel(self):
        program, _ = self.record("--target", "cpu")
        run = self.attention_run(program)
        self.assertTrue(run["name"].endswith(":_scaled_dot_product_flash_attention_for_cpu"))
        self.assertNotIn("workspace", run)
        self.assertEqual(program["target"], {"device": "cpu", "attention": {"cpu-flash": 1}})
        cpu, _ = self.record("--target", "cpu", device="cpu")
        self.assertEqual([op.get("saves") for op in program["forward"]],
                         [op.get("saves") for op in cpu["forward"]])

    def test_without_a_target_meta_takes_the_math_path(self):
        # What a meta recording saved before --target: the fp32 probabilities, B x H x S x S.
        program, _ = self.record("--target", "cuda", "--sdpa-backend", "math")
        self.assertNotIn("attention", program["target"])
        probs = [e for op in program["forward"] for e in op.get("outputs", [])
                 if e.get("shape") == [B, H, 256, 256] and e["dtype"] == "fp32"]
        self.assertTrue(probs)

    def test_efficient_pads_the_logsumexp_to_32(self):
        # An attn_mask rules flash out: efficient, whose lse is [B, H, ceil(S / 32) x 32].
        for device in ("meta", "cpu"):
            program, err = self.record(device=device, seq=200, mask=True)
            run = self.attention_run(program)
            self.assertTrue(run["name"].endswith(":_scaled_dot_product_efficient_attention"))
            lse = [e for e in run["outputs"] if e["dtype"] == "fp32"]
            self.assertEqual([(e["bytes"], e["shape"]) for e in lse],
                             [(4 * B * H * 224, [B, H, 224])])
            self.assertIn("_scaled_dot_product_efficient_attention (backward)", err)
            self.assertEqual(program["target"]["unmodelled"],
                             ["_scaled_dot_product_efficient_attention (backward): its "
                              "backward's temporaries beyond dq, dk, dv are not modelled"])

    def test_backends_by_gpu_and_override(self):
        # sm75 has no bf16 flash or efficient kernel: math.
        program, _ = self.record("--gpu", "t4")
        self.assertEqual(program["target"], {"device": "cuda", "gpu": "sm75"})
        # cuDNN's philox seed and offset are device tensors (2 x 8 B, 512 B blocks).
        for device in ("meta", "cpu"):
            program, _ = self.record("--sdpa-backend", "cudnn", device=device)
            run = self.attention_run(program)
            self.assertTrue(run["name"].endswith(":_scaled_dot_product_cudnn_attention"))
            n = B * H * 256 * D
            self.assertEqual(saved_bytes(program, run), 8 * n + 4 * B * H * 256 + 16)
        program, _ = self.record("--sdpa-priority", "cudnn-first")
        self.assertEqual(program["target"]["attention"], {"cudnn": 1})

    def test_complex_buffer_stays_complex(self):
        program, _ = self.record()
        dtypes = {t["dtype"] for t in program["inputs"]}
        self.assertIn("complex64", dtypes)
        made = [e for op in program["forward"] for e in op.get("outputs", [])
                if e["dtype"] == "complex64" and "alias" not in e]
        self.assertTrue(made and all(e["requires_grad"] for e in made), made)

    def test_bad_flags(self):
        err = self.record("--gpu", "sm42", expect=2)
        self.assertIn("record_program: error: --gpu sm42: not a GPU this recorder knows", err)

    def test_unexpressible_dtype_names_tensor_op_and_module(self):
        path = os.path.join(self.tmp.name, "uint16_model.py")
        with open(path, "w") as f:
            f.write("import torch\n"
                    "class Inner(torch.nn.Module):\n"
                    "    def forward(self, x):\n"
                    "        return x.to(torch.uint16)\n"
                    "class M(torch.nn.Module):\n"
                    "    def __init__(self):\n"
                    "        super().__init__()\n"
                    "        self.lin = torch.nn.Linear(4, 4)\n"
                    "        self.inner = Inner()\n"
                    "    def forward(self, x):\n"
                    "        return self.lin(x).sum() + self.inner(x).float().sum()\n"
                    "def build_model():\n    return M()\n"
                    "def make_batch():\n    return torch.ones(2, 4)\n")
        run = subprocess.run([sys.executable, os.path.join(TOOLS, "record_program.py"),
                              f"{path}:build_model", "--batch", f"{path}:make_batch",
                              "--device", "meta", "-o", os.path.join(self.tmp.name, "x.json")],
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, 2, run.stderr)
        self.assertIn("a tensor of dtype torch.uint16 is not expressible in a program", run.stderr)
        self.assertIn(": output 0 of aten._to_copy (shape [2, 4]), in module 'inner' (Inner)",
                      run.stderr)


if __name__ == "__main__":
    unittest.main()
