#include "core/trace_header.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace bucketsim {
namespace {

// A world this large is a corrupt header, not a cluster.
constexpr int kMaxWorldSize = 1 << 20;

Status ValidateGroup(const ProcessGroup& group, int world_size, int rank) {
  if (group.ranks.empty()) return InvalidTrace(fmt::format("group {}: no member ranks", group.id));
  if (group.size() > world_size) {
    return InvalidTrace(fmt::format("group {}: {} members but world_size is {}", group.id,
                                    group.size(), world_size));
  }
  std::unordered_set<int> seen;
  bool has_self = false;
  for (int r : group.ranks) {
    if (r < 0 || r >= world_size) {
      return InvalidTrace(
          fmt::format("group {}: rank {} is outside world_size {}", group.id, r, world_size));
    }
    if (!seen.insert(r).second) {
      return InvalidTrace(fmt::format("group {}: rank {} is listed twice", group.id, r));
    }
    has_self = has_self || r == rank;
  }
  if (!has_self) {
    return InvalidTrace(fmt::format(
        "group {}: does not contain this trace's rank {} (a trace lists the groups its rank is in)",
        group.id, rank));
  }
  return Status::Ok();
}

}  // namespace

int TraceHeader::WrittenSchemaVersion() const {
  const bool v4 = fsdp_impl.has_value() || !fsdp_setting.empty();
  int version = v4 ? std::max(schema_version, kImplSchemaVersion) : schema_version;
  if (replicate_group) version = std::max(version, kCollectivesSchemaVersion);
  return version;
}

Status TraceHeader::Finalize() {
  if (schema_version < kOldestTraceSchemaVersion || schema_version > kTraceSchemaVersion) {
    return InvalidTrace(
        fmt::format("schema_version {} is not supported (this build reads {} to {})",
                    schema_version, kOldestTraceSchemaVersion, kTraceSchemaVersion));
  }
  if (world_size < 1 || world_size > kMaxWorldSize) {
    return InvalidTrace(fmt::format("world_size {} is outside [1, {}]", world_size, kMaxWorldSize));
  }
  if (rank < 0 || rank >= world_size) {
    return InvalidTrace(fmt::format("rank {} is outside world_size {}", rank, world_size));
  }
  if (!std::isfinite(bucket_cap_mb)) return InvalidTrace("bucket_cap_mb is not a finite number");
  if (streams.empty()) streams.push_back({"default"});

  post_backward_stream_ = 0;
  std::optional<StreamId> reduce_scatter;
  for (std::size_t s = 0; s < streams.size(); ++s) {
    if (streams[s].name == "post_backward") post_backward_stream_ = static_cast<StreamId>(s);
    if (streams[s].name == "reduce_scatter") reduce_scatter = static_cast<StreamId>(s);
  }
  collective_stream_ = reduce_scatter.value_or(post_backward_stream_);

  group_index_.clear();
  for (std::size_t g = 0; g < groups.size(); ++g) {
    BUCKETSIM_RETURN_IF_ERROR(ValidateGroup(groups[g], world_size, rank));
    if (!group_index_.emplace(groups[g].id, g).second) {
      return InvalidTrace(fmt::format("group id {} is defined twice", groups[g].id));
    }
  }

  if (replicate_group) {
    const ProcessGroup* replicas = FindGroup(*replicate_group);
    if (replicas == nullptr) {
      return InvalidTrace(
          fmt::format("replicate_group {} is not declared in 'groups'", *replicate_group));
    }
  }

  param_base_.clear();
  num_params_ = 0;
  for (std::size_t f = 0; f < units.size(); ++f) {
    param_base_.push_back(num_params_);
    for (std::size_t p = 0; p < units[f].params.size(); ++p) {
      const ParamInfo& param = units[f].params[p];
      if (param.numel == 0 || param.numel > kMaxSaneBytes / ElementSize(param.dtype)) {
        return InvalidTrace(fmt::format("fsdp {} ('{}') param {}: numel {} is out of range", f,
                                        units[f].name, p, param.numel));
      }
    }
    num_params_ += static_cast<std::uint32_t>(units[f].params.size());
  }

  name_index_.clear();
  for (std::size_t i = 0; i < names.size(); ++i) {
    name_index_.emplace(names[i], static_cast<std::uint32_t>(i));
  }
  return Status::Ok();
}

const ProcessGroup* TraceHeader::FindGroup(GroupId id) const {
  auto it = group_index_.find(id);
  return it == group_index_.end() ? nullptr : &groups[it->second];
}

std::uint32_t TraceHeader::Intern(std::string_view name) {
  if (previous_name_ < next_name_.size()) {
    const std::uint32_t guess = next_name_[previous_name_];
    if (guess < names.size() && names[guess] == name) return InternFollowing(guess);
  }
  auto it = name_index_.find(name);
  if (it != name_index_.end()) return InternFollowing(it->second);
  auto index = static_cast<std::uint32_t>(names.size());
  names.emplace_back(name);
  name_index_.emplace(names.back(), index);
  return InternFollowing(index);
}

std::uint32_t TraceHeader::InternFollowing(std::uint32_t index) {
  if (previous_name_ != kNoName) {
    if (previous_name_ >= next_name_.size()) next_name_.resize(names.size(), kNoName);
    next_name_[previous_name_] = index;
  }
  previous_name_ = index;
  return index;
}

Result<int> GroupPosition(const ProcessGroup& group, int world_rank) {
  auto it = std::find(group.ranks.begin(), group.ranks.end(), world_rank);
  if (it == group.ranks.end()) {
    return InvalidTrace(fmt::format(
        "process group {} (ranks [{}]) does not contain this process's rank {}: the trace "
        "describes another rank; give each rank its own trace ('{{rank}}' in the path)",
        group.id, fmt::join(group.ranks, ", "), world_rank));
  }
  return static_cast<int>(it - group.ranks.begin());
}

}  // namespace bucketsim
