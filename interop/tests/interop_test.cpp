// The interop library on small files in each format: what each row becomes, the errors a bad file
// gets (line and field), and the llama-bench SQL export read back by the importer.
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "qgate/interop/import_file.h"
#include "qgate/interop/llama_bench.h"
#include "qgate/interop/llama_bench_export.h"
#include "qgate/interop/table_rows.h"
#include "qgate/interop/test_backend_ops.h"

namespace qgate::interop {
namespace {

std::string data(const std::string& name) {
  std::ifstream in(std::string(QGATE_INTEROP_DATA) + "/" + name, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_TRUE(in.good() || in.eof()) << name;
  return text.str();
}

std::string error_of(const std::string& text, const std::string& format) {
  try {
    parse_import(text, format, "");
  } catch (const ImportError& e) {
    return e.what();
  }
  return "no error";
}

// The fixtures' two runs, read from any of the formats; `settings` are the pp run's series settings.
void expect_llama_bench_rows(const ParsedImport& parsed, const std::string& format,
                             const std::string& settings = "n_threads=16 n_gpu_layers=99 flash_attn=0") {
  SCOPED_TRACE(format);
  EXPECT_EQ(parsed.format, format);
  ASSERT_EQ(parsed.runs.size(), 2u);
  const ExternalRun& pp = parsed.runs[0];
  EXPECT_EQ(pp.tool, "llama-bench");
  EXPECT_EQ(pp.build_commit, "5a7c2f1");
  EXPECT_EQ(pp.backend, "CUDA");
  EXPECT_EQ(pp.gpu_name, "NVIDIA H200");
  EXPECT_EQ(pp.profile, "llama 8B Q4_K - Medium");
  EXPECT_EQ(pp.path, "pp");
  EXPECT_EQ(pp.tokens, 512);
  EXPECT_DOUBLE_EQ(pp.tokens_per_s, 11000.5);
  EXPECT_EQ(pp.started_ms, 1796004600000);  // 2026-11-30T02:10:00Z
  EXPECT_NE(pp.options_json.find("\"n_ubatch\":\"512\""), std::string::npos) << pp.options_json;
  // The series settings: those llama-bench keys on that are not at its defaults.
  EXPECT_EQ(pp.settings, settings);
  const ExternalRun& tg = parsed.runs[1];
  EXPECT_EQ(tg.path, "tg");
  EXPECT_EQ(tg.tokens, 128);
  EXPECT_DOUBLE_EQ(tg.tokens_per_s, 169.6);
  EXPECT_EQ(tg.started_ms, 1796004630000);
}

TEST(LlamaBenchImport, EveryFormatGivesTheSameRuns) {
  expect_llama_bench_rows(parse_import(data("llama_bench.sql"), "auto", "results.sql"), "llama-bench-sql");
  expect_llama_bench_rows(parse_import(data("llama_bench.json"), "auto", "results.json"), "llama-bench-json");
  expect_llama_bench_rows(parse_import(data("llama_bench.jsonl"), "auto", "results.jsonl"), "llama-bench-jsonl");
  expect_llama_bench_rows(parse_import(data("llama_bench.csv"), "auto", "results.csv"), "llama-bench-csv");
}

TEST(TestBackendOpsImport, CorrectnessFilesAreFoundByContentAndReadAsChecks) {
  // Console output and the tool's CSV, under names that say nothing of their format.
  const auto console = parse_import(data("test_backend_ops_test_console.txt"), "auto", "run.log");
  EXPECT_EQ(console.format, "test-backend-ops-console");
  EXPECT_TRUE(console.runs.empty());
  ASSERT_EQ(console.checks.size(), 6u);
  const auto failed = std::count_if(console.checks.begin(), console.checks.end(), [](const BackendOpsCheck& c) {
    return c.outcome == BackendOpsCheck::Outcome::Failed;
  });
  EXPECT_EQ(failed, 2);
  const auto csv = parse_import(data("test_backend_ops_test.csv"), "auto", "results.csv");
  EXPECT_EQ(csv.format, "test-backend-ops-csv");
  EXPECT_FALSE(csv.checks.empty());
  // SQL of test mode: checks, and its rows are not counted as skipped runs.
  const auto sql = parse_import(data("test_backend_ops_test.sql"), "auto", "results.sql");
  EXPECT_EQ(sql.format, "test-backend-ops-sql");
  EXPECT_EQ(sql.checks.size(), 4u);
  EXPECT_EQ(sql.runs.size(), 1u);  // its one perf row
  EXPECT_EQ(sql.skipped, 0u);
  // A perf file has no checks.
  EXPECT_TRUE(parse_import(data("test_backend_ops_mulmat_h200.sql"), "auto", "perf.sql").checks.empty());
  // A bad case names its line and field, as every import error does.
  std::string bad = data("test_backend_ops_test_console.txt");
  bad.replace(bad.find("ERR = 0.001953125"), 17, "ERR = 0.00x953125");
  try {
    parse_import(bad, "auto", "run.log");
    FAIL() << "a bad error value was read";
  } catch (const ImportError& e) {
    EXPECT_EQ(e.line(), 11u);
    EXPECT_EQ(e.field(), "nmse");
    EXPECT_EQ(std::string(e.what()).find("run.log"), std::string::npos) << e.what();  // the CLI names the file
  }
}

TEST(LlamaBenchImport, TodaysSqlTableAndColumnsAreRead) {
  // llama-bench writes the table `llama_bench` (llama.cpp PR #15003) with load_mode, devices,
  // no_host and fit_* among its columns; auto detection finds it whatever the file is called.
  const auto parsed = parse_import(data("llama_bench_current.sql"), "auto", "all-new.sql");
  expect_llama_bench_rows(parsed, "llama-bench-sql", "n_threads=16 n_gpu_layers=99 flash_attn=-1 load_mode=mmap fit_target=0 fit_min_ctx=0");
  EXPECT_NE(parsed.runs[0].options_json.find("\"load_mode\":\"mmap\""), std::string::npos) << parsed.runs[0].options_json;
  EXPECT_NE(parsed.runs[0].options_json.find("\"devices\":\"auto\""), std::string::npos) << parsed.runs[0].options_json;
  EXPECT_EQ(parse_import(data("llama_bench_current.sql"), "auto", "").format, "llama-bench-sql");
}

TEST(LlamaBenchImport, SettingsThatDifferFromTheDefaultsKeyTheSeries) {
  // One test at two micro-batch sizes, with flash attention on: two series, each naming its settings.
  std::string csv = data("llama_bench.csv");
  const auto first_row = csv.find('\n') + 1;
  std::string second = csv.substr(first_row, csv.find('\n', first_row) + 1 - first_row);
  second.replace(second.find("\"512\",\"16\""), 10, "\"256\",\"16\"");
  const auto runs = parse_import(csv.substr(0, first_row) + csv.substr(first_row, second.size()) + second,
                                 "llama-bench-csv", "").runs;
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].settings, "n_threads=16 n_gpu_layers=99 flash_attn=0");
  EXPECT_EQ(runs[1].settings, "n_ubatch=256 n_threads=16 n_gpu_layers=99 flash_attn=0");
  // JSON's booleans read as the SQL and CSV forms write them: use_mmap true is the default, 1.
  std::string json = data("llama_bench.json");
  json.replace(json.find("\"use_mmap\": 1"), 13, "\"use_mmap\": true");
  json.replace(json.find("\"flash_attn\": 0"), 15, "\"flash_attn\": false");
  EXPECT_EQ(parse_import(json, "llama-bench-json", "").runs[0].settings, "n_threads=16 n_gpu_layers=99 flash_attn=0");
}

TEST(LlamaBenchImport, TheDefaultMarkdownTableIsReadWithItsBuildLine) {
  const std::int64_t file_time = 1796004600000;  // 2026-11-30T02:10:00Z, the file's mtime
  const auto parsed = parse_import(data("llama_bench.md"), "auto", "bench.md", file_time);
  EXPECT_EQ(parsed.format, "llama-bench-md");
  ASSERT_EQ(parsed.runs.size(), 3u);
  const ExternalRun& pp = parsed.runs[0];
  EXPECT_EQ(pp.build_commit, "5a7c2f1");
  EXPECT_EQ(pp.backend, "CUDA");
  EXPECT_EQ(pp.profile, "llama 8B Q4_K - Medium");
  EXPECT_EQ(pp.path, "pp");
  EXPECT_EQ(pp.tokens, 512);
  EXPECT_DOUBLE_EQ(pp.tokens_per_s, 11000.5);
  EXPECT_EQ(pp.started_ms, file_time);
  EXPECT_EQ(pp.line, 5u);
  // The short headers are the fields' long names, kept with the run's other settings.
  EXPECT_NE(pp.options_json.find("\"n_gpu_layers\":\"99\""), std::string::npos) << pp.options_json;
  EXPECT_NE(pp.options_json.find("\"flash_attn\":\"1\""), std::string::npos) << pp.options_json;
  EXPECT_NE(pp.options_json.find("\"build_number\":\"4123\""), std::string::npos) << pp.options_json;
  EXPECT_EQ(parsed.runs[1].path, "tg");
  EXPECT_DOUBLE_EQ(parsed.runs[1].tokens_per_s, 169.6);
  EXPECT_NE(parsed.runs[2].options_json.find("\"n_depth\":\"4096\""), std::string::npos) << parsed.runs[2].options_json;
  // The table names the settings that differ from the defaults, and they key the series.
  EXPECT_EQ(pp.settings, "n_gpu_layers=99 flash_attn=1");
  EXPECT_EQ(parsed.runs[2].settings, "n_gpu_layers=99 flash_attn=1 n_depth=4096");
  // The same table read by its content alone, without the .md name.
  EXPECT_EQ(parse_import(data("llama_bench.md"), "auto", "", file_time).format, "llama-bench-md");
}

TEST(LlamaBenchImport, BadMarkdownNamesTheLineAndCell) {
  auto error_of_md = [&](const std::string& text, std::int64_t time = 1796004600000) {
    try {
      parse_import(text, "llama-bench-md", "", time);
    } catch (const ImportError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string md = data("llama_bench.md");
  EXPECT_NE(error_of_md(md, 0).find("no test times"), std::string::npos) << error_of_md(md, 0);
  std::string bad_rate = md;
  bad_rate.replace(bad_rate.find("169.60"), 6, "fast  ");
  EXPECT_EQ(error_of_md(bad_rate), "line 6, field t/s: 'fast   \u00b1 0.27' is not a rate like 123.45 \u00b1 1.23");
  std::string bad_test = md;
  bad_test.replace(bad_test.find("tg128"), 5, "gen12");
  EXPECT_EQ(error_of_md(bad_test), "line 6, field test: 'gen12' is not a test like pp512, tg128 or pp512+tg128");
  std::string no_build = md.substr(0, md.find("build:"));
  EXPECT_NE(error_of_md(no_build).find("no 'build: <commit> (<number>)' line"), std::string::npos) << error_of_md(no_build);
  std::string short_row = md;
  short_row.erase(short_row.find("|    1 |           tg128"), 7);
  EXPECT_EQ(error_of_md(short_row), "line 6: 8 cells, the header has 9");
}

TEST(LlamaBenchImport, JsonSamplesBecomeTheRunsSamples) {
  const auto parsed = parse_import(data("llama_bench.json"), "llama-bench-json", "");
  std::vector<double> samples;
  for (const auto& s : parsed.runs[0].samples)
    if (s.metric == "tokens_per_s") samples.push_back(s.value);
  EXPECT_EQ(samples, (std::vector<double>{11058.3, 11000.5, 10942.7}));
  // SQL has no samples: the average stands for them, and stddev_ts is kept beside it.
  const auto sql = parse_import(data("llama_bench.sql"), "llama-bench-sql", "");
  ASSERT_EQ(sql.runs[0].samples.size(), 2u);
  EXPECT_EQ(sql.runs[0].samples[1].metric, "stddev_tokens_per_s");
  EXPECT_DOUBLE_EQ(sql.runs[0].samples[1].value, 54.25);
}

TEST(LlamaBenchImport, BadValuesNameTheLineAndField) {
  std::string csv = data("llama_bench.csv");
  csv.replace(csv.find("\"11000.5\""), 9, "\"fast\"");
  EXPECT_EQ(error_of(csv, "llama-bench-csv"), "line 2, field avg_ts: 'fast' is not a number");

  std::string jsonl = data("llama_bench.jsonl");
  jsonl.replace(jsonl.rfind("\"n_gen\": 128"), 12, "\"n_gen\": -1");
  EXPECT_EQ(error_of(jsonl, "llama-bench-jsonl"), "line 2, field n_gen: must not be negative");

  std::string json = data("llama_bench.json");
  json.replace(json.rfind("2026-11-30T02:10:30Z"), 20, "yesterday");
  const std::string e = error_of(json, "llama-bench-json");
  EXPECT_NE(e.find(", field test_time: 'yesterday' is not a time"), std::string::npos) << e;
  EXPECT_EQ(e.rfind("line 47,", 0), 0u) << e;  // the line the second object starts on

  std::string sql = data("llama_bench.sql");
  sql.replace(sql.find("'llama 8B"), 1, "");
  EXPECT_NE(error_of(sql, "llama-bench-sql").find("line 37"), std::string::npos) << error_of(sql, "llama-bench-sql");
}

TEST(LlamaBenchImport, MissingRequiredFieldIsNamed) {
  const std::string jsonl = "{\"build_commit\": \"abc\", \"model_type\": \"m\", \"n_prompt\": 1, \"n_gen\": 0}\n";
  EXPECT_EQ(error_of(jsonl, "llama-bench-jsonl"), "line 1, field test_time: missing");
}

TEST(TestBackendOpsImport, MulMatRowsBecomeTokensPerSecondOfOneGemm) {
  const auto parsed = parse_import(data("test_backend_ops_mulmat_h200.sql"), "auto", "mulmat.sql");
  EXPECT_EQ(parsed.format, "test-backend-ops-sql");
  ASSERT_EQ(parsed.runs.size(), 4u);
  const ExternalRun& q4 = parsed.runs[2];
  EXPECT_EQ(q4.tool, "test-backend-ops");
  EXPECT_EQ(q4.build_commit, "unknown");
  EXPECT_EQ(q4.backend, "CUDA0");
  EXPECT_EQ(q4.gpu_name, "NVIDIA H200");  // from the tool's "Device 0:" line
  EXPECT_EQ(q4.profile, "mul_mat-m4096-k14336");
  EXPECT_EQ(q4.path, "q4_0");
  EXPECT_EQ(q4.weight_type, "q4_0");
  EXPECT_EQ(q4.tokens, 512);
  EXPECT_NEAR(q4.tokens_per_s, 512 / 324.788961e-6, 1e-6);
  EXPECT_NEAR(*q4.gemm_ms, 0.324788961, 1e-12);
  EXPECT_EQ(q4.started_ms, 1796001783000);  // 2026-11-30T01:23:03Z
}

TEST(TestBackendOpsImport, OtherOpsAndUnsupportedRowsAreSkipped) {
  std::string sql = data("test_backend_ops_mulmat_h200.sql");
  const auto first = sql.find("'MUL_MAT'");
  sql.replace(first, 9, "'ADD'");
  sql.replace(sql.find("'perf', '1'", sql.find("'MUL_MAT'")), 11, "'perf', '0'");
  const auto parsed = parse_import(sql, "test-backend-ops-sql", "");
  EXPECT_EQ(parsed.runs.size(), 2u);
  EXPECT_EQ(parsed.skipped, 2u);
}

TEST(TestBackendOpsImport, ABadThirdRowNamesItsLineAndField) {
  EXPECT_EQ(error_of(data("test_backend_ops_bad_third_row.sql"), "auto"),
            "line 24, field time_us: 'fast' is not a number");
}

TEST(Import, UnknownFormatIsRefused) {
  EXPECT_THROW(parse_import("", "llama-bench-xml", ""), std::invalid_argument);
}

LlamaBenchExportRun export_run(const std::string& build, const std::string& sha256, const std::string& commit,
                               const std::string& path, const std::string& weight_type, double tokens_per_s) {
  LlamaBenchExportRun run;
  run.build_name = build;
  run.build_sha256 = sha256;
  run.commit = commit;
  run.backend = "CUDA";
  run.gpu_name = "NVIDIA H200";
  run.profile = "llama-7b-q4_K_M";
  run.path = path;
  run.weight_type = weight_type;
  run.tokens = 512;
  run.tokens_per_s = tokens_per_s;
  run.started_ms = 1796004600000;
  return run;
}

const std::string kSha64 = "64aa000000000000000000000000000000000000000000000000000000000001";
const std::string kSha128 = "128b000000000000000000000000000000000000000000000000000000000002";

TEST(LlamaBenchExport, TodaysTableWithEveryColumnTheScriptKeysOn) {
  const std::string sql = write_llama_bench_sql({export_run("mmq-tile64", kSha64, "", "mmq", "q4_K", 412.5)});
  // The CREATE TABLE names today's table and lists llama_bench_columns() in order with their types.
  std::string expected = "CREATE TABLE IF NOT EXISTS llama_bench (\n";
  const auto& columns = llama_bench_columns();
  for (std::size_t i = 0; i < columns.size(); ++i)
    expected += std::string("  ") + std::string(columns[i].name) + " " + std::string(sql_type_name(columns[i].type)) +
                (i + 1 < columns.size() ? ",\n" : "\n");
  expected += ");\n";
  EXPECT_EQ(sql.substr(0, expected.size()), expected);
  // Today's printer's columns, and use_mmap beside load_mode for the script's key.
  const std::vector<std::string_view> printer = {
      "build_commit", "build_number", "cpu_info", "gpu_info", "backends", "model_filename", "model_type",
      "model_size", "model_n_params", "n_batch", "n_ubatch", "n_threads", "cpu_mask", "cpu_strict", "poll",
      "type_k", "type_v", "n_gpu_layers", "n_cpu_moe", "split_mode", "main_gpu", "no_kv_offload", "flash_attn",
      "devices", "tensor_split", "tensor_buft_overrides", "load_mode", "use_mmap", "embeddings", "no_op_offload",
      "no_host", "fit_target", "fit_min_ctx", "n_prompt", "n_gen", "n_depth", "test_time", "avg_ns",
      "stddev_ns", "avg_ts", "stddev_ts"};
  ASSERT_EQ(columns.size(), printer.size());
  for (std::size_t i = 0; i < columns.size(); ++i) EXPECT_EQ(columns[i].name, printer[i]);

  const auto rows = read_sql_inserts(sql);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].table, "llama_bench");
  EXPECT_EQ(rows[0].fields.size(), columns.size());
  // Every property the script joins on, and every field it requires, is a column of the row.
  for (const auto& key : compare_llama_bench_key_properties())
    EXPECT_TRUE(rows[0].fields.count(std::string(key))) << key;
  for (const auto& field : compare_llama_bench_required_fields())
    EXPECT_TRUE(rows[0].fields.count(std::string(field))) << field;
  // Each value has its column's type: quoted text, bare numbers.
  for (const auto& column : columns) {
    SCOPED_TRACE(std::string(column.name));
    if (column.type == SqlType::Integer) EXPECT_NO_THROW(rows[0].integer(std::string(column.name)));
    if (column.type == SqlType::Real) EXPECT_NO_THROW(rows[0].real(std::string(column.name)));
  }
  EXPECT_EQ(rows[0].integer("avg_ns"), 1241212121);  // 512 tokens at 412.5 tok/s
  EXPECT_EQ(rows[0].text("model_type"), "llama-7b-q4_K_M q4_K mmq");
  EXPECT_EQ(rows[0].text("build_commit"), "64aa0000");  // no commit: the content hash's prefix
}

// The script's view of a table: one averaged row per build_commit (cut to the shortest) and key.
std::map<std::string, std::vector<double>> script_groups(const std::string& sql) {
  const auto rows = read_sql_inserts(sql);
  std::size_t shortest = SIZE_MAX;
  for (const auto& row : rows) shortest = std::min(shortest, row.text("build_commit").size());
  std::map<std::string, std::vector<double>> groups;
  for (const auto& row : rows) {
    std::string key = row.text("build_commit").substr(0, shortest);
    for (const auto& property : compare_llama_bench_key_properties())
      key += "|" + row.text(std::string(property));
    groups[key].push_back(row.real("avg_ts"));
  }
  return groups;
}

TEST(LlamaBenchExport, TwoBuildsAndTwoPathsStayFourKeys) {
  // Two builds of one commit (other tile flags) and each with an MMQ and an f16 run: four series
  // the script must keep apart, where the build names once were cut to "mmq-tile" and paths pooled.
  const std::string commit = "9f797bab0c5934eca3d8d4c374979fc3416fb86e";
  const std::vector<LlamaBenchExportRun> runs = {
      export_run("mmq-tile64", kSha64, commit, "mmq", "q4_K", 410.0),
      export_run("mmq-tile64", kSha64, commit, "f16", "q4_K", 300.0),
      export_run("mmq-tile128", kSha128, commit, "mmq", "q4_K", 420.0),
      export_run("mmq-tile128", kSha128, commit, "f16", "q4_K", 301.0)};
  const auto groups = script_groups(write_llama_bench_sql(runs));
  EXPECT_EQ(groups.size(), 4u);
  for (const auto& [key, values] : groups) EXPECT_EQ(values.size(), 1u) << key;

  const auto commits = llama_bench_build_commits(runs);
  ASSERT_EQ(commits.size(), 2u);
  EXPECT_NE(commits.at(kSha64), commits.at(kSha128));
  EXPECT_EQ(commits.at(kSha64).size(), commits.at(kSha128).size());
  // One commit for two builds would be one build to the script: each takes its content hash.
  EXPECT_EQ(commits.at(kSha64), "64aa0000");
  EXPECT_EQ(commits.at(kSha128), "128b0000");
}

TEST(LlamaBenchExport, WeightTypesAreKeysAndARealCommitIsWritten) {
  const std::vector<LlamaBenchExportRun> runs = {
      export_run("base", kSha64, "5A7C2F1E99", "mmq", "q4_K", 410.0),
      export_run("base", kSha64, "5A7C2F1E99", "mmq", "q6_K", 390.0),
      export_run("next", kSha128, "0b3d966f1855a273784983bae178fd22e4ead562", "mmq", "q4_K", 415.0),
      export_run("next", kSha128, "0b3d966f1855a273784983bae178fd22e4ead562", "mmq", "q6_K", 380.0)};
  EXPECT_EQ(script_groups(write_llama_bench_sql(runs)).size(), 4u);
  const auto commits = llama_bench_build_commits(runs);
  EXPECT_EQ(commits.at(kSha64), "5a7c2f1e");   // each build's own commit, lower case, cut to 8
  EXPECT_EQ(commits.at(kSha128), "0b3d966f");
}

TEST(LlamaBenchExport, CommitsSharingTheirFirstDigitsAreCutLonger) {
  const std::vector<LlamaBenchExportRun> runs = {
      export_run("a", kSha64, "abcdef1234", "mmq", "q4_K", 410.0),
      export_run("b", kSha128, "abcdef1299", "mmq", "q4_K", 411.0),
      export_run("c", "", "not-a-commit", "mmq", "q4_K", 412.0)};
  const auto commits = llama_bench_build_commits(runs);
  ASSERT_EQ(commits.size(), 3u);
  EXPECT_EQ(commits.at(kSha64), "abcdef123");
  EXPECT_EQ(commits.at(kSha128), "abcdef129");
  // No commit and no content hash: a stable hash of its name, at the same length.
  const std::string c = commits.at("name:c");
  EXPECT_EQ(c.size(), 9u);
  EXPECT_EQ(c, llama_bench_build_commits(runs).at("name:c"));
  EXPECT_EQ(c.find_first_not_of("0123456789abcdef"), std::string::npos) << c;
}

TEST(LlamaBenchExport, RoundTripKeepsTheValues) {
  LlamaBenchExportRun run = export_run("it's-a-build", kSha64, "", "mmq", "q4_K", 1234.5);
  run.tokens = 256;
  run.tokens_per_s_samples = {1230.0, 1239.0};
  const auto back = parse_import(write_llama_bench_sql({run, run}), "auto", "export.sql");
  EXPECT_EQ(back.format, "llama-bench-sql");
  ASSERT_EQ(back.runs.size(), 2u);
  const ExternalRun& r = back.runs[0];
  EXPECT_EQ(r.build_commit, "64aa0000");
  EXPECT_EQ(r.backend, run.backend);
  EXPECT_EQ(r.gpu_name, run.gpu_name);
  EXPECT_EQ(r.profile, "llama-7b-q4_K_M q4_K mmq");
  EXPECT_EQ(r.path, "pp");
  EXPECT_EQ(r.tokens, run.tokens);
  EXPECT_DOUBLE_EQ(r.tokens_per_s, run.tokens_per_s);
  EXPECT_EQ(r.started_ms, run.started_ms);
  ASSERT_EQ(r.samples.size(), 2u);
  EXPECT_NEAR(r.samples[1].value, 6.363961, 1e-6);  // the samples' sd as stddev_ts
}

using Outcome = BackendOpsCheck::Outcome;

std::string checks_error(const std::string& text, const std::string& file) {
  try {
    read_test_backend_ops_checks(text, file);
  } catch (const BackendOpsFileError& e) {
    return e.what();
  }
  return "no error";
}

TEST(BackendOpsChecks, ConsoleCasesWithTheirErrorAndBackend) {
  const auto read = read_test_backend_ops_checks(data("test_backend_ops_test_console.txt"), "test.txt");
  EXPECT_EQ(read.format, "console");
  ASSERT_EQ(read.checks.size(), 6u);
  const BackendOpsCheck& ok = read.checks[0];
  EXPECT_EQ(ok.op, "MUL_MAT");
  EXPECT_EQ(ok.params, "type_a=q4_0,type_b=f32,m=16,n=1,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1");
  EXPECT_EQ(ok.types, (std::map<std::string, std::string>{{"type_a", "q4_0"}, {"type_b", "f32"}}));
  EXPECT_EQ(ok.backend, "CUDA0");
  EXPECT_EQ(ok.outcome, Outcome::Passed);
  EXPECT_FALSE(ok.nmse.has_value());
  EXPECT_EQ(ok.line, 9u);
  // A failure whose error the tool printed before the case's name.
  const BackendOpsCheck& bad = read.checks[2];
  EXPECT_EQ(bad.types.at("type_a"), "q6_K");
  EXPECT_EQ(bad.outcome, Outcome::Failed);
  ASSERT_TRUE(bad.nmse.has_value());
  EXPECT_DOUBLE_EQ(*bad.nmse, 0.001953125);
  EXPECT_DOUBLE_EQ(bad.error_bound.value_or(0), 0.0005);
  EXPECT_EQ(bad.line, 11u);
  EXPECT_EQ(read.checks[3].outcome, Outcome::NotSupported);
  EXPECT_EQ(read.checks[3].failure, "not supported [CUDA0]");
  const BackendOpsCheck& nan = read.checks[4];
  EXPECT_EQ(nan.outcome, Outcome::Failed);
  EXPECT_FALSE(nan.nmse.has_value());
  EXPECT_EQ(nan.failure, "[MUL_MAT] NaN at index 7 (CUDA0=nan CPU=0.312500)");
  EXPECT_EQ(read.checks[5].op, "ADD");
  EXPECT_EQ(read.checks[5].types.at("type"), "f16");
  EXPECT_EQ(read.skipped, 0u);
}

TEST(BackendOpsChecks, OlderConsoleNamesTheCaseFirstAndSaysNmse) {
  const auto read = read_test_backend_ops_checks(data("test_backend_ops_test_console_nmse.txt"), "old.txt");
  ASSERT_EQ(read.checks.size(), 2u);
  EXPECT_EQ(read.checks[0].backend, "Vulkan0");
  EXPECT_EQ(read.checks[0].outcome, Outcome::Failed);
  EXPECT_DOUBLE_EQ(read.checks[0].nmse.value_or(0), 0.000612345);
  EXPECT_DOUBLE_EQ(read.checks[0].error_bound.value_or(0), 0.0005);
  EXPECT_EQ(read.checks[1].outcome, Outcome::Passed);
  EXPECT_EQ(read.checks[1].types.at("type_b"), "f16");
  EXPECT_EQ(read.skipped, 1u);  // the perf line
}

TEST(BackendOpsChecks, SqlRowsOfTestModeOnly) {
  const auto read = read_test_backend_ops_checks(data("test_backend_ops_test.sql"), "test.sql");
  EXPECT_EQ(read.format, "sql");
  ASSERT_EQ(read.checks.size(), 4u);
  EXPECT_EQ(read.skipped, 1u);  // the perf row
  EXPECT_EQ(read.checks[0].outcome, Outcome::Passed);
  EXPECT_EQ(read.checks[0].build_commit, "b7e1a3c");
  EXPECT_EQ(read.checks[0].test_time_ms, std::optional<std::int64_t>(1796007601000));
  EXPECT_EQ(read.checks[0].line, 22u);
  EXPECT_EQ(read.checks[1].outcome, Outcome::Failed);
  EXPECT_EQ(read.checks[1].failure, "test failed");
  EXPECT_FALSE(read.checks[1].nmse.has_value());  // the sql printer has no NMSE column
  EXPECT_EQ(read.checks[2].outcome, Outcome::NotSupported);
  EXPECT_EQ(read.checks[3].types.at("type_a"), "q8_0");
  EXPECT_EQ(read.checks[3].failure, "compare failed");
}

TEST(BackendOpsChecks, CsvRowsPassWithoutAnError) {
  const auto read = read_test_backend_ops_checks(data("test_backend_ops_test.csv"), "test.csv");
  EXPECT_EQ(read.format, "csv");
  ASSERT_EQ(read.checks.size(), 3u);
  EXPECT_EQ(read.skipped, 1u);  // the support row
  EXPECT_EQ(read.checks[0].outcome, Outcome::Passed);
  EXPECT_EQ(read.checks[0].line, 2u);
  EXPECT_EQ(read.checks[1].outcome, Outcome::Failed);
  EXPECT_EQ(read.checks[1].failure, "test failed");
  EXPECT_EQ(read.checks[2].outcome, Outcome::NotSupported);
}

TEST(BackendOpsChecks, BadInputNamesFileLineAndField) {
  std::string console = data("test_backend_ops_test_console.txt");
  console.replace(console.find("0.001953125"), 11, "0.00x953125");
  EXPECT_EQ(checks_error(console, "run.txt"), "run.txt: line 11, field nmse: '0.00x953125' is not a number");

  std::string cut = data("test_backend_ops_test_console.txt");
  const auto second = cut.find("  MUL_MAT(type_a=q4_K");
  cut.replace(cut.find("\x1b[1;32mOK", second), 13, "");
  EXPECT_EQ(checks_error(cut, "cut.txt").rfind("cut.txt: line 10, field status: ", 0), 0u) << checks_error(cut, "cut.txt");

  std::string orphan = data("test_backend_ops_test_console.txt");
  orphan.erase(orphan.find("Backend 1/2: CUDA0"), 19);
  EXPECT_EQ(checks_error(orphan, "o.txt"), "o.txt: line 8, field backend: a case before any 'Backend i/n: NAME' line");

  std::string sql = data("test_backend_ops_test.sql");
  sql.replace(sql.find("'test', '1', '0', 'test failed'"), 31, "'test', '1', 'maybe', 'test failed'");
  EXPECT_EQ(checks_error(sql, "t.sql"), "t.sql: line 23, field passed: 'maybe' is not 0 or 1");

  std::string csv = data("test_backend_ops_test.csv");
  csv = "Testing 1 devices\n" + csv;
  csv.replace(csv.find("\"CUDA0\",\"MUL_MAT\""), 17, "\"CUDA0\",\"\"");
  EXPECT_EQ(checks_error(csv, "t.csv"), "t.csv: line 3, field op_name: is empty");
}

}  // namespace
}  // namespace qgate::interop
