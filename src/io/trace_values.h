// The trace reader's values (src/io/trace_reader.cc): one JSON scalar as the reader sees it, and
// the trace's rules for converting it to each field's type, with the messages both the header and
// the events give. Inline: the events' conversions run several times per event.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/status.h"

namespace bucketsim::trace_values {

using Json = nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Scalar values and the trace's rules for them.

enum class JsonType : std::uint8_t { kNull, kBool, kInt, kUint, kFloat, kString, kObject, kArray };

// One JSON value as the reader sees it: the SAX callbacks store event fields here, and header
// values are converted to it so that both follow the same rules and say the same things.
struct Scalar {
  JsonType type = JsonType::kNull;
  bool boolean = false;
  std::int64_t integer = 0;
  std::uint64_t unsigned_integer = 0;
  double number = 0;
  std::string text;
};

inline Scalar ScalarOf(const Json& j) {
  Scalar s;
  switch (j.type()) {
    case Json::value_t::boolean:
      s.type = JsonType::kBool;
      s.boolean = j.get<bool>();
      break;
    case Json::value_t::number_integer:
      s.type = JsonType::kInt;
      s.integer = j.get<std::int64_t>();
      break;
    case Json::value_t::number_unsigned:
      s.type = JsonType::kUint;
      s.unsigned_integer = j.get<std::uint64_t>();
      break;
    case Json::value_t::number_float:
      s.type = JsonType::kFloat;
      s.number = j.get<double>();
      break;
    case Json::value_t::string:
      s.type = JsonType::kString;
      s.text = j.get<std::string>();
      break;
    case Json::value_t::object:
      s.type = JsonType::kObject;
      break;
    case Json::value_t::array:
      s.type = JsonType::kArray;
      break;
    default:
      s.type = JsonType::kNull;
      break;
  }
  return s;
}

inline std::string_view TypeName(JsonType type) {
  switch (type) {
    case JsonType::kNull:
      return "null";
    case JsonType::kBool:
      return "a boolean";
    case JsonType::kInt:
    case JsonType::kUint:
    case JsonType::kFloat:
      return "a number";
    case JsonType::kString:
      return "a string";
    case JsonType::kObject:
      return "an object";
    case JsonType::kArray:
      return "an array";
  }
  return "a value";
}

// Shortest round-trip text, always recognisable as a float ("8.0", not "8").
inline std::string FormatFloat(double d) {
  std::string s = fmt::format("{}", d);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

inline Status WrongType(const Scalar& v, std::string_view name, std::string_view expected) {
  return InvalidTrace(fmt::format("'{}' must be {}, got {}", name, expected, TypeName(v.type)));
}

inline Status WithPrefix(std::string_view prefix, const Status& status) {
  return {status.code(), fmt::format("{}{}", prefix, status.message())};
}

// A float where an integer is required. nlohmann delivers integers beyond 64 bits as floats.
inline Status FloatIsNotUnsigned(double d, std::string_view name) {
  if (d < 0)
    return InvalidTrace(fmt::format("'{}' must not be negative (got {})", name, FormatFloat(d)));
  if (d == std::floor(d) && d >= 0x1p64) {
    return InvalidTrace(fmt::format("'{}' overflows 64 bits (got {})", name, FormatFloat(d)));
  }
  return InvalidTrace(fmt::format("'{}' must be an integer (got {})", name, FormatFloat(d)));
}

inline Status ToUnsigned(const Scalar& v, std::string_view name, std::uint64_t& out) {
  switch (v.type) {
    case JsonType::kUint:
      out = v.unsigned_integer;
      return Status::Ok();
    case JsonType::kInt:
      if (v.integer < 0) {
        return InvalidTrace(fmt::format("'{}' must not be negative (got {})", name, v.integer));
      }
      out = static_cast<std::uint64_t>(v.integer);
      return Status::Ok();
    case JsonType::kFloat:
      return FloatIsNotUnsigned(v.number, name);
    default:
      return WrongType(v, name, "an integer");
  }
}

// Signed header integers (world_size, rank, group ranks): their ranges are Finalize's to check,
// here they only have to fit an int.
inline Status ToInt(const Scalar& v, std::string_view name, int& out) {
  constexpr std::int64_t kMin = std::numeric_limits<int>::min();
  constexpr std::int64_t kMax = std::numeric_limits<int>::max();
  switch (v.type) {
    case JsonType::kUint:
      if (v.unsigned_integer > static_cast<std::uint64_t>(kMax)) break;
      out = static_cast<int>(v.unsigned_integer);
      return Status::Ok();
    case JsonType::kInt:
      if (v.integer < kMin || v.integer > kMax) break;
      out = static_cast<int>(v.integer);
      return Status::Ok();
    case JsonType::kFloat:
      return InvalidTrace(
          fmt::format("'{}' must be an integer (got {})", name, FormatFloat(v.number)));
    default:
      return WrongType(v, name, "an integer");
  }
  return InvalidTrace(fmt::format("'{}' is out of range (got {})", name,
                                  v.type == JsonType::kUint ? fmt::format("{}", v.unsigned_integer)
                                                            : fmt::format("{}", v.integer)));
}

inline Status ToNumber(const Scalar& v, std::string_view name, double& out) {
  switch (v.type) {
    case JsonType::kUint:
      out = static_cast<double>(v.unsigned_integer);
      return Status::Ok();
    case JsonType::kInt:
      out = static_cast<double>(v.integer);
      return Status::Ok();
    case JsonType::kFloat:
      out = v.number;
      return Status::Ok();
    default:
      return WrongType(v, name, "a number");
  }
}

inline Status ToText(const Scalar& v, std::string_view name, std::string_view& out) {
  if (v.type != JsonType::kString) return WrongType(v, name, "a string");
  out = v.text;
  return Status::Ok();
}

inline Status ToBool(const Scalar& v, std::string_view name, bool& out) {
  if (v.type != JsonType::kBool) return WrongType(v, name, "true or false");
  out = v.boolean;
  return Status::Ok();
}

inline Status ToDType(const Scalar& v, std::string_view name, DType& out) {
  std::string_view text;
  BUCKETSIM_RETURN_IF_ERROR(ToText(v, name, text));
  std::optional<DType> dtype = ParseDType(text);
  if (!dtype) {
    return InvalidTrace(fmt::format(
        "{} '{}' is not a known dtype (expected fp64, fp32, fp16, bf16, fp8_e4m3 or fp8_e5m2)",
        name, text));
  }
  out = *dtype;
  return Status::Ok();
}

}  // namespace bucketsim::trace_values
