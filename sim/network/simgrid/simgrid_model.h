// "simgrid": the collective's flows run by SimGrid 3.32's flow-level network model, for
// validating the bottleneck and fluid models and for small studies (it is slow at scale).
//
// The platform is built once: one host per GPU, one split-duplex link per full-duplex topology
// link, a route per ordered GPU pair with the topology's summed latency, CM02 configured to
// plain max-min sharing. Each run() spawns one actor per sending GPU. SimGrid allows one Engine
// per process, so a second SimgridModel in a process is a broken invariant (checked) and tests
// run each SimGrid case in its own process. docs/network.md ("simgrid") has the configuration
// and why.
#pragma once

#include <memory>
#include <string_view>

#include "sim/network/network_model.h"

namespace moesim::sim {

class SimgridModel final : public NetworkModel {
 public:
  // Creates the process's SimGrid engine and the platform of `topology` (which must outlive the
  // model). Precondition (checked): no SimgridModel was created before in this process.
  explicit SimgridModel(const Topology& topology);
  ~SimgridModel() override;

  std::string_view name() const override { return "simgrid"; }
  void run(const TrafficMatrix& traffic, CollectiveResult& result) override;
  using NetworkModel::run;

 private:
  struct Platform;
  const Topology& topology_;
  std::unique_ptr<Platform> platform_;
};

// Adds "simgrid" to `registry`.
void register_simgrid_model(NetworkModelRegistry& registry);

}  // namespace moesim::sim
