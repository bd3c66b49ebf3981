// Time profiles on disk: the JSON file `--profile FILE` reads and `calibrate` writes
// (format: traces/profiles/README.md, schema traces/profile-v1.schema.json). A profile is
// versioned like every file bucketsim reads; the reader accepts version 1 and rejects the rest.
#pragma once

#include <string>

#include "backend/sim/time_profile.h"
#include "core/status.h"

namespace bucketsim {

inline constexpr int kProfileSchemaVersion = 1;

// Reads and validates a profile; errors name the file and the offending key.
Result<TimeProfile> ReadTimeProfile(const std::string& path);
Result<TimeProfile> ParseTimeProfile(const std::string& text, const std::string& origin);
// What --profile names: a profile file, or, where no file of that name exists, a GPU of the
// catalogue (core/gpu_catalog.h), its estimate at `efficiency` (EstimateTimeProfile).
Result<TimeProfile> LoadTimeProfile(const std::string& file_or_gpu,
                                    const GpuEfficiency& efficiency = {});

// The profile as JSON text (keys in the order of the format's description, final newline).
std::string TimeProfileJson(const TimeProfile& profile);
// Writes TimeProfileJson to `path`, creating missing parent directories.
Status WriteTimeProfile(const std::string& path, const TimeProfile& profile);

}  // namespace bucketsim
