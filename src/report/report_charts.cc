#include "report/report_charts.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "core/size_format.h"
#include "report/report_text.h"
#include "report/run_selection.h"
#include "report/svg_chart.h"

namespace bucketsim {
namespace {

constexpr double kWidth = 960;
constexpr double kLeft = 78;  // room for the y tick labels and the axis title
constexpr double kRight = 24;
constexpr double kFont = 12;

std::string_view PhaseFill(Phase phase) {
  switch (phase) {
    case Phase::kForward:
      return "#e3eef8";
    case Phase::kBackward:
      return "#fbe9dc";
    case Phase::kStep:
      return "#e2f2ea";
    case Phase::kZeroGrad:
      return "#f1e4f0";
    case Phase::kInit:
      break;
  }
  return "#f0f0f0";
}

// The end of the replay clock: the last event any policy reached.
EventIndex EventSpan(const ReportDocument& doc) {
  EventIndex end = std::max<EventIndex>(doc.trace.events, 1);
  for (const RunResult& run : doc.runs) {
    for (const PhaseStats& p : run.phases) end = std::max(end, p.end_event);
  }
  return end;
}

// The phases of the policy that replayed furthest (one that ran out of memory stopped early;
// phase markers are the trace's, the same for every policy).
const std::vector<PhaseStats>& LongestPhases(const ReportDocument& doc) {
  const RunResult* longest = &doc.runs.front();
  for (const RunResult& run : doc.runs) {
    if (!run.phases.empty() && (longest->phases.empty() ||
                                run.phases.back().end_event > longest->phases.back().end_event)) {
      longest = &run;
    }
  }
  return longest->phases;
}

// Phase bands behind a plot of the event axis, with their names where there is room.
void DrawPhaseBands(SvgBuilder& svg, const ReportDocument& doc, const LinearScale& x, double top,
                    double height, ByteUnit unit) {
  for (const PhaseStats& p : LongestPhases(doc)) {
    const double x0 = x(static_cast<double>(p.first_event));
    const double x1 = x(static_cast<double>(p.end_event));
    const std::string name(PhaseName(p.phase));
    svg.Rect(x0, top, x1 - x0, height, PhaseFill(p.phase), {},
             fmt::format("iteration {} {}: events {}-{}, peak {}", p.iteration, name, p.first_event,
                         p.end_event, WithUnit(p.peak_bytes, unit)));
    const double room = x1 - x0;
    std::string label = room > 7.5 * static_cast<double>(name.size()) + 6 ? name
                        : room > 14 ? std::string(1, static_cast<char>(std::toupper(name[0])))
                                    : std::string();
    if (!label.empty()) svg.Text((x0 + x1) / 2, top + 13, label, "middle", 11);
  }
}

// The event axis under a plot: ticks, labels and its title.
void DrawEventAxis(SvgBuilder& svg, const LinearScale& x, EventIndex span, double bottom) {
  for (double tick : NiceTicks(0, static_cast<double>(span), 10)) {
    if (tick > static_cast<double>(span)) break;
    svg.Line(x(tick), bottom, x(tick), bottom + 5, "#444444");
    svg.Text(x(tick), bottom + 18, FormatTick(tick), "middle", kFont);
  }
  svg.Line(x.range_lo, bottom, x.range_hi, bottom, "#444444");
  svg.Text((x.range_lo + x.range_hi) / 2, bottom + 36,
           "trace event index (the replay clock: 0-based position in the trace)", "middle", kFont);
}

// The byte axis left of a plot, with horizontal grid lines.
void DrawByteAxis(SvgBuilder& svg, const ByteAxis& axis, const LinearScale& y, double left,
                  double right, std::string_view what) {
  for (double tick : axis.ticks_bytes) {
    svg.Line(left, y(tick), right, y(tick), tick == 0 ? "#444444" : "#d0d0d0", 1);
    svg.Text(left - 6, y(tick) + 4, axis.Label(tick), "end", kFont);
  }
  const double mid = (y.range_lo + y.range_hi) / 2;
  svg.Text(16, mid, fmt::format("{} ({})", what, axis.unit), "middle", kFont, -90);
}

constexpr double kLegendRow = 20;

// Where each legend entry goes (x, y): rows from `top`, wrapping at the chart's width.
std::vector<std::pair<double, double>> LegendLayout(const std::vector<std::string>& labels,
                                                    double top) {
  std::vector<std::pair<double, double>> at;
  double x = kLeft;
  double y = top;
  for (const std::string& label : labels) {
    const double width = 34 + 7.2 * static_cast<double>(label.size());
    if (x + width > kWidth - kRight && x > kLeft) {
      x = kLeft;
      y += kLegendRow;
    }
    at.emplace_back(x, y);
    x += width + 14;
  }
  return at;
}

// The rows a legend of `labels` takes, so that a chart is made tall enough for all of them.
double LegendRows(const std::vector<std::string>& labels) {
  const auto at = LegendLayout(labels, 0);
  return at.empty() ? 1 : at.back().second / kLegendRow + 1;
}

// A row of legend entries (a swatch drawn by `swatch`, then the text), wrapping at the width.
template <typename Swatch>
double DrawLegend(SvgBuilder& svg, double top, const std::vector<std::string>& labels,
                  Swatch swatch) {
  const auto at = LegendLayout(labels, top);
  for (std::size_t i = 0; i < labels.size(); ++i) {
    swatch(at[i].first, at[i].second, i);
    svg.Text(at[i].first + 28, at[i].second + 4, labels[i], "start", kFont);
  }
  return (at.empty() ? top : at.back().second) + kLegendRow;
}

// `runs` as given, or every run of the document when it is empty.
std::vector<std::size_t> RunsOrAll(const ReportDocument& doc,
                                   const std::vector<std::size_t>& runs) {
  if (!runs.empty()) return runs;
  std::vector<std::size_t> all(doc.runs.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  return all;
}

// The knee's ring: Okabe-Ito's bluish green, apart from the dots' blue and vermillion.
constexpr std::string_view kKneeColor = "#009E73";

std::string LaneLabel(const BucketLifetime& b) {
  return fmt::format("{} {} g{}", b.category == Category::kBucketData ? "data" : "output",
                     DTypeName(b.dtype), b.group);
}

}  // namespace

std::string_view CategoryColor(Category category) {
  switch (category) {
    case Category::kParam:
      return "#332288";
    case Category::kActivation:
      return "#88CCEE";
    case Category::kGrad:
      return "#44AA99";
    case Category::kOptimizerState:
      return "#117733";
    case Category::kAllGather:
      return "#999933";
    case Category::kOther:
      return "#BBBBBB";
    case Category::kBucketData:
      return "#CC6677";
    case Category::kBucketOutput:
      return "#882255";
    case Category::kRetiredOutput:
      return "#AA4499";
    case Category::kRsStackTemp:
      return "#DDCC77";
    case Category::kRsCatTemp:
      return "#EE8866";
    case Category::kRsContiguousTemp:
      return "#FFAABB";
    case Category::kBypassOutput:
      return "#77AADD";
    case Category::kGradShard:
      return "#BBCC33";
  }
  return "#000000";
}

std::optional<ReportChart> MemoryOverTimeChart(const ReportDocument& doc, ByteUnit unit,
                                               const std::vector<std::size_t>& runs) {
  if (!doc.has_timeline) return std::nullopt;
  const std::vector<std::size_t> drawn = RunsOrAll(doc, runs);
  const double top = 30;
  const double plot_h = 300;
  const double bottom = top + plot_h;
  std::vector<std::string> legend;
  bool any_reserved = false;
  Bytes most = 0;
  for (std::size_t i : drawn) {
    const RunResult& run = doc.runs[i];
    legend.push_back(RunLabel(doc.runs, i));
    most = std::max({most, run.peak.allocated_bytes, run.peak.reserved_bytes});
    any_reserved = any_reserved || run.peak.reserved_bytes != run.peak.allocated_bytes ||
                   run.memory_model == "caching";
  }
  const EventIndex span = EventSpan(doc);
  const ByteAxis axis = MakeByteAxisIn(most, 6, unit.bytes);
  const LinearScale x{0, static_cast<double>(span), kLeft, kWidth - kRight};
  const LinearScale y{0, axis.top_bytes(), bottom, top};
  const std::string label =
      drawn.size() == doc.runs.size()
          ? std::string("Memory over time, all policies")
          : fmt::format("Memory over time, {} of {} runs", drawn.size(), doc.runs.size());
  SvgBuilder svg(kWidth, bottom + 64 + kLegendRow * LegendRows(legend) + (any_reserved ? 20 : 0),
                 kChartClass, label);
  DrawPhaseBands(svg, doc, x, top, plot_h, unit);
  DrawByteAxis(svg, axis, y, kLeft, kWidth - kRight, "memory");
  DrawEventAxis(svg, x, span, bottom);

  // Marks: a dotted line and the name (marks of one name recur per iteration). Names are
  // vertical, 12 units apart at least: a mark closer than that to the last one named is drawn
  // unnamed ("after bwd" and "after step" sit a few events apart; the line has no tooltip). A name
  // reads up from the plot's foot or, where a run's peak dot is in its way (a peak often falls
  // at a mark), down from the plot's top; where dots are in the way of both, it is left out.
  std::vector<std::pair<double, double>> peaks;
  for (std::size_t i : drawn) {
    peaks.emplace_back(x(static_cast<double>(doc.runs[i].peak.event_index)),
                       y(static_cast<double>(doc.runs[i].peak.allocated_bytes)));
  }
  auto clear = [&peaks](double mx, double y0, double y1) {
    return std::none_of(peaks.begin(), peaks.end(), [&](const std::pair<double, double>& p) {
      return p.first > mx - 18 && p.first < mx + 4 && p.second > y0 - 5 && p.second < y1 + 5;
    });
  };
  double last_label_x = -1e9;
  for (const MarkSample& m : doc.runs.front().marks) {
    const double mx = x(static_cast<double>(m.event_index));
    const std::string name = fmt::format("{} (it {})", m.name, m.iteration);
    svg.Line(mx, top, mx, bottom, "#555555", 1, "2,3");
    if (mx - last_label_x < 12) continue;
    const double length = 6.3 * static_cast<double>(name.size());
    if (clear(mx, bottom - 6 - length, bottom - 6)) {
      svg.Text(mx - 3, bottom - 6, name, "start", 10, -90);
    } else if (clear(mx, top + 18, top + 18 + length)) {
      svg.Text(mx - 3, top + 18, name, "end", 10, -90);
    } else {
      continue;
    }
    last_label_x = mx;
  }

  for (std::size_t k = 0; k < drawn.size(); ++k) {
    const RunResult& run = doc.runs[drawn[k]];
    const std::string name = RunLabel(doc.runs, drawn[k]);
    const MemoryTimelineData& t = run.timeline;
    std::vector<double> allocated;
    std::vector<double> reserved;
    // A step line: each span at its largest figure (the timeline keeps the maxima).
    for (const TimelinePoint& p : t.points) {
      const double x0 = x(static_cast<double>(p.first_event));
      const double x1 =
          x(static_cast<double>(std::min<EventIndex>(p.first_event + t.span_events, span)));
      for (double xx : {x0, x1}) {
        allocated.insert(allocated.end(), {xx, y(static_cast<double>(p.allocated_bytes))});
        reserved.insert(reserved.end(), {xx, y(static_cast<double>(p.reserved_bytes))});
      }
    }
    const std::string_view color = SeriesColor(k);
    if (!allocated.empty()) {
      if (any_reserved) {
        svg.Polyline(reserved, color, 1.5, "6,4", fmt::format("{}: reserved", name));
      }
      svg.Polyline(allocated, color, 2, {}, fmt::format("{}: allocated", name));
    }
    svg.Circle(x(static_cast<double>(run.peak.event_index)),
               y(static_cast<double>(run.peak.allocated_bytes)), 4.5, color,
               fmt::format("{}: peak {} allocated at event {} (iteration {}, {})", name,
                           WithUnit(run.peak.allocated_bytes, unit), run.peak.event_index,
                           run.peak.iteration, PhaseName(run.peak.phase)));
  }
  double legend_top = bottom + 60;
  legend_top = DrawLegend(svg, legend_top, legend, [&svg](double lx, double ly, std::size_t i) {
    svg.Line(lx, ly, lx + 22, ly, SeriesColor(i), 3);
  });
  if (any_reserved) {
    svg.Line(kLeft, legend_top, kLeft + 22, legend_top, "#444444", 2);
    svg.Text(kLeft + 28, legend_top + 4, "allocated", "start", kFont);
    svg.Line(kLeft + 110, legend_top, kLeft + 132, legend_top, "#444444", 1.5, "6,4");
    svg.Text(kLeft + 138, legend_top + 4, "reserved (caching allocator)", "start", kFont);
    svg.Circle(kLeft + 360, legend_top, 4.5, "#444444");
    svg.Text(kLeft + 370, legend_top + 4, "peak allocated", "start", kFont);
  }
  std::string caption = fmt::format(
      "Allocated{} bytes of {} against the trace's event index; each point is the "
      "largest figure within a span of {} event(s), so no peak is lost. Shaded bands are the "
      "phases, dotted lines the named marks, dots the peaks.",
      any_reserved ? " (solid) and reserved (dashed)" : "",
      drawn.size() == doc.runs.size() ? "every policy" : "each run drawn",
      doc.runs.front().timeline.span_events);
  return ReportChart{"memory-over-time", "Memory over time", caption, svg.Finish()};
}

// Room left of a bar chart for its longest row label (about 7 units a character at kFont).
double RowLabelWidth(const std::vector<RunResult>& runs) {
  std::size_t longest = 0;
  for (std::size_t i = 0; i < runs.size(); ++i)
    longest = std::max(longest, RunLabel(runs, i).size());
  return std::clamp(16 + 7.0 * static_cast<double>(longest), 120.0, 420.0);
}

ReportChart PeakCompositionChart(const ReportDocument& doc, ByteUnit unit,
                                 const std::vector<std::size_t>& runs) {
  const std::vector<std::size_t> drawn = RunsOrAll(doc, runs);
  const double left = RowLabelWidth(doc.runs);
  const double top = 20;
  const double bar_h = 24;
  const double gap = 12;
  std::vector<Category> shown;
  Bytes most = 0;
  for (int c = 0; c < kNumCategories; ++c) {
    for (std::size_t i : drawn) {
      if (doc.runs[i].peak.by_category[c] > 0) {
        shown.push_back(static_cast<Category>(c));
        break;
      }
    }
  }
  for (std::size_t i : drawn) most = std::max(most, doc.runs[i].peak.allocated_bytes);
  const double plot_h = static_cast<double>(drawn.size()) * (bar_h + gap);
  const double bottom = top + plot_h;
  const ByteAxis axis = MakeByteAxisIn(most, 8, unit.bytes);
  const LinearScale x{0, axis.top_bytes(), left, kWidth - kRight - 70};
  std::vector<std::string> legend;
  for (Category c : shown) legend.emplace_back(CategoryName(c));
  SvgBuilder svg(kWidth, bottom + 56 + kLegendRow * LegendRows(legend), kChartClass,
                 "Composition of each policy's peak, by category");
  for (double tick : axis.ticks_bytes) {
    svg.Line(x(tick), top - 4, x(tick), bottom, tick == 0 ? "#444444" : "#d0d0d0");
    svg.Text(x(tick), bottom + 16, axis.Label(tick), "middle", kFont);
  }
  svg.Text((x.range_lo + x.range_hi) / 2, bottom + 34,
           fmt::format("alive at the peak ({})", axis.unit), "middle", kFont);
  for (std::size_t row = 0; row < drawn.size(); ++row) {
    const RunResult& run = doc.runs[drawn[row]];
    const std::string name = RunLabel(doc.runs, drawn[row]);
    const double y0 = top + static_cast<double>(row) * (bar_h + gap);
    svg.Text(left - 8, y0 + bar_h / 2 + 4, name, "end", kFont);
    Bytes sum = 0;
    for (Category c : shown) {
      const Bytes bytes = run.peak.by_category[static_cast<int>(c)];
      if (bytes == 0) continue;
      const double x0 = x(static_cast<double>(sum));
      sum += bytes;
      svg.Rect(x0, y0, x(static_cast<double>(sum)) - x0, bar_h, CategoryColor(c),
               "stroke=\"#ffffff\" stroke-width=\"0.5\"",
               fmt::format("{}: {} {}", name, CategoryName(c), WithUnit(bytes, unit)));
    }
    // A run that ran out of --device-memory: its bar is what was alive when it failed.
    svg.Text(x(static_cast<double>(sum)) + 6, y0 + bar_h / 2 + 4,
             run.oom ? fmt::format("{} OOM", WithUnit(sum, unit)) : WithUnit(sum, unit), "start",
             kFont, 0, run.oom ? "fill=\"#B00020\" font-weight=\"bold\"" : "");
  }
  DrawLegend(svg, bottom + 56, legend, [&svg, &shown](double lx, double ly, std::size_t i) {
    svg.Rect(lx, ly - 6, 22, 12, CategoryColor(shown[i]));
  });
  const bool any_oom = std::any_of(drawn.begin(), drawn.end(),
                                   [&doc](std::size_t i) { return doc.runs[i].oom.has_value(); });
  return {"peak-composition", "Composition of the peak",
          std::string("What is alive at each policy's peak allocated memory, stacked by category "
                      "(the trace's own tensors first, then the buffers the policy made).") +
              (any_oom ? " OOM: the policy ran out of --device-memory; its bar is its peak "
                         "before the allocation that failed."
                       : ""),
          svg.Finish()};
}

std::optional<ReportChart> BucketLifetimesChart(const ReportDocument& doc, std::size_t index,
                                                ByteUnit unit) {
  const RunResult& run = doc.runs[index];
  if (run.bucket_lifetimes.empty()) return std::nullopt;
  const std::string name = RunLabel(doc.runs, index);
  constexpr std::size_t kMaxLanes = 48;
  const double left = 150;
  const double top = 24;
  const double lane_h = 12;
  const double live_h = 8;
  const double lane_gap = 3;
  // Lanes: one per bucket buffer key, in order of first allocation.
  std::map<std::tuple<int, int, GroupId>, std::size_t> lane_of;
  std::vector<std::string> lane_names;
  for (const BucketLifetime& b : run.bucket_lifetimes) {
    auto key = std::make_tuple(static_cast<int>(b.dtype), static_cast<int>(b.category), b.group);
    if (lane_of.count(key) == 0 && lane_names.size() < kMaxLanes) {
      lane_of.emplace(key, lane_names.size());
      lane_names.push_back(LaneLabel(b));
    }
  }
  std::size_t lanes_dropped = 0;
  {
    std::map<std::tuple<int, int, GroupId>, bool> seen;
    for (const BucketLifetime& b : run.bucket_lifetimes) {
      auto key = std::make_tuple(static_cast<int>(b.dtype), static_cast<int>(b.category), b.group);
      if (lane_of.count(key) == 0 && !seen[key]) {
        seen[key] = true;
        ++lanes_dropped;
      }
    }
  }
  const double plot_h = static_cast<double>(lane_names.size()) * (lane_h + lane_gap) + 20;
  const double bottom = top + plot_h;
  const EventIndex span = EventSpan(doc);
  const LinearScale x{0, static_cast<double>(span), left, kWidth - kRight};
  SvgBuilder svg(kWidth, bottom + 84, kChartClass,
                 fmt::format("Bucket buffer lifetimes: {}", name));
  DrawPhaseBands(svg, doc, x, top, plot_h, unit);
  DrawEventAxis(svg, x, span, bottom);
  for (std::size_t lane = 0; lane < lane_names.size(); ++lane) {
    svg.Text(left - 6, top + 20 + static_cast<double>(lane) * (lane_h + lane_gap) + lane_h - 2,
             lane_names[lane], "end", 10);
  }
  for (const BucketLifetime& b : run.bucket_lifetimes) {
    auto it = lane_of.find(
        std::make_tuple(static_cast<int>(b.dtype), static_cast<int>(b.category), b.group));
    if (it == lane_of.end()) continue;
    const double y0 = top + 20 + static_cast<double>(it->second) * (lane_h + lane_gap);
    const EventIndex end = b.freed_event.value_or(span);
    const EventIndex live_end = b.retired_event.value_or(end);
    const double x0 = x(static_cast<double>(b.allocated_event));
    const std::string tip = fmt::format(
        "{}: {} {} group {}, {}, allocated at event {}{}{}", name, CategoryName(b.category),
        DTypeName(b.dtype), b.group, WithUnit(b.bytes, unit), b.allocated_event,
        b.retired_event ? fmt::format(", retired at {}", *b.retired_event) : std::string(),
        b.freed_event ? fmt::format(", freed at {}", *b.freed_event)
                      : std::string(", alive at the end"));
    // A retired shard lives on beside the fresh one of the same lane: live bars fill the upper
    // part of the lane, retired stretches the lower part, so neither hides the other.
    svg.Rect(x0, y0, std::max(1.0, x(static_cast<double>(live_end)) - x0), live_h,
             CategoryColor(b.category), {}, tip);
    if (b.retired_event) {
      const double xr = x(static_cast<double>(*b.retired_event));
      svg.Rect(xr, y0 + live_h, std::max(1.0, x(static_cast<double>(end)) - xr), lane_h - live_h,
               CategoryColor(Category::kRetiredOutput), {}, tip);
    }
  }
  const std::vector<std::string> legend = {"bucket_data", "bucket_output",
                                           "retired_output (kept by gradient views)"};
  const Category legend_colors[] = {Category::kBucketData, Category::kBucketOutput,
                                    Category::kRetiredOutput};
  DrawLegend(svg, bottom + 58, legend, [&svg, &legend_colors](double lx, double ly, std::size_t i) {
    svg.Rect(lx, ly - 6, 22, 12, CategoryColor(legend_colors[i]));
  });
  std::string caption = fmt::format(
      "Each lane is one bucket buffer (data or output shard; dtype, process group g), each bar "
      "one allocation from the event that made it to the one that freed it; the thin lower bar "
      "is an output shard retired at a flush and kept by gradient views. {} allocation(s) "
      "drawn.",
      run.bucket_lifetimes.size());
  if (run.bucket_lifetimes_dropped > 0) {
    caption += fmt::format(
        " {} later allocation(s) were not recorded (the report keeps the "
        "first {}).",
        run.bucket_lifetimes_dropped, run.bucket_lifetimes.size());
  }
  if (lanes_dropped > 0) caption += fmt::format(" {} more lane(s) not drawn.", lanes_dropped);
  return ReportChart{fmt::format("bucket-lifetimes-{}", index + 1),
                     fmt::format("Bucket lifetimes: {}", name), caption, svg.Finish(), index};
}

std::optional<ReportChart> FragmentationChart(const ReportDocument& doc, ByteUnit unit,
                                              const std::vector<std::size_t>& drawn) {
  std::vector<std::size_t> runs;
  Bytes most = 0;
  for (std::size_t i : RunsOrAll(doc, drawn)) {
    const RunResult& run = doc.runs[i];
    if (!run.peak.fragmentation) continue;
    runs.push_back(i);
    most = std::max(
        most, run.peak.allocated_bytes + run.peak.fragmentation->reserved_minus_allocated_bytes);
  }
  if (runs.empty()) return std::nullopt;
  const double left = RowLabelWidth(doc.runs);
  const double top = 20;
  const double bar_h = 24;
  const double gap = 12;
  const double bottom = top + static_cast<double>(runs.size()) * (bar_h + gap);
  const ByteAxis axis = MakeByteAxisIn(most, 8, unit.bytes);
  const LinearScale x{0, axis.top_bytes(), left, kWidth - kRight - 70};
  SvgBuilder svg(kWidth, bottom + 80, kChartClass,
                 "Reserved memory at the allocated peak (caching allocator)");
  for (double tick : axis.ticks_bytes) {
    svg.Line(x(tick), top - 4, x(tick), bottom, tick == 0 ? "#444444" : "#d0d0d0");
    svg.Text(x(tick), bottom + 16, axis.Label(tick), "middle", kFont);
  }
  svg.Text((x.range_lo + x.range_hi) / 2, bottom + 34,
           fmt::format("reserved at the allocated peak ({})", axis.unit), "middle", kFont);
  const std::vector<std::string_view> colors = {"#0072B2", "#D55E00", "#E69F00"};
  for (std::size_t row = 0; row < runs.size(); ++row) {
    const RunResult& run = doc.runs[runs[row]];
    const std::string name = RunLabel(doc.runs, runs[row]);
    const FragmentationInfo& f = *run.peak.fragmentation;
    const double y0 = top + static_cast<double>(row) * (bar_h + gap);
    svg.Text(left - 8, y0 + bar_h / 2 + 4, name, "end", kFont);
    const Bytes parts[] = {run.peak.allocated_bytes, f.inactive_split_bytes,
                           f.reserved_minus_allocated_bytes - f.inactive_split_bytes};
    const char* names[] = {"allocated", "free pieces of split blocks", "other cached free"};
    Bytes sum = 0;
    for (int k = 0; k < 3; ++k) {
      const double x0 = x(static_cast<double>(sum));
      sum += parts[k];
      svg.Rect(x0, y0, x(static_cast<double>(sum)) - x0, bar_h, colors[k], {},
               fmt::format("{}: {} {}; largest free block {}", name, names[k],
                           WithUnit(parts[k], unit), WithUnit(f.largest_free_block_bytes, unit)));
    }
    svg.Text(x(static_cast<double>(sum)) + 6, y0 + bar_h / 2 + 4, WithUnit(sum, unit), "start",
             kFont);
  }
  DrawLegend(svg, bottom + 56,
             {"allocated", "free pieces of split blocks (inactive_split)", "other cached free"},
             [&svg, &colors](double lx, double ly, std::size_t i) {
               svg.Rect(lx, ly - 6, 22, 12, colors[i]);
             });
  return ReportChart{"fragmentation", "Fragmentation at the peak",
                     "What the caching allocator held reserved at each policy's allocated peak: "
                     "the allocated bytes and the cached free memory beside them.",
                     svg.Finish()};
}

std::optional<ReportChart> ParetoChart(const ReportDocument& doc, ByteUnit unit) {
  if (!doc.sweep || doc.sweep->points.empty()) return std::nullopt;
  const std::vector<SweepPoint>& points = doc.sweep->points;
  const std::optional<BudgetAnswer>& budget = doc.sweep->budget;
  const double top = 20;
  const double plot_h = 340;
  const double bottom = top + plot_h;
  const double plot_right = kWidth - kRight - 150;  // room for the labels of the rightmost points
  Bytes most = budget ? budget->budget_bytes : 0;
  Micros slowest = 0;
  Micros fastest = std::numeric_limits<Micros>::max();
  std::size_t out_of_memory = 0;
  for (const SweepPoint& p : points) {
    if (p.out_of_memory) {
      ++out_of_memory;
      continue;
    }
    most = std::max(most, p.peak_reserved_bytes);
    slowest = std::max(slowest, p.step_time_us);
    fastest = std::min(fastest, p.step_time_us);
  }
  if (fastest > slowest) fastest = slowest;
  const ByteAxis axis = MakeByteAxisIn(most, 8, unit.bytes);
  // The time axis spans the points, not 0 to the slowest: step times a few percent apart are
  // the question, and from 0 they would lie on one line. Padded by a tenth of the spread (or
  // 1% of the time when every point takes the same), floored to a tick.
  const double pad_ms = std::max((slowest - fastest) / 1000.0 / 10, slowest / 1000.0 / 100);
  const std::vector<double> time_ticks =
      NiceTicks(std::max(0.0, fastest / 1000.0 - pad_ms), slowest / 1000.0 + pad_ms, 6);
  const LinearScale x{0, axis.top_bytes(), kLeft, plot_right};
  const LinearScale y{time_ticks.front(), time_ticks.back(), bottom, top};
  SvgBuilder svg(kWidth, bottom + 76, kChartClass,
                 "Peak reserved memory versus step time, one point per configuration of the sweep");
  for (double tick : time_ticks) {
    svg.Line(kLeft, y(tick), plot_right, y(tick),
             tick == time_ticks.front() ? "#444444" : "#d0d0d0", 1);
    svg.Text(kLeft - 6, y(tick) + 4, FormatTick(tick), "end", kFont);
  }
  svg.Text(16, (top + bottom) / 2, "predicted step time (ms)", "middle", kFont, -90);
  for (double tick : axis.ticks_bytes) {
    svg.Line(x(tick), bottom, x(tick), bottom + 5, "#444444");
    svg.Text(x(tick), bottom + 18, axis.Label(tick), "middle", kFont);
  }
  svg.Text((kLeft + plot_right) / 2, bottom + 36, fmt::format("peak reserved ({})", axis.unit),
           "middle", kFont);
  if (budget) {
    const double bx = x(static_cast<double>(budget->budget_bytes));
    svg.Line(bx, top, bx, bottom, "#444444", 1.5, "6,4");
    svg.Text(bx + 4, top + 12,
             fmt::format("budget {} {}", axis.Label(static_cast<double>(budget->budget_bytes)),
                         axis.unit),
             "start", kFont);
  }
  // The Pareto front as the engine marked it (engine/sweep_summary.h), from the least memory
  // to the most: along it, each step buys time with memory.
  std::vector<const SweepPoint*> front;
  for (const SweepPoint& p : points) {
    if (p.pareto) front.push_back(&p);
  }
  std::stable_sort(front.begin(), front.end(), [](const SweepPoint* a, const SweepPoint* b) {
    return std::tie(a->peak_reserved_bytes, a->step_time_us) <
           std::tie(b->peak_reserved_bytes, b->step_time_us);
  });
  std::vector<double> line;
  for (const SweepPoint* p : front) {
    line.insert(line.end(),
                {x(static_cast<double>(p->peak_reserved_bytes)), y(p->step_time_us / 1000.0)});
  }
  svg.Polyline(line, SeriesColor(1), 1.5, {}, "Pareto front");
  if (budget && budget->best) {
    const SweepPoint& chosen = points[*budget->best];
    svg.Circle(x(static_cast<double>(chosen.peak_reserved_bytes)), y(chosen.step_time_us / 1000.0),
               10, "#000000",
               fmt::format("chosen within the budget: {}",
                           PolicyAtCap(chosen.policy, chosen.bucket_cap_mb)));
  }
  // The knee of the sweep's advice (sweep_report.h): ringed over its dot.
  const std::optional<std::size_t> knee = doc.sweep->knee.knee;
  for (const SweepPoint& p : points) {
    if (p.out_of_memory) continue;
    svg.Circle(
        x(static_cast<double>(p.peak_reserved_bytes)), y(p.step_time_us / 1000.0), 5,
        p.pareto ? SeriesColor(1) : SeriesColor(0),
        fmt::format("{}: peak reserved {}, step {:.3f} ms, exposed communication {:.3f} "
                    "ms{}",
                    PolicyAtCap(p.policy, p.bucket_cap_mb), WithUnit(p.peak_reserved_bytes, unit),
                    p.step_time_us / 1000.0, p.exposed_communication_us / 1000.0,
                    p.pareto ? " (Pareto-optimal)" : ""));
  }
  if (knee && !points[*knee].out_of_memory) {
    const SweepPoint& k = points[*knee];
    svg.Ring(
        x(static_cast<double>(k.peak_reserved_bytes)), y(k.step_time_us / 1000.0), 13, kKneeColor,
        2.5,
        fmt::format("knee: {} (the least peak reserved within {:g}% of the fastest step)",
                    PolicyAtCap(k.policy, k.bucket_cap_mb), doc.sweep->knee.time_tolerance * 100));
  }
  // Labels: the Pareto-optimal configurations, the knee and the chosen one only (every dot has
  // its figures in its tooltip and in the sweep table). Configurations with the same figures
  // share a dot and one label ("unbucketed and 3 more").
  // A label goes right of its dot, else left, above or below it, wherever it covers no other
  // label, dot, ring or the budget's name; else it is left out rather than moved away from its
  // dot. Widths are reckoned generously (6.3 units a character at font size 10, the widest
  // sans-serif fonts' average), so that no two labels touch in any font.
  auto is_chosen = [&](std::size_t i) {
    return (budget && budget->best && *budget->best == i) || knee == i;
  };
  // The configurations that share each dot, and whether the dot is labelled.
  struct Dot {
    std::vector<std::size_t> points;
    bool labelled = false;
  };
  std::vector<Dot> dots;
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (points[i].out_of_memory) continue;
    auto dot = std::find_if(dots.begin(), dots.end(), [&](const Dot& d) {
      return SameFigures(points[d.points.front()], points[i]);
    });
    if (dot == dots.end()) dot = dots.insert(dots.end(), Dot{});
    dot->points.push_back(i);
    dot->labelled = dot->labelled || points[i].pareto || is_chosen(i);
  }
  // A dot's label names the chosen configuration, else the one the advice prefers among those
  // with its figures (the knee of equal figures is the first in the order of preference).
  auto named = [&](const Dot& dot) {
    for (std::size_t i : dot.points) {
      if (is_chosen(i)) return i;
    }
    std::vector<SweepPoint> same;
    for (std::size_t i : dot.points) same.push_back(points[i]);
    return dot.points[FindKnee(same, 1e-6).knee.value_or(0)];
  };
  struct Box {
    double x0, y0, x1, y1;
    bool Overlaps(const Box& o, double margin) const {
      return x0 < o.x1 + margin && o.x0 < x1 + margin && y0 < o.y1 + margin && o.y0 < y1 + margin;
    }
  };
  auto around = [](double cx, double cy, double r) { return Box{cx - r, cy - r, cx + r, cy + r}; };
  auto ring_of = [&](std::size_t i) {
    return (budget && budget->best == i) ? 10.0 : knee == i ? 13.0 : 5.0;
  };
  std::vector<Box> taken;
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (points[i].out_of_memory) continue;
    taken.push_back(around(x(static_cast<double>(points[i].peak_reserved_bytes)),
                           y(points[i].step_time_us / 1000.0), ring_of(i)));
  }
  if (budget) {
    const double bx = x(static_cast<double>(budget->budget_bytes));
    taken.push_back({bx, top, bx + 4 + 7.2 * 16, top + 16});  // "budget 256 MiB"
  }
  for (const Dot& dot : dots) {
    if (!dot.labelled) continue;
    const std::size_t i = named(dot);
    const SweepPoint& p = points[i];
    const std::string label =
        PolicyAtCap(p.policy, p.bucket_cap_mb) +
        (dot.points.size() > 1 ? fmt::format(" and {} more", dot.points.size() - 1)
                               : std::string());
    const double px = x(static_cast<double>(p.peak_reserved_bytes));
    const double py = y(p.step_time_us / 1000.0);
    const double w = 6.3 * static_cast<double>(label.size());
    const double gap = ring_of(i) + 4;
    // Above or below: centred on the dot, moved sideways as far as the plot needs.
    const double mid_x0 = std::clamp(px - w / 2, kLeft, std::max(kLeft, kWidth - 4 - w));
    // Text boxes: 9 units above the baseline to 3 below.
    const std::vector<Box> candidates = {
        {px + gap, py - 5.5, px + gap + w, py + 6.5},   // right
        {px - gap - w, py - 5.5, px - gap, py + 6.5},   // left
        {mid_x0, py - gap - 12, mid_x0 + w, py - gap},  // above
        {mid_x0, py + gap, mid_x0 + w, py + gap + 12},  // below
    };
    const Box own = around(px, py, ring_of(i));
    auto free = [&](const Box& box) {
      return box.x0 >= kLeft && box.x1 <= kWidth - 4 && box.y0 >= 0 && box.y1 <= bottom &&
             std::none_of(taken.begin(), taken.end(), [&](const Box& other) {
               return box.Overlaps(other, 2) && !(other.x0 == own.x0 && other.y0 == own.y0);
             });
    };
    auto at = std::find_if(candidates.begin(), candidates.end(), free);
    if (at == candidates.end()) continue;
    taken.push_back(*at);
    svg.Text(at->x0, at->y1 - 3, label, "start", 10);
  }
  const double legend_top = bottom + 60;
  svg.Circle(kLeft + 6, legend_top, 5, SeriesColor(1));
  svg.Text(kLeft + 16, legend_top + 4, "Pareto-optimal (joined)", "start", kFont);
  svg.Circle(kLeft + 206, legend_top, 5, SeriesColor(0));
  svg.Text(kLeft + 216, legend_top + 4, "dominated", "start", kFont);
  if (budget) {
    svg.Line(kLeft + 316, legend_top, kLeft + 338, legend_top, "#444444", 1.5, "6,4");
    svg.Text(kLeft + 344, legend_top + 4, "--budget", "start", kFont);
    svg.Circle(kLeft + 430, legend_top, 8, "#000000");
    svg.Text(kLeft + 444, legend_top + 4, "fastest that fits", "start", kFont);
  }
  if (knee) {
    const double kx = kLeft + (budget ? 590 : 316);
    svg.Ring(kx + 8, legend_top, 9, kKneeColor, 2.5);
    svg.Text(kx + 24, legend_top + 4, "knee", "start", kFont);
  }
  std::string caption =
      "Each dot is one (policy, bucket cap) configuration of the sweep: its peak reserved memory "
      "against its predicted step time. The Pareto-optimal ones (no other configuration has "
      "both less peak reserved memory and a shorter step) are joined, from the least memory to "
      "the most, and labelled; every dot's figures are in its tooltip and in the sweep table.";
  if (knee) {
    caption += fmt::format(
        " The green ring is the knee: the least peak reserved memory within {:g}% of the "
        "fastest step.",
        doc.sweep->knee.time_tolerance * 100);
  }
  if (budget) {
    caption += budget->best
                   ? fmt::format(
                         " The dashed line is the budget ({}); the dot ringed in black the "
                         "fastest configuration within it.",
                         WithUnit(budget->budget_bytes, unit))
                   : fmt::format(" The dashed line is the budget ({}); nothing fits within it.",
                                 WithUnit(budget->budget_bytes, unit));
  }
  if (out_of_memory > 0) {
    caption += fmt::format(" {} configuration(s) ran out of device memory and are not drawn.",
                           out_of_memory);
  }
  return ReportChart{"pareto", "Memory versus step time (sweep)", caption, svg.Finish()};
}

