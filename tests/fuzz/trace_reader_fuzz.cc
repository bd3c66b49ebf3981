// The trace reader on arbitrary bytes, with the consistency checker behind it (as `validate`).
#include "engine/trace_checker.h"
#include "fuzz_input.h"
#include "io/trace_reader.h"

namespace bucketsim {
namespace {

class DropSink final : public EventSink {
 public:
  Status OnHeader(const TraceHeader&) override { return Status::Ok(); }
  Status OnEvent(const Event&) override { return Status::Ok(); }
  Status OnEnd() override { return Status::Ok(); }
};

}  // namespace
}  // namespace bucketsim

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  bucketsim::DropSink drop;
  bucketsim::TraceChecker checker(&drop);
  bucketsim::TraceHeader header;
  (void)bucketsim::ReadTraceFromString(bucketsim::fuzz::AsText(data, size), "fuzz.json", header,
                                       checker);
  return 0;
}
