"""The recorder's command line (tools/record_program.py, python3 -m recorder): its flags, the
recording they ask for, and how it ends: the program written and summed up on stdout (exit
status 0), or "record_program: error: ..." on stderr (exit status 2)."""

import argparse
import difflib
import itertools
import sys

import torch

from .batch import fit, parse_lengths, parse_sizes, sized
from .step import in_dtype, under_autocast
from .errors import UsageError
from .load import load_function
from .measure import measured_block
from .optimizer import IMPLS, OPTIMIZERS, optimizer_key
from .tensors import DTYPES_BY_NAME as DTYPES
from .program import summary, write
from .record import record
from .target import BACKENDS, PRIORITIES, Target
from .wrapped_fsdp import unwrap_fsdp


def make_parser():
    parser = argparse.ArgumentParser(
        description="Record a real PyTorch model's program for `bucketsim gen program`.",
        epilog="Example: /usr/bin/python3 tools/record_program.py "
               "tools/examples/tiny_gpt.py:build_model --batch "
               "tools/examples/tiny_gpt.py:make_batch --wrap Block -o tiny-gpt.json")
    parser.add_argument("model", help="FILE.py:FUNCTION returning the nn.Module")
    parser.add_argument("--batch", required=True,
                        help="FILE.py:FUNCTION returning the forward's input(s)")
    parser.add_argument("--wrap", action="append", default=[], metavar="CLASS",
                        help="a module class name to wrap in its own FSDP instance (repeatable)")
    parser.add_argument("--wrap-policy", metavar="FILE.py:FN",
                        help="FN(module, name) -> bool: wrap this module in its own instance")
    parser.add_argument("--no-flatten", action="store_true",
                        help="each module parameter is its own FSDP parameter "
                             "(flatten_parameters=False); default: one flat parameter per "
                             "instance, fairscale's default")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda", "meta"])
    parser.add_argument("--optimizer", choices=OPTIMIZERS,
                        help="the optimizer of the measured step, written to the program's "
                             "`optimizer` key (default: none written, the step measured with "
                             "sgd)")
    parser.add_argument("--optimizer-impl", choices=IMPLS,
                        help="torch.optim's implementation of the step (default: the one torch "
                             "picks on --device; needs --optimizer)")
    parser.add_argument("--weight-decay", type=float, metavar="X",
                        help="the optimizer's weight decay (default: torch's, 0.01 for adamw, "
                             "else 0; needs --optimizer)")
    parser.add_argument("--dtype", choices=sorted(DTYPES),
                        help="record the model converted to this dtype (model.to(dtype), and the "
                             "batch's floating-point tensors), as a run in that precision "
                             "computes; default: as build_model() makes it")
    parser.add_argument("--mixed-precision", choices=["auto", "bf16", "off"], default="auto",
                        help="with an fp32 recording (no --dtype, or --dtype fp32; no "
                             "--autocast): also record the model in bf16, as a MixedPrecision "
                             "run computes, into the program's `low_precision` key, which `gen "
                             "program --activation-dtype param-dtype` then emits (the model's "
                             "own fp32 casts and the attention kernel a bf16 run takes are "
                             "kept). auto (default): when the fp32 recording saw what a cast "
                             "cannot give (the model's own fp32 casts, or an attention kernel "
                             "picked by dtype); bf16: always; off: never")
    parser.add_argument("--autocast", choices=["bf16", "fp16"],
                        help="record the forward (and the loss computed in it) under "
                             "torch.autocast(device, dtype) as an AMP training loop runs it, the "
                             "parameters kept in their dtype; the program's `autocast` key says "
                             "so. autocast casts by the device's own op lists: on --device cpu "
                             "they are the CPU's, not CUDA's (record on cuda for a GPU run); not "
                             "on meta")
    parser.add_argument("--batch-sizes", metavar="N,N,N",
                        help="record at each of these batch sizes (at least 3; --batch's "
                             "function then takes the size: make_batch(n)) and write the "
                             "program at the first with what each sample adds, so that "
                             "`gen program --batch-size` emits it at any size from the "
                             "smallest up")
    parser.add_argument("--seq-lens", metavar="L,L,L,L",
                        help="record at each of these sequence lengths (at least 4; --batch's "
                             "function then takes the length: make_batch(seq_len=L), or "
                             "make_batch(n, seq_len=L) with --batch-sizes, every pair recorded) "
                             "and write the program at the first with how each tensor grows "
                             "with the length (a quadratic: attention's s x s scores), so that "
                             "`gen program --seq-len` emits it at any length from the shortest "
                             "up")
    parser.add_argument("--target", choices=["cuda", "cpu"], default="cuda",
                        help="the device the predicted run uses (default cuda): on meta or "
                             "cpu, each op whose CUDA kernel saves or allocates otherwise "
                             "(scaled_dot_product_attention's fused kernels, embedding's "
                             "backward) is recorded as CUDA's; cpu records what a CPU run does, "
                             "on meta too (attention as the CPU's flash kernel, as "
                             "FSDPMemTracker on fake CPU tensors runs it)")
    parser.add_argument("--gpu", default="sm90", metavar="NAME",
                        help="the target GPU's compute capability (sm70, sm75, sm80, sm86, "
                             "sm89, sm90, sm100) or its name (v100, t4, a100, a10, l40s, h100, "
                             "h200, b200): what attention kernels it has (default sm90, H100)")
    parser.add_argument("--sdpa-backend", choices=list(BACKENDS), default="auto",
                        help="the CUDA attention kernel (default auto: the one torch 2.6 "
                             "selects for the inputs on --gpu)")
    parser.add_argument("--sdpa-priority", choices=list(PRIORITIES), default="torch2.6",
                        help="the order torch tries the kernels in (default torch2.6: flash, "
                             "efficient, math, cudnn; cudnn-first: later torch's on sm90/sm100 "
                             "with cuDNN > 9.15)")
    parser.add_argument("--no-measure", action="store_true",
                        help="do not run the measured step (cpu, cuda)")
    parser.add_argument("-o", "--output", required=True)
    return parser


