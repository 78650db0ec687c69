// Tests of what the qgate CLI prints: each expectation is the exact text a user or a script sees.
#include "qgate/client/format.h"

#include <gtest/gtest.h>

#include "qgate/client/exit_codes.h"

namespace qgate::client {
namespace {

TEST(Sparkline, KnownSeriesSpansAllEightBars) {
  EXPECT_EQ(sparkline({0, 1, 2, 3, 4, 5, 6, 7}), "▁▂▃▄▅▆▇█");
  EXPECT_EQ(sparkline({7, 0, 7}), "█▁█");
}

TEST(Sparkline, ScaledToTheGivenRangeAndClamped) {
  EXPECT_EQ(sparkline({400, 410, 420}, 400, 420), "▁▅█");  // 410 is 3.5/7 -> rounds to ▅
  EXPECT_EQ(sparkline({390, 430}, 400, 420), "▁█");
}

TEST(Sparkline, FlatAndEmptySeries) {
  EXPECT_EQ(sparkline({412, 412, 412}), "▄▄▄");
  EXPECT_EQ(sparkline({}), "");
}

TEST(Csv, PlainFieldsAreLeftAlone) {
  EXPECT_EQ(csv_field("q4_K"), "q4_K");
  EXPECT_EQ(csv_field(""), "");
}

TEST(Csv, CommasQuotesNewlinesAndEdgeSpacesAreQuoted) {
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(csv_field("cr\rhere"), "\"cr\rhere\"");
  EXPECT_EQ(csv_field(" padded"), "\" padded\"");
  EXPECT_EQ(csv_row({"1", "a,b", "x\"y"}), "1,\"a,b\",\"x\"\"y\"\n");
}

TEST(Csv, TrendExportHasHeaderAndOneRowPerPoint) {
  v1::TrendPoint p;
  p.set_run_id(7);
  p.set_job_id(3);
  p.set_build_name("mmq,fix");
  p.set_build_sha256("abc");
  p.set_path("mmq");
  p.set_profile("llama-7b");
  p.set_backend("cuda");
  p.set_started_unix_ms(1'764'468'000'000);
  p.set_tokens_per_s(412.5);
  p.set_contended(true);
  p.set_tokens(512);
  p.set_weight_type("q4_K");
  p.set_gpu_name("NVIDIA H200");
  p.set_commit_sha("0123abcd");
  p.set_runs(1);
  const std::string csv = trend_csv({p});
  EXPECT_EQ(csv,
            "run_id,job_id,build,sha256,path,profile,backend,started_unix_ms,started_utc,"
            "tokens_per_s,contended,cotenant_known,timing,tokens,weight_type,gpu,commit,runs,settings,host\n"
            "7,3,\"mmq,fix\",abc,mmq,llama-7b,cuda,1764468000000,2025-11-30 02:00:00Z,412.5,true,"
            "false,-,512,q4_K,NVIDIA H200,0123abcd,1,,\n");
  p.set_timing(v1::TIMING_MODE_PASS);
  p.set_settings("n_ubatch=256 flash_attn=1");
  p.set_host("gpu-host-a");
  EXPECT_TRUE(trend_csv({p}).ends_with(
      ",true,false,pass,512,q4_K,NVIDIA H200,0123abcd,1,n_ubatch=256 flash_attn=1,gpu-host-a\n"))
      << trend_csv({p});
}

TEST(Trend, GemmAndPassTimedPointsOfOneBuildAreRowsOfTheirOwn) {
  // One build gated both ways: whole passes give other tok/s than GEMMs timed alone, so the two
  // must not share a median or a sparkline.
  std::vector<v1::TrendPoint> points;
  auto add = [&](std::int64_t t, double tps, v1::TimingMode timing) {
    v1::TrendPoint p;
    p.set_build_name("mmq-v12");
    p.set_path("mmq");
    p.set_tokens(512);
    p.set_backend("cuda");
    p.set_started_unix_ms(t);
    p.set_tokens_per_s(tps);
    p.set_runs(1);
    p.set_timing(timing);
    points.push_back(p);
  };
  add(1'000, 15'000, v1::TIMING_MODE_GEMM);
  add(2'000, 15'450, v1::TIMING_MODE_PASS);
  add(3'000, 15'100, v1::TIMING_MODE_GEMM);
  const auto groups = group_trend(points);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].timing, v1::TIMING_MODE_GEMM);
  EXPECT_EQ(groups[0].tokens_per_s, (std::vector<double>{15'000, 15'100}));
  EXPECT_EQ(groups[1].timing, v1::TIMING_MODE_PASS);
  EXPECT_EQ(groups[1].tokens_per_s, (std::vector<double>{15'450}));
  const std::string text = format_trend(points);
  EXPECT_NE(text.find("TIMING"), std::string::npos) << text;
  EXPECT_NE(text.find(" gemm "), std::string::npos) << text;
  EXPECT_NE(text.find(" pass "), std::string::npos) << text;
}

TEST(Trend, EachWeightTypeOfABuildIsARowOfItsOwn) {
  // A run's parts (one per weight type) and the whole run give other tok/s: one row each, named.
  std::vector<v1::TrendPoint> points;
  auto add = [&](std::int64_t t, double tps, const char* type) {
    v1::TrendPoint p;
    p.set_build_name("mmq-v12");
    p.set_path("mmq");
    p.set_tokens(512);
    p.set_started_unix_ms(t);
    p.set_tokens_per_s(tps);
    p.set_runs(1);
    p.set_weight_type(type);
    points.push_back(p);
  };
  add(1'000, 15'000, "");
  add(1'000, 21'000, "q4_K");
  add(1'000, 60'000, "q6_K");
  add(2'000, 21'300, "q4_K");
  const auto groups = group_trend(points);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].weight_type, "");
  EXPECT_EQ(groups[1].weight_type, "q4_K");
  EXPECT_EQ(groups[1].tokens_per_s, (std::vector<double>{21'000, 21'300}));
  const std::string text = format_trend(points);
  EXPECT_NE(text.find("TYPE"), std::string::npos) << text;
  EXPECT_NE(text.find(" all "), std::string::npos) << text;
  EXPECT_NE(text.find(" q6_K "), std::string::npos) << text;
}

TEST(Trend, EachHostIsARowOfItsOwnAndNamedOnlyWhenThereAreSeveral) {
  std::vector<v1::TrendPoint> points;
  auto add = [&](std::int64_t t, double tps, const char* host) {
    v1::TrendPoint p;
    p.set_build_name("mmq-v12");
    p.set_path("mmq");
    p.set_tokens(512);
    p.set_started_unix_ms(t);
    p.set_tokens_per_s(tps);
    p.set_runs(1);
    p.set_host(host);
    points.push_back(p);
  };
  add(1'000, 15'000, "gpu-host-a");
  add(2'000, 15'100, "gpu-host-a");
  const std::string one_host = format_trend(points);
  EXPECT_EQ(one_host.find("HOST"), std::string::npos) << one_host;
  add(1'500, 14'000, "gpu-host-b");
  const auto groups = group_trend(points);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].host, "gpu-host-a");
  EXPECT_EQ(groups[0].tokens_per_s, (std::vector<double>{15'000, 15'100}));
  EXPECT_EQ(groups[1].host, "gpu-host-b");
  const std::string two_hosts = format_trend(points);
  EXPECT_NE(two_hosts.find("HOST"), std::string::npos) << two_hosts;
  EXPECT_NE(two_hosts.find(" gpu-host-b "), std::string::npos) << two_hosts;
}

