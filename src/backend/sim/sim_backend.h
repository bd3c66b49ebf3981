// The reference backend: executes nothing. Each stream has a virtual clock advanced by the
// compute spans issued on it; `now` is the latest of them. Collectives take no time yet (the
// cost model of the time-model issue plugs in here).
#pragma once

#include <vector>

#include "backend/backend.h"

namespace bucketsim {

class SimBackend final : public Backend {
 public:
  std::string_view name() const override { return "sim"; }
  void Compute(StreamId stream, Micros duration) override;
  void Collective(const CollectiveRecord& /*record*/) override {}
  Micros now_us() const override;

 private:
  std::vector<Micros> stream_clock_us_;
};

}  // namespace bucketsim
