// The kernel ABI's entry points as one table, bound from a loaded build in one place: the worker,
// the test builds that forward to the reference build, and the tests that load a build themselves
// all take them from here, so a new entry point is added once.
#pragma once

#include <dlfcn.h>

#include <string>
#include <type_traits>

#include "qgate/kernel_abi.h"

namespace qgate::abi {

struct EntryPoints {
  decltype(&::qgate_abi_version) abi_version = nullptr;
  decltype(&::qgate_get_build_info) build_info = nullptr;
  decltype(&::qgate_context_create) context_create = nullptr;
  decltype(&::qgate_context_destroy) context_destroy = nullptr;
  decltype(&::qgate_context_path) context_path = nullptr;
  decltype(&::qgate_context_last_error) context_last_error = nullptr;
  decltype(&::qgate_gemm_prepare) gemm_prepare = nullptr;
  decltype(&::qgate_gemm_run) gemm_run = nullptr;
  decltype(&::qgate_gemm_resident_bytes) gemm_resident_bytes = nullptr;
  decltype(&::qgate_gemm_release) gemm_release = nullptr;
  qgate_build_numerics_fn build_numerics = nullptr;        // optional: null when not exported
  qgate_build_numerics_on_fn build_numerics_on = nullptr;  // optional: null when not exported
};

/// Binds every entry point `handle` exports. Returns the required ones it lacks, comma-separated
/// in the order above ("" when the table is complete).
inline std::string bind_entry_points(void* handle, EntryPoints* table) {
  std::string missing;
  auto bind = [&](const char* name, auto* field, bool required) {
    void* symbol = dlsym(handle, name);
    *field = reinterpret_cast<std::remove_pointer_t<decltype(field)>>(symbol);
    if (!symbol && required) missing += (missing.empty() ? "" : ", ") + std::string(name);
  };
  bind("qgate_abi_version", &table->abi_version, true);
  bind("qgate_get_build_info", &table->build_info, true);
  bind("qgate_context_create", &table->context_create, true);
  bind("qgate_context_destroy", &table->context_destroy, true);
  bind("qgate_context_path", &table->context_path, true);
  bind("qgate_context_last_error", &table->context_last_error, true);
  bind("qgate_gemm_prepare", &table->gemm_prepare, true);
  bind("qgate_gemm_run", &table->gemm_run, true);
  bind("qgate_gemm_resident_bytes", &table->gemm_resident_bytes, true);
  bind("qgate_gemm_release", &table->gemm_release, true);
  bind(QGATE_BUILD_NUMERICS_SYMBOL, &table->build_numerics, false);
  bind(QGATE_BUILD_NUMERICS_ON_SYMBOL, &table->build_numerics_on, false);
  return missing;
}

}  // namespace qgate::abi
