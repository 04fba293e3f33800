#include "sim/network/simgrid/simgrid_model.h"

#include <algorithm>
#include <cmath>
#include <simgrid/s4u.hpp>
#include <string>
#include <vector>

#include "base/check.h"

namespace moesim::sim {

namespace sg4 = simgrid::s4u;

struct SimgridModel::Platform {
  std::unique_ptr<sg4::Engine> engine;
  std::vector<sg4::Host*> hosts;  // by GpuId
};

namespace {

// Latency charged on a directed link: its own plus the traversal latency of the switch it
// enters (GPUs have none), so a route's sum is Topology::route_latency_ns.
SimTime folded_latency_ns(const Topology& topology, int32_t link_id) {
  const Link& link = topology.links()[link_id];
  return link.latency_ns + topology.vertex_latency_ns(link.to_vertex);
}

}  // namespace

SimgridModel::SimgridModel(const Topology& topology)
    : topology_(topology), platform_(std::make_unique<Platform>()) {
  MOESIM_CHECK(!sg4::Engine::is_initialized(), "one SimGrid engine per process");
  int argc = 2;
  char arg0[] = "moesim";
  char arg1[] = "--log=root.thresh:critical";
  char* argv[] = {arg0, arg1, nullptr};
  platform_->engine = std::make_unique<sg4::Engine>(&argc, argv);
  sg4::Engine::set_config("network/model:CM02");
  sg4::Engine::set_config("network/crosstraffic", false);
  sg4::Engine::set_config("network/TCP-gamma:1e15");

  sg4::NetZone* zone = sg4::create_full_zone("moesim");
  for (int32_t g = 0; g < topology.num_gpus(); ++g) {
    platform_->hosts.push_back(zone->create_host("gpu" + std::to_string(g), 1e9)->seal());
  }
  // Directed link id -> (split-duplex link, direction).
  const std::vector<Link>& links = topology.links();
  MOESIM_CHECK(links.size() % 2 == 0, "topology links come in direction pairs");
  std::vector<sg4::LinkInRoute> link_in_route;
  link_in_route.reserve(links.size());
  for (size_t k = 0; k < links.size() / 2; ++k) {
    const Link& up = links[2 * k];
    const Link& down = links[2 * k + 1];
    MOESIM_CHECK(up.from_vertex == down.to_vertex && up.to_vertex == down.from_vertex,
                 "links 2k and 2k+1 are the two directions of one cable");
    sg4::SplitDuplexLink* cable =
        zone->create_split_duplex_link("link" + std::to_string(k), up.capacity_bytes_per_s);
    cable->get_link_up()->set_bandwidth(up.capacity_bytes_per_s);
    cable->get_link_down()->set_bandwidth(down.capacity_bytes_per_s);
    cable->get_link_up()->set_latency(
        to_seconds(folded_latency_ns(topology, static_cast<int32_t>(2 * k))));
    cable->get_link_down()->set_latency(
        to_seconds(folded_latency_ns(topology, static_cast<int32_t>(2 * k + 1))));
    cable->seal();
    link_in_route.emplace_back(cable, sg4::LinkInRoute::Direction::UP);
    link_in_route.emplace_back(cable, sg4::LinkInRoute::Direction::DOWN);
  }
  std::vector<sg4::LinkInRoute> route_links;
  for (int32_t s = 0; s < topology.num_gpus(); ++s) {
    for (int32_t d = 0; d < topology.num_gpus(); ++d) {
      if (s == d) continue;
      route_links.clear();
      SimTime latency_ns = 0;
      for (int32_t l : topology.route(GpuId(s), GpuId(d))) {
        route_links.push_back(link_in_route[l]);
        latency_ns += folded_latency_ns(topology, l);
      }
      MOESIM_CHECK(latency_ns == topology.route_latency_ns(GpuId(s), GpuId(d)),
                   "folded link latencies must add up to the route latency");
      zone->add_route(platform_->hosts[s]->get_netpoint(), platform_->hosts[d]->get_netpoint(),
                      nullptr, nullptr, route_links, /*symmetrical=*/false);
    }
  }
  zone->seal();
}

SimgridModel::~SimgridModel() = default;

void SimgridModel::run(const TrafficMatrix& traffic, CollectiveResult& result) {
  const int32_t p = traffic.size();
  const double start_s = sg4::Engine::get_clock();
  result.send_done_ns.assign(p, 0);
  result.recv_done_ns.assign(p, 0);
  std::vector<double> link_bytes(topology_.links().size(), 0.0);
  // finish_s[s * p + d]: when flow (s, d) ended, seconds since start_s.
  std::vector<double> finish_s(static_cast<size_t>(p) * p, -1.0);
  int32_t num_flows = 0;
  for (int32_t s = 0; s < p; ++s) {
    std::vector<std::pair<int32_t, uint64_t>> flows;  // (dst_idx, bytes)
    for (int32_t d = 0; d < p; ++d) {
      const double bytes = traffic.bytes(s, d);
      if (bytes <= 0 || d == s) continue;
      for (int32_t l : topology_.route(traffic.gpu(s), traffic.gpu(d))) link_bytes[l] += bytes;
      flows.emplace_back(d, static_cast<uint64_t>(std::llround(bytes)));
    }
    if (flows.empty()) continue;
    num_flows += static_cast<int32_t>(flows.size());
    sg4::Host* src_host = platform_->hosts[traffic.gpu(s).value];
    std::vector<sg4::Host*> dst_hosts;
    for (const auto& flow : flows)
      dst_hosts.push_back(platform_->hosts[traffic.gpu(flow.first).value]);
    double* row_finish_s = finish_s.data() + static_cast<size_t>(s) * p;
    sg4::Actor::create(
        "sender" + std::to_string(s), src_host,
        [flows, dst_hosts, src_host, row_finish_s, start_s]() {
          std::vector<sg4::CommPtr> comms;
          std::vector<int32_t> dst_of_comm;
          for (size_t i = 0; i < flows.size(); ++i) {
            comms.push_back(sg4::Comm::sendto_async(src_host, dst_hosts[i], flows[i].second));
            dst_of_comm.push_back(flows[i].first);
          }
          while (!comms.empty()) {
            const ssize_t i = sg4::Comm::wait_any(comms);
            row_finish_s[dst_of_comm[i]] = sg4::Engine::get_clock() - start_s;
            comms.erase(comms.begin() + i);
            dst_of_comm.erase(dst_of_comm.begin() + i);
          }
        });
  }
  platform_->engine->run();

  result.num_flows = num_flows;
  result.duration_ns = 0;
  for (int32_t s = 0; s < p; ++s) {
    for (int32_t d = 0; d < p; ++d) {
      const double f_s = finish_s[static_cast<size_t>(s) * p + d];
      if (f_s < 0) continue;
      const SimTime finish_ns = collective_duration_ns(f_s, topology_, link_bytes);
      result.send_done_ns[s] = std::max(result.send_done_ns[s], finish_ns);
      result.recv_done_ns[d] = std::max(result.recv_done_ns[d], finish_ns);
      result.duration_ns = std::max(result.duration_ns, finish_ns);
    }
  }
  set_barrier_waits(result);
  set_bottleneck(topology_, link_bytes, result);
}

void register_simgrid_model(NetworkModelRegistry& registry) {
  registry.add("simgrid",
               [](const Topology& topology) { return std::make_unique<SimgridModel>(topology); });
}

}  // namespace moesim::sim
