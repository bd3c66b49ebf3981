// The cost model of the sim backend: how long a reduce-scatter and a copy take on some machine.
// A collective costs alpha + (n-1)/n * S / busbw (the alpha-beta model with nccl-tests'
// bus-bandwidth factor, reference/anchors.md §3.2), where S is the whole send buffer as
// nccl-tests counts it and n the group size; a copy (bucket copy-in, .contiguous(), the
// torch.stack/cat of a gradient) costs its bytes over a copy bandwidth, bytes counted once.
// Profiles are read from JSON by io/time_profile_reader.h; this header is the plain model.
#pragma once

#include <string>
#include <vector>

#include "core/gpu_catalog.h"
#include "core/status.h"
#include "core/units.h"

namespace bucketsim {

// One timed operation: its bytes (a collective's whole send buffer, as nccl-tests counts it;
// a copy's bytes copied) and how long it took (a median over repetitions).
struct TimingSample {
  Bytes bytes = 0;
  Micros time_us = 0;
};

// alpha and busbw of one collective kind at one group size.
struct AlphaBeta {
  int group_size = 2;
  Micros alpha_us = 0;
  double busbw_GBps = 0;  // GB = 1e9 bytes, as nccl-tests prints it
  // What `calibrate` measured at this group size (sorted by bytes, distinct sizes). When present
  // the model follows the measurements, and alpha and busbw only summarise them and price sizes
  // beyond the largest: a machine whose bandwidth falls once messages outgrow a cache, or whose
  // protocol changes with size, is not one straight line (reference/anchors.md §3.2: NCCL's own
  // busbw ramps from 0.2 to 362 GB/s over the sizes buckets take).
  std::vector<TimingSample> measured;
};

// Where a profile's figures come from: `derived` from published figures (with the sources),
// or `measured` by `bucketsim calibrate` (with the machine and backend it ran on), or an
// `estimate` of a named GPU from its datasheet (EstimateTimeProfile; never read from a file).
struct ProfileProvenance {
  std::string kind;  // "derived", "measured" or "estimate"
  std::string description;
  std::vector<std::string> sources;  // URLs or documents the figures come from
  std::string host;
  std::string backend;  // the backend that measured (host, cuda); empty when derived
  int ranks = 0;        // processes that measured; 0 when derived
  std::string tool_version;
};

struct TimeProfile {
  ProfileProvenance provenance;
  std::string name;                       // "h100-8gpu-nvlink-derived"
  std::vector<AlphaBeta> reduce_scatter;  // sorted by group_size, sizes distinct
  double copy_GBps = 0;  // bytes copied (counted once, not read + write) per second, in GB

  // Sorts reduce_scatter by group size and checks the figures (positive bandwidths, alpha >= 0,
  // distinct group sizes, at least one entry). Messages name the offending entry.
  Status Validate();

  // The reduce-scatter parameters at group size `n`: an entry's own figures; between two
  // entries, alpha and busbw interpolated linearly in log2(group size); outside the listed
  // sizes, those of the nearest entry (no extrapolation beyond what was measured or derived).
  AlphaBeta ReduceScatterAt(int group_size) const;
  // At a group size with measured points: the measurements, interpolated linearly in bytes
  // between the two nearest; below the smallest, the smallest's time (latency bound); above the
  // largest, the largest's time plus the extra bytes at the slope of the last two points (or at
  // busbw when there is one point). Otherwise alpha + (n-1)/n * send_bytes / busbw of
  // ReduceScatterAt; a group of one costs alpha (nothing crosses a link).
  Micros ReduceScatterTime(Bytes send_bytes, int group_size) const;
  // An all-reduce of `bytes` (the whole buffer, as nccl-tests counts it) as NCCL's ring runs
  // it: a reduce-scatter of the buffer followed by an all-gather of the same bytes, the
  // all-gather priced as the reduce-scatter entry prices that size (a profile has no all-gather
  // entry; on NVLink rings the two move the same bytes at the same busbw, anchors.md §3.2). So
  // 2 * ReduceScatterTime(bytes, n): nccl-tests' all-reduce bus factor 2(n-1)/n.
  Micros AllReduceTime(Bytes bytes, int group_size) const;
  // An all-gather whose receive buffer holds `bytes` (nccl-tests' size): priced as the
  // reduce-scatter entry prices that size, for the reason above (the same bus factor, (n-1)/n).
  Micros AllGatherTime(Bytes bytes, int group_size) const;
  Micros CopyTime(Bytes bytes) const;
};

// A GPU's collectives and copies estimated from its published rates (core/gpu_catalog.h), for a
// run with --gpu and no measured profile; provenance "estimate", named "NAME-estimate".
// Reduce-scatters (and the all-gathers and all-reduces priced from them) at kEstimateAlphaUs
// and busbw = link bandwidth x efficiency.link: NVLink's for groups up to nvlink_ranks, the host
// link's above (an entry at each; a group beyond the largest takes its figures, as for any
// profile: across nodes an 8-GPU node's rings leave through its 8 NICs, reference/anchors.md
// §3.2's multi-node busbw); copies at half the device memory bandwidth x efficiency.memory (a
// device copy reads and writes every byte).
TimeProfile EstimateTimeProfile(const GpuSpec& gpu, const GpuEfficiency& efficiency);

// alpha + (n-1)/n * S / busbw with S in bytes, busbw in GB/s (1e3 bytes per µs).
Micros AlphaBetaTime(const AlphaBeta& model, Bytes send_bytes);

}  // namespace bucketsim
