#include "io/trace_reader.h"

#include "io/json_document.h"
#include "io/json_scanner.h"
#include "io/trace_header_values.h"
#include "io/trace_reader_internal.h"
#include "io/trace_values.h"
#include "policy/shard_size.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace bucketsim {
namespace {

using Json = nlohmann::json;

using namespace trace_values;  // the values and the header: trace_values.h, trace_header_values.h

// ---------------------------------------------------------------------------------------------
// Events: fields collected in place by the SAX callbacks, converted at the closing brace.

enum class Field : std::uint8_t {
  kEv,
  kIndex,
  kPhase,
  kId,
  kBytes,
  kStream,
  kCat,
  kDurUs,
  kName,
  kFsdp,
  kParam,
  kGroup,
  kDType,
  kNumel,
  kShard,
  kCastDType,
  kSetToNone,
  // schema_version 3
  kAddr,
  kTimeUs,
  kDeviceFree,
  kAllocatedBytes,
  kReservedBytes,
  kRequestedBytes,
};
constexpr int kNumFields = 23;
constexpr std::array<std::string_view, kNumFields> kFieldNames = {
    "ev",
    "index",
    "phase",
    "id",
    "bytes",
    "stream",
    "cat",
    "dur_us",
    "name",
    "fsdp",
    "param",
    "group",
    "dtype",
    "numel",
    "shard",
    "cast_dtype",
    "set_to_none",
    "addr",
    "time_us",
    "device_free",
    "allocated_bytes",
    "reserved_bytes",
    "requested_bytes",
};

constexpr std::uint32_t Bit(Field f) { return 1u << static_cast<int>(f); }

// Name lookups run several times per event on short names: comparing the size and the first
// character rules out most candidates, and a plain loop beats a call to memcmp.
bool SameName(std::string_view name, std::string_view text) {
  if (name.size() != text.size() || name.empty() || name[0] != text[0]) return false;
  for (std::size_t i = 1; i < name.size(); ++i) {
    if (name[i] != text[i]) return false;
  }
  return true;
}

// Dispatches on the length and the first character; runs for every key of every event.
std::optional<Field> LookupField(std::string_view key) {
  auto is = [key](Field f) { return SameName(kFieldNames[static_cast<int>(f)], key); };
  Field candidate;
  switch (key.size()) {
    case 2:
      candidate = key[0] == 'e' ? Field::kEv : Field::kId;
      break;
    case 3:
      candidate = Field::kCat;
      break;
    case 4:
      candidate = key[0] == 'n' ? Field::kName : key[0] == 'a' ? Field::kAddr : Field::kFsdp;
      break;
    case 5:
      switch (key[0]) {
        case 'i':
          candidate = Field::kIndex;
          break;
        case 'b':
          candidate = Field::kBytes;
          break;
        case 'g':
          candidate = Field::kGroup;
          break;
        case 'd':
          candidate = Field::kDType;
          break;
        case 'n':
          candidate = Field::kNumel;
          break;
        case 's':
          candidate = Field::kShard;
          break;
        case 'p':
          candidate = key[1] == 'h' ? Field::kPhase : Field::kParam;
          break;
        default:
          return std::nullopt;
      }
      break;
    case 6:
      candidate = key[0] == 's' ? Field::kStream : Field::kDurUs;
      break;
    case 7:
      candidate = Field::kTimeUs;
      break;
    case 10:
      candidate = Field::kCastDType;
      break;
    case 11:
      candidate = key[0] == 'd' ? Field::kDeviceFree : Field::kSetToNone;
      break;
    case 14:
      candidate = Field::kReservedBytes;
      break;
    case 15:
      candidate = key[0] == 'a' ? Field::kAllocatedBytes : Field::kRequestedBytes;
      break;
    default:
      return std::nullopt;
  }
  if (is(candidate)) return candidate;
  return std::nullopt;
}

constexpr std::uint32_t kSegmentFields = Bit(Field::kEv) | Bit(Field::kAddr) | Bit(Field::kBytes) |
                                         Bit(Field::kStream) | Bit(Field::kTimeUs);

constexpr std::uint32_t kCollectiveFields = Bit(Field::kEv) | Bit(Field::kId) |
                                            Bit(Field::kStream) | Bit(Field::kGroup) |
                                            Bit(Field::kDType) | Bit(Field::kNumel);

// The fields each kind may have, indexed by EventKind.
constexpr std::array<std::uint32_t, kNumEventKinds> kAllowedFields = {
    Bit(Field::kEv) | Bit(Field::kIndex),                                           // iteration
    Bit(Field::kEv) | Bit(Field::kPhase),                                           // phase
    Bit(Field::kEv) | Bit(Field::kId) | Bit(Field::kBytes) | Bit(Field::kStream) |  // alloc
        Bit(Field::kCat) | Bit(Field::kTimeUs),
    Bit(Field::kEv) | Bit(Field::kId) | Bit(Field::kTimeUs),                         // free
    Bit(Field::kEv) | Bit(Field::kStream) | Bit(Field::kDurUs) | Bit(Field::kName),  // compute
    Bit(Field::kEv) | Bit(Field::kName),                                             // mark
    Bit(Field::kEv) | Bit(Field::kFsdp) | Bit(Field::kParam) | Bit(Field::kGroup) |  // rs
        Bit(Field::kDType) | Bit(Field::kNumel) | Bit(Field::kShard) | Bit(Field::kCastDType),
    Bit(Field::kEv),                                          // flush
    Bit(Field::kEv) | Bit(Field::kSetToNone),                 // zero_grad
    Bit(Field::kEv) | Bit(Field::kId) | Bit(Field::kStream),  // record_stream
    Bit(Field::kEv) | Bit(Field::kStream),                    // sync
    Bit(Field::kEv),                                          // empty_cache
    kCollectiveFields,                                        // all_gather
    kCollectiveFields,                                        // all_reduce
    kSegmentFields,                                           // segment_alloc
    kSegmentFields,                                           // segment_free
    kSegmentFields,                                           // segment_map
    kSegmentFields,                                           // segment_unmap
    Bit(Field::kEv) | Bit(Field::kBytes) | Bit(Field::kStream) | Bit(Field::kDeviceFree) |  // oom
        Bit(Field::kTimeUs),
    Bit(Field::kEv) | Bit(Field::kBytes) | Bit(Field::kTimeUs) |  // snapshot
        Bit(Field::kAllocatedBytes) | Bit(Field::kReservedBytes) | Bit(Field::kRequestedBytes),
};

// Parses the name of an enum value, with the names looked up once (the core's name functions
// are out of line).
template <typename Enum, std::size_t N>
class NameTable {
 public:
  explicit NameTable(std::string_view (*name_of)(Enum)) {
    for (std::size_t i = 0; i < N; ++i) names_[i] = name_of(static_cast<Enum>(i));
  }
  std::optional<Enum> Parse(std::string_view text) const {
    for (std::size_t i = 0; i < N; ++i) {
      if (SameName(names_[i], text)) return static_cast<Enum>(i);
    }
    return std::nullopt;
  }

