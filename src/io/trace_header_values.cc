#include "io/trace_header_values.h"

#include <cstdint>
#include <initializer_list>

#include "io/json_document.h"
#include "io/trace_values.h"

namespace bucketsim::trace_values {
namespace {

// Checks that `j` is an object whose keys are all in `allowed`.
Status CheckObject(const Json& j, std::initializer_list<std::string_view> allowed) {
  if (!j.is_object()) {
    return InvalidTrace(fmt::format("must be an object, got {}", TypeName(ScalarOf(j).type)));
  }
  for (const auto& item : j.items()) {
    bool known = false;
    for (std::string_view key : allowed) known = known || item.key() == key;
    if (!known) return InvalidTrace(fmt::format("unknown field '{}'", item.key()));
  }
  return Status::Ok();
}

const Json* Member(const Json& object, std::string_view key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

Status Require(const Json& object, std::string_view key, const Json*& out) {
  out = Member(object, key);
  if (out == nullptr) return InvalidTrace(fmt::format("missing field '{}'", key));
  return Status::Ok();
}

Status ToString(const Json& j, std::string_view name, std::string& out) {
  std::string_view text;
  Scalar s = ScalarOf(j);
  BUCKETSIM_RETURN_IF_ERROR(ToText(s, name, text));
  out = text;
  return Status::Ok();
}

Status ParseStreams(const Json& j, std::vector<StreamInfo>& streams) {
  if (!j.is_array()) return WrongType(ScalarOf(j), "streams", "an array of names");
  for (std::size_t s = 0; s < j.size(); ++s) {
    StreamInfo info;
    BUCKETSIM_RETURN_IF_ERROR(ToString(j[s], fmt::format("streams[{}]", s), info.name));
    streams.push_back(std::move(info));
  }
  return Status::Ok();
}

Status ParseGroup(const Json& j, ProcessGroup& group) {
  BUCKETSIM_RETURN_IF_ERROR(CheckObject(j, {"id", "ranks", "name"}));
  const Json* field = nullptr;
  BUCKETSIM_RETURN_IF_ERROR(Require(j, "id", field));
  BUCKETSIM_RETURN_IF_ERROR(ToUnsigned(ScalarOf(*field), "id", group.id));
  BUCKETSIM_RETURN_IF_ERROR(Require(j, "ranks", field));
  if (!field->is_array()) return WrongType(ScalarOf(*field), "ranks", "an array of integers");
  for (std::size_t r = 0; r < field->size(); ++r) {
    int rank = 0;
    BUCKETSIM_RETURN_IF_ERROR(ToInt(ScalarOf((*field)[r]), fmt::format("ranks[{}]", r), rank));
    group.ranks.push_back(rank);
  }
  if (const Json* name = Member(j, "name")) {
    BUCKETSIM_RETURN_IF_ERROR(ToString(*name, "name", group.name));
  }
  return Status::Ok();
}

Status ParseParam(const Json& j, ParamInfo& param) {
  BUCKETSIM_RETURN_IF_ERROR(CheckObject(j, {"name", "numel", "dtype"}));
  const Json* field = nullptr;
  BUCKETSIM_RETURN_IF_ERROR(Require(j, "name", field));
  BUCKETSIM_RETURN_IF_ERROR(ToString(*field, "name", param.name));
  BUCKETSIM_RETURN_IF_ERROR(Require(j, "numel", field));
  BUCKETSIM_RETURN_IF_ERROR(ToUnsigned(ScalarOf(*field), "numel", param.numel));
  BUCKETSIM_RETURN_IF_ERROR(Require(j, "dtype", field));
  return ToDType(ScalarOf(*field), "dtype", param.dtype);
}

Status ParseFsdpInstance(const Json& j, UnitInfo& instance) {
  BUCKETSIM_RETURN_IF_ERROR(CheckObject(j, {"name", "params"}));
  const Json* field = nullptr;
  BUCKETSIM_RETURN_IF_ERROR(Require(j, "name", field));
  BUCKETSIM_RETURN_IF_ERROR(ToString(*field, "name", instance.name));
  BUCKETSIM_RETURN_IF_ERROR(Require(j, "params", field));
  if (!field->is_array()) return WrongType(ScalarOf(*field), "params", "an array");
  for (std::size_t p = 0; p < field->size(); ++p) {
    ParamInfo param;
    Status status = ParseParam((*field)[p], param);
    if (!status.ok()) return WithPrefix(fmt::format("params[{}]: ", p), status);
    instance.params.push_back(std::move(param));
  }
  return Status::Ok();
}

// Parses each element of the array `j` with `parse`, prefixing errors with "name[i]: ".
template <typename T, typename Parse>
Status ParseArray(const Json& j, std::string_view name, std::vector<T>& out, Parse parse) {
  if (!j.is_array()) return WrongType(ScalarOf(j), name, "an array");
  for (std::size_t i = 0; i < j.size(); ++i) {
    T item;
    Status status = parse(j[i], item);
    if (!status.ok()) return WithPrefix(fmt::format("{}[{}]: ", name, i), status);
    out.push_back(std::move(item));
  }
  return Status::Ok();
}

Status ParseHeaderValue(std::string_view key, const Json& value, TraceHeader& header) {
  if (key == "schema_version") return Status::Ok();  // checked first, by ConvertHeader
  if (key == "description") return ToString(value, key, header.description);
  if (key == "world_size") return ToInt(ScalarOf(value), key, header.world_size);
  if (key == "rank") return ToInt(ScalarOf(value), key, header.rank);
  if (key == "bucket_cap_mb") return ToNumber(ScalarOf(value), key, header.bucket_cap_mb);
  if (key == "streams") return ParseStreams(value, header.streams);
  if (key == "groups") return ParseArray(value, key, header.groups, ParseGroup);
  if (key == "fsdp") return ParseArray(value, key, header.units, ParseFsdpInstance);
  if (key == "alloc_conf") {
    if (header.schema_version < 3) {
      return InvalidTrace(fmt::format("key 'alloc_conf' needs schema_version 3 (this trace has {})",
                                      header.schema_version));
    }
    return ToString(value, key, header.alloc_conf);
  }
  if (key == "fsdp_impl" || key == "fsdp_setting") {
    if (header.schema_version < kImplSchemaVersion) {
      return InvalidTrace(fmt::format("key '{}' needs schema_version {} (this trace has {})", key,
                                      kImplSchemaVersion, header.schema_version));
    }
    if (key == "fsdp_setting") return ToString(value, key, header.fsdp_setting);
    std::string name;
    BUCKETSIM_RETURN_IF_ERROR(ToString(value, key, name));
    header.fsdp_impl = ParseFsdpImpl(name);
    if (!header.fsdp_impl) {
      return InvalidTrace(fmt::format("fsdp_impl '{}' is not {}", name, FsdpImplChoices()));
    }
    return Status::Ok();
  }
  if (key == "replicate_group") {
    if (header.schema_version < kCollectivesSchemaVersion) {
      return InvalidTrace(fmt::format("key '{}' needs schema_version {} (this trace has {})", key,
                                      kCollectivesSchemaVersion, header.schema_version));
    }
    GroupId group = 0;
    BUCKETSIM_RETURN_IF_ERROR(ToUnsigned(ScalarOf(value), key, group));
    header.replicate_group = group;
    return Status::Ok();
  }
  return InvalidTrace(fmt::format("unknown key '{}'", key));
}

}  // namespace

const Json* FindHeaderValue(const HeaderValues& values, std::string_view key) {
  for (const auto& [k, v] : values) {
    if (k == key) return &v;
  }
  return nullptr;
}

Status RejectOtherFileKind(std::string_view file, const HeaderValues& values) {
  Json top = Json::object();  // a copy, on this error path only
  for (const auto& [key, value] : values) top[key] = value;
  const std::string path(file);
  Status status = CheckJsonFileKind(path, "trace", top);
  if (status.ok() || JsonFileKind(top) != "model program") return status;
  // gen program reads a file, not standard input.
  return {status.code(),
          fmt::format("{}; make its trace with: bucketsim gen program {} -o trace.json",
                      status.message(), path == "<stdin>" ? "PROGRAM.json" : path)};
}

Status ConvertHeaderValues(const HeaderValues& values, TraceHeader& header) {
  // The version comes first: a newer trace's other keys may mean something else.
  const Json* version_value = FindHeaderValue(values, "schema_version");
  if (version_value == nullptr) return InvalidTrace("missing key 'schema_version'");
  std::uint64_t version = 0;
  BUCKETSIM_RETURN_IF_ERROR(ToUnsigned(ScalarOf(*version_value), "schema_version", version));
  if (version < kOldestTraceSchemaVersion || version > kTraceSchemaVersion) {
    return InvalidTrace(
        fmt::format("schema_version {} is not supported (this build reads {} to {})", version,
                    kOldestTraceSchemaVersion, kTraceSchemaVersion));
  }
  header.schema_version = static_cast<int>(version);
  for (const auto& [key, value] : values) {
    BUCKETSIM_RETURN_IF_ERROR(ParseHeaderValue(key, value, header));
  }
  for (std::string_view required : {"world_size", "rank"}) {
    if (FindHeaderValue(values, required) == nullptr) {
      return InvalidTrace(fmt::format("missing key '{}'", required));
    }
  }
  return header.Finalize();
}

}  // namespace bucketsim::trace_values
