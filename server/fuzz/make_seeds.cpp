// Writes the fuzzers' seed corpora with the real writers: GGUF headers from write_gguf_header and
// worker streams framed as qgate-worker frames them. Seeds that start valid let the fuzzers spend
// their time past the magic and the first length, in the code that handles real files and pipes.
// Usage: qgate_fuzz_seeds <corpus dir>   (writes <dir>/gguf/* and <dir>/worker_stream/*)
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "qgate/profiles/gguf.h"
#include "qgate/v1/worker.pb.h"

namespace {

namespace fs = std::filesystem;
using namespace qgate::profiles;

// ggml type ids (GGUF numbering): the reader and the profile builder treat them differently.
constexpr uint32_t kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ8_0 = 8, kQ4K = 12, kQ6K = 14;

GgufTensorInfo tensor(std::string name, uint32_t type, std::vector<uint64_t> ne) {
  GgufTensorInfo t;
  t.name = std::move(name);
  t.type = type;
  t.n_dims = uint32_t(ne.size());
  for (size_t i = 0; i < ne.size(); ++i) t.ne[i] = ne[i];
  return t;
}

bool write(const fs::path& path, const std::string& bytes) {
  if (bytes.size() > 4096) {
    std::fprintf(stderr, "seed %s is %zu bytes; seeds stay under 4 KiB\n", path.c_str(), bytes.size());
    return false;
  }
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  return bool(out);
}

std::string gguf(const std::vector<GgufTensorInfo>& t, const std::vector<GgufKeyValue>& m, uint32_t version = 3) {
  GgufWriteOptions o;
  o.version = version;
  const auto bytes = write_gguf_header(t, m, o);
  return std::string(bytes.begin(), bytes.end());
}

std::string frame(const qgate::v1::WorkerRecord& r) {
  std::string out;
  google::protobuf::io::StringOutputStream raw(&out);
  google::protobuf::io::CodedOutputStream coded(&raw);
  coded.WriteVarint32(uint32_t(r.ByteSizeLong()));
  r.SerializeToCodedStream(&coded);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
    return 2;
  }
  const fs::path root = argv[1];
  fs::create_directories(root / "gguf");
  fs::create_directories(root / "worker_stream");
  bool ok = true;

  // A one-layer llama-shaped model: GEMMs of several types, a skipped embedding, f32 norms and an
  // f16 matrix, metadata of every scalar kind plus nested arrays.
  std::vector<GgufTensorInfo> tensors = {
      tensor("token_embd.weight", kQ4K, {256, 512}),  tensor("blk.0.attn_norm.weight", kF32, {256}),
      tensor("blk.0.attn_q.weight", kQ4K, {256, 256}), tensor("blk.0.attn_k.weight", kF16, {256, 256}),
      tensor("blk.0.attn_v.weight", kQ6K, {256, 256}), tensor("blk.0.ffn_up.weight", kQ4_0, {256, 512}),
      tensor("blk.0.ffn_down.weight", kQ8_0, {512, 256}), tensor("output.weight", kQ6K, {256, 512})};
  std::vector<GgufKeyValue> meta = {
      {"general.architecture", GgufValue::of_string("llama")},
      {"general.name", GgufValue::of_string("seed-1l")},
      {"general.alignment", GgufValue::of_uint32(32)},
      {"llama.block_count", GgufValue::of_uint32(1)},
      {"t.u8", GgufValue::of_uint8(7)},
      {"t.i8", GgufValue::of_int8(-7)},
      {"t.u16", GgufValue::of_uint16(700)},
      {"t.i16", GgufValue::of_int16(-700)},
      {"t.i32", GgufValue::of_int32(-70000)},
      {"t.f32", GgufValue::of_float32(0.25f)},
      {"t.bool", GgufValue::of_bool(true)},
      {"t.u64", GgufValue::of_uint64(1ull << 40)},
      {"t.i64", GgufValue::of_int64(-(1ll << 40))},
      {"t.f64", GgufValue::of_float64(1.5)},
      {"tokenizer.ggml.tokens",
       GgufValue::of_array(GgufValueType::string, {GgufValue::of_string("<s>"), GgufValue::of_string("a")})},
      {"t.nested", GgufValue::of_array(GgufValueType::array,
                                       {GgufValue::of_array(GgufValueType::int16, {GgufValue::of_int16(1)}),
                                        GgufValue::of_array(GgufValueType::uint8, {})})}};
  ok &= write(root / "gguf" / "llama-1l-v3.gguf", gguf(tensors, meta));
  ok &= write(root / "gguf" / "llama-1l-v2.gguf", gguf(tensors, meta, 2));
  ok &= write(root / "gguf" / "empty-v3.gguf", gguf({}, {}));
  ok &= write(root / "gguf" / "one-tensor.gguf", gguf({tensor("blk.0.attn_q.weight", kQ4_0, {64, 32})}, {}));

