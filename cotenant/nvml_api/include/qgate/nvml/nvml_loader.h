// A loaded NVML (libnvidia-ml, opened at run time): the library handle, symbol lookup by the first
// of several names it exports (newest first), and nvmlInit held for the object's life. Shared by
// every part of qgate that reads NVML: the co-tenant sampler and the worker's memory probe.
#pragma once

#include <dlfcn.h>

#include <initializer_list>
#include <string>

#include "qgate/nvml/nvml_api.h"

namespace qgate::nvml {

class Loader {
 public:
  Loader() = default;
  ~Loader() {
    if (initialized_ && shutdown_) shutdown_();
    if (handle_) dlclose(handle_);
  }
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  /// Loads `path` and initializes NVML. Returns "" when it is ready, else why it is not.
  std::string open(const std::string& path) {
    handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) {
      const char* error = dlerror();
      return "cannot load " + path + " (NVIDIA driver's NVML library): " + (error ? error : "dlopen failed");
    }
    const auto init = lookup<nvmlInit_fn>({"nvmlInit_v2", "nvmlInit"});
    shutdown_ = lookup<nvmlShutdown_fn>({"nvmlShutdown"});
    error_string_ = lookup<nvmlErrorString_fn>({"nvmlErrorString"});
    if (!init || !shutdown_) return path + " lacks nvmlInit or nvmlShutdown";
    if (const nvmlReturn_t rc = init(); rc != NVML_SUCCESS)
      return describe("nvmlInit_v2", rc) + " (" + path + " loaded, no usable driver)";
    initialized_ = true;
    return "";
  }

  /// The first of `names` the library exports, as `Fn`; nullptr when none is.
  template <typename Fn>
  Fn lookup(std::initializer_list<const char*> names) const {
    for (const char* name : names)
      if (void* symbol = dlsym(handle_, name)) return reinterpret_cast<Fn>(symbol);
    return nullptr;
  }

  /// "nvmlDeviceGetHandleByIndex_v2: Invalid Argument" (NVML's own words when it has them).
  std::string describe(const char* call, nvmlReturn_t rc) const {
    const char* message = error_string_ ? error_string_(rc) : nullptr;
    return std::string(call) + ": " + (message ? message : "NVML error " + std::to_string(rc));
  }

 private:
  void* handle_ = nullptr;
  bool initialized_ = false;
  nvmlShutdown_fn shutdown_ = nullptr;
  nvmlErrorString_fn error_string_ = nullptr;
};

}  // namespace qgate::nvml
