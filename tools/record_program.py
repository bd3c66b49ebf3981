#!/usr/bin/env python3
"""Records a real PyTorch model's program for bucketsim (traces/program-v1.schema.json).

    /usr/bin/python3 tools/record_program.py my_models.py:build_model \
        --batch my_models.py:make_batch --wrap TransformerBlock [--wrap-policy FILE.py:FN] \
        [--device cpu|cuda|meta] [--optimizer sgd|sgd-momentum|adam|adamw \
        [--optimizer-impl for-loop|foreach|fused] [--weight-decay X]] -o model.json
    bucketsim gen program model.json --world-size 64 ... -o trace.json

It imports the user's code, builds the model (build_model() -> nn.Module) and its batch
(make_batch() -> a tensor, a tuple of the forward's arguments, or a dict of its keyword
arguments, model(**batch) as Hugging Face models take it), and runs the forward and the loss of
one training step in one process. The loss is the model's output when that is a scalar; a
tensor's mean; a tuple's first element; a dict's "loss" (an error without one). What it writes:

  instances  the FSDP instances: the root (the whole model) first, then every module whose class
             name is given to --wrap, or for which the --wrap-policy function FN(module, name)
             returns True, in named_modules() order. Each owns the parameters of its module that
             no nested instance owns, as one flat parameter whose `views` are those parameters,
             named as the model names them (fairscale's flatten_parameters; --no-flatten: each
             parameter its own).
  forward    module forward hooks give `gather` / `end_forward` around each instance's forward;
             every ATen op (a TorchDispatchMode below autograd) on activations is a `run`: its
             inputs and outputs (a view or an in-place result is an output with `alias`: the
             storage it shares, no memory of its own), what its backward gives each input
             (`pass` for views, clone, sum and same-shape add/expand, whose gradient is the
             output's own or a view of it; `none` for detach; else a new tensor: autograd's
             derivative formulas, tools/autograd/derivatives.yaml), the instances whose parameters
             it reads (`uses`), FLOPs of matmuls and convolutions from their shapes (other ops:
             one per output element).
  saves      after the forward, the autograd graph from the loss is walked: what every node
             saved (its SavedVariables, deduplicated by storage: the real sizes) becomes the
             saves of the run whose output the node produced, so bucketsim releases each at that
             run's backward, as autograd does (Node::release_variables). Parameters saved by a
             node are not activations and are left out. saved_tensors_hooks count every packed
             tensor, so a save the walk could not attribute is reported, never lost silently.
  param_reads the same graph gives each run the parameters whose gradient its backward makes:
             from the nodes the run produced, down through nodes no run produced (a parameter's
             t(), view, expand: they pass the gradient on) to parameters' AccumulateGrad nodes.
             No backward is run for it, so it is the same on meta.
  gradients on cpu and cuda, the backward is run with a hook on every program tensor that
             requires grad (torch.Tensor.register_hook): an input that one run reads gets `pass`
             where its gradient shares the storage of the run's output's gradient, else `new`
             (a view of a transposed gradient copies, for one). Inputs read by several runs,
             and every input on meta, keep the kind from autograd's formulas above.
  checkpoint torch.utils.checkpoint.checkpoint(fn, *args) calls become checkpoint_begin (saves:
             the region's tensor arguments) ... checkpoint_end; while recording, the region runs
             with grad enabled so that its saves (what the recompute keeps) are seen. Then each
             region's fn runs once more as the real forward runs it, under no_grad, with a
             weakref finalizer on every tensor it makes: a tensor that dies after its last
             reader (a local variable of the module's forward, alive until it returns) goes in
             the `releases` of the run after which it died (on every device, meta too).
  measured   on cpu or cuda, a second, unhooked run of the whole step (forward, backward,
             optimizer step, zero_grad) measures the live bytes at every mark and each phase's
             peak (tools/recorder/measure.py); bucketsim shows them beside its prediction.
  optimizer  with --optimizer: {"name": NAME, "impl": IMPL, "weight_decay": X}, the optimizer
             the model trains with, which `gen program` emits. IMPL and X only where given
             (--optimizer-impl, --weight-decay): absent, `gen program` takes torch's default
             where the trace is emitted for (foreach for FSDP1 and FSDP2 on CUDA), not the
             recording device's. The measured step runs with the given ones, else the
             recording device's defaults (the for-loop on cpu and meta, and on cuda under torch
             1.x; foreach on cuda under 2.x; weight decay 0.01 for adamw, else 0), which the
             measured note names. Without --optimizer there is no key, and the step is measured
             with plain SGD.

A model already wrapped: where build_model() returns a model wrapped with FSDP1
(FullyShardedDataParallel, device_id=torch.device("cpu") on CPU) or FSDP2 (fully_shard; torch
2.6's FSDPModule), its units are the instances (the root first, then every wrapped module in
named_modules() order, each owning the parameters no nested unit owns: FSDP1's flat parameter
with its views, FSDP2's parameters each its own), and --wrap, --wrap-policy (and --no-flatten
with FSDP1) are errors. The model is unwrapped (tools/recorder/wrapped_fsdp.py) before anything runs
(wrappers replaced by the modules they wrap, FSDP2's hooks, state and class removed, each parameter unsharded:
summon_full_params, DTensor.full_tensor), so the forward recorded and the step measured are the
original model's, as --wrap records it. The settings go to the program's "fsdp" key, with
PyTorch's names and values: {"implementation": "fsdp1"|"fsdp2", "settings": the first unit's,
"instances": {name: the keys a later unit has otherwise}} (traces/README.md). Wrapping needs a
default process group: when the user's code starts none, the recorder starts one of world size
2 on torch's fake backend (collectives do nothing, no network), so that FSDP1 keeps its strategy
(at world size 1 it makes every strategy NO_SHARD; under a user's world-size-1 group the settings
say NO_SHARD, and a note says why). The fake group gathers nothing, so under it the unsharded
parameters get deterministic values (uniform in [-0.1, 0.1), seed 0), not the model's: only a
model whose op sizes depend on parameter values would record differently.

torch versions: 1.13 (Debian 12) and 2.6 (tools/torch2.sh) record the same programs, with no
warnings of the recorder's own (storages are read with untyped_storage() where torch has it),
but for what PyTorch itself does differently: 2.x's reshape and matmul make `view` runs where
1.13 made `_reshape_alias` (same aliasing), and 1.13's mean over dimensions saves its whole
input (MeanBackward1 keeps self; 2.x keeps only its numel), so such a run has a save in 1.13
only.

--device meta builds the model and batch on the meta device (factory calls get device='meta'
unless they name a device) and records without computing anything: sizes come from shapes, so a
7B-class model records in seconds on any machine. An op that the installed torch has no meta
kernel for is run on the CPU on all-ones inputs of the same shapes and its outputs moved back
to meta; the ops this happened to are listed on stderr and in the description. Where such an
op's output size depends on values (nonzero, masked_select, repeat_interleave), the size is a
guess: record such a model on cpu or cuda. Nothing is
measured on meta.

Exit status: 0 written; 2 bad usage (a FILE:FN that does not load, a --wrap class the model does
not have, a batch that is not tensors, a wrapping that splits a shared parameter, a model that
fails to run, an output with no loss: the message says which, and where in the user's code).
"""

