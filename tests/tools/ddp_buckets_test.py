"""The ddp policy against PyTorch's own DistributedDataParallel (Debian's python3-torch, CPU).

Two processes train a three-layer MLP under DDP with gloo for three iterations, under
torch.profiler(profile_memory=True) and with a communication hook that sees every bucket. The
same model's gradients, in the order autograd produced them, are written as a bucketsim trace
and replayed with `compare --policy ddp,...`. What DDP did must be what the policy models:

  - iteration 1: one bucket over the whole model (DDP's [sys.maxsize] limit);
  - from iteration 2: the buckets _rebuild_buckets makes in gradient-ready order with the
    limits [first bucket bytes, bucket_cap_mb], same sizes, same order, same parameters;
  - lifetimes: the rebuilt buckets are allocated during iteration 2's forward, at the sizes the
    profiler records, and live on (the same storage in iteration 3); the first bucket is freed
    there, before the new ones without gradient_as_bucket_view, after them with it (so the
    largest bucket memory alive is one model's gradients, or two).

Usage: /usr/bin/python3 ddp_buckets_test.py BUCKETSIM (ctest: Tools.DdpAgainstTorch; the tests
are skipped where torch is not installed: tools/setup.sh installs python3-torch).
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import unittest

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError:  # pragma: no cover
    torch = None

BUCKETSIM = None
LAYERS = [(64, 512), (512, 256), (256, 128)]  # Linear(in, out): weight (out, in), bias (out,)
CAP_MB = 0.5
FIRST_BUCKET_BYTES = 200_000  # dist._DEFAULT_FIRST_BUCKET_BYTES for the run; 3125/2^14 MiB
ITERATIONS = 3


def param_shapes():
    """Model order, as module.parameters() lists them."""
    shapes = []
    for fan_in, fan_out in LAYERS:
        shapes += [(fan_out, fan_in), (fan_out,)]
    return shapes


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train(rank, view, port, out_path):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(i, o) for i, o in LAYERS])
    dist._DEFAULT_FIRST_BUCKET_BYTES = FIRST_BUCKET_BYTES
    from torch.profiler import ProfilerActivity, profile, record_function

    seen = []
    iteration = [0]

    def hook(_, bucket):
        buffer = bucket.buffer()
        seen.append({"iteration": iteration[0], "index": bucket.index(), "numel": buffer.numel(),
                     "storage": buffer.data_ptr(),
                     "params": [list(p.shape) for p in bucket.parameters()]})
        # Not reduced: what DDP allocates and frees, and when, does not depend on what the hook
        # does with the bucket, and a collective would share its storage with another thread.
        # Gloo runs a collective on a worker thread, which drops its reference to the tensor
        # only after the caller's wait() has returned. Once in CI (stop 23, a loaded machine)
        # iteration 0's bucket was missing from the profile's frees: most likely that thread
        # held it past iteration 1's rebuild and freed it itself, where the profiler (which
        # records per thread) does not look. An async all_reduce had the same race, wider.
        done = torch.futures.Future()
        done.set_result(buffer)
        return done

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=CAP_MB,
                                                        gradient_as_bucket_view=bool(view))
        ddp.register_comm_hook(None, hook)
        for it in range(ITERATIONS):
            iteration[0] = it
            with record_function(f"iteration {it}"):
                ddp(torch.randn(8, LAYERS[0][0])).sum().backward()
    if rank == 0:
        ranges = {e.name: (e.time_range.start, e.time_range.end) for e in prof.events()
                  if e.name.startswith("iteration ")}
        memory = [(e.start_us(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                  if e.name() == "[memory]"]
        # Profiler clocks: the kineto events are absolute, the ranges relative to the start.
        with open(out_path, "w") as f:
            json.dump({"buckets": seen, "ranges": ranges, "memory": memory,
                       "profile_start_us": prof.profiler.kineto_results.trace_start_us()}, f)
    dist.destroy_process_group()


def ddp_run(view):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "ddp.json")
        mp.spawn(train, args=(view, free_port(), out), nprocs=2)
        with open(out) as f:
            return json.load(f)


def trace_for(ready_order):
    """A bucketsim trace of the same model: one FSDP instance holding the six parameters in
    model order, and per iteration one rs request per gradient in `ready_order` (indices into
    model order) on the group of both ranks."""
    shapes = param_shapes()
    header = {"schema_version": 3, "world_size": 2, "rank": 0, "bucket_cap_mb": CAP_MB,
              "streams": ["default", "post_backward"],
              "groups": [{"id": 1, "ranks": [0, 1], "name": "ddp"}],
              "fsdp": [{"name": "mlp", "params": [
                  {"name": f"p{i}", "numel": numel(s), "dtype": "fp32"}
                  for i, s in enumerate(shapes)]}]}
    events = []
    for it in range(ITERATIONS):
        events += [{"ev": "iteration", "index": it}, {"ev": "phase", "phase": "forward"},
                   {"ev": "phase", "phase": "backward"}]
        for p in ready_order:
            events.append({"ev": "rs", "fsdp": 0, "param": p, "group": 1, "dtype": "fp32",
                           "numel": (numel(shapes[p]) + 1) // 2, "shard": "view"})
        events += [{"ev": "flush"}, {"ev": "phase", "phase": "step"},
                   {"ev": "phase", "phase": "zero_grad"}, {"ev": "zero_grad", "set_to_none": True}]
    header["events"] = events
    return header


def replay(trace, view):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ddp-trace.json")
        with open(path, "w") as f:
            json.dump(trace, f)
        policy = (f"ddp,cap={CAP_MB},first_cap={FIRST_BUCKET_BYTES / 2**20!r},"
                  f"grad_as_view={view}")
        result = subprocess.run([BUCKETSIM, "compare", path, "--policy", policy, "--format",
                                 "json", "--allocator", "exact", "--full-log"],
                                capture_output=True, text=True, check=True)
        return json.loads(result.stdout)["policies"][0]


@unittest.skipIf(torch is None, "python3-torch is not installed")
class DdpAgainstTorch(unittest.TestCase):
    def check(self, view):
        real = ddp_run(view)
        shapes = param_shapes()
        by_iteration = {}
        for b in real["buckets"]:
            by_iteration.setdefault(b["iteration"], []).append(b)
        # The gradient-ready order autograd produced, as DDP's rebuilt buckets list it.
        ready = [list(s) for b in by_iteration[1] for s in b["params"]]
        order = []
        for shape in ready:
            candidates = [i for i, s in enumerate(shapes) if list(s) == shape and i not in order]
            self.assertTrue(candidates, shape)
            order.append(candidates[0])
        model = replay(trace_for(order), view)

        # Sizes and order: the all-reduces of each iteration, bucket by bucket.
        collectives = [c["input_numel"] for c in model["collectives"]]
        real_sizes = [b["numel"] for it in range(ITERATIONS) for b in by_iteration[it]]
        self.assertEqual(collectives, real_sizes)
        self.assertTrue(all(c["kind"] == "all_reduce" for c in model["collectives"]))
        self.assertEqual(len(by_iteration[0]), 1)  # one bucket over the whole model
        self.assertEqual(by_iteration[0][0]["numel"], sum(numel(s) for s in shapes))
        self.assertGreater(len(by_iteration[1]), 1, "the rebuilt buckets should be several")

        # Lifetimes: the rebuilt buckets keep their storage; the first one is gone.
        self.assertEqual([b["storage"] for b in by_iteration[1]],
                         [b["storage"] for b in by_iteration[2]])
        lifetimes = model["bucket_lifetimes"]
        self.assertEqual([l["bytes"] for l in lifetimes],
                         [4 * b["numel"] for b in by_iteration[0] + by_iteration[1]])
        self.assertIsNotNone(lifetimes[0]["freed_event"])
        self.assertTrue(all(l["freed_event"] is None for l in lifetimes[1:]))
        rebuild_event = lifetimes[1]["allocated_event"]
        self.assertEqual(lifetimes[0]["freed_event"], rebuild_event)

        # The profiler: inside iteration 2, the bucket allocations and the old bucket's free, in
        # order (sizes no parameter gradient has; activations are far smaller).
        grad_sizes = {4 * numel(s) for s in shapes}
        start, end = real["ranges"]["iteration 1"]
        t0 = real["profile_start_us"]
        events = [n for t, n in sorted(real["memory"])
                  if start <= t - t0 <= end and abs(n) >= 65536 and abs(n) not in grad_sizes]
        new = [4 * b["numel"] for b in by_iteration[1]]
        old = 4 * by_iteration[0][0]["numel"]
        expected = new + [-old] if view else [-old] + new
        self.assertEqual(events, expected, [(t - t0, n) for t, n in sorted(real["memory"])
                                            if abs(n) >= 65536 and abs(n) not in grad_sizes])
        # What the policy says is the most bucket memory ever alive.
        self.assertEqual(model["peak_bucket_bytes"], old + sum(new) if view else old)

    def test_without_gradient_as_bucket_view(self):
        self.check(0)

    def test_with_gradient_as_bucket_view(self):
        self.check(1)


if __name__ == "__main__":
    BUCKETSIM = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
