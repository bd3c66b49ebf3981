// The part of a trace that comes before its events: who this rank is, its streams, its process
// groups and its FSDP instances with their parameters. A TraceHeader is built by the reader (or
// the generator) and then `Finalize`d, which validates it and builds the indexes the replay
// looks things up in. `names` grows while events stream in (mark and span names are interned
// there), so sinks keep a pointer to the header rather than a copy.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/fsdp_impl.h"
#include "core/status.h"
#include "core/units.h"

namespace bucketsim {

// This build reads 1 to 5 (2 added record_stream, sync and empty_cache; 3 added the observed
// events of imported PyTorch snapshots, time_us and alloc_conf; 4 added fsdp_impl and
// fsdp_setting; 5 added the framework's own collectives: all_gather and all_reduce events and
// replicate_group; 6 added rs shard "no_grad"). It writes 3 unless the header uses a key of 4 or
// asks for more, so that a trace of fairscale's FSDP stays byte for byte what it was
// (TraceHeader::WrittenSchemaVersion).
inline constexpr int kTraceSchemaVersion = 6;
inline constexpr int kOldestTraceSchemaVersion = 1;
inline constexpr int kImplSchemaVersion = 4;
inline constexpr int kCollectivesSchemaVersion = 5;
inline constexpr int kNoGradSchemaVersion = 6;

struct StreamInfo {
  std::string name;  // "default", "all_gather", "post_backward", ...; the id is the index
};

// A process-group *object*. Two objects with the same members are two groups: that is what
// fairscale's bucket key sees (it hashes the object), and what per-group-dedup undoes.
struct ProcessGroup {
  GroupId id = 0;
  std::vector<int> ranks;  // global ranks, in group-rank order
  std::string name;
  int size() const { return static_cast<int>(ranks.size()); }
};

// `world_rank`'s position in `group` (its group rank), or an error naming the group: the trace
// describes another rank.
Result<int> GroupPosition(const ProcessGroup& group, int world_rank);

struct ParamInfo {
  std::string name;
  Numel numel = 0;  // unsharded element count of the (flat) parameter
  DType dtype = DType::kFloat32;
};

struct UnitInfo {
  std::string name;
  std::vector<ParamInfo> params;
};

struct TraceHeader {
  int schema_version = kImplSchemaVersion - 1;
  int world_size = 1;
  int rank = 0;
  double bucket_cap_mb = 25.0;  // the root FSDP instance's cap: the run's default
  std::vector<StreamInfo> streams;
  std::vector<ProcessGroup> groups;
  std::vector<UnitInfo> units;     // the trace's "fsdp" key
  std::vector<std::string> names;  // interned mark and span names
  std::string description;
  // v3: the PYTORCH_CUDA_ALLOC_CONF the trace was recorded under (an imported snapshot's
  // allocator_settings); empty when unknown. The caching model's default for `validate`.
  std::string alloc_conf;
  // v4: whose FSDP the trace follows ("fairscale", "fsdp1", "fsdp2"; empty: not said, as in
  // every older trace) and its settings in that framework's own words
  // ("FullyShardedDataParallel(sharding_strategy=ShardingStrategy.FULL_SHARD, ...)"). compare
  // shows that implementation's own policy first; sweep's advice quotes the setting.
  std::optional<FsdpImpl> fsdp_impl;
  std::string fsdp_setting;
  // v5: HYBRID_SHARD (FSDP1) or an FSDP2 2-D mesh: after its reduce-scatter over the shard
  // group, every reduced gradient shard is all-reduced in place over this group (the rank's
  // replicas); the replay issues that all-reduce after each of the policy's reductions.
  std::optional<GroupId> replicate_group;
  // Not part of the format: "fnv1a64:<16 hex digits>" of every byte of the trace as read,
  // computed by the reader in the same pass (the value DescribeTrace gives a file); empty until
  // a reader has read the whole input.
  std::string content_digest;

  // Validates and builds the indexes. Messages name the offending header entry.
  Status Finalize();
  // The version a writer gives this header: at least 4 when it names its FSDP implementation,
  // 5 with a replicate group (and where schema_version says so: a trace with collectives).
  int WrittenSchemaVersion() const;

  const ProcessGroup* FindGroup(GroupId id) const;
  // The stream fairscale runs its reduce-scatters and allocates its buckets on: the stream
  // named "post_backward", else stream 0.
  StreamId post_backward_stream() const { return post_backward_stream_; }
  // The stream the framework's reduce-scatters run on: the stream named "reduce_scatter" (FSDP2's
  // reduce_scatter_stream, where nothing of a trace is allocated: 2.6 makes the reduce-scatter
  // input on the current stream), else the post-backward stream.
  StreamId collective_stream() const { return collective_stream_; }
  // Dense index of a parameter over all instances, for per-parameter state.
  std::uint32_t ParamIndex(std::uint32_t fsdp_index, std::uint32_t param) const {
    return param_base_[fsdp_index] + param;
  }
  std::uint32_t num_params() const { return num_params_; }
  // The index of `name` in `names`, added at the end if new. Traces name their spans in the same
  // order every iteration, so the name that followed the previous one last time is compared
  // first, and hashed only when it is not the one: a deep model's forward and backward name
  // tens of thousands of spans, and hashing each into a table that size was a seventh of a
  // `check`'s time.
  std::uint32_t Intern(std::string_view name);

 private:
  static constexpr std::uint32_t kNoName = ~std::uint32_t{0};
  std::uint32_t InternFollowing(std::uint32_t index);  // after `previous_name_`
  std::vector<std::uint32_t> next_name_;   // by name: the one interned after it last time
  std::uint32_t previous_name_ = kNoName;  // the last one interned
  std::unordered_map<GroupId, std::size_t> group_index_;
  // Transparent hashing: Intern looks names up by string_view without building a string.
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view name) const {
      return std::hash<std::string_view>{}(name);
    }
  };
  std::unordered_map<std::string, std::uint32_t, NameHash, std::equal_to<>> name_index_;
  std::vector<std::uint32_t> param_base_;
  std::uint32_t num_params_ = 0;
  StreamId post_backward_stream_ = 0;
  StreamId collective_stream_ = 0;
};

}  // namespace bucketsim
