#include "backend/cuda/stream_plan.h"

#include <fmt/format.h>

namespace bucketsim {

StreamPlan StreamPlan::ForTrace(const TraceHeader& header) {
  StreamPlan plan;
  for (const StreamInfo& stream : header.streams) plan.names_.push_back(stream.name);
  if (plan.names_.empty()) plan.names_.push_back("default");
  plan.post_backward_ = static_cast<int>(header.post_backward_stream());
  return plan;
}

Result<int> StreamPlan::Slot(StreamId stream) const {
  if (stream >= names_.size()) {
    return InvalidTrace(
        fmt::format("stream {} is not among the trace's {} streams", stream, names_.size()));
  }
  return static_cast<int>(stream);
}

}  // namespace bucketsim
