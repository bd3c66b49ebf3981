#include "io/trace_writer.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <iostream>
#include <iterator>
#include <utility>

#include <fmt/compile.h>
#include <nlohmann/json.hpp>

namespace bucketsim {
namespace {

using OrderedJson = nlohmann::ordered_json;

// The buffer is handed to the stream in chunks of about this size.
constexpr std::size_t kFlushBytes = std::size_t{1} << 20;

std::string DumpJson(const OrderedJson& j, int indent) {
  // `replace`: a name that is not valid UTF-8 must not make the writer throw.
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

OrderedJson HeaderJson(const TraceHeader& header) {
  OrderedJson j;
  j["schema_version"] = header.WrittenSchemaVersion();
  if (!header.description.empty()) j["description"] = header.description;
  j["world_size"] = header.world_size;
  j["rank"] = header.rank;
  j["bucket_cap_mb"] = header.bucket_cap_mb;
  if (!header.alloc_conf.empty()) j["alloc_conf"] = header.alloc_conf;
  if (header.fsdp_impl) j["fsdp_impl"] = FsdpImplName(*header.fsdp_impl);
  if (!header.fsdp_setting.empty()) j["fsdp_setting"] = header.fsdp_setting;
  if (header.replicate_group) j["replicate_group"] = *header.replicate_group;
  j["streams"] = OrderedJson::array();
  for (const StreamInfo& stream : header.streams) j["streams"].push_back(stream.name);
  j["groups"] = OrderedJson::array();
  for (const ProcessGroup& group : header.groups) {
    OrderedJson g;
    g["id"] = group.id;
    g["ranks"] = group.ranks;
    if (!group.name.empty()) g["name"] = group.name;
    j["groups"].push_back(std::move(g));
  }
  j["fsdp"] = OrderedJson::array();
  for (const UnitInfo& instance : header.units) {
    OrderedJson params = OrderedJson::array();
    for (const ParamInfo& param : instance.params) {
      params.push_back(
          {{"name", param.name}, {"numel", param.numel}, {"dtype", DTypeName(param.dtype)}});
    }
    OrderedJson f;
    f["name"] = instance.name;
    f["params"] = std::move(params);
    j["fsdp"].push_back(std::move(f));
  }
  return j;
}

// What the writer cannot express as a valid v1 event; a programming error upstream, reported
// as a value because a sink never crashes on its input.
Status CheckWritable(const Event& e, int schema_version) {
  if (e.kind == EventKind::kPhase && e.phase == Phase::kInit) {
    return InvalidTrace(
        fmt::format("event {}: phase 'init' cannot be written to a trace", e.index));
  }
  if (e.kind == EventKind::kAlloc && IsPolicyCategory(e.category)) {
    return InvalidTrace(fmt::format("event {}: cat '{}' is a policy category, not a trace one",
                                    e.index, CategoryName(e.category)));
  }
  if ((e.time_us != 0 || IsObservedEvent(e.kind)) && schema_version < 3) {
    return InvalidTrace(
        fmt::format("event {}: '{}': observed events and time_us need schema_version 3", e.index,
                    EventKindName(e.kind)));
  }
  if (e.kind == EventKind::kCompute && !(std::isfinite(e.dur_us) && e.dur_us >= 0)) {
    return InvalidTrace(
        fmt::format("event {}: dur_us {} is not a finite non-negative number", e.index, e.dur_us));
  }
  return Status::Ok();
}

}  // namespace

TraceWriter::TraceWriter(std::ostream& out, std::string display_name)
    : out_(out), display_name_(std::move(display_name)) {}

TraceWriter::TraceWriter(std::unique_ptr<AtomicFile> file, std::string display_name)
    : file_(std::move(file)), out_(file_->stream()), display_name_(std::move(display_name)) {}

Result<std::unique_ptr<TraceWriter>> TraceWriter::Open(const std::string& path) {
  if (path == "-") return std::make_unique<TraceWriter>(std::cout, "<stdout>");
  Result<std::unique_ptr<AtomicFile>> file = AtomicFile::Create(path);
  if (!file.ok()) return file.status();
  return std::unique_ptr<TraceWriter>(new TraceWriter(std::move(*file), path));
}

Status TraceWriter::OnHeader(const TraceHeader& header) {
  header_ = &header;
  escaped_names_.clear();
  num_events_ = 0;
  std::string text = DumpJson(HeaderJson(header), 2);
  // The header object stays open: its last key is "events", written as it streams.
  BUCKETSIM_CHECK(text.size() >= 2 && text.ends_with("\n}"));
  text.resize(text.size() - 2);
  buffer_.clear();
  buffer_.append(text);
  fmt::format_to(std::back_inserter(buffer_), ",\n  \"events\": [");
  return FlushBuffer();
}

std::string_view TraceWriter::EscapedName(std::uint32_t name) {
  while (escaped_names_.size() <= name) {
    escaped_names_.push_back(DumpJson(OrderedJson(header_->names[escaped_names_.size()]), -1));
  }
  return escaped_names_[name];
}

Status TraceWriter::OnEvent(const Event& e) {
  BUCKETSIM_CHECK(header_ != nullptr);
  BUCKETSIM_RETURN_IF_ERROR(CheckWritable(e, header_->schema_version));
  if ((e.kind == EventKind::kCompute || e.kind == EventKind::kMark) &&
      e.name >= header_->names.size()) {
    return InvalidTrace(
        fmt::format("event {}: name {} is not interned in the header", e.index, e.name));
  }
  // Compiled format strings: events are most of a trace, and parsing each format string at
  // run time cost more than formatting the numbers.
  auto out = fmt::appender(buffer_);
  buffer_.append(std::string_view(num_events_ == 0 ? "\n" : ",\n"));
  switch (e.kind) {
    case EventKind::kIteration:
      fmt::format_to(out, FMT_COMPILE(R"({{"ev": "iteration", "index": {}}})"), e.id);
      break;
    case EventKind::kPhase:
      fmt::format_to(out, FMT_COMPILE(R"({{"ev": "phase", "phase": "{}"}})"), PhaseName(e.phase));
      break;
    case EventKind::kAlloc:
      fmt::format_to(
          out, FMT_COMPILE(R"({{"ev": "alloc", "id": {}, "bytes": {}, "stream": {}, "cat": "{}")"),
          e.id, e.bytes, e.stream, CategoryName(e.category));
      AppendTime(e);
      break;
    case EventKind::kFree:
      fmt::format_to(out, FMT_COMPILE(R"({{"ev": "free", "id": {})"), e.id);
      AppendTime(e);
      break;
    case EventKind::kCompute:
      fmt::format_to(out,
                     FMT_COMPILE(R"({{"ev": "compute", "stream": {}, "dur_us": {}, "name": {}}})"),
                     e.stream, e.dur_us, EscapedName(e.name));
      break;
    case EventKind::kMark:
      fmt::format_to(out, FMT_COMPILE(R"({{"ev": "mark", "name": {}}})"), EscapedName(e.name));
      break;
    case EventKind::kReduceScatter:
      fmt::format_to(
          out,
          FMT_COMPILE(R"({{"ev": "rs", "fsdp": {}, "param": {}, "group": {}, "dtype": "{}", )"
                      R"("numel": {}, "shard": "{}")"),
          e.unit, e.param, e.group, DTypeName(e.dtype), e.numel, ShardModeName(e.shard_mode));
      if (e.shard_mode == ShardMode::kCast) {
        fmt::format_to(out, FMT_COMPILE(R"(, "cast_dtype": "{}")"), DTypeName(e.cast_dtype));
      }
      buffer_.push_back('}');
      break;
    case EventKind::kFlush:
      buffer_.append(std::string_view(R"({"ev": "flush"})"));
      break;
    case EventKind::kZeroGrad:
      fmt::format_to(out, FMT_COMPILE(R"({{"ev": "zero_grad", "set_to_none": {}}})"),
                     e.set_to_none);
      break;
    case EventKind::kRecordStream:
      fmt::format_to(out, FMT_COMPILE(R"({{"ev": "record_stream", "id": {}, "stream": {}}})"), e.id,
                     e.stream);
      break;
    case EventKind::kSync:
      fmt::format_to(out, FMT_COMPILE(R"({{"ev": "sync", "stream": {}}})"), e.stream);
      break;
    case EventKind::kEmptyCache:
      buffer_.append(std::string_view(R"({"ev": "empty_cache"})"));
      break;
    case EventKind::kAllGather:
    case EventKind::kAllReduce:
      fmt::format_to(out,
                     FMT_COMPILE(R"({{"ev": "{}", "id": {}, "stream": {}, "group": {}, )"
                                 R"("dtype": "{}", "numel": {}}})"),
                     EventKindName(e.kind), e.id, e.stream, e.group, DTypeName(e.dtype), e.numel);
      break;
    case EventKind::kSegmentAlloc:
    case EventKind::kSegmentFree:
    case EventKind::kSegmentMap:
    case EventKind::kSegmentUnmap:
      fmt::format_to(out, FMT_COMPILE(R"({{"ev": "{}", "addr": {}, "bytes": {}, "stream": {})"),
                     EventKindName(e.kind), e.id, e.bytes, e.stream);
      AppendTime(e);
      break;
    case EventKind::kOom:
      fmt::format_to(out,
                     FMT_COMPILE(R"({{"ev": "oom", "bytes": {}, "stream": {}, "device_free": {})"),
                     e.bytes, e.stream, e.id);
      AppendTime(e);
      break;
    case EventKind::kSnapshot:
      fmt::format_to(out, FMT_COMPILE(R"({{"ev": "snapshot", "bytes": {})"), e.bytes);
      if (e.has_totals) {
        fmt::format_to(
            out,
            FMT_COMPILE(R"(, "allocated_bytes": {}, "reserved_bytes": {}, "requested_bytes": {})"),
            e.numel, e.group, e.id);
      }
      AppendTime(e);
      break;
  }
  ++num_events_;
  return buffer_.size() >= kFlushBytes ? FlushBuffer() : Status::Ok();
}

// Closes an event that may carry time_us (0: not recorded, not written).
void TraceWriter::AppendTime(const Event& e) {
  if (e.time_us != 0)
    fmt::format_to(fmt::appender(buffer_), FMT_COMPILE(R"(, "time_us": {})"), e.time_us);
  buffer_.push_back('}');
}

Status TraceWriter::FlushBuffer() {
  out_.write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
  buffer_.clear();
  if (!out_)
    return IoError(fmt::format("cannot write '{}': {}", display_name_, std::strerror(errno)));
  return Status::Ok();
}

Status TraceWriter::OnEnd() {
  BUCKETSIM_CHECK(header_ != nullptr);
  buffer_.append(std::string_view("\n]}\n"));
  BUCKETSIM_RETURN_IF_ERROR(FlushBuffer());
  out_.flush();
  if (!out_)
    return IoError(fmt::format("cannot write '{}': {}", display_name_, std::strerror(errno)));
  // The file appears at its path only now, complete.
  if (file_ != nullptr) BUCKETSIM_RETURN_IF_ERROR(file_->Commit());
  file_.reset();
  header_ = nullptr;
  return Status::Ok();
}

}  // namespace bucketsim
