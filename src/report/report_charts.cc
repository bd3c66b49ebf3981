#include "report/report_charts.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "core/size_format.h"
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

std::string MibText(Bytes bytes) {
  return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / static_cast<double>(kMiB));
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
                    double height) {
  for (const PhaseStats& p : LongestPhases(doc)) {
    const double x0 = x(static_cast<double>(p.first_event));
    const double x1 = x(static_cast<double>(p.end_event));
    const std::string name(PhaseName(p.phase));
    svg.Rect(x0, top, x1 - x0, height, PhaseFill(p.phase), {},
             fmt::format("iteration {} {}: events {}-{}, peak {}", p.iteration, name, p.first_event,
                         p.end_event, MibText(p.peak_bytes)));
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

// A row of legend entries (a swatch drawn by `swatch`, then the text), wrapping at the width.
template <typename Swatch>
double DrawLegend(SvgBuilder& svg, double top, const std::vector<std::string>& labels,
                  Swatch swatch) {
  double x = kLeft;
  double y = top;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const double width = 34 + 7.2 * static_cast<double>(labels[i].size());
    if (x + width > kWidth - kRight && x > kLeft) {
      x = kLeft;
      y += 20;
    }
    swatch(x, y, i);
    svg.Text(x + 28, y + 4, labels[i], "start", kFont);
    x += width + 14;
  }
  return y + 20;
}

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

ReportChart MemoryOverTimeChart(const ReportDocument& doc) {
  const double top = 30;
  const double plot_h = 300;
  const double bottom = top + plot_h;
  std::vector<std::string> legend;
  bool any_reserved = false;
  Bytes most = 0;
  for (const RunResult& run : doc.runs) {
    legend.push_back(run.policy);
    most = std::max({most, run.peak.allocated_bytes, run.peak.reserved_bytes});
    any_reserved = any_reserved || run.peak.reserved_bytes != run.peak.allocated_bytes ||
                   run.memory_model == "caching";
  }
  const EventIndex span = EventSpan(doc);
  const ByteAxis axis = MakeByteAxis(most, 6);
  const LinearScale x{0, static_cast<double>(span), kLeft, kWidth - kRight};
  const LinearScale y{0, axis.top_bytes(), bottom, top};
  const double legend_rows = 1 + static_cast<double>(legend.size()) / 5;
  SvgBuilder svg(kWidth, bottom + 64 + 20 * legend_rows + (any_reserved ? 20 : 0), kChartClass,
                 "Memory over time, all policies");
  DrawPhaseBands(svg, doc, x, top, plot_h);
  DrawByteAxis(svg, axis, y, kLeft, kWidth - kRight, "memory");
  DrawEventAxis(svg, x, span, bottom);

  // Marks: a dotted line and the name (marks of one name recur per iteration).
  for (const MarkSample& m : doc.runs.front().marks) {
    const double mx = x(static_cast<double>(m.event_index));
    svg.Line(mx, top, mx, bottom, "#555555", 1, "2,3");
    svg.Text(mx - 3, bottom - 6, fmt::format("{} (it {})", m.name, m.iteration), "start", 10, -90);
  }

  if (!doc.has_timeline) {
    svg.Text((kLeft + kWidth) / 2, top + plot_h / 2,
             "this report has no timeline (written by an older bucketsim)", "middle", 14);
  }
  for (std::size_t i = 0; i < doc.runs.size(); ++i) {
    const RunResult& run = doc.runs[i];
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
    const std::string_view color = SeriesColor(i);
    if (!allocated.empty()) {
      if (any_reserved) {
        svg.Polyline(reserved, color, 1.5, "6,4", fmt::format("{}: reserved", run.policy));
      }
      svg.Polyline(allocated, color, 2, {}, fmt::format("{}: allocated", run.policy));
    }
    svg.Circle(x(static_cast<double>(run.peak.event_index)),
               y(static_cast<double>(run.peak.allocated_bytes)), 4.5, color,
               fmt::format("{}: peak {} allocated at event {} (iteration {}, {})", run.policy,
                           MibText(run.peak.allocated_bytes), run.peak.event_index,
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
      "Allocated{} bytes of every policy against the trace's event index; each point is the "
      "largest figure within a span of {} event(s), so no peak is lost. Shaded bands are the "
      "phases, dotted lines the named marks, dots the peaks.",
      any_reserved ? " (solid) and reserved (dashed)" : "", doc.runs.front().timeline.span_events);
  return {"memory-over-time", "Memory over time", caption, svg.Finish()};
}

ReportChart PeakCompositionChart(const ReportDocument& doc) {
  const double left = 170;
  const double top = 20;
  const double bar_h = 24;
  const double gap = 12;
  std::vector<Category> shown;
  Bytes most = 0;
  for (int c = 0; c < kNumCategories; ++c) {
    for (const RunResult& run : doc.runs) {
      if (run.peak.by_category[c] > 0) {
        shown.push_back(static_cast<Category>(c));
        break;
      }
    }
  }
  for (const RunResult& run : doc.runs) most = std::max(most, run.peak.allocated_bytes);
  const double plot_h = static_cast<double>(doc.runs.size()) * (bar_h + gap);
  const double bottom = top + plot_h;
  const ByteAxis axis = MakeByteAxis(most, 8);
  const LinearScale x{0, axis.top_bytes(), left, kWidth - kRight - 70};
  std::vector<std::string> legend;
  for (Category c : shown) legend.emplace_back(CategoryName(c));
  const double legend_rows = 1 + static_cast<double>(legend.size()) / 5;
  SvgBuilder svg(kWidth, bottom + 56 + 20 * legend_rows, kChartClass,
                 "Composition of each policy's peak, by category");
  for (double tick : axis.ticks_bytes) {
    svg.Line(x(tick), top - 4, x(tick), bottom, tick == 0 ? "#444444" : "#d0d0d0");
    svg.Text(x(tick), bottom + 16, axis.Label(tick), "middle", kFont);
  }
  svg.Text((x.range_lo + x.range_hi) / 2, bottom + 34,
           fmt::format("alive at the peak ({})", axis.unit), "middle", kFont);
  for (std::size_t i = 0; i < doc.runs.size(); ++i) {
    const RunResult& run = doc.runs[i];
    const double y0 = top + static_cast<double>(i) * (bar_h + gap);
    svg.Text(left - 8, y0 + bar_h / 2 + 4, run.policy, "end", kFont);
    Bytes sum = 0;
    for (Category c : shown) {
      const Bytes bytes = run.peak.by_category[static_cast<int>(c)];
      if (bytes == 0) continue;
      const double x0 = x(static_cast<double>(sum));
      sum += bytes;
      svg.Rect(x0, y0, x(static_cast<double>(sum)) - x0, bar_h, CategoryColor(c),
               "stroke=\"#ffffff\" stroke-width=\"0.5\"",
               fmt::format("{}: {} {}", run.policy, CategoryName(c), MibText(bytes)));
    }
    svg.Text(x(static_cast<double>(sum)) + 6, y0 + bar_h / 2 + 4, MibText(sum), "start", kFont);
  }
  DrawLegend(svg, bottom + 56, legend, [&svg, &shown](double lx, double ly, std::size_t i) {
    svg.Rect(lx, ly - 6, 22, 12, CategoryColor(shown[i]));
  });
  return {"peak-composition", "Composition of the peak",
          "What is alive at each policy's peak allocated memory, stacked by category (the trace's "
          "own tensors first, then the buffers the policy made).",
          svg.Finish()};
}

std::optional<ReportChart> BucketLifetimesChart(const ReportDocument& doc, std::size_t index) {
  const RunResult& run = doc.runs[index];
  if (run.bucket_lifetimes.empty()) return std::nullopt;
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
                 fmt::format("Bucket buffer lifetimes: {}", run.policy));
  DrawPhaseBands(svg, doc, x, top, plot_h);
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
        "{}: {} {} group {}, {}, allocated at event {}{}{}", run.policy, CategoryName(b.category),
        DTypeName(b.dtype), b.group, MibText(b.bytes), b.allocated_event,
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
                     fmt::format("Bucket lifetimes: {}", run.policy), caption, svg.Finish()};
}

std::optional<ReportChart> FragmentationChart(const ReportDocument& doc) {
  std::vector<std::size_t> runs;
  Bytes most = 0;
  for (std::size_t i = 0; i < doc.runs.size(); ++i) {
    const RunResult& run = doc.runs[i];
    if (!run.peak.fragmentation) continue;
    runs.push_back(i);
    most = std::max(
        most, run.peak.allocated_bytes + run.peak.fragmentation->reserved_minus_allocated_bytes);
  }
  if (runs.empty()) return std::nullopt;
  const double left = 170;
  const double top = 20;
  const double bar_h = 24;
  const double gap = 12;
  const double bottom = top + static_cast<double>(runs.size()) * (bar_h + gap);
  const ByteAxis axis = MakeByteAxis(most, 8);
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
    const FragmentationInfo& f = *run.peak.fragmentation;
    const double y0 = top + static_cast<double>(row) * (bar_h + gap);
    svg.Text(left - 8, y0 + bar_h / 2 + 4, run.policy, "end", kFont);
    const Bytes parts[] = {run.peak.allocated_bytes, f.inactive_split_bytes,
                           f.reserved_minus_allocated_bytes - f.inactive_split_bytes};
    const char* names[] = {"allocated", "free pieces of split blocks", "other cached free"};
    Bytes sum = 0;
    for (int k = 0; k < 3; ++k) {
      const double x0 = x(static_cast<double>(sum));
      sum += parts[k];
      svg.Rect(x0, y0, x(static_cast<double>(sum)) - x0, bar_h, colors[k], {},
               fmt::format("{}: {} {}; largest free block {}", run.policy, names[k],
                           MibText(parts[k]), MibText(f.largest_free_block_bytes)));
    }
    svg.Text(x(static_cast<double>(sum)) + 6, y0 + bar_h / 2 + 4, MibText(sum), "start", kFont);
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

std::optional<ReportChart> ParetoChart(const ReportDocument& doc) {
  if (doc.sweep.empty()) return std::nullopt;
  const double top = 20;
  const double bottom = top + 320;
  Bytes most = 0;
  Micros slowest = 0;
  for (const ParetoPoint& p : doc.sweep) {
    most = std::max(most, p.peak_allocated_bytes);
    slowest = std::max(slowest, p.step_us);
  }
  const ByteAxis axis = MakeByteAxis(most, 6);
  const std::vector<double> time_ticks = NiceTicks(0, slowest / 1000.0, 8);
  const LinearScale x{0, time_ticks.back(), kLeft, kWidth - kRight};
  const LinearScale y{0, axis.top_bytes(), bottom, top};
  SvgBuilder svg(kWidth, bottom + 50, kChartClass, "Peak memory versus step time (sweep)");
  DrawByteAxis(svg, axis, y, kLeft, kWidth - kRight, "peak allocated");
  for (double tick : time_ticks) {
    svg.Line(x(tick), bottom, x(tick), bottom + 5, "#444444");
    svg.Text(x(tick), bottom + 18, FormatTick(tick), "middle", kFont);
  }
  svg.Text((kLeft + kWidth) / 2, bottom + 36, "step time (ms)", "middle", kFont);
  // The Pareto front: points no other point beats in both memory and time.
  std::vector<const ParetoPoint*> front;
  for (const ParetoPoint& p : doc.sweep) {
    bool dominated = false;
    for (const ParetoPoint& q : doc.sweep) {
      dominated = dominated ||
                  (q.peak_allocated_bytes <= p.peak_allocated_bytes && q.step_us <= p.step_us &&
                   (q.peak_allocated_bytes < p.peak_allocated_bytes || q.step_us < p.step_us));
    }
    if (!dominated) front.push_back(&p);
  }
  std::sort(front.begin(), front.end(),
            [](const ParetoPoint* a, const ParetoPoint* b) { return a->step_us < b->step_us; });
  std::vector<double> line;
  for (const ParetoPoint* p : front) {
    line.insert(line.end(),
                {x(p->step_us / 1000.0), y(static_cast<double>(p->peak_allocated_bytes))});
  }
  if (line.size() >= 4) svg.Polyline(line, SeriesColor(1), 1.5, "4,3", "Pareto front");
  for (const ParetoPoint& p : doc.sweep) {
    const bool on_front = std::find(front.begin(), front.end(), &p) != front.end();
    svg.Circle(x(p.step_us / 1000.0), y(static_cast<double>(p.peak_allocated_bytes)), 4.5,
               on_front ? SeriesColor(1) : SeriesColor(0),
               fmt::format("{}: {} peak, {:.3f} ms", p.label, MibText(p.peak_allocated_bytes),
                           p.step_us / 1000.0));
  }
  return ReportChart{"pareto", "Memory versus time (sweep)",
                     "Each dot is one configuration of the sweep; the dashed line joins those no "
                     "other configuration beats in both peak memory and step time.",
                     svg.Finish()};
}

std::vector<ReportChart> ReportCharts(const ReportDocument& doc, const std::string& prefix) {
  std::vector<ReportChart> charts = {MemoryOverTimeChart(doc), PeakCompositionChart(doc)};
  if (auto chart = FragmentationChart(doc)) charts.push_back(std::move(*chart));
  for (std::size_t i = 0; i < doc.runs.size(); ++i) {
    if (auto chart = BucketLifetimesChart(doc, i)) charts.push_back(std::move(*chart));
  }
  if (auto chart = ParetoChart(doc)) charts.push_back(std::move(*chart));
  for (ReportChart& chart : charts) chart.id = prefix + chart.id;
  return charts;
}

std::vector<std::vector<ReportChart>> PageCharts(const std::vector<ReportDocument>& docs) {
  std::vector<std::vector<ReportChart>> charts;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    charts.push_back(ReportCharts(docs[i], docs.size() == 1 ? "" : fmt::format("r{}-", i + 1)));
  }
  return charts;
}

}  // namespace bucketsim
