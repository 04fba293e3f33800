// "simgrid": the collective's flows run by SimGrid 3.32's flow-level network model, for
// validating the bottleneck and fluid models and for small studies (it is slow at scale).
//
// Platform (built once, in the constructor): one full zone; one host per GPU; one
// split-duplex link per physical full-duplex topology link (Links 2k and 2k+1 are its UP and DOWN
// directions, each with its own bandwidth and latency); a route for every ordered GPU pair made
// of the topology's route. Switch traversal latency is folded into the latency of the link
// entering the switch, so a route's summed latency equals Topology::route_latency_ns.
// Configuration, set before the first zone exists:
//   network/model CM02       plain max-min sharing, bandwidth and latency factors 1
//                            (LV08's factors add ~10% at 2 MB, ~80% at 64 KiB)
//   network/crosstraffic 0   no 5% reverse-direction acknowledgement traffic
//   network/TCP-gamma 1e15   lifts CM02's window bound gamma / (2 x latency) far above every
//                            link capacity, so only links limit a flow
// CM02 weights a flow's share on a link by the inverse of its route latency (its "sharing
// penalty" is the latency); see docs/network.md for what that means for agreement with the
// equal-weight fluid model.
//
// Each run() spawns one actor per sending GPU, which issues its flows with Comm::sendto_async
// and waits for all of them, and runs the engine; flow completion is observed per comm. Times
// are taken relative to the engine clock at the start of the run, so runs can follow each other.
//
// SimGrid allows one Engine per process: constructing a second SimgridModel in a process is a
// broken invariant (checked). Tests therefore run each SimGrid case in its own process.
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
