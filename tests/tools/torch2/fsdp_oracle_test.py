#!/usr/bin/env python3
"""Real torch 2.6 FSDP1 and FSDP2 as the oracle of bucketsim's FSDP1 and FSDP2 emitters.

Each case runs the resmlp example (tools/examples/resmlp.py: an embedding, 4 pre-norm residual
MLP blocks, each Block its own FSDP unit, the root the rest) on the CPU with gloo at 2 ranks
(4 for HYBRID_SHARD 2x2) under fsdp_measure.py (torch 2.6 in the Debian 13 root of
tools/torch2.sh), and compares every rank's live bytes at every mark and its forward and
backward peaks with bucketsim's replay (`compare --policy fsdp1|fsdp2 --allocator exact`) of the
recorder's program of the same model (tools/record_program.py under the host's torch 1.13),
emitted for that rank with the same settings (`gen program --fsdp-impl ... --rank R`). The
target is every mark within 0.5% and each phase's peak within 2%; where a case does not meet
it, TOLERANCES says what it meets and why, so that a change that makes it worse fails. Every
rank's collective log (`compare --full-log`: the policy's reduce-scatters with the trace's own
all-gathers and all-reduces, HYBRID_SHARD's all-reduce of each reduced shard) equals the real
run's collectives of its training iteration, one by one: kind, bytes (torch.distributed's
tensor, nccl-tests' size), group size and order.

Run by ctest in three shards (Tools.Torch2FsdpOracle.1of3 ...: `--shard K/N`) with the host's /usr/bin/python3, BUCKETSIM naming the
binary; exit code 77 (skipped) when `tools/torch2.sh status` says the root cannot be used, or
when torch is missing on the host (the recorder needs it).
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
TOOLS = os.path.join(ROOT, "tools")
TORCH2 = os.path.join(TOOLS, "torch2.sh")
MODEL = os.path.join(TOOLS, "examples", "resmlp.py")
# The GPT cases: tiny_gpt.py with torch 2.x's scaled_dot_product_attention, which torch 1.13
# does not have, so its program is recorded under torch 2.6 too (tools/torch2.sh).
GPT = os.path.join(TOOLS, "examples", "tiny_gpt.py")
sys.path.insert(0, TOOLS)

import predicted_vs_measured as pvm  # noqa: E402

BUCKETSIM = os.environ.get("BUCKETSIM", os.path.join(ROOT, "build", "bucketsim"))
TARGET = {"marks": 0.005, "forward": 0.02, "backward": 0.02}
MARKS = ("start", "after fwd", "after bwd", "after step", "done")

# name: (build function, ranks, fsdp_measure.py flags, bucketsim gen flags, policy)
FSDP1 = ["--impl", "fsdp1"]
FSDP2 = ["--impl", "fsdp2"]
def sac_case(impl, save, early_stop="true", every=1):
    """A selective-checkpointing case of the GPT (CASES below)."""
    flags = ["--checkpoint-wrap", "Block", "--checkpoint-impl", "no-reentrant",
             "--checkpoint-save", save, "--checkpoint-early-stop", early_stop,
             "--checkpoint-every", str(every)]
    name = impl[1]
    gen = ["--checkpoint", "Block", *flags[2:]]
    return ("build_model_sdpa", 2, impl + flags, ["--fsdp-impl", name, *gen], name)


CASES = {
    "fsdp1-full-shard-pre": (
        "build_model", 2,
        FSDP1 + ["--sharding-strategy", "FULL_SHARD", "--backward-prefetch", "pre",
                 "--limit-all-gathers", "on"],
        ["--fsdp-impl", "fsdp1", "--sharding-strategy", "FULL_SHARD",
         "--backward-prefetch", "pre"], "fsdp1"),
    "fsdp1-full-shard-post": (
        "build_model", 2, FSDP1 + ["--backward-prefetch", "post"],
        ["--fsdp-impl", "fsdp1", "--backward-prefetch", "post"], "fsdp1"),
    "fsdp1-no-prefetch-no-limit": (
        "build_model", 2, FSDP1 + ["--backward-prefetch", "none", "--limit-all-gathers", "off"],
        ["--fsdp-impl", "fsdp1", "--backward-prefetch", "none", "--limit-all-gathers", "off"],
        "fsdp1"),
    "fsdp1-shard-grad-op": (
        "build_model", 2, FSDP1 + ["--sharding-strategy", "SHARD_GRAD_OP"],
        ["--fsdp-impl", "fsdp1", "--sharding-strategy", "SHARD_GRAD_OP"], "fsdp1"),
    "fsdp1-no-shard": (
        "build_model", 2, FSDP1 + ["--sharding-strategy", "NO_SHARD"],
        ["--fsdp-impl", "fsdp1", "--sharding-strategy", "NO_SHARD"], "fsdp1"),
    "fsdp1-bf16-fp32-reduce": (
        "build_model", 2, FSDP1 + ["--param-dtype", "bf16", "--reduce-dtype", "fp32"],
        ["--fsdp-impl", "fsdp1", "--param-dtype", "bf16", "--reduce-dtype", "fp32"], "fsdp1"),
    "fsdp1-checkpointed": (
        "build_model_checkpointed", 2, FSDP1, ["--fsdp-impl", "fsdp1"], "fsdp1"),
    "fsdp1-hybrid-2x2": (
        "build_model", 4, FSDP1 + ["--sharding-strategy", "HYBRID_SHARD", "--hsdp-shape", "2,2"],
        ["--fsdp-impl", "fsdp1", "--sharding-strategy", "HYBRID_SHARD", "--hsdp-shape", "2,2"],
        "fsdp1"),
    "fsdp2-reshard": (
        "build_model", 2, FSDP2 + ["--reshard-after-forward", "true"],
        ["--fsdp-impl", "fsdp2", "--reshard-after-forward", "true"], "fsdp2"),
    "fsdp2-no-reshard": (
        "build_model", 2, FSDP2 + ["--reshard-after-forward", "false"],
        ["--fsdp-impl", "fsdp2", "--reshard-after-forward", "false"], "fsdp2"),
    "fsdp2-bf16-fp32-reduce": (
        "build_model", 2, FSDP2 + ["--mp-param-dtype", "bf16", "--mp-reduce-dtype", "fp32"],
        ["--fsdp-impl", "fsdp2", "--param-dtype", "bf16", "--reduce-dtype", "fp32"], "fsdp2"),
    # The root's MixedPrecisionPolicy(output_dtype=fp32): the model's output, the logits of a
    # forward that returns them, cast to fp32 after the root's post-forward, a copy beside the
    # bf16 ones (gen/program_boundary_casts.h).
    "fsdp2-bf16-output-fp32": (
        "build_model_logits", 2, FSDP2 + ["--mp-param-dtype", "bf16", "--mp-reduce-dtype", "fp32",
                                   "--mp-output-dtype", "fp32"],
        ["--fsdp-impl", "fsdp2", "--param-dtype", "bf16", "--reduce-dtype", "fp32",
         "--output-dtype", "fp32"], "fsdp2"),
    # Explicit prefetch as PyTorch's FSDP2 example sets it: each Block all-gathers the next two
    # in forward (set_modules_to_forward_prefetch) and the two before it in backward.
    "fsdp2-explicit-prefetch-2": (
        "build_model", 2, FSDP2 + ["--modules-to-forward-prefetch", "2",
                                   "--modules-to-backward-prefetch", "2"],
        ["--fsdp-impl", "fsdp2", "--modules-to-forward-prefetch", "2",
         "--modules-to-backward-prefetch", "2"], "fsdp2"),
    # HSDP: a 2-D mesh (2 replicas of 2 shards), each group's reduce-scatter over its shard
    # group then an in-place all-reduce of the output over the replicas.
    "fsdp2-hsdp-2x2": (
        "build_model", 4, FSDP2 + ["--hsdp-shape", "2,2"],
        ["--fsdp-impl", "fsdp2", "--hsdp-shape", "2,2"], "fsdp2"),
    # reshard_after_forward=2 at 4 ranks: after forward each group keeps its parameters
    # sharded over a row of 2 ranks of the mesh (the post-forward mesh), whose all-gather in
    # backward runs over that row.
    "fsdp2-reshard-to-2": (
        "build_model", 4, FSDP2 + ["--reshard-after-forward", "2"],
        ["--fsdp-impl", "fsdp2", "--reshard-after-forward", "2"], "fsdp2"),
    "fsdp2-checkpointed": (
        "build_model_checkpointed", 2, FSDP2, ["--fsdp-impl", "fsdp2"], "fsdp2"),
    # Checkpointing as a what-if: the program recorded without it, emitted with
    # `gen program --checkpoint Block`, against apply_activation_checkpointing with a REENTRANT
    # checkpoint_wrapper inside each Block's unit (fsdp_measure.py --checkpoint-wrap).
    "fsdp1-checkpoint-block": (
        "build_model", 2, FSDP1 + ["--checkpoint-wrap", "Block"],
        ["--fsdp-impl", "fsdp1", "--checkpoint", "Block"], "fsdp1"),
    "fsdp2-checkpoint-block": (
        "build_model", 2, FSDP2 + ["--checkpoint-wrap", "Block"],
        ["--fsdp-impl", "fsdp2", "--checkpoint", "Block"], "fsdp2"),
    # ... with NO_REENTRANT wrappers, apply_activation_checkpointing's default:
    # `--checkpoint-impl no-reentrant`.
    "fsdp1-checkpoint-block-no-reentrant": (
        "build_model", 2, FSDP1 + ["--checkpoint-wrap", "Block", "--checkpoint-impl",
                                   "no-reentrant"],
        ["--fsdp-impl", "fsdp1", "--checkpoint", "Block", "--checkpoint-impl", "no-reentrant"],
        "fsdp1"),
    "fsdp2-checkpoint-block-no-reentrant": (
        "build_model", 2, FSDP2 + ["--checkpoint-wrap", "Block", "--checkpoint-impl",
                                   "no-reentrant"],
        ["--fsdp-impl", "fsdp2", "--checkpoint", "Block", "--checkpoint-impl", "no-reentrant"],
        "fsdp2"),
    # Re-wrapping as a what-if: the program recorded with Block units, emitted with
    # `gen program --wrap Linear` (every Linear its own unit, the rest the root's), against the
    # model wrapped that way (MEASURE_WRAP).
    "fsdp1-rewrap-linear": (
        "build_model", 2, FSDP1, ["--fsdp-impl", "fsdp1", "--wrap", "Linear"], "fsdp1"),
    "fsdp2-rewrap-linear": (
        "build_model", 2, FSDP2, ["--fsdp-impl", "fsdp2", "--wrap", "Linear"], "fsdp2"),
    # FSDP2 shards each parameter along dim 0 (torch.chunk): the (1, 128, 256) position
    # embedding is rank 0's whole, rank 1 holds none of it, and both ranks' padded shards are
    # its size (the program's dim0; a 1-D split would give each rank half).
    "fsdp2-dim0-padding": (
        "build_model_positions", 2, FSDP2, ["--fsdp-impl", "fsdp2"], "fsdp2"),
    # A model its build function wraps itself (wrapped_resmlp.py), each Block a unit with
    # settings of its own: recorded as it is (the recorder reads the units and their settings;
    # `gen program` emits each unit with its own) and measured as built. FSDP1: each unit's
    # backward_prefetch. FSDP2: the last Block's reshard_after_forward=False and explicit
    # prefetch lists that are not N-ahead.
    "fsdp1-unit-settings": (
        "build_fsdp1_unit_settings", 2, FSDP1 + ["--as-built"], ["--fsdp-impl", "fsdp1"],
        "fsdp1"),
    "fsdp2-unit-settings": (
        "build_fsdp2_unit_settings", 2, FSDP2 + ["--as-built"], ["--fsdp-impl", "fsdp2"],
        "fsdp2"),
    # A parameter no gradient reaches (each Block's unused Linear): FSDP2 leaves it out of the
    # Block's reduce-scatter (the trace's rs shard "no_grad"), so its bytes are the others';
    # FSDP1's flat gradient carries zeros for it.
    "fsdp1-unused-param": ("build_model_unused", 2, FSDP1, ["--fsdp-impl", "fsdp1"], "fsdp1"),
    "fsdp2-unused-param": ("build_model_unused", 2, FSDP2, ["--fsdp-impl", "fsdp2"], "fsdp2"),
    "fsdp1-gpt-sdpa": ("build_model_sdpa", 2, FSDP1, ["--fsdp-impl", "fsdp1"], "fsdp1"),
    "fsdp2-gpt-sdpa": ("build_model_sdpa", 2, FSDP2, ["--fsdp-impl", "fsdp2"], "fsdp2"),
    "fsdp1-gpt-sdpa-checkpointed": (
        "build_model_sdpa_checkpointed", 2, FSDP1, ["--fsdp-impl", "fsdp1"], "fsdp1"),
    "fsdp2-gpt-sdpa-checkpointed": (
        "build_model_sdpa_checkpointed", 2, FSDP2, ["--fsdp-impl", "fsdp2"], "fsdp2"),
    # Selective checkpointing as a what-if (`gen program --checkpoint Block --checkpoint-impl
    # no-reentrant --checkpoint-save ...`, the GPT recorded without checkpointing) against
    # no-reentrant checkpoint_wrappers with torchtitan's form of policy (sac_policy.py): an op
    # list (the linears' addmm and CPU flash attention saved), every other addmm (torchtitan's
    # "every other mm": the GPT's linears have biases) with early stop on and off, and
    # layer-level (every 2nd Block).
    "fsdp2-gpt-sac-ops": sac_case(FSDP2, "addmm,_scaled_dot_product_flash_attention_for_cpu"),
    "fsdp1-gpt-sac-every-other": sac_case(FSDP1, "addmm/2"),
    "fsdp2-gpt-sac-every-other": sac_case(FSDP2, "addmm/2"),
    "fsdp2-gpt-sac-every-other-no-early-stop": sac_case(FSDP2, "addmm/2", early_stop="false"),
    "fsdp1-gpt-sac-ops-no-early-stop": sac_case(
        FSDP1, "addmm,_scaled_dot_product_flash_attention_for_cpu", early_stop="false"),
    "fsdp2-gpt-layer-sac-2": sac_case(FSDP2, "none", every=2),
    # ... and recorded as the model runs it: tiny_gpt.py's own checkpoint calls with a
    # context_fn (every_other_addmm_policy), which the recorder asks of every op.
    "fsdp1-gpt-sac-recorded": ("build_model_sdpa_sac", 2, FSDP1, ["--fsdp-impl", "fsdp1"],
                               "fsdp1"),
    "fsdp2-gpt-sac-recorded": ("build_model_sdpa_sac", 2, FSDP2, ["--fsdp-impl", "fsdp2"],
                               "fsdp2"),
}


def model_of(build):
    """The example file of a build function, and the recorder's interpreter for it."""
    if "sdpa" in build:
        return GPT, [TORCH2, "python"]
    if build in AS_BUILT:
        return WRAPPED, [TORCH2, "python"]
    return MODEL, ["/usr/bin/python3"]


