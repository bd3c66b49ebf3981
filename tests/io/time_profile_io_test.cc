#include <gtest/gtest.h>

#include "io/time_profile_io.h"

namespace bucketsim {
namespace {

const char* kMeasured = R"({
  "schema_version": 1, "name": "ci-mpi",
  "context": {"provenance": "measured", "host": "ci", "backend": "host", "ranks": 4},
  "copy_GBps": 5.5,
  "collectives": {"reduce_scatter": [{"group_size": 4, "alpha_us": 30, "busbw_GBps": 2.5},
                                     {"group_size": 2, "alpha_us": 12.5, "busbw_GBps": 3,
                                      "measured": [{"send_bytes": 2048, "time_us": 14},
                                                   {"send_bytes": 1024, "time_us": 13.5}]}]}
})";

TEST(TimeProfileIo, ReadsAMeasuredProfile) {
  Result<TimeProfile> profile = ParseTimeProfile(kMeasured, "p.json");
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  EXPECT_EQ(profile->name, "ci-mpi");
  EXPECT_EQ(profile->provenance.kind, "measured");
  EXPECT_EQ(profile->provenance.ranks, 4);
  EXPECT_DOUBLE_EQ(profile->copy_GBps, 5.5);
  ASSERT_EQ(profile->reduce_scatter.size(), 2u);
  EXPECT_EQ(profile->reduce_scatter[0].group_size, 2);  // sorted
  EXPECT_DOUBLE_EQ(profile->reduce_scatter[0].alpha_us, 12.5);
  ASSERT_EQ(profile->reduce_scatter[0].measured.size(), 2u);
  EXPECT_EQ(profile->reduce_scatter[0].measured[0].bytes, 1024u);  // sorted
  EXPECT_DOUBLE_EQ(profile->reduce_scatter[0].measured[1].time_us, 14);
  EXPECT_TRUE(profile->reduce_scatter[1].measured.empty());
}

TEST(TimeProfileIo, WriterOutputReadsBackTheSame) {
  Result<TimeProfile> profile = ParseTimeProfile(kMeasured, "p.json");
  ASSERT_TRUE(profile.ok());
  Result<TimeProfile> again = ParseTimeProfile(TimeProfileJson(*profile), "again");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(TimeProfileJson(*again), TimeProfileJson(*profile));
  EXPECT_EQ(again->reduce_scatter[1].busbw_GBps, 2.5);
}

TEST(TimeProfileIo, ShippedProfilesAreValidAndDerived) {
  for (const char* name : {"h100-8gpu-nvlink.json", "h200-8gpu-nvlink.json"}) {
    Result<TimeProfile> profile =
        ReadTimeProfile(std::string(BUCKETSIM_SOURCE_DIR) + "/traces/profiles/" + name);
    ASSERT_TRUE(profile.ok()) << profile.status().message();
    EXPECT_EQ(profile->provenance.kind, "derived");
    EXPECT_FALSE(profile->provenance.sources.empty());
    EXPECT_EQ(profile->ReduceScatterAt(8).busbw_GBps, 362.93);
  }
}

// The CI machine's profile: measured by calibrate (traces/profiles/README.md) at 2, 4 and 8
// ranks, every size of the sweep kept, and the model following those measurements.
TEST(TimeProfileIo, ShippedCiProfileIsMeasuredAtTwoFourAndEightRanks) {
  Result<TimeProfile> profile =
      ReadTimeProfile(std::string(BUCKETSIM_SOURCE_DIR) + "/traces/profiles/ci-2core-mpi.json");
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  EXPECT_EQ(profile->name, "ci-2core-mpi-measured");
  EXPECT_EQ(profile->provenance.kind, "measured");
  EXPECT_EQ(profile->provenance.backend, "host");
  EXPECT_EQ(profile->provenance.ranks, 8);
  ASSERT_EQ(profile->reduce_scatter.size(), 3u);
  int group_size = 2;
  for (const AlphaBeta& entry : profile->reduce_scatter) {
    EXPECT_EQ(entry.group_size, group_size);
    group_size *= 2;
    // 1 KiB to 64 MiB, two sizes per octave.
    ASSERT_EQ(entry.measured.size(), 33u);
    EXPECT_EQ(entry.measured.front().bytes, 1024u);
    EXPECT_EQ(entry.measured.back().bytes, 64u << 20);
    for (const TimingSample& point : entry.measured) {
      EXPECT_DOUBLE_EQ(profile->ReduceScatterTime(point.bytes, entry.group_size), point.time_us);
    }
  }
}

struct BadProfile {
  const char* text;
  const char* message;
};