 private:
  std::array<std::string_view, N> names_;
};

const NameTable<EventKind, kNumEventKinds> kEventKinds(EventKindName);
const NameTable<Phase, kNumPhases> kPhases(PhaseName);
const NameTable<ShardMode, 5> kShardModes(ShardModeName);
const NameTable<Category, kNumCategories> kCategories(CategoryName);

// The fields of the event being read. Reused from event to event: the strings keep their
// capacity, so a typical event costs no heap allocation.
class EventFields {
 public:
  void Reset() {
    present_ = 0;
    duplicate_.reset();
    unknown_key_.reset();
  }

  // Selects the slot the next value goes to; unknown and repeated keys are remembered and
  // reported when the event is complete (its kind may not be known yet).
  Scalar& SlotFor(std::string_view key) {
    std::optional<Field> field = LookupField(key);
    if (!field) {
      if (!unknown_key_) unknown_key_.emplace(key);
      return discard_;
    }
    if (present_ & Bit(*field)) {
      if (!duplicate_) duplicate_ = *field;
      return discard_;
    }
    present_ |= Bit(*field);
    return values_[static_cast<int>(*field)];
  }

  // The structural problems of the event: unknown, repeated or misplaced fields.
  Status CheckKeys(EventKind kind) const {
    if (unknown_key_) return InvalidTrace(fmt::format("unknown field '{}'", *unknown_key_));
    if (duplicate_) return InvalidTrace(fmt::format("field '{}' appears twice", Name(*duplicate_)));
    std::uint32_t extra = present_ & ~kAllowedFields[static_cast<int>(kind)];
    if (extra == 0) return Status::Ok();
    return InvalidTrace(fmt::format("unknown field '{}'", kFieldNames[std::countr_zero(extra)]));
  }

  bool Has(Field f) const { return (present_ & Bit(f)) != 0; }
  const Scalar& Get(Field f) const { return values_[static_cast<int>(f)]; }
  static std::string_view Name(Field f) { return kFieldNames[static_cast<int>(f)]; }

  Status Required(Field f) const {
    if (Has(f)) return Status::Ok();
    return InvalidTrace(fmt::format("missing field '{}'", Name(f)));
  }
  Status Unsigned(Field f, std::uint64_t& out) const {
    BUCKETSIM_RETURN_IF_ERROR(Required(f));
    return ToUnsigned(Get(f), Name(f), out);
  }
  Status Text(Field f, std::string_view& out) const {
    BUCKETSIM_RETURN_IF_ERROR(Required(f));
    return ToText(Get(f), Name(f), out);
  }
  Status DTypeOf(Field f, DType& out) const {
    BUCKETSIM_RETURN_IF_ERROR(Required(f));
    return ToDType(Get(f), Name(f), out);
  }
  // Optional "stream": must name a stream of the header.
  Status Stream(const TraceHeader& header, StreamId& out) const {
    if (!Has(Field::kStream)) return Status::Ok();
    std::uint64_t stream = 0;
    BUCKETSIM_RETURN_IF_ERROR(ToUnsigned(Get(Field::kStream), "stream", stream));
    if (stream >= header.streams.size()) {
      return InvalidTrace(fmt::format("stream {} is not declared in the header ({} stream{})",
                                      stream, header.streams.size(),
                                      header.streams.size() == 1 ? "" : "s"));
    }
    out = static_cast<StreamId>(stream);
    return Status::Ok();
  }

