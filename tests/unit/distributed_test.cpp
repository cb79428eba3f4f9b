// Distributed runs: the rank read from the environment, the run document's "distributed"
// object, merge_runs() (alignment, spread, stragglers, refusals), the merged document and the
// rank traces (include/genscope/distributed.hpp, merge.hpp; docs/distributed.md).
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "genscope/chrome_trace.hpp"
#include "genscope/distributed.hpp"
#include "genscope/error.hpp"
#include "genscope/html_report.hpp"
#include "genscope/merge.hpp"
#include "genscope/monitor.hpp"
#include "genscope/run_json.hpp"

namespace genscope {
namespace {

using nlohmann::json;

EnvironmentLookup env(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    const auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

std::string error_name(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.name() + std::string(": ") + e.what();
  }
  return "no error";
}

TEST(DistributedEnvironment, TorchrunVariables) {
  const auto d = distributed_from_environment(env({{"RANK", "3"},
                                                   {"WORLD_SIZE", "8"},
                                                   {"LOCAL_RANK", "1"},
                                                   {"GROUP_RANK", "1"},
                                                   {"TORCHELASTIC_RUN_ID", "job-42"},
                                                   {"TORCHELASTIC_RESTART_COUNT", "2"},
                                                   {"MASTER_ADDR", "10.0.0.1"},
                                                   {"MASTER_PORT", "29500"}}));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->role, "rank");
  EXPECT_EQ(d->rank, 3);
  EXPECT_EQ(d->world_size, 8);
  EXPECT_EQ(d->local_rank, 1);
  EXPECT_EQ(d->node_rank, 1);
  EXPECT_EQ(d->group, "job-42.restart2");
  EXPECT_EQ(d->group_source, "torchelastic");
  EXPECT_EQ(describe(*d), "rank 3 of 8 (local 1, node 1), group job-42.restart2");
}

TEST(DistributedEnvironment, GroupSources) {
  // genscope run's group first; torchrun's "none" (static rendezvous) names no launch.
  auto d = distributed_from_environment(env({{"RANK", "0"},
                                             {"WORLD_SIZE", "2"},
                                             {"GENSCOPE_DISTRIBUTED_GROUP", "genscope:h:1:2"},
                                             {"TORCHELASTIC_RUN_ID", "x"}}));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->group_source, "genscope");
  EXPECT_EQ(d->group, "genscope:h:1:2");
  d = distributed_from_environment(env({{"RANK", "1"},
                                        {"WORLD_SIZE", "2"},
                                        {"TORCHELASTIC_RUN_ID", "none"},
                                        {"MASTER_ADDR", "127.0.0.1"},
                                        {"MASTER_PORT", "29500"}}));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->group, "127.0.0.1:29500");
  EXPECT_EQ(d->group_source, "master");
  EXPECT_EQ(d->local_rank, -1);
  d = distributed_from_environment(env({{"RANK", "0"}, {"WORLD_SIZE", "1"}}));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->group, "");
  EXPECT_EQ(d->group_source, "");
}

TEST(DistributedEnvironment, NotARankAndMalformed) {
  std::string problem;
  EXPECT_FALSE(distributed_from_environment(env({}), &problem));
  EXPECT_EQ(problem, "");
  // genscope run's variable alone does not make a rank (nor a launcher).
  EXPECT_FALSE(distributed_from_environment(env({{"GENSCOPE_DISTRIBUTED_GROUP", "g"}}), &problem));
  EXPECT_FALSE(distributed_from_environment(env({{"RANK", "one"}, {"WORLD_SIZE", "2"}}), &problem));
  EXPECT_EQ(problem, "RANK='one' is not an integer");
  EXPECT_FALSE(distributed_from_environment(env({{"RANK", "0"}, {"WORLD_SIZE", "2x"}}), &problem));
  EXPECT_EQ(problem, "WORLD_SIZE='2x' is not an integer");
  EXPECT_FALSE(distributed_from_environment(env({{"RANK", "2"}, {"WORLD_SIZE", "2"}}), &problem));
  EXPECT_EQ(problem, "RANK=2 is not in [0, WORLD_SIZE=2)");
  EXPECT_FALSE(distributed_from_environment(env({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}), &problem));
  EXPECT_FALSE(distributed_from_environment(env({{"RANK", "0"}}), &problem));
  EXPECT_EQ(problem, "RANK is set without WORLD_SIZE");
  EXPECT_FALSE(distributed_from_environment(env({{"RANK", "99999999999"}, {"WORLD_SIZE", "2"}}), &problem));
}

