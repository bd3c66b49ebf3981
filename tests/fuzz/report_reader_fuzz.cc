// The report reader, both ways it reads (a page's figures and a baseline's).
#include "fuzz_input.h"
#include "io/report_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(bucketsim::fuzz::AsText(data, size));
  (void)bucketsim::ParseReport(text, "fuzz.json", bucketsim::ReportContent::kPage);
  (void)bucketsim::ParseReport(text, "fuzz.json", bucketsim::ReportContent::kFigures);
  return 0;
}
