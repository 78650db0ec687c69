// SHA-256 (FIPS 180-4) of bytes and files: builds are identified by the hash of their bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace qgate::common {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  /// Finishes the hash and returns it as 64 lowercase hex digits.
  std::string hex_digest();

 private:
  void compress(const uint8_t* block);
  uint32_t state_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string sha256_hex(const void* data, size_t size);
/// Empty string when the file cannot be read.
std::string sha256_file_hex(const std::string& path);

}  // namespace qgate::common
