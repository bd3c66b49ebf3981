#!/usr/bin/env python3
"""Converts a PyTorch memory snapshot into a bucketsim trace (format v3, traces/README.md).

    tools/snapshot_to_trace.py SNAPSHOT.pickle -o TRACE.json [--device N]

SNAPSHOT.pickle is what torch.cuda.memory._dump_snapshot() writes (a pickle of built-in types,
layout in shared reference caching_allocator.md §5). Python's standard library only: no torch.

What becomes what (one device's `device_traces[N]`, in order):
  alloc            -> alloc   (id = the block address, bytes = the requested size, its stream,
                               time_us; cat from a profiler snapshot's `category`, else other)
  free_requested   -> free    (allocated memory drops here, as torch.cuda.memory_allocated does)
  free_completed   -> nothing when it follows its free_requested at once (the usual case); when
                      it comes later (the block was used on other streams, tensor.record_stream),
                      the free is preceded by a record_stream of the block on a synthetic stream
                      "deferred_free N" and the free_completed becomes a sync of that stream:
                      the block becomes reusable exactly where PyTorch's free_completed says.
  segment_alloc, segment_free, segment_map, segment_unmap, oom, snapshot
                   -> observed events of the same name (ground truth, never replayed)
  a burst of segment_free/segment_unmap that no malloc caused (not followed by segment_alloc,
  segment_map, alloc or oom) -> those observed events, then an empty_cache event
  the dump's `segments` -> a final observed snapshot event: bytes = active bytes,
                      allocated_bytes and reserved_bytes as PyTorch sums them, requested_bytes
                      over the allocated (active_allocated) blocks only, which the trace's
                      allocations alive at the end must add up to

A ring buffer that wrapped dropped the start of the run. As pytorch.org/memory_viz does, a block
whose first kept event is a free, and a block allocated in the final `segments` that the kept
trace never mentions, was alive at the start: it is synthesized as an alloc at the start (in
address order; freed-before-the-start blocks still pending in a record_stream are freed there
too). The segments alive at the start are rebuilt by undoing the kept segment events from the
final `segments` (memory_viz's state history) and written first, as observed segment_alloc (or
segment_map for expandable segments). The description says how many were synthesized.

allocator_settings (PyTorch >= 2.3), when present, becomes the header's alloc_conf; its
max_split_size of -1 (int64_t(SIZE_MAX), every default snapshot) means no limit.

Keys this importer does not know, in allocator_settings, segments, blocks, frames, trace entries
or at the top level, are ignored (newer PyTorch adds compile_context, user_metadata,
external_annotations, ...): only the keys it reads are checked, and those strictly.

Exit status: 0 written; 2 bad usage or bad input (the message names the file, the entry and the
problem), in which case nothing is written (the output is written to a temporary file and renamed).
"""

import argparse
import io
import json
import os
import pickle
import sys
import tempfile

ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "oom", "snapshot")
PROFILER_CATEGORIES = {"parameter": "param", "activation": "activation", "gradient": "grad",
                       "optimizer_state": "optimizer_state"}
MIB = 1 << 20


class InputError(Exception):
    """Bad input: the message says where and what."""


class _BuiltinsOnly(pickle.Unpickler):
    """A snapshot holds only dict, list, tuple, str, int, float, bool and None."""

    def find_class(self, module, name):
        raise InputError(f"the pickle refers to {module}.{name}; a memory snapshot holds only "
                         "built-in types (dict, list, str, int, float, bool, None)")


