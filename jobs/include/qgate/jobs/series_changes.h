// `qgate trend --changes` and `qgate regressions`: change points in every series' build history. Each
// build is one point, the median log tok/s of its quiet runs on the series (contended runs never count);
// builds are in the order of their first such run. The gRPC handler delegates here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "qgate/db/store.h"
#include "qgate/v1/harness.pb.h"

namespace qgate::jobs {

struct ChangesQuery {
  std::optional<std::string> profile;
  std::optional<std::string> weight_type;
  std::optional<std::string> path;
  std::optional<std::string> build_glob;
  std::optional<std::string> host;  // only runs measured on this host
  std::int64_t since_ms = 0;
  bool slowdowns_only = false;
  double alpha = 0.01;
  int min_segment = 5;
};

class SeriesChanges {
 public:
  explicit SeriesChanges(db::Store& store) : store_(store) {}

  /// Every series with quiet runs in range, with its changes, each series tested at alpha on its own.
  /// With slowdowns_only (`qgate regressions`): the series are scanned as one query, alpha the false
  /// discovery rate across them (Benjamini-Hochberg), and only series with a slowdown are listed, each
  /// slowdown followed by the change that fixed it when the level came back (docs/change-points.md).
  /// Reads the runs in range once, then each build's series fields once. Throws std::invalid_argument
  /// on alpha outside (0, 1) or a minimum segment under 2.
  v1::QueryChangesResponse find(const ChangesQuery& query) const;

 private:
  db::Store& store_;
};

}  // namespace qgate::jobs
