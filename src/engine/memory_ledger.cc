#include "engine/memory_ledger.h"

#include <algorithm>

#include "core/status.h"

namespace bucketsim {

void MemoryLedger::Move(Category from, Category to, Bytes bytes) {
  by_category_[static_cast<int>(from)] -= bytes;
  by_category_[static_cast<int>(to)] += bytes;
  if (IsBucketCategory(from)) bucket_bytes_ -= bytes;
  if (IsBucketCategory(to)) {
    bucket_bytes_ += bytes;
    peak_bucket_bytes_ = std::max(peak_bucket_bytes_, bucket_bytes_);
  }
}

void MemoryLedger::BeginPhase(Phase phase, EventIndex at, Bytes reserved) {
  phases_.back().end_bytes = current_;
  phases_.back().end_event = at;
  phases_.push_back({iteration_, phase, at, at, current_, current_, current_, reserved, 0.0});
}

void MemoryLedger::Mark(std::string name, EventIndex at, Bytes reserved) {
  marks_.push_back({std::move(name), iteration_, at, current_, reserved, by_category_});
}

void MemoryLedger::RecordPeak(std::optional<FragmentationInfo> fragmentation) {
  peak_.by_category = by_category_;
  peak_.fragmentation = std::move(fragmentation);
  peak_unrecorded_ = false;
}

void MemoryLedger::RecordPeakLargest(std::vector<LiveAllocation> largest) {
  peak_.largest = std::move(largest);
}

void MemoryLedger::Finish(RunResult& result) {
  BUCKETSIM_CHECK(!peak_unrecorded_);
  phases_.back().end_bytes = current_;
  phases_.back().end_event = result.events;
  // The stretch before the first phase marker is reported only when something happened in it.
  if (phases_.size() > 1 && phases_.front().peak_bytes == 0 && phases_.front().compute_us == 0) {
    phases_.erase(phases_.begin());
  }
  result.peak = std::move(peak_);
  result.peak_bucket_bytes = peak_bucket_bytes_;
  result.final_allocated_bytes = current_;
  result.phases = std::move(phases_);
  result.marks = std::move(marks_);
  result.timeline = timeline_.Take();
  for (const PhaseStats& phase : result.phases) result.compute_us += phase.compute_us;
}

}  // namespace bucketsim
