// The one unit a report page states its memory figures in, chosen from the page's data: the
// largest binary unit (B, KiB, MiB, GiB, TiB) in which every headline figure of the page — the
// peak (reserved, or allocated where larger) of each policy or sweep configuration that ran to
// the end, and the sweep's budget — reads at least 1, as `ls -h` would name the smallest of
// them. A 7B model's page reads in GiB, a tiny test trace's in MiB or KiB, and no peak reads
// "0.1" while another reads "12" (a sweep whose 100 MiB cap peaks past 1 GiB stays in MiB, the
// unit its other configurations need); the largest figure may read in the thousands. When
// every policy ran out of memory, their peaks decide. Every table header and cell, chart axis,
// label, tooltip, sentence and the budget line of the page use the unit, so a figure reads the
// same everywhere on it. Two decimals (three in GiB and TiB: about 1 MiB still shows).
//
// Not in the page unit: the bucket cap, a setting the user types in MiB (fairscale's
// bucket_cap_mb: "cap (MiB)", "backward-only @ 25 MiB"), and an out-of-memory description,
// which quotes the failed allocation as PyTorch's message does (core/size_format.h). The
// terminal tables keep MiB (kMiBUnit) and JSON keeps bytes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/units.h"
#include "report/report_document.h"

namespace bucketsim {

struct ByteUnit {
  std::string_view name;  // "MiB"
  Bytes bytes = 1;        // bytes per unit
  int decimals = 2;
};

inline constexpr ByteUnit kBUnit{"B", 1, 0};
inline constexpr ByteUnit kKiBUnit{"KiB", kKiB, 2};
inline constexpr ByteUnit kMiBUnit{"MiB", kMiB, 2};
inline constexpr ByteUnit kGiBUnit{"GiB", kGiB, 3};
inline constexpr ByteUnit kTiBUnit{"TiB", 1024 * kGiB, 3};

// The largest unit of which `smallest_bytes` is at least one (kBUnit below 1 KiB).
ByteUnit UnitFor(Bytes smallest_bytes);
// The unit of a page of these documents (the rule above).
ByteUnit PageUnit(const std::vector<ReportDocument>& docs);

// "1.922" in GiB, "1968.37" in MiB: the figure in the unit, without its name.
std::string InUnit(Bytes bytes, ByteUnit unit);
// "1.922 GiB": with the unit's name.
std::string WithUnit(Bytes bytes, ByteUnit unit);

}  // namespace bucketsim