std::vector<ReportChart> ReportCharts(const ReportDocument& doc, const std::string& prefix,
                                      ByteUnit unit) {
  const RunSelection selection = SelectRuns(doc);
  std::vector<ReportChart> charts;
  // The chart of `runs` (`drawn_as` says which they are) and, where they are not every run, the
  // chart of every run after it, folded.
  auto add = [&](auto draw, const std::vector<std::size_t>& runs, const std::string& drawn_as) {
    std::optional<ReportChart> chart = draw(runs);
    if (!chart) return;
    if (runs.size() == doc.runs.size()) {
      charts.push_back(std::move(*chart));
      return;
    }
    ReportChart all = *draw(std::vector<std::size_t>{});
    chart->caption +=
        fmt::format(" {} of the {} runs are drawn: {}; every run is on the chart folded below.",
                    runs.size(), doc.runs.size(), drawn_as);
    all.id += "-all";
    all.title += ", every run";
    all.folded_summary = fmt::format("{}: every run ({})", chart->title, doc.runs.size());
    charts.push_back(std::move(*chart));
    charts.push_back(std::move(all));
  };
  const std::string per_policy = "one per policy, " + ShownRunsText(selection);
  const std::string series =
      selection.series == selection.shown
          ? per_policy
          : std::string(
                "the recommended run, the first policy given and the Pareto-optimal "
                "ones first, then the others in the page's order") +
                (selection.Folds() ? ", each policy at the cap it is shown at" : "");
  // A sweep's question is the trade-off: its chart comes first.
  if (auto chart = ParetoChart(doc, unit)) charts.push_back(std::move(*chart));
  add([&](const std::vector<std::size_t>& runs) { return MemoryOverTimeChart(doc, unit, runs); },
      selection.series, series);
  add(
      [&](const std::vector<std::size_t>& runs) {
        return std::optional<ReportChart>(PeakCompositionChart(doc, unit, runs));
      },
      selection.shown, per_policy);
  add([&](const std::vector<std::size_t>& runs) { return FragmentationChart(doc, unit, runs); },
      selection.shown, per_policy);
  for (std::size_t i = 0; i < doc.runs.size(); ++i) {
    if (auto chart = BucketLifetimesChart(doc, i, unit)) charts.push_back(std::move(*chart));
  }
  for (ReportChart& chart : charts) chart.id = prefix + chart.id;
  return charts;
}

std::vector<std::vector<ReportChart>> PageCharts(const std::vector<ReportDocument>& docs) {
  std::vector<std::vector<ReportChart>> charts;
  const ByteUnit unit = PageUnit(docs);
  for (std::size_t i = 0; i < docs.size(); ++i) {
    charts.push_back(
        ReportCharts(docs[i], docs.size() == 1 ? "" : fmt::format("r{}-", i + 1), unit));
  }
  return charts;
}

}  // namespace bucketsim
