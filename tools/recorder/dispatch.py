"""The forward as a program: the Recorder, a TorchDispatchMode below autograd that sees every
ATen op of the user's forward and writes each that makes a tensor as a `run`, with module hooks
that give `gather` / `end_forward` around each instance's forward.

The Recorder owns the program being written (program_ops) and the map from real tensors to
program tensor ids. What the autograd graph adds after the forward (saves, param_reads,
gradient kinds) is graph.py's; checkpoint regions are checkpoint.py's.
"""

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from .errors import UsageError
from .meta import meta_fallback
from .modules import owned_params
from .ops import grad_kind, input_ref, op_flops
from .tensors import GRAD_DTYPES, DTypeError, dtype_name, storage_bytes, storage_key


class Recorder(TorchDispatchMode):
    """The program of one forward of `model` on `device`, its instances `instance_modules`
    (the root first): entered around the forward, it appends to program_ops."""

    def __init__(self, model, instance_modules, device, target=None):
        super().__init__()
        self.device = device
        self.target = target        # target.Target: the device the program is recorded for
        self.host_keys = set()      # storages that are host memory on the target (philox)
        self.meta = device == "meta"
        self.fallback_ops = set()
        self.program_ops = []       # the forward program, gather/end_forward/run/checkpoint_*
        self.tensors = {}           # storage key -> program tensor id
        self.keep = []              # every tensor seen: storage keys stay unique while recording
        self.producer = {}          # storage key -> index in program_ops of the run that made it
        self.param_instance = {}    # storage key of a parameter -> instance index
        self.module_stack = []
        self.calls = []             # every module call but the root's: the program's `modules`
        self.open_calls = []        # the calls whose forward is running (None: not recorded)
        self.pending = []           # (op index, output tensors) awaiting their grad_fn
        self.node_run = {}          # autograd node -> op index
        self.next_id = 0
        self.regions = []           # (checkpoint_begin index, function, args, kwargs)
        self.replaying = False      # the forward runs again (lifetimes.py): record nothing
        # Inside a checkpoint region with a selective-checkpointing context_fn: asked of every
        # op the region dispatches (checkpoint.py, SacPolicy), whether its policy saves it.
        self.sac_policy = None
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
        # (name, numel, size in dim 0) per instance
        self.instance_params = [[] for _ in instance_modules]
        self.param_name = {}        # storage key of a parameter -> its name
        for f, name, p in owned_params(model, instance_modules):
            self.instance_params[f].append((name, p.numel(), p.shape[0] if p.dim() else 1))
            self.param_instance[storage_key(p)] = f
            self.param_name[storage_key(p)] = name
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
            self.settle()
            self.program_ops.append({"op": "gather", "instance": self.instance_names[f]})
        return hook

    def _end_hook(self, f):
        def hook(module, inputs, output):
            if self.replaying:
                return
            self.settle()
            self.program_ops.append({"op": "end_forward", "instance": self.instance_names[f]})
        return hook

    def _enter(self, name):
        def hook(module, inputs):
            self.module_stack.append(name)
            call = None
            if not self.replaying and name != "root":
                call = {"name": name, "class": type(module).__name__,
                        "ops": [len(self.program_ops), None]}
                self.calls.append(call)
            self.open_calls.append(call)
        return hook

    def _leave(self):
        def hook(module, inputs, output):
            self.module_stack.pop()
            call = self.open_calls.pop()
            if call is not None:
                # The ops the module's forward ran, without its own FSDP instance's gather and
                # end_forward (their hooks run before this call's begins and before it ends):
                # --checkpoint puts a region there, inside FSDP's hooks, as
                # apply_activation_checkpointing under FSDP does.
                end = len(self.program_ops)
                last = self.program_ops[end - 1] if end > call["ops"][0] else {}
                if last.get("op") == "end_forward" and last.get("instance") == call["name"]:
                    end -= 1
                call["ops"][1] = end
        return hook

    def where(self):
        """The module whose forward is running: its name, "root" outside every module."""
        return self.module_stack[-1] if self.module_stack else "root"

    def where_class(self):
        """The class of the module whose forward is running (the model's outside every
        module); None while the forward runs again (nothing is recorded then)."""
        return None if self.replaying else type(self.modules[self.where()]).__name__

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
        try:
            return self.new_tensor(t, name)
        except DTypeError as e:
            raise UsageError(f"{e}: the model's input {name} (shape {list(t.shape)})")

    def id_of(self, t):
        """The program tensor `t` is: itself, else the newest one of its storage."""
        tid = self.ids.get(t._cdata)
        return tid if tid is not None else self.latest.get(storage_key(t))

    # every ATen op
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.settle()
        if self.meta:
            try:
                out = func(*args, **kwargs)
            except (NotImplementedError, RuntimeError) as e:
                if "meta" not in str(e).lower():
                    raise
                self.fallback_ops.add(str(func.overloadpacket.__name__))
                out = meta_fallback(func, args, kwargs)
        else:
            out = func(*args, **kwargs)
        in_tensors = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        out_tensors = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
        if self.target is not None:
            host = self.target.host_outputs(func, out_tensors)
            self.host_keys.update(storage_key(o) for o in host)
            out_tensors = [o for o in out_tensors if all(o is not h for h in host)]
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
        for k, o in enumerate(out_tensors):
            try:
                self.add_output(o, inputs, outputs)
            except DTypeError as e:
                raise UsageError(f"{e}: output {k} of aten.{func.overloadpacket.__name__} "
                                 f"(shape {list(o.shape)}), {self.where_text()}")
        op_name = func.overloadpacket.__name__ if self.target is None else \
            self.target.op_name(func)
        saved = self.sac_policy is not None and not self.replaying and \
            self.sac_policy.saves(func, op_name, args, kwargs)
        if outputs:
            new_outputs = [o for o, e in outputs if "alias" not in e]
            out_ids = {e["id"] for _, e in outputs}
            run = {"op": "run", "name": f"{self.where()}:{op_name}",
                   "flops": op_flops(func, args, new_outputs) if new_outputs or
                   func._schema.is_mutable else 0.0,
                   "uses": uses,
                   "inputs": [input_ref(tid, grad_kind(op_name, a, out_tensors[0]))
                              for tid, a in inputs if tid not in out_ids],
                   "outputs": [e for _, e in outputs], "saves": []}
            if saved:
                run["policy"] = "save"
            if self.target is not None and not self.replaying:
                self.target.fix_attention_run(func, run, out_tensors)
                self.target.fix_embedding_run(func, args, run)
            index = len(self.program_ops)
            self.program_ops.append(run)
            for o, e in outputs:
                if "alias" not in e:
                    self.producer[storage_key(o)] = index
            self.pending.append((index, [o for o, _ in outputs]))
        return out

    def add_output(self, o, inputs, outputs):
        """Appends op output `o` to `outputs` as (tensor, entry): a new tensor, or an alias of
        the input (else the newest tensor) whose storage it shares; nothing for a parameter's
        or a buffer's storage, or an empty tensor."""
        if o.layout != torch.strided:
            return
        key = storage_key(o)
        if key in self.param_instance or key in self.buffers:
            return  # a view of a parameter (weight.t()), a buffer updated in place
        if key in self.tensors:  # a view or an in-place result: same storage
            same = [i for i, a in inputs if storage_key(a) == key]
            outputs.append((o, self.new_tensor(o, alias=same[0] if same
                                               else self.latest[key])))
        elif storage_bytes(o) > 0:  # an empty tensor holds no memory
            outputs.append((o, self.new_tensor(o)))

    def where_text(self):
        """Where the forward is, for an error: "in module 'NAME' (CLASS)", or outside them."""
        name = self.where()
        if name == "root" and not self.module_stack:
            return "outside every module"
        return f"in module '{name}' ({type(self.modules[name]).__name__})"

    def settle(self):
        """Reads the autograd node of the previous ops' outputs: autograd sets grad_fn when the
        op returns through it, so it is known once the next op starts."""
        for index, outs in self.pending:
            for o in outs:
                node = o.grad_fn
                if node is not None and node not in self.node_run:
                    self.node_run[node] = index
        self.pending = []

    def set_requires_grad(self):
        """Marks each run's outputs requires_grad as the real tensors say (known once autograd
        has run): a floating-point output that any of its tensors made require grad."""
        id_req = {}
        for t in self.keep:
            tid = self.ids.get(t._cdata)
            if tid is not None:
                id_req[tid] = id_req.get(tid, False) or t.requires_grad
        for op in self.program_ops:
            if op["op"] == "run":
                for e in op["outputs"]:
                    e["requires_grad"] = bool(id_req.get(e["id"], False)) and \
                        e["dtype"] in GRAD_DTYPES
