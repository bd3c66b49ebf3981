#include "backend/host/collective_sweep.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "backend/host/bare_collective.h"
#include "backend/host/host_backend.h"

namespace bucketsim {
namespace {

using Clock = std::chrono::steady_clock;

Micros Since(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

Micros Median(std::vector<Micros> values) {
  if (values.empty()) return 0;
  auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

// The timed iterations of one size: the slowest rank's span of `kind` and end-to-end time per
// iteration, each iteration one operation group issued by `issue` and drained by EndIteration.
struct SpanSamples {
  std::vector<Micros> spans;
  std::vector<Micros> end_to_end;
};

template <typename Issue>
Status TimeSpans(MpiWorld& world, Backend& backend, const CollectiveSweepOptions& options,
                 SpanKind kind, Issue issue, SpanSamples& samples) {
  for (int i = 0; i < options.warmup + options.iterations; ++i) {
    BUCKETSIM_RETURN_IF_ERROR(world.Barrier());
    auto start = Clock::now();
    issue();
    Result<IterationSpans> iteration = backend.EndIteration();
    if (!iteration.ok()) return iteration.status();
    Micros total = Since(start);
    Micros span = 0;
    for (const TimedSpan& s : iteration->spans) {
      if (s.kind == kind) span = s.end_us - s.start_us;
    }
    Result<Micros> slowest_span = world.MaxOverRanks(span);
    if (!slowest_span.ok()) return slowest_span.status();
    Result<Micros> slowest_total = world.MaxOverRanks(total);
    if (!slowest_total.ok()) return slowest_total.status();
    if (i >= options.warmup) {
      samples.spans.push_back(*slowest_span);
      samples.end_to_end.push_back(*slowest_total);
    }
  }
  return Status::Ok();
}

// Sizes in the outer loop of each pass, passes outermost: a slow drift of the machine (another
// job, a noisy neighbour of the VM) spreads over every size instead of skewing a few.
template <typename MeasureOnce>
Result<std::vector<CollectiveSweepPoint>> InPasses(const CollectiveSweepOptions& options, int ranks,
                                                   MeasureOnce measure_once) {
  std::vector<SpanSamples> samples(options.send_bytes.size());
  std::vector<Bytes> bytes(options.send_bytes.size());
  for (int pass = 0; pass < std::max(options.passes, 1); ++pass) {
    for (std::size_t i = 0; i < options.send_bytes.size(); ++i) {
      Result<Bytes> measured = measure_once(options.send_bytes[i], samples[i]);
      if (!measured.ok()) return measured.status();
      bytes[i] = *measured;
      if (options.on_measured) {
        options.on_measured(
            {bytes[i], ranks, 0, Median(samples[i].spans), Median(samples[i].end_to_end)}, pass);
      }
    }
  }
  std::vector<CollectiveSweepPoint> points;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    points.push_back({bytes[i], ranks, 0, Median(samples[i].spans), Median(samples[i].end_to_end)});
  }
  return points;
}

constexpr BufferHandle kInput = 0;
constexpr BufferHandle kOutput = 1;

}  // namespace

std::vector<Bytes> DoublingSizes(Bytes from, Bytes to) {
  std::vector<Bytes> sizes;
  for (Bytes size = std::max<Bytes>(from, 1); size <= to; size *= 2) sizes.push_back(size);
  return sizes;
}

std::vector<Bytes> HalfOctaveSizes(Bytes from, Bytes to) {
  std::vector<Bytes> sizes;
  for (Bytes size : DoublingSizes(from, to)) {
    sizes.push_back(size);
    if (size >= 2 && size + size / 2 <= to) sizes.push_back(size + size / 2);
  }
  return sizes;
}

Result<TraceHeader> SweepHeader(int world_size, int rank) {
  TraceHeader header;
  header.world_size = world_size;
  header.rank = rank;
  header.streams = {{"default"}, {"post_backward"}};
  ProcessGroup group;
  group.id = 1;
  group.ranks.resize(static_cast<std::size_t>(world_size));
  std::iota(group.ranks.begin(), group.ranks.end(), 0);
  header.groups = {group};
  BUCKETSIM_RETURN_IF_ERROR(header.Finalize());
  return header;
}

Result<std::vector<CollectiveSweepPoint>> MeasureBackendCollectives(
    MpiWorld& world, Backend& backend, const TraceHeader& header,
    const CollectiveSweepOptions& options) {
  const int ranks = world.size();
  const Bytes element = ElementSize(options.dtype);
  const StreamId stream = header.post_backward_stream();
  const ProcessGroup& group = header.groups.front();
  Result<std::vector<CollectiveSweepPoint>> points =
      InPasses(options, ranks, [&](Bytes requested, SpanSamples& samples) -> Result<Bytes> {
        const Numel count = std::max<Numel>(requested / (element * ranks), 1);
        const Bytes send = count * ranks * element;
        // Materialized buffers, and an input filled again before every collective, as a
        // replay's collective reads a gradient stacked (or a bucket filled) just before:
        // measured on the 2-core VM, a 2 MiB reduce-scatter of a just-written input takes
        // 0.7 ms, of one written long before 0.4 ms (the peer reads the freshly written lines
        // out of another core's cache), and replays see the former.
        backend.Materialize(kInput, send, stream);
        backend.Materialize(kOutput, count * element, stream);
        CollectiveRecord record{
            CollectiveKind::kBucketFlush, group.id, ranks, options.dtype, count * ranks, count, 1};
        const ReducedSlice slice{0, 0, count};
        Status timed = TimeSpans(
            world, backend, options, SpanKind::kCollective,
            [&] {
              backend.FillGradient({kInput, 0, ranks, count, options.dtype}, stream);
              backend.Collective(record, {kInput, kOutput, {&slice, 1}}, stream);
            },
            samples);
        backend.Release(kInput, stream);
        backend.Release(kOutput, stream);
        if (!timed.ok()) return timed;
        return send;
      });
  Result<IterationSpans> drained = backend.EndIteration();
  if (!drained.ok()) return drained.status();
  return points;
}

Result<std::vector<CollectiveSweepPoint>> MeasureBackendCopies(
    MpiWorld& world, Backend& backend, const TraceHeader& header,
    const CollectiveSweepOptions& options) {
  const Bytes element = ElementSize(options.dtype);
  const StreamId stream = header.post_backward_stream();
  Result<std::vector<CollectiveSweepPoint>> points =
      InPasses(options, world.size(), [&](Bytes requested, SpanSamples& samples) -> Result<Bytes> {
        const Numel count = std::max<Numel>(requested / element, 1);
        backend.Materialize(kInput, count * element, stream);
        backend.Materialize(kOutput, count * element, stream);
        backend.FillGradient({kInput, 0, 1, count, options.dtype}, stream);
        const BufferCopy copy{kOutput, count, 0, kInput, count, 0, 1, count, options.dtype};
        Status timed = TimeSpans(
            world, backend, options, SpanKind::kCopy, [&] { backend.Copy(copy, stream); }, samples);
        backend.Release(kInput, stream);
        backend.Release(kOutput, stream);
        if (!timed.ok()) return timed;
        return count * element;
      });
  Result<IterationSpans> drained = backend.EndIteration();
  if (!drained.ok()) return drained.status();
  return points;
}

Result<std::vector<CollectiveSweepPoint>> RunCollectiveSweep(
    MpiWorld& world, const CollectiveSweepOptions& options) {
  Result<TraceHeader> header = SweepHeader(world.size(), world.rank());
  if (!header.ok()) return header.status();
  HostBackendOptions backend_options;
  backend_options.verify = false;
  Result<std::unique_ptr<Backend>> backend = MakeHostBackend(world, backend_options);
  if (!backend.ok()) return backend.status();
  BUCKETSIM_RETURN_IF_ERROR((*backend)->Start(*header));
  Result<std::vector<CollectiveSweepPoint>> points =
      MeasureBackendCollectives(world, **backend, *header, options);
  if (!points.ok()) return points.status();
  for (CollectiveSweepPoint& point : *points) {
    Result<std::vector<Micros>> bare =
        TimeBareReduceScatter(world, header->groups.front(), options.dtype, point.send_bytes,
                              options.warmup, options.iterations);
    if (!bare.ok()) return bare.status();
    point.bare_us = Median(*bare);
  }
  return points;
}

}  // namespace bucketsim
