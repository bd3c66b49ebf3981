#include "backend/sim/sim_backend.h"

#include <algorithm>

namespace bucketsim {

Status SimBackend::Start(const TraceHeader& header) {
  stream_clock_us_.assign(std::max<std::size_t>(header.streams.size(), 1), 0.0);
  return Status::Ok();
}

Micros& SimBackend::Clock(StreamId stream) {
  if (stream >= stream_clock_us_.size()) stream_clock_us_.resize(stream + 1, current_.start_us);
  return stream_clock_us_[stream];
}

void SimBackend::ReduceScatter(const CollectiveRecord& /*record*/,
                               const CollectiveBuffers& /*buffers*/, StreamId stream) {
  Micros now = Clock(stream);
  current_.spans.push_back({SpanKind::kCollective, stream, now, now});
}

void SimBackend::Compute(StreamId stream, Micros duration) {
  Micros& clock = Clock(stream);
  current_.spans.push_back({SpanKind::kCompute, stream, clock, clock + duration});
  clock += duration;
}

void SimBackend::WaitStream(StreamId waiter, StreamId producer) {
  Micros ready = Clock(producer);
  Micros& clock = Clock(waiter);
  clock = std::max(clock, ready);
}

Result<IterationSpans> SimBackend::EndIteration() {
  Micros end = current_.start_us;
  for (Micros clock : stream_clock_us_) end = std::max(end, clock);
  std::fill(stream_clock_us_.begin(), stream_clock_us_.end(), end);
  IterationSpans finished = std::move(current_);
  finished.end_us = end;
  current_ = IterationSpans{end, end, {}};
  return finished;
}

}  // namespace bucketsim
