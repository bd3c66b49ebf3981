#!/usr/bin/env python3
"""Real PyTorch as the oracle of bucketsim's optimizer step (issue 21), at world size 1.

Two models (tools/examples/resmlp.py, an embedding and four residual MLP blocks, 10.5 M
parameters; tools/examples/tiny_gpt.py, a two-block GPT with dropout, 0.5 M) are recorded once
each (tools/record_program.py --no-flatten: every module parameter its own FSDP parameter, all in
the root instance, in model.parameters() order, so that bucketsim's optimizer steps the
parameters real torch.optim steps, in the same order). Each case runs forward, backward and one
optimizer step with real torch.optim on the CPU under torch.profiler(profile_memory=True)
(tools/recorder/measure.py) and compares the live bytes at every mark and the forward, backward,
step and zero_grad peaks with bucketsim's replay (`compare --policy unbucketed --allocator
exact`) of `gen program --world-size 1 --iterations 1 --param-dtype fp32` with the same
--optimizer, --optimizer-impl and --weight-decay. The cases: sgd, sgd-momentum, adam and adamw,
each for-loop, foreach and fused, with torch's default weight decay (0, AdamW 0.01: bucketsim's
default is checked too), and adam and sgd-momentum at weight decay 0.1 for-loop and foreach.
The target is every mark within 0.5% and each phase's peak within 2%; where a case does not
meet it, TOLERANCES says what it meets and why. The point of the feature is checked on its own:
foreach Adam's step peak is above the for-loop's by about one full parameter set
(`_foreach_sqrt` of every exp_avg_sq at once), in the measurement and in the prediction.

bucketsim models torch 2.6 on a CUDA device, where one thing differs from the CPU: Adam's and
AdamW's `state["step"]` is a CPU scalar tensor unless fused, not device memory, and bucketsim
leaves it out; on the CPU it is in the profiled memory whatever the implementation, a 4 B
tensor (512 B as counted) per parameter from the first step on. STEP_BYTES adds it to the
prediction of those cases. The CPU's other extras are transients of at most 1,024 B, which
bucketsim rightly leaves out (TOLERANCES): a Python scalar operand of an op on the CPU is
wrapped into an 8 B tensor and cast to a 4 B one while the op runs (`step_t += 1`,
`exp_avg_sq.sqrt() / bias_correction2_sqrt`; the fused step's `_foreach_add_(steps, 1)`, a loop
on the CPU; 2.x foreach's `torch.tensor(1.0)` for the step counts), where on CUDA those are host
tensors; torch 1.13's Optimizer.step and zero_grad hooks make record_function's handle (a 4 B
and a 288 B tensor).

Which torch:
  /usr/bin/python3 optimizer_oracle_test.py -v            torch 1.13 (Debian's python3-torch):
      the for-loop cases only. 1.13's foreach Adam makes two full sets (exp_avg_sq_sqrt, then
      denom = _foreach_add(exp_avg_sq_sqrt, eps), torch/optim/adam.py _multi_tensor_adam) and
      decays the gradients in place (_foreach_add_(grads, params)), where 2.x makes one set and
      decays into a new one; it has no fused optimizer off CUDA.
  /usr/bin/python3 optimizer_oracle_test.py --torch2 -v   torch 2.6 (tools/torch2.sh's root):
      every case. The recording and the measurements run in the root (one `tools/torch2.sh
      python` call, this file with --measure); bucketsim runs here, since the root has none of
      its libraries.
Run by ctest as Tools.OptimizerOracle and Tools.OptimizerOracleTorch2 (BUCKETSIM names the
binary). Exit code 77 (skipped) when that torch is missing (torch2.sh status fails) or the
binary has no --optimizer-impl.
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
TORCH2 = os.path.join(TOOLS, "torch2.sh")
sys.path.insert(0, TOOLS)

import predicted_vs_measured as pvm  # noqa: E402

BUCKETSIM = os.environ.get("BUCKETSIM", os.path.join(ROOT, "build", "bucketsim"))
COMMON = ["--world-size", "1", "--iterations", "1", "--param-dtype", "fp32"]

# name: (example file, build function)
MODELS = {"resmlp": ("resmlp.py", "build_model"), "gpt": ("tiny_gpt.py", "build_model")}
# name: (optimizer, implementation, weight decay: None is torch's default, given to neither)
CASES = {f"{opt}-{impl}": (opt, impl, None)
         for opt in ("sgd", "sgd-momentum", "adam", "adamw")
         for impl in ("for-loop", "foreach", "fused")}
CASES.update({f"{opt}-{impl}-wd": (opt, impl, 0.1)
              for opt in ("adam", "sgd-momentum") for impl in ("for-loop", "foreach")})

# Adam's and AdamW's step count: on the CPU one 4 B tensor per parameter (torch.tensor(0.0),
# 512 B as counted) alive from the first step, where on CUDA, which bucketsim models, it is a
# CPU tensor unless fused (torch/optim/adam.py _init_group: "Deliberately host `step` on CPU if
# both capturable and fused are off"). Fused puts it on the device, and bucketsim counts it.
STEP_BYTES = 512
STEP_FIGURES = (("marks", "after step"), ("marks", "done"), ("phase_peaks", "step"),
                ("phase_peaks", "zero_grad"))

TARGET = {"marks": 0.005, "forward": 0.02, "backward": 0.02, "step": 0.02, "zero_grad": 0.02}
# What each (model, case) meets where it is not the target, with the cause. None: measured
# 2026-12-02 with torch 1.13 (for-loop) and 2.6 (all) on the CPU and the emitter of branch main
# (src/gen/optimizer_step.cc), every mark of every case is exact to the byte, and every peak is
# at most 1,024 B below the measured one (0.03% of the smallest): the step and zero_grad peaks
# by the CPU transients above, the forward and backward peaks by what oracle_test.py's recorded
# rows show too (a small transient not yet identified).
TOLERANCES = {}


def step_on_cpu(case):
    opt, impl, _ = CASES[case]
    return opt in ("adam", "adamw") and impl != "fused"


def runs_under(case, torch_major):
    """torch 1.x: the for-loop only (its foreach Adam is not 2.x's, it has no fused on CPU)."""
    return torch_major >= 2 or CASES[case][1] == "for-loop"


def run(cmd, **kwargs):
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, **kwargs)
    if out.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr}")
    return out