# The build functions that return the model already wrapped (wrapped_resmlp.py): recorded
# without --wrap, measured with --as-built.
WRAPPED = os.path.join(HERE, "wrapped_resmlp.py")
AS_BUILT = ("build_fsdp1_unit_settings", "build_fsdp2_unit_settings")

# The units of the measured run where they are not Block's (the program is recorded with Block).
MEASURE_WRAP = {"fsdp1-rewrap-linear": "Linear", "fsdp2-rewrap-linear": "Linear"}

# The batch function where it is not make_batch: one sequence, whose activations are small
# beside a Block's parameters, so that what a prefetch gathers early sets the peaks.
BATCH = {"fsdp2-explicit-prefetch-2": "make_batch_one", "fsdp1-unit-settings": "make_batch_one",
         "fsdp2-unit-settings": "make_batch_one"}

# The program a case emits when it is not the measured model's own: a bf16 run computes every
# activation in bf16, which a program recorded in fp32 does not say (resmlp.py:build_model_bf16).
RECORD_AS = {"fsdp1-bf16-fp32-reduce": "build_model_bf16",
             "fsdp2-bf16-fp32-reduce": "build_model_bf16",
             "fsdp2-bf16-output-fp32": "build_model_logits_bf16"}

# What each case meets where it is not the target (measured gap, rounded up), with the cause.
# Measured 2026-12-02, torch 2.6.0+debian on the CPU, 2 ranks (4 for HYBRID_SHARD), SGD; the
# same on every rank. Every other case meets the target with room to spare: every mark within
# 512 B (HYBRID_SHARD and FSDP2: the measured side has one more 512 B block alive from before the
# model is built: init_device_mesh's, FSDP2's mesh; fsdp2-unit-settings, whose build function
# calls fully_shard five times without a mesh, has five: each call makes its default mesh,
# _fsdp_init.py _init_default_fully_shard_mesh, 2,560 B), every peak within 1,536 B (plus those
# 2,560 B for fsdp2-unit-settings: its backward peak is 3,072 B short) (the model's
# `logits` variable keeps the logits alive while nll_loss makes its two scalars: the recorder's
# own single-process measurement shows the same 1,024 B). The checkpoint-block cases (`gen
# program --checkpoint Block` on the program recorded without checkpointing, against
# apply_activation_checkpointing with REENTRANT wrappers) are short by what the regions it places
# leave out, checkpoint's CPU RNG state: 5,120 B per region, 20,480 B for resmlp's 4 Blocks
# (-0.20% after backward; forward and backward peaks -0.09% and -0.06%), on FSDP1 and FSDP2.
#   Non-reentrant checkpointing (the checkpointed cases: use_reentrant=False) is modelled as
#         torch 2.x runs it (the program's checkpoint_begin "reentrant": false): the recompute
#         starts at the backward of the region's last run that saves anything and stops there
#         (_StopRecomputationError), so fc2's output and the residual add's are not recomputed;
#         before, the whole region was (+3.3% FSDP1, +3.1% FSDP2 at the backward peak, +3.9%
#         for the GPT). What the region keeps (its inputs, the RNG state) belongs to its
#         _CheckpointFrame and goes with the last of its nodes' saved tensors, the backward of
#         its first saving run: before the unit's post-backward (FSDP1's FlatParameter gradient,
#         SplitWithSizesBackward0's cat, is the GPT's backward peak). Until 2026-12-05 it went
#         at the region's begin, after the post-backward: the FSDP1 GPT was +1.35% (70,144 B).
#   GLOO  (not a tolerance: how the peaks are measured) gloo's all-gather on the CPU stages the
#         output in a buffer its worker thread allocates and frees inside the collective, the
#         unit's unsharded size (793,088 B for a GPT Block); NCCL on a GPU makes none. The peaks
#         compared are those of the training loop's thread (fsdp_measure.py's caller_thread);
#         with gloo's buffers the GPT's backward peaks are 259,584 B (FSDP1) and 268,288 B
#         (FSDP2) higher, and its FSDP1 checkpointed forward peak 137,728 B; resmlp's are not.
#   (FSDP2's wait_for_unshard keeps the previous unit's all-gather output alive until it
#         returns, past this unit's copy-out: its walrus-bound local `prev_all_gather_state`
#         holds it. Modelled since 2026-12-05; before, it was freed before the copy-out, and the
#         GPT's FSDP2 checkpointed forward peak, which falls in a copy-out, was -3.32%.)
#   SAC   the selective-checkpointing cases meet 0.1% everywhere (measured: every mark and peak
#         within 1,024 B, the mesh's block), held to it: before the early stop's last run kept
#         its cache entry (ServeFromCache), fsdp2-gpt-sac-ops' backward peak was -1.12%.
TOLERANCES = {case: {"marks": 0.001, "forward": 0.001, "backward": 0.001}
              for case in CASES if "sac" in case}


