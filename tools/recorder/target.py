"""The device a program is recorded for (--target, --gpu, --sdpa-backend, --sdpa-priority).

A recording on `meta` or on the CPU predicts a CUDA run by default, so every op whose CUDA
kernel saves or allocates otherwise than the recording device's is recorded as CUDA's does
(../shared/reference/cuda_from_cpu.md, "Consequences for a simulator"):

  scaled_dot_product_attention  torch 2.6's CUDA dispatcher (select_sdp_backend in
        aten/src/ATen/native/transformers/cuda/sdp_utils.cpp) walks its priority order (2.6:
        flash, efficient, math, cudnn; later torch on sm90/sm100 with cuDNN > 9.15: cudnn first)
        and takes the first backend whose constraints the inputs meet. On meta the math path
        runs instead (no fused kernel has a Meta dispatch: fp32 copies of q, k, v and the fp32
        B x H x S x S probabilities saved, 33x flash's bytes at S = 8192), on the CPU its own
        flash kernel; so the call is routed to the chosen CUDA op, whose meta kernel
        (torch/_meta_registrations.py) gives CUDA's outputs and autograd CUDA's saved set. On
        the CPU, which has no CUDA kernel, the CPU flash kernel stands in (its saved set is
        CUDA flash's: q, k, v, out, an fp32 [B, H, S] logsumexp; cuda_from_cpu.md 2.2) and the
        run is written as the CUDA op, with efficient's lse padded to 32 and cuDNN's two device
        philox tensors added. The philox seed and offset of flash and efficient are CPU
        tensors on CUDA: no device memory. Flash's backward temporaries (2.6 flash_api.cpp
        mha_bwd: softmax_d fp32 [B, H, round128(S)], dq_accum fp32 [B, round128(S), H,
        round32(D)]) are the run's `workspace`.
  embedding (backward)  CUDA's embedding_dense_backward for more than 3072 indices
        (cuda/EmbeddingBackwardKernel.cu) sorts the indices and sums into an fp32
        [numel/10 + min(numel, V), D] buffer (grad_weight_per_segment): the run's `workspace`.
        The CPU's adds in place.

`--target cpu` records what a CPU run does: on meta, attention is routed to the CPU flash kernel
where torch's CPU dispatcher (sdp_utils_cpp.cpp select_sdp_backend_cpp: flash, then math) would
take it, so a meta recording predicts a CPU run (and FSDPMemTracker on fake CPU tensors) too.

What is not modelled is said, per op, on stderr and in the program's `target.unmodelled`: the
backward temporaries of efficient and cuDNN attention, SDPA with enable_gqa, autocast's CUDA op
lists on a CPU recording (the CPU's are used), cuBLAS's workspace (a device overhead, not a
tensor)."""

import math
import sys

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from .errors import UsageError

# Compute capabilities by name, and the GPUs users name them by.
GPUS = {"sm70": (7, 0), "sm75": (7, 5), "sm80": (8, 0), "sm86": (8, 6), "sm89": (8, 9),
        "sm90": (9, 0), "sm100": (10, 0)}
GPU_ALIASES = {"v100": "sm70", "t4": "sm75", "a100": "sm80", "a10": "sm86", "l40s": "sm89",
               "h100": "sm90", "h200": "sm90", "b200": "sm100"}
BACKENDS = ("auto", "flash", "efficient", "math", "cudnn")
PRIORITIES = {"torch2.6": ("flash", "efficient", "math", "cudnn"),
              "cudnn-first": ("cudnn", "flash", "efficient", "math")}

# The op each backend runs, as the CUDA run's autograd and a SAC policy see it.
CUDA_OPS = {"flash": "_scaled_dot_product_flash_attention",
            "efficient": "_scaled_dot_product_efficient_attention",
            "cudnn": "_scaled_dot_product_cudnn_attention"}
CPU_FLASH = "_scaled_dot_product_flash_attention_for_cpu"


def round_up(n, m):
    return (n + m - 1) // m * m


