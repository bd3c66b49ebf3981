#include "report/tune_report.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/size_format.h"
#include "report/byte_unit.h"
#include "report/json_report.h"
#include "report/json_writer.h"
#include "report/xml_escape.h"

namespace bucketsim {
namespace {

// "batch-size=12, checkpoint=Block".
std::string SettingsText(const TuneSettings& settings) {
  std::string text;
  for (const auto& [flag, value] : settings) {
    text += fmt::format("{}{}={}", text.empty() ? "" : ", ", flag, value);
  }
  return text.empty() ? "the one configuration" : text;
}

// The device of the grid (every configuration has the same capacity), if any.
const std::optional<DeviceBudget>& DeviceOf(const TuneReport& report) {
  static const std::optional<DeviceBudget> kNone;
  return report.points.empty() ? kNone : report.points.front().device;
}

// "80.00 GiB of device memory" / "a budget of 40.00 GiB of peak reserved memory" / both.
std::string LimitText(const TuneReport& report) {
  std::vector<std::string> limits;
  if (const std::optional<DeviceBudget>& device = DeviceOf(report)) {
    limits.push_back(FormatBytes(device->device_memory_bytes) + " of device memory");
  }
  if (report.budget_bytes) {
    limits.push_back("a budget of " + FormatBytes(*report.budget_bytes) +
                     " of peak reserved memory");
  }
  return limits.empty() ? std::string() : fmt::format("{}", fmt::join(limits, " and "));
}

// "peak reserved 77.25 GiB + 1.07 GiB outside the caching allocator = 78.32 GiB, 1.68 GiB to
// spare"; without a device, the peak reserved alone (and what the budget leaves).
std::string FiguresText(const TuneReport& report, const TunePoint& point) {
  const Bytes reserved = point.figures.peak_reserved_bytes;
  std::string text = "peak reserved " + FormatBytes(reserved);
  if (point.device) {
    const Bytes outside = point.device->overhead.total_bytes();
    const Bytes total = reserved + outside;
    text += fmt::format(" + {} outside the caching allocator = {}", FormatBytes(outside),
                        FormatBytes(total));
    if (total <= point.device->device_memory_bytes) {
      text += fmt::format(", {} to spare", FormatBytes(point.device->device_memory_bytes - total));
    }
  } else if (report.budget_bytes && reserved <= *report.budget_bytes) {
    text += fmt::format(", {} under budget", FormatBytes(*report.budget_bytes - reserved));
  }
  return text + fmt::format(", step {} ms", Ms(point.figures.step_time_us));
}

bool HasLimit(const TuneReport& report) {
  return DeviceOf(report).has_value() || report.budget_bytes.has_value();
}

}  // namespace

Table BuildTuneTable(const TuneReport& report) {
  Table table;
  for (const TuneAxis& axis : report.axes) {
    table.headers.push_back(axis.flag);
    table.right_aligned.push_back(IsSizeFlag(axis.flag));
  }
  Bytes smallest = 0;
  for (const TunePoint& point : report.points) {
    const Bytes peak = point.figures.peak_allocated_bytes;
    if (peak > 0 && (smallest == 0 || peak < smallest)) smallest = peak;
  }
  const ByteUnit unit = UnitFor(smallest);
  for (const char* header : {"peak alloc", "peak reserved"}) {
    table.headers.push_back(fmt::format("{} ({})", header, unit.name));
    table.right_aligned.push_back(true);
  }
  if (HasLimit(report)) {
    table.headers.push_back("fits");
    table.right_aligned.push_back(false);
  }
  table.headers.insert(table.headers.end(), {"step time (ms)", "pareto"});
  table.right_aligned.insert(table.right_aligned.end(), {true, false});
  table.key_columns = std::max<std::size_t>(1, report.axes.size());
  for (std::size_t i = 0; i < report.points.size(); ++i) {
    const TunePoint& point = report.points[i];
    std::vector<std::string> row;
    for (const auto& setting : point.settings) row.push_back(setting.second);
    if (report.axes.empty()) row.push_back("-");
    row.push_back(InUnit(point.figures.peak_allocated_bytes, unit));
    row.push_back(InUnit(point.figures.peak_reserved_bytes, unit));
    if (HasLimit(report)) {
      row.push_back(point.figures.out_of_memory            ? "no (OOM)"
                    : TuneFits(point, report.budget_bytes) ? "yes"
                                                           : "no");
    }
    // A run that ran out of memory stopped there: it has no step time.
    row.push_back(point.figures.out_of_memory ? "-" : Ms(point.figures.step_time_us));
    row.push_back(report.advice.chosen == i ? "chosen" : point.figures.pareto ? "yes" : "");
    table.rows.push_back(std::move(row));
  }
  if (report.axes.empty()) table.headers.insert(table.headers.begin(), "configuration");
  if (report.axes.empty()) table.right_aligned.insert(table.right_aligned.begin(), false);
  return table;
}

std::string TuneCommand(const TuneReport& report, std::size_t point) {
  std::string command = "bucketsim gen program " + report.program;
  for (const std::string& flag : report.fixed) command += " " + flag;
  std::string policy;  // varied: not a flag of gen program, but of what replays the trace
  for (const auto& [flag, value] : report.points[point].settings) {
    if (flag == "policy") {
      policy = value;
      continue;
    }
    std::string given = value;
    if (flag == "checkpoint" || flag == "wrap") std::replace(given.begin(), given.end(), '+', ',');
    command += fmt::format(" --{} {}", flag, given);
  }
  command += " -o TRACE";
  if (!policy.empty()) command += fmt::format(", then compare or check TRACE --policy {}", policy);
  return command;
}

std::string TuneAdviceText(const TuneReport& report) {
  const TuneAdvice& advice = report.advice;
  const std::string limit = LimitText(report);
  if (advice.chosen) {
    const TunePoint& chosen = report.points[*advice.chosen];
    std::string text;
    if (!advice.by.empty()) {
      const std::string what = advice.by == kBatchSizeFlag ? "batch size" : "sequence length";
      const auto size = std::find_if(chosen.settings.begin(), chosen.settings.end(),
                                     [&](const auto& s) { return s.first == advice.by; });
      text = fmt::format("The largest {} that fits {} is {}: {} ({}).", what,
                         limit.empty() ? "(no --device-memory or --budget: every one does)" : limit,
                         size->second, SettingsText(chosen.settings), FiguresText(report, chosen));
      if (advice.next) text += fmt::format(" At {} {} nothing fits.", what, *advice.next);
    } else {
      text = fmt::format("The fastest configuration that fits{}: {} ({}).",
                         limit.empty() ? "" : " " + limit, SettingsText(chosen.settings),
                         FiguresText(report, chosen));
    }
    if (report.time_profile == "none") {
      text +=
          " Step times are compute alone (no --profile or --gpu): copies and collectives cost "
          "nothing, so offloading and resharding look free.";
    }
    if (!report.time_estimate.empty()) text += " " + report.time_estimate;
    return text + "\nTo emit it: " + TuneCommand(report, *advice.chosen) + "\n";
  }
  if (advice.closest) {
    const TunePoint& closest = report.points[*advice.closest];
    return fmt::format("Nothing fits {}. The least peak reserved: {} ({}).\nTo emit it: {}\n",
                       limit, SettingsText(closest.settings), FiguresText(report, closest),
                       TuneCommand(report, *advice.closest));
  }
  return fmt::format("Nothing fits {}: every configuration ran out of device memory.\n", limit);
}

std::string TuneText(const TuneReport& report, std::size_t width) {
  std::string text =
      fmt::format("{}: {} configuration(s), policy {}, time profile {}{}\n\n", report.program,
                  report.points.size(), report.policy, report.time_profile,
                  DeviceOf(report) ? "\n" + DeviceBudgetLine(*DeviceOf(report)) : "");
  text += RenderText(BuildTuneTable(report), width);
  return text + "\n" + WrapText(TuneAdviceText(report), width);
}

std::string TuneJson(const TuneReport& report, const ReportContext& context) {
  JsonWriter out;
  out.BeginObject();
  out.Field("schema_version", 1);
  out.Field("kind", "tune");
  WriteContext(out, context);  // its trace fields are empty: a program, not a trace, is tuned
  out.Field("program", report.program);
  out.Key("fixed");
  out.BeginArray();
  for (const std::string& flag : report.fixed) out.String(flag);
  out.EndArray();
  out.Key("axes");
  out.BeginArray();
  for (const TuneAxis& axis : report.axes) {
    out.BeginObject();
    out.Field("flag", axis.flag);
    out.Key("values");
    out.BeginArray();
    for (const std::string& value : axis.values) out.String(value);
    out.EndArray();
    out.EndObject();
  }
  out.EndArray();
  out.Field("policy", report.policy);
  if (!report.time_estimate.empty()) out.Field("time_estimate", report.time_estimate);
  if (report.budget_bytes) out.Field("budget_bytes", *report.budget_bytes);
  if (const std::optional<DeviceBudget>& device = DeviceOf(report)) {
    out.Field("device_memory_bytes", device->device_memory_bytes);
  }
  out.Key("configurations");
  out.BeginArray();
  for (const TunePoint& point : report.points) {
    out.BeginObject();
    out.Key("settings");
    out.BeginObject();
    for (const auto& [flag, value] : point.settings) out.Field(flag, value);
    out.EndObject();
    out.Field("peak_allocated_bytes", point.figures.peak_allocated_bytes);
    out.Field("peak_reserved_bytes", point.figures.peak_reserved_bytes);
    if (point.device) {
      out.Field("outside_allocator_bytes", point.device->overhead.total_bytes());
    }
    out.Field("step_time_us", point.figures.step_time_us);
    out.Field("out_of_memory", point.figures.out_of_memory);
    out.Field("fits", TuneFits(point, report.budget_bytes));
    out.Field("pareto", point.figures.pareto);
    out.EndObject();
  }
  out.EndArray();
  out.Key("advice");
  out.BeginObject();
  if (!report.advice.by.empty()) out.Field("by", report.advice.by);
  const auto index = [&](std::string_view key, const std::optional<std::size_t>& i) {
    if (i) out.Field(key, *i);
  };
  index("chosen", report.advice.chosen);
  if (report.advice.next) out.Field("next", *report.advice.next);
  index("closest", report.advice.closest);
  if (const auto shown = report.advice.chosen ? report.advice.chosen : report.advice.closest) {
    out.Field("command", TuneCommand(report, *shown));
  }
  out.Field("text", TuneAdviceText(report));
  out.EndObject();
  out.EndObject();
  return out.Finish();
}

std::string TuneHtml(const TuneReport& report, const ReportContext& context) {
  const std::string text = TuneAdviceText(report);
  std::string advice;
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    advice += "<p>" + XmlEscape(text.substr(start, end - start)) + "</p>\n";
    start = end + 1;
  }
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      "<title>bucketsim tune: {}</title>\n"
      "<style>body{{font-family:sans-serif;max-width:1000px;margin:2em auto;padding:0 1em}}"
      ".advice{{background:#e8f5e9;border:1px solid #81c784;padding:0.5em 1em}}"
      "table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 6px}}"
      "td.num{{text-align:right}}</style></head><body>\n"
      "<h1>tune: {}</h1>\n<p>{} configuration(s), policy {}; bucketsim {} ({})</p>\n"
      "<div class=\"advice\">\n{}</div>\n{}\n</body></html>\n",
      XmlEscape(report.program), XmlEscape(report.program), report.points.size(),
      XmlEscape(report.policy), XmlEscape(context.tool_version), XmlEscape(context.git_sha), advice,
      RenderHtml(BuildTuneTable(report)));
}

}  // namespace bucketsim