import argparse
import json
import os
import sys
import weakref

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402
import torch.utils.checkpoint  # noqa: E402
from torch.overrides import TorchFunctionMode  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_flatten, tree_map  # noqa: E402

from recorder import measure, optimizer as optim, step as steps  # noqa: E402
from recorder.load import load_function  # noqa: E402
from recorder.wrapped_fsdp import UnwrapError, start_process_group, unwrap_fsdp  # noqa: E402

DTYPES = {torch.float64: "fp64", torch.float32: "fp32", torch.float16: "fp16",
          torch.bfloat16: "bf16", torch.int64: "int64", torch.int32: "int32",
          torch.int16: "int16", torch.int8: "int8", torch.uint8: "uint8", torch.bool: "bool"}


class UsageError(Exception):
    """Bad usage or a user model that cannot be recorded: the message says what."""


# --- torch.utils.checkpoint, seen by the recorder -------------------------------------------

_original_checkpoint = torch.utils.checkpoint.checkpoint
_active_recorder = None


def _checkpoint(function, *args, **kwargs):
    """torch.utils.checkpoint.checkpoint, unchanged unless a recording is under way."""
    if _active_recorder is None:
        return _original_checkpoint(function, *args, **kwargs)
    return _active_recorder.checkpoint_region(function, args, kwargs)


# Installed before the user's code is imported, so `from torch.utils.checkpoint import
# checkpoint` binds this one too.
torch.utils.checkpoint.checkpoint = _checkpoint


# --- meta device ------------------------------------------------------------------------------

_FACTORIES = {torch.empty, torch.zeros, torch.ones, torch.full, torch.rand, torch.randn,
              torch.randint, torch.arange, torch.tensor, torch.empty_strided, torch.eye,
              torch.linspace, torch.randperm, torch.as_tensor, torch.zeros_like,
              torch.ones_like, torch.empty_like, torch.rand_like, torch.randn_like,
              torch.full_like}


