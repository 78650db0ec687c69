// GGUF header reader and writer: a toy model round-trips into the expected profile, and every kind of
// malformed input (bad magic, version, truncation at each byte, absurd counts and lengths, n_dims,
// overflowing arrays, random corruption) is refused with a message instead of a crash.
#include "qgate/profiles/gguf.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

using namespace qgate::profiles;
using qgate::quant::WeightType;

namespace {

constexpr uint32_t kF32 = 0, kF16 = 1, kQ4K = 12, kQ6K = 14;

GgufTensorInfo tensor(std::string name, uint32_t type, std::vector<uint64_t> ne) {
  GgufTensorInfo t;
  t.name = std::move(name);
  t.type = type;
  t.n_dims = static_cast<uint32_t>(ne.size());
  for (size_t i = 0; i < ne.size() && i < 4; ++i) t.ne[i] = ne[i];
  return t;
}

// A 2-layer llama-shaped toy: hidden 256, ffn 768, vocab 1024; q4_K with q6_K attn_v/ffn_down and
// output, f32 norms, a q4_K token_embd, and one f16 matrix (layer 1's attn_k) that must be skipped.
std::vector<GgufTensorInfo> toy_tensors() {
  std::vector<GgufTensorInfo> t;
  t.push_back(tensor("token_embd.weight", kQ4K, {256, 1024}));
  for (int l = 0; l < 2; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    t.push_back(tensor(b + "attn_norm.weight", kF32, {256}));
    t.push_back(tensor(b + "attn_q.weight", kQ4K, {256, 256}));
    t.push_back(tensor(b + "attn_k.weight", l == 1 ? kF16 : kQ4K, {256, 256}));
    t.push_back(tensor(b + "attn_v.weight", kQ6K, {256, 256}));
    t.push_back(tensor(b + "attn_output.weight", kQ4K, {256, 256}));
    t.push_back(tensor(b + "ffn_norm.weight", kF32, {256}));
    t.push_back(tensor(b + "ffn_gate.weight", kQ4K, {256, 768}));
    t.push_back(tensor(b + "ffn_up.weight", kQ4K, {256, 768}));
    t.push_back(tensor(b + "ffn_down.weight", kQ6K, {768, 256}));
  }
  t.push_back(tensor("output_norm.weight", kF32, {256}));
  t.push_back(tensor("output.weight", kQ6K, {256, 1024}));
  return t;
}

// Metadata with every value type, arrays of scalars, strings and arrays, so the reader walks them all.
std::vector<GgufKeyValue> toy_metadata() {
  std::vector<GgufKeyValue> m;
  m.push_back({"general.architecture", GgufValue::of_string("llama")});
  m.push_back({"general.name", GgufValue::of_string("toy-2l")});
  m.push_back({"llama.block_count", GgufValue::of_uint32(2)});
  m.push_back({"test.u8", GgufValue::of_uint8(200)});
  m.push_back({"test.i8", GgufValue::of_int8(-100)});
  m.push_back({"test.u16", GgufValue::of_uint16(60000)});
  m.push_back({"test.i16", GgufValue::of_int16(-30000)});
  m.push_back({"test.i32", GgufValue::of_int32(-7)});
  m.push_back({"test.f32", GgufValue::of_float32(0.5f)});
  m.push_back({"test.bool", GgufValue::of_bool(true)});
  m.push_back({"test.u64", GgufValue::of_uint64(1ull << 40)});
  m.push_back({"test.i64", GgufValue::of_int64(-(1ll << 40))});
  m.push_back({"test.f64", GgufValue::of_float64(-2.25)});
  m.push_back({"tokenizer.ggml.tokens", GgufValue::of_array(GgufValueType::string, {GgufValue::of_string("<s>"),
                                                                                  GgufValue::of_string("a"),
                                                                                  GgufValue::of_string("")})});
  m.push_back({"tokenizer.ggml.scores", GgufValue::of_array(GgufValueType::float32, {GgufValue::of_float32(0),
                                                                                  GgufValue::of_float32(-1)})});
  m.push_back({"test.nested", GgufValue::of_array(GgufValueType::array,
                                                  {GgufValue::of_array(GgufValueType::int16, {GgufValue::of_int16(1)}),
                                                   GgufValue::of_array(GgufValueType::uint8, {})})});
  return m;
}

std::vector<uint8_t> toy_file(const GgufWriteOptions& options = {}) {
  return write_gguf_header(toy_tensors(), toy_metadata(), options);
}

// Parses and expects failure; returns the message.
std::string rejection(const std::vector<uint8_t>& bytes) {
  std::string error;
  const auto h = parse_gguf_header(bytes.data(), bytes.size(), &error);
  EXPECT_FALSE(h.has_value());
  EXPECT_FALSE(error.empty());
  return error;
}

template <typename T>
void patch(std::vector<uint8_t>& bytes, size_t at, T value) {
  ASSERT_LE(at + sizeof(T), bytes.size());
  std::memcpy(bytes.data() + at, &value, sizeof(T));
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Header of one key/value: key "k" (24: length, 32: 'k'), value type at 33, value from 37.
std::vector<uint8_t> single_kv_file(const GgufValue& v) {
  const std::vector<GgufKeyValue> m = {{"k", v}};
  return write_gguf_header({}, m);
}

class TempFile {
 public:
  explicit TempFile(const std::vector<uint8_t>& bytes) {
    path_ = (std::filesystem::temp_directory_path() /
             ("qgate_gguf_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
              std::to_string(reinterpret_cast<uintptr_t>(this)) + ".gguf"))
                .string();
    std::ofstream(path_, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                  static_cast<std::streamsize>(bytes.size()));
  }
  ~TempFile() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

TEST(Gguf, HeaderRoundTrips) {
  const auto bytes = toy_file();
  std::string error;
  const auto h = parse_gguf_header(bytes.data(), bytes.size(), &error);
  ASSERT_TRUE(h) << error;
  EXPECT_EQ(h->version, 3u);
  EXPECT_EQ(h->tensor_count, toy_tensors().size());
  EXPECT_EQ(h->kv_count, toy_metadata().size());
  EXPECT_EQ(h->header_size, bytes.size());
  EXPECT_EQ(h->alignment, 32u);
  EXPECT_EQ(h->data_offset % 32, 0u);

  ASSERT_NE(h->find("general.name"), nullptr);
  EXPECT_EQ(h->find("general.name")->s, "toy-2l");
  EXPECT_EQ(h->find("test.u8")->u, 200u);
  EXPECT_EQ(h->find("test.i8")->i, -100);
  EXPECT_EQ(h->find("test.u16")->u, 60000u);
  EXPECT_EQ(h->find("test.i16")->i, -30000);
  EXPECT_EQ(h->find("test.i32")->i, -7);
  EXPECT_EQ(h->find("test.f32")->f, 0.5);
  EXPECT_EQ(h->find("test.bool")->u, 1u);
  EXPECT_EQ(h->find("test.u64")->u, 1ull << 40);
  EXPECT_EQ(h->find("test.i64")->i, -(1ll << 40));
  EXPECT_EQ(h->find("test.f64")->f, -2.25);
  const GgufValue* tokens = h->find("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->type, GgufValueType::array);
  EXPECT_EQ(tokens->array_type, GgufValueType::string);
  ASSERT_EQ(tokens->array.size(), 3u);
  EXPECT_EQ(tokens->array[1].s, "a");
  const GgufValue* nested = h->find("test.nested");
  ASSERT_EQ(nested->array.size(), 2u);
  EXPECT_EQ(nested->array[0].array[0].i, 1);
  EXPECT_EQ(nested->array[1].array_length, 0u);
  EXPECT_EQ(h->find("absent"), nullptr);

  const auto expected = toy_tensors();
  ASSERT_EQ(h->tensors.size(), expected.size());
  uint64_t previous_offset = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(h->tensors[i].name, expected[i].name);
    EXPECT_EQ(h->tensors[i].n_dims, expected[i].n_dims);
    EXPECT_EQ(h->tensors[i].ne, expected[i].ne);
    EXPECT_EQ(h->tensors[i].type, expected[i].type);
    EXPECT_EQ(h->tensors[i].offset % 32, 0u);
    if (i > 0) EXPECT_GT(h->tensors[i].offset, previous_offset);
    previous_offset = h->tensors[i].offset;
  }
  // token_embd q4_K 1024 rows of 256: 1024 * 144 bytes, so the next tensor starts there.
  EXPECT_EQ(h->tensors[1].offset, 1024u * 144);
}

TEST(Gguf, Version2ReadsToo) {
  GgufWriteOptions o;
  o.version = 2;
  const auto bytes = toy_file(o);
  std::string error;
  const auto h = parse_gguf_header(bytes.data(), bytes.size(), &error);
  ASSERT_TRUE(h) << error;
  EXPECT_EQ(h->version, 2u);
}

TEST(Gguf, ToyModelBecomesTheExpectedProfile) {
  const auto bytes = toy_file();
  std::string error;
  const auto r = profile_from_gguf(bytes.data(), bytes.size(), "", &error);
  ASSERT_TRUE(r) << error;
  EXPECT_EQ(r->general_name, "toy-2l");
  EXPECT_EQ(r->profile.name, "toy-2l");
  EXPECT_EQ(r->profile.default_tokens, 512);
  EXPECT_TRUE(contains(r->profile.description, "llama")) << r->profile.description;

  const std::vector<ProfileGemm> expected = {
      {WeightType::q4_K, 256, 256, 2, "attn_q"},      {WeightType::q4_K, 256, 256, 1, "attn_k"},
      {WeightType::q6_K, 256, 256, 2, "attn_v"},      {WeightType::q4_K, 256, 256, 2, "attn_output"},
      {WeightType::q4_K, 768, 256, 2, "ffn_gate"},    {WeightType::q4_K, 768, 256, 2, "ffn_up"},
      {WeightType::q6_K, 256, 768, 2, "ffn_down"},    {WeightType::q6_K, 1024, 256, 1, "output"},
  };
  EXPECT_EQ(r->profile.gemms, expected);
  EXPECT_EQ(r->profile.gemm_count(), 14);

  std::map<std::string, std::string> skipped;
  for (const SkippedTensor& s : r->skipped) skipped[s.name] = s.reason;
  EXPECT_EQ(skipped.size(), 1u + 4u + 1u + 1u);  // token_embd, 4 layer norms, output_norm, the f16 matrix
  EXPECT_TRUE(contains(skipped.at("token_embd.weight"), "lookup"));
  EXPECT_TRUE(contains(skipped.at("blk.0.attn_norm.weight"), "1-D"));
  EXPECT_TRUE(contains(skipped.at("output_norm.weight"), "1-D"));
  EXPECT_TRUE(contains(skipped.at("blk.1.attn_k.weight"), "f16")) << skipped.at("blk.1.attn_k.weight");

  const auto named = profile_from_gguf(bytes.data(), bytes.size(), "my-toy", &error);
  ASSERT_TRUE(named) << error;
  EXPECT_EQ(named->profile.name, "my-toy");
}

TEST(Gguf, ThreeDimensionalAndUnsupportedTypesAreSkippedWithReasons) {
  const std::vector<GgufTensorInfo> t = {
      tensor("blk.0.ffn_gate_exps.weight", kQ4K, {256, 512, 8}),
      tensor("blk.0.attn_q.weight", 10 /* q2_K */, {256, 256}),
      tensor("blk.0.attn_k.weight", kQ4K, {256, 128, 1}),  // 3-D with one slice is a plain matrix
  };
  const auto bytes = write_gguf_header(t, {});
  std::string error;
  const auto r = profile_from_gguf(bytes.data(), bytes.size(), "x", &error);
  ASSERT_TRUE(r) << error;
  ASSERT_EQ(r->profile.gemms.size(), 1u);
  EXPECT_EQ(r->profile.gemms[0], (ProfileGemm{WeightType::q4_K, 128, 256, 1, "attn_k"}));
  ASSERT_EQ(r->skipped.size(), 2u);
  EXPECT_TRUE(contains(r->skipped[0].reason, "3-D"));
  EXPECT_TRUE(contains(r->skipped[1].reason, "q2_K"));
  EXPECT_EQ(r->profile.name, "x");
}

TEST(Gguf, FileVariantReadsOnlyWhatItNeedsAndChecksTheDataSection) {
  GgufWriteOptions o;
  o.include_data = true;
  const auto bytes = toy_file(o);
  const auto header = parse_gguf_header(bytes.data(), bytes.size());
  ASSERT_TRUE(header);
  EXPECT_GT(bytes.size(), header->data_offset);

  TempFile file(bytes);
  std::string error;
  const auto r = profile_from_gguf_file(file.path(), "", &error);
  ASSERT_TRUE(r) << error;
  EXPECT_EQ(r->profile.gemm_count(), 14);

  // Cut inside the data section: the header is whole but the last tensor's data is missing.
  std::vector<uint8_t> cut(bytes.begin(), bytes.end() - 100);
  EXPECT_TRUE(contains(rejection(cut), "runs past")) << rejection(cut);
  TempFile cut_file(cut);
  EXPECT_FALSE(read_gguf_header(cut_file.path(), &error));
  EXPECT_TRUE(contains(error, "runs past")) << error;

  EXPECT_FALSE(read_gguf_header("/nonexistent/qgate.gguf", &error));
  EXPECT_TRUE(contains(error, "/nonexistent/qgate.gguf")) << error;
}

TEST(Gguf, FileVariantWidensItsReadForLargeHeaders) {
  // ~3 MB of vocabulary: more than the first 1 MiB read.
  std::vector<GgufValue> vocab;
  for (int i = 0; i < 30000; ++i) vocab.push_back(GgufValue::of_string(std::string(100, 'a' + i % 26)));
  std::vector<GgufKeyValue> m = toy_metadata();
  m.push_back({"tokenizer.big", GgufValue::of_array(GgufValueType::string, std::move(vocab))});
  const auto bytes = write_gguf_header(toy_tensors(), m);
  ASSERT_GT(bytes.size(), 3u << 20);
  TempFile file(bytes);
  std::string error;
  const auto h = read_gguf_header(file.path(), &error);
  ASSERT_TRUE(h) << error;
  EXPECT_EQ(h->find("tokenizer.big")->array_length, 30000u);
  EXPECT_TRUE(h->find("tokenizer.big")->array.empty());  // long arrays are checked, not stored
  EXPECT_EQ(h->tensors.size(), toy_tensors().size());
}

TEST(Gguf, RejectsBadMagicAndVersions) {
  auto bytes = toy_file();
  auto bad = bytes;
  bad[0] = 'X';
  EXPECT_TRUE(contains(rejection(bad), "bad magic")) << rejection(bad);
  for (uint32_t version : {0u, 1u, 4u, 0x03000000u}) {
    bad = bytes;
    patch(bad, 4, version);
    const std::string e = rejection(bad);
    EXPECT_TRUE(contains(e, "version") || contains(e, "big-endian")) << e;
  }
  std::string error;
  EXPECT_FALSE(parse_gguf_header(nullptr, 100, &error));
  EXPECT_TRUE(contains(error, "truncated")) << error;
}

TEST(Gguf, RejectsEveryTruncation) {
  const auto bytes = toy_file();
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::string error;
    const auto h = parse_gguf_header(bytes.data(), n, &error);
    ASSERT_FALSE(h.has_value()) << "accepted a file cut at byte " << n << " of " << bytes.size();
    ASSERT_FALSE(error.empty()) << n;
  }
  EXPECT_TRUE(parse_gguf_header(bytes.data(), bytes.size()).has_value());
}

TEST(Gguf, RejectsAbsurdCounts) {
  auto bytes = toy_file();
  auto bad = bytes;
  patch<uint64_t>(bad, 8, 1ull << 40);
  EXPECT_TRUE(contains(rejection(bad), "absurd tensor count")) << rejection(bad);
  bad = bytes;
  patch<uint64_t>(bad, 16, ~0ull);
  EXPECT_TRUE(contains(rejection(bad), "absurd metadata count")) << rejection(bad);
  bad = bytes;
  patch<uint64_t>(bad, 8, 100000);  // under the limit, but far more than the file can hold
  EXPECT_TRUE(contains(rejection(bad), "cannot fit")) << rejection(bad);
}

TEST(Gguf, RejectsStringLengthsBeyondTheFile) {
  auto bytes = single_kv_file(GgufValue::of_string("hello"));
  patch<uint64_t>(bytes, 37, 1000);
  EXPECT_TRUE(contains(rejection(bytes), "beyond the end of the file")) << rejection(bytes);
  patch<uint64_t>(bytes, 37, ~0ull);
  EXPECT_TRUE(contains(rejection(bytes), "length")) << rejection(bytes);
  // The key's own length.
  bytes = single_kv_file(GgufValue::of_uint8(1));
  patch<uint64_t>(bytes, 24, 1ull << 62);
  EXPECT_TRUE(contains(rejection(bytes), "key")) << rejection(bytes);
}

TEST(Gguf, RejectsNDimsNine) {
  auto t = toy_tensors();
  t[3].n_dims = 9;
  const auto bytes = write_gguf_header(t, toy_metadata());
  const std::string e = rejection(bytes);
  EXPECT_TRUE(contains(e, "n_dims 9")) << e;
  EXPECT_TRUE(contains(e, t[3].name)) << e;
}

TEST(Gguf, RejectsArrayLengthsThatOverflow) {
  auto bytes = single_kv_file(GgufValue::of_array(GgufValueType::uint64, {GgufValue::of_uint64(1)}));
  // value type at 33, element type at 37, length at 41. 2^61 + 1 elements of 8 bytes wrap to 8 bytes.
  for (uint64_t length : {(1ull << 61) + 1, 1ull << 63, ~0ull, 2ull}) {
    auto bad = bytes;
    patch<uint64_t>(bad, 41, length);
    const std::string e = rejection(bad);
    EXPECT_TRUE(contains(e, "elements")) << length << ": " << e;
  }
  auto strings = single_kv_file(GgufValue::of_array(GgufValueType::string, {GgufValue::of_string("x")}));
  patch<uint64_t>(strings, 41, 1ull << 60);
  EXPECT_TRUE(contains(rejection(strings), "elements")) << rejection(strings);
}

TEST(Gguf, RejectsOtherMalformedHeaders) {
  // Unknown value type and unknown array element type.
  auto bytes = single_kv_file(GgufValue::of_uint32(5));
  patch<uint32_t>(bytes, 33, 13);
  EXPECT_TRUE(contains(rejection(bytes), "unknown value type")) << rejection(bytes);
  bytes = single_kv_file(GgufValue::of_array(GgufValueType::uint8, {}));
  patch<uint32_t>(bytes, 37, 99);
  EXPECT_TRUE(contains(rejection(bytes), "unknown element type")) << rejection(bytes);
  // A bool that is neither 0 nor 1.
  bytes = single_kv_file(GgufValue::of_bool(true));
  bytes[37] = 2;
  EXPECT_TRUE(contains(rejection(bytes), "bool")) << rejection(bytes);
  // Arrays nested deeper than the limit.
  GgufValue deep = GgufValue::of_array(GgufValueType::uint8, {});
  for (int i = 0; i < 5; ++i) deep = GgufValue::of_array(GgufValueType::array, {deep});
  EXPECT_TRUE(contains(rejection(single_kv_file(deep)), "deeper")) << rejection(single_kv_file(deep));
  // Bad alignment.
  const std::vector<GgufKeyValue> align = {{"general.alignment", GgufValue::of_uint32(24)}};
  EXPECT_TRUE(contains(rejection(write_gguf_header({}, align)), "alignment"));
  // Duplicate tensor names, a zero dimension, a row length the block cannot hold.
  auto t = toy_tensors();
  t[2].name = t[1].name;
  EXPECT_TRUE(contains(rejection(write_gguf_header(t, {})), "duplicate"));
  t = toy_tensors();
  t[2].ne[1] = 0;
  EXPECT_TRUE(contains(rejection(write_gguf_header(t, {})), "ne[1] = 0"));
  t = toy_tensors();
  t[2].ne[0] = 100;  // q4_K needs multiples of 256
  EXPECT_TRUE(contains(rejection(write_gguf_header(t, {})), "not a multiple"));
  t = toy_tensors();
  t[2].ne[0] = 1ull << 40;
  t[2].ne[1] = 1ull << 40;
  EXPECT_TRUE(contains(rejection(write_gguf_header(t, {})), "overflows"));
  t = toy_tensors();
  t[2].type = 100000;
  EXPECT_TRUE(contains(rejection(write_gguf_header(t, {})), "type id"));
}

TEST(Gguf, RejectsMisalignedTensorOffsets) {
  const std::vector<GgufTensorInfo> t = {tensor("a.weight", kQ4K, {256, 4})};
  auto bytes = write_gguf_header(t, {});
  // The offset is the last 8 bytes of a header without metadata.
  patch<uint64_t>(bytes, bytes.size() - 8, 7);
  EXPECT_TRUE(contains(rejection(bytes), "alignment")) << rejection(bytes);
}

TEST(Gguf, SurvivesRandomCorruption) {
  // Not a fuzzer, but the same contract: any bytes give a header or a message, never a crash.
  const auto bytes = toy_file();
  std::mt19937_64 rng(20261201);
  int rejected = 0;
  for (int i = 0; i < 3000; ++i) {
    auto bad = bytes;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) bad[rng() % bad.size()] = static_cast<uint8_t>(rng());
    std::string error;
    const auto h = parse_gguf_header(bad.data(), bad.size(), &error);
    if (!h) {
      ++rejected;
      EXPECT_FALSE(error.empty());
    } else {
      std::string perror;
      profile_from_gguf(*h, "", &perror);  // whatever it returns, it must not crash
    }
  }
  EXPECT_GT(rejected, 0);
}