def main(argv=None):
    parser = make_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        return unknown_flag(parser, unknown[0])
    try:
        program = run(args)
        write(program, args.output)
    except (UsageError, SystemExit) as e:  # SystemExit: LoadError, or sys.exit() in user code
        print(f"record_program: error: {e}", file=sys.stderr)
        return 2
    print(summary(program, args.output))
    return 0


def run(args):
    """The program the parsed command line asks for: recorded, measured unless --no-measure
    (or on meta), with its optimizer key."""
    optimizer = optimizer_key(args.optimizer, args.optimizer_impl, args.weight_decay)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: this torch sees no CUDA device")
    if args.device == "cuda" and args.target != "cuda":
        raise UsageError(f"--target {args.target}: a recording on cuda is a CUDA run's")
    # On cuda the ops are CUDA's own: nothing to route.
    target = Target(args.target, args.gpu, args.sdpa_backend, args.sdpa_priority) \
        if args.device != "cuda" else None
    build = load_function(args.model, "model")
    make_batch = load_function(args.batch, "--batch")
    policy = load_function(args.wrap_policy, "--wrap-policy") if args.wrap_policy else None
    description = (f"recorded by tools/record_program.py from {args.model} on "
                   f"{args.device}, torch {torch.__version__}")
    if args.dtype:
        build, make_batch = in_dtype(build, make_batch, DTYPES[args.dtype])
        description += f", in {args.dtype}"
    autocast = None
    if args.autocast:
        if args.device == "meta":
            raise UsageError("--autocast: autocast does not apply to meta tensors; record on "
                             "cpu or cuda (or on meta in fp32 and emit with gen program "
                             "--activation-dtype param-dtype)")
        autocast = DTYPES[args.autocast]
        try:  # torch 2.6's CPU autocast takes bf16 alone (1.13's takes fp16 too)
            with torch.autocast(args.device, dtype=autocast):
                pass
        except RuntimeError as e:
            raise UsageError(f"--autocast {args.autocast}: torch {torch.__version__} refuses it "
                             f"on {args.device}: {e}")
        description += f", under {args.device} autocast {args.autocast}"
    sizes = parse_sizes(args.batch_sizes) if args.batch_sizes else None
    lengths = parse_lengths(args.seq_lens) if args.seq_lens else None
    first = (sizes[0] if sizes else None, lengths[0] if lengths else None)
    batch = sized(make_batch, *first) if sizes or lengths else make_batch
    if target is not None:
        description += f", for {target.device}" + \
            (f" {target.gpu}" if target.device == "cuda" else "")
        if autocast is not None and target.device == "cuda":
            target.note(f"--autocast on {args.device}", "the recording device's autocast op "
                        "lists are used, not CUDA's (CPU autocast keeps softmax, log_softmax, "
                        "layer_norm, pow and rsqrt in bf16 where CUDA computes them in fp32)")

    def recorded(build, make_batch, target):
        """The program at the first shape (fitted over every shape asked for), its Recorder."""
        program, rec = record(build, sized(make_batch, *first) if sizes or lengths
                              else make_batch, args.wrap, policy, args.device, description,
                              flatten=not args.no_flatten, autocast=autocast, target=target)
        if sizes or lengths:
            programs = {first: program}
            for point in itertools.product(sizes or [None], lengths or [None]):
                if point not in programs:
                    programs[point], _ = record(build, sized(make_batch, *point), args.wrap,
                                               policy, args.device, description,
                                               flatten=not args.no_flatten, autocast=autocast,
                                               target=target)
            program = fit(programs, sizes, lengths)
        return program, rec

    program, rec = recorded(build, make_batch, target)
    if sizes:
        program["description"] += f", batch size {sizes[0]}"
    if lengths:
        program["description"] += f", sequence length {lengths[0]}"
    twin = low_precision_wanted(args, program, target)
    if twin:
        # The same model in bf16, as a bf16 run computes it: its own casts are copies there, its
        # attention the kernel bf16 inputs take (flash, where fp32 takes efficient).
        twin_target = Target(args.target, args.gpu, args.sdpa_backend, args.sdpa_priority) \
            if target is not None else None
        low, _ = recorded(*in_dtype(build, make_batch, DTYPES["bf16"]), twin_target)
        low["target"] = twin_target.key(low) if twin_target is not None else {"device": "cuda"}
        program["low_precision"] = {"dtype": "bf16", **{
            k: v for k, v in low.items() if k not in LOW_PRECISION_SHARED}}
    if rec.fallback_ops:
        ops = ", ".join(sorted(rec.fallback_ops))
        program["description"] += f"; run on CPU for want of a meta kernel: {ops}"
        print(f"record_program: note: no meta kernel in torch {torch.__version__} for: {ops}; "
              "they ran on CPU ones of the same shapes: where an output's size depends on "
              "values (nonzero, masked_select, repeat_interleave, unique) it and all that "
              "follows from it are guesses; record on cpu or cuda", file=sys.stderr)
    if args.device != "meta" and not args.no_measure:
        # A wrapped model's step is measured on the model unwrapped, as the program is.
        unwrapped = build if "fsdp" not in program else \
            (lambda: unwrap_fsdp(build(), fill=rec.own_group)[0])
        if autocast is not None:
            unwrapped = under_autocast(unwrapped, autocast, args.device)
        program["measured"] = measured_block(unwrapped, batch, optimizer, args.device)
    if optimizer:
        program["optimizer"] = optimizer
    if autocast is not None:
        program["autocast"] = args.autocast
    program["target"] = target.key(program) if target is not None else {"device": "cuda"}
    return program


