// Human sizes on the command line and in tables: "40GiB", "512MB", "1.5 GiB", "4096".
// Binary units (KiB, MiB, GiB, TiB) are powers of 1024; decimal ones (KB, MB, GB, TB) powers of
// 1000; a bare number or "B" is bytes. Budgets are compared in exact bytes, so parsing rejects
// what it cannot represent (negative, overflowing, unknown unit) instead of guessing.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "core/units.h"

namespace bucketsim {

Result<Bytes> ParseSize(std::string_view text);
// "42.50 MiB": binary units, two decimals, for tables and messages.
std::string FormatBytes(Bytes bytes);

}  // namespace bucketsim
