#include "io/time_profile_io.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "io/json_document.h"

namespace bucketsim {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// A key's value of the expected JSON type, or an error naming the file and the key's path.
class Fields {
 public:
  Fields(const json& object, std::string origin, std::string where)
      : object_(object), origin_(std::move(origin)), where_(std::move(where)) {}

  Status Error(std::string_view key, std::string_view what) const {
    return InvalidArgument(fmt::format("{}: {}{}: {}", origin_, where_, key, what));
  }

  Result<const json*> Get(std::string_view key, json::value_t type, bool required) const {
    auto it = object_.find(std::string(key));
    if (it == object_.end()) {
      if (required) return Error(key, "missing");
      return static_cast<const json*>(nullptr);
    }
    bool ok = it->type() == type || (type == json::value_t::number_float && it->is_number()) ||
              (type == json::value_t::number_integer && it->is_number_integer());
    if (!ok) return Error(key, fmt::format("expected {}", TypeName(type)));
    return &*it;
  }

  Result<std::string> String(std::string_view key, bool required) const {
    Result<const json*> value = Get(key, json::value_t::string, required);
    if (!value.ok()) return value.status();
    return *value ? (*value)->get<std::string>() : std::string();
  }

  Result<double> Number(std::string_view key) const {
    Result<const json*> value = Get(key, json::value_t::number_float, true);
    if (!value.ok()) return value.status();
    return (*value)->get<double>();
  }

 private:
  static std::string_view TypeName(json::value_t type) {
    switch (type) {
      case json::value_t::string:
        return "a string";
      case json::value_t::number_float:
        return "a number";
      case json::value_t::number_integer:
        return "an integer";
      case json::value_t::array:
        return "an array";
      case json::value_t::object:
        return "an object";
      default:
        return "another type";
    }
  }

  const json& object_;
  std::string origin_;
  std::string where_;
};

Status ReadProvenance(const json& context, const std::string& origin, ProfileProvenance& out) {
  Fields fields(context, origin, "context.");
  Result<std::string> kind = fields.String("provenance", true);
  if (!kind.ok()) return kind.status();
  if (*kind != "derived" && *kind != "measured") {
    return fields.Error("provenance", fmt::format("'{}' is neither derived nor measured", *kind));
  }
  out.kind = *kind;
  for (auto [key, target] :
       {std::pair{"description", &out.description}, std::pair{"host", &out.host},
        std::pair{"backend", &out.backend}, std::pair{"tool_version", &out.tool_version}}) {
    Result<std::string> value = fields.String(key, false);
    if (!value.ok()) return value.status();
    *target = *value;
  }
  Result<const json*> ranks = fields.Get("ranks", json::value_t::number_integer, false);
  if (!ranks.ok()) return ranks.status();
  if (*ranks) out.ranks = (*ranks)->get<int>();
  Result<const json*> sources = fields.Get("sources", json::value_t::array, out.kind == "derived");
  if (!sources.ok()) return sources.status();
  if (*sources) {
    for (const json& source : **sources) {
      if (!source.is_string()) return fields.Error("sources", "expected an array of strings");
      out.sources.push_back(source.get<std::string>());
    }
  }
  if (out.kind == "derived" && out.sources.empty()) {
    return fields.Error("sources", "a derived profile must cite its sources");
  }
  return Status::Ok();
}

Status ReadReduceScatter(const json& entries, const std::string& origin, TimeProfile& out) {
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (!entries[i].is_object()) {
      return InvalidArgument(
          fmt::format("{}: collectives.reduce_scatter[{}]: expected an object", origin, i));
    }
    Fields fields(entries[i], origin, fmt::format("collectives.reduce_scatter[{}].", i));
    Result<const json*> size = fields.Get("group_size", json::value_t::number_integer, true);
    if (!size.ok()) return size.status();
    Result<double> alpha = fields.Number("alpha_us");
    if (!alpha.ok()) return alpha.status();
    Result<double> busbw = fields.Number("busbw_GBps");
    if (!busbw.ok()) return busbw.status();
    AlphaBeta entry{(*size)->get<int>(), *alpha, *busbw, {}};
    Result<const json*> measured = fields.Get("measured", json::value_t::array, false);
    if (!measured.ok()) return measured.status();
    for (std::size_t m = 0; *measured && m < (*measured)->size(); ++m) {
      const json& point = (**measured)[m];
      std::string where = fmt::format("collectives.reduce_scatter[{}].measured[{}]", i, m);
      if (!point.is_object()) {
        return InvalidArgument(fmt::format("{}: {}: expected an object", origin, where));
      }
      Fields point_fields(point, origin, where + ".");
      Result<const json*> bytes =
          point_fields.Get("send_bytes", json::value_t::number_integer, true);
      if (!bytes.ok()) return bytes.status();
      if (!(*bytes)->is_number_unsigned()) return point_fields.Error("send_bytes", "must be >= 0");
      Result<double> time = point_fields.Number("time_us");
      if (!time.ok()) return time.status();
      entry.measured.push_back({(*bytes)->get<Bytes>(), *time});
    }
    out.reduce_scatter.push_back(std::move(entry));
  }
  return Status::Ok();
}

}  // namespace

