#include "engine/replay_policies.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <limits>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "backend/sim/sim_backend.h"
#include "memory/exact_memory_model.h"

namespace bucketsim {
namespace {

std::vector<RunResult> TakeResults(std::vector<std::unique_ptr<Replay>>& replays) {
  std::vector<RunResult> results;
  for (auto& replay : replays) results.push_back(replay->TakeResult());
  return results;
}

// jobs == 1: hands every event to each replay on the calling thread.
class PolicyFanout final : public EventSink {
 public:
  explicit PolicyFanout(const ReplayRequest& request) : request_(request) {}

  Status OnHeader(const TraceHeader& header) override {
    Result<std::vector<std::unique_ptr<Replay>>> made = MakeReplays(request_, header);
    if (!made.ok()) return made.status();
    replays_ = std::move(*made);
    for (auto& replay : replays_) BUCKETSIM_RETURN_IF_ERROR(replay->OnHeader(header));
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

  Status Finish(Status source_status) { return source_status; }
  std::vector<RunResult> TakeResults() { return bucketsim::TakeResults(replays_); }

 private:
  const ReplayRequest& request_;
  std::vector<std::unique_ptr<Replay>> replays_;
};

// Checked events in trace order, and the names of marks among them that no batch has carried
// yet, by their index in the reader's header. A replay reads no other name: the header's `names`
// grow while the trace streams in, by one per compute span of a deep model (64,000 at 2000
// blocks), which the workers need not copy.
struct EventBatch {
  std::vector<std::pair<std::uint32_t, std::string>> new_mark_names;
  std::vector<Event> events;
};
using BatchPtr = std::shared_ptr<const EventBatch>;

// A bounded single-producer, single-consumer queue of batches; null closes it.
class BatchQueue {
 public:
  explicit BatchQueue(std::size_t capacity) : capacity_(capacity) {}

  void Push(BatchPtr batch) {
    std::unique_lock<std::mutex> lock(mutex_);
    not_full_.wait(lock, [this] { return batches_.size() < capacity_; });
    batches_.push_back(std::move(batch));
    not_empty_.notify_one();
  }

  BatchPtr Pop() {
    std::unique_lock<std::mutex> lock(mutex_);
    not_empty_.wait(lock, [this] { return !batches_.empty(); });
    BatchPtr batch = std::move(batches_.front());
    batches_.pop_front();
    not_full_.notify_one();
    return batch;
  }

 private:
  const std::size_t capacity_;
  std::mutex mutex_;
  std::condition_variable not_full_;
  std::condition_variable not_empty_;
  std::deque<BatchPtr> batches_;
};

// Where a replay failed, ordered as a serial run meets failures: by event, then by policy.
struct Failure {
  static constexpr EventIndex kAtEnd = std::numeric_limits<EventIndex>::max();
  EventIndex event = kAtEnd;
  std::size_t policy = 0;
  Status status;

  bool Before(const Failure& other) const {
    return event != other.event ? event < other.event : policy < other.policy;
  }
};

// One thread replaying a share of the policies.
class Worker {
 public:
  Worker(const TraceHeader& header, std::size_t queue_capacity)
      : header_(header), queue_(queue_capacity) {
    header_.names.clear();  // the marks' names come with the batches
  }

  void Add(std::size_t policy, std::unique_ptr<Replay> replay) {
    policies_.push_back(policy);
    replays_.push_back(std::move(replay));
  }
  // On the reader's thread, before Start: the replays keep a pointer to this worker's header.
  Status StartReplays() {
    for (std::size_t i = 0; i < replays_.size(); ++i) {
      Status status = replays_[i]->OnHeader(header_);
      if (!status.ok()) return status;
    }
    return Status::Ok();
  }
  void Start() {
    thread_ = std::thread([this] { Run(); });
  }
  void Push(BatchPtr batch) { queue_.Push(std::move(batch)); }
  // Closes the queue; `ended`: the trace was read to its end, so the replays end too.
  void Close(bool ended) {
    ended_ = ended;
    queue_.Push(nullptr);
    thread_.join();
  }

  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  const std::optional<Failure>& failure() const { return failure_; }
  std::unique_ptr<Replay> Take(std::size_t i) { return std::move(replays_[i]); }
  const std::vector<std::size_t>& policies() const { return policies_; }

