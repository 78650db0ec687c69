// ResultImporter: the ImportResults call. Checks every result, groups them into external builds
// (one per commit, backend and GPU) and stores builds and runs with one Store::import_external, so
// a refused request leaves the store as it was. The mapping is in docs/interop.md.
#pragma once

#include <string>

#include "qgate/db/records.h"
#include "qgate/db/store.h"
#include "qgate/v1/harness.pb.h"

namespace qgate::jobs {

/// "llama.cpp@<commit>/<backend>/<gpu>", empty parts left out: what an imported build is called.
std::string external_build_name(const std::string& commit, const std::string& backend, const std::string& gpu_name);

class ResultImporter {
 public:
  explicit ResultImporter(db::Store& store) : store_(store) {}

  /// Throws ApplicationError(InvalidArgument) naming the result's source line and field when a
  /// result is unusable; nothing is stored then.
  v1::ImportResultsResponse import(const v1::ImportResultsRequest& request);

 private:
  db::Store& store_;
};

}  // namespace qgate::jobs
