// Two rules of kernel_abi.h that every C++ kernel build implements the same way: how an error
// message goes into the caller's buffer, and how QGATE_PATH_FROM_ENV reads MINFER_MMQ. Header-only,
// so a build outside this project (adapters/ggml) needs nothing but this folder.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "qgate/kernel_abi.h"

namespace qgate::abi {

/// Copies `message` into the caller's error buffer, cut to fit and always NUL-terminated; does
/// nothing when the caller passed no buffer.
inline void write_error(char* buf, size_t size, const std::string& message) {
  if (!buf || size == 0) return;
  const size_t n = std::min(size - 1, message.size());
  std::memcpy(buf, message.data(), n);
  buf[n] = '\0';
}

/// QGATE_PATH_FROM_ENV as kernel_abi.h defines it: MINFER_MMQ unset, empty or "0" is
/// QGATE_PATH_F16, "1" is QGATE_PATH_MMQ. Anything else is refused: false, with `error` saying why.
inline bool path_from_env(int32_t* path, std::string* error) {
  const char* value = std::getenv("MINFER_MMQ");
  if (!value || !*value || std::strcmp(value, "0") == 0) {
    *path = QGATE_PATH_F16;
    return true;
  }
  if (std::strcmp(value, "1") == 0) {
    *path = QGATE_PATH_MMQ;
    return true;
  }
  *error = std::string("MINFER_MMQ must be 0 or 1, got '") + value + "'";
  return false;
}

}  // namespace qgate::abi
