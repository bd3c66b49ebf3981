// The reference backend: executes nothing. Each stream has a virtual clock advanced by the
// compute spans issued on it; a wait moves the waiting stream's clock up to the producer's; an
// iteration ends when the latest stream does. Collectives and copies take no time yet (the
// cost model of the time-model issue plugs in here), so sim's exposed communication is zero.
#pragma once

#include <vector>

#include "backend/backend.h"

namespace bucketsim {

class SimBackend final : public Backend {
 public:
  std::string_view name() const override { return "sim"; }
  Status Start(const TraceHeader& header) override;
  void Materialize(BufferHandle /*buffer*/, Bytes /*bytes*/, StreamId /*stream*/) override {}
  void Release(BufferHandle /*buffer*/, StreamId /*stream*/) override {}
  void FillGradient(const GradientFill& /*fill*/, StreamId /*stream*/) override {}
  void Copy(const BufferCopy& /*copy*/, StreamId /*stream*/) override {}
  void ReduceScatter(const CollectiveRecord& record, const CollectiveBuffers& buffers,
                     StreamId stream) override;
  void Compute(StreamId stream, Micros duration) override;
  void WaitStream(StreamId waiter, StreamId producer) override;
  Result<IterationSpans> EndIteration() override;
  ExecutionFacts facts() const override { return {}; }

 private:
  Micros& Clock(StreamId stream);

  std::vector<Micros> stream_clock_us_;
  IterationSpans current_;
};

}  // namespace bucketsim