 private:
  std::array<Scalar, kNumFields> values_;
  Scalar discard_;
  std::uint32_t present_ = 0;
  std::optional<Field> duplicate_;
  std::optional<std::string> unknown_key_;  // the first key that names no field, even ""
};

Status ConvertPhase(const EventFields& f, Event& e) {
  std::string_view text;
  BUCKETSIM_RETURN_IF_ERROR(f.Text(Field::kPhase, text));
  std::optional<Phase> phase = kPhases.Parse(text);
  if (!phase || *phase == Phase::kInit) {
    return InvalidTrace(fmt::format(
        "phase '{}' is not a trace phase (expected forward, backward, step or zero_grad)", text));
  }
  e.phase = *phase;
  return Status::Ok();
}

// Optional "time_us" (v3) of alloc, free and observed events.
Status ConvertTime(const EventFields& f, const TraceHeader& header, Event& e) {
  if (!f.Has(Field::kTimeUs)) return Status::Ok();
  if (header.schema_version < 3) {
    return InvalidTrace(fmt::format("field 'time_us' needs schema_version 3 (this trace has {})",
                                    header.schema_version));
  }
  return f.Unsigned(Field::kTimeUs, e.time_us);
}

Status CheckSaneBytes(Bytes bytes) {
  if (bytes <= kMaxSaneBytes) return Status::Ok();
  return InvalidTrace(
      fmt::format("bytes {} is beyond the sanity limit of 1 PiB ({} bytes)", bytes, kMaxSaneBytes));
}

Status ConvertAlloc(const EventFields& f, const TraceHeader& header, Event& e) {
  BUCKETSIM_RETURN_IF_ERROR(f.Unsigned(Field::kId, e.id));
  BUCKETSIM_RETURN_IF_ERROR(f.Unsigned(Field::kBytes, e.bytes));
  BUCKETSIM_RETURN_IF_ERROR(CheckSaneBytes(e.bytes));
  BUCKETSIM_RETURN_IF_ERROR(f.Stream(header, e.stream));
  BUCKETSIM_RETURN_IF_ERROR(ConvertTime(f, header, e));
  std::string_view text;
  BUCKETSIM_RETURN_IF_ERROR(f.Text(Field::kCat, text));
  std::optional<Category> category = ParseTraceCategory(text);
  if (!category) {
    bool policy = kCategories.Parse(text).has_value();
    return InvalidTrace(
        policy ? fmt::format("cat '{}' is made by a bucket policy at replay and never appears in "
                             "a trace",
                             text)
               : fmt::format("cat '{}' is not a trace category (expected param, activation, grad, "
                             "optimizer_state, all_gather or other)",
                             text));
  }
  e.category = *category;
  return Status::Ok();
}

// The observed events of an imported snapshot (v3).
Status ConvertObserved(const EventFields& f, const TraceHeader& header, Event& e) {
  if (header.schema_version < 3) {
    return InvalidTrace(fmt::format("'{}' events need schema_version 3 (this trace has {})",
                                    EventKindName(e.kind), header.schema_version));
  }
  BUCKETSIM_RETURN_IF_ERROR(ConvertTime(f, header, e));
  BUCKETSIM_RETURN_IF_ERROR(f.Unsigned(Field::kBytes, e.bytes));
  BUCKETSIM_RETURN_IF_ERROR(CheckSaneBytes(e.bytes));
  if (e.kind == EventKind::kSnapshot) {
    constexpr std::array<Field, 3> kTotals = {Field::kAllocatedBytes, Field::kReservedBytes,
                                              Field::kRequestedBytes};
    int present = 0;
    for (Field total : kTotals) present += f.Has(total) ? 1 : 0;
    if (present == 0) return Status::Ok();
    if (present != 3) {
      return InvalidTrace(
          "'allocated_bytes', 'reserved_bytes' and 'requested_bytes' go together: give all "
          "three or none");
    }
    e.has_totals = true;
    BUCKETSIM_RETURN_IF_ERROR(f.Unsigned(Field::kAllocatedBytes, e.numel));
    BUCKETSIM_RETURN_IF_ERROR(f.Unsigned(Field::kReservedBytes, e.group));
    return f.Unsigned(Field::kRequestedBytes, e.id);
  }
  BUCKETSIM_RETURN_IF_ERROR(f.Required(Field::kStream));
  BUCKETSIM_RETURN_IF_ERROR(f.Stream(header, e.stream));
  if (e.kind == EventKind::kOom) return f.Unsigned(Field::kDeviceFree, e.id);
  return f.Unsigned(Field::kAddr, e.id);
}

Status ConvertCompute(const EventFields& f, TraceHeader& header, Event& e) {
  BUCKETSIM_RETURN_IF_ERROR(f.Stream(header, e.stream));
  BUCKETSIM_RETURN_IF_ERROR(f.Required(Field::kDurUs));
  BUCKETSIM_RETURN_IF_ERROR(ToNumber(f.Get(Field::kDurUs), "dur_us", e.dur_us));
  if (!(e.dur_us >= 0)) {
    return InvalidTrace(
        fmt::format("'dur_us' must not be negative (got {})", FormatFloat(e.dur_us)));
  }
  std::string_view name;
  if (f.Has(Field::kName)) BUCKETSIM_RETURN_IF_ERROR(ToText(f.Get(Field::kName), "name", name));
  e.name = header.Intern(name);
  return Status::Ok();
}

// The fields a collective's request or event shares: a declared group (`group`), a dtype and a
// positive element count.
Status ConvertGroupDTypeNumel(const EventFields& f, const TraceHeader& header, Event& e,
                              const ProcessGroup*& group) {
  BUCKETSIM_RETURN_IF_ERROR(f.Unsigned(Field::kGroup, e.group));
  group = header.FindGroup(e.group);
  if (group == nullptr) {
    return InvalidTrace(fmt::format("group {} is not declared in the header", e.group));
  }
  BUCKETSIM_RETURN_IF_ERROR(f.DTypeOf(Field::kDType, e.dtype));
  BUCKETSIM_RETURN_IF_ERROR(f.Unsigned(Field::kNumel, e.numel));
  if (e.numel == 0) return InvalidTrace("'numel' must be positive (got 0)");
  return Status::Ok();
}

Status ConvertReduceScatter(const EventFields& f, const TraceHeader& header, Event& e) {
  std::uint64_t fsdp = 0;
  BUCKETSIM_RETURN_IF_ERROR(f.Unsigned(Field::kFsdp, fsdp));
  if (fsdp >= header.units.size()) {
    return InvalidTrace(
        fmt::format("fsdp {} is out of range: the header declares {} FSDP instances", fsdp,
                    header.units.size()));
  }
  const UnitInfo& instance = header.units[fsdp];
  std::uint64_t param_index = 0;
  BUCKETSIM_RETURN_IF_ERROR(f.Unsigned(Field::kParam, param_index));
  if (param_index >= instance.params.size()) {
    return InvalidTrace(fmt::format("param {} is out of range: fsdp {} ('{}') has {} params",
                                    param_index, fsdp, instance.name, instance.params.size()));
  }
  const ParamInfo& param = instance.params[param_index];
  const ProcessGroup* group = nullptr;
  BUCKETSIM_RETURN_IF_ERROR(ConvertGroupDTypeNumel(f, header, e, group));
  // fairscale's chunk_and_pad: every rank's shard is the padded ceil(numel / group size).
  Numel expected = PaddedShardNumel(param.numel, static_cast<Numel>(group->size()));
  if (e.numel != expected) {
    return InvalidTrace(fmt::format(
        "numel {} does not match param '{}' (numel {}) split over group {} of size {}: expected {}",
        e.numel, param.name, param.numel, e.group, group->size(), expected));
  }
  std::string_view shard;
  BUCKETSIM_RETURN_IF_ERROR(f.Text(Field::kShard, shard));
  std::optional<ShardMode> mode = kShardModes.Parse(shard);
  if (!mode) {
    return InvalidTrace(fmt::format(
        "shard '{}' is not a shard mode (expected view, cast, accumulate, offload or no_grad)",
        shard));
  }
  e.shard_mode = *mode;
  for (const auto& [mode, version] : {std::pair{ShardMode::kOffload, kImplSchemaVersion},
                                      std::pair{ShardMode::kNoGrad, kNoGradSchemaVersion}}) {
    if (e.shard_mode == mode && header.schema_version < version) {
      return InvalidTrace(fmt::format("shard '{}' needs schema_version {} (this trace has {})",
                                      shard, version, header.schema_version));
    }
  }
  if (e.shard_mode == ShardMode::kCast) {
    BUCKETSIM_RETURN_IF_ERROR(f.DTypeOf(Field::kCastDType, e.cast_dtype));
  } else if (f.Has(Field::kCastDType)) {
    return InvalidTrace(
        fmt::format("field 'cast_dtype' is only allowed with shard 'cast', not '{}'", shard));
  }
  e.unit = static_cast<std::uint32_t>(fsdp);
  e.param = static_cast<std::uint32_t>(param_index);
  return Status::Ok();
}

// all_gather, all_reduce (v5): the allocation, its stream, a declared group and a positive
// count (the TraceChecker checks that the allocation is live and holds them).
Status ConvertTraceCollective(const EventFields& f, TraceHeader& header, Event& e) {
  if (header.schema_version < kCollectivesSchemaVersion) {
    return InvalidTrace(fmt::format("'{}' events need schema_version {} (this trace has {})",
                                    EventKindName(e.kind), kCollectivesSchemaVersion,
                                    header.schema_version));
  }
  BUCKETSIM_RETURN_IF_ERROR(f.Unsigned(Field::kId, e.id));
  BUCKETSIM_RETURN_IF_ERROR(f.Required(Field::kStream));
  BUCKETSIM_RETURN_IF_ERROR(f.Stream(header, e.stream));
  const ProcessGroup* group = nullptr;  // declared, so including this rank
  return ConvertGroupDTypeNumel(f, header, e, group);
}

// Converts the fields of one event of a known kind; messages are the reason only.
Status ConvertEvent(const EventFields& f, TraceHeader& header, Event& e) {
  switch (e.kind) {
    case EventKind::kIteration:
      return f.Unsigned(Field::kIndex, e.id);
    case EventKind::kPhase:
      return ConvertPhase(f, e);
    case EventKind::kAlloc:
      return ConvertAlloc(f, header, e);
    case EventKind::kFree:
      BUCKETSIM_RETURN_IF_ERROR(ConvertTime(f, header, e));
      return f.Unsigned(Field::kId, e.id);
    case EventKind::kCompute:
      return ConvertCompute(f, header, e);
    case EventKind::kMark: {
      std::string_view name;
      BUCKETSIM_RETURN_IF_ERROR(f.Text(Field::kName, name));
      e.name = header.Intern(name);
      return Status::Ok();
    }
    case EventKind::kReduceScatter:
      return ConvertReduceScatter(f, header, e);
    case EventKind::kFlush:
      return Status::Ok();
    case EventKind::kZeroGrad:
      if (!f.Has(Field::kSetToNone)) return Status::Ok();
      return ToBool(f.Get(Field::kSetToNone), "set_to_none", e.set_to_none);
    case EventKind::kRecordStream:
    case EventKind::kSync:
    case EventKind::kEmptyCache:
      if (header.schema_version < 2) {
        return InvalidTrace(fmt::format("'{}' events need schema_version 2 (this trace has {})",
                                        EventKindName(e.kind), header.schema_version));
      }
      if (e.kind == EventKind::kEmptyCache) return Status::Ok();
      BUCKETSIM_RETURN_IF_ERROR(f.Required(Field::kStream));
      BUCKETSIM_RETURN_IF_ERROR(f.Stream(header, e.stream));
      return e.kind == EventKind::kSync ? Status::Ok() : f.Unsigned(Field::kId, e.id);
    case EventKind::kAllGather:
    case EventKind::kAllReduce:
      return ConvertTraceCollective(f, header, e);
    case EventKind::kSegmentAlloc:
    case EventKind::kSegmentFree:
    case EventKind::kSegmentMap:
    case EventKind::kSegmentUnmap:
    case EventKind::kOom:
    case EventKind::kSnapshot:
      return ConvertObserved(f, header, e);
  }
  return InvalidTrace("unhandled event kind");
}

// ---------------------------------------------------------------------------------------------
// Input: a json::InputBuffer, read by nlohmann through a json::InputIterator up to the '[' of
// "events", then by the handler's own events parser (ParseEvents) with a json::Scanner.

using json::InputProgress;

// ---------------------------------------------------------------------------------------------
// The SAX handler: a small state machine over the top-level object.

class TraceSaxHandler {
 public:
  TraceSaxHandler(std::string_view file, const InputProgress& progress, TraceHeader& header,
                  EventSink& sink)
      : file_(file), progress_(progress), header_(header), sink_(sink) {}