def run(cmd, **kwargs):
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, **kwargs)
    if out.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-4000:]}")
    return out


class FsdpOracle(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.programs = {}

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def program(self, build, batch="make_batch"):
        if (build, batch) not in self.programs:
            path = os.path.join(self.dir.name, f"{build}.{batch}.program.json")
            model, python = model_of(build)
            wrap = [] if build in AS_BUILT else ["--wrap", "Block"]
            run([*python, os.path.join(TOOLS, "record_program.py"), "--target", "cpu", f"{model}:{build}",
                 "--batch", f"{model}:{batch}", *wrap, "--optimizer", "sgd",
                 "--no-measure", "-o", path])
            self.programs[(build, batch)] = path
        return self.programs[(build, batch)]

    def measure(self, case):
        build, ranks, flags, _, _ = CASES[case]
        model, _ = model_of(build)
        out = os.path.join(self.dir.name, f"{case}.measured.json")
        wrap = [] if build in AS_BUILT else ["--wrap", MEASURE_WRAP.get(case, "Block")]
        run([TORCH2, "ranks", str(ranks), os.path.join(HERE, "fsdp_measure.py"),
             f"{model}:{build}", "--batch", f"{model}:{BATCH.get(case, 'make_batch')}", *wrap,
             "--optimizer", "sgd", *flags, "--json", out])
        with open(out) as f:
            return json.load(f)

    def predict(self, case, rank, ranks):
        build, _, _, gen_flags, policy = CASES[case]
        build = RECORD_AS.get(case, build)
        trace = os.path.join(self.dir.name, f"{case}.rank{rank}.trace.json")
        program = self.program(build, BATCH.get(case, "make_batch"))
        run([BUCKETSIM, "gen", "program", program, *gen_flags, "--world-size",
             str(ranks), "--rank", str(rank), "--iterations", "1", "--optimizer", "sgd",
             "-o", trace])
        return pvm.predicted_figures(trace, BUCKETSIM, policy)

    def collectives(self, case, rank):
        """[(kind, bytes, group size)] of the replay's collective log, in order; a policy's
        reductions of a bucket are reduce-scatters (bypass, bucket_flush: their kinds)."""
        trace = os.path.join(self.dir.name, f"{case}.rank{rank}.trace.json")
        out = run([BUCKETSIM, "compare", trace, "--policy", CASES[case][4], "--allocator",
                   "exact", "--format", "json", "--full-log"])
        log = json.loads(out.stdout)["policies"][0]["collectives"]
        kinds = {"bypass": "reduce_scatter", "bucket_flush": "reduce_scatter"}
        return [(kinds.get(c["kind"], c["kind"]), c["bytes"], c["group_size"]) for c in log]

    def check(self, case):
        _, ranks, _, _, _ = CASES[case]
        measured = self.measure(case)
        self.assertEqual(len(measured["ranks"]), ranks)
        limits = dict(TARGET, **TOLERANCES.get(case, {}))
        failures = []
        for real in measured["ranks"]:
            rank = real["rank"]
            predicted = self.predict(case, rank, ranks)
            rows = [("marks", m["name"], m["allocated_bytes"]) for m in real["marks"]]
            # The peaks of what the training loop's thread allocated: gloo's worker threads
            # stage an all-gather's output in a buffer of their own (GLOO), which NCCL does not.
            rows += [("phase_peaks", p["phase"], p["peak_allocated_bytes"])
                     for p in real["caller_thread"]["phase_peaks"]
                     if p["phase"] in ("forward", "backward")]
            all_threads = {p["phase"]: p["peak_allocated_bytes"] for p in real["phase_peaks"]}
            lines = []
            for kind, name, real_bytes in rows:
                pred = predicted[kind].get(name)
                self.assertIsNotNone(pred, f"{case} rank {rank}: no predicted {kind} {name}")
                rel = (pred - real_bytes) / real_bytes
                limit = limits["marks"] if kind == "marks" else limits[name]
                line = (f"  rank {rank} {'peak ' if kind != 'marks' else ''}{name:10} measured "
                        f"{real_bytes:>11,} predicted {pred:>11,} {100 * rel:+7.2f}%")
                if kind != "marks" and all_threads[name] != real_bytes:
                    line += f" (with gloo's threads {all_threads[name]:,})"
                lines.append(line)
                if abs(rel) > limit:
                    failures.append(f"{line} (limit {100 * limit:.2f}%)")
            print(f"\n{case}:\n" + "\n".join(lines), file=sys.stderr)
            # The training iteration's (the program's one): what model construction and lazy
            # init call (the device mesh's, FSDP1's sync of module states) is not in the trace.
            real_log = [(c["kind"], c["bytes"], len(c["group_ranks"]))
                        for c in real["collectives"] if c["phase"] != "init"]
            predicted_log = self.collectives(case, rank)
            counts = {k: sum(1 for c in predicted_log if c[0] == k)
                      for k in ("all_gather", "reduce_scatter", "all_reduce")}
            print(f"  rank {rank} collectives: measured {len(real_log)}, predicted "
                  f"{len(predicted_log)} ({', '.join(f'{n} {k}' for k, n in counts.items())})",
                  file=sys.stderr)
            if real_log != predicted_log:
                failures.append(f"  rank {rank} collectives (kind, bytes, group size): measured "
                                f"{real_log}, predicted {predicted_log}")
        self.assertFalse(failures, f"{case}:\n" + "\n".join(failures))


def make_test(case):
    def test(self):
        self.check(case)
    return test


def shard_cases(shard, shards):
    """The cases of shard `shard` of `shards` (ctest runs each shard as a test of its own, so
    that -j spreads them): about as many cases each, those of one recorded program kept
    together where that allows (each shard records the programs of its cases)."""
    groups = {}
    for case, (build, *_rest) in CASES.items():
        groups.setdefault((RECORD_AS.get(case, build), BATCH.get(case, "make_batch")), []).append(case)
    target = -(-len(CASES) // shards)
    members = [[] for _ in range(shards)]
    for key in sorted(groups, key=lambda k: (-len(groups[k]), k)):
        home = None
        for case in groups[key]:
            if home is None or len(members[home]) >= target:
                home = min(range(shards), key=lambda s: len(members[s]))
            members[home].append(case)
    return set(members[shard])


# --shard K/N (K from 1): that shard's cases alone; without it, every case.
_selected = set(CASES)
if "--shard" in sys.argv:
    _at = sys.argv.index("--shard")
    _k, _n = (int(x) for x in sys.argv[_at + 1].split("/"))
    del sys.argv[_at:_at + 2]
    _selected = shard_cases(_k - 1, _n)
for _case in CASES:
    if _case in _selected:
        setattr(FsdpOracle, "test_" + _case.replace("-", "_"), make_test(_case))


if __name__ == "__main__":
    status = subprocess.run([TORCH2, "status"], capture_output=True, text=True)
    if status.returncode != 0:
        print(f"fsdp_oracle_test: {(status.stdout + status.stderr).strip()}: skipped")
        sys.exit(77)
    if subprocess.run(["/usr/bin/python3", "-c", "import torch"]).returncode != 0:
        print("fsdp_oracle_test: the host's /usr/bin/python3 has no torch (tools/setup.sh): "
              "skipped")
        sys.exit(77)
    unittest.main()