class _OnMeta(TorchFunctionMode):
    """Factory calls that name no device make meta tensors (what torch 2's
    `with torch.device('meta')` does; torch 1.13 has no such context)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in _FACTORIES and kwargs.get("device") is None:
            kwargs["device"] = "meta"
            if func is torch.as_tensor or func is torch.tensor:
                kwargs.pop("device")
                return func(*args, **kwargs).to("meta")
        return func(*args, **kwargs)


def _meta_fallback(func, args, kwargs):
    """Runs an op without a meta kernel on CPU ones of its inputs' shapes. Meta tensors have no
    values: where an output's size depends on them (nonzero, masked_select, repeat_interleave's
    repeats, unique) it is that of all-ones inputs: everything selected, every repeat 1."""
    def to_cpu(t):
        if isinstance(t, torch.Tensor) and t.device.type == "meta":
            return torch.ones(t.shape, dtype=t.dtype)
        return t

    def to_meta(t):
        if isinstance(t, torch.Tensor):
            return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
        return t

    out = func(*tree_map(to_cpu, args), **tree_map(to_cpu, kwargs))
    if func._schema.is_mutable and args and isinstance(args[0], torch.Tensor):
        return args[0]
    return tree_map(to_meta, out)


# --- the recording ----------------------------------------------------------------------------

def _storage(t):
    """The tensor's untyped storage: `untyped_storage()` from torch 2.0 on, where `storage()`
    warns that TypedStorage is deprecated; `storage()` on torch 1.13, which has no
    untyped_storage (its TypedStorage has the same _cdata and nbytes)."""
    return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()


def storage_key(t):
    return _storage(t)._cdata


def storage_bytes(t):
    return _storage(t).nbytes()


def dtype_name(dtype):
    if dtype not in DTYPES:
        raise UsageError(f"a tensor of dtype {dtype} is not expressible in a program")
    return DTYPES[dtype]


def op_flops(func, args, outs):
    """Forward FLOPs from shapes: 2 per multiply-add of matmuls and convolutions, else one per
    output element."""
    name = func.__name__ if hasattr(func, "__name__") else str(func)
    base = name.split(".")[0]
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    out_numel = sum(o.numel() for o in outs)
    try:
        if base in ("mm", "bmm", "matmul"):
            a, b = tensors[0], tensors[1]
            return 2.0 * a.numel() * b.shape[-1]
        if base in ("addmm", "baddbmm", "addbmm"):
            a, b = tensors[1], tensors[2]
            return 2.0 * a.numel() * b.shape[-1]
        if base in ("convolution", "_convolution", "conv2d", "conv1d", "conv3d",
                    "mkldnn_convolution", "_slow_conv2d_forward", "thnn_conv2d"):
            w = tensors[1]
            return 2.0 * outs[0].numel() * (w.numel() // w.shape[0])
    except (IndexError, AttributeError):
        pass
    return float(out_numel)


class Recorder(TorchDispatchMode):
    def __init__(self, model, instance_modules, device):
        super().__init__()
        self.device = device
        self.meta = device == "meta"
        self.fallback_ops = set()
        self.program_ops = []       # the forward program, gather/end_forward/run/checkpoint_*
        self.tensors = {}           # storage key -> program tensor id
        self.keep = []              # every tensor seen: storage keys stay unique while recording
        self.producer = {}          # storage key -> index in program_ops of the run that made it
        self.param_instance = {}    # storage key of a parameter -> instance index
        self.module_stack = []
        self.pending = []           # (op index, output tensors) awaiting their grad_fn
        self.node_run = {}          # autograd node -> op index
        self.packed = {}            # storage key -> bytes, every tensor saved (pack hook)
        self.next_id = 0
        self.regions = []           # (checkpoint_begin index, function, args, kwargs)
        self.replaying = False      # a region's function runs again (attribute_releases)
        self.held = []              # tensors alive until the loss is dropped
        self.ids = {}               # TensorImpl (t._cdata) -> program tensor id
        self.latest = {}            # storage key -> its newest program tensor id
        self.id_storage = {}        # program tensor id -> storage key
        names = {m: n for n, m in model.named_modules()}
        self.modules = {n or "root": m for m, n in names.items()}
        self.instance_names = [names[m] or "root" for m in instance_modules]
        for f, module in enumerate(instance_modules):
            module.register_forward_pre_hook(self._gather_hook(f))
            module.register_forward_hook(self._end_hook(f))
        for name, module in model.named_modules():
            module.register_forward_pre_hook(self._enter(name or "root"))
            module.register_forward_hook(self._leave())
        # The innermost instance owns a parameter (instances are in named_modules order, so a
        # nested one comes after its parent and overrides it). Parameters are named as the
        # model names them (a tied one by its first name), so names are unique in the program.
        self.instance_params = [[] for _ in instance_modules]  # (name, numel) per instance
        self.param_name = {}        # storage key of a parameter -> its name
        full_name = {p: n for n, p in model.named_parameters()}
        owner = {}
        for f, module in enumerate(instance_modules):
            for _, p in module.named_parameters():
                owner[p] = f
        for p, f in owner.items():
            self.instance_params[f].append((full_name[p], p.numel()))
            self.param_instance[storage_key(p)] = f
            self.param_name[storage_key(p)] = full_name[p]
            self.keep.append(p)
        # Buffers (BatchNorm's running statistics, ...) are not sharded by FSDP and live all
        # run: the program's inputs. Like parameters they are neither activations nor saves.
        self.buffers = {}
        for name, b in model.named_buffers():
            if b.layout == torch.strided and storage_key(b) not in self.buffers:
                self.buffers[storage_key(b)] = (name, b)
                self.keep.append(b)

    # module hooks
    def _gather_hook(self, f):
        def hook(module, inputs):
            if self.replaying:
                return
            self._settle()
            self.program_ops.append({"op": "gather", "instance": self.instance_names[f]})
        return hook

    def _end_hook(self, f):
        def hook(module, inputs, output):
            if self.replaying:
                return
            self._settle()
            self.program_ops.append({"op": "end_forward", "instance": self.instance_names[f]})
        return hook

    def _enter(self, name):
        def hook(module, inputs):
            self.module_stack.append(name)
        return hook

    def _leave(self):
        def hook(module, inputs, output):
            self.module_stack.pop()
        return hook

    def new_tensor(self, t, name=None, alias=None):
        """A program tensor for `t`: new storage, or (alias) a view or an in-place result of
        the program tensor `alias`, which shares its storage (its bytes are its gradient's)."""
        tid = f"t{self.next_id}"
        self.next_id += 1
        key = storage_key(t)
        self.ids[t._cdata] = tid
        self.latest[key] = tid
        self.id_storage[tid] = key
        self.keep.append(t)
        if alias is None:
            self.tensors[key] = tid
            size = storage_bytes(t)
        else:
            size = t.numel() * t.element_size()
        entry = {"id": tid, "bytes": size, "dtype": dtype_name(t.dtype), "shape": list(t.shape)}
        if name:
            entry["name"] = name
        if alias is not None:
            entry["alias"] = alias
        return entry

    def add_input(self, t, name):
        return self.new_tensor(t, name)

    def id_of(self, t):
        """The program tensor `t` is: itself, else the newest one of its storage."""
        tid = self.ids.get(t._cdata)
        return tid if tid is not None else self.latest.get(storage_key(t))

    # checkpoint regions
    def checkpoint_region(self, function, args, kwargs):
        self._settle()
        saves = []
        for a in args:
            if isinstance(a, torch.Tensor) and storage_key(a) in self.tensors:
                saves.append({"tensor": self.id_of(a)})
        # torch.utils.checkpoint keeps torch.get_rng_state() (a CPU uint8 tensor) on its ctx
        # for the recompute unless preserve_rng_state=False. It is a Python attribute, not a
        # saved variable: it lives as long as the graph, i.e. until the loss is dropped (held).
        # Device memory only when recording on CPU: the CUDA generators' states are CPU
        # tensors too.
        if kwargs.get("preserve_rng_state", True) and self.device == "cpu":
            state = torch.get_rng_state()
            where = self.module_stack[-1] if self.module_stack else "root"
            tid = f"t{self.next_id}"
            self.next_id += 1
            self.program_ops.append({"op": "run", "name": f"{where}:checkpoint rng state",
                                     "outputs": [{"id": tid, "bytes": state.numel(),
                                                  "dtype": "uint8", "shape": list(state.shape),
                                                  "name": "cpu rng state",
                                                  "requires_grad": False}]})
            self.held.append(tid)
        kwargs = {k: v for k, v in kwargs.items()
                  if k not in ("use_reentrant", "preserve_rng_state")}
        self.program_ops.append({"op": "checkpoint_begin", "saves": saves})
        begin = len(self.program_ops) - 1
        out = function(*args, **kwargs)
        self._settle()
        self.program_ops.append({"op": "checkpoint_end"})
        self.regions.append((begin, function, args, kwargs))
        return out

    def attribute_releases(self):
        """Runs every checkpointed region's function again as the real forward does, under
        no_grad (only what Python references keeps a tensor alive there), and notes after which
        of its runs each tensor it makes dies: where that is after the tensor's last reader
        (a local variable of the model's code, alive until its function returns), the run
        gets it in `releases`. Returns the regions that did not run again, or ran other ops
        than recorded (left as they are)."""
        skipped = []
        for begin, function, args, kwargs in self.regions:
            end = next(k for k in range(begin, len(self.program_ops))
                       if self.program_ops[k]["op"] == "checkpoint_end")
            # The runs that make a storage (a view or in-place op only makes a tensor on one:
            # grad mode adds some, a detach, that no_grad does not).
            runs = [k for k in range(begin + 1, end) if self.program_ops[k]["op"] == "run" and
                    any("alias" not in e for e in self.program_ops[k]["outputs"])]
            mode = _Lifetimes(self)
            self.replaying = True
            try:
                with torch.no_grad(), mode:
                    out = function(*args, **kwargs)
                mode.done = True
                del out
            except Exception:  # it ran once already; a second run is the user's code's call
                skipped.append(begin)
                continue
            finally:
                self.replaying = False
            names = [self.program_ops[k]["name"].split(":")[-1] for k in runs]
            if mode.op_names != names:
                skipped.append(begin)
                continue
            last_use = {}  # storage key -> position of the last run that reads or makes it
            for position, k in enumerate(runs):
                op = self.program_ops[k]
                for i in op.get("inputs", []) + [e["id"] for e in op["outputs"]]:
                    tid = i if isinstance(i, str) else i["tensor"]
                    last_use[self.id_storage.get(tid)] = position
            for (position, m), died in sorted(mode.deaths.items()):
                made = [e["id"] for e in self.program_ops[runs[position]]["outputs"]
                        if "alias" not in e]
                tid = made[m]
                if died > last_use.get(self.id_storage[tid], position):
                    self.program_ops[runs[died]].setdefault("releases", []).append(tid)
        return skipped

    # every ATen op
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self._settle()
        if self.meta:
            try:
                out = func(*args, **kwargs)
            except (NotImplementedError, RuntimeError) as e:
                if "meta" not in str(e).lower():
                    raise
                self.fallback_ops.add(str(func.overloadpacket.__name__))
                out = _meta_fallback(func, args, kwargs)
        else:
            out = func(*args, **kwargs)
        in_tensors = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        out_tensors = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
        inputs, uses = [], []  # (id, tensor)
        for a in in_tensors:
            if a.layout != torch.strided:
                continue
            key = storage_key(a)
            if key in self.param_instance:
                f = self.instance_names[self.param_instance[key]]
                if f not in uses:
                    uses.append(f)
            elif key in self.buffers:
                continue
            else:
                tid = self.id_of(a)
                if tid is not None and tid not in [i for i, _ in inputs]:
                    inputs.append((tid, a))
        outputs = []  # (tensor, entry)
        for o in out_tensors:
            if o.layout != torch.strided:
                continue
            key = storage_key(o)
            if key in self.param_instance or key in self.buffers:
                continue  # a view of a parameter (weight.t()), a buffer updated in place
            if key in self.tensors:  # a view or an in-place result: same storage
                same = [i for i, a in inputs if storage_key(a) == key]
                outputs.append((o, self.new_tensor(o, alias=same[0] if same
                                                   else self.latest[key])))
            elif storage_bytes(o) > 0:  # an empty tensor holds no memory
                outputs.append((o, self.new_tensor(o)))
        if outputs:
            op_name = func.overloadpacket.__name__
            where = self.module_stack[-1] if self.module_stack else "root"
            new_outputs = [o for o, e in outputs if "alias" not in e]
            out_ids = {e["id"] for _, e in outputs}
            run = {"op": "run", "name": f"{where}:{op_name}",
                   "flops": op_flops(func, args, new_outputs) if new_outputs or
                   func._schema.is_mutable else 0.0,
                   "uses": uses,
                   "inputs": [input_ref(tid, grad_kind(op_name, a, out_tensors[0]))
                              for tid, a in inputs if tid not in out_ids],
                   "outputs": [e for _, e in outputs], "saves": []}
            index = len(self.program_ops)
            self.program_ops.append(run)
            for o, e in outputs:
                if "alias" not in e:
                    self.producer[storage_key(o)] = index
            self.pending.append((index, [o for o, _ in outputs]))
        return out

    def _settle(self):
        """Reads the autograd node of the previous ops' outputs: autograd sets grad_fn when the
        op returns through it, so it is known once the next op starts."""
        for index, outs in self.pending:
            for o in outs:
                node = o.grad_fn
                if node is not None and node not in self.node_run:
                    self.node_run[node] = index
        self.pending = []

    def measure_grad_kinds(self, loss):
        """Runs the backward with a hook on every program tensor that requires grad and sets
        each run input's gradient kind from what autograd did: `pass` where the input's
        gradient shares the storage of the run's first output's gradient, else `new`. Only for
        inputs that one run reads (a tensor read by several gets the sum of their gradients,
        a new tensor whatever each did): the others keep the table's kind (grad_kind).
        Returns how many kinds were measured and how many of those the table had wrong."""
        grads = {}
        tensors = {}
        for t in self.keep:
            tid = self.ids.get(t._cdata)
            if tid is not None and t.requires_grad and tid not in tensors:
                tensors[tid] = t
        for tid, t in tensors.items():
            # The grads are kept: a freed gradient's storage could be reused by the next one.
            t.register_hook(lambda g, tid=tid: grads.__setitem__(tid, g))
        loss.backward()
        readers = {}
        for op in self.program_ops:
            for i in op.get("inputs", []):
                tid = i if isinstance(i, str) else i["tensor"]
                readers[tid] = readers.get(tid, 0) + 1
        measured = wrong = 0
        for op in self.program_ops:
            if op["op"] != "run" or not op["outputs"]:
                continue
            out_grad = grads.get(op["outputs"][0]["id"])
            for k, i in enumerate(op.get("inputs", [])):
                tid = i if isinstance(i, str) else i["tensor"]
                table = "new" if isinstance(i, str) else i["grad"]
                if out_grad is None or tid not in grads or readers[tid] != 1 or table == "none":
                    continue
                kind = ("pass" if storage_key(grads[tid]) == storage_key(out_grad) else "new")
                measured += 1
                wrong += kind != table
                op["inputs"][k] = input_ref(tid, kind)
        return measured, wrong

    def attribute_param_reads(self, loss):
        """Sets every run's param_reads: the parameters whose gradient its backward makes. The
        autograd graph from the loss is what the engine follows: from each node a run produced,
        the edges are followed through the nodes no run produced (the t(), view or expand of a
        parameter, whose backward passes the gradient on) down to parameters' AccumulateGrad
        nodes; the walk stops at another run's node. A parameter two runs read gets both, and
        bucketsim sums them as autograd's input buffer does. The graph is there on every
        device, meta too, so this needs no backward. A parameter's instance missing from the
        run's uses is added to them."""
        self._settle()
        reads = {}  # op index -> set of parameter storage keys
        for node, index in self.node_run.items():
            found = reads.setdefault(index, set())
            seen, stack = set(), [n for n, _ in node.next_functions]
            while stack:
                n = stack.pop()
                if n is None or n in seen:
                    continue
                seen.add(n)
                variable = getattr(n, "variable", None)
                if isinstance(variable, torch.Tensor):
                    if storage_key(variable) in self.param_instance:
                        found.add(storage_key(variable))
                    continue
                if n in self.node_run:
                    continue
                stack.extend(c for c, _ in n.next_functions)
        order = {key: k for k, key in enumerate(self.param_name)}
        for index, op in enumerate(self.program_ops):
            if op["op"] != "run":
                continue
            keys = sorted(reads.get(index, ()), key=order.get)
            uses = op.setdefault("uses", [])
            for key in keys:
                f = self.instance_names[self.param_instance[key]]
                if f not in uses:
                    uses.append(f)
            if uses:
                op["param_reads"] = [self.param_name[key] for key in keys]

    # after the forward
    def attribute_saves(self, loss):
        self._settle()
        seen, stack = set(), [loss.grad_fn] if loss.grad_fn is not None else []
        unattributed = 0
        while stack:
            node = stack.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            stack.extend(n for n, _ in node.next_functions)
            saved = saved_tensors_of(node)
            if not saved:
                continue
            index = self.node_run.get(node)
            if index is None:
                # A node no recorded op produced (e.g. a composite's own node): its saves go to
                # the run that made what it saved, released at that run's backward.
                keys = [storage_key(t) for t in saved if storage_key(t) in self.producer]
                index = self.producer.get(keys[0]) if keys else None
            if index is None:
                unattributed += len(saved)
                continue
            run = self.program_ops[index]
            have = {s.get("tensor") for s in run["saves"]}
            for t in saved:
                key = storage_key(t)
                if key in self.param_instance or key in self.buffers:
                    continue
                # A CPU scalar of a CUDA (or meta) op (a Python number wrapped as a tensor)
                # is not the device's memory.
                if t.device.type != self.device:
                    continue
                if key in self.tensors:
                    # The run's own input or output of that storage, else the storage's first
                    # tensor: a save names a tensor made by this run or an earlier one.
                    own = [i if isinstance(i, str) else i["tensor"] for i in run["inputs"]]
                    own += [e["id"] for e in run["outputs"]]
                    same = [i for i in own if self.id_storage.get(i) == key]
                    tid = same[0] if same else self.tensors[key]
                    if tid not in have:
                        run["saves"].append({"tensor": tid})
                        have.add(tid)
                else:  # made by autograd itself for saving: only the backward keeps it
                    self.keep.append(t)
                    self.tensors[key] = f"saved{len(self.tensors)}"
                    run["saves"].append({"bytes": storage_bytes(t),
                                         "dtype": dtype_name(t.dtype), "shape": list(t.shape)})
        return unattributed


class _Lifetimes(TorchDispatchMode):
    """A checkpointed region's function run again: the ops that make a new storage (outputs
    that are no parameter or buffer, as the recorder counts them), and for each new storage the
    op after which its last tensor (views included) died (weakref finalizers: a tensor's Python
    object lives exactly as long as the tensor)."""

    def __init__(self, rec):
        super().__init__()
        self.rec = rec
        self.op_names = []
        self.maker = {}    # storage key -> (op position, index among its new outputs)
        self.alive = {}    # storage key -> tensors on it still alive
        self.deaths = {}   # (op position, index) -> op position after which it died
        self.done = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.rec.meta:
            try:
                out = func(*args, **kwargs)
            except (NotImplementedError, RuntimeError):
                out = _meta_fallback(func, args, kwargs)
        else:
            out = func(*args, **kwargs)
        made = []
        for o in tree_flatten(out)[0]:
            if not isinstance(o, torch.Tensor) or o.layout != torch.strided:
                continue
            key = storage_key(o)
            if key in self.rec.param_instance or key in self.rec.buffers:
                continue
            if key in self.maker or key in self.rec.tensors:
                made.append((o, key, False))
            elif storage_bytes(o) > 0:
                made.append((o, key, True))
        if any(fresh for _, _, fresh in made):
            self.op_names.append(func.overloadpacket.__name__)
        position = len(self.op_names) - 1
        if made:
            new = 0
            for o, key, fresh in made:
                if fresh:
                    self.maker[key] = (position, new)
                    new += 1
                if key in self.maker:
                    self.alive[key] = self.alive.get(key, 0) + 1
                    weakref.finalize(o, self._died, key)
        return out

    def _died(self, key):
        self.alive[key] -= 1
        if self.alive[key] == 0:
            made = self.maker.pop(key)  # the key may name a new storage from now on
            if not self.done:
                self.deaths[made] = len(self.op_names) - 1


# Ops whose backward hands an input the gradient of their output itself or a view of it (no
# new memory; tools/autograd derivatives.yaml of torch 1.13): views, clone, and add/sub's `self`
# (add's `other` too with alpha 1) when no broadcasting shrinks it, sum (an expand of the
# output's gradient). A detached tensor gets none. All others: a new tensor (the default).
PASS_OPS = {"view", "_unsafe_view", "_reshape_alias", "reshape", "t", "transpose", "permute",
            "unsqueeze", "squeeze", "alias", "clone", "contiguous", "add", "add_", "sum",
            "flatten", "view_as", "expand", "expand_as"}
SAME_SHAPE_PASS_OPS = {"add", "add_", "expand", "expand_as"}  # else summed down: new
NO_GRAD_OPS = {"detach", "detach_"}


def grad_kind(op_name, a, out):
    if op_name in NO_GRAD_OPS:
        return "none"
    if op_name in SAME_SHAPE_PASS_OPS and tuple(a.shape) != tuple(out.shape):
        return "new"  # broadcast: autograd sums the gradient down to the input's shape
    return "pass" if op_name in PASS_OPS else "new"


def input_ref(tid, kind):
    return tid if kind == "new" else {"tensor": tid, "grad": kind}


def saved_tensors_of(node):
    out = []
    names = [n for n in dir(node) if n.startswith("_saved_")]
    for n in names:
        try:
            v = getattr(node, n)
        except RuntimeError:
            continue
        vs = v if isinstance(v, (tuple, list)) else [v]
        out.extend(t for t in vs if isinstance(t, torch.Tensor) and t.layout == torch.strided)
    if not names and hasattr(node, "saved_tensors"):  # a custom autograd.Function's ctx
        try:
            out.extend(t for t in node.saved_tensors if isinstance(t, torch.Tensor))
        except RuntimeError:
            pass
    return out


# --- instances --------------------------------------------------------------------------------

def choose_instances(model, wrap, policy):
    modules = [model]
    classes_seen = {type(m).__name__ for m in model.modules()}
    missing = [c for c in wrap if c not in classes_seen]
    if missing:
        raise UsageError(f"--wrap {', '.join(missing)}: the model has no module of that class "
                         f"(its classes: {', '.join(sorted(classes_seen))})")
    for name, module in model.named_modules():
        if module is model:
            continue
        chosen = type(module).__name__ in wrap
        if policy is not None:
            try:
                chosen = chosen or bool(policy(module, name))
            except Exception as e:
                raise UsageError(f"--wrap-policy failed on module '{name}': "
                                 f"{type(e).__name__}: {e}")
        if chosen:
            modules.append(module)
    return modules


# --- the whole recording ----------------------------------------------------------------------

def function_name(fn):
    """How the user named `fn`: FILE.py:NAME() for a function of theirs, else NAME()."""
    code = getattr(fn, "__code__", None)
    name = getattr(fn, "__name__", type(fn).__name__)
    return f"{os.path.basename(code.co_filename)}:{name}()" if code else f"{name}()"


def user_frame(e):
    """Where in the user's code `e` was raised: the innermost frame of its traceback outside
    torch and this recorder, as ", at FILE:LINE in FUNCTION: `SOURCE`" ("" if none)."""
    import traceback
    skip = (os.path.dirname(torch.__file__), HERE)
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if not os.path.abspath(f.filename).startswith(skip)]
    if not frames:
        return ""
    f = frames[-1]
    source = f" `{f.line.strip()}`" if f.line else ""
    return f", at {os.path.basename(f.filename)}:{f.lineno} in {f.name}:{source}"


