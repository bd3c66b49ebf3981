#include "io/json_document.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace bucketsim {
namespace {

// "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error ..." without
// the bracketed id.
std::string_view WithoutExceptionId(std::string_view text) {
  if (std::size_t p = text.find("] "); p != std::string_view::npos) text.remove_prefix(p + 2);
  return text;
}

// Where each kind of file comes from, for the message that names the wrong one.
std::string_view MadeBy(std::string_view kind) {
  if (kind == "trace") return "bucketsim gen, or a snapshot import";
  if (kind == "report") return "compare, check or sweep --json";
  if (kind == "time profile") return "traces/profiles/, or bucketsim calibrate";
  if (kind == "budget file") return "reports/budget-example.json";
  if (kind == "model program")
    return "bucketsim gen PRESET --emit-program, or tools/record_program.py";
  return "";
}

}  // namespace

Status WrongJsonFileKind(const std::string& path, std::string_view wanted, std::string_view is) {
  return InvalidArgument(fmt::format("{}: this is a {}, not a {} (a {} comes from {})", path, is,
                                     wanted, wanted, MadeBy(wanted)));
}

Status RejectDirectory(const std::string& path, std::string_view kind) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    return IoError(fmt::format("{}: is a directory, not a {}", path, kind));
  }
  return Status::Ok();
}

Result<JsonDocument> JsonDocument::Read(const std::string& path, std::string_view kind) {
  BUCKETSIM_RETURN_IF_ERROR(RejectDirectory(path, kind));
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return IoError(fmt::format("cannot read {} '{}': {}", kind, path, std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return IoError(fmt::format("cannot read {} '{}'", kind, path));
  return Parse(path, kind, text.str());
}

Result<JsonDocument> JsonDocument::Read(const std::string& path, std::string_view kind,
                                        const std::vector<std::string>& skip) {
  BUCKETSIM_RETURN_IF_ERROR(RejectDirectory(path, kind));
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return IoError(fmt::format("cannot read {} '{}': {}", kind, path, std::strerror(errno)));
  }
  auto keep = [&skip](int /*depth*/, Json::parse_event_t event, Json& parsed) {
    if (event != Json::parse_event_t::key) return true;
    const std::string& key = parsed.get_ref<const std::string&>();
    return std::find(skip.begin(), skip.end(), key) == skip.end();
  };
  try {
    Json root = Json::parse(in, keep);
    if (in.bad()) return IoError(fmt::format("cannot read {} '{}'", kind, path));
    BUCKETSIM_RETURN_IF_ERROR(CheckJsonFileKind(path, kind, root));
    return JsonDocument(path, std::string(kind), std::move(root));
  } catch (const Json::exception& e) {
    return InvalidArgument(
        fmt::format("{}: not a valid {}: {}", path, kind, WithoutExceptionId(e.what())));
  }
}

Result<JsonDocument> JsonDocument::Parse(const std::string& path, std::string_view kind,
                                         std::string_view text) {
  try {
    Json root = Json::parse(text);
    BUCKETSIM_RETURN_IF_ERROR(CheckJsonFileKind(path, kind, root));
    return JsonDocument(path, std::string(kind), std::move(root));
  } catch (const Json::exception& e) {
    return InvalidArgument(
        fmt::format("{}: not a valid {}: {}", path, kind, WithoutExceptionId(e.what())));
  }
}

Status JsonDocument::Error(const Pointer& at, std::string_view problem) const {
  std::string where = at.empty() ? "(top level)" : at.to_string();
  return InvalidArgument(fmt::format("{}: {}: {}", path_, where, problem));
}

Result<const JsonDocument::Json*> JsonDocument::Typed(const Pointer& at,
                                                      bool (Json::*is)() const noexcept,
                                                      std::string_view expected) const {
  if (!root_.contains(at)) {
    return Error(at, fmt::format("missing (the {} needs {} here)", kind_, expected));
  }
  const Json& value = root_.at(at);
  if (!(value.*is)()) {
    return Error(at, fmt::format("expected {}, got {}", expected, JsonExcerpt(value)));
  }
  return &value;
}

Result<const JsonDocument::Json*> JsonDocument::Object(const Pointer& at) const {
  return Typed(at, &Json::is_object, "an object");
}

Result<const JsonDocument::Json*> JsonDocument::Array(const Pointer& at) const {
  return Typed(at, &Json::is_array, "an array");
}

Result<std::string> JsonDocument::String(const Pointer& at) const {
  Result<const Json*> value = Typed(at, &Json::is_string, "a string");
  if (!value.ok()) return value.status();
  return (*value)->get<std::string>();
}

Result<std::uint64_t> JsonDocument::Unsigned(const Pointer& at) const {
  Result<const Json*> value = Typed(at, &Json::is_number_unsigned, "an integer >= 0");
  if (!value.ok()) return value.status();
  return (*value)->get<std::uint64_t>();
}

Result<double> JsonDocument::Number(const Pointer& at) const {
  Result<const Json*> value = Typed(at, &Json::is_number, "a number");
  if (!value.ok()) return value.status();
  double number = (*value)->get<double>();
  if (!std::isfinite(number)) return Error(at, "expected a finite number");
  return number;
}

Result<bool> JsonDocument::Bool(const Pointer& at) const {
  Result<const Json*> value = Typed(at, &Json::is_boolean, "true or false");
  if (!value.ok()) return value.status();
  return (*value)->get<bool>();
}

Result<int> JsonDocument::SchemaVersion(int min, int max) const {
  const Pointer at("/schema_version");
  if (!root_.is_object()) {
    return Error(Pointer(),
                 fmt::format("expected an object (a {}), got {}", kind_, JsonExcerpt(root_)));
  }
  Result<std::uint64_t> version = Unsigned(at);
  if (!version.ok()) return version.status();
  if (*version < static_cast<std::uint64_t>(min) || *version > static_cast<std::uint64_t>(max)) {
    std::string known = min == max ? fmt::format("{}", min) : fmt::format("{} to {}", min, max);
    return Error(at, fmt::format("this bucketsim reads {} schema_version {}, not {}", kind_, known,
                                 *version));
  }
  return static_cast<int>(*version);
}

std::string JsonExcerpt(const JsonDocument::Json& value, std::size_t max_chars) {
  std::string text = value.dump();
  if (text.size() > max_chars) text = text.substr(0, max_chars) + "...";
  return text;
}

}  // namespace bucketsim
