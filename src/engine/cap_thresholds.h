// Where fairscale's bucketing changes with the cap, read from a trace's reduce requests. A
// request of n elements per rank, e bytes each, in a group of ws ranks is bucketed when
// n <= S(cap) = int((cap * 2^20 / e) // ws) and bypasses the bucket otherwise
// (policy/shard_size.h, reference/fsdp_semantics.md §1.2, §1.4 step 3). So it is bucketed from
// exactly cap = ws * n * e / 2^20 MiB up: the bytes of the bucket's `data` it would fill. Below
// the smallest of these thresholds a cap buckets nothing; above the largest one bucket holding
// a whole backward's requests, nothing but the buffers' size changes. `sweep` uses these to
// say what a cap buckets and to choose the caps its search tries.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "core/event_sink.h"
#include "core/units.h"
#include "engine/replay_policies.h"

namespace bucketsim {

// One size of reduce request and how many of the trace's requests have it.
struct RequestSize {
  Numel numel = 0;  // per rank
  Bytes element_size = 0;
  int world_size = 0;  // of the request's group
  std::uint64_t count = 0;

  // The least cap (MiB) at which a request of this size is bucketed. ws * n * e is an integer
  // below 2^53 and 2^20 a power of two, so the division is exact and S(threshold) == n.
  double ThresholdCapMb() const;
};

class CapThresholds {
 public:
  // `bucket_key`: the bucket the request would join (dtype and group members).
  void AddRequest(Numel numel, Bytes element_size, int world_size, std::uint64_t bucket_key);
  // Starts a new backward: the per-bucket totals of AllInOneBucketCapMb restart.
  void StartBackward();

  std::uint64_t requests() const { return requests_; }
  // Requests of the whole trace a cap of `cap_mb` buckets (the others bypass).
  std::uint64_t BucketedAt(double cap_mb) const;
  // Every size, by threshold cap ascending.
  std::vector<RequestSize> Sizes() const;
  // The smallest cap that buckets any request; unset without requests.
  std::optional<double> SmallestBucketingCapMb() const;
  // The cap of a bucket whose `data` holds every request one key receives in one backward (the
  // largest such sum, the key as per-group-dedup's: dtype and group members): bigger caps flush
  // no less often, they only hold bigger buffers.
  double AllInOneBucketCapMb() const;

 private:
  std::map<std::tuple<Numel, Bytes, int>, std::uint64_t> sizes_;
  std::map<std::uint64_t, Bytes> backward_bytes_;  // per bucket key, this backward
  Bytes largest_backward_bytes_ = 0;
  std::uint64_t requests_ = 0;
};

// Collects a trace's reduce requests from a stream of events that a TraceChecker has already
// accepted (it trusts their groups), e.g. beside a replay's own checker.
class CapThresholdScan final : public EventSink {
 public:
  Status OnHeader(const TraceHeader& header) override;
  Status OnEvent(const Event& event) override;
  Status OnEnd() override { return Status::Ok(); }
  CapThresholds Take() { return std::move(thresholds_); }

 private:
  // Group objects with the same members share a key, as per-group-dedup's buckets do: its one
  // bucket per backward is the largest there is.
  std::uint64_t MembersKey(const ProcessGroup& group);

  const TraceHeader* header_ = nullptr;
  CapThresholds thresholds_;
  std::map<std::vector<int>, std::uint64_t> keys_;
};

// Reads the trace from `source` once, checked as a replay checks it.
Result<CapThresholds> ScanCapThresholds(const TraceSource& source);

}  // namespace bucketsim
