// Strong integer id types, so a GPU index cannot be passed where an expert index is expected.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>

namespace moesim::sim {

template <class Tag>
struct Id {
  int32_t value = -1;

  constexpr Id() = default;
  constexpr explicit Id(int32_t v) : value(v) {}
  constexpr bool valid() const { return value >= 0; }
  constexpr auto operator<=>(const Id&) const = default;
};

using GpuId = Id<struct GpuTag>;
using NodeId = Id<struct NodeTag>;
using ExpertId = Id<struct ExpertTag>;
using LayerIdx = Id<struct LayerTag>;
using ReplicaId = Id<struct ReplicaTag>;
using RequestId = Id<struct RequestTag>;
using SessionId = Id<struct SessionTag>;

}  // namespace moesim::sim

template <class Tag>
struct std::hash<moesim::sim::Id<Tag>> {
  size_t operator()(const moesim::sim::Id<Tag>& id) const noexcept {
    return std::hash<int32_t>()(id.value);
  }
};
