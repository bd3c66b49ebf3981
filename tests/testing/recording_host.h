// A PolicyHost that records what a policy does, in order, as readable lines, and keeps the
// buffers' reference counts and live bytes. Policy tests assert on both: the exact sequence
// fairscale performs and the bytes alive after each step.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "policy/bucket_policy.h"

namespace bucketsim::testing {

class RecordingHost final : public PolicyHost {
 public:
  BufferId Allocate(Bytes bytes, Category category, DType dtype, GroupId group) override;
  // Logged as "stage BYTES #id" (and "unstage #id" at its release), never in the live bytes.
  BufferId Stage(Bytes bytes, DType dtype, GroupId group) override;
  void Release(BufferId buffer) override;
  void Relabel(BufferId buffer, Category category) override;
  // Data movement goes to moves(), not log(): the log is the allocation sequence. Each checks
  // that the buffers it touches are alive and large enough.
  void FillGradient(const GradientFill& fill) override;
  void Copy(const BufferCopy& copy) override;
  void Collective(const CollectiveRecord& record, const CollectiveBuffers& buffers) override;
  // Records the delivery; a kView delivery takes a reference, like a gradient view would.
  void Deliver(const ReduceScatterCall& call, BufferId reduced) override;

  // Drops every reference taken by kView deliveries: zero_grad(set_to_none=True).
  void DropGradients();

  const std::vector<std::string>& log() const { return log_; }
  std::vector<std::string> TakeLog() { return std::exchange(log_, {}); }
  const std::vector<CollectiveRecord>& collectives() const { return collectives_; }
  const std::vector<std::string>& moves() const { return moves_; }
  Bytes live_bytes() const { return live_bytes_; }
  Bytes peak_bytes() const { return peak_bytes_; }
  Bytes live_bytes(Category category) const;
  int deliveries() const { return deliveries_; }

 private:
  struct Buffer {
    Bytes bytes = 0;
    Category category = Category::kOther;
    int refs = 0;
    bool staged = false;
  };
  std::vector<Buffer> buffers_;
  std::vector<BufferId> gradient_refs_;
  void CheckSpan(BufferHandle buffer, Bytes end, const char* what) const;

  std::vector<std::string> log_;
  std::vector<std::string> moves_;
  std::vector<CollectiveRecord> collectives_;
  Bytes live_bytes_ = 0;
  Bytes peak_bytes_ = 0;
  int deliveries_ = 0;
};

// A group object with the given id and members.
ProcessGroup MakeGroup(GroupId id, std::vector<int> ranks);
// A reduce-scatter request of `numel` elements per rank on `group`, for parameter `param` of
// FSDP instance `fsdp`, as trace event `index`.
ReduceScatterCall MakeCall(const ProcessGroup& group, Numel numel, DType dtype = DType::kFloat32,
                           ShardMode mode = ShardMode::kView, std::uint32_t param = 0,
                           std::uint32_t fsdp = 0, EventIndex index = 0);

}  // namespace bucketsim::testing