def call_user(fn, what=None):
    try:
        return fn()
    except Exception as e:
        raise UsageError(f"{what or function_name(fn)} raised {type(e).__name__}: {e}"
                         f"{user_frame(e)}")


def check_shared_params(model, instances):
    """Refuses a wrapping that puts the modules sharing one parameter (an embedding tied to the
    LM head) in different instances. FSDP1 and fully_shard both require a shared parameter to
    be in one unit, the lowest common ancestor of the modules that use it (torch's FSDP docs,
    "shared parameters"); a module whose unit is not that one would read it resharded. Each
    module belongs to the innermost instance around it, as the recorder assigns parameters."""
    names = {m: n or "root" for n, m in model.named_modules()}
    unit = {}
    for f, module in enumerate(instances):
        for sub in module.modules():
            unit[sub] = f
    users = {}
    for name, module in model.named_modules(remove_duplicate=False):
        for pname, p in module.named_parameters(recurse=False):
            users.setdefault(p, []).append((f"{name}.{pname}" if name else pname, unit[module]))
    for p, uses in users.items():
        if len({f for _, f in uses}) > 1:
            said = ", ".join(f"'{n}' (instance '{names[instances[f]]}')" for n, f in uses)
            raise UsageError(f"a parameter is shared across FSDP instances: {said}. FSDP needs a "
                             "shared parameter in one instance, around every module that uses "
                             "it: wrap their common ancestor, or leave the module that holds it "
                             "unwrapped (a tied embedding stays in the root)")