  // --- nlohmann's SAX interface ---
  bool null() {
    return OnScalar(
        JsonType::kNull, [](Scalar&) {}, [] { return Json(); });
  }
  bool boolean(bool v) {
    return OnScalar(
        JsonType::kBool, [v](Scalar& s) { s.boolean = v; }, [v] { return Json(v); });
  }
  bool number_integer(std::int64_t v) {
    return OnScalar(
        JsonType::kInt, [v](Scalar& s) { s.integer = v; }, [v] { return Json(v); });
  }
  bool number_unsigned(std::uint64_t v) {
    return OnScalar(
        JsonType::kUint, [v](Scalar& s) { s.unsigned_integer = v; }, [v] { return Json(v); });
  }
  bool number_float(double v, const std::string& /*text*/) {
    return OnScalar(
        JsonType::kFloat, [v](Scalar& s) { s.number = v; }, [v] { return Json(v); });
  }
  bool string(std::string& v) {
    // Swapped, not copied: the lexer clears its buffer before the next token.
    return OnScalar(
        JsonType::kString, [&v](Scalar& s) { s.text.swap(v); }, [&v] { return Json(v); });
  }
  bool binary(Json::binary_t& /*v*/) { return Fail(InvalidTrace("binary values are not JSON")); }
  bool start_object(std::size_t /*elements*/) { return OnStart(JsonType::kObject); }
  bool start_array(std::size_t /*elements*/) { return OnStart(JsonType::kArray); }
  bool end_object() { return OnEnd(); }
  bool end_array() { return OnEnd(); }
  bool key(std::string& key);
  bool parse_error(std::size_t position, const std::string& last_token,
                   const nlohmann::detail::exception& ex);