 private:
  void Run() {
    while (BatchPtr batch = queue_.Pop()) {
      if (failure_) continue;  // drain, so that the reader never blocks on a failed worker
      for (const auto& [index, name] : batch->new_mark_names) {
        mark_names_[index] = static_cast<std::uint32_t>(header_.names.size());
        header_.names.push_back(name);
      }
      for (const Event& event : batch->events) {
        if (!ReplayEvent(event.kind == EventKind::kMark ? LocalMark(event) : event)) break;
      }
    }
    if (!ended_ || failure_) return;
    for (std::size_t i = 0; i < replays_.size(); ++i) {
      Status status = replays_[i]->OnEnd();
      if (!status.ok()) {
        Fail({Failure::kAtEnd, policies_[i], status});
        return;
      }
    }
  }

  bool ReplayEvent(const Event& event) {
    for (std::size_t i = 0; i < replays_.size(); ++i) {
      Status status = replays_[i]->OnEvent(event);
      if (!status.ok()) {
        Fail({event.index, policies_[i], status});
        return false;
      }
    }
    return true;
  }

  // `mark` with its name's index in this worker's header.
  Event LocalMark(const Event& mark) const {
    Event local = mark;
    local.name = mark_names_.at(mark.name);
    return local;
  }

  void Fail(Failure failure) {
    failure_ = std::move(failure);
    failed_.store(true, std::memory_order_relaxed);
  }

  TraceHeader header_;                                           // names: only the marks'
  std::unordered_map<std::uint32_t, std::uint32_t> mark_names_;  // reader's index -> header_'s
  BatchQueue queue_;
  std::vector<std::size_t> policies_;
  std::vector<std::unique_ptr<Replay>> replays_;
  std::thread thread_;
  bool ended_ = false;
  std::optional<Failure> failure_;  // owned by the worker's thread until Close returns
  std::atomic<bool> failed_{false};
};

// jobs > 1: the calling thread reads and checks; workers replay.
class ParallelFanout final : public EventSink {
 public:
  // Events per batch: large enough that a queue operation costs nothing per event, small enough
  // that the batches in flight (kQueueCapacity per worker, shared) stay around a megabyte.
  static constexpr std::size_t kBatchEvents = 4096;
  static constexpr std::size_t kQueueCapacity = 4;

  ParallelFanout(const ReplayRequest& request, unsigned workers)
      : request_(request), num_workers_(workers) {}

  ~ParallelFanout() override {
    for (auto& worker : workers_) {
      if (worker->started) worker->worker.Close(false);
    }
  }

  Status OnHeader(const TraceHeader& header) override {
    header_ = &header;
    Result<std::vector<std::unique_ptr<Replay>>> made = MakeReplays(request_, header);
    if (!made.ok()) return made.status();
    num_policies_ = made->size();
    for (unsigned w = 0; w < num_workers_; ++w) {
      workers_.push_back(std::make_unique<Slot>(header));
    }
    for (std::size_t i = 0; i < made->size(); ++i) {
      workers_[i % num_workers_]->worker.Add(i, std::move((*made)[i]));
    }
    for (auto& slot : workers_) {
      BUCKETSIM_RETURN_IF_ERROR(slot->worker.StartReplays());
    }
    for (auto& slot : workers_) {
      slot->worker.Start();
      slot->started = true;
    }
    batch_ = std::make_shared<EventBatch>();
    batch_->events.reserve(kBatchEvents);
    return Status::Ok();
  }

  Status OnEvent(const Event& event) override {
    if (event.kind == EventKind::kMark) SendName(event.name);
    batch_->events.push_back(event);
    if (batch_->events.size() < kBatchEvents) return Status::Ok();
    Publish();
    for (auto& slot : workers_) {
      // Stop reading: the failure (or an earlier one) is what the run returns.
      if (slot->worker.failed()) return Status(StatusCode::kInternal, "a replay failed");
    }
    return Status::Ok();
  }

  Status OnEnd() override {
    Publish();
    ended_ = true;
    return Status::Ok();
  }

  // After the source returned: closes the queues and returns the error a serial run would have
  // stopped at, if any.
  Status Finish(Status source_status) {
    std::optional<Failure> first;
    for (auto& slot : workers_) {
      if (slot->started) slot->worker.Close(ended_ && source_status.ok());
      slot->started = false;
      const std::optional<Failure>& failure = slot->worker.failure();
      if (failure && (!first || failure->Before(*first))) first = failure;
    }
    // Every event the reader checked before its own error was replayed: a replay's failure
    // comes first in a serial run.
    if (first) return first->status;
    return source_status;
  }

