// The bytes of builds as the store keeps them for a fleet (docs/fleet.md, "Builds on every host"):
// how they are cut into chunks, and the sink that a read streams the chunks into.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

namespace qgate::db {

/// The most bytes one stored chunk of a build's content holds (1 MiB): no value is huge, and a read
/// holds one chunk at a time.
inline constexpr std::int64_t kBuildContentChunkBytes = std::int64_t{1} << 20;

/// Takes a build's content, one chunk after the other, in order.
using BuildContentSink = std::function<void(std::string_view chunk)>;

}  // namespace qgate::db