  // True when nlohmann stopped at the '[' of "events" for ParseEvents to go on.
  bool handed_off() const { return handed_off_; }

  // Reads the events, the end of the top-level object and what follows it from `in`, whose
  // next character is the first after the '[' of "events". Returns false on an error.
  bool ParseEvents(json::InputBuffer& in);

  // The outcome once the parse returned `parsed`.
  Status Finish(bool parsed);

 private:
  enum class State {
    kStart,        // nothing read yet
    kTopKey,       // in the top-level object, before a key or its end
    kHeaderValue,  // building the value of a header key
    kEventsValue,  // after the key "events"
    kEventsArray,  // in "events", before an event or the end
    kEventKey,     // in an event, before a key or its end
    kEventValue,   // in an event, after a key
    kSkip,         // inside a nested value of an event field (an error, reported at the end)
    kEnd,          // the top-level object is closed
  };

  template <typename Store, typename MakeJson>
  bool OnScalar(JsonType type, Store store, MakeJson make_json);
  bool OnStart(JsonType type);
  bool OnEnd();
  bool TopKey(const std::string& key);
  bool StartEvents();
  bool EndEvent();
  bool EndHeaderValue();
  bool EndTopObject();
  bool NotAllowedHere(JsonType type);
  // ParseEvents' parts: one event from its '{', and an element of "events" that is not an
  // object. Both leave `p` after what they read on kOk, and are restarted from the same point
  // after a refill on kMore.
  json::Lex ParseEvent(json::Scanner& scan, const char*& p);
  json::Lex NotAnEvent(json::Scanner& scan, const char* p);
  bool FailScan(const json::ScanError& error);
  std::string Where() const;
  // " (while reading event 3)" and the like, for syntax errors.
  std::string WhereInDocument() const;
  // Records `status` with the file name in front and stops the parse.
  bool Fail(const Status& status);
  bool FailEvent(std::string_view kind, const Status& status);

  std::string_view file_;
  const InputProgress& progress_;
  TraceHeader& header_;
  EventSink& sink_;
  Status status_;
  State state_ = State::kStart;
  bool any_token_ = false;
  bool events_seen_ = false;
  bool handed_off_ = false;

  HeaderValues header_values_;
  JsonBuilder builder_;