# --- the measuring side: runs under the torch measured (`--measure OUT`) --------------------

def measure(out):
    """Records each model once (no step measured) and measures every case this torch runs:
    writes {"torch_version", "programs": {model: path}, "measured": {model: {case: block}}}."""
    import torch
    from recorder.load import load_function
    from recorder.measure import measure_step
    major = int(torch.__version__.split(".")[0])
    doc = {"torch_version": torch.__version__, "programs": {}, "measured": {}}
    for model, (file, build) in MODELS.items():
        path = os.path.join(EXAMPLES, file)
        program = os.path.join(os.path.dirname(out), f"{model}.program.json")
        run([sys.executable, os.path.join(TOOLS, "record_program.py"), "--target", "cpu", f"{path}:{build}",
             "--batch", f"{path}:make_batch", "--no-flatten", "--no-measure", "-o", program])
        doc["programs"][model] = program
        build_fn = load_function(f"{path}:{build}", "model")
        batch_fn = load_function(f"{path}:make_batch", "--batch")
        doc["measured"][model] = {}
        for case, (opt, impl, wd) in CASES.items():
            if runs_under(case, major):
                doc["measured"][model][case], _ = measure_step(
                    build_fn, batch_fn, opt, "cpu", impl, wd)
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)


# --- the comparing side: runs here, with bucketsim -------------------------------------------

def predicted(program, case, trace):
    opt, impl, wd = CASES[case]
    flags = ["--optimizer", opt, "--optimizer-impl", impl]
    if wd is not None:
        flags += ["--weight-decay", str(wd)]
    run([BUCKETSIM, "gen", "program", program, *COMMON, *flags, "-o", trace])
    figures = pvm.predicted_figures(trace, BUCKETSIM)
    if step_on_cpu(case):
        with open(program) as f:
            params = sum(len(i["params"]) for i in json.load(f)["instances"])
        for kind, name in STEP_FIGURES:
            figures[kind][name] += STEP_BYTES * params
    return figures


def param_set_bytes(program):
    """(one fp32 tensor per parameter, each rounded to 512 B: a full `_foreach_sqrt` set; the
    largest of them)."""
    with open(program) as f:
        sizes = [(p["numel"] * 4 + 511) // 512 * 512 for i in json.load(f)["instances"]
                 for p in i["params"]]
    return sum(sizes), max(sizes)


