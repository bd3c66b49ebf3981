#include "report/json_writer.h"

#include <cmath>

#include <fmt/format.h>

#include "core/status.h"

namespace bucketsim {
namespace {

// '"', '\\' and the control characters: what JSON strings cannot hold as they are.
constexpr std::string_view kNeedsEscape(
    "\"\\\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"
    "\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f",
    34);

}  // namespace

void JsonWriter::Flush() {
  sink_(out_);
  out_.clear();
}

void JsonWriter::NewLine() {
  FlushIfFull();
  out_ += '\n';
  out_.append(2 * levels_.size(), ' ');
}

void JsonWriter::BeforeValue() {
  if (key_pending_) {
    key_pending_ = false;
    return;
  }
  if (levels_.empty()) {
    BUCKETSIM_CHECK(!started_);  // one top-level value
    started_ = true;
    return;
  }
  Level& level = levels_.back();
  BUCKETSIM_CHECK(!level.object);  // inside an object a Key comes first
  if (!level.empty) out_ += ',';
  level.empty = false;
  NewLine();
}

void JsonWriter::Key(std::string_view key) {
  BUCKETSIM_CHECK(!levels_.empty() && levels_.back().object && !key_pending_);
  Level& level = levels_.back();
  if (!level.empty) out_ += ',';
  level.empty = false;
  NewLine();
  WriteEscaped(key);
  out_ += ": ";
  key_pending_ = true;
}

void JsonWriter::Open(char bracket, bool object) {
  BeforeValue();
  out_ += bracket;
  levels_.push_back({object});
}

void JsonWriter::Close(char bracket) {
  BUCKETSIM_CHECK(!levels_.empty() && !key_pending_);
  bool empty = levels_.back().empty;
  BUCKETSIM_CHECK(levels_.back().object == (bracket == '}'));
  levels_.pop_back();
  if (!empty) NewLine();
  out_ += bracket;
}

void JsonWriter::String(std::string_view value) {
  BeforeValue();
  WriteEscaped(value);
}

void JsonWriter::WriteEscaped(std::string_view value) {
  out_ += '"';
  if (value.find_first_of(kNeedsEscape) == std::string_view::npos) {
    out_.append(value);  // the common case: nothing to escape
    out_ += '"';
    return;
  }
  for (char c : value) {
    switch (c) {
      case '"':
        out_ += "\\\"";
        break;
      case '\\':
        out_ += "\\\\";
        break;
      case '\b':
        out_ += "\\b";
        break;
      case '\f':
        out_ += "\\f";
        break;
      case '\n':
        out_ += "\\n";
        break;
      case '\r':
        out_ += "\\r";
        break;
      case '\t':
        out_ += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out_ += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
        } else {
          out_ += c;
        }
    }
  }
  out_ += '"';
}

void JsonWriter::Uint(std::uint64_t value) {
  BeforeValue();
  fmt::format_int digits(value);
  out_.append(digits.data(), digits.size());
}

void JsonWriter::Int(std::int64_t value) {
  BeforeValue();
  fmt::format_int digits(value);
  out_.append(digits.data(), digits.size());
}

void JsonWriter::Double(double value) {
  BUCKETSIM_CHECK(std::isfinite(value));  // JSON has no NaN or infinity
  BeforeValue();
  std::size_t start = out_.size();
  fmt::format_to(std::back_inserter(out_), "{}", value);
  if (out_.find_first_of(".e", start) == std::string::npos) out_ += ".0";
}

std::string JsonWriter::Finish() {
  BUCKETSIM_CHECK(levels_.empty() && started_);
  out_ += '\n';
  if (!sink_) return std::move(out_);
  Flush();
  return {};
}

void JsonWriter::Raw(std::string_view json, std::size_t written_at_depth) {
  BUCKETSIM_CHECK(levels_.size() >= written_at_depth);
  BeforeValue();
  const std::size_t indent = 2 * (levels_.size() - written_at_depth);
  // JSON text holds a newline only between values (a string escapes it): each one starts a line.
  std::size_t start = 0;
  for (std::size_t end = json.find('\n'); indent > 0 && end != std::string_view::npos;
       end = json.find('\n', start)) {
    out_.append(json.substr(start, end + 1 - start));
    out_.append(indent, ' ');
    start = end + 1;
  }
  out_.append(json.substr(start));
  FlushIfFull();
}

void JsonWriter::Null() {
  BeforeValue();
  out_ += "null";
}

void JsonWriter::Bool(bool value) {
  BeforeValue();
  out_ += value ? "true" : "false";
}

}  // namespace bucketsim
