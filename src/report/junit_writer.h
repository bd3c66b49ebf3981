// JUnit XML for a CI gate's verdicts (`bucketsim check --junit FILE`), the format Jenkins,
// GitLab CI and GitHub test-report actions read: one <testsuite> per check run, one <testcase>
// per (policy, check) with classname "bucketsim.check.<policy>", a <failure> (message: the
// console line) for a broken budget or a growth beyond the tolerance, <skipped> for a
// comparison that could not be made, and one <error> testcase when the check could not be
// decided. The structure follows the JUnit schema Jenkins validates against (xunit-plugin's
// junit-10.xsd, after Ant's XMLJUnitResultFormatter); tests/cli/junit.xsd is our rendering of
// it and the tests validate against it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "engine/budget_check.h"

namespace bucketsim {

struct JUnitSuite {
  std::string name;       // "bucketsim check tiny-ws2.json"
  std::string hostname;   // may be empty
  std::string timestamp;  // ISO 8601, UTC, without zone designator: "2026-11-30T12:00:00"
  double time_s = 0;      // the whole check's wall time
  std::vector<std::pair<std::string, std::string>> properties;
  std::vector<CheckOutcome> outcomes;
  std::optional<Status> error;  // the check could not be decided
};

std::string JUnitXmlText(const JUnitSuite& suite);

}  // namespace bucketsim