TEST(TimeProfileIo, BadProfilesNameTheFileAndTheKey) {
  const BadProfile cases[] = {
      {"[1]", "p.json: expected a JSON object"},
      {"{", "p.json: not JSON"},
      // A number beyond a double is nlohmann's out_of_range, not a parse_error (a fuzz finding).
      {R"({"schema_version": 1e30800})", "p.json: not JSON"},
      {R"({"schema_version": 2})", "p.json: schema_version: 2 is not supported"},
      {R"({"schema_version": 1, "name": "x"})", "p.json: context: missing"},
      {R"({"schema_version": 1, "name": "x", "context": {"provenance": "guessed"}})",
       "context.provenance: 'guessed' is neither derived nor measured"},
      {R"({"schema_version": 1, "name": "x", "context": {"provenance": "derived"}})",
       "context.sources: missing"},
      {R"({"schema_version": 1, "name": "x", "context": {"provenance": "measured"},
           "copy_GBps": "fast"})",
       "p.json: copy_GBps: expected a number"},
      {R"({"schema_version": 1, "name": "x", "context": {"provenance": "measured"},
           "copy_GBps": 1, "collectives": {"all_gather": []}})",
       "unknown collective kind 'all_gather'"},
      {R"({"schema_version": 1, "name": "x", "context": {"provenance": "measured"},
           "copy_GBps": 1, "collectives": {"reduce_scatter": [{"group_size": 2, "alpha_us": 1}]}})",
       "collectives.reduce_scatter[0].busbw_GBps: missing"},
      {R"({"schema_version": 1, "name": "x", "context": {"provenance": "measured"},
           "copy_GBps": 1, "collectives": {"reduce_scatter": [
             {"group_size": 2, "alpha_us": 1, "busbw_GBps": -3}]}})",
       "busbw_GBps must be > 0"},
      {R"({"schema_version": 1, "name": "x", "context": {"provenance": "measured"},
           "copy_GBps": 1, "collectives": {"reduce_scatter": [
             {"group_size": 2, "alpha_us": 1, "busbw_GBps": 3,
              "measured": [{"send_bytes": -5, "time_us": 1}]}]}})",
       "p.json: collectives.reduce_scatter[0].measured[0].send_bytes: must be >= 0"},
      {R"({"schema_version": 1, "name": "x", "context": {"provenance": "measured"},
           "copy_GBps": 1, "collectives": {"reduce_scatter": [
             {"group_size": 2, "alpha_us": 1, "busbw_GBps": 3, "measured": [[1024, 3]]}]}})",
       "p.json: collectives.reduce_scatter[0].measured[0]: expected an object"},
  };
  for (const BadProfile& bad : cases) {
    Result<TimeProfile> profile = ParseTimeProfile(bad.text, "p.json");
    ASSERT_FALSE(profile.ok()) << bad.text;
    EXPECT_NE(profile.status().message().find(bad.message), std::string::npos)
        << profile.status().message();
  }
}

TEST(TimeProfileIo, MissingFileIsAnIoError) {
  Result<TimeProfile> profile = ReadTimeProfile("/nonexistent/profile.json");
  ASSERT_FALSE(profile.ok());
  EXPECT_EQ(profile.status().code(), StatusCode::kIoError);
}

// --profile NAME: a GPU's estimate from its published rates. An 8xH100 SXM node's is the shipped
// derived profile's fit (the same alpha, busbw from the link efficiency), copies at HBM/2 x 0.8.
TEST(TimeProfileIo, AGpuNameIsItsEstimate) {
  Result<TimeProfile> estimate = LoadTimeProfile("h100-80gb");
  ASSERT_TRUE(estimate.ok()) << estimate.status().message();
  EXPECT_EQ(estimate->name, "h100-80gb-estimate");
  EXPECT_EQ(estimate->provenance.kind, "estimate");
  ASSERT_EQ(estimate->reduce_scatter.size(), 1u);
  EXPECT_EQ(estimate->reduce_scatter[0].group_size, 8);
  EXPECT_DOUBLE_EQ(estimate->reduce_scatter[0].alpha_us, 87.73);
  EXPECT_DOUBLE_EQ(estimate->reduce_scatter[0].busbw_GBps, 450 * 0.8065);  // 362.925
  EXPECT_DOUBLE_EQ(estimate->copy_GBps, 3350.0 / 2 * 0.8);
  Result<TimeProfile> shipped =
      ReadTimeProfile(std::string(BUCKETSIM_SOURCE_DIR) + "/traces/profiles/h100-8gpu-nvlink.json");
  ASSERT_TRUE(shipped.ok());
  for (Bytes bytes : {Bytes{1} << 20, Bytes{1} << 30}) {
    const Micros shipped_us = shipped->ReduceScatterTime(bytes, 8);
    EXPECT_NEAR(estimate->ReduceScatterTime(bytes, 8) / shipped_us, 1, 2e-5);
  }

  // A bridged pair (H100 PCIe): NVLink for 2 ranks, PCIe above; a group of 8 takes PCIe's.
  Result<TimeProfile> pcie = LoadTimeProfile("h100-pcie-80gb", GpuEfficiency{0.7, 0.8, 0.5, 0.8});
  ASSERT_TRUE(pcie.ok());
  ASSERT_EQ(pcie->reduce_scatter.size(), 2u);
  EXPECT_DOUBLE_EQ(pcie->ReduceScatterAt(2).busbw_GBps, 150.0);
  EXPECT_DOUBLE_EQ(pcie->ReduceScatterAt(8).busbw_GBps, 32.0);
  // No NVLink at all (L40S): the host link for every group.
  Result<TimeProfile> l40s = LoadTimeProfile("l40s-48gb");
  ASSERT_TRUE(l40s.ok());
  ASSERT_EQ(l40s->reduce_scatter.size(), 1u);
  EXPECT_NEAR(l40s->ReduceScatterAt(8).busbw_GBps, 32 * GpuEfficiency{}.link, 1e-9);
}

TEST(TimeProfileIo, NeitherAFileNorAGpuSaysBoth) {
  Result<TimeProfile> profile = LoadTimeProfile("h100");
  ASSERT_FALSE(profile.ok());
  EXPECT_EQ(profile.status().code(), StatusCode::kIoError);
  EXPECT_NE(profile.status().message().find("h100: cannot open the profile; or a GPU's name for "
                                            "its estimate from published rates: h100-80gb, "),
            std::string::npos)
      << profile.status().message();
}

}  // namespace
}  // namespace bucketsim
