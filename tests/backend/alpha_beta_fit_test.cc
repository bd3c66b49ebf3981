#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/sim/alpha_beta_fit.h"

namespace bucketsim {
namespace {

TEST(FitAlphaBeta, RecoversAnExactLine) {
  // n = 4: bus bytes 3/4 * S. alpha 20 µs, busbw 50 GB/s (5e4 bytes/µs).
  std::vector<TimingSample> samples;
  for (Bytes s : {Bytes{1} << 20, Bytes{1} << 24, Bytes{1} << 28}) {
    samples.push_back({s, 20.0 + 0.75 * static_cast<double>(s) / 5e4});
  }
  Result<AlphaBeta> fit = FitAlphaBeta(4, samples);
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  EXPECT_NEAR(fit->alpha_us, 20.0, 1e-6);
  EXPECT_NEAR(fit->busbw_GBps, 50.0, 1e-9);
  EXPECT_EQ(fit->group_size, 4);
}

TEST(FitAlphaBeta, ShippedH100ProfileIsTheFitOfThePublishedFigures) {
  // NVIDIA/nccl#1047: 8xH100 ring reduce-scatter busbw at 128 MB ... 8 GB (reference/anchors.md
  // §3.2). Each point's time is its bus bytes over its busbw. traces/profiles/h100-8gpu-nvlink.json
  // ships this fit rounded to 0.01.
  const std::pair<Bytes, double> points[] = {{128, 311},  {256, 331},  {512, 341}, {1024, 349},
                                             {2048, 355}, {4096, 358}, {8192, 362}};
  std::vector<TimingSample> samples;
  for (auto [mib, busbw] : points) {
    Bytes bytes = mib << 20;
    samples.push_back({bytes, 7.0 / 8.0 * static_cast<double>(bytes) / (busbw * 1e3)});
  }
  Result<AlphaBeta> fit = FitAlphaBeta(8, samples);
  ASSERT_TRUE(fit.ok());
  EXPECT_NEAR(fit->alpha_us, 87.73, 0.005);
  EXPECT_NEAR(fit->busbw_GBps, 362.93, 0.005);
}

TEST(FitAlphaBeta, NegativeInterceptIsClampedAndRefittedThroughTheOrigin) {
  // Times 0.5 and 2.5 µs for 1000 and 3000 bus bytes (n = 2: S = 2000, 6000): the line has
  // intercept -0.5; through the origin the slope is (1000*0.5 + 3000*2.5) / (1000² + 3000²)
  // = 8000 / 1e7 = 8e-4 µs per byte: 1.25 GB/s.
  std::vector<TimingSample> samples = {{2000, 0.5}, {6000, 2.5}};
  Result<AlphaBeta> fit = FitAlphaBeta(2, samples);
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit->alpha_us, 0.0);
  EXPECT_NEAR(fit->busbw_GBps, 1.25, 1e-12);
}

// Sizes 1 KiB to 1 MiB on the line 10 us + x at 1 GB/s, and a 64 MiB point twice as slow (a
// cache or page-fault cliff). Ordinary least squares follows the largest point and misses the
// small sizes by a factor of nine (its intercept goes negative and is clamped); the relative fit
// keeps every size but the outlier within 6%.
TEST(FitAlphaBeta, RelativeWeightingKeepsSmallSizesOnTheLine) {
  std::vector<TimingSample> samples;
  for (Bytes bytes = kKiB; bytes <= kMiB; bytes *= 2) samples.push_back({bytes, 10 + bytes / 2e3});
  samples.push_back({64 * kMiB, 2 * (10 + 64.0 * kMiB / 2e3)});
  Result<AlphaBeta> relative = FitAlphaBeta(2, samples, FitWeighting::kRelative);
  ASSERT_TRUE(relative.ok()) << relative.status().ToString();
  EXPECT_NEAR(relative->alpha_us, 9.779, 1e-3);
  EXPECT_NEAR(relative->busbw_GBps, 0.9475, 1e-4);
  for (std::size_t i = 0; i + 1 < samples.size(); ++i) {
    EXPECT_LT(std::abs(AlphaBetaTime(*relative, samples[i].bytes) / samples[i].time_us - 1), 0.06)
        << samples[i].bytes;
  }
  Result<AlphaBeta> absolute = FitAlphaBeta(2, samples, FitWeighting::kAbsolute);
  ASSERT_TRUE(absolute.ok());
  EXPECT_EQ(absolute->alpha_us, 0);
  EXPECT_GT(AlphaBetaTime(*absolute, kKiB) / samples.front().time_us, 0);
  EXPECT_LT(AlphaBetaTime(*absolute, kKiB) / samples.front().time_us, 0.2);
}

TEST(FitAlphaBeta, RelativeWeightingNeedsPositiveTimes) {
  std::vector<TimingSample> samples = {{kKiB, 0}, {kMiB, 100}};
  Result<AlphaBeta> fit = FitAlphaBeta(2, samples, FitWeighting::kRelative);
  ASSERT_FALSE(fit.ok());
  EXPECT_NE(fit.status().message().find("sample 0: a relative fit needs a time > 0"),
            std::string::npos)
      << fit.status().message();
}

TEST(FitAlphaBeta, RejectsWhatCannotBeFitted) {
  std::vector<TimingSample> one_size = {{1000, 5}, {1000, 6}};
  EXPECT_FALSE(FitAlphaBeta(2, one_size).ok());
  std::vector<TimingSample> shrinking = {{1000, 9}, {100000, 5}};
  EXPECT_FALSE(FitAlphaBeta(2, shrinking).ok());
  std::vector<TimingSample> good = {{1000, 1}, {2000, 2}};
  EXPECT_FALSE(FitAlphaBeta(1, good).ok());
  std::vector<TimingSample> negative = {{1000, -1}, {2000, 2}};
  EXPECT_FALSE(FitAlphaBeta(2, negative).ok());
}

TEST(FitCopyBandwidth, FitsThroughTheOrigin) {
  // 1e6 bytes in 500 µs and 2e6 in 1000 µs: 2000 bytes/µs = 2 GB/s.
  std::vector<TimingSample> samples = {{1'000'000, 500}, {2'000'000, 1000}};
  Result<double> fit = FitCopyBandwidth(samples);
  ASSERT_TRUE(fit.ok());
  EXPECT_NEAR(*fit, 2.0, 1e-12);
  std::vector<TimingSample> nothing = {{0, 0}};
  EXPECT_FALSE(FitCopyBandwidth(nothing).ok());
}

}  // namespace
}  // namespace bucketsim