TEST(DistributedRun, MonitorReadsTheEnvironmentAndTheDocumentKeepsIt) {
  ::setenv("RANK", "1", 1);
  ::setenv("WORLD_SIZE", "2", 1);
  ::setenv("LOCAL_RANK", "1", 1);
  ::setenv("TORCHELASTIC_RUN_ID", "unit-test", 1);
  MonitorOptions options;
  options.sampler = false;
  options.nvml_probe = false;
  Monitor monitor(options);
  genscope::Run run = monitor.start_run({}).finish();
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  ::unsetenv("LOCAL_RANK");
  ::unsetenv("TORCHELASTIC_RUN_ID");
  ASSERT_TRUE(run.distributed);
  EXPECT_EQ(run.distributed->rank, 1);
  EXPECT_EQ(run.distributed->group, "unit-test");
  const genscope::Run back = run_from_json(to_json(run));
  ASSERT_TRUE(back.distributed);
  EXPECT_EQ(back.distributed->rank, 1);
  EXPECT_EQ(back.distributed->world_size, 2);
  EXPECT_EQ(back.distributed->local_rank, 1);
  EXPECT_EQ(back.distributed->group_source, "torchelastic");
  EXPECT_EQ(back.distributed->pid, static_cast<int>(::getpid()));
  // A malformed rank is a monitoring error, never an exception, and marks nothing.
  ::setenv("RANK", "x", 1);
  ::setenv("WORLD_SIZE", "2", 1);
  genscope::Run bad = monitor.start_run({}).finish();
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  EXPECT_FALSE(bad.distributed);
  ASSERT_FALSE(bad.monitoring_errors.empty());
  EXPECT_EQ(bad.monitoring_errors.front().source, "distributed");
  // An explicit identity wins over the environment.
  DistributedInfo info;
  info.rank = 0;
  info.world_size = 4;
  ActiveRun a = monitor.start_run({.distributed = info});
  info.rank = 2;
  a.set_distributed(info);
  EXPECT_EQ(a.finish().distributed->rank, 2);
}

TEST(DistributedRun, DocumentsWithoutOrWithBadDistributed) {
  genscope::Run plain;
  plain.id = "p";
  json j = to_json(plain);
  EXPECT_FALSE(j.contains("distributed"));  // a run of one process writes nothing new
  EXPECT_FALSE(run_from_json(j).distributed);
  j["distributed"] = json::array();
  EXPECT_EQ(error_name([&] { run_from_json(j); }), "InvalidRunDocument: $.distributed: expected an object");
  j["distributed"] = {{"role", "boss"}};
  EXPECT_EQ(error_name([&] { run_from_json(j); }),
            "InvalidRunDocument: $.distributed.role: expected 'rank' or 'launcher', not 'boss'");
  j["distributed"] = {{"rank", 2}, {"world_size", 2}};
  EXPECT_EQ(error_name([&] { run_from_json(j); }),
            "InvalidRunDocument: $.distributed.rank: rank 2 is not in [0, world_size 2)");
  j["distributed"] = {{"rank", "0"}};
  EXPECT_EQ(error_name([&] { run_from_json(j); }), "InvalidRunDocument: $.distributed.rank: expected a number");
  j["distributed"] = {{"rank", 0}, {"world_size", 1e12}};
  EXPECT_EQ(error_name([&] { run_from_json(j); }),
            "InvalidRunDocument: $.distributed.world_size: out of range: 1000000000000");
}