TEST(Table, ColumnsAlignedNumbersRightNoTrailingSpaces) {
  Table t{{"ID", "NAME", "SIZE"}, {true, false, true}, {{"1", "ref", "1.5 MiB"}, {"12", "mmq-fast", "512 B"}}};
  EXPECT_EQ(format_table(t),
            "ID  NAME         SIZE\n"
            " 1  ref       1.5 MiB\n"
            "12  mmq-fast    512 B\n");
}

TEST(Table, WidthCountsCodePointsSoSparklinesAlign) {
  Table t{{"B", "TREND"}, {}, {{"x", "▁█"}, {"yyy", "▄"}}};
  EXPECT_EQ(format_table(t),
            "B    TREND\n"
            "x    ▁█\n"
            "yyy  ▄\n");
  EXPECT_EQ(display_width("▁▂▃"), 3u);
}

TEST(Format, DurationsSizesTimes) {
  EXPECT_EQ(format_duration(42), "42s");
  EXPECT_EQ(format_duration(312), "5m 12s");
  EXPECT_EQ(format_duration(7380), "2h 3m");
  EXPECT_EQ(format_duration(183600), "2d 3h");
  EXPECT_EQ(format_duration(-5), "0s");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(150LL << 30), "150.0 GiB");
  EXPECT_EQ(format_timestamp(0), "-");
  EXPECT_EQ(format_timestamp(1'764'468'000'123), "2025-11-30 02:00:00Z");
  EXPECT_EQ(format_age(1'000'000, 0), "-");
  EXPECT_EQ(format_age(400'000, 100'000), "5m 0s");
  EXPECT_EQ(format_interval(0.9984, 1.0491), "[0.998, 1.049]");
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
}

TEST(ExitCode, VerdictsMapToDocumentedCodes) {
  EXPECT_EQ(exit_code_for(v1::VERDICT_PASS), 0);
  EXPECT_EQ(exit_code_for(v1::VERDICT_FAIL), 1);
  EXPECT_EQ(exit_code_for(v1::VERDICT_INCONCLUSIVE), 2);
  EXPECT_EQ(exit_code_for(v1::VERDICT_UNSPECIFIED), 3);
}