  std::vector<RunResult> TakeResults() {
    std::vector<std::unique_ptr<Replay>> replays(num_policies_);
    for (auto& slot : workers_) {
      const std::vector<std::size_t>& policies = slot->worker.policies();
      for (std::size_t i = 0; i < policies.size(); ++i) {
        replays[policies[i]] = slot->worker.Take(i);
      }
    }
    return bucketsim::TakeResults(replays);
  }

 private:
  struct Slot {
    explicit Slot(const TraceHeader& header) : worker(header, kQueueCapacity) {}
    Worker worker;
    bool started = false;
  };

  void SendName(std::uint32_t name) {
    if (name >= name_sent_.size()) name_sent_.resize(name + 1, false);
    if (name_sent_[name]) return;
    name_sent_[name] = true;
    batch_->new_mark_names.emplace_back(name, header_->names[name]);
  }

  void Publish() {
    if (batch_->events.empty()) return;
    BatchPtr published = std::move(batch_);
    for (auto& slot : workers_) slot->worker.Push(published);
    batch_ = std::make_shared<EventBatch>();
    batch_->events.reserve(kBatchEvents);
  }

  const ReplayRequest& request_;
  const unsigned num_workers_;
  const TraceHeader* header_ = nullptr;
  std::size_t num_policies_ = 0;
  std::vector<bool> name_sent_;  // by the reader's name index: carried by a batch already
  std::vector<std::unique_ptr<Slot>> workers_;
  std::shared_ptr<EventBatch> batch_;
  bool ended_ = false;
};

// The worker threads of a parallel run; 0: a serial run. With two threads or more the calling
// thread reads and checks while the workers replay, so even one policy gains a thread: its replay
// runs beside the reading and checking of the events after it (`check` with one policy).
unsigned Workers(const ReplayRequest& request) {
  unsigned jobs = request.jobs;
  if (jobs == 0) jobs = std::max(1u, std::thread::hardware_concurrency());
  if (jobs <= 1) return 0;
  return static_cast<unsigned>(std::min<std::size_t>(jobs, request.policies.size()));
}

template <typename Fanout>
Result<ReplayOutcome> Run(const TraceSource& source, Fanout& fanout) {
  TraceChecker checker(&fanout);
  ReplayOutcome outcome;
  BUCKETSIM_RETURN_IF_ERROR(fanout.Finish(source(outcome.header, checker)));
  outcome.summary = checker.summary();
  outcome.runs = fanout.TakeResults();
  return outcome;
}

}  // namespace

Result<std::vector<std::unique_ptr<Replay>>> MakeReplays(const ReplayRequest& request,
                                                         const TraceHeader& header) {
  std::vector<std::unique_ptr<Replay>> replays;
  std::optional<DeviceBudget> device;
  if (request.device_budget) {
    Result<std::optional<DeviceBudget>> budget = request.device_budget(header);
    if (!budget.ok()) return budget.status();
    device = *budget;
  }
  for (std::size_t i = 0; i < request.policies.size(); ++i) {
    const PolicySpec& spec = request.policies[i];
    ReplayOptions options = request.options;
    options.device = device;
    const bool timeline = request.timeline_policy == i;
    options.keep_timeline = options.keep_timeline || timeline;
    options.keep_collective_log = options.keep_collective_log || timeline;
    if (i < request.memory_events.size()) options.memory_events = request.memory_events[i];
    std::unique_ptr<MemoryModel> memory = std::make_unique<ExactMemoryModel>();
    if (request.make_memory_model) {
      Result<std::unique_ptr<MemoryModel>> made = request.make_memory_model(header);
      if (!made.ok()) return made.status();
      memory = std::move(*made);
    }
    replays.push_back(std::make_unique<Replay>(
        spec, ResolveBucketCap(spec, request.bucket_cap_mb, header), std::move(memory),
        request.make_backend ? request.make_backend() : std::make_unique<SimBackend>(), options));
  }
  return replays;
}

double ResolveBucketCap(const PolicySpec& spec, std::optional<double> override_mb,
                        const TraceHeader& header) {
  if (spec.cap_mb) return *spec.cap_mb;
  if (override_mb) return *override_mb;
  return header.bucket_cap_mb;
}

Result<ReplayOutcome> ReplayPolicies(const TraceSource& source, const ReplayRequest& request) {
  const unsigned workers = Workers(request);
  if (workers == 0) {
    PolicyFanout fanout(request);
    return Run(source, fanout);
  }
  ParallelFanout fanout(request, workers);
  return Run(source, fanout);
}

}  // namespace bucketsim
