// A small JSON file read whole (a budget file, a baseline report), with typed access whose
// errors name the file and the JSON pointer (RFC 6901) of the field that is wrong:
// "budget.json: /policies/backward-only/max_peak_allocated: expected ...". Traces, which can be
// gigabytes, are streamed by io/trace_reader instead. Keys keep their file order.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace bucketsim {

// Which of bucketsim's JSON files `root` is, by the keys that tell them apart: "trace" (events),
// "report" (context and trace, a policies array, or the sweeps array of several traces), "time
// profile" (collectives, copy_GBps), "budget file" (a policies object without a context), "model
// program" (its format key); "" for none of them. A reader that is handed another kind names it
// ("this is a trace, not a time profile") instead of listing the fields it misses.
template <class JsonValue>
std::string_view JsonFileKind(const JsonValue& root) {
  if (!root.is_object()) return "";
  if (root.contains("format") && root["format"] == "bucketsim-program") return "model program";
  if (root.contains("events")) return "trace";
  const bool policies_array = root.contains("policies") && root["policies"].is_array();
  const bool policies_object = root.contains("policies") && root["policies"].is_object();
  const bool sweeps_array = root.contains("sweeps") && root["sweeps"].is_array();
  if ((root.contains("context") && root.contains("trace")) || policies_array || sweeps_array) {
    return "report";
  }
  if (root.contains("collectives") || root.contains("copy_GBps")) return "time profile";
  if (policies_object && !root.contains("context")) return "budget file";
  return "";
}
// "PATH: this is a KIND, not a WANTED (...)" when `root` is recognisably another kind of file.
template <class JsonValue>
Status CheckJsonFileKind(const std::string& path, std::string_view wanted, const JsonValue& root);
// "PATH: is a directory, not a KIND" (an IoError) for a directory; Ok for anything else.
Status RejectDirectory(const std::string& path, std::string_view kind);

class JsonDocument {
 public:
  using Json = nlohmann::ordered_json;
  using Pointer = Json::json_pointer;

  // An unreadable file is an IoError; a file that is not JSON an InvalidArgument naming the
  // line and column. `kind` ("budget file") is how messages name the file's role.
  static Result<JsonDocument> Read(const std::string& path, std::string_view kind);
  // The same, parsed from the file as it is read, leaving out the values of the keys named in
  // `skip` wherever they appear: a large file whose bulk a reader does not need (a report's full
  // collective log) costs the memory of the rest only.
  static Result<JsonDocument> Read(const std::string& path, std::string_view kind,
                                   const std::vector<std::string>& skip);
  // The same, from text (`path` names it in messages).
  static Result<JsonDocument> Parse(const std::string& path, std::string_view kind,
                                    std::string_view text);

  const std::string& path() const { return path_; }
  const Json& root() const { return root_; }

  // "FILE: POINTER: problem" (InvalidArgument); the top level is named "(top level)".
  Status Error(const Pointer& at, std::string_view problem) const;

  // The value at `at`, which must exist and be of the type asked for.
  Result<const Json*> Object(const Pointer& at) const;
  Result<const Json*> Array(const Pointer& at) const;
  Result<std::string> String(const Pointer& at) const;
  Result<std::uint64_t> Unsigned(const Pointer& at) const;  // an integer >= 0
  Result<double> Number(const Pointer& at) const;           // any finite JSON number
  Result<bool> Bool(const Pointer& at) const;               // true or false
  bool Has(const Pointer& at) const { return root_.contains(at); }

  // `schema_version` at the top level must be an integer in [min, max]; a clear message
  // otherwise (a reader accepts the versions it knows and rejects the rest).
  Result<int> SchemaVersion(int min, int max) const;

 private:
  JsonDocument(std::string path, std::string kind, Json root)
      : path_(std::move(path)), kind_(std::move(kind)), root_(std::move(root)) {}

  Result<const Json*> Typed(const Pointer& at, bool (Json::*is)() const noexcept,
                            std::string_view expected) const;

  std::string path_;
  std::string kind_;
  Json root_;
};

// The JSON text of a value for messages, shortened to `max_chars`.
std::string JsonExcerpt(const JsonDocument::Json& value, std::size_t max_chars = 40);

Status WrongJsonFileKind(const std::string& path, std::string_view wanted, std::string_view is);

template <class JsonValue>
Status CheckJsonFileKind(const std::string& path, std::string_view wanted, const JsonValue& root) {
  std::string_view is = JsonFileKind(root);
  if (is.empty() || is == wanted) return Status::Ok();
  return WrongJsonFileKind(path, wanted, is);
}

}  // namespace bucketsim
