// The reference backend: executes nothing and predicts when everything would run, as a
// deterministic discrete-event model of the streams the trace and the policy use.
//
// Each stream has a virtual clock. Work issued on a stream starts when the stream's previous
// work has ended (CUDA's in-order streams) and advances the clock by its duration: a compute
// span by the trace's dur_us, a copy (torch.stack/cat of a gradient, the bucket copy-in, the
// flush's .contiguous()) by its bytes over the profile's copy bandwidth, a reduce-scatter by the
// profile's alpha-beta time, an all-reduce (DDP, Megatron) by twice that of its buffer
// (TimeProfile::AllReduceTime: a reduce-scatter then an all-gather of the same bytes). A wait moves
// the waiting stream's clock up to the producer's: the engine makes the post-backward stream wait
// for the compute stream before each gradient's reduce-scatter (the gradient's producer) and the
// compute stream wait for the post-backward stream after the end-of-backward flush. An iteration
// ends when the latest stream does, and every stream starts the next one there: the next
// iteration's forward waits for everything (the optimizer step reads every reduced gradient),
// including compute the trace put on other streams (all_gather).
//
// Buffer reuse: fairscale's flush calls a synchronous reduce_scatter, so the post-backward
// stream waits for the collective before the callbacks run and before the bucket is refilled;
// every policy copy and collective is issued on that one stream, so a refill can never start
// before the collective that read the bucket has ended, with or without the .contiguous() copy.
// The single stream order expresses the rule; sim_backend_test's buffer-reuse stall shows it.
//
// The sim times an iteration as it issues its spans (IterationTimer) and, unless asked for every
// span (a timeline), keeps only the collectives, whose times the collective log records: the
// memory of an iteration's spans no longer grows with the model's depth.
//
// Without a profile, copies and collectives take no time (the model of the memory-only
// reports); the clocks then advance by compute alone.
#pragma once

#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/sim/time_profile.h"
#include "backend/span_timing.h"

namespace bucketsim {

class SimBackend final : public Backend {
 public:
  // A null profile: copies and collectives cost nothing. Compute spans last dur_us times
  // `compute_scale` (run --compute-scale, so a prediction prices what the real backend ran).
  explicit SimBackend(std::shared_ptr<const TimeProfile> profile = nullptr,
                      double compute_scale = 1.0);

  std::string_view name() const override { return "sim"; }
  Status Start(const TraceHeader& header) override;
  void Materialize(BufferHandle /*buffer*/, Bytes /*bytes*/, StreamId /*stream*/) override {}
  void Release(BufferHandle /*buffer*/, StreamId /*stream*/) override {}
  bool holds_buffers() const override { return false; }
  void FillGradient(const GradientFill& fill, StreamId stream) override;
  void Copy(const BufferCopy& copy, StreamId stream) override;
  void Collective(const CollectiveRecord& record, const CollectiveBuffers& buffers,
                  StreamId stream) override;
  void Compute(StreamId stream, Micros duration) override;
  void WaitStream(StreamId waiter, StreamId producer) override;
  Result<IterationSpans> EndIteration() override;
  ExecutionFacts facts() const override { return {}; }
  std::optional<Micros> IssueClock(StreamId stream) const override;
  void set_list_every_span(bool every) override { list_every_span_ = every; }

 private:
  Micros& Clock(StreamId stream);
  void Occupy(SpanKind kind, StreamId stream, Micros duration);

  std::shared_ptr<const TimeProfile> profile_;
  double compute_scale_ = 1.0;
  std::vector<Micros> stream_clock_us_;
  std::unordered_map<GroupId, int> group_sizes_;  // the header's groups, by id
  bool list_every_span_ = true;
  IterationTimer timer_;  // the current iteration's timing, span by span
  IterationSpans current_;
};

}  // namespace bucketsim
