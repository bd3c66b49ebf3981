#include "report/junit_writer.h"

#include "report/xml_escape.h"

#include <fmt/format.h>

#include "report/check_report.h"

namespace bucketsim {
namespace {

std::string TestcaseName(const CheckOutcome& outcome) {
  switch (outcome.kind) {
    case CheckKind::kFitsDevice:
      return "fits the device memory";
    case CheckKind::kBudget:
      return FigureName(outcome.figure, outcome.mark) + " budget";
    case CheckKind::kBaseline:
      if (outcome.verdict == Verdict::kSkipped) return "baseline";
      return FigureName(outcome.figure, outcome.mark) + " vs baseline";
  }
  return "?";
}

const char* FailureType(const CheckOutcome& outcome) {
  switch (outcome.kind) {
    case CheckKind::kFitsDevice:
      return "OutOfMemory";
    case CheckKind::kBudget:
      return "BudgetExceeded";
    case CheckKind::kBaseline:
      return "BaselineGrowth";
  }
  return "?";
}

void AppendTestcase(std::string& xml, const CheckOutcome& outcome) {
  std::string line = XmlEscape(CheckLine(outcome));
  xml +=
      fmt::format(R"(    <testcase classname="{}" name="{}" time="0")",
                  XmlEscape("bucketsim.check." + outcome.policy), XmlEscape(TestcaseName(outcome)));
  switch (outcome.verdict) {
    case Verdict::kPass:
      xml += "/>\n";
      return;
    case Verdict::kFail:
      xml += fmt::format(">\n      <failure message=\"{}\" type=\"{}\">{}</failure>\n", line,
                         FailureType(outcome), line);
      break;
    case Verdict::kSkipped:
      xml += fmt::format(">\n      <skipped message=\"{}\"/>\n", line);
      break;
  }
  xml += "    </testcase>\n";
}

}  // namespace

std::string JUnitXmlText(const JUnitSuite& suite) {
  CheckTally tally = Tally(suite.outcomes);
  int errors = suite.error ? 1 : 0;
  std::string xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  xml += fmt::format(
      "<testsuites name=\"bucketsim check\" tests=\"{}\" failures=\"{}\" errors=\"{}\" "
      "skipped=\"{}\" time=\"{:.3f}\">\n",
      tally.total() + errors, tally.failed, errors, tally.skipped, suite.time_s);
  xml += fmt::format(
      "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" "
      "time=\"{:.3f}\" timestamp=\"{}\" hostname=\"{}\">\n",
      XmlEscape(suite.name), tally.total() + errors, tally.failed, errors, tally.skipped,
      suite.time_s, XmlEscape(suite.timestamp), XmlEscape(suite.hostname));
  xml += "    <properties>\n";
  for (const auto& [name, value] : suite.properties) {
    xml += fmt::format("      <property name=\"{}\" value=\"{}\"/>\n", XmlEscape(name),
                       XmlEscape(value));
  }
  xml += "    </properties>\n";
  for (const CheckOutcome& outcome : suite.outcomes) AppendTestcase(xml, outcome);
  if (suite.error) {
    std::string message = XmlEscape(suite.error->message());
    xml += fmt::format(
        "    <testcase classname=\"bucketsim.check\" name=\"bucketsim check\" "
        "time=\"0\">\n      <error message=\"{}\" type=\"{}\">{}</error>\n    </testcase>\n",
        message, StatusCodeName(suite.error->code()), message);
  }
  std::string out;
  for (const CheckOutcome& outcome : suite.outcomes) out += CheckLine(outcome) + "\n";
  if (!suite.outcomes.empty()) out += VerdictLine(suite.outcomes) + "\n";
  xml += fmt::format("    <system-out>{}</system-out>\n", XmlEscape(out));
  xml += "  </testsuite>\n</testsuites>\n";
  return xml;
}

}  // namespace bucketsim