  // Worker streams: a parity run (context, cases, summary), a serve session (prepared, profile
  // runs), an error record, and an empty record between others.
  qgate::v1::WorkerRecord ctx;
  ctx.mutable_context()->set_host("seed-host");
  ctx.mutable_context()->set_backend(qgate::v1::BACKEND_CPU);
  ctx.mutable_context()->set_cpu_threads(2);
  (*ctx.mutable_context()->mutable_options())["threads"] = "2";
  ctx.mutable_context()->mutable_build()->set_name("seed");
  qgate::v1::WorkerRecord parity;
  auto* pc = parity.mutable_parity();
  pc->set_type("q4_K");
  pc->mutable_shape()->set_nt(16);
  pc->mutable_shape()->set_od(256);
  pc->mutable_shape()->set_k(256);
  pc->set_path(qgate::v1::GEMM_PATH_MMQ);
  pc->set_outcome(qgate::v1::CASE_OUTCOME_PASSED);
  pc->set_max_abs_diff(1e-3);
  qgate::v1::WorkerRecord timing;
  auto* tm = timing.mutable_timing();
  tm->set_type("q8_0");
  tm->set_repetitions(3);
  for (double s : {10.5, 11.0, 10.75}) tm->add_samples_us(s);
  qgate::v1::WorkerRecord summary;
  summary.mutable_summary()->set_cases(1);
  summary.mutable_summary()->set_passed(1);
  qgate::v1::WorkerRecord prepared;
  prepared.mutable_prepared()->set_profile("seed-1l");
  prepared.mutable_prepared()->set_outcome(qgate::v1::CASE_OUTCOME_PASSED);
  qgate::v1::WorkerRecord run;
  auto* pr = run.mutable_profile_run();
  pr->set_run_id(1);
  pr->set_tokens(512);
  pr->set_tokens_per_s(1234.5);
  auto* gt = pr->add_gemms();
  gt->mutable_gemm()->set_type("q4_K");
  gt->mutable_gemm()->set_od(256);
  gt->mutable_gemm()->set_k(256);
  gt->mutable_gemm()->set_count(2);
  gt->set_median_us(3.5);
  qgate::v1::WorkerRecord error;
  error.mutable_error()->set_kind(qgate::v1::WORKER_ERROR_KIND_DLOPEN_FAILED);
  error.mutable_error()->set_message("dlopen failed");

  // fuzz_worker_stream reads a chunking prefix first: byte 0 = (count of chunk sizes - 1), with bit 3
  // clear for the default record limit, then the sizes (each + 1). Three sizes: 17, 4 and 65 bytes.
  const std::string chunking("\x02\x10\x03\x40", 4);
  ok &= write(root / "worker_stream" / "parity.bin", chunking + frame(ctx) + frame(parity) + frame(timing) + frame(summary));
  ok &= write(root / "worker_stream" / "serve.bin", chunking + frame(ctx) + frame(prepared) + frame(run) + frame(run));
  ok &= write(root / "worker_stream" / "error.bin", chunking + frame(error));
  ok &= write(root / "worker_stream" / "empty-record.bin", chunking + frame(summary) + std::string(1, '\0') + frame(error));
  return ok ? 0 : 1;
}
