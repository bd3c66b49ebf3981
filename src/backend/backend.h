// Where a replay's work is executed. The engine tells the backend about compute spans and
// collectives in trace order; the backend decides what that costs. `sim` (always built) runs
// nothing and keeps virtual clocks; the real backends (MPI on hosts, NCCL on GPUs) implement the
// same interface so every command runs on each of them.
#pragma once

#include <string_view>

#include "core/collective_record.h"
#include "core/units.h"

namespace bucketsim {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual void Compute(StreamId stream, Micros duration) = 0;
  virtual void Collective(const CollectiveRecord& record) = 0;
  // Time since the backend started, on its clock.
  virtual Micros now_us() const = 0;
};

}  // namespace bucketsim
