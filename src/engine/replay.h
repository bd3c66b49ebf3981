// One replay of a trace under one bucket policy: the engine. It consumes checked events (after
// TraceChecker, which assigns allocation slots), sends trace allocations to the memory model,
// reduce-scatter requests and flushes to the policy, compute spans and collectives to the
// backend, and keeps the ledger. It is also the policy's PolicyHost: it owns every policy buffer
// and applies the gradient retention rule when a reduced shard is delivered, which is the same
// for every policy (reference/fsdp_semantics.md §2.4, §2.6).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "backend/backend.h"
#include "core/event_sink.h"
#include "engine/memory_event_sink.h"
#include "engine/memory_ledger.h"
#include "memory/device_overhead.h"
#include "memory/memory_model.h"
#include "policy/bucket_policy.h"
#include "policy/policy_spec.h"

namespace bucketsim {

struct ReplayOptions {
  // Keep every collective in RunResult::collectives (--full-log); the summary is always kept.
  bool keep_collective_log = true;
  int largest_at_peak = 10;  // how many of the largest live allocations the peak lists
  std::uint32_t timeline_points = MemoryTimeline::kDefaultMaxPoints;  // MemoryTimeline's bound
  std::uint32_t max_bucket_lifetimes = 1000;  // RunResult::bucket_lifetimes' bound
  // Keep every iteration's spans, memory samples and instants in RunResult::timeline (for
  // --chrome-trace); off by default, as it costs memory proportional to the trace.
  bool keep_timeline = false;
  // Told of everything the memory model does, with what the replay was doing (--memory-viz);
  // not owned. Null: nobody, and the model is not observed.
  MemoryEventSink* memory_events = nullptr;
  // The device the memory model's capacity came from (--device-memory), for RunResult::device.
  std::optional<DeviceBudget> device;
};

class Replay final : public EventSink,
                     private PolicyHost,
                     private BlockObserver,
                     private SegmentObserver {
 public:
  Replay(PolicySpec spec, double bucket_cap_mb, std::unique_ptr<MemoryModel> memory,
         std::unique_ptr<Backend> backend, ReplayOptions options = {});
  ~Replay() override;

  Status OnHeader(const TraceHeader& header) override;
  Status OnEvent(const Event& event) override;
  Status OnEnd() override;

  // Valid after OnEnd.
  RunResult TakeResult() { return std::move(result_); }

 private:
  static constexpr BufferId kNoBuffer = ~BufferId{0};
  // The stream FSDP's forward and backward compute run on (torch's current stream).
  static constexpr StreamId kComputeStream = 0;
  static constexpr std::uint32_t kNoLifetime = ~std::uint32_t{0};

  // Every alloc and free of a replay reads and writes one of these: fields are ordered so that
  // it packs into 48 bytes (120 with the record_stream list it held, a deep model's tens of
  // thousands of live entries spilling two cache lines each).
  struct Allocation {
    Block block;
    EventIndex since = 0;
    union {
      std::uint64_t trace_id = 0;  // trace allocations
      GroupId group;               // policy buffers
    };
    StreamId stream = 0;
    // The last recorded peak this entry is settled for: made live after it (so not live at
    // it), or already kept in peak_largest_ as it was then. Below peak_epoch_: live at the peak
    // and unchanged since.
    std::uint32_t peak_epoch = 0;
    Category category = Category::kOther;
    DType dtype = DType::kFloat32;  // policy buffers
    bool live = false;
    bool in_model = false;  // false when the memory model refused it (an OOM being reported)
  };
  // A policy buffer, and what only policy buffers have: the references that keep it alive (the
  // bucket, the gradients viewing it) and its bucket lifetime record.
  struct PolicyBuffer {
    Allocation allocation;
    std::uint32_t refs = 0;
    std::uint32_t lifetime = kNoLifetime;  // bucket buffers: its entry in bucket_lifetimes
    bool staged = false;                   // PolicyHost::Stage: data only, never charged
  };
  // An allocation live at the recorded peak, as it was then, and where it lived (the tables'
  // order breaks the last ties of the ranking).
  struct PeakEntry {
    bool policy_buffer = false;  // buffers_ (else trace_slots_)
    std::uint32_t index = 0;
    Allocation allocation;
  };
  // The ranking of the peak's list: larger first, then older, then in table order (trace slots
  // by slot, then policy buffers by id): a total order, so ties never depend on the library.
  static bool RanksBefore(const PeakEntry& x, const PeakEntry& y);

  // PolicyHost
  BufferId Allocate(Bytes bytes, Category category, DType dtype, GroupId group) override;
  BufferId Stage(Bytes bytes, DType dtype, GroupId group) override;
  void Release(BufferId buffer) override;
  void Relabel(BufferId buffer, Category category) override;
  void FillGradient(const GradientFill& fill) override;
  void Copy(const BufferCopy& copy) override;
  void Collective(const CollectiveRecord& record, const CollectiveBuffers& buffers) override;
  void Deliver(const ReduceScatterCall& call, BufferId reduced) override;
  void TraceCollective(const Event& event);
  void Log(const CollectiveRecord& record);

  // BlockObserver, SegmentObserver: the model's events, for options_.memory_events.
  void OnBlockEvent(const BlockEvent& event) override;
  void OnSegmentEvent(const SegmentEvent& event) override;
  void ForwardMemoryEvent(MemoryEvent event);

  BufferId NewBuffer();
  Status AllocateTrace(const Event& event);
  void FreeTrace(const Event& event);
  void ZeroGrad();
  Status Charge(Allocation& allocation, BufferHandle handle, Bytes requested, StreamId stream);
  void Discharge(Allocation& allocation, BufferHandle handle);
  // Asks the backend for the iteration that ends here and times its collectives.
  Status FinishIteration();
  // At the first decrease after a new peak (while everything live at the peak is still live):
  // records the peak's fragmentation and remembers the moment. What was live at it is rebuilt
  // once, at the end, by RankLargestAtPeak: a deep model reaches a new peak at every layer, and
  // ranking every live allocation each time cost time quadratic in the depth.
  // Returns whether it recorded one now.
  bool RecordPeakIfNeeded();
  // Before `allocation` (live, at `index` of its table) is freed or relabelled: offers a copy
  // of it as it was at the recorded peak to peak_largest_, the first time it changes after the
  // peak.
  void KeepForPeak(bool policy_buffer, std::uint32_t index, Allocation& allocation);
  // Offers `entry` to peak_largest_, which keeps the largest_at_peak first under RanksBefore.
  void OfferForPeak(const PeakEntry& entry);
  // Makes `allocation` live: born after any recorded peak, so not listed at it.
  void MakeLive(Allocation& allocation) { allocation.peak_epoch = peak_epoch_; }
  // The largest allocations live at the recorded peak, into the ledger.
  void RankLargestAtPeak();
  std::uint32_t RecordLifetime(const Allocation& buffer);
  // With keep_timeline: the memory counters now, at `stream`'s issue clock.
  void SampleMemory(StreamId stream);
  void AddInstant(std::string category, std::string name);
  // The stream a backend makes, uses and releases a buffer on: a policy buffer's is the
  // collective stream, a trace allocation's the one it was allocated on.
  StreamId BackendStream(BufferHandle handle, StreamId allocated) const {
    return (handle & kTraceBufferBit) == 0 ? collective_stream_ : allocated;
  }

  PolicySpec spec_;
  std::unique_ptr<BucketPolicy> policy_;
  std::unique_ptr<MemoryModel> memory_;
  std::unique_ptr<Backend> backend_;
  bool backend_holds_buffers_ = true;  // Backend::holds_buffers, asked once
  ReplayOptions options_;
  const TraceHeader* header_ = nullptr;
  // The policy's buffers are allocated on policy_stream_ (the memory model's stream: fairscale's
  // and FSDP1's post-backward stream, FSDP2's current stream) and its fills, copies and
  // collectives run on collective_stream_ (the same, or FSDP2's reduce_scatter_stream), where a
  // backend also makes and releases them.
  StreamId policy_stream_ = 0;
  StreamId collective_stream_ = 0;
  EventIndex current_event_ = 0;
  Status deferred_error_;       // an allocation failure inside a policy call
  bool out_of_memory_ = false;  // the device ran out: the rest of the trace is not replayed
  bool in_iteration_ = false;
  std::uint64_t iteration_ = 0;
  Phase phase_ = Phase::kInit;
  EventIndex phase_event_ = 0;            // the current phase's marker
  Category charging_ = Category::kOther;  // what Charge is allocating (for memory_events)
  std::size_t untimed_collectives_ = 0;   // result_.collectives from here on await their times

  std::vector<Allocation> trace_slots_;  // by Event::slot
  // The other streams that use a live trace allocation (record_stream), by slot: rare, so
  // kept apart from the slots.
  std::map<std::uint32_t, std::vector<StreamId>> stream_uses_;
  std::vector<PolicyBuffer> buffers_;  // by BufferId
  std::vector<BufferId> free_buffers_;
  std::vector<BufferId> held_grad_;  // per parameter: the buffer its gradient lives in
  std::vector<std::uint32_t> holding_params_;

  // The recorded peak (peak_epoch_ counts them; 0: none yet). Of the allocations live at it and
  // freed or relabelled since, only the largest_at_peak that rank first are kept, as they were
  // then, in a heap whose front ranks last: the peak's list is the first of these and of those
  // still live and unchanged (peak_epoch below peak_epoch_), ranked once at the end.
  std::uint32_t peak_epoch_ = 0;
  std::vector<PeakEntry> peak_largest_;

  MemoryLedger ledger_;
  RunResult result_;
};

}  // namespace bucketsim