def record(build_model, make_batch, wrap, policy, device, description, flatten=True):
    global _active_recorder
    meta = device == "meta"
    own_group = start_process_group()
    mode = _OnMeta() if meta else None
    if mode:
        mode.__enter__()
    try:
        model = call_user(build_model)
        batch = call_user(make_batch)
    finally:
        if mode:
            mode.__exit__(None, None, None)
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"{function_name(build_model)} returned {type(model).__name__}, not a "
                         "torch.nn.Module")
    try:
        args, kwargs = steps.as_call(batch)
    except steps.BatchError as e:
        raise UsageError(str(e).replace("make_batch()", function_name(make_batch)))
    try:
        model, instances, fsdp = unwrap_fsdp(model, fill=own_group)
    except UnwrapError as e:
        raise UsageError(str(e))
    if fsdp is not None:
        flatten = check_wrapped(fsdp, wrap, policy, flatten)
    if not meta:
        model = model.to(device)
        args, kwargs = steps.batch_on((args, kwargs), device)
    model.train()
    if instances is None:
        instances = choose_instances(model, wrap, policy)
        check_shared_params(model, instances)
    rec = Recorder(model, instances, device)
    rec.own_group = own_group
    inputs = [rec.add_input(b, f"buffer {name}") for name, b in rec.buffers.values()]
    inputs += [rec.add_input(b, f"batch[{i}]") for i, b in enumerate(args)
               if isinstance(b, torch.Tensor)]
    inputs += [rec.add_input(b, f"batch[{k!r}]") for k, b in kwargs.items()
               if isinstance(b, torch.Tensor)]
    packed = {}

    def pack(t):
        # A CPU scalar saved by a device op is not device memory (left out by the walk too).
        if t.layout == torch.strided and t.device.type == device:
            packed[storage_key(t)] = storage_bytes(t)
        return t

    _active_recorder = rec
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            with rec:
                out = model(*args, **kwargs)
                loss = steps.to_loss(out)
    except UsageError:
        raise
    except steps.LossError as e:
        raise UsageError(str(e))
    except Exception as e:
        where = ""
        if rec.module_stack:
            name = rec.module_stack[-1]
            where = f", in module '{name}' ({type(rec.modules[name]).__name__})"
        raise UsageError(f"the model's forward raised {type(e).__name__}: {e}{where}"
                         f"{user_frame(e)}")
    finally:
        _active_recorder = None
    if loss.grad_fn is None:
        raise UsageError("the loss does not require grad: nothing to train")
    unattributed = rec.attribute_saves(loss)
    rec.attribute_param_reads(loss)
    skipped = rec.attribute_releases()
    if skipped:
        print(f"record_program: warning: {len(skipped)} checkpointed region(s) did not run "
              "again under no_grad as recorded: their tensors' Python lifetimes are left out",
              file=sys.stderr)
    if rec.id_of(loss) is None:
        raise UsageError("the loss is not a tensor the forward made")
    rec.grad_kinds = (0, 0)
    if not meta:  # backward on meta tensors fails for convolutions in torch 1.13
        try:
            rec.grad_kinds = rec.measure_grad_kinds(loss)
        except Exception as e:
            raise UsageError(f"the model's backward raised {type(e).__name__}: {e}"
                             f"{user_frame(e)}")
    missing_packs = [k for k in packed if k not in rec.param_instance and k not in rec.tensors
                     and k not in rec.buffers]
    if unattributed or missing_packs:
        print(f"record_program: warning: {unattributed + len(missing_packs)} saved tensor(s) "
              "could not be attributed to a run and are left out", file=sys.stderr)
    # Outputs require grad as the real tensors say (known now that autograd has run).
    id_req = {}
    for t in rec.keep:
        tid = rec.ids.get(t._cdata)
        if tid is not None:
            id_req[tid] = id_req.get(tid, False) or t.requires_grad
    for op in rec.program_ops:
        if op["op"] == "run":
            for e in op["outputs"]:
                e["requires_grad"] = bool(id_req.get(e["id"], False)) and \
                    e["dtype"] in ("fp64", "fp32", "fp16", "bf16")
    program = {
        "format": "bucketsim-program",
        "schema_version": 1,
        "description": description,
        "instances": [{"name": n, "params": instance_params(params, flatten)}
                      for n, params in zip(rec.instance_names, rec.instance_params)],
        "inputs": inputs,
        "forward": [prune(op) for op in rec.program_ops],
        "loss": rec.id_of(loss),
    }
    if rec.held:
        program["held"] = rec.held
    if fsdp is not None:
        program["fsdp"] = fsdp
    return program, rec


