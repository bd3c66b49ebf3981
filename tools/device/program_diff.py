#!/usr/bin/env python3
"""Two model programs (tools/record_program.py) compared event for event: what a recording made
on one device predicts of another, e.g. a Llama recorded on `meta` for an H100 (`--target cuda
--gpu sm90`) against the same model recorded on the H100 itself (`--device cuda`).

    python3 tools/device/program_diff.py ON-META.json ON-CUDA.json [--limit 20] [--json OUT]

Compared: the forward's ops in order (kind, name, inputs, each output's bytes, dtype and alias,
saves, workspaces, releases) and the program's inputs, instances and modules; tensor ids are
each program's own, so they are compared by the order they first appear in. Not compared: the
description, the measured block (the recording device's own figures) and the target block (the
first says where it was recorded). Prints a summary line, then the first --limit differences,
each with its op index and name; exits 0 when the programs are equal, 1 when they differ, 2 on
bad input.
"""

import argparse
import json
import sys

IGNORED = {"description", "measured", "target"}


class Ids:
    """Each program's tensor ids renamed by first appearance, so two recordings compare."""

    def __init__(self):
        self.names = {}

    def __call__(self, tensor_id):
        return self.names.setdefault(tensor_id, f"#{len(self.names)}")


def ref(ids, item):
    """An input/save entry: a tensor id, or {"tensor": id, ...}."""
    if isinstance(item, str):
        return ids(item)
    if isinstance(item, dict) and "tensor" in item:
        return {**item, "tensor": ids(item["tensor"])}
    return item


def canonical_op(ids, op):
    out = {"op": op.get("op"), "name": op.get("name"), "instance": op.get("instance")}
    out["inputs"] = [ref(ids, i) for i in op.get("inputs", [])]
    out["outputs"] = [(ids(e["id"]), e.get("bytes"), e.get("dtype"),
                       ref(ids, e["alias"]) if "alias" in e else None)
                      for e in op.get("outputs", [])]
    out["saves"] = [ref(ids, s) for s in op.get("saves", [])]
    out["workspace"] = [(w.get("bytes"), w.get("dtype")) for w in op.get("workspace", [])]
    out["releases"] = [ref(ids, r) for r in op.get("releases", [])]
    return out


def renamed(ids, value):
    """`value` with every string that is a tensor id seen so far renamed (the loss names one)."""
    if isinstance(value, str):
        return ids.names.get(value, value)
    if isinstance(value, list):
        return [renamed(ids, v) for v in value]
    if isinstance(value, dict):
        return {k: renamed(ids, v) for k, v in value.items()}
    return value


def canonical_inputs(ids, inputs):
    return [(ids(t["id"]), t.get("bytes"), t.get("dtype"), t.get("name")) for t in inputs]


def differences(a, b, limit):
    """[(where, what)] of the first `limit` differences, and their total count."""
    found = []
    total = 0

    def note(where, what):
        nonlocal total
        total += 1
        if len(found) < limit:
            found.append((where, what))

    ids_a, ids_b = Ids(), Ids()
    ins_a = canonical_inputs(ids_a, a.get("inputs", []))
    ins_b = canonical_inputs(ids_b, b.get("inputs", []))
    if ins_a != ins_b:
        note("inputs", f"{ins_a} != {ins_b}")
    fa, fb = a.get("forward", []), b.get("forward", [])
    if len(fa) != len(fb):
        note("forward", f"{len(fa)} ops != {len(fb)} ops")
    for index, (x, y) in enumerate(zip(fa, fb)):
        cx, cy = canonical_op(ids_a, x), canonical_op(ids_b, y)
        if cx == cy:
            continue
        fields = [k for k in cx if cx[k] != cy[k]]
        note(f"forward[{index}] {x.get('name') or x.get('op')}",
             "; ".join(f"{k}: {cx[k]} != {cy[k]}" for k in fields))
    for key in sorted((set(a) | set(b)) - IGNORED - {"inputs", "forward"}):
        if renamed(ids_a, a.get(key)) != renamed(ids_b, b.get(key)):
            note(key, "differs" if key in a and key in b else
                 f"only in {'the first' if key in a else 'the second'}")
    return found, total


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("first")
    p.add_argument("second")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--json", help="write {equal, differences, shown: [[where, what]]} here")
    args = p.parse_args(argv)
    programs = []
    for path in (args.first, args.second):
        try:
            with open(path) as f:
                programs.append(json.load(f))
        except (OSError, ValueError) as error:
            print(f"program_diff: {path}: {error}", file=sys.stderr)
            return 2
    shown, total = differences(*programs, args.limit)
    ops = len(programs[0].get("forward", []))
    print(f"program_diff: {args.first} and {args.second}: {ops} forward ops, "
          f"{total} difference(s)")
    for where, what in shown:
        print(f"  {where}: {what}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"equal": total == 0, "differences": total, "shown": shown}, f, indent=1)
    return 0 if total == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
