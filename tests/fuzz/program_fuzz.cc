// The model program of `bucketsim gen program` (a preset's --emit-program, the recorder's
// output). Three promises are checked on every input the reader accepts: the writer's output
// reads back to the same program (written again, byte for byte the same text: program_file.h);
// the emitter either refuses the program with an error or emits a trace; and what it emits is a
// valid trace, since ValidateProgram accepted its program (the trace checker rejecting an event
// is a finding, not bad input).
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "engine/trace_checker.h"
#include "fuzz_input.h"
#include "gen/fsdp_program.h"
#include "io/program_file.h"

namespace bucketsim {
namespace {

// Forwards to the checker and remembers whether it was the checker that refused.
class CheckedSink final : public EventSink {
 public:
  Status OnHeader(const TraceHeader& header) override { return Note(checker_.OnHeader(header)); }
  Status OnEvent(const Event& event) override { return Note(checker_.OnEvent(event)); }
  Status OnEnd() override { return Note(checker_.OnEnd()); }
  const Status& refusal() const { return refusal_; }

 private:
  Status Note(Status status) {
    if (!status.ok()) refusal_ = status;
    return status;
  }
  TraceChecker checker_{nullptr};
  Status refusal_ = Status::Ok();
};

[[noreturn]] void Finding(const std::string& what) {
  std::fprintf(stderr, "program_fuzz: %s\n", what.c_str());
  std::abort();
}

}  // namespace
}  // namespace bucketsim

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace bucketsim;
  Result<FsdpModel> model = ParseProgram("fuzz.json", fuzz::AsText(data, size));
  if (!model.ok()) return 0;

  std::ostringstream written;
  WriteProgram(*model, written);
  Result<FsdpModel> again = ParseProgram("rewritten.json", written.str());
  if (!again.ok()) Finding("the writer's output does not read back: " + again.status().message());
  std::ostringstream rewritten;
  WriteProgram(*again, rewritten);
  if (rewritten.str() != written.str()) Finding("the program changed when written a second time");

  GenOptions options;
  options.world_size = 2;
  options.iterations = 2;  // the second iteration has the optimizer state and zero_grad behind it
  CheckedSink sink;
  const Status emitted = EmitFsdpTrace(*model, options, sink);
  if (!sink.refusal().ok()) {
    Finding("the emitter made an invalid trace of a valid program: " + sink.refusal().message());
  }
  (void)emitted;
  return 0;
}
