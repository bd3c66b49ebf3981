#include "engine/replay_policies.h"

#include "backend/sim/sim_backend.h"
#include "memory/exact_memory_model.h"

namespace bucketsim {
namespace {

// Creates the replays when the header arrives (a policy's cap may come from it) and hands
// every event to each of them.
class PolicyFanout final : public EventSink {
 public:
  explicit PolicyFanout(const ReplayRequest& request) : request_(request) {}

  Status OnHeader(const TraceHeader& header) override {
    for (std::size_t i = 0; i < request_.policies.size(); ++i) {
      const PolicySpec& spec = request_.policies[i];
      ReplayOptions options = request_.options;
      options.keep_timeline = options.keep_timeline || request_.timeline_policy == i;
      std::unique_ptr<MemoryModel> memory = std::make_unique<ExactMemoryModel>();
      if (request_.make_memory_model) {
        Result<std::unique_ptr<MemoryModel>> made = request_.make_memory_model(header);
        if (!made.ok()) return made.status();
        memory = std::move(*made);
      }
      replays_.push_back(std::make_unique<Replay>(
          spec, ResolveBucketCap(spec, request_.bucket_cap_mb, header), std::move(memory),
          request_.make_backend ? request_.make_backend() : std::make_unique<SimBackend>(),
          options));
      BUCKETSIM_RETURN_IF_ERROR(replays_.back()->OnHeader(header));
    }
    return Status::Ok();
  }

  Status OnEvent(const Event& event) override {
    for (auto& replay : replays_) BUCKETSIM_RETURN_IF_ERROR(replay->OnEvent(event));
    return Status::Ok();
  }

  Status OnEnd() override {
    for (auto& replay : replays_) BUCKETSIM_RETURN_IF_ERROR(replay->OnEnd());
    return Status::Ok();
  }

  std::vector<RunResult> TakeResults() {
    std::vector<RunResult> results;
    for (auto& replay : replays_) results.push_back(replay->TakeResult());
    return results;
  }

 private:
  const ReplayRequest& request_;
  std::vector<std::unique_ptr<Replay>> replays_;
};

}  // namespace

double ResolveBucketCap(const PolicySpec& spec, std::optional<double> override_mb,
                        const TraceHeader& header) {
  if (spec.cap_mb) return *spec.cap_mb;
  if (override_mb) return *override_mb;
  return header.bucket_cap_mb;
}

Result<ReplayOutcome> ReplayPolicies(const TraceSource& source, const ReplayRequest& request) {
  PolicyFanout fanout(request);
  TraceChecker checker(&fanout);
  ReplayOutcome outcome;
  BUCKETSIM_RETURN_IF_ERROR(source(outcome.header, checker));
  outcome.summary = checker.summary();
  outcome.runs = fanout.TakeResults();
  return outcome;
}

}  // namespace bucketsim
