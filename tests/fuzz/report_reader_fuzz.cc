// The report reader, every way it reads (a page's figures, a baseline's, and the reports of a
// file of several traces' sweeps).
#include "fuzz_input.h"
#include "report/report_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(bucketsim::fuzz::AsText(data, size));
  (void)bucketsim::ParseReport(text, "fuzz.json", bucketsim::ReportContent::kPage);
  (void)bucketsim::ParseReport(text, "fuzz.json", bucketsim::ReportContent::kFigures);
  (void)bucketsim::ParseReportDocuments(text, "fuzz.json");
  return 0;
}
