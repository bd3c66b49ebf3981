// The running account of one replay: bytes alive per category, the peak and its composition,
// one PhaseStats per stretch between phase markers, and the samples at named marks. It only
// counts; what the bytes are and when they change is decided by the Replay that owns it.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "engine/memory_timeline.h"
#include "engine/run_result.h"

namespace bucketsim {

class MemoryLedger {
 public:
  explicit MemoryLedger(std::uint32_t timeline_points = MemoryTimeline::kDefaultMaxPoints)
      : timeline_(timeline_points) {}

  // Event `at` begins; `reserved()` gives the memory model's figure now. Feeds the timeline,
  // which needs the figures only when the event starts a new span: inside one, allocated and
  // reserved bytes grow only by a charge, which observes them (ObserveReserved), so an event
  // that begins with them adds nothing. Called for every event: the model is asked only then.
  template <typename ReservedBytes>
  void Enter(EventIndex at, const ReservedBytes& reserved) {
    if (timeline_.Begins(at)) timeline_.Enter(at, current_, reserved());
  }
  // Charge, Discharge and ObserveReserved run once or twice per event: inline, below.
  void Charge(Category category, Bytes bytes, EventIndex at);
  void Discharge(Category category, Bytes bytes);
  void Move(Category from, Category to, Bytes bytes);
  void ObserveReserved(Bytes reserved);

  void SetIteration(std::uint64_t iteration) { iteration_ = iteration; }
  // `reserved`: the memory model's reserved bytes as the phase begins.
  void BeginPhase(Phase phase, EventIndex at, Bytes reserved);
  void AddCompute(Micros duration) { phases_.back().compute_us += duration; }
  void Mark(std::string name, EventIndex at, Bytes reserved);

  // True from the moment a new peak is reached until the owner has recorded it (it must, before
  // the first decrease or move between categories, while the peak's allocations are all live
  // and labelled as they were at it).
  bool peak_unrecorded() const { return peak_unrecorded_; }
  // Records the peak's bytes by category (those now: a deep model's forward reaches a new peak
  // at nearly every allocation, and copying them at each cost more than the rest of the charge)
  // and its fragmentation.
  void RecordPeak(std::optional<FragmentationInfo> fragmentation);
  // The largest allocations live at the last recorded peak (the owner ranks them once, at the
  // end of the replay).
  void RecordPeakLargest(std::vector<LiveAllocation> largest);

  Bytes current_bytes() const { return current_; }
  const CategoryBytes& current_by_category() const { return by_category_; }

  // Closes the last phase (at `result.events`) and moves the figures into `result`.
  void Finish(RunResult& result);

 private:
  std::uint64_t iteration_ = 0;
  Bytes current_ = 0;
  CategoryBytes by_category_{};
  Bytes bucket_bytes_ = 0;
  Bytes peak_bucket_bytes_ = 0;
  PeakInfo peak_;
  bool peak_unrecorded_ = false;
  std::vector<PhaseStats> phases_ = {PhaseStats{}};
  std::vector<MarkSample> marks_;
  MemoryTimeline timeline_;
};

inline void MemoryLedger::Charge(Category category, Bytes bytes, EventIndex at) {
  current_ += bytes;
  by_category_[static_cast<int>(category)] += bytes;
  if (IsBucketCategory(category)) {
    bucket_bytes_ += bytes;
    peak_bucket_bytes_ = std::max(peak_bucket_bytes_, bucket_bytes_);
  }
  timeline_.ObserveAllocated(current_);
  PhaseStats& phase = phases_.back();
  phase.peak_bytes = std::max(phase.peak_bytes, current_);
  if (current_ > peak_.allocated_bytes) {
    peak_.allocated_bytes = current_;
    peak_.event_index = at;
    peak_.iteration = iteration_;
    peak_.phase = phase.phase;
    peak_unrecorded_ = true;
  }
}

inline void MemoryLedger::Discharge(Category category, Bytes bytes) {
  current_ -= bytes;
  by_category_[static_cast<int>(category)] -= bytes;
  if (IsBucketCategory(category)) bucket_bytes_ -= bytes;
}

inline void MemoryLedger::ObserveReserved(Bytes reserved) {
  peak_.reserved_bytes = std::max(peak_.reserved_bytes, reserved);
  timeline_.ObserveReserved(reserved);
  PhaseStats& phase = phases_.back();
  phase.peak_reserved_bytes = std::max(phase.peak_reserved_bytes, reserved);
}

}  // namespace bucketsim