# What a program's `low_precision` key leaves to the program itself: the same in both
# recordings (the parameters, the wrapping, the optimizer) or the fp32 recording's own.
LOW_PRECISION_SHARED = {"format", "schema_version", "description", "instances", "fsdp",
                        "optimizer", "measured", "autocast"}


def low_precision_wanted(args, program, target):
    """Whether to record the bf16 twin (--mixed-precision): only of an fp32 recording without
    autocast; with auto, when the fp32 one saw what a cast of it cannot give."""
    fp32 = args.dtype in (None, "fp32") and args.autocast is None
    if args.mixed_precision == "off":
        return False
    if not fp32:
        if args.mixed_precision == "bf16":
            raise UsageError("--mixed-precision bf16: the recording is not fp32 (--dtype "
                             f"{args.dtype}{', --autocast' if args.autocast else ''}); it is "
                             "what its run computes already")
        return False
    if args.mixed_precision == "bf16":
        return True
    if target is None:
        return False  # on cuda the casts are not counted: --mixed-precision bf16 asks for it
    if not any(e.get("dtype") == "fp32" for op in program["forward"]
               for e in op.get("outputs", [])):
        return False  # the model computes in a low precision already
    key = target.key(program)
    return bool(key.get("fp32_upcasts") or key.get("attention"))


def unknown_flag(parser, given):
    """Exit status 2 and what was meant: the closest flag the recorder has, as bucketsim says."""
    flags = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    flag = given.split("=", 1)[0]
    close = difflib.get_close_matches(flag, flags, n=1, cutoff=0.6)
    what = "unknown flag" if flag.startswith("-") else "unexpected argument"
    hint = f"; did you mean '{close[0]}'?" if close else ""
    print(f"record_program: error: {what} '{given}'{hint} (see 'record_program.py --help')",
          file=sys.stderr)
    return 2
