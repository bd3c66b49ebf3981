#include "report/svg_chart.h"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

#include "core/status.h"

namespace bucketsim {

double LinearScale::operator()(double value) const {
  if (domain_hi == domain_lo) return range_lo;
  return range_lo + (value - domain_lo) / (domain_hi - domain_lo) * (range_hi - range_lo);
}

std::vector<double> NiceTicks(double lo, double hi, int max_ticks) {
  BUCKETSIM_CHECK(max_ticks >= 1);
  if (!(hi > lo)) return {lo, lo + 1};
  const double raw = (hi - lo) / max_ticks;
  int exponent = static_cast<int>(std::floor(std::log10(raw)));
  double mantissa = 10;
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * std::pow(10.0, exponent) >= raw * (1 - 1e-9)) {
      mantissa = m;
      break;
    }
  }
  // tick n is n * mantissa * 10^exponent, computed so that it is the double nearest the decimal
  // value (0.15, not 0.15000000000000002): labels and comparisons stay exact.
  auto tick = [&](double n) {
    return exponent >= 0 ? n * mantissa * std::pow(10.0, exponent)
                         : n * mantissa / std::pow(10.0, -exponent);
  };
  const double step = tick(1);
  std::vector<double> ticks;
  for (double n = std::floor(lo / step + 1e-9);; ++n) {
    ticks.push_back(tick(n));
    if (ticks.back() >= hi * (1 - 1e-12)) break;
  }
  return ticks;
}

std::string FormatTick(double value) {
  std::string text = fmt::format("{:.3f}", value);
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  if (text == "-0") text = "0";
  return text;
}

ByteAxis MakeByteAxis(Bytes max_bytes, int max_ticks) {
  Bytes unit_bytes = 1;
  while (unit_bytes < 1024 * kGiB && max_bytes >= unit_bytes * 1024) unit_bytes *= 1024;
  return MakeByteAxisIn(max_bytes, max_ticks, unit_bytes);
}

ByteAxis MakeByteAxisIn(Bytes max_bytes, int max_ticks, Bytes unit_bytes) {
  static constexpr std::array<std::string_view, 5> kUnits = {"B", "KiB", "MiB", "GiB", "TiB"};
  ByteAxis axis;
  std::size_t unit = 0;
  while (unit + 1 < kUnits.size() && axis.unit_bytes < static_cast<double>(unit_bytes)) {
    axis.unit_bytes *= 1024;
    ++unit;
  }
  axis.unit = std::string(kUnits[unit]);
  for (double tick : NiceTicks(0, static_cast<double>(max_bytes) / axis.unit_bytes, max_ticks)) {
    axis.ticks_bytes.push_back(tick * axis.unit_bytes);
  }
  return axis;
}

std::string ByteAxis::Label(double bytes) const { return FormatTick(bytes / unit_bytes); }

std::string_view SeriesColor(std::size_t index) {
  // Okabe-Ito without its yellow (too light on white) and with black last; past those, hues a
  // golden angle apart at a fixed dark saturation, so that 13 series are 13 colours.
  static const std::vector<std::string> kColors = [] {
    std::vector<std::string> colors = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                       "#E69F00", "#56B4E9", "#000000"};
    for (int i = 0; colors.size() < kSeriesColors; ++i) {
      colors.push_back(fmt::format("hsl({:.0f},70%,{}%)", std::fmod(20 + 137.508 * i, 360.0),
                                   i % 2 == 0 ? 38 : 52));
    }
    return colors;
  }();
  return kColors[index % kColors.size()];
}

namespace {

std::string Num(double v) { return FormatTick(std::round(v * 10) / 10); }

std::string Tooltip(std::string_view tooltip) {
  return tooltip.empty() ? std::string() : fmt::format("<title>{}</title>", XmlEscape(tooltip));
}

std::string Dash(std::string_view dash) {
  return dash.empty() ? std::string() : fmt::format(" stroke-dasharray=\"{}\"", dash);
}

}  // namespace

SvgBuilder::SvgBuilder(double width, double height, std::string_view css_class,
                       std::string_view label) {
  out_ = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"{}\" viewBox=\"0 0 {} {}\" "
      "width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"{}\" "
      "font-family=\"sans-serif\">\n<title>{}</title>\n"
      "<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"#ffffff\"/>\n",
      XmlEscape(css_class), Num(width), Num(height), Num(width), Num(height), XmlEscape(label),
      XmlEscape(label), Num(width), Num(height));
}

void SvgBuilder::Rect(double x, double y, double w, double h, std::string_view fill,
                      std::string_view extra, std::string_view tooltip) {
  std::string tip = Tooltip(tooltip);
  out_ += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"{}{}", Num(x),
                      Num(y), Num(std::max(w, 0.0)), Num(std::max(h, 0.0)), fill,
                      extra.empty() ? "" : " ", extra);
  out_ += tip.empty() ? "/>\n" : fmt::format(">{}</rect>\n", tip);
}

void SvgBuilder::Line(double x1, double y1, double x2, double y2, std::string_view stroke,
                      double stroke_width, std::string_view dash) {
  out_ += fmt::format(
      "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"{}\"{}/>\n",
      Num(x1), Num(y1), Num(x2), Num(y2), stroke, FormatTick(stroke_width), Dash(dash));
}

void SvgBuilder::Polyline(const std::vector<double>& points, std::string_view stroke,
                          double stroke_width, std::string_view dash, std::string_view tooltip) {
  BUCKETSIM_CHECK(points.size() % 2 == 0);
  std::string coords;
  for (std::size_t i = 0; i < points.size(); i += 2) {
    if (i > 0) coords += ' ';
    coords += Num(points[i]) + "," + Num(points[i + 1]);
  }
  std::string tip = Tooltip(tooltip);
  out_ += fmt::format(
      "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\" "
      "stroke-linejoin=\"round\"{}",
      coords, stroke, FormatTick(stroke_width), Dash(dash));
  out_ += tip.empty() ? "/>\n" : fmt::format(">{}</polyline>\n", tip);
}

void SvgBuilder::Circle(double cx, double cy, double r, std::string_view fill,
                        std::string_view tooltip) {
  std::string tip = Tooltip(tooltip);
  out_ += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{}\" stroke=\"#ffffff\"",
                      Num(cx), Num(cy), Num(r), fill);
  out_ += tip.empty() ? "/>\n" : fmt::format(">{}</circle>\n", tip);
}

void SvgBuilder::Ring(double cx, double cy, double r, std::string_view stroke, double stroke_width,
                      std::string_view tooltip) {
  std::string tip = Tooltip(tooltip);
  out_ += fmt::format(
      "<circle cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"",
      Num(cx), Num(cy), Num(r), stroke, FormatTick(stroke_width));
  out_ += tip.empty() ? "/>\n" : fmt::format(">{}</circle>\n", tip);
}

void SvgBuilder::Text(double x, double y, std::string_view text, std::string_view anchor,
                      double font_size, double rotate, std::string_view extra) {
  std::string transform =
      rotate == 0 ? std::string()
                  : fmt::format(" transform=\"rotate({} {} {})\"", Num(rotate), Num(x), Num(y));
  out_ += fmt::format(
      "<text x=\"{}\" y=\"{}\" text-anchor=\"{}\" font-size=\"{}\" "
      "fill=\"#222222\"{}{}{}>{}</text>\n",
      Num(x), Num(y), anchor, Num(font_size), transform, extra.empty() ? "" : " ", extra,
      XmlEscape(text));
}

std::string SvgBuilder::Finish() {
  out_ += "</svg>\n";
  return std::move(out_);
}

}  // namespace bucketsim
