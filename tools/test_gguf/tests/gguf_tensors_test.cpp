// GgufTensorSource on GGUF files with real quantized data: tensors listed as written, globs select the
// right ones, bytes read back equal the bytes written (default and non-default alignment), and
// truncated files, typos in globs, bad row lengths and types qgate does not gate give clear answers.
#include "qgate/profiles/gguf_tensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "qgate/testing/gguf_test_model.h"
#include "qgate/quant/quantize.h"

using namespace qgate::profiles;
using namespace qgate::profiles::testing;
using qgate::quant::WeightType;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

class TempPath {
 public:
  TempPath() {
    static int counter = 0;
    path_ = (std::filesystem::temp_directory_path() /
             ("qgate_gguf_tensors_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + ".gguf"))
                .string();
  }
  explicit TempPath(std::span<const uint8_t> bytes) : TempPath() {
    std::string error;
    EXPECT_TRUE(write_file(path_, bytes, &error)) << error;
  }
  ~TempPath() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

GgufTensorSource open_or_die(const std::string& path) {
  std::string error;
  auto s = GgufTensorSource::open(path, &error);
  if (!s) throw std::runtime_error("open failed: " + error);
  return std::move(*s);
}

std::vector<std::string> names(const GgufSelection& s) {
  std::vector<std::string> out;
  for (const GgufTensorEntry* t : s.gemms) out.push_back(t->name);
  return out;
}

std::map<std::string, std::string> skipped(const GgufSelection& s) {
  std::map<std::string, std::string> out;
  for (const SkippedTensor& t : s.skipped) out[t.name] = t.reason;
  return out;
}

// Every listed tensor has the name, type, dims and place it was written with, and reads back byte
// for byte. Returns the number of tensors read.
size_t expect_round_trip(const GgufTestFile& f, const GgufTensorSource& source) {
  EXPECT_EQ(source.file_size(), f.bytes.size());
  EXPECT_EQ(source.header().alignment, f.alignment);
  EXPECT_EQ(source.header().data_offset, f.data_offset);
  EXPECT_EQ(source.header().data_offset % f.alignment, 0u);
  EXPECT_EQ(source.tensors().size(), f.tensors.size());
  size_t read = 0;
  for (size_t i = 0; i < f.tensors.size() && i < source.tensors().size(); ++i) {
    const GgufTensorEntry& t = source.tensors()[i];
    const GgufTensorInfo& w = f.tensors[i];
    EXPECT_EQ(t.name, w.name);
    EXPECT_EQ(t.type, w.type) << t.name;
    EXPECT_EQ(t.n_dims, w.n_dims) << t.name;
    EXPECT_EQ(t.ne, w.ne) << t.name;
    EXPECT_EQ(t.data_offset, f.offset_of(w.name)) << t.name;
    EXPECT_EQ(t.data_offset % f.alignment, 0u) << t.name;
    EXPECT_TRUE(t.size_known) << t.name;
    EXPECT_EQ(t.bytes, f.data[i].size()) << t.name;
    std::string error;
    const auto bytes = source.read(t, &error);
    EXPECT_TRUE(bytes) << error;
    if (bytes) {
      EXPECT_TRUE(*bytes == f.data[i]) << t.name << ": the bytes read differ from the bytes written";
      ++read;
    }
  }
  return read;
}

}  // namespace

TEST(GgufGlob, MatchesLikeAShellGlobOverWholeNames) {
  EXPECT_TRUE(gguf_glob_match("blk.0.*", "blk.0.attn_q.weight"));
  EXPECT_FALSE(gguf_glob_match("blk.0.*", "blk.10.attn_q.weight"));
  EXPECT_FALSE(gguf_glob_match("blk.0.*", "blk.0"));
  EXPECT_TRUE(gguf_glob_match("blk.0.*", "blk.0."));
  EXPECT_TRUE(gguf_glob_match("*", ""));
  EXPECT_TRUE(gguf_glob_match("*", "output.weight"));
  EXPECT_TRUE(gguf_glob_match("blk.?.attn_q.weight", "blk.7.attn_q.weight"));
  EXPECT_FALSE(gguf_glob_match("blk.?.attn_q.weight", "blk.17.attn_q.weight"));
  EXPECT_TRUE(gguf_glob_match("*.ffn_*.weight", "blk.3.ffn_down.weight"));
  EXPECT_FALSE(gguf_glob_match("*.ffn_*.weight", "blk.3.ffn_down.bias"));
  EXPECT_TRUE(gguf_glob_match("a*b*c", "aXXbYYbc"));
  EXPECT_FALSE(gguf_glob_match("a*b*c", "aXXbYYbcd"));
  EXPECT_TRUE(gguf_glob_match("output.weight", "output.weight"));
  EXPECT_FALSE(gguf_glob_match("output.weight", "output.weights"));
  EXPECT_FALSE(gguf_glob_match("Output.weight", "output.weight"));
  EXPECT_FALSE(gguf_glob_match("", "x"));
  EXPECT_TRUE(gguf_glob_match("", ""));
}

TEST(GgufGlob, SplitsCommaSeparatedLists) {
  EXPECT_EQ(split_tensor_globs("blk.0.*"), (std::vector<std::string>{"blk.0.*"}));
  EXPECT_EQ(split_tensor_globs(" blk.0.* ,output.weight,,\tblk.1.attn_q.weight "),
            (std::vector<std::string>{"blk.0.*", "output.weight", "blk.1.attn_q.weight"}));
  EXPECT_TRUE(split_tensor_globs("").empty());
  EXPECT_TRUE(split_tensor_globs(" , ,").empty());
}

TEST(GgufTensorSource, RoundTripsALlamaShapedModel) {
  const GgufTestFile f = make_test_gguf(llama_test_tensors());
  TempPath file(f.bytes);
  const GgufTensorSource source = open_or_die(file.path());
  EXPECT_EQ(source.path(), file.path());
  EXPECT_EQ(source.header().version, 3u);
  EXPECT_EQ(source.header().alignment, 32u);
  EXPECT_EQ(expect_round_trip(f, source), llama_test_tensors().size());

  // The GEMM view of each gated tensor: od = ne[1], k = ne[0], od rows of row_bytes(type, k).
  std::map<std::string, std::tuple<WeightType, int64_t, int64_t>> expected = {
      {"blk.0.attn_q.weight", {WeightType::q4_K, 256, 256}},   {"blk.0.attn_k.weight", {WeightType::q8_0, 64, 256}},
      {"blk.0.attn_v.weight", {WeightType::q5_1, 64, 256}},    {"blk.0.attn_output.weight", {WeightType::q4_0, 256, 256}},
      {"blk.0.ffn_gate.weight", {WeightType::q5_K, 512, 256}}, {"blk.0.ffn_up.weight", {WeightType::q5_0, 512, 256}},
      {"blk.0.ffn_down.weight", {WeightType::q6_K, 256, 512}}, {"blk.1.attn_q.weight", {WeightType::q4_1, 256, 256}},
      {"blk.1.attn_output.weight", {WeightType::q4_K, 256, 256}},
      {"blk.1.ffn_down.weight", {WeightType::q6_K, 256, 512}}, {"output.weight", {WeightType::q6_K, 64, 256}},
  };
  std::set<WeightType> types;
  for (const GgufTensorEntry& t : source.tensors()) {
    const auto it = expected.find(t.name);
    if (it == expected.end()) {
      EXPECT_FALSE(t.gated()) << t.name;
      EXPECT_FALSE(t.skip_reason.empty()) << t.name;
      continue;
    }
    ASSERT_TRUE(t.gated()) << t.name << ": " << t.skip_reason;
    EXPECT_TRUE(t.skip_reason.empty()) << t.name;
    const auto [type, od, k] = it->second;
    EXPECT_EQ(*t.weight_type, type) << t.name;
    EXPECT_EQ(t.od, od) << t.name;
    EXPECT_EQ(t.k, k) << t.name;
    EXPECT_EQ(t.bytes, qgate::quant::row_bytes(type, k) * static_cast<uint64_t>(od)) << t.name;
    types.insert(type);
  }
  EXPECT_EQ(types.size(), 8u) << "the test model should hold every gated type";

  // The data is real quantized weights, not filler: every row of every gated tensor decodes to finite
  // values with a non-zero spread.
  for (const GgufTensorEntry& t : source.tensors()) {
    if (!t.gated()) continue;
    const auto bytes = source.read(t);
    ASSERT_TRUE(bytes);
    const size_t row = qgate::quant::row_bytes(*t.weight_type, t.k);
    std::vector<float> y(static_cast<size_t>(t.k));
    for (int64_t r = 0; r < t.od; ++r) {
      qgate::quant::dequantize_row(*t.weight_type, bytes->data() + static_cast<size_t>(r) * row, y.data(), t.k);
      double sum_sq = 0;
      for (float v : y) {
        ASSERT_TRUE(std::isfinite(v)) << t.name << " row " << r;
        sum_sq += double(v) * v;
      }
      ASSERT_GT(sum_sq, 0.0) << t.name << " row " << r << " decodes to zeros";
    }
  }

  // By name as well.
  std::string error;
  const auto q = source.read("blk.0.attn_q.weight", &error);
  ASSERT_TRUE(q) << error;
  EXPECT_TRUE(*q == f.data_of("blk.0.attn_q.weight"));
  EXPECT_FALSE(source.read("blk.0.attn_qq.weight", &error));
  EXPECT_TRUE(contains(error, "no tensor named 'blk.0.attn_qq.weight'")) << error;
  EXPECT_EQ(source.find("nope"), nullptr);
  ASSERT_NE(source.find("output.weight"), nullptr);
}

TEST(GgufTensorSource, SameSeedSameBytesOtherSeedOtherWeights) {
  const auto a = make_test_gguf(llama_test_tensors());
  const auto b = make_test_gguf(llama_test_tensors());
  GgufTestOptions o;
  o.seed = 2;
  const auto c = make_test_gguf(llama_test_tensors(), o);
  EXPECT_TRUE(a.bytes == b.bytes);
  EXPECT_EQ(a.bytes.size(), c.bytes.size());
  EXPECT_FALSE(a.data_of("blk.0.attn_q.weight") == c.data_of("blk.0.attn_q.weight"));
}

TEST(GgufTensorSource, SelectsByGlobs) {
  const GgufTestFile f = make_test_gguf(llama_test_tensors());
  TempPath file(f.bytes);
  const GgufTensorSource source = open_or_die(file.path());
  std::string error;

  auto s = source.select("blk.0.*", &error);
  ASSERT_TRUE(s) << error;
  EXPECT_EQ(names(*s), (std::vector<std::string>{"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight",
                                                 "blk.0.attn_output.weight", "blk.0.ffn_gate.weight",
                                                 "blk.0.ffn_up.weight", "blk.0.ffn_down.weight"}));
  auto sk = skipped(*s);
  ASSERT_EQ(sk.size(), 2u);
  EXPECT_TRUE(contains(sk.at("blk.0.attn_norm.weight"), "1-D")) << sk.at("blk.0.attn_norm.weight");
  EXPECT_TRUE(contains(sk.at("blk.0.ffn_norm.weight"), "1-D"));
  for (const GgufTensorEntry* t : s->gemms) {
    const auto bytes = source.read(*t, &error);
    ASSERT_TRUE(bytes) << error;
    EXPECT_TRUE(*bytes == f.data_of(t->name)) << t->name;
  }

  // Types qgate does not gate are skipped with the type named, not an error.
  s = source.select("blk.1.*", &error);
  ASSERT_TRUE(s) << error;
  EXPECT_EQ(names(*s), (std::vector<std::string>{"blk.1.attn_q.weight", "blk.1.attn_output.weight",
                                                 "blk.1.ffn_down.weight"}));
  sk = skipped(*s);
  ASSERT_EQ(sk.size(), 5u);
  EXPECT_TRUE(contains(sk.at("blk.1.attn_k.weight"), "type q2_K is not one of the quantized types qgate gates"))
      << sk.at("blk.1.attn_k.weight");
  EXPECT_TRUE(contains(sk.at("blk.1.attn_v.weight"), "q3_K"));
  EXPECT_TRUE(contains(sk.at("blk.1.ffn_gate_exps.weight"), "3-D")) << sk.at("blk.1.ffn_gate_exps.weight");
  EXPECT_TRUE(contains(sk.at("blk.1.ffn_norm.weight"), "1-D"));

  // Several globs, overlapping ones counted once, file order kept.
  s = source.select("output.weight, blk.?.attn_q.weight,blk.0.attn_q.*", &error);
  ASSERT_TRUE(s) << error;
  EXPECT_EQ(names(*s), (std::vector<std::string>{"blk.0.attn_q.weight", "blk.1.attn_q.weight", "output.weight"}));
  EXPECT_TRUE(s->skipped.empty());

  s = source.select("token_embd.weight", &error);
  ASSERT_TRUE(s) << error;
  EXPECT_TRUE(s->gemms.empty());
  ASSERT_EQ(s->skipped.size(), 1u);
  EXPECT_TRUE(contains(s->skipped[0].reason, "type f16")) << s->skipped[0].reason;

  s = source.select("*", &error);
  ASSERT_TRUE(s) << error;
  EXPECT_EQ(s->gemms.size() + s->skipped.size(), llama_test_tensors().size());
  EXPECT_EQ(s->gemms.size(), 11u);
}

TEST(GgufTensorSource, AGlobThatMatchesNothingIsAClearError) {
  const GgufTestFile f = make_test_gguf(llama_test_tensors());
  TempPath file(f.bytes);
  const GgufTensorSource source = open_or_die(file.path());
  std::string error;
  EXPECT_FALSE(source.select("blk.9.*", &error));
  EXPECT_TRUE(contains(error, "tensor glob 'blk.9.*' matches none of the file's 20 tensors")) << error;
  EXPECT_TRUE(contains(error, "token_embd.weight")) << error;  // shows what names look like
  EXPECT_TRUE(contains(error, file.path())) << error;

  // One good glob does not excuse a typo in another.
  EXPECT_FALSE(source.select("blk.0.*,blk.0.atn_q.weight", &error));
  EXPECT_TRUE(contains(error, "'blk.0.atn_q.weight'")) << error;
  EXPECT_FALSE(contains(error, "'blk.0.*'")) << error;

  for (const char* empty : {"", " ", ",", " , "}) {
    EXPECT_FALSE(source.select(empty, &error)) << "'" << empty << "'";
    EXPECT_TRUE(contains(error, "no tensor glob")) << error;
  }
}

TEST(GgufTensorSource, HonoursANonDefaultAlignment) {
  const GgufTestFile defaults = make_test_gguf(llama_test_tensors());
  for (uint32_t alignment : {32u, 64u, 256u, 4096u}) {
    SCOPED_TRACE("alignment " + std::to_string(alignment));
    GgufTestOptions o;
    o.alignment = alignment;
    const GgufTestFile f = make_test_gguf(llama_test_tensors(), o);
    TempPath file(f.bytes);
    const GgufTensorSource source = open_or_die(file.path());
    ASSERT_NE(source.header().find("general.alignment"), nullptr);
    EXPECT_EQ(source.header().alignment, alignment);
    EXPECT_EQ(expect_round_trip(f, source), f.tensors.size());
    // The data is the same weights as in the default file; only where it lies differs.
    for (const GgufTensorInfo& t : f.tensors) EXPECT_TRUE(f.data_of(t.name) == defaults.data_of(t.name)) << t.name;
    if (alignment == 4096) {
      // Here the data section starts past where a reader assuming 32 would look, and tensors are
      // spaced out: reading at 32-aligned places would give other bytes.
      uint64_t header_end = source.header().header_size;
      EXPECT_NE(source.header().data_offset, (header_end + 31) / 32 * 32);
      EXPECT_NE(f.offset_of("blk.0.attn_q.weight"), defaults.offset_of("blk.0.attn_q.weight"));
    }
  }
}

TEST(GgufTensorSource, Version2FilesReadToo) {
  GgufTestOptions o;
  o.version = 2;
  const GgufTestFile f = make_test_gguf(llama_test_tensors(), o);
  TempPath file(f.bytes);
  const GgufTensorSource source = open_or_die(file.path());
  EXPECT_EQ(source.header().version, 2u);
  EXPECT_EQ(expect_round_trip(f, source), f.tensors.size());
}

TEST(GgufTensorSource, TruncatedFilesNameTheTensorAndTheSizes) {
  const GgufTestFile f = make_test_gguf(llama_test_tensors());
  const uint64_t last_at = f.offset_of("output.weight");
  const uint64_t last_bytes = f.data_of("output.weight").size();
  ASSERT_EQ(last_at + last_bytes, f.bytes.size());  // q6_K 256x64 = 13440 bytes, already aligned

  // Cut inside the last tensor's data.
  {
    const std::vector<uint8_t> cut(f.bytes.begin(), f.bytes.end() - 100);
    TempPath file(cut);
    std::string error;
    EXPECT_FALSE(GgufTensorSource::open(file.path(), &error));
    EXPECT_TRUE(contains(error, file.path())) << error;
    EXPECT_TRUE(contains(error, "'output.weight'")) << error;
    EXPECT_TRUE(contains(error, "q6_K")) << error;
    EXPECT_TRUE(contains(error, std::to_string(last_bytes))) << error;
    EXPECT_TRUE(contains(error, std::to_string(cut.size()) + "-byte file")) << error;
    EXPECT_TRUE(contains(error, "100 bytes missing")) << error;
    EXPECT_TRUE(contains(error, "truncated")) << error;
  }
  // Cut where the data section starts: the header is whole, every tensor is missing; the first is named.
  {
    const std::vector<uint8_t> cut(f.bytes.begin(), f.bytes.begin() + static_cast<ptrdiff_t>(f.data_offset));
    TempPath file(cut);
    std::string error;
    EXPECT_FALSE(GgufTensorSource::open(file.path(), &error));
    EXPECT_TRUE(contains(error, "truncated file: tensor 'token_embd.weight' (f16 256x64, 32768 bytes) occupies bytes [" +
                                    std::to_string(f.data_offset) + ", " + std::to_string(f.data_offset + 32768) +
                                    ") but the file has " + std::to_string(cut.size()) + " bytes"))
        << error;
  }
  // Cut inside the header: among the metadata, and among the tensor infos.
  for (const uint64_t at : {uint64_t{200}, f.data_offset - 40}) {
    const std::vector<uint8_t> cut(f.bytes.begin(), f.bytes.begin() + static_cast<ptrdiff_t>(at));
    TempPath file(cut);
    std::string error;
    EXPECT_FALSE(GgufTensorSource::open(file.path(), &error)) << at;
    EXPECT_TRUE(contains(error, "truncated")) << error;
  }
  // Cut after open: the read, not the open, fails, and says how short the file is now.
  {
    TempPath file(f.bytes);
    const GgufTensorSource source = open_or_die(file.path());
    std::filesystem::resize_file(file.path(), last_at + 10);
    std::string error;
    EXPECT_FALSE(source.read("output.weight", &error));
    EXPECT_TRUE(contains(error, "'output.weight'")) << error;
    EXPECT_TRUE(contains(error, "now " + std::to_string(last_at + 10) + " bytes")) << error;
    EXPECT_TRUE(source.read("blk.0.attn_q.weight", &error)) << error;  // what is still there reads
  }
}

TEST(GgufTensorSource, RowLengthsOffTheBlockFailTheOpen) {
  // A q4_K tensor of row length 100 (q4_K needs multiples of 256): ggml refuses such files, so does qgate.
  std::vector<GgufTensorInfo> t(2);
  t[0].name = "blk.0.attn_q.weight";
  t[0].type = kGgmlQ8_0;
  t[0].n_dims = 2;
  t[0].ne = {64, 4, 1, 1};
  t[1].name = "blk.0.attn_k.weight";
  t[1].type = kGgmlQ4_K;
  t[1].n_dims = 2;
  t[1].ne = {100, 4, 1, 1};
  GgufWriteOptions o;
  o.include_data = true;
  const auto bytes = write_gguf_header(t, {}, o);
  TempPath file(bytes);
  std::string error;
  EXPECT_FALSE(GgufTensorSource::open(file.path(), &error));
  EXPECT_TRUE(contains(error, "'blk.0.attn_k.weight'")) << error;
  EXPECT_TRUE(contains(error, "row length 100, not a multiple of the q4_K block of 256")) << error;
}

TEST(GgufTensorSource, TypesOfUnknownSizeAreListedAsSkippedAndCannotBeRead) {
  // ggml type 16 (an IQ type): the file opens, the tensor is skipped with a reason, a read says why not.
  std::vector<GgufTestTensor> tensors = {
      {"blk.0.attn_q.weight", kGgmlQ4_0, {64, 8}},
      {"blk.0.attn_k.weight", 16, {256, 8}},
  };
  const GgufTestFile f = make_test_gguf(tensors);
  TempPath file(f.bytes);
  const GgufTensorSource source = open_or_die(file.path());
  const GgufTensorEntry* iq = source.find("blk.0.attn_k.weight");
  ASSERT_NE(iq, nullptr);
  EXPECT_FALSE(iq->size_known);
  EXPECT_FALSE(iq->gated());
  EXPECT_EQ(iq->type_name, "type 16");
  EXPECT_TRUE(contains(iq->skip_reason, "ggml type id 16 is not known")) << iq->skip_reason;
  std::string error;
  EXPECT_FALSE(source.read(*iq, &error));
  EXPECT_TRUE(contains(error, "unknown")) << error;
  const auto s = source.select("blk.0.*", &error);
  ASSERT_TRUE(s) << error;
  EXPECT_EQ(names(*s), (std::vector<std::string>{"blk.0.attn_q.weight"}));
  ASSERT_EQ(s->skipped.size(), 1u);
  EXPECT_EQ(s->skipped[0].name, "blk.0.attn_k.weight");
  const auto q = source.read(*s->gemms[0], &error);
  ASSERT_TRUE(q) << error;
  EXPECT_TRUE(*q == f.data_of("blk.0.attn_q.weight"));
}

TEST(GgufTensorSource, RefusesWhatIsNotAReadableGgufFile) {
  std::string error;
  EXPECT_FALSE(GgufTensorSource::open("/nonexistent/model.gguf", &error));
  EXPECT_TRUE(contains(error, "/nonexistent/model.gguf")) << error;

  const std::vector<uint8_t> junk(4096, 0x5a);
  TempPath file(junk);
  EXPECT_FALSE(GgufTensorSource::open(file.path(), &error));
  EXPECT_TRUE(contains(error, "magic")) << error;

  // An entry of another source is refused, not read from the wrong file.
  const GgufTestFile f = make_test_gguf(llama_test_tensors());
  TempPath a(f.bytes), b(f.bytes);
  const GgufTensorSource sa = open_or_die(a.path());
  const GgufTensorSource sb = open_or_die(b.path());
  EXPECT_FALSE(sa.read(sb.tensors()[2], &error));
  EXPECT_TRUE(contains(error, "not an entry of this source")) << error;

  // A moved-from source fails cleanly; the moved-to one works.
  GgufTensorSource moved = open_or_die(a.path());
  GgufTensorSource target = std::move(moved);
  EXPECT_TRUE(target.read("output.weight", &error)) << error;
}

TEST(GgufTensorSource, DescribesTheFileAndASelection) {
  const GgufTestFile f = make_test_gguf(llama_test_tensors());
  TempPath file(f.bytes);
  const GgufTensorSource source = open_or_die(file.path());
  const std::string all = source.describe();
  EXPECT_TRUE(contains(all, "20 tensors, alignment 32")) << all;
  EXPECT_TRUE(contains(all, "blk.0.attn_q.weight q4_K 256x256 (od=256 k=256, 36864 bytes at " +
                                std::to_string(f.offset_of("blk.0.attn_q.weight")) + ")"))
      << all;
  EXPECT_TRUE(contains(all, "token_embd.weight f16 256x64: skipped, type f16")) << all;

  const auto s = source.select("blk.1.*");
  ASSERT_TRUE(s);
  const std::string picked = source.describe(&*s);
  EXPECT_TRUE(contains(picked, "selected 3 GEMM weights, 5 skipped")) << picked;
  EXPECT_TRUE(contains(picked, "blk.1.attn_k.weight q2_K 256x64: skipped")) << picked;
  EXPECT_FALSE(contains(picked, "blk.0.")) << picked;
}

TEST(GgufWriter, RefusesTensorDataOfTheWrongCountOrLength) {
  std::vector<GgufTensorInfo> t(1);
  t[0].name = "a.weight";
  t[0].type = kGgmlQ8_0;
  t[0].n_dims = 2;
  t[0].ne = {32, 2, 1, 1};
  const std::vector<uint8_t> right(68, 1), wrong(67, 1);
  GgufWriteOptions o;
  o.include_data = true;
  o.tensor_data = {right};
  const auto bytes = write_gguf_header(t, {}, o);
  const auto h = parse_gguf_header(bytes.data(), bytes.size());
  ASSERT_TRUE(h);
  EXPECT_EQ(bytes.size(), h->data_offset + 96);  // 68 bytes padded to 32
  EXPECT_TRUE(std::equal(right.begin(), right.end(), bytes.begin() + static_cast<ptrdiff_t>(h->data_offset)));
  o.tensor_data = {wrong};
  EXPECT_THROW(write_gguf_header(t, {}, o), std::invalid_argument);
  o.tensor_data = {right, right};
  EXPECT_THROW(write_gguf_header(t, {}, o), std::invalid_argument);
}