def check_wrapped(fsdp, wrap, policy, flatten):
    """The units of a wrapped model are its own: --wrap and --wrap-policy are errors. Returns
    whether its units flatten their parameters: FSDP1 does (a FlatParameter per unit, so
    --no-flatten is an error too), fully_shard does not (each parameter sharded on its own)."""
    implementation = fsdp["implementation"]
    if wrap or policy is not None:
        raise UsageError(f"build_model() returned a model already wrapped with {implementation}: "
                         "its units are read from it; --wrap and --wrap-policy apply only to an "
                         "unwrapped model")
    if implementation == "fsdp1" and not flatten:
        raise UsageError("build_model() returned a model wrapped with FSDP1, which flattens each "
                         "unit's parameters into one FlatParameter: --no-flatten does not apply")
    if implementation == "fsdp1" and fsdp["settings"]["sharding_strategy"] == "NO_SHARD":
        import torch.distributed as dist
        if dist.get_world_size() == 1:
            print("record_program: note: FSDP1 makes every strategy NO_SHARD at world size 1, "
                  "the size of the process group the model was wrapped under: the settings "
                  "say NO_SHARD", file=sys.stderr)
    return implementation == "fsdp1"


def instance_params(params, flatten):
    """fairscale's flatten_parameters=True (its default): one flat parameter, whose views are
    the original parameters (FlattenParamsWrapper's split + view, in this order); else the
    module's own, each its own allocation."""
    if not params:
        return []
    if flatten:
        return [{"name": "flat_param_0", "numel": sum(numel for _, numel in params),
                 "views": [{"name": name, "numel": numel} for name, numel in params]}]
    return [{"name": name, "numel": numel} for name, numel in params]


