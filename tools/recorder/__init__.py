"""The recorder: a real PyTorch model's program for bucketsim (traces/program-v1.schema.json).

    /usr/bin/python3 tools/record_program.py my_models.py:build_model \\
        --batch my_models.py:make_batch --wrap TransformerBlock [--wrap-policy FILE.py:FN] \\
        [--device cpu|cuda|meta] [--optimizer sgd|sgd-momentum|adam|adamw \\
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
             with grad enabled so that its saves (what the recompute keeps) are seen.
  releases   the forward and the loss run once more, under no_grad, with a weakref finalizer on
             every tensor they make: a tensor that dies after its last reader (a local variable
             of the model's forward, alive until it returns: nanoGPT's tok_emb, a logits whose
             shifted slice the loss reads) goes in the `releases` of the run after which it
             died (on every device, meta too). A checkpointed region's real forward runs under
             no_grad as this one does, so the one run covers its tensors too. Where the second
             run makes other ops than the recording, each region's fn runs again on its own
             instead and the rest is left as recorded, with a warning.
  measured   on cpu or cuda, a second, unhooked run of the whole step (forward, backward,
             optimizer step, zero_grad) measures the live bytes at every mark and each phase's
             peak (measure.py); bucketsim shows them beside its prediction.
  optimizer  with --optimizer: {"name": NAME, "impl": IMPL, "weight_decay": X}, the optimizer
             the model trains with, which `gen program` emits. IMPL and X only where given
             (--optimizer-impl, --weight-decay): absent, `gen program` takes torch's default
             where the trace is emitted for (foreach for FSDP1 and FSDP2 on CUDA), not the
             recording device's. The measured step runs with the given ones, else the
             recording device's defaults (the for-loop on cpu and meta, and on cuda under torch
             1.x; foreach on cuda under 2.x; weight decay 0.01 for adamw, else 0), which the
             measured note names. Without --optimizer there is no key, and the step is measured
             with plain SGD.

target     a recording on meta or cpu predicts a CUDA run by default (--target cuda, --gpu
             sm90): each op whose CUDA kernel saves or allocates otherwise is recorded as CUDA's
             (target.py): scaled_dot_product_attention as the fused kernel torch 2.6 selects on
             that GPU (--sdpa-backend, --sdpa-priority), with its saved set, its output laid out
             as the out-projection reads it, its backward temporaries; embedding's backward
             buffer. --target cpu records what a CPU run does (on meta too). The program's
             `target` key says which, how many runs are attention by each kernel, and what is
             not modelled (also warned on stderr). A recording on cuda is CUDA's own.
  dtypes     complex64/complex128 (complex32) tensors are recorded by element size, views
             (view_as_complex, view_as_real) as aliases; --dtype converts floating-point
             parameters and buffers only (a complex freqs_cis stays complex). An error names the
             tensor, the op and the module.

A model already wrapped: where build_model() returns a model wrapped with FSDP1
(FullyShardedDataParallel, device_id=torch.device("cpu") on CPU) or FSDP2 (fully_shard; torch
2.6's FSDPModule), its units are the instances (the root first, then every wrapped module in
named_modules() order, each owning the parameters no nested unit owns: FSDP1's flat parameter
with its views, FSDP2's parameters each its own), and --wrap, --wrap-policy (and --no-flatten
with FSDP1) are errors. The model is unwrapped (wrapped_fsdp.py) before anything runs
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

The modules, in the order a recording uses them:

  cli           the command line (tools/record_program.py, python3 -m recorder) and how it ends
  errors        UsageError, the error a recording stops with (exit status 2)
  load          FILE.py:FUNCTION specs loaded; the user's functions called and named in errors,
                with the line of their code that raised
  step          one training step: the batch as the forward's arguments, the loss from its
                output, run_step with bucketsim's marks
  optimizer     torch.optim by bucketsim's names; the program's `optimizer` key
  wrapped_fsdp  a model already wrapped with FSDP1 or fully_shard: its units, settings, unwrapping
  modules       the module tree as FSDP instances: --wrap, --wrap-policy, parameter owners, tied
                parameters
  record        the recording of one model, start to end
  target        the device the program is recorded for: CUDA's attention kernels and
                embedding backward on a meta or CPU recording
  meta          recording on the meta device (factories, ops without a meta kernel)
  dispatch      the Recorder: every ATen op of the forward a run, module hooks gather/end_forward
  tensors       tensors by storage, their bytes, dtypes by the program's names
  ops           one op's FLOPs and what its backward gives each input, from shapes
  checkpoint    torch.utils.checkpoint regions
  batch         --batch-sizes: the recordings at each size fitted into one program
  lifetimes     the forward's second run under no_grad: how long Python keeps each tensor
                (releases)
  graph         the autograd graph after the forward: saves, param_reads; gradient kinds
  program       the program document assembled, written, summed up
  measure       the measured step (the `measured` block; tools/torch_memory.py's command)
"""
