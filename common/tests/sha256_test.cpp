// SHA-256 against the FIPS 180-4 examples, and across block boundaries.
#include "qgate/common/sha256.h"

#include <gtest/gtest.h>

#include <string>

using qgate::common::Sha256;
using qgate::common::sha256_hex;

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc", 3), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(sha256_hex(two_blocks.data(), two_blocks.size()),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, StreamingEqualsOneShot) {
  std::string data(1000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = char(i * 7 + 3);
  Sha256 h;
  for (size_t i = 0; i < data.size(); i += 37) h.update(data.data() + i, std::min<size_t>(37, data.size() - i));
  EXPECT_EQ(h.hex_digest(), sha256_hex(data.data(), data.size()));
  EXPECT_NE(sha256_hex(data.data(), data.size() - 1), sha256_hex(data.data(), data.size()));
}