Result<TimeProfile> ParseTimeProfile(const std::string& text, const std::string& origin) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for a number beyond a double ("1e30800": found by
    // tests/fuzz/time_profile_fuzz.cc).
    return InvalidArgument(fmt::format("{}: not JSON: {}", origin, e.what()));
  }
  if (!doc.is_object()) return InvalidArgument(fmt::format("{}: expected a JSON object", origin));
  BUCKETSIM_RETURN_IF_ERROR(CheckJsonFileKind(origin, "time profile", doc));
  Fields top(doc, origin, "");
  Result<const json*> version = top.Get("schema_version", json::value_t::number_integer, true);
  if (!version.ok()) return version.status();
  if ((*version)->get<long long>() != kProfileSchemaVersion) {
    return top.Error("schema_version",
                     fmt::format("{} is not supported (this build reads profile version {})",
                                 (*version)->dump(), kProfileSchemaVersion));
  }
  TimeProfile profile;
  Result<std::string> name = top.String("name", true);
  if (!name.ok()) return name.status();
  profile.name = *name;
  Result<const json*> context = top.Get("context", json::value_t::object, true);
  if (!context.ok()) return context.status();
  BUCKETSIM_RETURN_IF_ERROR(ReadProvenance(**context, origin, profile.provenance));
  Result<double> copy = top.Number("copy_GBps");
  if (!copy.ok()) return copy.status();
  profile.copy_GBps = *copy;
  Result<const json*> collectives = top.Get("collectives", json::value_t::object, true);
  if (!collectives.ok()) return collectives.status();
  for (const auto& item : (*collectives)->items()) {
    const std::string& kind = item.key();
    const json& entries = item.value();
    if (kind != "reduce_scatter") {
      return top.Error("collectives", fmt::format("unknown collective kind '{}' (known: "
                                                  "reduce_scatter)",
                                                  kind));
    }
    if (!entries.is_array()) return top.Error("collectives.reduce_scatter", "expected an array");
    BUCKETSIM_RETURN_IF_ERROR(ReadReduceScatter(entries, origin, profile));
  }
  Status valid = profile.Validate();
  if (!valid.ok()) return InvalidArgument(fmt::format("{}: {}", origin, valid.message()));
  return profile;
}

Result<TimeProfile> ReadTimeProfile(const std::string& path) {
  BUCKETSIM_RETURN_IF_ERROR(RejectDirectory(path, "time profile"));
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError(fmt::format("{}: cannot open the profile", path));
  std::ostringstream text;
  text << in.rdbuf();
  return ParseTimeProfile(text.str(), path);
}

Result<TimeProfile> LoadTimeProfile(const std::string& file_or_gpu,
                                    const GpuEfficiency& efficiency) {
  std::error_code error;
  const bool exists = std::filesystem::exists(file_or_gpu, error);
  if (const GpuSpec* gpu = FindGpu(file_or_gpu); gpu != nullptr && !exists) {
    return EstimateTimeProfile(*gpu, efficiency);
  }
  Result<TimeProfile> read = ReadTimeProfile(file_or_gpu);
  if (!read.ok() && !exists) {
    return Status(read.status().code(),
                  fmt::format("{}; or a GPU's name for its estimate from published rates: {}",
                              read.status().message(), GpuNameList()));
  }
  return read;
}

std::string TimeProfileJson(const TimeProfile& profile) {
  const ProfileProvenance& p = profile.provenance;
  ordered_json context;
  context["provenance"] = p.kind;
  context["description"] = p.description;
  context["sources"] = p.sources;
  context["host"] = p.host;
  context["backend"] = p.backend;
  context["ranks"] = p.ranks;
  context["tool_version"] = p.tool_version;
  ordered_json doc;
  doc["schema_version"] = kProfileSchemaVersion;
  doc["name"] = profile.name;
  doc["context"] = std::move(context);
  doc["copy_GBps"] = profile.copy_GBps;
  ordered_json entries = ordered_json::array();
  for (const AlphaBeta& e : profile.reduce_scatter) {
    ordered_json entry = {
        {"group_size", e.group_size}, {"alpha_us", e.alpha_us}, {"busbw_GBps", e.busbw_GBps}};
    if (!e.measured.empty()) {
      ordered_json measured = ordered_json::array();
      for (const TimingSample& point : e.measured) {
        measured.push_back({{"send_bytes", point.bytes}, {"time_us", point.time_us}});
      }
      entry["measured"] = std::move(measured);
    }
    entries.push_back(std::move(entry));
  }
  doc["collectives"]["reduce_scatter"] = std::move(entries);
  return doc.dump(2) + "\n";
}

Status WriteTimeProfile(const std::string& path, const TimeProfile& profile) {
  return WriteFileAtomically(path, TimeProfileJson(profile));
}

}  // namespace bucketsim
