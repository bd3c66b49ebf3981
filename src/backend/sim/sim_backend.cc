#include "backend/sim/sim_backend.h"

#include <algorithm>

namespace bucketsim {

void SimBackend::Compute(StreamId stream, Micros duration) {
  if (stream >= stream_clock_us_.size()) stream_clock_us_.resize(stream + 1, 0.0);
  stream_clock_us_[stream] += duration;
}

Micros SimBackend::now_us() const {
  return stream_clock_us_.empty()
             ? 0.0
             : *std::max_element(stream_clock_us_.begin(), stream_clock_us_.end());
}

}  // namespace bucketsim
