// Where a replay's work is executed. The engine hands the backend, in trace order, everything
// that costs time or touches memory: buffers to materialize and release, gradients to stack,
// bucket copies, reduce-scatters, compute spans, and the waits between streams that FSDP
// performs. `sim` (always built) executes nothing and keeps virtual clocks; the real backends
// (host: MPI on CPUs; cuda: NCCL on GPUs) execute the same calls on real memory, so every
// command runs on each of them and their reports have the same fields.
//
// Calls are issued asynchronously, the way CUDA work is queued on streams: a backend may run
// them later on per-stream workers, in issue order per stream. EndIteration() is the only
// point where the engine waits; it returns what the finished iteration measured.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/buffer_ops.h"
#include "core/collective_record.h"
#include "core/status.h"
#include "core/trace_header.h"
#include "core/units.h"

namespace bucketsim {

enum class SpanKind : std::uint8_t { kCompute, kCollective, kCopy };

// Something a stream was busy with, on the backend's clock (µs since the backend started).
struct TimedSpan {
  SpanKind kind = SpanKind::kCompute;
  StreamId stream = 0;
  Micros start_us = 0;
  Micros end_us = 0;
  // A collective's place in issue order, for backends that list spans stream by stream (the
  // engine matches collective spans to its log by it); 0 where spans come in issue order.
  std::uint64_t issue = 0;
};

// The time figures of one iteration (span_timing.h computes them from its spans).
struct IterationTiming {
  std::uint64_t iteration = 0;
  Micros iteration_us = 0;      // from the end of the previous iteration to all streams idle
  Micros compute_us = 0;        // sum of compute spans
  Micros communication_us = 0;  // sum of collective spans
  Micros copy_us = 0;           // bucket copy-in and .contiguous() copies
  Micros exposed_communication_us = 0;  // collectives running while no compute ran
};

// What one iteration measured (real backends) or predicted (sim). `spans` lists every span in
// the order it was issued; collectives among them appear in the order the policy issued them.
// A backend that times the spans as it issues them (the sim, with an IterationTimer) fills
// `timing`; when not asked for every span (Backend::set_list_every_span), its `spans` then
// lists only the collectives: a deep model issues hundreds of thousands of spans an iteration.
struct IterationSpans {
  Micros start_us = 0;
  Micros end_us = 0;
  std::vector<TimedSpan> spans;
  std::optional<IterationTiming> timing =
      std::nullopt;  // `iteration` left 0: the engine numbers iterations
};

// Facts about the execution that belong in the report beside the modelled figures.
struct ExecutionFacts {
  int ranks = 1;               // processes that took part
  int rank = 0;                // this process
  bool emulated = false;       // collectives on a world of one standing in for the trace's
  std::string emulation_note;  // why, when emulated
  bool verified = false;       // every collective's output was checked
  std::uint64_t verified_collectives = 0;
  std::uint64_t verify_failures = 0;
  std::string first_mismatch;         // empty when none
  std::uint64_t communicators = 0;    // communicators created (one per group object used)
  Bytes materialized_peak_bytes = 0;  // the most bytes the backend held at once
  // Device memory measured by the runtime (cuda): free memory before, after, and the peak used.
  std::optional<Bytes> device_used_before_bytes;
  std::optional<Bytes> device_used_after_bytes;
  std::optional<Bytes> device_used_peak_bytes;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;

  // Before the first event; a real backend checks that this process can run the trace.
  virtual Status Start(const TraceHeader& header) = 0;

  // Buffer lifetime on `stream` (a policy buffer, or a trace allocation: see kTraceBufferBit).
  virtual void Materialize(BufferHandle buffer, Bytes bytes, StreamId stream) = 0;
  virtual void Release(BufferHandle buffer, StreamId stream) = 0;
  // false: Materialize and Release do nothing, and the engine need not call them (the sim: two
  // calls saved on every allocation and free).
  virtual bool holds_buffers() const { return true; }

  // Data movement and collectives, on `stream`.
  virtual void FillGradient(const GradientFill& fill, StreamId stream) = 0;
  virtual void Copy(const BufferCopy& copy, StreamId stream) = 0;
  // A collective of any kind (core/collective_record.h): a policy's reduction of its buffers,
  // or the framework's own all-gather or all-reduce on a trace allocation (buffers.framework).
  // An all-gather runs in place (NCCL's in-place form: this rank's part at input_offset +
  // position * input_numel of the buffer). A reduction with record.replicate_group is followed
  // by the all-reduce of this rank's output over that group, in place, as a second span.
  virtual void Collective(const CollectiveRecord& record, const CollectiveBuffers& buffers,
                          StreamId stream) = 0;
  virtual void Compute(StreamId stream, Micros duration) = 0;
  // Work issued on `waiter` from now on starts after everything issued on `producer` so far
  // (stream.wait_stream(producer)). A no-op when both are the same stream.
  virtual void WaitStream(StreamId waiter, StreamId producer) = 0;

  // Waits for every stream and returns the spans of the iteration that ends here; the next
  // iteration starts at its end. An error is a failure of the execution (a wrong reduced value
  // is not an error: it is counted in facts()).
  virtual Result<IterationSpans> EndIteration() = 0;

  virtual ExecutionFacts facts() const = 0;

  // false: EndIteration may list only the collective spans when it fills
  // IterationSpans::timing. The engine asks for every span (the default) only when it keeps a
  // timeline; backends that do not time spans as they go always list every one.
  virtual void set_list_every_span(bool every) { (void)every; }

  // When work issued now on `stream` would start, on the backend's clock, for backends that
  // know it at issue time (sim); the others run asynchronously and answer nullopt. The engine
  // times memory samples and marks with it when a timeline is kept (ReplayOptions::keep_timeline).
  virtual std::optional<Micros> IssueClock(StreamId /*stream*/) const { return std::nullopt; }
};

}  // namespace bucketsim
