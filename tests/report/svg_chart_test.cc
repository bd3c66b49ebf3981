#include "report/svg_chart.h"

#include <set>

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

TEST(NiceTicks, StepsAreOneTwoOrFiveTimesAPowerOfTen) {
  EXPECT_EQ(NiceTicks(0, 10, 5), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(NiceTicks(0, 3.4, 6), (std::vector<double>{0, 1, 2, 3, 4}));
  EXPECT_EQ(NiceTicks(0, 1692, 10),
            (std::vector<double>{0, 200, 400, 600, 800, 1000, 1200, 1400, 1600, 1800}));
  EXPECT_EQ(NiceTicks(0, 0.25, 5), (std::vector<double>{0, 0.05, 0.1, 0.15, 0.2, 0.25}));
}

TEST(NiceTicks, TheLastTickCoversTheTop) {
  for (double hi : {0.3, 1.0, 7.0, 99.0, 1e9 + 1}) {
    std::vector<double> ticks = NiceTicks(0, hi, 6);
    EXPECT_GE(ticks.back(), hi);
    EXPECT_LE(ticks.size(), 8u) << hi;
  }
  EXPECT_EQ(NiceTicks(5, 5, 4), (std::vector<double>{5, 6}));  // empty domain
}

TEST(ByteAxis, PicksTheBinaryUnitOfTheTop) {
  ByteAxis mib = MakeByteAxis(3'507'200, 6);  // 3.34 MiB
  EXPECT_EQ(mib.unit, "MiB");
  EXPECT_EQ(mib.unit_bytes, 1024.0 * 1024);
  EXPECT_EQ(mib.ticks_bytes.size(), 5u);  // 0, 1, 2, 3, 4 MiB
  EXPECT_EQ(mib.top_bytes(), 4.0 * 1024 * 1024);
  EXPECT_EQ(mib.Label(1.5 * 1024 * 1024), "1.5");

  ByteAxis gib = MakeByteAxis(Bytes{13} * 1024 * 1024 * 1024 + 1, 6);
  EXPECT_EQ(gib.unit, "GiB");
  EXPECT_EQ(gib.top_bytes(), 15.0 * 1024 * 1024 * 1024);  // 0, 5, 10, 15 GiB
  EXPECT_EQ(gib.Label(gib.ticks_bytes[1]), "5");

  EXPECT_EQ(MakeByteAxis(0, 6).unit, "B");
  EXPECT_EQ(MakeByteAxis(1023, 6).unit, "B");
  EXPECT_EQ(MakeByteAxis(1024, 6).unit, "KiB");
}

TEST(LinearScale, MapsDomainOntoRangeAndFlipsForSvgY) {
  LinearScale x{0, 100, 50, 250};
  EXPECT_DOUBLE_EQ(x(0), 50);
  EXPECT_DOUBLE_EQ(x(50), 150);
  EXPECT_DOUBLE_EQ(x(100), 250);
  LinearScale y{0, 10, 300, 20};  // y grows downwards
  EXPECT_DOUBLE_EQ(y(0), 300);
  EXPECT_DOUBLE_EQ(y(10), 20);
  EXPECT_DOUBLE_EQ((LinearScale{3, 3, 7, 9})(3), 7);
}

TEST(FormatTick, DropsTrailingZeros) {
  EXPECT_EQ(FormatTick(2), "2");
  EXPECT_EQ(FormatTick(2.5), "2.5");
  EXPECT_EQ(FormatTick(0.125), "0.125");
  EXPECT_EQ(FormatTick(1800), "1800");
}

TEST(SvgBuilder, EscapesTextAndClosesTheDocument) {
  SvgBuilder svg(100, 50, "c", "a <b> & \"c\"");
  svg.Text(1, 2, "x<y & z");
  svg.Rect(0, 0, 10, 5, "#123456", {}, "tip > 1");
  svg.Polyline({0, 0, 10.04, 5.06}, "#000000", 2, "4,2");
  std::string out = svg.Finish();
  EXPECT_EQ(
      out.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"c\" viewBox=\"0 0 100 50\"", 0),
      0u);
  EXPECT_NE(out.find("<title>a &lt;b&gt; &amp; &quot;c&quot;</title>"), std::string::npos);
  EXPECT_NE(out.find(">x&lt;y &amp; z</text>"), std::string::npos);
  EXPECT_NE(out.find("<title>tip &gt; 1</title></rect>"), std::string::npos);
  EXPECT_NE(out.find("points=\"0,0 10,5.1\""), std::string::npos);
  EXPECT_NE(out.find("stroke-dasharray=\"4,2\""), std::string::npos);
  EXPECT_EQ(out.substr(out.size() - 7), "</svg>\n");
}

TEST(SeriesColor, OkabeItoFirstThenDistinctHuesForAnyNumberOfSeries) {
  EXPECT_EQ(SeriesColor(0), "#0072B2");
  EXPECT_EQ(SeriesColor(6), "#000000");
  EXPECT_EQ(SeriesColor(7), "hsl(20,70%,38%)");
  // A 13-configuration sweep's series, and every one up to kSeriesColors, differ.
  std::set<std::string_view> colors;
  for (std::size_t i = 0; i < kSeriesColors; ++i) colors.insert(SeriesColor(i));
  EXPECT_EQ(colors.size(), kSeriesColors);
  EXPECT_EQ(SeriesColor(kSeriesColors), SeriesColor(0));
}

}  // namespace
}  // namespace bucketsim