// A rank's run: steps "load", "sampling" (with "sampling / unet" inside), "barrier" and
// "decode", `scale` stretching sampling.
Run rank_run(int rank, double sampling_scale = 1.0, std::int64_t start_unix_ns = 1'000'000'000'000,
             std::string group = "g1", std::string source = "torchelastic") {
  genscope::Run run;
  run.id = "run" + std::to_string(rank) + "0000000";
  run.start_unix_ns = start_unix_ns;
  run.host.hostname = "host" + std::to_string(rank);
  DistributedInfo d;
  d.rank = rank;
  d.world_size = 2;
  d.group = std::move(group);
  d.group_source = std::move(source);
  run.distributed = d;
  std::int64_t t = 0;
  const auto add = [&](const std::string& name, std::int64_t dur, int parent = -1, StepKind kind = StepKind::kCustom) {
    StepRecord s;
    s.id = static_cast<int>(run.steps.size());
    s.parent_id = parent;
    s.name = name;
    s.kind = kind;
    s.status = StepStatus::kOk;
    s.start_offset_ns = t;
    s.duration_ns = dur;
    MetricFigures m;
    m.name = "process.rss_bytes";
    m.before = 100;
    m.after = 100;
    m.peak = 1000.0 * (rank + 1) + static_cast<double>(s.id);
    run.steps.push_back(s);
    run.steps.back().metrics.push_back(m);
    if (parent < 0) t += dur;
    return s.id;
  };
  add("load", 100'000'000, -1, StepKind::kModelLoading);
  const std::int64_t sampling = static_cast<std::int64_t>(400'000'000 * sampling_scale);
  const std::int64_t at = t;
  const int sid = add("sampling", sampling, -1, StepKind::kSampling);
  t = at;
  add("unet", sampling / 2, sid);
  t = at + sampling;
  const int b = add("barrier", 10'000'000);
  run.steps[static_cast<std::size_t>(b)].labels["distributed.barrier"] = "true";
  add("decode", 50'000'000, -1, StepKind::kVaeDecode);
  run.duration_ns = t;
  return run;
}

TEST(Merge, SpreadStragglerAndPeaks) {
  const MergedRun m = merge_runs({rank_run(1, 2.0), rank_run(0)}, {.straggler_margin = 0.10});
  ASSERT_EQ(m.ranks.size(), 2u);
  EXPECT_EQ(m.ranks[0].rank, 0);  // by rank, whatever the order given
  EXPECT_EQ(m.group, "g1");
  EXPECT_EQ(m.world_size, 2);
  ASSERT_EQ(m.steps.size(), 5u);
  EXPECT_EQ(m.steps[1].path, "sampling");
  EXPECT_EQ(m.steps[1].min_ns, 400'000'000);
  EXPECT_EQ(m.steps[1].max_ns, 800'000'000);
  EXPECT_EQ(m.steps[1].median_ns, 600'000'000);
  EXPECT_EQ(m.steps[1].slowest_rank, 1);
  EXPECT_NEAR(m.steps[1].excess, 1.0 / 3.0, 1e-9);
  EXPECT_TRUE(m.steps[1].straggler);
  EXPECT_EQ(m.steps[2].path, "sampling / unet");
  EXPECT_TRUE(m.steps[2].straggler);
  // The barrier step waits for the others: never a straggler, however uneven.
  genscope::Run early = rank_run(0), late = rank_run(1);
  early.steps[3].duration_ns = 90'000'000;
  const MergedRun b = merge_runs({early, late});
  EXPECT_EQ(b.steps[3].path, "barrier");
  EXPECT_TRUE(b.steps[3].barrier);
  EXPECT_FALSE(b.steps[3].straggler);
  EXPECT_FALSE(m.steps[1].barrier);
  EXPECT_EQ(m.steps[0].path, "load");  // equal on both ranks: no straggler
  EXPECT_FALSE(m.steps[0].straggler);
  EXPECT_EQ(m.steps[0].excess, 0.0);
  // A margin above the excess: no straggler.
  EXPECT_FALSE(merge_runs({rank_run(0), rank_run(1, 2.0)}, {.straggler_margin = 0.5}).steps[1].straggler);
  EXPECT_DOUBLE_EQ(m.ranks[1].peak_bytes.at("process.rss_bytes"), 2004.0);
  EXPECT_EQ(m.ranks[1].host, "host1");
}

