// The q8 activation layouts' host-side contracts (cuda/launchers.h), which every CUDA kernel and the
// backend's scratch rely on, checked without a GPU: each layout fits what launchers.h promises and
// the scratch the backend allocates ((nt + 3) pad40 blocks per 32 k), its regions do not overlap, and the k-major layout's
// token slots are a permutation within each 16 tokens that puts a wgmma fragment thread's four
// tokens side by side.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cuda/launchers.h"

namespace qgate::cuda {
namespace {

TEST(Q8Layouts, KMajorFitsTheScratchAndItsRegionsDoNotOverlap) {
  for (int64_t k : {int64_t{256}, int64_t{4096}, int64_t{14336}})
    for (int64_t nt = 1; nt <= 4100; ++nt) {
      const int64_t ntp = q8_kmajor_padded_tokens(nt), nb = k / kQ8BlockElems;
      ASSERT_GE(ntp, nt);
      ASSERT_EQ(ntp % 16, 0) << "nt " << nt;
      ASSERT_LT(ntp - nt, 16) << "nt " << nt;
      ASSERT_EQ(q8_kmajor_scales_offset(nt, k), static_cast<size_t>(nt * k)) << "quants end where scales start";
      ASSERT_EQ(q8_kmajor_sums_offset(nt, k) - q8_kmajor_scales_offset(nt, k), static_cast<size_t>(ntp * nb * 4));
      ASSERT_EQ(q8_kmajor_sums_offset(nt, k) % 16, 0u) << "the sums' rows are 16-byte aligned for tensor copies";
      ASSERT_LE(q8_kmajor_bytes(nt, k), q8_activation_bytes(nt + 3, k)) << "nt " << nt << " k " << k;
    }
}

TEST(Q8Layouts, DecodeFitsTheScratch) {
  for (int64_t k : {int64_t{32}, int64_t{256}, int64_t{14336}})
    for (int64_t nt = 1; nt <= kDecodeMaxTokens; ++nt) {
      const size_t sums_end = q8_decode_sums_offset(nt, k) + static_cast<size_t>(nt * (k / kQ8BlockElems) * 4);
      ASSERT_GE(q8_decode_sums_offset(nt, k),
                q8_decode_scales_offset(nt, k) + static_cast<size_t>(nt * (k / kQ8BlockElems) * 2));
      ASSERT_EQ(q8_decode_sums_offset(nt, k) % 8, 0u);
      ASSERT_LE(sums_end, q8_activation_bytes(nt + 1, k)) << "nt " << nt << " k " << k;
    }
}

TEST(Q8Layouts, KMajorTokenSlotsPermuteEach16TokensIntoFragmentOrder) {
  std::vector<int64_t> seen;
  for (int64_t tok = 0; tok < 4096; ++tok) {
    const int64_t slot = q8_kmajor_token_slot(tok);
    ASSERT_EQ(slot / 16, tok / 16) << "token " << tok << " leaves its 16";
    seen.push_back(slot);
  }
  std::sort(seen.begin(), seen.end());
  for (int64_t i = 0; i < 4096; ++i) ASSERT_EQ(seen[static_cast<size_t>(i)], i) << "slots are not a permutation";
  // A wgmma accumulator thread t holds tokens 8i + 2t and 8i + 2t + 1: for i = 2m and 2m + 1 they
  // are the four slots 16m + 4t .. 16m + 4t + 3, in that order.
  for (int64_t m = 0; m < 8; ++m)
    for (int64_t t = 0; t < 4; ++t)
      for (int64_t a = 0; a < 2; ++a)
        for (int64_t e = 0; e < 2; ++e)
          ASSERT_EQ(q8_kmajor_token_slot(16 * m + 8 * a + 2 * t + e), 16 * m + 4 * t + 2 * a + e)
              << "m " << m << " t " << t << " a " << a << " e " << e;
}

}  // namespace
}  // namespace qgate::cuda