class Target:
    """What the program is recorded for: `device` ("cuda" or "cpu"), the GPU's compute
    capability, the SDPA backend (auto: torch's choice) and priority order."""

    def __init__(self, device="cuda", gpu="sm90", sdpa_backend="auto", sdpa_priority="torch2.6"):
        self.device = device
        self.gpu = GPU_ALIASES.get(gpu, gpu)
        if self.gpu not in GPUS:
            names = ", ".join(list(GPUS) + list(GPU_ALIASES))
            raise UsageError(f"--gpu {gpu}: not a GPU this recorder knows (one of {names})")
        if sdpa_backend not in BACKENDS:
            raise UsageError(f"--sdpa-backend {sdpa_backend}: expected one of "
                             f"{', '.join(BACKENDS)}")
        if sdpa_priority not in PRIORITIES:
            raise UsageError(f"--sdpa-priority {sdpa_priority}: expected one of "
                             f"{', '.join(PRIORITIES)}")
        self.sm = GPUS[self.gpu]
        self.sdpa_backend = sdpa_backend
        self.sdpa_priority = sdpa_priority
        self.unmodelled = {}    # what -> why, said once
        self.upcasts = {}       # the class of the module that made them -> calls (OnTarget)

    def key(self, program):
        """The program's `target` key: the device, the GPU, how many of the program's runs
        are attention by each kernel, what is not modelled."""
        key = {"device": self.device}
        if self.device == "cuda":
            key["gpu"] = self.gpu
        kernels = {op: backend for backend, op in CUDA_OPS.items()}
        kernels[CPU_FLASH] = "cpu-flash"
        attention = {}
        for op in program["forward"]:
            backend = kernels.get(op.get("name", "").rsplit(":", 1)[-1])
            if op["op"] == "run" and backend:
                attention[backend] = attention.get(backend, 0) + 1
        if attention:
            key["attention"] = dict(sorted(attention.items()))
        if self.unmodelled:
            key["unmodelled"] = [f"{what}: {why}" for what, why in self.unmodelled.items()]
        if self.upcasts:
            key["fp32_upcasts"] = {"calls": sum(self.upcasts.values()),
                                   "modules": sorted(self.upcasts)}
        return key

    def note(self, what, why):
        """An op whose target behaviour is not modelled: said once on stderr, kept in the key."""
        if what not in self.unmodelled:
            self.unmodelled[what] = why
            print(f"record_program: warning: {what}: {why}", file=sys.stderr)

    # scaled_dot_product_attention
    def cuda_backend(self, q, k, v, mask, dropout_p, is_causal, enable_gqa):
        """The backend torch's CUDA dispatcher takes for these inputs on this GPU, and why each
        backend before it was passed over."""
        if self.sdpa_backend != "auto":
            return self.sdpa_backend, []
        passed = []
        for backend in PRIORITIES[self.sdpa_priority]:
            why = self.cuda_refuses(backend, q, k, v, mask, dropout_p, is_causal, enable_gqa)
            if why is None:
                return backend, passed
            passed.append(f"{backend}: {why}")
        return "math", passed

    def cuda_refuses(self, backend, q, k, v, mask, dropout_p, is_causal, enable_gqa):
        """Why `backend` cannot run these inputs (torch 2.6's can_use_*_attention), else None."""
        if backend == "math":
            return None
        major, minor = self.sm
        dtype, d = q.dtype, q.shape[-1]
        low = (torch.float16, torch.bfloat16) if major >= 8 else (torch.float16,)
        if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
            return "inputs are not 4-D"
        heads_differ = q.shape[1] != k.shape[1] or q.shape[1] != v.shape[1]
        if backend == "flash":
            if mask is not None:
                return "an attn_mask is given"
            if not (d == k.shape[-1] == v.shape[-1] and d <= 256):
                return "head dims differ or exceed 256"
            if not (8, 0) <= self.sm <= (9, 0):
                return f"{self.gpu} is outside [sm80, sm90]"
            if (8, 6) <= self.sm <= (8, 9) and d > 192 and q.requires_grad:
                return "training with head_dim > 192 on sm86-sm89"
            if is_causal and q.shape[-2] != k.shape[-2]:
                return "is_causal with seqlen_q != seqlen_k"
            if dtype not in low:
                return f"{dtype} is not fp16/bf16"
            if heads_differ and not enable_gqa:
                return "q, k and v have different numbers of heads"
            return None
        if backend == "efficient":
            if not (5, 0) <= self.sm <= (9, 0):
                return f"{self.gpu} is outside [sm50, sm90]"
            align = 8 if dtype in (torch.float16, torch.bfloat16) else 4
            if major < 8:
                align = 8 if dtype == torch.float16 else 1
            if d != k.shape[-1] or d % align or v.shape[-1] % align:
                return f"head dims differ or are not multiples of {align}"
            if heads_differ:
                return "q, k and v have different numbers of heads (no GQA in 2.6)"
            allowed = (torch.float16, torch.float32, torch.bfloat16) if major >= 8 else \
                (torch.float16, torch.float32)
            if dtype not in allowed:
                return f"{dtype} is not supported on {self.gpu}"
            return None
        # cudnn (later torch's can_use_cudnn_attention, the constraints that shapes decide)
        if not (8, 0) <= self.sm:
            return f"{self.gpu} is below sm80"
        if dtype not in low:
            return f"{dtype} is not fp16/bf16"
        if d > 128 or v.shape[-1] > 128 or d % 8 or v.shape[-1] % 8:
            return "head dims over 128 or not multiples of 8"
        if k.shape[-2] == 1:
            return "key sequence length 1"
        if dropout_p * 16 != math.floor(dropout_p * 16):
            return "dropout not a multiple of 1/16"
        return None

    def cpu_takes_flash(self, q, k, v, dropout_p, enable_gqa):
        """torch 2.6's CPU dispatcher (use_flash_attention_cpp): no dropout, 4-D dense, no GQA,
        equal head dims, last-dim stride 1, a floating dtype."""
        return (dropout_p == 0.0 and q.dim() == k.dim() == v.dim() == 4
                and q.shape[1] == k.shape[1] == v.shape[1]
                and q.shape[-1] == k.shape[-1] == v.shape[-1]
                and all(t.stride(-1) == 1 for t in (q, k, v))
                and q.dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16))

    def attention_call(self, args, kwargs):
        """F.scaled_dot_product_attention(*args, **kwargs) as the target runs it."""
        names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale",
                 "enable_gqa")
        given = dict(zip(names, args), **kwargs)
        q, k, v = given["query"], given["key"], given["value"]
        mask = given.get("attn_mask")
        dropout_p = float(given.get("dropout_p", 0.0))
        is_causal = bool(given.get("is_causal", False))
        scale = given.get("scale")
        enable_gqa = bool(given.get("enable_gqa", False))
        meta = q.device.type == "meta"
        if self.device == "cpu":
            if meta and self.cpu_takes_flash(q, k, v, dropout_p, enable_gqa):
                return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
                    q, k, v, 0.0, is_causal, attn_mask=mask, scale=scale)[0]
            return None  # the CPU's own dispatch
        if enable_gqa and q.shape[1] != k.shape[1]:
            self.note("scaled_dot_product_attention(enable_gqa=True)",
                      "recorded as the recording device runs it; CUDA's GQA kernels are not "
                      "modelled (expand k and v in the model, as repeat_kv does)")
            return None
        backend, _ = self.cuda_backend(q, k, v, mask, dropout_p, is_causal, enable_gqa)
        if backend == "math":
            return torch.ops.aten._scaled_dot_product_attention_math(
                q, k, v, mask, dropout_p, is_causal, scale=scale)[0]
        if backend == "efficient" and mask is not None:
            mask = self.attention_bias(mask, q)
        self.in_flight = (backend, is_causal)
        try:
            if not meta:  # no CUDA kernel here: the CPU's flash saves what CUDA's does
                return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
                    q, k, v, 0.0, is_causal, attn_mask=mask, scale=scale)[0]
            if backend == "efficient":
                return torch.ops.aten._scaled_dot_product_efficient_attention(
                    q, k, v, mask, True, dropout_p, is_causal, scale=scale)[0]
            # flash; cudnn too: its meta kernel lays the output out [B, H, S, D] where the
            # CUDA kernel matches q's layout (cudnn/MHA.cpp alloc_with_matching_layout), as
            # flash's meta kernel does, and the saved sets are the same but for the philox
            # tensors (fixed in the run below).
            return torch.ops.aten._scaled_dot_product_flash_attention(
                q, k, v, dropout_p, is_causal, False, scale=scale)[0]
        finally:
            self.in_flight = None

    @staticmethod
    def attention_bias(mask, q):
        """The mask as CUDA's efficient kernel takes it: a bool mask becomes an additive one in
        q's dtype (convert_boolean_attn_mask), its last dimension padded to 16 and sliced back
        (preprocess_mask / pad_bias<16>, attention.cu)."""
        if mask.dtype == torch.bool:
            mask = torch.zeros(mask.shape, dtype=q.dtype, device=mask.device).masked_fill(
                mask.logical_not(), float("-inf"))
        last = mask.shape[-1]
        if last % 16:
            mask = F.pad(mask, (0, round_up(last, 16) - last))[..., :last]
        return mask

    in_flight = None

    def routed(self, func):
        """Whether `func` is the fused attention op of a call routed for a CUDA target."""
        return (self.in_flight is not None and self.device == "cuda"
                and func.overloadpacket.__name__ in (CPU_FLASH, *CUDA_OPS.values()))

    def op_name(self, func):
        """The op's name in the program: the CUDA op's for a call routed for a CUDA target."""
        return CUDA_OPS[self.in_flight[0]] if self.routed(func) else func.overloadpacket.__name__

    def host_outputs(self, func, out):
        """The outputs of a fused attention call routed for a CUDA target that are no device
        memory there: flash's and efficient's philox seed and offset, 0-d int64 CPU tensors
        (flash_api.cpp, attention.cu), meta tensors in a meta call. cuDNN's are on the device."""
        if not self.routed(func):
            return []
        if func.overloadpacket.__name__ == CPU_FLASH or self.in_flight[0] == "cudnn":
            return []
        return [o for o in out if isinstance(o, torch.Tensor) and o.dtype == torch.int64
                and o.dim() == 0]

    def fix_attention_run(self, func, run, out):
        """The run of a fused attention call routed for a CUDA target: its name the CUDA op's,
        the lse as the CUDA kernel sizes it, cuDNN's device philox tensors where the CPU's
        kernel stood in, its FLOPs, flash's backward temporaries."""
        if not self.routed(func):
            return
        backend, is_causal = self.in_flight
        op = func.overloadpacket.__name__
        output, lse = out[0], out[1]
        b, h, s, d = output.shape
        if op == CPU_FLASH and backend == "efficient":
            padded = round_up(s, 32)
            for e in run["outputs"]:
                if e.get("shape") == list(lse.shape) and e["dtype"] == "fp32":
                    e["bytes"] = b * h * padded * 4
                    e["shape"] = [b, h, padded]
        if op == CPU_FLASH and backend == "cudnn":
            run["saves"].extend({"bytes": 8, "dtype": "int64", "shape": [], "name": n}
                                for n in ("philox_seed", "philox_offset"))
        # Two matmuls of S x S x D per head; a causal kernel skips the masked half.
        run["flops"] = 4.0 * b * h * s * s * d * (0.5 if is_causal else 1.0)
        if backend == "flash":
            s128 = round_up(s, 128)
            run["workspace"] = [
                {"bytes": b * h * s128 * 4, "dtype": "fp32", "shape": [b, h, s128],
                 "name": "softmax_d"},
                {"bytes": b * s128 * h * round_up(d, 32) * 4, "dtype": "fp32",
                 "shape": [b, s128, h, round_up(d, 32)], "name": "dq_accum"}]
        else:
            self.note(f"{CUDA_OPS[backend]} (backward)",
                      "its backward's temporaries beyond dq, dk, dv are not modelled")

    def fix_embedding_run(self, func, args, run):
        """CUDA's embedding backward for more than 3072 indices: its fp32 per-segment buffer
        (EmbeddingBackwardKernel.cu, grad_weight_per_segment) as the run's workspace."""
        if self.device != "cuda" or func.overloadpacket.__name__ != "embedding":
            return
        weight, indices = args[0], args[1]
        numel = indices.numel()
        if numel <= 3072:
            return
        rows = numel // 10 + min(numel, weight.shape[0])
        run.setdefault("workspace", []).append(
            {"bytes": rows * weight.shape[1] * 4, "dtype": "fp32",
             "shape": [rows, weight.shape[1]], "name": "grad_weight_per_segment"})


