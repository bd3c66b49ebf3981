"""What a program says of one ATen op from its name and its tensors' shapes alone: its forward
FLOPs, and what its backward gives each input (`pass`: its output's gradient or a view of it,
no memory of its own; `none`; else a `new` tensor)."""

import torch


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


# Ops whose backward hands an input the gradient of their output itself or a view of it (no
# new memory; tools/autograd derivatives.yaml of torch 1.13): views, clone, and add/sub's `self`
# (add's `other` too with alpha 1) when no broadcasting shrinks it, sum (an expand of the
# output's gradient). A detached tensor gets none. All others: a new tensor (the default).
# view_as_complex and view_as_real are views of the same bytes; each one's backward is the
# other view of its output's gradient (ViewAsComplexBackward0, ViewAsRealBackward0).
PASS_OPS = {"view", "_unsafe_view", "_reshape_alias", "reshape", "t", "transpose", "permute",
            "unsqueeze", "squeeze", "alias", "clone", "contiguous", "add", "add_", "sum",
            "flatten", "view_as", "expand", "expand_as", "view_as_complex", "view_as_real"}
SAME_SHAPE_PASS_OPS = {"add", "add_", "expand", "expand_as"}  # else summed down: new
NO_GRAD_OPS = {"detach", "detach_"}


def grad_kind(op_name, a, out):
    """What the backward of `op_name` gives its input `a`, whose output is `out`."""
    if op_name in NO_GRAD_OPS:
        return "none"
    if op_name in SAME_SHAPE_PASS_OPS and tuple(a.shape) != tuple(out.shape):
        return "new"  # broadcast: autograd sums the gradient down to the input's shape
    return "pass" if op_name in PASS_OPS else "new"


def input_ref(tid, kind):
    """A run's input as the program writes it: the bare id where its gradient is new."""
    return tid if kind == "new" else {"tensor": tid, "grad": kind}
