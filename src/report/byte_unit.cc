#include "report/byte_unit.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

namespace bucketsim {

ByteUnit UnitFor(Bytes smallest_bytes) {
  constexpr std::array<ByteUnit, 4> kLargestFirst = {kTiBUnit, kGiBUnit, kMiBUnit, kKiBUnit};
  for (const ByteUnit& unit : kLargestFirst) {
    if (smallest_bytes >= unit.bytes) return unit;
  }
  return kBUnit;
}

ByteUnit PageUnit(const std::vector<ReportDocument>& docs) {
  std::vector<Bytes> ran;  // the headline figures of what ran to the end
  std::vector<Bytes> oom;  // of what ran out of memory
  for (const ReportDocument& doc : docs) {
    if (doc.sweep) {
      for (const SweepPoint& p : doc.sweep->points) {
        (p.out_of_memory ? oom : ran)
            .push_back(std::max(p.peak_allocated_bytes, p.peak_reserved_bytes));
      }
      if (doc.sweep->budget) ran.push_back(doc.sweep->budget->budget_bytes);
      continue;  // its points are its runs
    }
    for (const RunResult& run : doc.runs) {
      (run.oom ? oom : ran).push_back(std::max(run.peak.allocated_bytes, run.peak.reserved_bytes));
    }
  }
  const std::vector<Bytes>& figures = ran.empty() ? oom : ran;
  return UnitFor(figures.empty() ? 0 : *std::min_element(figures.begin(), figures.end()));
}

std::string InUnit(Bytes bytes, ByteUnit unit) {
  return fmt::format("{:.{}f}", static_cast<double>(bytes) / static_cast<double>(unit.bytes),
                     unit.decimals);
}

std::string WithUnit(Bytes bytes, ByteUnit unit) {
  return fmt::format("{} {}", InUnit(bytes, unit), unit.name);
}

}  // namespace bucketsim
