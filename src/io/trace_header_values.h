// The trace header as the reader builds it (src/io/trace_reader.cc): each top-level key's value
// as a small DOM built from the SAX callbacks (JsonBuilder), converted into the TraceHeader once
// "events" starts (ConvertHeaderValues). Runs once per file.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/status.h"
#include "core/trace_header.h"
#include "io/trace_values.h"

namespace bucketsim::trace_values {

using HeaderValues = std::vector<std::pair<std::string, Json>>;

// The value of `key`, or null.
const Json* FindHeaderValue(const HeaderValues& values, std::string_view key);

// Fills and finalizes `header`. Messages start with "header: ".
Status ConvertHeaderValues(const HeaderValues& values, TraceHeader& header);

// A JSON file of another kind handed over as a trace (a model program, a report, a budget file,
// a time profile) has no "events" and reaches the end as a header with keys a trace does not
// have: named as that kind, as the other readers name a trace they are handed, and a model
// program with the command that makes its trace. Ok when the keys are no other kind's.
Status RejectOtherFileKind(std::string_view file, const HeaderValues& values);

// Builds one header value as a DOM from SAX callbacks, with an explicit stack (no recursion).
class JsonBuilder {
 public:
  // A header is at most four levels deep (fsdp > params > param > value); anything much deeper
  // is not a trace, and a bounded depth keeps the DOM's recursive destructor safe.
  static constexpr std::size_t kMaxDepth = 16;

  void Begin() {
    root_ = Json();
    stack_.clear();
  }
  bool done() const { return stack_.empty(); }
  Json& root() { return root_; }

  Status Add(Json value) {
    Json* slot = Slot();
    if (slot == nullptr) return DuplicateKey();
    *slot = std::move(value);
    return Status::Ok();
  }
  Status Start(Json container) {
    if (stack_.size() >= kMaxDepth) return InvalidTrace("a value is nested too deeply");
    Json* slot = Slot();
    if (slot == nullptr) return DuplicateKey();
    *slot = std::move(container);
    stack_.push_back(slot);
    return Status::Ok();
  }
  void Key(const std::string& key) { key_ = key; }
  void End() { stack_.pop_back(); }

 private:
  // Where the next value goes; null when it would overwrite a key already set.
  Json* Slot() {
    if (stack_.empty()) return &root_;
    Json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(Json());
      return &top.back();
    }
    if (top.contains(key_)) return nullptr;
    return &top[key_];
  }
  Status DuplicateKey() const { return InvalidTrace(fmt::format("key '{}' appears twice", key_)); }

  Json root_;
  std::vector<Json*> stack_;
  std::string key_;
};

}  // namespace bucketsim::trace_values