  EventFields fields_;
  Scalar* slot_ = nullptr;
  int skip_depth_ = 0;
  EventIndex event_index_ = 0;
};

template <typename Store, typename MakeJson>
bool TraceSaxHandler::OnScalar(JsonType type, Store store, MakeJson make_json) {
  any_token_ = true;
  switch (state_) {
    case State::kEventValue:
      slot_->type = type;
      store(*slot_);
      state_ = State::kEventKey;
      return true;
    case State::kSkip:
      return true;
    case State::kHeaderValue: {
      Status status = builder_.Add(make_json());
      if (!status.ok()) return Fail(WithPrefix(Where(), status));
      return builder_.done() ? EndHeaderValue() : true;
    }
    default:
      return NotAllowedHere(type);
  }
}

bool TraceSaxHandler::OnStart(JsonType type) {
  any_token_ = true;
  switch (state_) {
    case State::kStart:
      if (type != JsonType::kObject) return NotAllowedHere(type);
      state_ = State::kTopKey;
      return true;
    case State::kEventsValue:
      if (type != JsonType::kArray) return NotAllowedHere(type);
      return StartEvents();
    case State::kEventsArray:
      if (type != JsonType::kObject) return NotAllowedHere(type);
      fields_.Reset();
      state_ = State::kEventKey;
      return true;
    case State::kEventValue:
      slot_->type = type;
      skip_depth_ = 1;
      state_ = State::kSkip;
      return true;
    case State::kSkip:
      ++skip_depth_;
      return true;
    case State::kHeaderValue: {
      Status status = builder_.Start(type == JsonType::kObject ? Json::object() : Json::array());
      if (!status.ok()) return Fail(WithPrefix(Where(), status));
      return true;
    }
    default:
      return NotAllowedHere(type);
  }
}

bool TraceSaxHandler::OnEnd() {
  switch (state_) {
    case State::kEventKey:
      return EndEvent();
    case State::kEventsArray:
      state_ = State::kTopKey;
      return true;
    case State::kSkip:
      if (--skip_depth_ == 0) state_ = State::kEventKey;
      return true;
    case State::kHeaderValue:
      builder_.End();
      return builder_.done() ? EndHeaderValue() : true;
    case State::kTopKey:
      return EndTopObject();
    default:
      return Fail(InvalidTrace("unexpected end of a value"));
  }
}

bool TraceSaxHandler::key(std::string& key) {
  switch (state_) {
    case State::kEventKey:
      slot_ = &fields_.SlotFor(key);
      state_ = State::kEventValue;
      return true;
    case State::kSkip:
      return true;
    case State::kHeaderValue:
      builder_.Key(key);
      return true;
    case State::kTopKey:
      return TopKey(key);
    default:
      return Fail(InvalidTrace("unexpected key"));
  }
}

bool TraceSaxHandler::TopKey(const std::string& key) {
  if (events_seen_) {
    return Fail(InvalidTrace(fmt::format(
        "header: key '{}' comes after 'events'; the reader streams the events, so 'events' must "
        "be the last key",
        key)));
  }
  if (key == "events") {
    events_seen_ = true;
    state_ = State::kEventsValue;
    return true;
  }
  if (FindHeaderValue(header_values_, key) != nullptr) {
    return Fail(InvalidTrace(fmt::format("header: key '{}' appears twice", key)));
  }
  header_values_.emplace_back(key, Json());
  builder_.Begin();
  state_ = State::kHeaderValue;
  return true;
}

bool TraceSaxHandler::EndHeaderValue() {
  header_values_.back().second = std::move(builder_.root());
  state_ = State::kTopKey;
  return true;
}

bool TraceSaxHandler::StartEvents() {
  Status status = ConvertHeaderValues(header_values_, header_);
  if (!status.ok()) return Fail(WithPrefix("header: ", status));
  header_values_.clear();
  status = sink_.OnHeader(header_);
  if (!status.ok()) return Fail(status);
  state_ = State::kEventsArray;
  // Stop nlohmann: ParseEvents reads on from here.
  handed_off_ = true;
  return false;
}

bool TraceSaxHandler::EndEvent() {
  Event e;
  e.index = event_index_;
  if (!fields_.Has(Field::kEv)) return FailEvent("", InvalidTrace("missing field 'ev'"));
  std::string_view kind_name;
  Status status = ToText(fields_.Get(Field::kEv), "ev", kind_name);
  if (!status.ok()) return FailEvent("", status);
  std::optional<EventKind> kind = kEventKinds.Parse(kind_name);
  if (!kind) {
    return FailEvent("", InvalidTrace(fmt::format("unknown event kind '{}'", kind_name)));
  }
  e.kind = *kind;
  status = fields_.CheckKeys(e.kind);
  if (status.ok()) status = ConvertEvent(fields_, header_, e);
  if (!status.ok()) return FailEvent(kind_name, status);
  status = sink_.OnEvent(e);
  if (!status.ok()) return Fail(status);
  ++event_index_;
  state_ = State::kEventsArray;
  return true;
}

bool TraceSaxHandler::EndTopObject() {
  state_ = State::kEnd;
  if (events_seen_) return true;
  if (Status other = RejectOtherFileKind(file_, header_values_); !other.ok()) {
    status_ = other;  // it names the file
    return false;
  }
  // Header errors first: a trace of another version may lack "events" for a reason.
  Status status = ConvertHeaderValues(header_values_, header_);
  if (!status.ok()) return Fail(WithPrefix("header: ", status));
  return Fail(InvalidTrace("missing key 'events' (the array of events, the last key of a trace)"));
}

bool TraceSaxHandler::NotAllowedHere(JsonType type) {
  switch (state_) {
    case State::kStart:
      return Fail(InvalidTrace(
          fmt::format("the top-level value must be an object, got {}", TypeName(type))));
    case State::kEventsValue:
      return Fail(InvalidTrace(fmt::format("'events' must be an array, got {}", TypeName(type))));
    case State::kEventsArray:
      return Fail(InvalidTrace(
          fmt::format("event {}: must be an object, got {}", event_index_, TypeName(type))));
    default:
      return Fail(InvalidTrace(fmt::format("unexpected {}", TypeName(type))));
  }
}

std::string TraceSaxHandler::Where() const {
  return fmt::format("header: '{}': ", header_values_.empty() ? "" : header_values_.back().first);
}

bool TraceSaxHandler::Fail(const Status& status) {
  status_ = WithPrefix(fmt::format("{}: ", file_), status);
  return false;
}

bool TraceSaxHandler::FailEvent(std::string_view kind, const Status& status) {
  if (kind.empty()) return Fail(WithPrefix(fmt::format("event {}: ", event_index_), status));
  return Fail(WithPrefix(fmt::format("event {}: {}: ", event_index_, kind), status));
}

bool TraceSaxHandler::parse_error(std::size_t position, const std::string& /*last_token*/,
                                  const nlohmann::detail::exception& ex) {
  if (progress_.read_errno != 0) return false;  // an I/O error, which Finish reports
  // nlohmann counts the end of input as a character read.
  bool truncated = progress_.at_eof && position > progress_.bytes_read;
  if (truncated && !any_token_) {
    return Fail(InvalidTrace(progress_.bytes_read == 0 ? "the file is empty"
                                                       : "the file is empty (only whitespace)"));
  }
  // "[json.exception.parse_error.101] parse error at line 1, column 1: syntax error while ..."
  std::string_view text = ex.what();
  if (std::size_t p = text.find("] "); p != std::string_view::npos) text.remove_prefix(p + 2);
  std::string location = fmt::format("byte {}", position);
  constexpr std::string_view kAt = "parse error at ";
  if (text.starts_with(kAt)) {
    std::size_t colon = text.find(": ");
    if (colon != std::string_view::npos) {
      location = std::string(text.substr(kAt.size(), colon - kAt.size()));
      text.remove_prefix(colon + 2);
    }
  }
  std::string where = WhereInDocument();
  if (truncated) {
    return Fail(
        InvalidTrace(fmt::format("truncated: unexpected end of input at {}{}", location, where)));
  }
  constexpr std::string_view kSyntax = "syntax error ";
  if (text.starts_with(kSyntax)) {
    text.remove_prefix(kSyntax.size());
    return Fail(
        InvalidTrace(fmt::format("not JSON: syntax error at {}: {}{}", location, text, where)));
  }
  return Fail(InvalidTrace(fmt::format("not JSON: {} at {}{}", text, location, where)));
}

std::string TraceSaxHandler::WhereInDocument() const {
  switch (state_) {
    case State::kStart:
      return "";
    case State::kEventsArray:
    case State::kEventKey:
    case State::kEventValue:
    case State::kSkip:
      return fmt::format(" (while reading event {})", event_index_);
    case State::kEnd:
      return " (after the top-level object)";
    default:
      return events_seen_ ? " (after the events)" : " (while reading the header)";
  }
}

bool TraceSaxHandler::FailScan(const json::ScanError& error) {
  std::string where = WhereInDocument();
  switch (error.kind) {
    case json::ScanError::Kind::kTruncated:
      return Fail(
          InvalidTrace(fmt::format("truncated: unexpected end of input at line {}, column {}{}",
                                   error.line, error.column, where)));
    case json::ScanError::Kind::kSyntax:
      return Fail(InvalidTrace(fmt::format("not JSON: syntax error at line {}, column {}: {}{}",
                                           error.line, error.column, error.text, where)));
    case json::ScanError::Kind::kOverflow:
      break;
  }
  // As the SAX path words nlohmann's out_of_range errors.
  return Fail(
      InvalidTrace(fmt::format("not JSON: {} at byte {}{}", error.text, error.byte, where)));
}

// Stores a number the way the SAX callbacks do.
void StoreNumber(const json::Number& number, Scalar& slot) {
  switch (number.kind) {
    case json::Number::Kind::kUnsigned:
      slot.type = JsonType::kUint;
      slot.unsigned_integer = number.unsigned_value;
      return;
    case json::Number::Kind::kInteger:
      slot.type = JsonType::kInt;
      slot.integer = number.integer_value;
      return;
    case json::Number::Kind::kFloat:
      slot.type = JsonType::kFloat;
      slot.number = number.float_value;
      return;
  }
}

// The hot path: a flat object of string keys and scalar values, lexed in place. The grammar and
// the messages are those of nlohmann's parser; the fields go to the same EventFields as the SAX
// callbacks would put them in, and EndEvent converts and checks them.
json::Lex TraceSaxHandler::ParseEvent(json::Scanner& scan, const char*& pp) {
  using json::Lex;
  using json::Scanner;
  using json::Token;
  fields_.Reset();
  const char* p = Scanner::SkipSpace(pp + 1);
  if (*p == '}') {
    pp = p + 1;
    return Lex::kOk;
  }
  for (;;) {
    if (*p != '"') return scan.Unexpected(p, "object key", Token::kString);
    std::string_view key;
    Lex r = scan.String(p, key);
    if (r != Lex::kOk) return r == Lex::kError ? scan.Context("object key", Token::kString) : r;
    p = Scanner::SkipSpace(p);
    if (*p != ':') return scan.Unexpected(p, "object separator", Token::kColon);
    p = Scanner::SkipSpace(p + 1);
    Scalar& slot = fields_.SlotFor(key);
    switch (*p) {
      case '"': {
        std::string_view text;
        r = scan.String(p, text);
        if (r == Lex::kOk) {
          slot.type = JsonType::kString;
          slot.text.assign(text);
        }
        break;
      }
      case '-':
      case '0':
      case '1':
      case '2':
      case '3':
      case '4':
      case '5':
      case '6':
      case '7':
      case '8':
      case '9': {
        json::Number number;
        r = scan.NumberValue(p, number);
        if (r == Lex::kOk) StoreNumber(number, slot);
        break;
      }
      case 't':
      case 'f':
      case 'n': {
        Token literal = Token::kNone;
        r = scan.Literal(p, literal);
        if (r == Lex::kOk) {
          slot.type = literal == Token::kNull ? JsonType::kNull : JsonType::kBool;
          slot.boolean = literal == Token::kTrue;
        }
        break;
      }
      case '{':
      case '[':
        // Reported as the field's type once the event is complete, like the SAX path does.
        slot.type = *p == '{' ? JsonType::kObject : JsonType::kArray;
        r = scan.SkipValue(p);
        break;
      default:
        return scan.Unexpected(p, "value", Token::kLiteralOrValue,
                               /*expected_after_lexical_error=*/false);
    }
    if (r != Lex::kOk) return r == Lex::kError ? scan.Context("value", Token::kNone) : r;
    p = Scanner::SkipSpace(p);
    if (*p == ',') {
      p = Scanner::SkipSpace(p + 1);
      continue;
    }
    if (*p == '}') {
      pp = p + 1;
      return Lex::kOk;
    }
    return scan.Unexpected(p, "object", Token::kEndObject);
  }
}

json::Lex TraceSaxHandler::NotAnEvent(json::Scanner& scan, const char* p) {
  using json::Lex;
  using json::Token;
  const char* q = p;
  Token token = Token::kNone;
  Lex r;
  if (*q == '-' || (*q >= '0' && *q <= '9')) {
    json::Number number;
    token = Token::kNumber;
    r = scan.NumberValue(q, number);
  } else {
    r = scan.AnyToken(q, token);
  }
  if (r == Lex::kMore) return r;
  if (r == Lex::kError) return scan.Context("value", Token::kNone);
  JsonType type;
  switch (token) {
    case Token::kBeginArray:
      type = JsonType::kArray;
      break;
    case Token::kString:
      type = JsonType::kString;
      break;
    case Token::kNumber:
      type = JsonType::kFloat;
      break;
    case Token::kTrue:
    case Token::kFalse:
      type = JsonType::kBool;
      break;
    case Token::kNull:
      type = JsonType::kNull;
      break;
    default:
      return scan.Unexpected(p, "value", Token::kLiteralOrValue,
                             /*expected_after_lexical_error=*/false);
  }
  any_token_ = true;
  NotAllowedHere(type);
  return Lex::kError;
}

bool TraceSaxHandler::ParseEvents(json::InputBuffer& in) {
  using json::Lex;
  using json::Scanner;
  using json::Token;
  enum class Step {
    kFirst,        // after '[': an event or ']'
    kEvent,        // after ',': an event
    kCommaOrEnd,   // after an event: ',' or ']'
    kAfterEvents,  // after ']': '}' or ','
    kTopKey,       // after ',' that follows the events: a key, which is an error
    kEnd,          // after the top-level '}': nothing but whitespace
  };
  handed_off_ = false;
  json::Scanner scan(in);
  Step step = Step::kFirst;
  const char* p = in.cur;
  for (;;) {
    // Each step either completes, or returns kMore before it has changed anything, to be
    // restarted from `checkpoint` once the buffer holds more.
    const char* checkpoint = p;
    Lex r = Lex::kOk;
    switch (step) {
      case Step::kFirst:
      case Step::kEvent:
        p = Scanner::SkipSpace(p);
        if (*p == '{') {
          r = ParseEvent(scan, p);
          if (r == Lex::kOk) {
            if (!EndEvent()) return false;
            step = Step::kCommaOrEnd;
          }
        } else if (*p == ']' && step == Step::kFirst) {
          ++p;
          state_ = State::kTopKey;
          step = Step::kAfterEvents;
        } else {
          r = NotAnEvent(scan, p);
        }
        break;
      case Step::kCommaOrEnd:
        p = Scanner::SkipSpace(p);
        if (*p == ',') {
          ++p;
          step = Step::kEvent;
        } else if (*p == ']') {
          ++p;
          state_ = State::kTopKey;
          step = Step::kAfterEvents;
        } else {
          r = scan.Unexpected(p, "array", Token::kEndArray);
        }
        break;
      case Step::kAfterEvents:
        p = Scanner::SkipSpace(p);
        if (*p == '}') {
          ++p;
          state_ = State::kEnd;
          step = Step::kEnd;
        } else if (*p == ',') {
          ++p;
          step = Step::kTopKey;
        } else {
          r = scan.Unexpected(p, "object", Token::kEndObject);
        }
        break;
      case Step::kTopKey: {
        p = Scanner::SkipSpace(p);
        if (*p != '"') {
          r = scan.Unexpected(p, "object key", Token::kString);
          break;
        }
        std::string_view key;
        r = scan.String(p, key);
        if (r == Lex::kOk) return TopKey(std::string(key));  // a key after "events": an error
        if (r == Lex::kError) r = scan.Context("object key", Token::kString);
        break;
      }
      case Step::kEnd:
        p = Scanner::SkipSpace(p);
        if (*p == '\0') {
          // nlohmann reads a NUL byte as the end of the input, too.
          if (p != in.end || in.eof) return true;
          r = Lex::kMore;
        } else {
          r = scan.Unexpected(p, "value", Token::kEndOfInput);
        }
        break;
    }
    if (r == Lex::kOk) continue;
    if (r == Lex::kError) return status_.ok() ? FailScan(scan.error()) : false;
    in.Refill(checkpoint);
    p = in.cur;
  }
}

Status TraceSaxHandler::Finish(bool parsed) {
  if (progress_.read_errno != 0) {
    return IoError(fmt::format("cannot read '{}': {}", file_, std::strerror(progress_.read_errno)));
  }
  if (!status_.ok()) return status_;
  if (!parsed || state_ != State::kEnd) {
    return {StatusCode::kInternal, fmt::format("{}: the JSON parser stopped early", file_)};
  }
  Status status = sink_.OnEnd();
  if (!status.ok()) return WithPrefix(fmt::format("{}: ", file_), status);
  return Status::Ok();
}

// Parses the trace in `file` (not owned) or, when it is null, `text`, and turns whatever escapes
// into a Status: nothing throws past here.
Status RunParse(std::string_view display_name, std::FILE* file, std::string_view text,
                std::size_t chunk_bytes, TraceHeader& header, EventSink& sink,
                const ReadProgress& on_read = {}) {
  header = TraceHeader();
  try {
    InputProgress progress;
    progress.on_read = on_read;
    json::InputBuffer in(file, text, chunk_bytes, progress);
    TraceSaxHandler handler(display_name, progress, header, sink);
    bool parsed = Json::sax_parse(json::InputIterator(&in), json::InputIterator(), &handler);
    if (handler.handed_off()) parsed = handler.ParseEvents(in);
    if (parsed) {
      // The digest is of every byte, also those after a NUL the parser stops at.
      in.ReadRest();
      if (progress.read_errno == 0) {
        header.content_digest = fmt::format("fnv1a64:{:016x}", progress.fnv1a64);
      }
    }
    return handler.Finish(parsed);
  } catch (const std::bad_alloc&) {
    return {StatusCode::kInternal, fmt::format("{}: out of memory while reading", display_name)};
  } catch (const std::exception& e) {
    return {StatusCode::kInternal, fmt::format("{}: {}", display_name, e.what())};
  }
}

}  // namespace