TEST(Merge, BarrierAlignsTheClocks) {
  // Rank 1's clock is 5 s ahead; both left the barrier at the same moment (it ends at +510 ms
  // on both, as both ranks' sampling lasts the same).
  const MergedRun m = merge_runs({rank_run(0), rank_run(1, 1.0, 1'000'000'000'000 + 5'000'000'000)});
  EXPECT_EQ(m.alignment, "barrier: barrier #0");
  EXPECT_EQ(m.ranks[0].clock_shift_ns, 0);
  EXPECT_EQ(m.ranks[1].clock_shift_ns, -5'000'000'000);
  EXPECT_EQ(m.ranks[1].offset_ns, 0);
  // Without a barrier step the UTC starts stand.
  genscope::Run a = rank_run(0), b = rank_run(1, 1.0, 1'000'000'000'000 + 7'000'000);
  a.steps[3].labels.clear();
  const MergedRun u = merge_runs({a, b});
  EXPECT_EQ(u.alignment, "utc");
  EXPECT_EQ(u.ranks[1].offset_ns, 7'000'000);
}

TEST(Merge, StepsOnlySomeRanksHave) {
  genscope::Run a = rank_run(0), b = rank_run(1);
  b.steps.pop_back();  // rank 1 has no decode
  StepRecord extra = b.steps.front();
  extra.id = 99;
  extra.name = "only on rank 1";
  b.steps.push_back(extra);
  const MergedRun m = merge_runs({a, b});
  ASSERT_EQ(m.steps.size(), 6u);
  EXPECT_EQ(m.steps[4].path, "decode");
  EXPECT_EQ(m.steps[4].duration_ns[1], -1);
  EXPECT_FALSE(m.steps[4].straggler);  // one rank: nothing to compare
  EXPECT_EQ(m.steps[5].path, "only on rank 1");
  EXPECT_EQ(m.steps[5].duration_ns[0], -1);
  EXPECT_EQ(m.steps[5].slowest_rank, 1);
}

TEST(Merge, RefusesRunsOfDifferentGenerations) {
  EXPECT_EQ(error_name([] { merge_runs({rank_run(0), rank_run(1, 1.0, 1'000'000'000'000, "g2")}); }),
            "RunsNotOneGeneration: run run10000 (rank 1) belongs to group 'g2', run run00000 (rank 0) to group 'g1'");
  EXPECT_EQ(error_name([] { merge_runs({rank_run(0), rank_run(0)}); }),
            "RunsNotOneGeneration: two runs of rank 0 (several generations? merge one generation at a time)");
  genscope::Run plain = rank_run(1);
  plain.distributed.reset();
  EXPECT_EQ(error_name([&] { merge_runs({rank_run(0), plain}); }),
            "RunsNotOneGeneration: run run10000 has no rank: it was not recorded in a distributed job "
            "(RANK/WORLD_SIZE unset, no process group)");
  genscope::Run other_world = rank_run(1);
  other_world.distributed->world_size = 4;
  EXPECT_EQ(error_name([&] { merge_runs({rank_run(0), other_world}); }),
            "RunsNotOneGeneration: run run10000 (rank 1) has world size 4, run run00000 (rank 0) 2");
  // A group named by its address only: runs that never overlap are two launches.
  const std::int64_t later = 1'000'000'000'000 + 3'600'000'000'000;
  EXPECT_NE(error_name([&] {
              merge_runs({rank_run(0, 1.0, 1'000'000'000'000, "h:29500", "master"),
                          rank_run(1, 1.0, later, "h:29500", "master")});
            }).find("RunsNotOneGeneration: run run10000 (rank 1) started after run run00000 (rank 0) ended"),
            std::string::npos);
  // ... but overlapping ones are one.
  EXPECT_NO_THROW(merge_runs({rank_run(0, 1.0, 1'000'000'000'000, "h:29500", "master"),
                              rank_run(1, 1.0, 1'000'000'000'000 + 1'000'000, "h:29500", "master")}));
  EXPECT_EQ(error_name([] { merge_runs({}); }).substr(0, 20), "RunsNotOneGeneration");
  EXPECT_EQ(error_name([] { merge_runs({rank_run(0)}, {.straggler_margin = -0.1}); }).substr(0, 19),
            "InvalidMergeOptions");
}

TEST(Merge, LauncherRun) {
  genscope::Run launcher;
  launcher.id = "launcher0";
  launcher.start_unix_ns = 1'000'000'000'000 - 2'000'000'000;
  DistributedInfo d;
  d.role = "launcher";
  d.group = "g1";
  launcher.distributed = d;
  // Its process tree: torchrun (100) started rank 0 (101, which started a worker 103) and
  // rank 1 (102); a malformed entry and a cycle (104 <-> 105) are left alone.
  launcher.attachments.push_back(
      {"process_tree", "", json::parse(R"({"processes": [
        {"pid": 100, "ppid": 1, "lifetime_peak_bytes": 10},
        {"pid": 101, "ppid": 100, "lifetime_peak_bytes": 1000},
        {"pid": 102, "ppid": 100, "lifetime_peak_bytes": 2000},
        {"pid": 103, "ppid": 101, "lifetime_peak_bytes": 50},
        {"pid": "x", "ppid": 101},
        {"pid": 104, "ppid": 105}, {"pid": 105, "ppid": 104}]})")});
  genscope::Run r0 = rank_run(0), r1 = rank_run(1);
  r0.distributed->pid = 101;
  r1.distributed->pid = 102;
  const MergedRun m = merge_runs({r0, launcher, r1});
  ASSERT_TRUE(m.launcher);
  EXPECT_EQ(m.ranks[0].tree_processes, 2);
  EXPECT_DOUBLE_EQ(m.ranks[0].peak_bytes.at("launcher.tree_rss_bytes"), 1050.0);
  EXPECT_EQ(m.ranks[1].tree_processes, 1);
  EXPECT_DOUBLE_EQ(m.ranks[1].peak_bytes.at("launcher.tree_rss_bytes"), 2000.0);
  EXPECT_EQ(merge_runs({rank_run(0), rank_run(1)}).ranks[0].tree_processes, 0);  // no launcher
  EXPECT_EQ(m.ranks.size(), 2u);
  EXPECT_EQ(m.ranks[0].offset_ns, 2'000'000'000);  // the launcher started first
  launcher.distributed->group = "g9";
  EXPECT_EQ(error_name([&] { merge_runs({rank_run(0), launcher}); }).substr(0, 20), "RunsNotOneGeneration");
}

TEST(MergedDocument, RoundTripAndMalformed) {
  const MergedRun m = merge_runs({rank_run(0), rank_run(1, 1.5)});
  const json j = to_json(m);
  EXPECT_EQ(j["schema"], kMergedSchema);
  const MergedRun back = merged_from_json(j);
  EXPECT_EQ(back.ranks.size(), 2u);
  EXPECT_EQ(back.steps.size(), m.steps.size());
  EXPECT_EQ(back.steps[1].straggler, m.steps[1].straggler);
  EXPECT_EQ(back.steps[1].duration_ns, m.steps[1].duration_ns);
  EXPECT_EQ(back.runs[1].distributed->rank, 1);
  EXPECT_EQ(to_json(back), j);

  json bad = j;
  bad["schema"] = "genscope.merged/9";
  EXPECT_EQ(error_name([&] { merged_from_json(bad); }).substr(0, 17), "UnsupportedSchema");
  bad = j;
  bad.erase("ranks");
  EXPECT_EQ(error_name([&] { merged_from_json(bad); }), "InvalidMergedDocument: $.ranks: missing");
  bad = j;
  bad["steps"][0]["duration_ns"] = json::array({1});
  EXPECT_EQ(error_name([&] { merged_from_json(bad); }),
            "InvalidMergedDocument: $.steps[0].duration_ns: 1 durations for 2 ranks");
  bad = j;
  bad["steps"][1]["kind"] = "denoise";
  EXPECT_EQ(error_name([&] { merged_from_json(bad); }),
            "InvalidMergedDocument: $.steps[1].kind: unknown step kind 'denoise'");
  bad = j;
  bad["ranks"][0]["offset_ns"] = "soon";
  EXPECT_EQ(error_name([&] { merged_from_json(bad); }),
            "InvalidMergedDocument: $.ranks[0].offset_ns: expected an integer");
  bad = j;
  bad["runs"][0]["steps"][0]["kind"] = "denoise";
  EXPECT_EQ(error_name([&] { merged_from_json(bad); }).substr(0, 18), "InvalidRunDocument");
  EXPECT_EQ(error_name([&] { merged_from_json(json::array()); }), "InvalidMergedDocument: $: expected an object");
}

TEST(MergedOutputs, RankTraceHasDistributedInfoAndMergedTraceAProcessPerRank) {
  const std::string trace = render_chrome_trace(rank_run(1));
  // Holistic Trace Analysis reads the rank with the pattern "rank":\s+(\d+), first match.
  EXPECT_EQ(trace.rfind("{\"distributedInfo\": {\"rank\": 1, \"world_size\": 2, \"group\": \"g1\"},", 0), 0u)
      << trace.substr(0, 200);
  EXPECT_EQ(trace.find("\"rank\": ", 30), std::string::npos);
  EXPECT_EQ(json::parse(trace)["distributedInfo"]["rank"], 1);

  const MergedRun m = merge_runs({rank_run(0), rank_run(1, 1.0, 1'000'000'000'000 + 7'000'000)},
                                 {});
  const json merged = json::parse(render_merged_trace(m));
  EXPECT_FALSE(merged.contains("distributedInfo"));
  std::map<int, std::string> processes;
  std::map<int, double> first_ts;
  for (const json& e : merged["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") processes[e["pid"]] = e["args"]["name"];
    if (e["ph"] == "X" && !first_ts.count(e["pid"])) first_ts[e["pid"]] = e["ts"];
  }
  ASSERT_EQ(processes.size(), 2u);
  EXPECT_EQ(processes[1].rfind("rank 0:", 0), 0u);
  EXPECT_EQ(processes[2].rfind("rank 1:", 0), 0u);
  // The barrier aligned rank 1 onto rank 0: both start at 0 on the merged clock.
  EXPECT_EQ(first_ts[1], 0);
  EXPECT_EQ(first_ts[2], 0);
  const std::string html = render_merged_html(merge_runs({rank_run(0), rank_run(1, 2.0)}));
  EXPECT_NE(html.find("<section id=\"ranks\"><h2>Ranks</h2>"), std::string::npos);
  EXPECT_NE(html.find("rank 1 (B)"), std::string::npos);
  EXPECT_NE(html.find("class=\"num straggler\""), std::string::npos);
  // The timeline shows each rank at its start on the merged clock: rank 1 reaches the barrier
  // 200 ms earlier in its own run (sampling 200 ms, not 400), so it started 200 ms later.
  const MergedRun shifted = merge_runs({rank_run(0), rank_run(1, 0.5)});
  ASSERT_EQ(shifted.ranks[1].offset_ns, 200'000'000);
  const auto timeline = [](const std::string& page) {
    const std::string open = "<script type=\"application/json\" id=\"genscope-data\">";
    const std::size_t a = page.find(open) + open.size();
    return json::parse(page.substr(a, page.find("</script>", a) - a));
  };
  const json data = timeline(render_merged_html(shifted));
  EXPECT_DOUBLE_EQ(data["runs"][0]["steps"][0]["start"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(data["runs"][1]["steps"][0]["start"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(data["runs"][1]["steps"][0]["end"].get<double>(), 0.3);
  // Two runs compared (no merged clock): both from 0.
  const json plain = timeline(render_html_report(shifted.runs));
  EXPECT_DOUBLE_EQ(plain["runs"][1]["steps"][0]["start"].get<double>(), 0.0);
  const std::string summary = render_merged_summary(merge_runs({rank_run(0), rank_run(1, 2.0)}), true);
  EXPECT_NE(summary.find("sampling"), std::string::npos);
  EXPECT_NE(summary.find("STRAGGLER rank 1"), std::string::npos);
}

}  // namespace
}  // namespace genscope
