#!/usr/bin/env python3
"""Real PyTorch as the oracle of bucketsim's memory figures at world size 1.

Each case builds a real model (tools/examples/: a four-layer MLP, the fairscale memory test's
convnet, a two-block GPT with attention), with and without activation checkpointing, and an MLP
whose four layers are one shared layer (its parameters' gradients summed), and runs forward,
backward and an SGD-with-momentum step on the CPU under
torch.profiler(profile_memory=True) (tools/recorder/measure.py). The live bytes at every mark and the
forward and backward peaks are compared with bucketsim's replay (`compare --policy unbucketed
--allocator exact`) of
  (a) the recorder's program of the same model (tools/record_program.py, then
      `bucketsim gen program --world-size 1 --iterations 1`), and
  (b) the preset's trace where a preset describes the same model, with the same sizes and the
      variant that describes it (fairscale-convnet --flatten-parameters=false; transformer
      --attention unfused --dropout 0, measured on the GPT without dropout: PRESET_MODEL), and
  (c) under autocast, which on the CPU follows other op lists than CUDA's, the preset with
      `--autocast bf16` against that GPT with CUDA autocast's casts written out by hand
      (cuda_autocast_gpt.py, AUTOCAST_CASES).
The target is every mark within 0.5% and each phase's peak within 2%. Where a source does not
meet it, TOLERANCES says what it meets and why (the cause is in the comment), so that a change
that makes it worse fails.

Run by ctest (Tools.Oracle) as `/usr/bin/python3 oracle_test.py` (Debian's python3-torch,
tools/setup.sh); BUCKETSIM names the binary. Exit code 77 (ctest: skipped) when torch is
missing or when the binary's emitter refuses world size 1 (before it made the unsharded
trace).
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
EXAMPLES = os.path.join(TOOLS, "examples")
sys.path.insert(0, TOOLS)

try:
    importlib.import_module("torch")
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
GPT_PRESET = ["transformer", "--layers", "2", "--hidden", "128", "--heads", "4", "--seq", "64",
              "--micro-batch", "2", "--vocab", "512", "--attention", "unfused", "--dropout", "0"]
CONVNET_PRESET = ["fairscale-convnet", "--hidden-dim", "32", "--image-size", "64", "--batch", "2",
                  "--flatten-parameters=false"]
CASES = {
    "mlp": ("mlp.py", "build_model", ["--wrap", "Layer"], None),
    "mlp-ckpt": ("mlp.py", "build_model_checkpointed", ["--wrap", "Layer"], None),
    # one Layer applied four times: its parameters read by four runs, their gradients summed
    # (root only: an FSDP instance gathers once per forward)
    "mlp-shared": ("mlp.py", "build_model_shared", [], None),
    "convnet": ("convnet.py", "build_model",
                ["--wrap", "Sequential", "--wrap", "BatchNorm2d", "--wrap", "Linear"],
                CONVNET_PRESET),
    "convnet-ckpt": ("convnet.py", "build_model_checkpointed",
                     ["--wrap", "Sequential", "--wrap", "BatchNorm2d", "--wrap", "Linear"],
                     CONVNET_PRESET + ["--activation-checkpointing"]),
    "gpt": ("tiny_gpt.py", "build_model", ["--wrap", "Block"], GPT_PRESET),
    "gpt-ckpt": ("tiny_gpt.py", "build_model_checkpointed", ["--wrap", "Block"],
                 GPT_PRESET + ["--activation-checkpointing"]),
    # the loss inside forward on shifted logits, the embeddings and logits Python locals alive
    # at the loss (tiny_gpt.CausalLM): exact only with the forward's `releases`
    "causal-lm": ("tiny_gpt.py", "build_model_causal_lm", ["--wrap", "Block"], None),
}
# The batch function of a case, where it is not make_batch.
BATCH = {"causal-lm": "make_batch_causal_lm"}
# The preset rows of these cases are measured on the same model without dropout: on the CPU,
# PyTorch 1.13's dropout saves its noise in the activation dtype (_dropout_impl:
# empty_like(input).bernoulli_(1 - p)), 4 bytes per element here, where CUDA's native_dropout
# saves a bool mask, which is what the preset describes; with --dropout 0 the preset makes no
# dropout runs and nn.Dropout(0) returns its input.
PRESET_MODEL = {"gpt": "build_model_no_dropout",
                "gpt-ckpt": "build_model_checkpointed_no_dropout"}

TARGET = {"marks": 0.005, "forward": 0.02, "backward": 0.02}

# What each (case, source) meets where it is not the target (measured gap, rounded up), with
# the cause. Measured 2026-12-01 with torch 1.13 on the CPU and the emitter of branch grads
# (world size 1 is the unsharded trace; the recorder writes param_reads, so each parameter's
# gradient is made at its reader's backward, and the forward's `releases`). Every
# mark of every recorded program is exact to the byte, and so are the MLP's, the GPT's and the
# causal LM's forward peaks, checkpointed or not (the causal LM's was -5.62% while only
# checkpointed regions had `releases`); their backward peaks are within 0.01% (512 B below: one
# small transient, not yet identified, that no program shows).
# The preset rows: with the presets of branch presets (param_reads, the variants below).
#   ONEDNN  CPU convolutions (mkldnn_convolution and its backward) reorder their input and
#         output into blocked layouts: transient copies (the first block conv's 1.97 MB input)
#         that no program shows; on a GPU cuDNN's workspace plays this part.
#   PYVAR the checkpointed region's forward runs under no_grad, where a tensor dies when its
#         Python variable does, not after its last reader (the GPT's attention scores live on
#         through softmax and dropout). The recorder now measures that (`releases`) and the
#         recorded GPT's checkpointed forward peak is exact (was -4.36%: with Attention.forward
#         dropping each local right after its last reader, real PyTorch's peak was 2,945,536 B,
#         as written 3,078,656 B); the preset does not describe it.
#   REORDER ONEDNN as the preset row meets it, to the byte: the measured forward peak is inside
#         the checkpointed region's first conv (no_grad), where mkldnn_convolution holds a
#         blocked copy of its input (the stem's output, 1,968,128 B) and of its weight (204,800
#         B) beside its blocked output (984,064 B, the output the program allocates); the
#         program has 5,450,752 B alive there, plus RNG's 5,120 B and the two copies = 7,628,800
#         B, the measured peak. The program's own forward peak (6,435,840 B, at the second
#         block conv's BatchNorm) is a different moment: without the copies the real peak would
#         be within 0.1% (RNG).
#   RNG   torch.utils.checkpoint(preserve_rng_state=True) keeps torch.get_rng_state(), a 5,056 B
#         CPU tensor (5,120 rounded), per region from its forward until the graph dies with the
#         loss; on CUDA that state and torch.cuda.get_rng_state() are CPU tensors too, so a
#         GPU's allocated bytes do not show it, and the presets leave it out.
#   The preset rows compare the variants that describe the oracle's models: the convnet with
#   `--flatten-parameters=false` (no FSDP wraps the real model, so each parameter is its own
#   tensor with its own 512 B rounding; the BatchNorm buffers are program inputs), the GPT with
#   `--attention unfused --dropout 0` against the model without dropout (PRESET_MODEL). Every
#   other preset figure is within the target: the GPT's marks and peaks within 0.45% (its
#   checkpointed marks short by RNG's 2 x 5,120 B), under --autocast bf16 within 0.4% but the
#   checkpointed backward peak, -1.0% (AUTOCAST_CASES), the convnet's marks exact and its peaks
#   within 1%.
TOLERANCES = {
    ("convnet", "recorder"): {"backward": 0.09},                           # ONEDNN
    ("convnet-ckpt", "recorder"): {"forward": 0.16, "backward": 0.09},     # ONEDNN
    ("convnet-ckpt", "preset"): {"marks": 0.006, "forward": 0.157},        # RNG, REORDER
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

    def record(self, case, file, build, wrap):
        program = os.path.join(self.dir.name, f"{case}.program.json")
        path = os.path.join(EXAMPLES, file)
        # --no-flatten: the real model allocates each parameter on its own, and at world size 1
        # so does FSDP with flatten_parameters=False; flat parameters would differ from the
        # oracle by the 512 B rounding of each parameter (0.9% of the convnet's start).
        batch = BATCH.get(case.split("-checkpoint-")[0], "make_batch")
        run([sys.executable, os.path.join(TOOLS, "record_program.py"), "--target", "cpu", f"{path}:{build}",
             "--batch", f"{path}:{batch}", *wrap, "--no-flatten", "--optimizer", OPTIMIZER,
             "-o", program])
        with open(program) as f:
            return program, json.load(f)

    def check(self, case, source, trace, measured):
        predicted = pvm.predicted_figures(trace, BUCKETSIM)
        limits = dict(TARGET, **TOLERANCES.get((case, source), {}))
        report, failures = pvm.check_within(predicted, pvm.measured_figures(measured), limits)
        print(f"\n{case} ({source}):\n{report}", file=sys.stderr)
        self.assertFalse(failures, f"{case} ({source}): " + "; ".join(failures) + f"\n{report}")

    def recorded(self, case):
        program, doc = self.record(case, *CASES[case][:3])
        trace = os.path.join(self.dir.name, f"{case}.recorded.trace.json")
        run([BUCKETSIM, "gen", "program", program, *COMMON, "-o", trace])
        self.check(case, "recorder", trace, doc)
        return doc

    def preset(self, case, measured):
        if case in PRESET_MODEL:
            from recorder.load import load_function
            from recorder.measure import measure_step
            path = os.path.join(EXAMPLES, CASES[case][0])
            measured, _ = measure_step(load_function(f"{path}:{PRESET_MODEL[case]}", "model"),
                                       load_function(f"{path}:make_batch", "--batch"), OPTIMIZER)
        trace = os.path.join(self.dir.name, f"{case}.preset.trace.json")
        run([BUCKETSIM, "gen", *CASES[case][3], *COMMON, "-o", trace])
        self.check(case, "preset", trace, measured)


# `gen program --checkpoint` as a what-if: a program recorded with one checkpointing, emitted
# with another, against the real run of the model checkpointed that way (tools/examples: the
# checkpointed builds wrap each block's call in torch.utils.checkpoint, reentrant). Case: (model
# file, the build recorded, recorder wrap flags, --checkpoint, the build measured). What the
# what-if leaves out is RNG: the regions it places keep no RNG state (on a GPU it is host
# memory), where the real CPU run keeps 5,120 B per region until the loss dies (gpt, Block:
# after fwd -10,240 B, -0.38%); `none` keeps the recorded program's RNG runs (+0.18%).
CHECKPOINT_CASES = {
    "gpt-checkpoint-block": ("tiny_gpt.py", "build_model", ["--wrap", "Block"], "Block",
                             "build_model_checkpointed"),
    "gpt-ckpt-checkpoint-none": ("tiny_gpt.py", "build_model_checkpointed", ["--wrap", "Block"],
                                 "none", "build_model"),
    "mlp-checkpoint-all": ("mlp.py", "build_model", ["--wrap", "Layer"], "all",
                           "build_model_checkpointed"),
    "causal-lm-checkpoint-block": ("tiny_gpt.py", "build_model_causal_lm", ["--wrap", "Block"],
                                   "Block", "build_model_causal_lm_checkpointed"),
}


def make_checkpoint_test(case):
    def test(self):
        from recorder.load import load_function
        from recorder.measure import measure_step
        file, build, wrap, checkpoint, measured_build = CHECKPOINT_CASES[case]
        program, _ = self.record(case, file, build, wrap)
        path = os.path.join(EXAMPLES, file)
        batch = BATCH.get(case.split("-checkpoint-")[0], "make_batch")
        measured, _ = measure_step(load_function(f"{path}:{measured_build}", "model"),
                                   load_function(f"{path}:{batch}", "--batch"), OPTIMIZER)
        trace = os.path.join(self.dir.name, f"{case}.trace.json")
        run([BUCKETSIM, "gen", "program", program, *COMMON, "--checkpoint", checkpoint,
             "-o", trace])
        self.check(case, "what-if", trace, measured)
    return test


for _case in CHECKPOINT_CASES:
    setattr(Oracle, "test_" + _case.replace("-", "_"), make_checkpoint_test(_case))


# `gen program --batch-size` and `--seq-len` as what-ifs: a program recorded at batch sizes 2, 3
# and 4 (tools/record_program.py --batch-sizes; make_batch_sized takes the size), or at sequence
# lengths 16, 24, 32 and 40 (--seq-lens; make_batch_shaped and make_batch_causal_lm_shaped take
# seq_len=), or on the grid of both, emitted at a shape not recorded, against the real run at
# that shape. Case: (build, batch function, recorder flags, (batch size, length): None where
# the recording's own).
SIZES = ["--batch-sizes", "2,3,4"]
LENGTHS = ["--seq-lens", "16,24,32,40"]
BATCH_CASES = {
    "gpt-batch-6": ("build_model", "make_batch_sized", SIZES, (6, None)),
    "gpt-ckpt-batch-8": ("build_model_checkpointed", "make_batch_sized", SIZES, (8, None)),
    # The length alone, beyond the lengths recorded (the positions go to 64).
    "gpt-seq-64": ("build_model", "make_batch_shaped", LENGTHS, (None, 64)),
    # Both: the s x s scores grow with batch x length^2, the causal mask with length^2 alone.
    "gpt-batch-5-seq-56": ("build_model", "make_batch_shaped", SIZES + LENGTHS, (5, 56)),
    "causal-lm-batch-3-seq-64": ("build_model_causal_lm", "make_batch_causal_lm_shaped",
                                 SIZES + LENGTHS, (3, 64)),
}


def shaped_call(function, size, length):
    """The batch function at a shape, called as the recorder calls it (make_batch(n),
    make_batch(seq_len=L) or make_batch(n, seq_len=L))."""
    if length is None:
        return lambda: function(size)
    if size is None:
        return lambda: function(seq_len=length)
    return lambda: function(size, seq_len=length)


def make_batch_test(case):
    def test(self):
        from recorder.load import load_function
        from recorder.measure import measure_step
        build, batch, record_flags, (size, length) = BATCH_CASES[case]
        path = os.path.join(EXAMPLES, "tiny_gpt.py")
        program = os.path.join(self.dir.name, f"{case}.program.json")
        run([sys.executable, os.path.join(TOOLS, "record_program.py"), "--target", "cpu", f"{path}:{build}",
             "--batch", f"{path}:{batch}", *record_flags, "--wrap", "Block",
             "--no-flatten", "--no-measure", "-o", program])
        shaped = load_function(f"{path}:{batch}", "--batch")
        measured, _ = measure_step(load_function(f"{path}:{build}", "model"),
                                   shaped_call(shaped, size, length), OPTIMIZER)
        flags = (["--batch-size", str(size)] if size else []) + \
            (["--seq-len", str(length)] if length else [])
        trace = os.path.join(self.dir.name, f"{case}.trace.json")
        run([BUCKETSIM, "gen", "program", program, *COMMON, *flags, "-o", trace])
        self.check(case, "what-if", trace, measured)
    return test


for _case in BATCH_CASES:
    setattr(Oracle, "test_" + _case.replace("-", "_"), make_batch_test(_case))


# Recorded under autocast (tools/record_program.py --autocast bf16): the forward and the loss in
# it run under torch.autocast("cpu", bfloat16), whose casts (the CPU's op lists) and bf16
# activations the program carries; emitted at fp32 parameters, against a real run under the
# same autocast measured apart from the recorder (tools/recorder/step.py: under_autocast).
# Case: (build, batch function).
AUTOCAST_RECORDED_CASES = {
    "gpt-under-autocast": ("build_model", "make_batch"),
    "gpt-ckpt-under-autocast": ("build_model_checkpointed", "make_batch"),
    "causal-lm-under-autocast": ("build_model_causal_lm", "make_batch_causal_lm"),
}


def make_autocast_recorded_test(case):
    def test(self):
        import torch
        from recorder.load import load_function
        from recorder.measure import measure_step
        from recorder.step import under_autocast
        build, batch = AUTOCAST_RECORDED_CASES[case]
        path = os.path.join(EXAMPLES, "tiny_gpt.py")
        program = os.path.join(self.dir.name, f"{case}.program.json")
        run([sys.executable, os.path.join(TOOLS, "record_program.py"), "--target", "cpu", f"{path}:{build}",
             "--batch", f"{path}:{batch}", "--wrap", "Block", "--no-flatten", "--autocast",
             "bf16", "--no-measure", "-o", program])
        with open(program) as f:
            self.assertEqual(json.load(f)["autocast"], "bf16")
        measured, _ = measure_step(
            under_autocast(load_function(f"{path}:{build}", "model"), torch.bfloat16, "cpu"),
            load_function(f"{path}:{batch}", "--batch"), OPTIMIZER)
        trace = os.path.join(self.dir.name, f"{case}.trace.json")
        run([BUCKETSIM, "gen", "program", program, *COMMON, "-o", trace])
        self.check(case, "recorder", trace, measured)
    return test


for _case in AUTOCAST_RECORDED_CASES:
    setattr(Oracle, "test_" + _case.replace("-", "_"), make_autocast_recorded_test(_case))


# `gen program --wrap` as a what-if: a program recorded with one wrapping, re-wrapped, emits the
# trace of the same model recorded with that wrapping, event for event, under every FSDP
# implementation (flat and unflattened parameters; to finer units, to coarser, to the root
# alone). Held against real FSDP1 and FSDP2 wrapped that way by Tools.Torch2FsdpOracle
# (rewrap-linear cases).
REWRAP_CASES = [
    # (recorded with, flags, re-wrapped to)
    (["--wrap", "Block"], [], "Attention,MLP"),
    (["--wrap", "Attention", "--wrap", "MLP"], [], "Block"),
    (["--wrap", "Block"], [], "none"),
    ([], [], "Block"),
    (["--wrap", "Block"], ["--no-flatten"], "Attention,MLP"),
]


def wrap_flags(wrap):
    return [] if wrap == "none" else [f for c in wrap.split(",") for f in ("--wrap", c)]


class Rewrap(unittest.TestCase):
    def test_a_rewrapped_program_is_the_recording_of_that_wrapping(self):
        path = os.path.join(EXAMPLES, "tiny_gpt.py")
        with tempfile.TemporaryDirectory() as tmp:
            def record(wrap, flags):
                name = "-".join(wrap + flags).replace("-", "") or "root"
                out = os.path.join(tmp, f"{name}.json")
                run([sys.executable, os.path.join(TOOLS, "record_program.py"), "--target", "cpu",
                     f"{path}:build_model", "--batch", f"{path}:make_batch", *wrap, *flags,
                     "--no-measure", "-o", out])
                return out

            def events(program, *flags):
                trace = os.path.join(tmp, "trace.json")
                run([BUCKETSIM, "gen", "program", program, "--world-size", "4", *flags,
                     "-o", trace])
                with open(trace) as f:
                    return json.load(f)["events"]

            for recorded_with, flags, to in REWRAP_CASES:
                source = record(recorded_with, flags)
                target = record(wrap_flags(to), flags)
                for impl in ("fairscale", "fsdp1", "fsdp2"):
                    with self.subTest(recorded=recorded_with, flags=flags, to=to, impl=impl):
                        self.assertEqual(
                            events(source, "--wrap", to, "--fsdp-impl", impl),
                            events(target, "--fsdp-impl", impl))


# Preset rows without a recorder row: tests/tools/cuda_autocast_gpt.py is the example GPT (no
# dropout) with the casts CUDA's autocast (bf16) makes written out by hand (PyTorch 1.13's CPU
# autocast follows other op lists), against `transformer --autocast bf16` (fp32 parameters).
AUTOCAST_CASES = {
    "gpt-autocast": ("build_model", GPT_PRESET + ["--autocast", "bf16"]),
    "gpt-autocast-ckpt": ("build_model_checkpointed",
                          GPT_PRESET + ["--autocast", "bf16", "--activation-checkpointing"]),
}


def make_test(case):
    def test(self):
        doc = self.recorded(case)
        if CASES[case][3] is not None:
            self.preset(case, doc)
    return test


for _case in CASES:
    setattr(Oracle, "test_" + _case.replace("-", "_"), make_test(_case))


def make_autocast_test(case):
    def test(self):
        from recorder.load import load_function
        from recorder.measure import measure_step
        build, preset = AUTOCAST_CASES[case]
        path = os.path.join(HERE, "cuda_autocast_gpt.py")
        measured, _ = measure_step(load_function(f"{path}:{build}", "model"),
                                   load_function(f"{path}:make_batch", "--batch"), OPTIMIZER)
        trace = os.path.join(self.dir.name, f"{case}.preset.trace.json")
        run([BUCKETSIM, "gen", *preset, *COMMON, "-o", trace])
        self.check(case, "preset", trace, measured)
    return test


for _case in AUTOCAST_CASES:
    setattr(Oracle, "test_" + _case.replace("-", "_"), make_autocast_test(_case))


if __name__ == "__main__":
    supported, why = world_size_one_supported()
    if not supported:
        print(f"oracle_test: this bucketsim cannot generate a world-size-1 trace ({why}): "
              "skipped")
        sys.exit(77)
    unittest.main()