namespace internal {

Status ReadTraceFromStringInChunks(std::string_view text, std::string_view display_name,
                                   TraceHeader& header, EventSink& sink, std::size_t chunk_bytes) {
  return RunParse(display_name, nullptr, text, chunk_bytes, header, sink);
}

}  // namespace internal

Status ReadTraceFromString(std::string_view text, std::string_view display_name,
                           TraceHeader& header, EventSink& sink) {
  // One read takes it all (a small string needs no 1 MiB buffer).
  std::size_t chunk_bytes =
      std::min(std::max<std::size_t>(text.size(), 1), json::InputBuffer::kDefaultChunkBytes);
  return RunParse(display_name, nullptr, text, chunk_bytes, header, sink);
}

Status ReadTrace(const std::string& path, TraceHeader& header, EventSink& sink) {
  return ReadTrace(path, header, sink, {});
}

Status ReadTrace(const std::string& path, TraceHeader& header, EventSink& sink,
                 const ReadProgress& on_read) {
  bool is_stdin = path == "-";
  if (!is_stdin) BUCKETSIM_RETURN_IF_ERROR(RejectDirectory(path, "trace"));
  std::FILE* file = is_stdin ? stdin : std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return IoError(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  }
  Status status = RunParse(is_stdin ? "<stdin>" : path, file, {},
                           json::InputBuffer::kDefaultChunkBytes, header, sink, on_read);
  if (!is_stdin) std::fclose(file);
  return status;
}

namespace {

// Ends the read at the header: OnHeader answers with an error the caller recognises by `stopped`.
class HeaderOnly final : public EventSink {
 public:
  Status OnHeader(const TraceHeader& /*header*/) override {
    stopped = true;
    return Status(StatusCode::kInternal, "header read; events not wanted");
  }
  Status OnEvent(const Event& /*event*/) override { return Status::Ok(); }
  Status OnEnd() override { return Status::Ok(); }
  bool stopped = false;
};

}  // namespace

Result<TraceHeader> ReadTraceHeader(const std::string& path) {
  if (path == "-") return InvalidArgument("the header of standard input cannot be read ahead");
  TraceHeader header;
  HeaderOnly sink;
  Status status = ReadTrace(path, header, sink);
  if (sink.stopped) return header;
  if (!status.ok()) return status;
  return header;
}

}  // namespace bucketsim