def prune(op):
    """Drops a run's empty lists (the format's defaults; an empty param_reads says the run's
    backward makes no parameter gradient, and stays)."""
    return {k: v for k, v in op.items()
            if not (isinstance(v, list) and not v and k not in ("outputs", "param_reads"))}


def main(argv=None):
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
    parser.add_argument("--optimizer", choices=optim.OPTIMIZERS,
                        help="the optimizer of the measured step, written to the program's "
                             "`optimizer` key (default: none written, the step measured with "
                             "sgd)")
    parser.add_argument("--optimizer-impl", choices=optim.IMPLS,
                        help="torch.optim's implementation of the step (default: the one torch "
                             "picks on --device; needs --optimizer)")
    parser.add_argument("--weight-decay", type=float, metavar="X",
                        help="the optimizer's weight decay (default: torch's, 0.01 for adamw, "
                             "else 0; needs --optimizer)")
    parser.add_argument("--no-measure", action="store_true",
                        help="do not run the measured step (cpu, cuda)")
    parser.add_argument("-o", "--output", required=True)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        return unknown_flag(parser, unknown[0])
    try:
        optimizer = optimizer_setting(args)
        if args.device == "cuda" and not torch.cuda.is_available():
            raise UsageError("--device cuda: this torch sees no CUDA device")
        build = load(args.model, "model")
        batch = load(args.batch, "--batch")
        policy = load(args.wrap_policy, "--wrap-policy") if args.wrap_policy else None
        description = (f"recorded by tools/record_program.py from {args.model} on "
                       f"{args.device}, torch {torch.__version__}")
        program, rec = record(build, batch, args.wrap, policy, args.device, description,
                              flatten=not args.no_flatten)
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
            step = {"name": "sgd", "impl": None, "weight_decay": None}
            if optimizer:
                step = {"name": optimizer["name"],
                        "impl": optimizer.get("impl") or optim.default_impl(args.device),
                        "weight_decay": optimizer.get("weight_decay",
                                                      optim.default_weight_decay(
                                                          optimizer["name"]))}
            try:
                measured, _ = measure.measure_step(unwrapped, batch, step["name"],
                                                        args.device, step["impl"],
                                                        step["weight_decay"])
            except optim.OptimizerError as e:
                raise UsageError(f"{e}; --no-measure records the program without running the "
                                 "step")
            measured["note"] += f"; optimizer {step['name']}" + (
                f" ({step['impl']}, weight decay {step['weight_decay']:g})" if optimizer else "")
            program["measured"] = measured
        if optimizer:
            program["optimizer"] = optimizer
    except UsageError as e:
        print(f"record_program: error: {e}", file=sys.stderr)
        return 2
    except SystemExit as e:  # load_function's messages
        print(f"record_program: error: {e}", file=sys.stderr)
        return 2
    tmp = args.output + ".tmp"
    try:
        with open(tmp, "w") as f:
            json.dump(program, f, indent=1)
            f.write("\n")
        os.replace(tmp, args.output)
    except OSError as e:
        print(f"record_program: error: cannot write '{args.output}': {e.strerror}",
              file=sys.stderr)
        return 2
    runs = sum(1 for op in program["forward"] if op["op"] == "run")
    numel = sum(p["numel"] for i in program["instances"] for p in i["params"])
    print(f"record_program: {args.output}: {len(program['instances'])} instance(s), {runs} runs, "
          f"{numel:,} "
          f"parameters" + (", measured on " + args.device if "measured" in program else ""))
    return 0


