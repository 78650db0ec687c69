// FNV-1a 64 against the published test vectors; the text and byte forms agree.
#include "qgate/common/fnv1a.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace qgate::common {
namespace {

TEST(Fnv1a, PublishedVectors) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ULL);  // the offset basis
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ULL);
}

TEST(Fnv1a, BytesAndTextAgreeAndEveryByteCounts) {
  const std::string text("blk.0.attn_q.weight\0tail", 24);
  const std::vector<unsigned char> bytes(text.begin(), text.end());
  EXPECT_EQ(fnv1a64(bytes.data(), bytes.size()), fnv1a64(text));
  EXPECT_NE(fnv1a64(text), fnv1a64(std::string_view(text).substr(0, 19)));  // bytes after a NUL count
  EXPECT_NE(fnv1a64("ab"), fnv1a64("ba"));
}

}  // namespace
}  // namespace qgate::common
