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

}  // namespace
}  // namespace bucketsim
