// The drawing kit of the report charts: linear scales, "nice" axis ticks (1, 2 or 5 times a
// power of ten), byte axes in binary units (B, KiB, MiB, GiB, TiB), a colour-blind-safe
// palette, and an SVG text builder that escapes what it writes. Plain C++: the report page is
// self-contained (inline SVG, no script, no fonts fetched), so every chart is a string built
// here. report_charts.h draws the report's charts with it.
#pragma once

#include "report/xml_escape.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/units.h"

namespace bucketsim {

// Maps [domain_lo, domain_hi] onto [range_lo, range_hi] (either may be decreasing: SVG's y
// grows downwards). A zero-width domain maps everything to range_lo.
struct LinearScale {
  double domain_lo = 0, domain_hi = 1, range_lo = 0, range_hi = 1;
  double operator()(double value) const;
};

// Tick values from 0 (or `lo`) covering `hi`: a step of 1, 2 or 5 times a power of ten chosen so
// that there are at most `max_ticks` intervals; the last tick is the first multiple of the step
// >= hi. `hi <= lo` gives {lo, lo + 1}.
std::vector<double> NiceTicks(double lo, double hi, int max_ticks);

// A byte axis from 0: the unit is the largest binary unit the top tick reaches (at least 1 of
// it), the ticks are nice numbers in that unit.
struct ByteAxis {
  std::string unit;                 // "B", "KiB", "MiB", "GiB" or "TiB"
  double unit_bytes = 1;            // bytes per unit
  std::vector<double> ticks_bytes;  // from 0; the last one is the axis' top
  double top_bytes() const { return ticks_bytes.back(); }
  std::string Label(double bytes) const;  // the tick label in the unit, e.g. "1.5"
};
ByteAxis MakeByteAxis(Bytes max_bytes, int max_ticks);
// The same in a given binary unit (kKiB, kMiB, ...): a page draws its charts in the unit of its
// tables (byte_unit.h), so a figure reads the same in both.
ByteAxis MakeByteAxisIn(Bytes max_bytes, int max_ticks, Bytes unit_bytes);

// A number as a tick label: at most three decimals, trailing zeros dropped ("2.5", "10").
std::string FormatTick(double value);

// The Okabe-Ito palette (Okabe & Ito 2008, "Color Universal Design"): told apart by people with
// any of the common colour-vision deficiencies. Series colours, in order; after its seven,
// further distinct hues, so that no two of kSeriesColors series share a colour.
inline constexpr std::size_t kSeriesColors = 48;
std::string_view SeriesColor(std::size_t index);

// An SVG document under construction. Coordinates are user units of the viewBox; the width
// scales with the page (CSS), so a chart stays legible at any browser width.
class SvgBuilder {
 public:
  // `css_class` goes on the <svg> element (the page counts charts by class); `label` is its
  // aria-label and its <title> (screen readers, hover).
  SvgBuilder(double width, double height, std::string_view css_class, std::string_view label);

  void Rect(double x, double y, double w, double h, std::string_view fill,
            std::string_view extra = {}, std::string_view tooltip = {});
  void Line(double x1, double y1, double x2, double y2, std::string_view stroke,
            double stroke_width = 1, std::string_view dash = {});
  // A polyline through `points` (x0, y0, x1, y1, ...).
  void Polyline(const std::vector<double>& points, std::string_view stroke, double stroke_width,
                std::string_view dash = {}, std::string_view tooltip = {});
  void Circle(double cx, double cy, double r, std::string_view fill, std::string_view tooltip = {});
  // A hollow circle: a ring around a point drawn before or after it.
  void Ring(double cx, double cy, double r, std::string_view stroke, double stroke_width,
            std::string_view tooltip = {});
  // anchor: "start", "middle" or "end"; rotate in degrees about (x, y).
  void Text(double x, double y, std::string_view text, std::string_view anchor = "start",
            double font_size = 12, double rotate = 0, std::string_view extra = {});

  std::string Finish();  // the closed document

 private:
  std::string out_;
};

}  // namespace bucketsim