TEST(ExitCode, OnlyADoneJobCarriesItsVerdict) {
  v1::Job job;
  job.mutable_verdict()->set_verdict(v1::VERDICT_FAIL);
  job.set_state(v1::JOB_STATE_DONE);
  EXPECT_EQ(exit_code_for(job), kExitFail);
  job.set_state(v1::JOB_STATE_FAILED);
  EXPECT_EQ(exit_code_for(job), kExitError);
  job.set_state(v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(exit_code_for(job), kExitError);
  job.set_state(v1::JOB_STATE_RUNNING);
  EXPECT_EQ(exit_code_for(job), kExitError);
}

TEST(ProgressLine, ShowsPhaseParityPairsAndRatio) {
  v1::JobProgress p;
  p.set_phase("ab");
  p.set_parity_done(64);
  p.set_parity_total(64);
  p.set_pairs_done(6);
  p.set_pairs_max(40);
  p.set_ratio(1.0234);
  p.set_ci_low(0.9981);
  p.set_ci_high(1.0493);
  EXPECT_EQ(progress_line(12, v1::JOB_STATE_RUNNING, p),
            "job 12 running (timed runs): parity 64/64, pairs 6/40, ratio 1.023 [0.998, 1.049]");
}

TEST(ProgressLine, LeavesOutWhatIsNotKnownYet) {
  v1::JobProgress p;
  p.set_phase("queued");
  EXPECT_EQ(progress_line(3, v1::JOB_STATE_QUEUED, p), "job 3 queued");
  p.set_phase("parity");
  p.set_parity_done(5);
  p.set_parity_total(64);
  p.set_message("q4_K 512x4096x4096");
  EXPECT_EQ(progress_line(3, v1::JOB_STATE_RUNNING, p),
            "job 3 running (parity sweep): parity 5/64, q4_K 512x4096x4096");
}

v1::Job sample_job() {
  v1::Job job;
  job.set_id(12);
  job.mutable_spec()->set_kind(v1::JOB_KIND_GATE);
  job.mutable_spec()->set_profile("llama-7b-q4_K_M");
  job.set_state(v1::JOB_STATE_DONE);
  job.mutable_build()->mutable_metadata()->set_name("mmq-tile64");
  job.set_disposition(v1::DISPOSITION_OK);
  job.set_created_unix_ms(1'764'468'000'000);
  auto* v = job.mutable_verdict();
  v->set_verdict(v1::VERDICT_PASS);
  v->set_comparison(v1::COMPARISON_SAME);
  v->set_ratio(1.0042);
  v->set_ci_low(0.991);
  v->set_ci_high(1.017);
  v->set_pairs(12);
  v->set_contended_pairs(1);
  v->mutable_arm_a()->set_label("mmq-tile64");
  v->mutable_arm_a()->set_tokens_per_s(441.2);
  v->mutable_arm_a()->set_runs(12);
  v->mutable_arm_b()->set_label("ref");
  v->mutable_arm_b()->set_tokens_per_s(439.4);
  v->mutable_arm_b()->set_runs(12);
  v->add_reasons("parity 64/64 green");
  auto* t = v->add_per_type();
  t->set_weight_type("q4_K");
  t->set_ratio(1.31);
  t->set_ci_low(1.29);
  t->set_ci_high(1.33);
  t->set_comparison(v1::COMPARISON_DIFFERENT);
  return job;
}

TEST(Jobs, TableHasEveryColumn) {
  v1::Job queued;
  queued.set_id(13);
  queued.mutable_spec()->set_kind(v1::JOB_KIND_AB);
  queued.set_state(v1::JOB_STATE_QUEUED);
  queued.mutable_build()->mutable_metadata()->set_name("ref");
  queued.set_created_unix_ms(1'764'468'300'000);
  const std::string table =
      format_jobs_table({sample_job(), queued}, 1'764'468'600'000);
  EXPECT_EQ(table,
            "ID  KIND  STATE   BUILD       PROFILE          VERDICT  RATIO  CREATED                  AGE  DISPOSITION  HOST\n"
            "12  gate  done    mmq-tile64  llama-7b-q4_K_M  PASS     1.004  2025-11-30 02:00:00Z  10m 0s  OK           -\n"
            "13  ab    queued  ref         default          -            -  2025-11-30 02:05:00Z   5m 0s  -            -\n");
}

TEST(Jobs, TheHostColumnNamesTheDaemonThatClaimedEachJob) {
  v1::Job claimed = sample_job();
  claimed.set_host("gpu-host-b");
  v1::Job queued = sample_job();
  queued.set_id(13);
  queued.set_state(v1::JOB_STATE_QUEUED);
  const std::string table = format_jobs_table({claimed, queued}, 1'764'468'600'000);
  EXPECT_NE(table.find("DISPOSITION  HOST\n"), std::string::npos) << table;
  EXPECT_NE(table.find("  OK           gpu-host-b\n"), std::string::npos) << table;
  EXPECT_NE(table.find("  OK           -\n"), std::string::npos) << table;
}

TEST(GpuChoice, SaysWhichDaemonOfTheFleetMayTakeTheJob) {
  v1::JobSpec spec;
  EXPECT_EQ(format_gpu_routing(spec), "");
  EXPECT_EQ(format_gpu_choice(spec), "any GPU free");
  spec.set_gpu_model("H200");
  spec.add_labels("rack2");
  spec.add_labels("sm90");
  EXPECT_EQ(format_gpu_routing(spec), "an H200 GPU with labels rack2, sm90");
  EXPECT_EQ(format_gpu_choice(spec), "an H200 GPU with labels rack2, sm90");
  spec.add_gpus(1);
  EXPECT_EQ(format_gpu_choice(spec), "GPU 1, which must be an H200 GPU with labels rack2, sm90");
  v1::JobSpec uuid;
  uuid.set_gpu_uuid("GPU-5a8e");
  uuid.add_labels("rack2");
  EXPECT_EQ(format_gpu_choice(uuid), "a GPU with uuid GPU-5a8e and label rack2");
  v1::JobSpec split;
  split.set_gpu_model("GH200");
  split.set_split_gpus(true);
  EXPECT_EQ(format_gpu_choice(split), "a GH200 GPU, split across two (--split-gpus)");
  // The article as the model is read aloud.
  for (const auto& [model, article] : std::vector<std::pair<std::string, std::string>>{
           {"A100", "an"}, {"RTX 4090", "an"}, {"rtx 4090", "an"}, {"L40S", "an"}, {"Tesla V100", "a"},
           {"Instinct MI300X", "an"}, {"B200", "a"}, {"NVIDIA H100", "an"}}) {
    v1::JobSpec s2;
    s2.set_gpu_model(model);
    EXPECT_EQ(format_gpu_routing(s2), article + " " + model + " GPU") << model;
  }
}

TEST(Jobs, DetailsSayWhereTheJobMayRunAndWhichHostClaimedIt) {
  v1::Job job = sample_job();
  job.mutable_spec()->set_gpu_model("H200");
  job.mutable_spec()->add_labels("rack2");
  job.mutable_spec()->add_labels("sm90");
  std::string text = format_job_details(job, 1'764'468'600'000);
  EXPECT_NE(text.find("\ngpu          an H200 GPU with labels rack2, sm90\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("\nhost "), std::string::npos) << "not claimed yet: no host line\n" << text;
  job.set_host("gpu-host-b");
  auto* ran = job.add_gpus();
  ran->set_ordinal(0);
  ran->set_name("NVIDIA H200");
  text = format_job_details(job, 1'764'468'600'000);
  EXPECT_NE(text.find("an H200 GPU with labels rack2, sm90; ran on GPU 0 (NVIDIA H200)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nhost         gpu-host-b (its daemon claimed the job)\n"), std::string::npos) << text;
}

TEST(Verdict, ReportSaysRatioArmsPairsTypesReasonsAndWhatTokPerSIs) {
  const std::string text = format_verdict_report(sample_job().verdict());
  EXPECT_NE(text.find("verdict    PASS (SAME)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("ratio A/B  1.004  95% interval [0.991, 1.017]"), std::string::npos) << text;
  EXPECT_NE(text.find("arm A      441.2 tok/s over 12 runs (mmq-tile64)"), std::string::npos) << text;
  EXPECT_NE(text.find("pairs      12 (1 contended)"), std::string::npos) << text;
  EXPECT_NE(text.find("q4_K      1.310  [1.290, 1.330]  DIFFERENT"), std::string::npos) << text;
  EXPECT_NE(text.find("  - parity 64/64 green\n"), std::string::npos) << text;
  EXPECT_NE(text.find("prefill throughput of the profile's linear layers"), std::string::npos);
}

TEST(Verdict, APassTimedReportSaysWhatItsTokPerSAndItsPerTypeFiguresTime) {
  const v1::Job job = sample_job();
  const std::string gemm = format_verdict_report(job.verdict(), job.spec().kind(), v1::TIMING_MODE_GEMM);
  const std::string pass = format_verdict_report(job.verdict(), job.spec().kind(), v1::TIMING_MODE_PASS);
  EXPECT_NE(gemm.find("(prompt tokens / summed GEMM time)"), std::string::npos) << gemm;
  EXPECT_EQ(gemm.find("whole pass"), std::string::npos) << gemm;
  EXPECT_NE(pass.find("(prompt tokens / the median time of a whole pass over them, in order)"), std::string::npos)
      << pass;
  EXPECT_EQ(pass.find("summed GEMM time"), std::string::npos) << pass;
  // The per-type line comes right under the per-type table, and only on pass timing.
  const auto table_row = pass.find("q4_K      1.310");
  const auto note = pass.find("per type: each GEMM timed alone; the ratio above times whole passes");
  ASSERT_NE(table_row, std::string::npos) << pass;
  ASSERT_NE(note, std::string::npos) << pass;
  EXPECT_LT(table_row, note);
  EXPECT_EQ(gemm.find("per type: each GEMM timed alone"), std::string::npos) << gemm;
}

TEST(Progress, AnEarlyLookThatCannotBoundTheRatioSaysSo) {
  v1::JobProgress progress;
  progress.set_pairs_done(5);
  progress.set_pairs_max(40);
  progress.set_ratio(0.534);
  progress.set_ci_low(0.0);
  progress.set_ci_high(1.1e30);
  EXPECT_EQ(progress_line(1, v1::JOB_STATE_RUNNING, progress), "job 1 running: pairs 5/40, ratio 0.534 [0.000, unbounded]");
  progress.set_ci_low(0.527);
  progress.set_ci_high(0.539);
  EXPECT_EQ(progress_line(1, v1::JOB_STATE_RUNNING, progress), "job 1 running: pairs 5/40, ratio 0.534 [0.527, 0.539]");
}

TEST(Verdict, AParityReportShowsTheSweepAndNoAbThatDidNotRun) {
  v1::VerdictReport report;
  report.set_verdict(v1::VERDICT_PASS);
  report.set_comparison(v1::COMPARISON_UNKNOWN);
  report.set_parity_passed(208);
  report.set_backend("cuda");
  report.add_reasons("all 208 parity cases passed");
  const std::string parity = format_verdict_report(report, v1::JOB_KIND_PARITY);
  EXPECT_NE(parity.find("verdict  PASS\n"), std::string::npos) << parity;
  EXPECT_NE(parity.find("parity   208 passed, 0 failed\n"), std::string::npos) << parity;
  EXPECT_NE(parity.find("backend  cuda\n"), std::string::npos) << parity;
  for (const char* absent : {"UNKNOWN", "arm A", "ratio A/B", "pairs", "tok/s", "timed runs", "profile"})
    EXPECT_EQ(parity.find(absent), std::string::npos) << absent << " in\n" << parity;

  // A gate whose sweep failed stops before its A/B, and says so.
  report.set_verdict(v1::VERDICT_FAIL);
  report.set_parity_passed(207);
  report.set_parity_failed(1);
  const std::string gate = format_verdict_report(report, v1::JOB_KIND_GATE);
  EXPECT_NE(gate.find("timed runs  not run: the parity sweep failed\n"), std::string::npos) << gate;
  EXPECT_EQ(gate.find("arm A"), std::string::npos) << gate;
}

TEST(Verdict, ReportListsTheMemoryABuildKept) {
  v1::VerdictReport report = sample_job().verdict();
  EXPECT_EQ(format_verdict_report(report).find("memory kept"), std::string::npos) << "no leak, no section";
  auto* leak = report.add_leaks();
  leak->set_where("arm A across runs");
  leak->set_device_bytes(int64_t(448) << 20);
  leak->set_detail("device memory grew 64.0 MiB per run over 7 runs");
  const std::string text = format_verdict_report(report);
  EXPECT_NE(text.find("memory kept by the build:\n  - arm A across runs: device 448.0 MiB, host 0 B: device memory "
                      "grew 64.0 MiB per run over 7 runs\n"),
            std::string::npos)
      << text;
}

TEST(Trend, GroupsByBuildPathBackendInTimeOrderAndMarksContended) {
  std::vector<v1::TrendPoint> points;
  auto add = [&](const std::string& build, std::int64_t t, double tps, bool contended) {
    v1::TrendPoint p;
    p.set_build_name(build);
    p.set_path("mmq");
    p.set_backend("cuda");
    p.set_started_unix_ms(t);
    p.set_tokens_per_s(tps);
    p.set_contended(contended);
    points.push_back(p);
  };
  add("b", 4'000, 300, false);
  add("a", 3'000, 440, false);
  add("a", 1'000, 400, false);
  add("a", 2'000, 155, true);
  const auto groups = group_trend(points);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].build, "a");
  EXPECT_EQ(groups[0].tokens_per_s, (std::vector<double>{400, 155, 440}));
  EXPECT_EQ(groups[0].last_unix_ms, 3'000);
  const std::string text = format_trend(points);
  EXPECT_NE(text.find("3 (1*)"), std::string::npos) << text;
  EXPECT_NE(text.find("▇▁█"), std::string::npos) << text;
  EXPECT_NE(text.find("* 1 contended run(s) included"), std::string::npos) << text;
}

TEST(Trend, SummaryPointsCountTheirRunsAndShowBackendAndGpu) {
  // Two jobs' points for one build and series, one of them with contended runs included.
  std::vector<v1::TrendPoint> points;
  auto add = [&](std::int64_t t, double median, double low, double high, int runs, int contended) {
    v1::TrendPoint p;
    p.set_build_name("mmq-a");
    p.set_path("mmq");
    p.set_backend("cuda");
    p.set_gpu_name("NVIDIA H200");
    p.set_started_unix_ms(t);
    p.set_last_unix_ms(t + 500);
    p.set_tokens_per_s(median);
    p.set_tokens_per_s_low(low);
    p.set_tokens_per_s_high(high);
    p.set_runs(runs);
    p.set_contended_runs(contended);
    p.set_contended(contended > 0);
    points.push_back(p);
  };
  add(1'000, 400, 390, 410, 5, 0);
  add(2'000, 420, 150, 430, 6, 2);
  const auto groups = group_trend(points);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].runs, 11);
  EXPECT_EQ(groups[0].contended_runs, 2);
  EXPECT_EQ(groups[0].low, 150);
  EXPECT_EQ(groups[0].high, 430);
  EXPECT_EQ(groups[0].last_unix_ms, 2'500);
  const std::string text = format_trend(points);
  EXPECT_NE(text.find("BACKEND  GPU"), std::string::npos) << text;
  EXPECT_NE(text.find("cuda     NVIDIA H200"), std::string::npos) << text;
  EXPECT_NE(text.find("11 (2*)"), std::string::npos) << text;
  EXPECT_NE(text.find("* 2 contended run(s) included"), std::string::npos) << text;
}

// One build measured at 1, 8 and 512 tokens is three series: a row must not mix their tok/s.
TEST(Trend, RunsOfAnotherTokenCountAreAnotherRow) {
  std::vector<v1::TrendPoint> points;
  auto add = [&](std::int64_t tokens, std::int64_t t, double tps) {
    v1::TrendPoint p;
    p.set_build_name("mmq-v2");
    p.set_path("mmq");
    p.set_backend("cuda");
    p.set_tokens(tokens);
    p.set_started_unix_ms(t);
    p.set_tokens_per_s(tps);
    points.push_back(p);
  };
  add(1, 1'000, 234);
  add(512, 2'000, 7838);
  add(1, 3'000, 236);
  add(8, 4'000, 1812);
  const auto groups = group_trend(points);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].tokens, 1);
  EXPECT_EQ(groups[0].tokens_per_s, (std::vector<double>{234, 236}));
  EXPECT_EQ(groups[1].tokens, 512);
  EXPECT_EQ(groups[2].tokens, 8);
  const std::string text = format_trend(points);
  EXPECT_NE(text.find("PATH  TYPE  TOKENS  TIMING  BACKEND"), std::string::npos) << text;
  EXPECT_NE(text.find("mmq   all      512  -       cuda"), std::string::npos) << text;
}

TEST(Json, SixtyFourBitNumbersStayNumbersAndEnumsAreNamed) {
  v1::SubmitBuildResponse r;
  r.set_job_id(42);
  r.mutable_build()->set_size_bytes(5'000'000'000);
  r.mutable_build()->mutable_metadata()->set_name("ref");
  const auto j = to_json(r);
  EXPECT_EQ(j["job_id"], 42);
  EXPECT_TRUE(j["job_id"].is_number_integer());
  EXPECT_EQ(j["build"]["size_bytes"], 5'000'000'000LL);
  EXPECT_EQ(j["build"]["metadata"]["name"], "ref");
  EXPECT_FALSE(j["build"].contains("info"));  // unset sub-message left out
  EXPECT_EQ(j["build_existed"], false);       // scalar defaults present
  EXPECT_EQ(to_json(sample_job())["state"], "JOB_STATE_DONE");
  EXPECT_EQ(to_json(sample_job())["verdict"]["reasons"][0], "parity 64/64 green");
}

TEST(Device, FieldsAligned) {
  v1::DeviceStatus d;
  d.set_backend("cuda");
  d.set_name("NVIDIA H200");
  d.set_memory_bytes(150'000'000'000);
  d.set_uptime_s(3700);
  d.set_host("gpu-host-1");
  d.set_driver_version("560.35.03");
  const std::string text = format_device(d);
  EXPECT_EQ(text.rfind("host           gpu-host-1\n", 0), 0u) << text;
  EXPECT_NE(text.find("driver         560.35.03\n"), std::string::npos) << text;
  EXPECT_NE(text.find("memory         139.7 GiB\n"), std::string::npos) << text;
  EXPECT_NE(text.find("running job    none\n"), std::string::npos) << text;
  EXPECT_NE(text.find("uptime         1h 1m\n"), std::string::npos) << text;
}

TEST(Compare, ShowsTheSeriesNPerSideTheUnpairedIntervalAndThePairedJobs) {
  v1::CompareResponse r;
  r.mutable_a()->mutable_metadata()->set_name("tile64");
  r.mutable_a()->set_id(1);
  r.mutable_b()->mutable_metadata()->set_name("tile128");
  r.mutable_b()->set_id(2);
  r.set_same_margin(0.02);
  auto* row = r.add_rows();
  row->set_series("cuda on NVIDIA H200 (GPU-1111111) at 512 tokens, profile llama-7b-q4_K_M, path mmq, gemm timing");
  row->set_ratio(1.0512);
  row->set_ci_low(1.0431);
  row->set_ci_high(1.0594);
  row->set_welch_df(51.23);
  row->set_mann_whitney_p(1.5e-9);
  row->set_mann_whitney_exact(true);
  row->set_comparison(v1::COMPARISON_DIFFERENT);
  auto* a = row->mutable_a();
  a->set_runs(30);
  a->set_jobs(4);
  for (int64_t id : {1, 2, 3, 6}) a->add_job_ids(id);
  a->set_tokens_per_s(420.04);
  a->set_sd_log(0.0151);
  auto* b = row->mutable_b();
  b->set_runs(1);
  b->set_jobs(1);
  b->add_job_ids(6);
  b->set_tokens_per_s(399.96);
  auto* job = row->add_paired_jobs();
  job->set_job_id(6);
  job->set_pairs(6);
  job->set_ratio(1.049);
  job->set_ci_low(1.031);
  job->set_ci_high(1.068);
  job->set_contended_pairs(1);
  job->set_comparison(v1::COMPARISON_DIFFERENT);
  row->add_notes("all of B's runs come from one job (6)");
  r.add_notes("A also has runs on 2 series B has none of");
  const std::string text = format_compare(r);
  EXPECT_NE(text.find("\nseries  cuda on NVIDIA H200 (GPU-1111111) at 512 tokens"), std::string::npos) << text;
  EXPECT_NE(text.find("    A    30 runs from 4 jobs (1, 2, 3, 6), 420.0 tok/s, run-to-run sd 1.51%\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("    B    1 run from 1 job (6), 400.0 tok/s\n"), std::string::npos) << text;
  EXPECT_NE(text.find("    A/B  1.051  95% [1.043, 1.059]  Welch df 51.2  Mann-Whitney p 1.5e-09 (exact)  DIFFERENT\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("within one job, paired"), std::string::npos) << text;
  EXPECT_NE(text.find("6          1      1.049  [1.031, 1.068]  DIFFERENT\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  note: all of B's runs come from one job (6)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("note: A also has runs on 2 series B has none of\n"), std::string::npos) << text;
  EXPECT_NE(text.find("within 1 +- 2%"), std::string::npos) << text;
}

v1::SeriesChange* add_change(v1::ChangeSeries* series, const std::string& build, const std::string& previous,
                             double ratio, std::int64_t started_ms) {
  v1::SeriesChange* c = series->add_changes();
  c->set_build_name(build);
  c->set_previous_build_name(previous);
  c->set_ratio(ratio);
  c->set_ci_low(ratio - 0.005);
  c->set_ci_high(ratio + 0.005);
  c->set_p_value(0.002);
  c->set_builds_before(12);
  c->set_builds_after(12);
  c->set_started_unix_ms(started_ms);
  return c;
}

v1::QueryChangesResponse two_series_with_changes() {
  v1::QueryChangesResponse r;
  r.set_alpha(0.01);
  r.set_permutations(499);
  r.set_min_segment(5);
  v1::ChangeSeries* mmq = r.add_series();
  mmq->set_series("cuda on NVIDIA H200 at 512 tokens, path mmq");
  mmq->set_builds(24);
  mmq->set_runs(120);
  add_change(mmq, "mmq-13", "mmq-12", 0.97, 1'764'554'400'000);  // 2025-12-01 02:00:00Z
  add_change(mmq, "mmq-20", "mmq-19", 1.05, 1'764'558'000'000);
  v1::ChangeSeries* f16 = r.add_series();
  f16->set_series("cuda on NVIDIA H200 at 512 tokens, path f16");
  f16->set_builds(16);
  f16->set_runs(80);
  add_change(f16, "f16-05", "f16-04", 0.90, 1'764'550'800'000);  // an hour before mmq-13
  return r;
}

TEST(Changes, EachSeriesWithItsChangesOrNone) {
  v1::QueryChangesResponse r = two_series_with_changes();
  r.mutable_series(1)->clear_changes();
  const std::string text = format_changes(r);
  EXPECT_NE(text.find("\nseries  cuda on NVIDIA H200 at 512 tokens, path mmq  (24 builds, 120 uncontended runs)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  LAST BUILD BEFORE  FIRST BUILD AFTER  RATIO"), std::string::npos) << text;
  EXPECT_NE(text.find("  mmq-12             mmq-13             0.970  [0.965, 0.975]  0.002"), std::string::npos) << text;
  EXPECT_NE(text.find("path f16  (16 builds, 80 uncontended runs)\n  no changes\n"), std::string::npos) << text;
  EXPECT_NE(text.find("permutation p < 0.01 (499 permutations), at least 5 builds per level"), std::string::npos)
      << text;
}

TEST(Regressions, OnlySlowdownsAcrossSeriesOldestFirst) {
  const std::string text = format_regressions(two_series_with_changes());
  const size_t f16 = text.find("f16-05"), mmq = text.find("mmq-13");
  ASSERT_NE(f16, std::string::npos) << text;
  ASSERT_NE(mmq, std::string::npos) << text;
  EXPECT_LT(f16, mmq) << text;                          // oldest first, across series
  EXPECT_EQ(text.find("mmq-20"), std::string::npos);    // a speed-up is not a regression
  v1::QueryChangesResponse none;
  EXPECT_EQ(format_regressions(none).rfind("no slowdowns\n", 0), 0u);
}

TEST(Regressions, ADipThatRecoveredIsOneRowNamingItsFixAndTheCorrectionIsSaid) {
  v1::QueryChangesResponse r = two_series_with_changes();
  r.set_correction("benjamini-hochberg");
  r.set_series_tested(20);
  r.mutable_series(0)->set_q_value(0.004);
  r.mutable_series(1)->set_q_value(0.008);
  // mmq: slow from mmq-13, fixed by mmq-20 (7 builds slow); f16 is still slow.
  r.mutable_series(0)->mutable_changes(0)->set_builds_after(7);
  r.mutable_series(0)->mutable_changes(1)->set_fixes_previous(true);
  const std::string text = format_regressions(r);
  EXPECT_NE(text.find("FIXED BY"), std::string::npos) << text;
  EXPECT_NE(text.find("mmq-20 (7 builds slow)"), std::string::npos) << text;
  EXPECT_NE(text.find("not yet"), std::string::npos) << text;
  // The fix is part of its slowdown's row, never a row of its own.
  EXPECT_EQ(text.find("1.050"), std::string::npos) << text;
  EXPECT_NE(text.find("0.004"), std::string::npos) << text;   // the series' q, not the split's p
  EXPECT_NE(text.find("benjamini-hochberg over 20 series, false discovery rate 0.01"), std::string::npos) << text;
}

TEST(Regressions, EachRowSaysItsSlowBuildsAndWhetherTheSlowdownIsTransient) {
  v1::QueryChangesResponse r = two_series_with_changes();
  r.set_correction("benjamini-hochberg");
  r.set_series_tested(2);
  // mmq: a slowdown carried by 2 slow builds, fixed by mmq-20; f16: 9 slow builds.
  v1::SeriesChange* burst = r.mutable_series(0)->mutable_changes(0);
  burst->set_builds_after(7);
  burst->set_slow_builds(2);
  burst->set_transient(true);
  r.mutable_series(0)->mutable_changes(1)->set_fixes_previous(true);
  r.mutable_series(1)->mutable_changes(0)->set_slow_builds(9);
  const std::string text = format_regressions(r);
  // The row of the slowdown whose first slow build is `build`.
  const auto row_of = [&text](const std::string& build) {
    const size_t at = text.find("  " + build + " ");
    if (at == std::string::npos) return std::string();
    const size_t begin = text.rfind('\n', at) + 1;
    return text.substr(begin, text.find('\n', at) - begin);
  };
  const auto row_has = [&row_of](const std::string& build, const std::string& part) {
    return row_of(build).find(part) != std::string::npos;
  };
  EXPECT_NE(text.find("SLOW BUILDS"), std::string::npos) << text;
  EXPECT_TRUE(row_has("mmq-13", "2 transient")) << text;
  EXPECT_FALSE(row_has("f16-05", "transient")) << text;
  EXPECT_TRUE(row_has("f16-05", "  9  ")) << text;
  EXPECT_NE(text.find("transient: fewer than 3 (1 of 2 slowdowns)"), std::string::npos) << text;
  EXPECT_NE(text.find("co-tenant sampler missed"), std::string::npos) << text;
}

TEST(Import, CountsRunsNamesTheBuildsAndTheTrendToRun) {
  v1::ImportResultsResponse r;
  r.set_runs_added(3);
  r.set_runs_already_stored(1);
  auto* b = r.add_builds();
  b->set_id(7);
  b->mutable_metadata()->set_name("llama.cpp@abc/CUDA0/NVIDIA H200");
  r.add_profiles("mul_mat-m4096-k14336");
  const std::string text = format_import(r, "test-backend-ops-sql", 2);
  EXPECT_EQ(text,
            "imported 3 runs as test-backend-ops-sql (1 already stored, not added again) (2 rows skipped: other "
            "ops or unsupported)\n"
            "  build llama.cpp@abc/CUDA0/NVIDIA H200 (id 7, external)\n"
            "  see: qgate trend --profile 'mul_mat-m4096-k14336'\n");
}

TEST(Device, SeveralGpusAreATableThenEachOnesDetails) {
  std::vector<v1::DeviceStatus> devices(2);
  for (int i = 0; i < 2; ++i) {
    devices[i].set_device(i);
    devices[i].set_name("NVIDIA H200");
    devices[i].set_uuid("GPU-" + std::to_string(i));
    devices[i].mutable_now()->set_state(i == 0 ? "quiet" : "contended");
  }
  devices[0].set_queued_jobs(2);
  devices[0].set_queued_any_gpu(3);
  devices[1].set_queued_any_gpu(3);
  devices[1].set_running_job_id(17);
  devices[1].set_split_job_id(17);
  const std::string text = format_devices(devices);
  EXPECT_EQ(text.rfind("GPU  NAME         UUID   QUEUED  ANY-GPU QUEUE  RUNNING  SPLIT JOB  GPU NOW\n", 0), 0u) << text;
  EXPECT_NE(text.find("  0  NVIDIA H200  GPU-0       2              3        -          -  quiet\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("  1  NVIDIA H200  GPU-1       0              3       17         17  contended\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\nGPU 1:\n"), std::string::npos) << text;
  // One GPU: the single-device view, as before.
  EXPECT_EQ(format_devices({devices[0]}), format_device(devices[0]));
  // One host, every GPU read live: no fleet columns, labels or all, in the details only.
  EXPECT_EQ(text.find("HOST"), std::string::npos) << text;
  EXPECT_EQ(text.find("SEEN"), std::string::npos) << text;
  for (auto& d : devices) {
    d.set_host("gpu-host-a");
    d.add_labels("sm90");
  }
  const std::string labelled = format_devices(devices, 1'000'000);
  EXPECT_EQ(labelled.rfind("GPU  NAME", 0), 0u) << labelled;
  EXPECT_NE(labelled.find("\nGPU 1:\nhost           gpu-host-a\n"), std::string::npos) << labelled;
  EXPECT_NE(labelled.find("\nlabels         sm90\n"), std::string::npos) << labelled;
}

TEST(Device, LabelsAreALineOnlyWhenTheDaemonHasSome) {
  v1::DeviceStatus d;
  d.set_host("gpu-host-a");
  d.set_uuid("GPU-0");
  EXPECT_EQ(format_device(d).find("labels"), std::string::npos);
  d.add_labels("rack2");
  d.add_labels("sm90");
  EXPECT_NE(format_device(d).find("uuid           GPU-0\nlabels         rack2, sm90\nmemory "), std::string::npos)
      << format_device(d);
}

v1::DeviceStatus fleet_gpu(const std::string& host, int ordinal, std::int64_t published_ms) {
  v1::DeviceStatus d;
  d.set_host(host);
  d.set_device(ordinal);
  d.set_name("NVIDIA H200");
  d.set_uuid(host + "-GPU-" + std::to_string(ordinal));
  d.set_backend("cuda");
  d.set_qgate_version("0.0.9");
  d.add_labels("sm90");
  d.set_published_unix_ms(published_ms);
  d.mutable_now()->set_state("quiet");
  return d;
}

TEST(Device, AMixedFleetIsATableWithHostLabelsAndHowLongAgoEachWasPublished) {
  constexpr std::int64_t kNowMs = 1'764'468'600'000;
  v1::DeviceStatus own = fleet_gpu("gpu-host-a", 0, 0);
  own.set_queued_jobs(2);
  own.set_queued_any_gpu(3);
  own.set_memory_bytes(150'000'000'000);
  v1::DeviceStatus other = fleet_gpu("gpu-host-b", 1, kNowMs - 12'000);
  other.clear_labels();
  other.add_labels("rack2");
  other.add_labels("sm90");
  other.set_running_job_id(44);
  other.mutable_now()->set_state("contended");
  other.mutable_now()->set_reason("a foreign process");
  const std::string text = format_devices({own, other}, kNowMs);
  EXPECT_EQ(text.rfind("HOST        GPU  NAME         UUID              LABELS       QUEUED  ANY-GPU QUEUE  RUNNING  SPLIT JOB  "
                       "GPU NOW    SEEN\n"
                       "gpu-host-a    0  NVIDIA H200  gpu-host-a-GPU-0  sm90              2              3        -          -  "
                       "quiet      live\n"
                       "gpu-host-b    1  NVIDIA H200  gpu-host-b-GPU-1  rack2, sm90       -              -       44          -  "
                       "contended  12s ago\n",
                       0),
            0u)
      << text;
  // Each one's details: the own GPU's live fields, the other's published ones and when.
  EXPECT_NE(text.find("\ngpu-host-a GPU 0:\nhost           gpu-host-a\n"), std::string::npos) << text;
  EXPECT_NE(text.find("memory         139.7 GiB\n"), std::string::npos) << text;
  const std::string other_part = text.substr(text.find("\ngpu-host-b GPU 1:\n"));
  EXPECT_NE(other_part.find("labels         rack2, sm90\n"), std::string::npos) << other_part;
  EXPECT_NE(other_part.find("why            a foreign process\n"), std::string::npos) << other_part;
  EXPECT_NE(other_part.find("published      12s ago (2025-11-30 02:09:48Z, by its daemon)\n"), std::string::npos)
      << other_part;
  for (const char* live_only : {"memory", "uptime", "queued jobs", "driver", "last quiet"})
    EXPECT_EQ(other_part.find(live_only), std::string::npos) << live_only << "\n" << other_part;
  // Two hosts read live (a fleet's daemons on one machine's view) are the fleet's table too.
  v1::DeviceStatus live_b = fleet_gpu("gpu-host-b", 0, 0);
  EXPECT_EQ(format_devices({own, live_b}, kNowMs).rfind("HOST  ", 0), 0u);
  // Another daemon's GPU alone (qgate device --host gpu-host-b) is its published details.
  EXPECT_EQ(format_devices({other}, kNowMs), format_device(other, kNowMs));
  EXPECT_EQ(format_device(other, kNowMs).rfind("host           gpu-host-b\n", 0), 0u);
}

TEST(Verdict, ASplitReportNamesThePairTheGpuRatioAndTheCalibration) {
  v1::VerdictReport report = sample_job().verdict();
  v1::GpuRef a, b;
  a.set_ordinal(0);
  a.set_name("NVIDIA H200");
  a.set_uuid("GPU-aaaa");
  b.set_ordinal(1);
  b.set_name("NVIDIA H200");
  b.set_uuid("GPU-bbbb");
  *report.add_gpus() = a;
  *report.add_gpus() = b;
  v1::SplitGpus* split = report.mutable_split();
  *split->mutable_first() = a;
  *split->mutable_second() = b;
  split->set_blocks(10);
  split->set_gpu_ratio(1.031);
  split->set_gpu_ci_low(1.02);
  split->set_gpu_ci_high(1.042);
  split->set_calibration_job_id(41);
  split->set_calibration_comparison(v1::COMPARISON_SAME);
  split->set_calibration_ratio(1.001);
  split->set_calibration_ci_low(0.995);
  split->set_calibration_ci_high(1.007);
  split->set_calibration_gpu_ratio(1.029);
  const std::string text = format_verdict_report(report);
  EXPECT_NE(text.find("gpus         GPU 0 (NVIDIA H200, GPU-aaaa) and GPU 1 (NVIDIA H200, GPU-bbbb)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("split        10 blocks of two pairs, arms swapping GPUs; GPU 0 / GPU 1 speed 1.031  95% "
                      "interval [1.020, 1.042]\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("calibration  job 41: A/A SAME ratio 1.001 [0.995, 1.007]; GPU speed then 1.029\n"),
            std::string::npos)
      << text;
  split->set_calibration_job_id(0);
  EXPECT_NE(format_verdict_report(report).find("calibration  none: the pair has no A/A yet"), std::string::npos);
  split->set_is_calibration(true);
  EXPECT_NE(format_verdict_report(report).find("calibration  this job: an A/A of the pair"), std::string::npos);
}

}  // namespace
}  // namespace qgate::client
