#include "report/json_writer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace bucketsim {
namespace {

TEST(JsonWriter, WritesNlohmannsIndentedLayout) {
  JsonWriter w;
  w.BeginObject();
  w.Field("n", 3u);
  w.Field("neg", -2);
  w.Field("x", 700.0);
  w.Field("y", 0.25);
  w.Field("ok", true);
  w.Key("empty_array");
  w.BeginArray();
  w.EndArray();
  w.Key("empty_object");
  w.BeginObject();
  w.EndObject();
  w.Key("list");
  w.BeginArray();
  w.Uint(1);
  w.BeginObject();
  w.Field("s", "a\"b\\c\n\x01");
  w.EndObject();
  w.EndArray();
  w.EndObject();
  std::string text = w.Finish();
  // The same document through nlohmann's dump(2): byte for byte.
  nlohmann::ordered_json expected = {{"n", 3},
                                     {"neg", -2},
                                     {"x", 700.0},
                                     {"y", 0.25},
                                     {"ok", true},
                                     {"empty_array", nlohmann::ordered_json::array()},
                                     {"empty_object", nlohmann::ordered_json::object()},
                                     {"list", {1, {{"s", "a\"b\\c\n\x01"}}}}};
  EXPECT_EQ(text, expected.dump(2) + "\n");
}

TEST(JsonWriter, DoublesReadBackAsTheSameFloat) {
  for (double value : {0.0, 1.0, 0.1, 1e20, 1e-7, 123456.789, 36180.123456789}) {
    JsonWriter w;
    w.BeginArray();
    w.Double(value);
    w.EndArray();
    nlohmann::json parsed = nlohmann::json::parse(w.Finish());
    ASSERT_TRUE(parsed[0].is_number_float()) << value;
    EXPECT_EQ(parsed[0].get<double>(), value);
  }
}

// A value written at one depth and placed at another (a policy's entry of a sweep gathered from
// mpirun's ranks, placed in the report of one of several traces) reads as nlohmann's layout at
// the new depth, newlines inside strings (escaped) untouched.
TEST(JsonWriter, RawTextIsIndentedForItsNewDepth) {
  nlohmann::ordered_json entry = {{"policy", "a\nb"}, {"list", {1, 2}}};
  const std::string entry_text = entry.dump(2);
  // dump(2) wrote it at depth 0; here it stands at depth 4.
  JsonWriter w;
  w.BeginObject();
  w.Key("sweeps");
  w.BeginArray();
  w.BeginObject();
  w.Key("policies");
  w.BeginArray();
  w.Raw(entry_text, 0);
  w.Raw(entry_text, 0);
  w.EndArray();
  w.EndObject();
  w.EndArray();
  w.EndObject();
  using Json = nlohmann::ordered_json;
  Json expected = Json::object();
  expected["sweeps"] = Json::array({Json::object({{"policies", Json::array({entry, entry})}})});
  EXPECT_EQ(w.Finish(), expected.dump(2) + "\n");
}

}  // namespace
}  // namespace bucketsim
