// The running account of one replay: bytes alive per category, the peak and its composition,
// one PhaseStats per stretch between phase markers, and the samples at named marks. It only
// counts; what the bytes are and when they change is decided by the Replay that owns it.
#pragma once

#include <string>
#include <vector>

#include "engine/memory_timeline.h"
#include "engine/run_result.h"

namespace bucketsim {

class MemoryLedger {
 public:
  explicit MemoryLedger(std::uint32_t timeline_points = MemoryTimeline::kDefaultMaxPoints)
      : timeline_(timeline_points) {}

  // Event `at` begins; `reserved` is the memory model's figure now. Feeds the timeline.
  void Enter(EventIndex at, Bytes reserved) { timeline_.Enter(at, current_, reserved); }
  void Charge(Category category, Bytes bytes, EventIndex at);
  void Discharge(Category category, Bytes bytes);
  void Move(Category from, Category to, Bytes bytes);
  void ObserveReserved(Bytes reserved);

  void SetIteration(std::uint64_t iteration) { iteration_ = iteration; }
  // `reserved`: the memory model's reserved bytes as the phase begins.
  void BeginPhase(Phase phase, EventIndex at, Bytes reserved);
  void AddCompute(Micros duration) { phases_.back().compute_us += duration; }
  void Mark(std::string name, EventIndex at, Bytes reserved);

  // True from the moment a new peak is reached until the owner has recorded the fragmentation
  // at it (it must, before the first decrease, while the peak's allocations are still all live).
  bool peak_unrecorded() const { return peak_unrecorded_; }
  void RecordPeakFragmentation(std::optional<FragmentationInfo> fragmentation);
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

}  // namespace bucketsim
