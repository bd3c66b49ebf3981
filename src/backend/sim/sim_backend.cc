#include "backend/sim/sim_backend.h"

#include <algorithm>

namespace bucketsim {

SimBackend::SimBackend(std::shared_ptr<const TimeProfile> profile, double compute_scale)
    : profile_(std::move(profile)), compute_scale_(compute_scale) {}

Status SimBackend::Start(const TraceHeader& header) {
  stream_clock_us_.assign(std::max<std::size_t>(header.streams.size(), 1), 0.0);
  for (const ProcessGroup& group : header.groups) group_sizes_[group.id] = group.size();
  return Status::Ok();
}

Micros& SimBackend::Clock(StreamId stream) {
  if (stream >= stream_clock_us_.size()) stream_clock_us_.resize(stream + 1, current_.start_us);
  return stream_clock_us_[stream];
}

std::optional<Micros> SimBackend::IssueClock(StreamId stream) const {
  return stream < stream_clock_us_.size() ? stream_clock_us_[stream] : current_.start_us;
}

void SimBackend::Occupy(SpanKind kind, StreamId stream, Micros duration) {
  Micros& clock = Clock(stream);
  const TimedSpan span{kind, stream, clock, clock + duration};
  clock += duration;
  timer_.Add(span);
  if (list_every_span_ || kind == SpanKind::kCollective) current_.spans.push_back(span);
}

void SimBackend::FillGradient(const GradientFill& fill, StreamId stream) {
  // torch.stack / torch.cat of the gradient's chunks: a copy of every byte of the result.
  if (profile_)
    Occupy(SpanKind::kCopy, stream,
           profile_->CopyTime(fill.rows * fill.numel * ElementSize(fill.dtype)));
}

void SimBackend::Copy(const BufferCopy& copy, StreamId stream) {
  if (profile_) {
    Occupy(SpanKind::kCopy, stream,
           profile_->CopyTime(copy.rows * copy.cols * ElementSize(copy.dtype)));
  }
}

void SimBackend::Collective(const CollectiveRecord& record, const CollectiveBuffers& /*buffers*/,
                            StreamId stream) {
  Micros duration = 0;
  if (profile_) {
    const Bytes bytes = SendBytes(record);
    switch (record.kind) {
      case CollectiveKind::kAllReduce:
        duration = profile_->AllReduceTime(bytes, record.group_size);
        break;
      case CollectiveKind::kAllGather:
        duration = profile_->AllGatherTime(bytes, record.group_size);
        break;
      default:
        duration = profile_->ReduceScatterTime(bytes, record.group_size);
        break;
    }
  }
  Occupy(SpanKind::kCollective, stream, duration);
  if (record.replicate_group) {
    // HYBRID_SHARD: this rank's output then all-reduced over its replicas, a span of its own.
    const CollectiveRecord replicas =
        ReplicaAllReduce(record, group_sizes_.at(*record.replicate_group));
    Occupy(SpanKind::kCollective, stream,
           profile_ ? profile_->AllReduceTime(SendBytes(replicas), replicas.group_size) : 0);
  }
}

void SimBackend::Compute(StreamId stream, Micros duration) {
  Occupy(SpanKind::kCompute, stream, duration * compute_scale_);
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
  finished.timing = timer_.Take(finished.start_us, end);
  current_ = IterationSpans{end, end, {}};
  // Iterations of a trace issue about as many spans each: growing the list again every
  // iteration cost more than keeping its spans.
  current_.spans.reserve(finished.spans.size());
  return finished;
}

}  // namespace bucketsim
