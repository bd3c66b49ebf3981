#!/usr/bin/env python3
"""A real bf16 run as the oracle of `gen program --activation-dtype param-dtype` (issue 21).

Each model (tools/examples/tiny_gpt.py, a two-block GPT; tools/examples/resmlp.py, an embedding
and four residual MLP blocks) is recorded twice by tools/record_program.py on the CPU: in fp32,
and with `--dtype bf16` (`model.to(torch.bfloat16)` and the batch's floating-point tensors), so
that every op really runs in bf16 and the recorder records the sizes and dtypes of what a bf16
step makes. The fp32 program
emitted with `--param-dtype bf16 --activation-dtype param-dtype` must give the bf16 program's
trace event for event (at world size 2, both with `--param-dtype bf16`), and without the flag the
fp32 activations must stay (more memory after forward, and a note that says so).

What this oracle cannot show: on CUDA, layer_norm's and batch_norm's statistics are in fp32 for
bf16 inputs (PyTorch computes them in the accumulate type), where the CPU's torch 1.13 gives
bf16; they are (batch, sequence) vectors, a rounding error beside the activations.

Usage: /usr/bin/python3 precision_oracle_test.py -v   (BUCKETSIM names the binary)
Exit 77 (skipped) where torch does not import.
"""
import importlib
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOOLS = os.path.join(ROOT, "tools")
BUCKETSIM = os.environ.get("BUCKETSIM", os.path.join(ROOT, "build", "bucketsim"))

try:
    importlib.import_module("torch")  # the recorder needs it: skipped where it is missing
except ImportError:
    print("torch does not import here: skipped")
    sys.exit(77)

MODELS = [("tiny_gpt", "Block"), ("resmlp", "Block")]


def run(args):
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {result.returncode}:\n{result.stderr}")
    return result


def events(path):
    with open(path) as trace:
        text = trace.read()
    return text[text.index('"events"'):]


def after_forward(path):
    report = json.loads(run([BUCKETSIM, "compare", path, "--policy", "unbucketed",
                             "--allocator", "exact", "--format", "json"]).stdout)
    marks = report["policies"][0]["marks"]
    return next(mark["allocated_bytes"] for mark in marks if mark["name"] == "after fwd")


class Bf16RunAsOracle(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="bucketsim-precision-")

    def record(self, example, wrap, dtype):
        source = os.path.join(TOOLS, "examples", example + ".py")
        program = os.path.join(self.directory, f"{example}-{dtype}.json")
        run(["/usr/bin/python3", os.path.join(TOOLS, "record_program.py"), "--target", "cpu",
             f"{source}:build_model", "--batch", f"{source}:make_batch", "--wrap", wrap,
             "--device", "cpu", "--dtype", dtype, "-o", program])
        return program

    def emit(self, program, name, *flags):
        trace = os.path.join(self.directory, name)
        result = run([BUCKETSIM, "gen", "program", program, "--world-size", "2",
                      "--param-dtype", "bf16", *flags, "-o", trace])
        return trace, result.stderr

    def test_fp32_recording_cast_is_the_bf16_recording(self):
        for example, wrap in MODELS:
            with self.subTest(model=example):
                fp32 = self.record(example, wrap, "fp32")
                bf16 = self.record(example, wrap, "bf16")
                cast, cast_err = self.emit(fp32, f"{example}-cast.json",
                                           "--activation-dtype", "param-dtype")
                real, _ = self.emit(bf16, f"{example}-real-bf16.json")
                kept, kept_err = self.emit(fp32, f"{example}-kept.json")
                self.assertIn("gen: activations cast to bf16: ", cast_err)
                self.assertEqual(events(cast), events(real),
                                 "the cast fp32 program differs from the bf16 recording")
                self.assertIn("activations are fp32, as recorded, but a run with --param-dtype "
                              "bf16 computes in bf16", kept_err)
                self.assertNotIn("activations are fp32", self.emit(bf16, "unused.json")[1])
                self.assertGreater(after_forward(kept), after_forward(cast))


if __name__ == "__main__":
    unittest.main()
