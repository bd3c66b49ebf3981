// Which CUDA stream runs the work a trace issued on each of its streams. Every trace stream
// gets a CUDA stream of its own, so the trace's concurrency survives: the default stream's
// compute spans on one, fairscale's post-backward stream (bucket copies and reduce-scatters)
// on another, and any other stream the trace names (all_gather, ...) on its own.
// Plain C++, so the mapping is tested without a GPU.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "core/trace_header.h"

namespace bucketsim {

class StreamPlan {
 public:
  // One CUDA stream per trace stream (at least one, for a trace that names none).
  static StreamPlan ForTrace(const TraceHeader& header);

  int streams() const { return static_cast<int>(names_.size()); }
  const std::string& name(int slot) const { return names_[static_cast<std::size_t>(slot)]; }
  int compute_slot() const { return 0; }
  int post_backward_slot() const { return post_backward_; }
  // The CUDA stream of trace stream `stream`; an error for a stream the header does not name.
  Result<int> Slot(StreamId stream) const;

 private:
  std::vector<std::string> names_;
  int post_backward_ = 0;
};

}  // namespace bucketsim