SDPA = getattr(F, "scaled_dot_product_attention", None)  # torch 2.0 on


# The model's own casts to fp32: Tensor.float(), .to(torch.float32) (.to(x, torch.float32),
# .to(dtype=...)), .type(torch.float32); type_as's dtype is another tensor's, not the model's
# choice of fp32, so it is not one.
CASTS = {torch.Tensor.float, torch.Tensor.to, torch.Tensor.type}
RECORDER_DIR = __file__.rsplit("/", 1)[0]


def _cast_dtype(func, args, kwargs):
    """The dtype an explicit cast asks for, or None."""
    if func is torch.Tensor.float:
        return torch.float32
    for value in list(args[1:]) + list(kwargs.values()):
        if isinstance(value, torch.dtype):
            return value
    return None


class OnTarget(TorchFunctionMode):
    """Routes F.scaled_dot_product_attention to the target's kernel while the recording runs,
    and counts the model's own casts to fp32 of tensors already fp32 (`upcasts`): no-ops in
    an fp32 recording, which no op shows, but a copy in a bf16 run, after which the model
    computes in fp32 (RMSNorm's x.float(), a loss's logits.float()). `where()` names the
    module class running (the Recorder's; None: do not count, the forward runs again)."""

    def __init__(self, target, where=None):
        super().__init__()
        self.target = target
        self.where = where

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is SDPA and SDPA is not None:
            out = self.target.attention_call(args, kwargs)
            if out is not None:
                return out
        out = func(*args, **kwargs)
        if func in CASTS and out is args[0] and isinstance(out, torch.Tensor) and \
                out.dtype == torch.float32 and _cast_dtype(func, args, kwargs) == torch.float32 \
                and not sys._getframe(1).f_code.co_filename.startswith(RECORDER_DIR):
            where = self.where() if self.where else "root"
            if where is not None:
                self.target.upcasts[where] = self.target.upcasts.get(where, 0) + 1
        return out
