#include "engine/replay.h"

#include <algorithm>

#include <fmt/format.h>

#include "policy/make_policy.h"

namespace bucketsim {

Replay::Replay(PolicySpec spec, double bucket_cap_mb, std::unique_ptr<MemoryModel> memory,
               std::unique_ptr<Backend> backend, ReplayOptions options)
    : spec_(std::move(spec)),
      policy_(MakeBucketPolicy(spec_, bucket_cap_mb)),
      memory_(std::move(memory)),
      backend_(std::move(backend)),
      options_(options),
      ledger_(options.timeline_points) {
  result_.policy = spec_.name;
  result_.canonical = spec_.Canonical(bucket_cap_mb);
  result_.setting = FrameworkSetting(spec_, bucket_cap_mb);
  result_.bucket_cap_mb = bucket_cap_mb;
  result_.memory_model = std::string(memory_->name());
  result_.backend = std::string(backend_->name());
  result_.device = options_.device;
  if (options_.keep_timeline) result_.stream_timeline.emplace();
  backend_->set_list_every_span(options_.keep_timeline);
  backend_holds_buffers_ = backend_->holds_buffers();
  result_.collective_log_kept = options_.keep_collective_log;
  if (options_.memory_events != nullptr) {
    memory_->set_block_observer(this);
    memory_->set_segment_observer(this);
  }
}

Replay::~Replay() = default;

Status Replay::OnHeader(const TraceHeader& header) {
  header_ = &header;
  // A trace emitted for this policy's own implementation says how it was set up: that is the
  // setting to quote (FSDP1's or FSDP2's constructor call), not the policy's generic one.
  if (spec_.setting.empty() && !header.fsdp_setting.empty() && header.fsdp_impl &&
      header.fsdp_impl == ImplementationOf(spec_.strategy)) {
    spec_.setting = header.fsdp_setting;
    result_.setting = FrameworkSetting(spec_, result_.bucket_cap_mb);
  }
  policy_stream_ = header.post_backward_stream();
  collective_stream_ = header.collective_stream();
  held_grad_.assign(header.num_params(), kNoBuffer);
  BUCKETSIM_RETURN_IF_ERROR(policy_->Start(header));
  if (options_.memory_events != nullptr) {
    BUCKETSIM_RETURN_IF_ERROR(options_.memory_events->OnReplayStart(header));
  }
  return backend_->Start(header);
}

Status Replay::OnEvent(const Event& event) {
  if (out_of_memory_) return Status::Ok();
  current_event_ = event.index;
  ++result_.events;
  ledger_.Enter(event.index, [this] { return memory_->reserved_bytes(); });
  switch (event.kind) {
    case EventKind::kIteration:
      if (in_iteration_) BUCKETSIM_RETURN_IF_ERROR(FinishIteration());
      in_iteration_ = true;
      iteration_ = event.id;
      ledger_.SetIteration(event.id);
      if (options_.keep_timeline) AddInstant("iteration", fmt::format("iteration {}", event.id));
      return Status::Ok();
    case EventKind::kPhase:
      phase_ = event.phase;
      phase_event_ = event.index;
      ledger_.BeginPhase(event.phase, event.index, memory_->reserved_bytes());
      if (options_.keep_timeline) AddInstant("phase", std::string(PhaseName(event.phase)));
      BUCKETSIM_RETURN_IF_ERROR(policy_->BeginPhase(event.phase, *this));
      return std::exchange(deferred_error_, Status::Ok());
    case EventKind::kAlloc:
      return AllocateTrace(event);
    case EventKind::kFree:
      FreeTrace(event);
      return Status::Ok();
    case EventKind::kCompute:
      backend_->Compute(event.stream, event.dur_us);
      ledger_.AddCompute(event.dur_us);
      return Status::Ok();
    case EventKind::kMark:
      ledger_.Mark(header_->names[event.name], event.index, memory_->reserved_bytes());
      if (options_.keep_timeline) AddInstant("mark", header_->names[event.name]);
      return Status::Ok();
    case EventKind::kReduceScatter: {
      ReduceScatterCall call{event, header_->FindGroup(event.group)};
      BUCKETSIM_CHECK(call.group != nullptr);
      // FSDP's post-backward hook: post_backward.wait_stream(current_stream()) before it
      // reduces the gradient the backward pass just produced (reference/fsdp_semantics.md §2).
      backend_->WaitStream(collective_stream_, kComputeStream);
      BUCKETSIM_RETURN_IF_ERROR(policy_->ReduceScatter(call, *this));
      return std::exchange(deferred_error_, Status::Ok());
    }
    case EventKind::kFlush:
      BUCKETSIM_RETURN_IF_ERROR(policy_->EndBackward(*this));
      // _wait_for_post_backward: current_stream().wait_stream(post_backward) after the flush.
      backend_->WaitStream(kComputeStream, collective_stream_);
      return std::exchange(deferred_error_, Status::Ok());
    case EventKind::kZeroGrad:
      if (event.set_to_none) ZeroGrad();
      return Status::Ok();
    case EventKind::kRecordStream:
      stream_uses_[event.slot].push_back(event.stream);
      return Status::Ok();
    case EventKind::kSync:
      memory_->StreamSynchronized(event.stream);
      return Status::Ok();
    case EventKind::kEmptyCache:
      RecordPeakIfNeeded();  // the peak's fragmentation is that of the cache before it empties
      memory_->EmptyCache();
      return Status::Ok();
    case EventKind::kAllGather:
    case EventKind::kAllReduce:
      TraceCollective(event);
      return Status::Ok();
    case EventKind::kSegmentAlloc:
    case EventKind::kSegmentFree:
    case EventKind::kSegmentMap:
    case EventKind::kSegmentUnmap:
    case EventKind::kOom:
    case EventKind::kSnapshot:
      return Status::Ok();  // what the real allocator did: compared with, never replayed
  }
  return Status::Ok();
}

Status Replay::OnEnd() {
  if (in_iteration_ && !out_of_memory_) BUCKETSIM_RETURN_IF_ERROR(FinishIteration());
  result_.execution = backend_->facts();
  RecordPeakIfNeeded();
  RankLargestAtPeak();
  ledger_.Finish(result_);
  result_.counters = policy_->counters();
  result_.allocator = memory_->Totals();
  if (options_.memory_events != nullptr) {
    return options_.memory_events->OnReplayEnd(memory_->Snapshot());
  }
  return Status::Ok();
}

void Replay::OnBlockEvent(const BlockEvent& event) {
  MemoryEvent out;
  out.action = ToMemoryAction(event.action);
  out.address = event.address;
  out.bytes = event.bytes;
  out.stream = event.stream;
  out.device_free_bytes = event.device_free_bytes;
  // A free (completed now or later) is of a block whose alloc said what it was.
  if (event.action == BlockAction::kAlloc || event.action == BlockAction::kOom) {
    out.category = charging_;
  }
  ForwardMemoryEvent(out);
}

void Replay::OnSegmentEvent(const SegmentEvent& event) {
  MemoryEvent out;
  out.action = ToMemoryAction(event.action);
  out.address = event.address;
  out.bytes = event.bytes;
  out.stream = event.stream;
  ForwardMemoryEvent(out);
}

void Replay::ForwardMemoryEvent(MemoryEvent event) {
  event.event_index = current_event_;
  event.phase = phase_;
  event.phase_event_index = phase_event_;
  event.iteration = iteration_;
  options_.memory_events->OnMemoryEvent(event);
}

Status Replay::FinishIteration() {
  Result<IterationSpans> spans = backend_->EndIteration();
  if (!spans.ok()) {
    return Status(spans.status().code(),
                  fmt::format("iteration {}: {}", iteration_, spans.status().message()));
  }
  IterationTiming timing = spans->timing ? *spans->timing : SummarizeIteration(*spans, 0);
  timing.iteration = iteration_;
  result_.iterations.push_back(timing);
  if (options_.keep_timeline) result_.stream_timeline->iterations.push_back(*spans);
  // The iteration's collective spans in issue order, as its log entries are (a backend that
  // lists its spans stream by stream numbers them).
  std::vector<const TimedSpan*> collectives;
  for (const TimedSpan& span : spans->spans) {
    if (span.kind == SpanKind::kCollective) collectives.push_back(&span);
  }
  std::stable_sort(collectives.begin(), collectives.end(),
                   [](const TimedSpan* a, const TimedSpan* b) { return a->issue < b->issue; });
  std::size_t next = untimed_collectives_;
  for (const TimedSpan* span : collectives) {
    if (next >= result_.collectives.size()) break;
    result_.collectives[next].start_us = span->start_us;
    result_.collectives[next].dur_us = span->end_us - span->start_us;
    ++next;
  }
  untimed_collectives_ = result_.collectives.size();
  return Status::Ok();
}

Status Replay::Charge(Allocation& allocation, BufferHandle handle, Bytes requested,
                      StreamId stream) {
  if (out_of_memory_) {
    // The program raised at the OOM: what the policy still asks for within this event is not
    // allocated (it would count as more OOMs).
    allocation.in_model = false;
    allocation.block = Block{};
    return Status::Ok();
  }
  charging_ = allocation.category;
  Result<Block> block = memory_->Allocate(requested, stream);
  allocation.in_model = block.ok();
  if (!block.ok()) {
    // The replay stops here; until then the entry is charged nothing.
    allocation.block = Block{};
    if (std::optional<OomReport> oom = memory_->last_oom()) {
      // Out of device memory is a result (this policy does not fit), not an error.
      if (!out_of_memory_) {
        result_.oom = OomEvent{current_event_, requested, stream, allocation.category, *oom};
      }
      out_of_memory_ = true;
      return Status::Ok();
    }
    return Status(block.status().code(),
                  fmt::format("event {}: {}", current_event_, block.status().message()));
  }
  allocation.block = *block;
  allocation.since = current_event_;
  allocation.stream = stream;
  if (backend_holds_buffers_)
    backend_->Materialize(handle, requested, BackendStream(handle, stream));
  ledger_.Charge(allocation.category, block->charged, current_event_);
  ledger_.ObserveReserved(memory_->reserved_bytes());
  if (options_.keep_timeline) SampleMemory(stream);
  return Status::Ok();
}

void Replay::Discharge(Allocation& allocation, BufferHandle handle) {
  // This is the first decrease after a new peak if one is unrecorded: the allocation was live at
  // it (a policy buffer whose last reference Release just dropped included), so it is kept.
  RecordPeakIfNeeded();
  const bool policy_buffer = (handle & kTraceBufferBit) == 0;
  const auto index = static_cast<std::uint32_t>(handle & ~kTraceBufferBit);
  KeepForPeak(policy_buffer, index, allocation);
  std::vector<StreamId> used_on;
  if (auto uses = policy_buffer ? stream_uses_.end() : stream_uses_.find(index);
      uses != stream_uses_.end()) {
    used_on = std::move(uses->second);
    stream_uses_.erase(uses);
  }
  if (allocation.in_model) {
    if (backend_holds_buffers_) backend_->Release(handle, BackendStream(handle, allocation.stream));
    if (used_on.empty()) {
      memory_->Free(allocation.block);
    } else {
      memory_->FreeWithPendingStreams(allocation.block, std::move(used_on));
    }
  }
  ledger_.Discharge(allocation.category, allocation.block.charged);
  allocation.live = false;
  if (options_.keep_timeline) SampleMemory(allocation.stream);
}

Status Replay::AllocateTrace(const Event& event) {
  if (event.slot >= trace_slots_.size()) trace_slots_.resize(event.slot + 1);
  Allocation& allocation = trace_slots_[event.slot];
  allocation.category = event.category;
  allocation.live = true;
  allocation.trace_id = event.id;
  MakeLive(allocation);
  return Charge(allocation, kTraceBufferBit | event.slot, event.bytes, event.stream);
}

void Replay::FreeTrace(const Event& event) {
  Discharge(trace_slots_[event.slot], kTraceBufferBit | event.slot);
}

BufferId Replay::NewBuffer() {
  BufferId id = 0;
  if (free_buffers_.empty()) {
    id = static_cast<BufferId>(buffers_.size());
    buffers_.emplace_back();
  } else {
    id = free_buffers_.back();
    free_buffers_.pop_back();
  }
  return id;
}

BufferId Replay::Allocate(Bytes bytes, Category category, DType dtype, GroupId group) {
  const BufferId id = NewBuffer();
  PolicyBuffer& buffer = buffers_[id];
  buffer.staged = false;
  Allocation& allocation = buffer.allocation;
  allocation.category = category;
  allocation.live = true;
  allocation.dtype = dtype;
  allocation.group = group;
  buffer.refs = 1;
  MakeLive(allocation);
  Status status = Charge(allocation, id, bytes, policy_stream_);
  if (!status.ok() && deferred_error_.ok()) deferred_error_ = std::move(status);
  buffer.lifetime = RecordLifetime(allocation);
  return id;
}

BufferId Replay::Stage(Bytes bytes, DType dtype, GroupId group) {
  const BufferId id = NewBuffer();
  PolicyBuffer& buffer = buffers_[id];
  buffer.staged = true;
  buffer.refs = 1;
  buffer.lifetime = kNoLifetime;
  buffer.allocation.live = false;
  buffer.allocation.in_model = false;
  buffer.allocation.dtype = dtype;
  buffer.allocation.group = group;
  buffer.allocation.stream = policy_stream_;
  if (backend_holds_buffers_ && !out_of_memory_) {
    backend_->Materialize(id, bytes, collective_stream_);
    buffer.allocation.in_model = true;  // held by the backend: released there
  }
  return id;
}

void Replay::Release(BufferId id) {
  PolicyBuffer& buffer = buffers_[id];
  BUCKETSIM_CHECK(buffer.refs > 0);
  if (--buffer.refs > 0) return;
  if (buffer.staged) {
    if (buffer.allocation.in_model) backend_->Release(id, collective_stream_);
    free_buffers_.push_back(id);
    return;
  }
  if (buffer.lifetime != kNoLifetime) {
    result_.bucket_lifetimes[buffer.lifetime].freed_event = current_event_;
  }
  Discharge(buffer.allocation, id);
  free_buffers_.push_back(id);
}

void Replay::Relabel(BufferId id, Category category) {
  RecordPeakIfNeeded();  // the peak's list shows what the categories were at the peak
  PolicyBuffer& buffer = buffers_[id];
  Allocation& allocation = buffer.allocation;
  KeepForPeak(true, id, allocation);
  if (buffer.lifetime != kNoLifetime) {
    result_.bucket_lifetimes[buffer.lifetime].retired_event = current_event_;
  }
  ledger_.Move(allocation.category, category, allocation.block.charged);
  allocation.category = category;
  if (options_.keep_timeline) SampleMemory(allocation.stream);
}

void Replay::FillGradient(const GradientFill& fill) {
  if (!out_of_memory_) backend_->FillGradient(fill, collective_stream_);
}

void Replay::Copy(const BufferCopy& copy) {
  if (!out_of_memory_) backend_->Copy(copy, collective_stream_);
}

void Replay::Collective(const CollectiveRecord& record, const CollectiveBuffers& buffers) {
  CollectiveRecord stamped = record;
  stamped.event_index = current_event_;
  // HYBRID_SHARD: the reduced shard is then all-reduced over the rank's replicas, in place
  // (FSDP1 _reduce_grad, FSDP2 foreach_reduce); the backend runs both, the log has both.
  stamped.replicate_group = header_->replicate_group;
  if (!out_of_memory_) backend_->Collective(stamped, buffers, collective_stream_);
  Log(stamped);
  if (stamped.replicate_group) {
    Log(ReplicaAllReduce(stamped, header_->FindGroup(*stamped.replicate_group)->size()));
  }
}

void Replay::Log(const CollectiveRecord& record) {
  result_.collective_summary.Add(iteration_, phase_, record);
  if (options_.keep_collective_log) result_.collectives.push_back(record);
}

// The framework's own collective on a trace allocation, in place on the event's stream: an
// all-gather of this rank's part into the whole (FSDP's unshard), or an all-reduce of a
// gradient (NO_SHARD).
void Replay::TraceCollective(const Event& event) {
  const ProcessGroup* group = header_->FindGroup(event.group);
  BUCKETSIM_CHECK(group != nullptr);  // the reader checks it
  CollectiveRecord record;
  record.group = event.group;
  record.group_size = group->size();
  record.dtype = event.dtype;
  record.event_index = event.index;
  record.requests = 0;  // no gradient request of the trace's: the framework's own
  record.input_numel = event.numel;
  const bool all_gather = event.kind == EventKind::kAllGather;
  record.kind = all_gather ? CollectiveKind::kAllGather : CollectiveKind::kAllReduce;
  record.output_numel = all_gather ? event.numel * group->size() : event.numel;
  const BufferHandle buffer = kTraceBufferBit | event.slot;
  backend_->Collective(record, {buffer, buffer, {}, 0, /*framework=*/true}, event.stream);
  Log(record);
}

void Replay::Deliver(const ReduceScatterCall& call, BufferId reduced) {
  const Event& e = call.event;
  std::uint32_t param = header_->ParamIndex(e.unit, e.param);
  switch (e.shard_mode) {
    case ShardMode::kView:
      // _saved_grad_shard = reduced: a view that keeps the whole buffer alive.
      ++buffers_[reduced].refs;
      break;
    case ShardMode::kCast:
      // reduced.to(param dtype): a new tensor of the shard's numel is the gradient.
      reduced = Allocate(e.numel * ElementSize(e.cast_dtype), Category::kGradShard, e.cast_dtype,
                         call.group->id);
      break;
    case ShardMode::kAccumulate:
      // _saved_grad_shard += reduced: nothing new is kept.
      return;
    case ShardMode::kOffload:
      // reduced.to("cpu"): the gradient is in host memory, nothing of it on the device.
      return;
    case ShardMode::kNoGrad:
      // A policy that reduced a parameter without a gradient: .grad stays None.
      return;
  }
  BUCKETSIM_CHECK(held_grad_[param] == kNoBuffer);  // TraceChecker guarantees it
  held_grad_[param] = reduced;
  holding_params_.push_back(param);
}

void Replay::ZeroGrad() {
  for (std::uint32_t param : holding_params_) {
    Release(held_grad_[param]);
    held_grad_[param] = kNoBuffer;
  }
  holding_params_.clear();
}

std::uint32_t Replay::RecordLifetime(const Allocation& buffer) {
  // Temporaries live within one event: on the event axis they have no width, so only the
  // bucket buffers proper are recorded.
  if (!IsBucketCategory(buffer.category) || !buffer.in_model) return kNoLifetime;
  if (result_.bucket_lifetimes.size() >= options_.max_bucket_lifetimes) {
    ++result_.bucket_lifetimes_dropped;
    return kNoLifetime;
  }
  result_.bucket_lifetimes.push_back(
      {buffer.category, buffer.dtype, buffer.group, buffer.block.charged, current_event_, {}, {}});
  return static_cast<std::uint32_t>(result_.bucket_lifetimes.size() - 1);
}

bool Replay::RanksBefore(const PeakEntry& x, const PeakEntry& y) {
  const Allocation& a = x.allocation;
  const Allocation& b = y.allocation;
  if (a.block.charged != b.block.charged) return a.block.charged > b.block.charged;
  if (a.since != b.since) return a.since < b.since;
  if (x.policy_buffer != y.policy_buffer) return y.policy_buffer;
  return x.index < y.index;
}

bool Replay::RecordPeakIfNeeded() {
  if (!ledger_.peak_unrecorded()) return false;
  BUCKETSIM_CHECK(peak_epoch_ < ~std::uint32_t{0});
  ++peak_epoch_;
  peak_largest_.clear();
  ledger_.RecordPeak(memory_->Fragmentation());
  return true;
}

void Replay::KeepForPeak(bool policy_buffer, std::uint32_t index, Allocation& allocation) {
  if (allocation.peak_epoch == peak_epoch_) return;  // born after the peak, or kept already
  allocation.peak_epoch = peak_epoch_;
  OfferForPeak({policy_buffer, index, allocation});
}

void Replay::OfferForPeak(const PeakEntry& entry) {
  const auto keep = static_cast<std::size_t>(std::max(options_.largest_at_peak, 0));
  if (peak_largest_.size() < keep) {
    peak_largest_.push_back(entry);
    std::push_heap(peak_largest_.begin(), peak_largest_.end(), RanksBefore);
  } else if (keep > 0 && RanksBefore(entry, peak_largest_.front())) {
    std::pop_heap(peak_largest_.begin(), peak_largest_.end(), RanksBefore);
    peak_largest_.back() = entry;
    std::push_heap(peak_largest_.begin(), peak_largest_.end(), RanksBefore);
  }
}

void Replay::RankLargestAtPeak() {
  if (peak_epoch_ == 0) return;
  // What was live at the peak and has not changed since.
  auto offer_if_unchanged = [this](bool policy_buffer, std::size_t index, const Allocation& a) {
    if (a.live && a.peak_epoch != peak_epoch_) {
      OfferForPeak({policy_buffer, static_cast<std::uint32_t>(index), a});
    }
  };
  for (std::size_t i = 0; i < trace_slots_.size(); ++i)
    offer_if_unchanged(false, i, trace_slots_[i]);
  for (std::size_t i = 0; i < buffers_.size(); ++i) {
    offer_if_unchanged(true, i, buffers_[i].allocation);
  }
  std::sort_heap(peak_largest_.begin(), peak_largest_.end(), RanksBefore);
  std::vector<LiveAllocation> largest;
  for (const PeakEntry& entry : peak_largest_) {
    const Allocation& a = entry.allocation;
    std::string what =
        IsPolicyCategory(a.category)
            ? fmt::format("{} {} group {}", CategoryName(a.category), DTypeName(a.dtype), a.group)
            : fmt::format("trace alloc id {}", a.trace_id);
    largest.push_back({a.category, a.block.charged, std::move(what), a.since});
  }
  ledger_.RecordPeakLargest(std::move(largest));
}

void Replay::SampleMemory(StreamId stream) {
  std::optional<Micros> now = backend_->IssueClock(stream);
  if (!now) return;  // the backend cannot tell when
  // Program order: a sample is never earlier than the one before it, whichever stream it is on.
  std::vector<MemorySample>& memory = result_.stream_timeline->memory;
  Micros ts = memory.empty() ? *now : std::max(*now, memory.back().ts_us);
  const CategoryBytes& by_category = ledger_.current_by_category();
  memory.push_back({ts, ledger_.current_bytes(), memory_->reserved_bytes(),
                    by_category[static_cast<std::size_t>(Category::kBucketData)] +
                        by_category[static_cast<std::size_t>(Category::kBucketOutput)]});
}

void Replay::AddInstant(std::string category, std::string name) {
  std::optional<Micros> now = backend_->IssueClock(kComputeStream);
  if (!now) return;
  std::vector<TimelineInstant>& instants = result_.stream_timeline->instants;
  Micros ts = instants.empty() ? *now : std::max(*now, instants.back().ts_us);
  instants.push_back({ts, std::move(category), std::move(name)});
}

}  // namespace bucketsim
