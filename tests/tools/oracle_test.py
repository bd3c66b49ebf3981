#!/usr/bin/env python3
"""Real PyTorch as the oracle of bucketsim's memory figures at world size 1.

Each case builds a real model (tools/examples/: a four-layer MLP, the fairscale memory test's
convnet, a two-block GPT with attention), with and without activation checkpointing, and an MLP
whose four layers are one shared layer (its parameters' gradients summed), and runs forward,
backward and an SGD-with-momentum step on the CPU under
torch.profiler(profile_memory=True) (tools/torch_memory.py). The live bytes at every mark and the
forward and backward peaks are compared with bucketsim's replay (`compare --policy unbucketed
--allocator exact`) of
  (a) the recorder's program of the same model (tools/record_program.py, then
      `bucketsim gen program --world-size 1 --iterations 1`), and
  (b) the preset's trace where a preset describes the same model (fairscale-convnet,
      transformer), with the same sizes.
The target is every mark within 0.5% and each phase's peak within 2%. Where a source does not
meet it, TOLERANCES says what it meets and why (the cause is in the comment), so that a change
that makes it worse fails.

Run by ctest (Tools.Oracle) as `/usr/bin/python3 oracle_test.py` (Debian's python3-torch,
tools/setup.sh); BUCKETSIM names the binary. Exit code 77 (ctest: skipped) when torch is
missing or when the binary's emitter refuses world size 1 (before it made the unsharded
trace).
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOOLS = os.path.join(ROOT, "tools")
EXAMPLES = os.path.join(TOOLS, "examples")
sys.path.insert(0, TOOLS)

try:
    import torch  # noqa: F401
except ImportError:
    print("oracle_test: torch is not installed (tools/setup.sh installs python3-torch): skipped")
    sys.exit(77)

import predicted_vs_measured as pvm  # noqa: E402

BUCKETSIM = os.environ.get("BUCKETSIM", os.path.join(ROOT, "build", "bucketsim"))
OPTIMIZER = "sgd-momentum"
COMMON = ["--world-size", "1", "--iterations", "1", "--optimizer", OPTIMIZER,
          "--param-dtype", "fp32"]


def world_size_one_supported():
    """The emitter of this build may refuse world size 1 (fairscale does not shard there)."""
    probe = subprocess.run([BUCKETSIM, "gen", "fairscale-convnet", *COMMON, "-o", os.devnull],
                           capture_output=True, text=True)
    return probe.returncode == 0, probe.stderr.strip()


# model file, build function, recorder wrap flags, preset command (None: no preset)
CASES = {
    "mlp": ("mlp.py", "build_model", ["--wrap", "Layer"], None),
    "mlp-ckpt": ("mlp.py", "build_model_checkpointed", ["--wrap", "Layer"], None),
    # one Layer applied four times: its parameters read by four runs, their gradients summed
    # (root only: an FSDP instance gathers once per forward)
    "mlp-shared": ("mlp.py", "build_model_shared", [], None),
    "convnet": ("convnet.py", "build_model",
                ["--wrap", "Sequential", "--wrap", "BatchNorm2d", "--wrap", "Linear"],
                ["fairscale-convnet", "--hidden-dim", "32", "--image-size", "64", "--batch", "2"]),
    "convnet-ckpt": ("convnet.py", "build_model_checkpointed",
                     ["--wrap", "Sequential", "--wrap", "BatchNorm2d", "--wrap", "Linear"],
                     ["fairscale-convnet", "--hidden-dim", "32", "--image-size", "64", "--batch",
                      "2", "--activation-checkpointing"]),
    "gpt": ("tiny_gpt.py", "build_model", ["--wrap", "Block"],
            ["transformer", "--layers", "2", "--hidden", "128", "--heads", "4", "--seq", "64",
             "--micro-batch", "2", "--vocab", "512"]),
    "gpt-ckpt": ("tiny_gpt.py", "build_model_checkpointed", ["--wrap", "Block"],
                 ["transformer", "--layers", "2", "--hidden", "128", "--heads", "4", "--seq",
                  "64", "--micro-batch", "2", "--vocab", "512", "--activation-checkpointing"]),
}

TARGET = {"marks": 0.005, "forward": 0.02, "backward": 0.02}

# What each (case, source) meets where it is not the target (measured gap, rounded up), with
# the cause. Measured 2026-12-01 with torch 1.13 on the CPU and the emitter of branch grads
# (world size 1 is the unsharded trace; the recorder writes param_reads, so each parameter's
# gradient is made at its reader's backward, and each checkpointed region's `releases`). Every
# mark of every recorded program is exact to the byte, and so are the MLP's and the GPT's
# forward peaks, checkpointed or not; their backward peaks are within 0.01% (512 B below: one
# small transient, not yet identified, that no program shows).
#   ONEDNN  CPU convolutions (mkldnn_convolution and its backward) reorder their input and
#         output into blocked layouts: transient copies (the first block conv's 1.97 MB input)
#         that no program shows; on a GPU cuDNN's workspace plays this part.
#   PYVAR the checkpointed region's forward runs under no_grad, where a tensor dies when its
#         Python variable does, not after its last reader (the GPT's attention scores live on
#         through softmax and dropout). The recorder now measures that (`releases`) and the
#         recorded GPT's checkpointed forward peak is exact (was -4.36%: with Attention.forward
#         dropping each local right after its last reader, real PyTorch's peak was 2,945,536 B,
#         as written 3,078,656 B); the preset does not describe it.
#   BUF   the fairscale-convnet preset has no BatchNorm buffers (running mean, var, count) and
#         flattens parameters (one 512 B rounding per instance instead of per tensor).
#   KORTH the transformer preset's per-layer activations follow Korthikanti et al.: PyTorch's
#         matmul on the transposed head views saves contiguous copies of Q, K and V that the
#         preset's fused-attention accounting does not make (after fwd -7%).
#   PGRAD the presets do not write param_reads yet: the whole instance's gradient is made at
#         its first backward run (the recorded GPT's backward peak was +12% so, the checkpointed
#         one's +15%).
TOLERANCES = {
    ("convnet", "recorder"): {"backward": 0.09},                           # ONEDNN
    ("convnet-ckpt", "recorder"): {"forward": 0.16, "backward": 0.09},     # ONEDNN
    ("convnet", "preset"): {"marks": 0.016},                               # BUF
    ("convnet-ckpt", "preset"): {"marks": 0.016, "forward": 0.16},         # BUF, ONEDNN
    ("gpt", "preset"): {"marks": 0.071, "forward": 0.068},                 # KORTH
    ("gpt-ckpt", "preset"): {"forward": 0.048, "backward": 0.068},         # PYVAR, KORTH, PGRAD
}


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr}")
    return out


class Oracle(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def record(self, case):
        file, build, wrap, _ = CASES[case]
        program = os.path.join(self.dir.name, f"{case}.program.json")
        path = os.path.join(EXAMPLES, file)
        # --no-flatten: the real model allocates each parameter on its own, and at world size 1
        # so does FSDP with flatten_parameters=False; flat parameters would differ from the
        # oracle by the 512 B rounding of each parameter (0.9% of the convnet's start).
        run([sys.executable, os.path.join(TOOLS, "record_program.py"), f"{path}:{build}",
             "--batch", f"{path}:make_batch", *wrap, "--no-flatten", "--optimizer", OPTIMIZER,
             "-o", program])
        with open(program) as f:
            return program, json.load(f)

    def check(self, case, source, trace, measured):
        predicted = pvm.predicted_figures(trace, BUCKETSIM)
        rows = pvm.side_by_side(predicted, pvm.measured_figures(measured))
        limits = dict(TARGET, **TOLERANCES.get((case, source), {}))
        report = "\n".join(f"  {kind:11} {name:10} measured {real:>11,} predicted "
                           f"{pred if pred is not None else '-':>11,} {100 * rel:+7.2f}%"
                           for kind, name, real, pred, rel in rows if rel is not None)
        print(f"\n{case} ({source}):\n{report}", file=sys.stderr)
        for kind, name, real, pred, rel in rows:
            if kind == "marks":
                limit = limits["marks"]
            elif name in ("forward", "backward"):
                limit = limits[name]
            else:
                continue
            self.assertIsNotNone(pred, f"{case} ({source}): no predicted {kind} {name}")
            self.assertLessEqual(abs(rel), limit,
                                 f"{case} ({source}): {kind} {name}: measured {real}, predicted "
                                 f"{pred} ({100 * rel:+.2f}%, limit {100 * limit}%)\n{report}")

    def recorded(self, case):
        program, doc = self.record(case)
        trace = os.path.join(self.dir.name, f"{case}.recorded.trace.json")
        run([BUCKETSIM, "gen", "program", program, *COMMON, "-o", trace])
        self.check(case, "recorder", trace, doc)
        return doc

    def preset(self, case, measured):
        trace = os.path.join(self.dir.name, f"{case}.preset.trace.json")
        run([BUCKETSIM, "gen", *CASES[case][3], *COMMON, "-o", trace])
        self.check(case, "preset", trace, measured)


def make_test(case):
    def test(self):
        doc = self.recorded(case)
        if CASES[case][3] is not None:
            self.preset(case, doc)
    return test


for _case in CASES:
    setattr(Oracle, "test_" + _case.replace("-", "_"), make_test(_case))


if __name__ == "__main__":
    supported, why = world_size_one_supported()
    if not supported:
        print(f"oracle_test: this bucketsim cannot generate a world-size-1 trace ({why}): "
              "skipped")
        sys.exit(77)
    unittest.main()