def unknown_flag(parser, given):
    """Exit status 2 and what was meant: the closest flag the recorder has, as bucketsim says."""
    import difflib
    flags = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    flag = given.split("=", 1)[0]
    close = difflib.get_close_matches(flag, flags, n=1, cutoff=0.6)
    what = "unknown flag" if flag.startswith("-") else "unexpected argument"
    hint = f"; did you mean '{close[0]}'?" if close else ""
    print(f"record_program: error: {what} '{given}'{hint} (see 'record_program.py --help')",
          file=sys.stderr)
    return 2


def optimizer_setting(args):
    """The program's `optimizer` key from --optimizer, --optimizer-impl and --weight-decay: the
    name, and the other two only where given (None without --optimizer)."""
    if args.optimizer is None:
        given = [flag for flag, value in (("--optimizer-impl", args.optimizer_impl),
                                          ("--weight-decay", args.weight_decay))
                 if value is not None]
        if given:
            raise UsageError(f"{given[0]} needs --optimizer (the optimizer it sets)")
        return None
    if args.weight_decay is not None and args.weight_decay < 0:
        raise UsageError(f"--weight-decay {args.weight_decay:g}: must be 0 or more")
    key = {"name": args.optimizer}
    if args.optimizer_impl is not None:
        key["impl"] = args.optimizer_impl
    if args.weight_decay is not None:
        key["weight_decay"] = args.weight_decay
    return key


def load(spec, what):
    return load_function(spec, what)


if __name__ == "__main__":
    sys.exit(main())