def load_snapshot(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise InputError(f"cannot open '{path}': {e.strerror}") from None
    if not data:
        raise InputError("the file is empty")
    try:
        return _BuiltinsOnly(io.BytesIO(data)).load()
    except InputError:
        raise
    except EOFError:
        raise InputError("truncated: the pickle ends before its STOP opcode") from None
    except (pickle.UnpicklingError, ValueError, KeyError, IndexError, TypeError,
            AttributeError, UnicodeDecodeError, OverflowError) as e:
        raise InputError(f"not a readable pickle: {e}") from None


def type_name(v):
    return type(v).__name__


def need(mapping, key, kind, where):
    """mapping[key], checked to be of `kind` (int excludes bool)."""
    if key not in mapping:
        raise InputError(f"{where}: missing key '{key}'")
    v = mapping[key]
    ok = (isinstance(v, int) and not isinstance(v, bool)) if kind is int else isinstance(v, kind)
    if not ok:
        expected = {int: "an int", str: "a str", list: "a list", dict: "a dict",
                    bool: "a bool"}.get(kind, kind.__name__)
        raise InputError(f"{where}: '{key}' must be {expected}, got {type_name(v)}")
    if kind is int and v < 0:
        raise InputError(f"{where}: '{key}' must not be negative (got {v})")
    return v


def optional(mapping, key, kind, where):
    return need(mapping, key, kind, where) if key in mapping else None


def top_level(snapshot):
    if isinstance(snapshot, list):
        # torch.cuda.memory_snapshot(): the segments only, no trace (viz.py wraps it the same way).
        return snapshot, [], None
    if not isinstance(snapshot, dict):
        raise InputError(f"the snapshot must be a dict (or a list of segments), got "
                         f"{type_name(snapshot)}")
    segments = need(snapshot, "segments", list, "top level")
    traces = need(snapshot, "device_traces", list, "top level")
    settings = optional(snapshot, "allocator_settings", dict, "top level")
    for d, trace in enumerate(traces):
        if not isinstance(trace, list):
            raise InputError(f"device_traces[{d}] must be a list, got {type_name(trace)}")
    return segments, traces, settings


def choose_device(segments, traces, requested):
    with_events = [d for d, t in enumerate(traces) if t]
    if requested is not None:
        if requested < 0 or (requested >= len(traces) and
                             not any(s.get("device") == requested for s in segments
                                     if isinstance(s, dict))):
            raise InputError(f"--device {requested}: the snapshot has device_traces for "
                             f"{len(traces)} device(s) and no segment on device {requested}")
        return requested, None
    if with_events:
        note = None
        if len(with_events) > 1:
            note = (f"device_traces has events for devices {', '.join(map(str, with_events))}; "
                    f"importing device {with_events[0]} (choose another with --device N)")
        return with_events[0], note
    devices = sorted({s.get("device") for s in segments if isinstance(s, dict)} - {None})
    return (devices[0] if devices else 0), None


def check_segments(segments, device):
    out = []
    for i, seg in enumerate(segments):
        where = f"segments[{i}]"
        if not isinstance(seg, dict):
            raise InputError(f"{where} must be a dict, got {type_name(seg)}")
        if need(seg, "device", int, where) != device:
            continue
        need(seg, "address", int, where)
        need(seg, "total_size", int, where)
        need(seg, "stream", int, where)
        optional(seg, "is_expandable", bool, where)
        blocks = need(seg, "blocks", list, where)
        for j, b in enumerate(blocks):
            bwhere = f"{where}.blocks[{j}]"
            if not isinstance(b, dict):
                raise InputError(f"{bwhere} must be a dict, got {type_name(b)}")
            need(b, "address", int, bwhere)
            need(b, "size", int, bwhere)
            state = need(b, "state", str, bwhere)
            if state not in ("active_allocated", "active_pending_free", "inactive"):
                raise InputError(f"{bwhere}: unknown state '{state}' (expected active_allocated, "
                                 "active_pending_free or inactive)")
            optional(b, "requested_size", int, bwhere)
        out.append(seg)
    return out


def block_requested(b):
    if "requested_size" in b:
        return b["requested_size"]
    history = b.get("history")  # before PyTorch 2.1: [{addr, real_size, frames}]
    if isinstance(history, list) and history and isinstance(history[-1], dict):
        real = history[-1].get("real_size")
        if isinstance(real, int) and not isinstance(real, bool):
            return real
    return b["size"]


# The int fields each action must have (a fast check; the slow one says what is wrong).
_INT_FIELDS = {action: ("addr", "size", "stream") for action in ACTIONS}
_INT_FIELDS["oom"] = ("device_free", "size", "stream")
_INT_FIELDS["snapshot"] = ("size",)


def _entry_ok(e):
    if type(e) is not dict:
        return False
    fields = _INT_FIELDS.get(e.get("action"))
    if fields is None:
        return False
    for key in fields:
        v = e.get(key)
        if type(v) is not int or v < 0:
            return False
    if "time_us" in e:
        t = e["time_us"]
        return type(t) is int and t >= 0
    return True


def check_entries(trace, device):
    for i, e in enumerate(trace):
        if _entry_ok(e):
            continue
        where = f"device_traces[{device}][{i}]"
        if not isinstance(e, dict):
            raise InputError(f"{where} must be a dict, got {type_name(e)}")
        action = need(e, "action", str, where)
        if action not in ACTIONS:
            raise InputError(f"{where}: unknown action '{action}' (expected "
                             f"{', '.join(ACTIONS)})")
        where = f"{where} ({action})"
        need(e, "size", int, where)
        if action == "oom":
            need(e, "device_free", int, where)
        elif action != "snapshot":
            need(e, "addr", int, where)
        if action != "snapshot":
            need(e, "stream", int, where)
        optional(e, "time_us", int, where)


def max_split_size(settings, where):
    """The limit in bytes, or None for no limit. PyTorch writes int64_t(max_split_size), and the
    default limit SIZE_MAX casts to -1 (caching_allocator.md §5.2): -1 is "no limit", as is an
    unsigned SIZE_MAX from a writer that kept the type. Any other negative value is corrupt."""
    if "max_split_size" not in settings:
        return None
    v = settings["max_split_size"]
    if not isinstance(v, int) or isinstance(v, bool):
        raise InputError(f"{where}: 'max_split_size' must be an int, got {type_name(v)}")
    if v == -1 or v >= (1 << 63):
        return None
    if v < 0:
        raise InputError(f"{where}: 'max_split_size' must be a size in bytes or -1 (no limit), "
                         f"got {v}")
    return v


def alloc_conf_of(settings):
    """allocator_settings -> PYTORCH_CUDA_ALLOC_CONF text our parser reads ("" = defaults)."""
    if not settings:
        return ""
    where = "allocator_settings"
    parts = []
    split = max_split_size(settings, where)
    if split is not None:
        parts.append(f"max_split_size_mb:{split // MIB}")
    table = optional(settings, "roundup_power2_divisions", dict, where)
    if table:
        pairs = []
        for key in sorted(table, key=lambda k: int(k)):
            value = table[key]
            if not isinstance(value, int) or isinstance(value, bool):
                raise InputError(f"{where}: roundup_power2_divisions['{key}'] must be an int, "
                                 f"got {type_name(value)}")
            pairs.append(f"{int(key)}:{value}")
        if any(table[k] for k in table):
            parts.append(f"roundup_power2_divisions:[{','.join(pairs)}]")
    gc = settings.get("garbage_collection_threshold")
    if isinstance(gc, (int, float)) and not isinstance(gc, bool) and gc > 0:
        parts.append(f"garbage_collection_threshold:{gc}")
    expandable = optional(settings, "expandable_segments", bool, where)
    if expandable:
        parts.append("expandable_segments:True")
    text = settings.get("PYTORCH_CUDA_ALLOC_CONF")
    if isinstance(text, str):
        for item in text.split(","):
            if item.strip().startswith("max_non_split_rounding_mb:"):
                parts.append(item.strip())
    return ",".join(parts)


class Streams:
    """Raw cudaStream_t values -> trace stream ids, in order of first use."""

    def __init__(self):
        self.names = []
        self.ids = {}
        self.deferred_free = []  # ids of synthetic deferred-free streams not in use
        self.num_deferred = 0

    def id(self, raw):
        if raw not in self.ids:
            self.ids[raw] = len(self.names)
            self.names.append(f"cuda stream {raw:#x}")
        return self.ids[raw]

    def take_deferred(self):
        if self.deferred_free:
            return self.deferred_free.pop()
        self.num_deferred += 1
        self.names.append(f"deferred_free {self.num_deferred - 1}")
        return len(self.names) - 1

    def give_back(self, stream):
        self.deferred_free.append(stream)


def initial_segments(segments, trace):
    """Segments alive before the first kept event: the final ones with the kept segment events
    undone, last first. Returns [(address, size, raw_stream, expandable)] in address order."""
    ranges = [[s["address"], s["address"] + s["total_size"], s["stream"],
               bool(s.get("is_expandable", False))] for s in segments]

    def remove(lo, hi):
        kept = []
        for r in ranges:
            if r[1] <= lo or r[0] >= hi:
                kept.append(r)
                continue
            if r[0] < lo:
                kept.append([r[0], lo, r[2], r[3]])
            if r[1] > hi:
                kept.append([hi, r[1], r[2], r[3]])
        ranges[:] = kept

    for e in reversed(trace):
        action = e["action"]
        if action in ("segment_alloc", "segment_map"):
            remove(e["addr"], e["addr"] + e["size"])
        elif action in ("segment_free", "segment_unmap"):
            ranges.append([e["addr"], e["addr"] + e["size"], e["stream"],
                           action == "segment_unmap"])
    # Adjacent mapped ranges of one expandable segment are one range (as the snapshot lists them).
    ranges.sort()
    merged = []
    for r in ranges:
        if merged and r[3] and merged[-1][3] and merged[-1][1] == r[0] and merged[-1][2] == r[2]:
            merged[-1][1] = r[1]
        else:
            merged.append(r)
    return [(lo, hi - lo, stream, expandable) for lo, hi, stream, expandable in merged if hi > lo]


def initial_blocks(segments, trace):
    """Blocks alive at the start: {address: (requested, raw_stream, pending_at_start)}."""
    first = {}
    for e in trace:
        if e["action"] in ("alloc", "free_requested", "free_completed"):
            first.setdefault(e["addr"], e)
    alive = {}
    for addr, e in first.items():
        if e["action"] == "free_requested":
            alive[addr] = (e["size"], e["stream"], False)
        elif e["action"] == "free_completed":
            alive[addr] = (e["size"], e["stream"], True)
    for seg in segments:
        for b in seg["blocks"]:
            if b["state"] == "inactive" or b["address"] in first:
                continue
            alive[b["address"]] = (block_requested(b), seg["stream"],
                                   b["state"] == "active_pending_free")
    return alive


def category_of(e):
    c = e.get("category")
    if isinstance(c, str):
        return PROFILER_CATEGORIES.get(c.lower(), "other")
    return "other"


def with_time(text, e):
    t = e.get("time_us")
    return text + (f', "time_us": {t}}}' if t is not None else "}")


def convert(snapshot, device_arg, source_name):
    segments_all, traces, settings = top_level(snapshot)
    device, note = choose_device(segments_all, traces, device_arg)
    segments = check_segments(segments_all, device)
    trace = traces[device] if device < len(traces) else []
    check_entries(trace, device)
    alloc_conf = alloc_conf_of(settings)

    streams = Streams()
    streams.id(0)  # the legacy default stream is stream 0 of the trace
    events = []
    start_segments = initial_segments(segments, trace)
    for addr, size, raw, expandable in start_segments:
        kind = "segment_map" if expandable else "segment_alloc"
        events.append(f'{{"ev": "{kind}", "addr": {addr}, "bytes": {size}, '
                      f'"stream": {streams.id(raw)}}}')
    start_blocks = initial_blocks(segments, trace)
    pending = {}  # address -> deferred-free stream
    for addr in sorted(start_blocks):
        size, raw, pending_at_start = start_blocks[addr]
        events.append(f'{{"ev": "alloc", "id": {addr}, "bytes": {size}, '
                      f'"stream": {streams.id(raw)}, "cat": "other"}}')
        if pending_at_start:
            deferred = streams.take_deferred()
            pending[addr] = deferred
            events.append(f'{{"ev": "record_stream", "id": {addr}, "stream": {deferred}}}')
            events.append(f'{{"ev": "free", "id": {addr}}}')

    stray_completions = 0
    n = len(trace)
    i = 0
    while i < n:
        e = trace[i]
        action = e["action"]
        if action == "alloc":
            events.append(with_time(
                f'{{"ev": "alloc", "id": {e["addr"]}, "bytes": {e["size"]}, '
                f'"stream": {streams.id(e["stream"])}, "cat": "{category_of(e)}"', e))
        elif action == "free_requested":
            nxt = trace[i + 1] if i + 1 < n else None
            if nxt is not None and nxt["action"] == "free_completed" and nxt["addr"] == e["addr"]:
                i += 1  # completed at once: the free says it all
            else:
                deferred = streams.take_deferred()
                pending[e["addr"]] = deferred
                events.append(f'{{"ev": "record_stream", "id": {e["addr"]}, '
                              f'"stream": {deferred}}}')
            events.append(with_time(f'{{"ev": "free", "id": {e["addr"]}', e))
        elif action == "free_completed":
            deferred = pending.pop(e["addr"], None)
            if deferred is None:
                stray_completions += 1
            else:
                events.append(f'{{"ev": "sync", "stream": {deferred}}}')
                streams.give_back(deferred)
        elif action in ("segment_alloc", "segment_map"):
            events.append(with_time(
                f'{{"ev": "{action}", "addr": {e["addr"]}, "bytes": {e["size"]}, '
                f'"stream": {streams.id(e["stream"])}', e))
        elif action in ("segment_free", "segment_unmap"):
            j = i
            while j < n and trace[j]["action"] in ("segment_free", "segment_unmap"):
                r = trace[j]
                events.append(with_time(
                    f'{{"ev": "{r["action"]}", "addr": {r["addr"]}, "bytes": {r["size"]}, '
                    f'"stream": {streams.id(r["stream"])}', r))
                j += 1
            after = trace[j]["action"] if j < n else None
            if after not in ("segment_alloc", "segment_map", "alloc", "oom"):
                events.append('{"ev": "empty_cache"}')
            i = j
            continue
        elif action == "oom":
            events.append(with_time(
                f'{{"ev": "oom", "bytes": {e["size"]}, "stream": {streams.id(e["stream"])}, '
                f'"device_free": {e["device_free"]}', e))
        else:  # snapshot
            events.append(with_time(f'{{"ev": "snapshot", "bytes": {e["size"]}', e))
        i += 1

    totals = {"allocated": 0, "reserved": 0, "requested": 0, "active": 0}
    for seg in segments:
        totals["reserved"] += seg["total_size"]
        for b in seg["blocks"]:
            if b["state"] == "inactive":
                continue
            totals["active"] += b["size"]
            if b["state"] == "active_allocated":
                totals["allocated"] += b["size"]
                totals["requested"] += block_requested(b)
    events.append(f'{{"ev": "snapshot", "bytes": {totals["active"]}, '
                  f'"allocated_bytes": {totals["allocated"]}, '
                  f'"reserved_bytes": {totals["reserved"]}, '
                  f'"requested_bytes": {totals["requested"]}}}')

    description = (f"PyTorch memory snapshot {source_name}, device {device}: {len(trace)} trace "
                   f"entries, {len(segments)} segments at the dump")
    if start_segments or start_blocks:
        description += (f"; the trace starts mid-run (ring buffer wrapped): {len(start_blocks)} "
                        f"allocation(s) and {len(start_segments)} segment(s) alive at the start "
                        "are synthesized first")
    if stray_completions:
        description += (f"; {stray_completions} free_completed without a pending free_requested "
                        "ignored")
    header = {"schema_version": 3, "description": description, "world_size": 1, "rank": 0}
    if alloc_conf:
        header["alloc_conf"] = alloc_conf
    header["streams"] = streams.names
    return header, events, note


def write_atomically(path, header, events):
    text = json.dumps(header, indent=2)
    assert text.endswith("\n}")
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".snapshot_to_trace.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text[:-2])
            out.write(',\n  "events": [\n')
            out.write(",\n".join(events))
            out.write("\n]}\n")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Convert a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot) into a "
                    "bucketsim trace (format v3).",
        epilog="Example: tools/snapshot_to_trace.py snapshot.pickle -o snapshot.json && "
               "bucketsim validate snapshot.json")
    parser.add_argument("snapshot", help="the .pickle file")
    parser.add_argument("-o", "--output", required=True, help="the trace to write")
    parser.add_argument("--device", type=int, default=None,
                        help="which device's trace to import (default: the first with events)")
    args = parser.parse_args(argv)
    try:
        snapshot = load_snapshot(args.snapshot)
        header, events, note = convert(snapshot, args.device, os.path.basename(args.snapshot))
        if note:
            print(f"snapshot_to_trace: note: {note}", file=sys.stderr)
        write_atomically(args.output, header, events)
    except InputError as e:
        print(f"snapshot_to_trace: error: {args.snapshot}: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"snapshot_to_trace: error: cannot write '{args.output}': {e.strerror}",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
