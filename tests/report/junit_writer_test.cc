// JUnit XML: counts that add up, one testcase per check, failures carrying the console line,
// and text escaped so that any policy or mark name stays well-formed XML. (The binary's JUnit
// output is validated against tests/cli/junit.xsd by the Check.JUnit.* ctest tests.)
#include "report/junit_writer.h"
#include "report/xml_escape.h"

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

TEST(XmlEscape, EntitiesCharacterReferencesAndControls) {
  EXPECT_EQ(XmlEscape(R"(a<b>&"c"'d')"), "a&lt;b&gt;&amp;&quot;c&quot;&apos;d&apos;");
  EXPECT_EQ(XmlEscape("x\ty\nz\r"), "x&#9;y&#10;z&#13;");
  EXPECT_EQ(XmlEscape(std::string("a\x01"
                                  "b\x1f",
                                  4)),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD");
  EXPECT_EQ(XmlEscape("µs ü"), "µs ü");  // UTF-8 passes through
}

CheckOutcome Budget(std::string mark, Verdict verdict) {
  CheckOutcome outcome;
  outcome.policy = "lifetime=always,key=members,cap=50";
  outcome.figure = Figure::kAtMark;
  outcome.mark = std::move(mark);
  outcome.value.bytes = 2048;
  outcome.limit.bytes = 1024;
  outcome.verdict = verdict;
  return outcome;
}

TEST(JUnitXml, OneTestcasePerCheckWithItsFailure) {
  JUnitSuite suite;
  suite.name = "bucketsim check tiny-ws2.json";
  suite.hostname = "ci";
  suite.timestamp = "2026-11-30T12:00:00";
  suite.time_s = 1.25;
  suite.properties = {{"trace", "traces/tiny-ws2.json"}};
  suite.outcomes = {Budget("<after & \"fwd\">", Verdict::kFail), Budget("ok", Verdict::kPass)};
  suite.outcomes[1].value.bytes = 1024;
  CheckOutcome skipped;
  skipped.policy = "unbucketed";
  skipped.kind = CheckKind::kBaseline;
  skipped.verdict = Verdict::kSkipped;
  skipped.skipped_because = "no baseline";
  suite.outcomes.push_back(skipped);
  EXPECT_EQ(
      JUnitXmlText(suite),
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<testsuites name=\"bucketsim check\" tests=\"3\" failures=\"1\" errors=\"0\" "
      "skipped=\"1\" time=\"1.250\">\n"
      "  <testsuite name=\"bucketsim check tiny-ws2.json\" tests=\"3\" failures=\"1\" "
      "errors=\"0\" skipped=\"1\" time=\"1.250\" timestamp=\"2026-11-30T12:00:00\" "
      "hostname=\"ci\">\n"
      "    <properties>\n"
      "      <property name=\"trace\" value=\"traces/tiny-ws2.json\"/>\n"
      "    </properties>\n"
      "    <testcase classname=\"bucketsim.check.lifetime=always,key=members,cap=50\" "
      "name=\"allocated at mark &apos;&lt;after &amp; &quot;fwd&quot;&gt;&apos; budget\" "
      "time=\"0\">\n"
      "      <failure message=\"FAIL lifetime=always,key=members,cap=50: allocated at mark "
      "&apos;&lt;after &amp; &quot;fwd&quot;&gt;&apos; 2.00 KiB (2048 B) exceeds budget 1.00 KiB "
      "(1024 B)\" type=\"BudgetExceeded\">FAIL lifetime=always,key=members,cap=50: allocated at "
      "mark &apos;&lt;after &amp; &quot;fwd&quot;&gt;&apos; 2.00 KiB (2048 B) exceeds budget "
      "1.00 KiB (1024 B)</failure>\n"
      "    </testcase>\n"
      "    <testcase classname=\"bucketsim.check.lifetime=always,key=members,cap=50\" "
      "name=\"allocated at mark &apos;ok&apos; budget\" time=\"0\"/>\n"
      "    <testcase classname=\"bucketsim.check.unbucketed\" name=\"baseline\" time=\"0\">\n"
      "      <skipped message=\"SKIP unbucketed: baseline comparison skipped: no baseline\"/>\n"
      "    </testcase>\n"
      "    <system-out>FAIL lifetime=always,key=members,cap=50: allocated at mark &apos;&lt;after "
      "&amp; &quot;fwd&quot;&gt;&apos; 2.00 KiB (2048 B) exceeds budget 1.00 KiB (1024 B)&#10;"
      "PASS lifetime=always,key=members,cap=50: allocated at mark &apos;ok&apos; 1.00 KiB (1024 "
      "B) within budget 1.00 KiB (1024 B)&#10;"
      "SKIP unbucketed: baseline comparison skipped: no baseline&#10;"
      "verdict: FAIL (3 checks: 1 passed, 1 failed, 1 skipped)&#10;</system-out>\n"
      "  </testsuite>\n"
      "</testsuites>\n");
}

TEST(JUnitXml, AnErrorIsOneErroredTestcase) {
  JUnitSuite suite;
  suite.name = "bucketsim check x.json";
  suite.error = InvalidArgument("b.json: /policies: names no policy");
  std::string xml = JUnitXmlText(suite);
  EXPECT_NE(xml.find("<testsuites name=\"bucketsim check\" tests=\"1\" failures=\"0\" "
                     "errors=\"1\" skipped=\"0\""),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("<testcase classname=\"bucketsim.check\" name=\"bucketsim check\" "
                     "time=\"0\">\n      <error message=\"b.json: /policies: names no policy\" "
                     "type=\"InvalidArgument\">"),
            std::string::npos)
      << xml;
}

}  // namespace
}  // namespace bucketsim
