// The Chrome trace of a replay against the trace-event format's rules (Google's "Trace Event
// Format" document): every event has a known phase; complete events have ts and dur >= 0;
// timestamps never decrease along one track; complete events of one track do not overlap;
// counters carry numeric values; instants have a scope.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "backend/sim/sim_backend.h"
#include "report/chrome_trace.h"
#include "testing/trace_builder.h"

namespace bucketsim {
namespace {

using nlohmann::json;

// Two layers, two gradients that fill and overflow a bucket, compute on the all_gather stream.
ReplayOutcome Replayed() {
  testing::TraceBuilder t(2, 0, 0.02);  // shard: 0.02 MiB / 4 B / 2 = 2621 elements
  t.Streams({"default", "all_gather", "post_backward"});
  t.Group(1, {0, 1}).Fsdp("model", {{"a", 4000, DType::kFloat32}, {"b", 4000, DType::kFloat32}});
  for (std::uint64_t it = 0; it < 2; ++it) {
    t.Iteration(it).Phase(Phase::kForward).Compute(40, 1).Compute(50).Mark("after fwd");
    t.Alloc(10 + it, 1 << 20, Category::kActivation).Phase(Phase::kBackward).Compute(100);
    t.Rs(0, 1, 1, DType::kFloat32, 2000).Compute(30).Rs(0, 0, 1, DType::kFloat32, 2000);
    t.Flush().Free(10 + it).Phase(Phase::kStep).Compute(20).ZeroGrad();
  }
  auto profile = std::make_shared<TimeProfile>();
  profile->reduce_scatter = {{2, 10.0, 1.0, {}}};
  profile->copy_GBps = 1.0;
  ReplayRequest request;
  request.policies = {*ParsePolicySpec("backward-only"), *ParsePolicySpec("unbucketed")};
  request.make_backend = [profile] { return std::make_unique<SimBackend>(profile); };
  request.timeline_policy = 0;
  Result<ReplayOutcome> outcome = ReplayPolicies(t.Source(), request);
  EXPECT_TRUE(outcome.ok()) << outcome.status().message();
  return std::move(*outcome);
}

TEST(ChromeTrace, FollowsTheTraceEventFormatRules) {
  ReplayOutcome outcome = Replayed();
  Result<std::string> text = ChromeTraceJson(outcome.runs[0], outcome.header);
  ASSERT_TRUE(text.ok()) << text.status().message();
  json doc = json::parse(*text);
  ASSERT_TRUE(doc["traceEvents"].is_array());
  std::map<std::string, int> phases;
  std::map<std::string, double> last_ts;  // per track: "X/tid", "C/name", "i"
  std::map<int, double> last_end;         // complete events per tid
  std::map<int, std::string> thread_names;
  for (const json& e : doc["traceEvents"]) {
    std::string ph = e.at("ph");
    ++phases[ph];
    ASSERT_TRUE(ph == "M" || ph == "X" || ph == "C" || ph == "i") << e.dump();
    ASSERT_TRUE(e.at("pid").is_number_integer());
    if (ph == "M") {
      if (e["name"] == "thread_name") thread_names[e["tid"]] = e["args"]["name"];
      continue;
    }
    ASSERT_TRUE(e.at("ts").is_number()) << e.dump();
    double ts = e["ts"];
    ASSERT_GE(ts, 0);
    std::string track = ph == "X"   ? "X/" + std::to_string(e.at("tid").get<int>())
                        : ph == "C" ? "C/" + e.at("name").get<std::string>()
                                    : "i";
    if (last_ts.count(track)) {
      EXPECT_GE(ts, last_ts[track]) << e.dump();
    }
    last_ts[track] = ts;
    if (ph == "X") {
      double dur = e.at("dur");
      ASSERT_GE(dur, 0);
      int tid = e["tid"];
      if (last_end.count(tid)) {
        EXPECT_GE(ts + 1e-3, last_end[tid]) << "overlap: " << e.dump();
      }
      last_end[tid] = ts + dur;
      ASSERT_TRUE(thread_names.count(tid)) << "slice on an unnamed track " << tid;
    }
    if (ph == "C") {
      ASSERT_TRUE(e.at("args").is_object());
      for (const auto& [key, value] : e["args"].items()) EXPECT_TRUE(value.is_number()) << key;
    }
    if (ph == "i") {
      EXPECT_EQ(e.at("s"), "p");
    }
  }
  EXPECT_EQ(thread_names[2], "stream 2: post_backward");
  EXPECT_EQ(thread_names[1], "stream 1: all_gather");
  EXPECT_GT(phases["X"], 0);
  EXPECT_GT(phases["C"], 0);
  // 2 iterations x (iteration, forward, mark, backward, step) instants.
  EXPECT_EQ(phases["i"], 10);
  for (const char* counter : {"C/allocated_bytes", "C/reserved_bytes", "C/bucket_bytes"}) {
    EXPECT_TRUE(last_ts.count(counter)) << counter;
  }
}

TEST(ChromeTrace, CollectivesCarryTheirLogEntry) {
  ReplayOutcome outcome = Replayed();
  json doc = json::parse(*ChromeTraceJson(outcome.runs[0], outcome.header));
  std::size_t collectives = 0;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] != "X" || e["name"] != "reduce_scatter") continue;
    const CollectiveRecord& log = outcome.runs[0].collectives[collectives++];
    EXPECT_EQ(e["args"]["event_index"], log.event_index);
    EXPECT_EQ(e["ts"].get<double>(), log.start_us);
    EXPECT_EQ(e["dur"].get<double>(), log.dur_us);
    EXPECT_EQ(e["tid"], 2);
  }
  EXPECT_EQ(collectives, outcome.runs[0].collectives.size());
  EXPECT_GT(collectives, 0u);
}

TEST(ChromeTrace, RefusesARunWithoutTimeline) {
  ReplayOutcome outcome = Replayed();
  EXPECT_FALSE(outcome.runs[1].stream_timeline);  // only the asked-for policy keeps one
  EXPECT_FALSE(ChromeTraceJson(outcome.runs[1], outcome.header).ok());
}

TEST(ChromeTrace, RefusesOverlappingSlicesOnOneStream) {
  RunResult run;
  run.stream_timeline.emplace();
  run.stream_timeline->iterations.push_back(
      {0, 20, {{SpanKind::kCompute, 0, 0, 10}, {SpanKind::kCompute, 0, 5, 20}}});
  TraceHeader header;
  header.streams = {{"default"}};
  Result<std::string> text = ChromeTraceJson(run, header);
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("overlap on stream 0"), std::string::npos);
}

}  // namespace
}  // namespace bucketsim