class OptimizerOracle(unittest.TestCase):
    torch2 = False

    @classmethod
    def setUpClass(cls):
        # tools/torch2.sh binds /tmp into its root, not $TMPDIR
        cls.dir = tempfile.TemporaryDirectory(dir="/tmp" if cls.torch2 else None)
        out = os.path.join(cls.dir.name, "measured.json")
        python = [TORCH2, "python"] if cls.torch2 else [sys.executable]
        run([*python, os.path.abspath(__file__), "--measure", out])
        with open(out) as f:
            cls.doc = json.load(f)
        cls.predictions = {}
        print(f"\nmeasured with torch {cls.doc['torch_version']}", file=sys.stderr)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def figures(self, model, case):
        """(predicted, measured) of a case, or a skip where this torch does not run it."""
        measured = self.doc["measured"][model].get(case)
        if measured is None:
            self.skipTest(f"torch {self.doc['torch_version']}: for-loop cases only (its foreach "
                          "is not 2.x's, it has no fused step on the CPU)")
        if (model, case) not in self.predictions:
            trace = os.path.join(self.dir.name, f"{model}.{case}.trace.json")
            self.predictions[(model, case)] = predicted(self.doc["programs"][model], case, trace)
        return self.predictions[(model, case)], pvm.measured_figures(measured)

    def check(self, model, case):
        pred, real = self.figures(model, case)
        limits = dict(TARGET, **TOLERANCES.get((model, case), {}))
        report, failures = pvm.check_within(pred, real, limits, digits=3)
        print(f"\n{model} {case}:\n{report}", file=sys.stderr)
        self.assertFalse(failures, f"{model} {case}: " + "; ".join(failures) + f"\n{report}")

    def test_foreach_adam_holds_a_full_set_more_than_the_loop(self):
        # for-loop: one parameter's sqrt and quotient, and the previous parameter's quotient,
        # at a time; foreach: _foreach_sqrt of every exp_avg_sq at once. The step peaks differ
        # by a full set less the loop's largest transient, which is at most three of the largest
        # parameter (measured with torch 2.6: resmlp 8,370,176 B, a full set less fc2.weight's
        # sqrt and quotient and fc1.bias's quotient; gpt 1,617,920 B; predicted the same).
        for model in MODELS:
            with self.subTest(model):
                loop_pred, loop_real = self.figures(model, "adam-for-loop")
                each_pred, each_real = self.figures(model, "adam-foreach")
                full, largest = param_set_bytes(self.doc["programs"][model])
                real = each_real["phase_peaks"]["step"] - loop_real["phase_peaks"]["step"]
                pred = each_pred["phase_peaks"]["step"] - loop_pred["phase_peaks"]["step"]
                print(f"\n{model}: foreach - for-loop Adam step peak: measured {real:,} B, "
                      f"predicted {pred:,} B, a full set {full:,} B", file=sys.stderr)
                for what, diff in (("measured", real), ("predicted", pred)):
                    self.assertGreaterEqual(diff, full - 3 * largest, what)
                    self.assertLessEqual(diff, full, what)
                self.assertLessEqual(abs(pred - real), 0.02 * real)


def make_test(model, case):
    def test(self):
        self.check(model, case)
    return test


for _model in MODELS:
    for _case in CASES:
        setattr(OptimizerOracle, f"test_{_model}_{_case}".replace("-", "_"),
                make_test(_model, _case))


def skip_reason(torch2):
    """Why this run cannot happen here (exit 77), or None."""
    if torch2:
        status = subprocess.run([TORCH2, "status"], capture_output=True, text=True)
        if status.returncode != 0:
            return (status.stdout + status.stderr).strip()
    else:
        try:
            importlib.import_module("torch")
        except ImportError:
            return "torch is not installed (tools/setup.sh installs python3-torch)"
    if not os.access(BUCKETSIM, os.X_OK):
        sys.exit(f"optimizer_oracle_test: no bucketsim at {BUCKETSIM} (BUCKETSIM names it)")
    help_text = subprocess.run([BUCKETSIM, "gen", "program", "--help"], capture_output=True,
                               text=True)
    if "--optimizer-impl" not in help_text.stdout:
        return f"{BUCKETSIM} has no gen program --optimizer-impl"
    return None


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--measure":
        measure(sys.argv[2])
        sys.exit(0)
    if "--torch2" in sys.argv:
        sys.argv.remove("--torch2")
        OptimizerOracle.torch2 = True
    why = skip_reason(OptimizerOracle.torch2)
    if why:
        print(f"optimizer_oracle_test: {why}: skipped")
        sys.exit(77)
    unittest.main()
