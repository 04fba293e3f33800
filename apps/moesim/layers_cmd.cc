// `moesim layers SCENARIO`: per-layer communication versus expert compute for one decode step
// as the batch grows, with the scenario's routing skew and with uniform routing (the teaching
// case of the all-to-all crossover; sim/api/layers.h).
#include <cmath>
#include <iostream>
#include <sstream>

#include "apps/moesim/cli.h"
#include "sim/api/layers.h"

namespace moesim::cli {
namespace {

constexpr const char* kDescription =
    "One decode step of the scenario's replica per batch size (sequences per GPU), with the\n"
    "scenario's routing skew and with uniform routing, on the scenario's network model\n"
    "([network] model; --network-model NAME replaces it: bottleneck, bottleneck_factored, fluid,\n"
    "simgrid when built with it; fluid and simgrid take minutes per batch size at EP64). With\n"
    "[speculative], each sequence verifies 1 + k tokens and the step runs the draft passes. The\n"
    "header names the model used. Prints per MoE layer (averaged over MoE layers):\n"
    "  a2a          dispatch + combine time (with overlap: running under compute)\n"
    "  exposed      MoE layer time - the slowest GPU's compute in it (attention, router,\n"
    "               experts): what the all-to-all adds to the layer\n"
    "  experts      the slowest and the mean GPU's routed + shared expert time\n"
    "  wait         the mean barrier wait per GPU ('-' and JSON null with overlap: the\n"
    "               overlapped timelines record no barrier waits)\n"
    "  a2a/experts  a2a over the slowest GPU's expert time; the marker shows where it first\n"
    "               exceeds 1 (with overlap: where expert compute no longer hides it)";

std::vector<int64_t> parse_batches(const std::string& text) {
  std::vector<int64_t> out;
  for (double v : parse_number_list("--batches", text)) {
    // A whole number within int64 (the domain is the API's check).
    if (v != std::floor(v) || !(std::fabs(v) < 9.2e18)) {
      std::ostringstream os;
      os << "--batches: bad value '" << v << "' (sequences per GPU: a whole number >= 1)";
      throw UsageError{os.str()};
    }
    out.push_back(static_cast<int64_t>(v));
  }
  return out;
}

}  // namespace

int layers_command(const std::vector<std::string>& argv) {
  sim::api::LayersRequest request;
  std::optional<int64_t> context, seed, prefill;
  bool json = false;
  CommandLine cl("layers SCENARIO [options]", kDescription);
  cl.positional("SCENARIO", &request.scenario_path, "a scenario file")
      .option_with("--batches", "N,N,...",
                   "sequences per GPU, one step each (default 4,8,16,32,64,128)",
                   [&](const std::string& text) { request.batches = parse_batches(text); })
      .option("--context", &context, "TOKENS", "cached context per sequence (default 4096)")
      .option("--seed", &seed, "N", "routing seed (default 1)")
      .option("--network-model", &request.network_model, "NAME", "replaces [network] model")
      .option("--overlap", &request.overlap, "SCHEDULE",
              "replaces [deployment] overlap (none, simple, two_microbatch, decode_pipeline)")
      .option("--prefill", &prefill, "TOKENS",
              "each sequence a prefill chunk of TOKENS new tokens (over --context cached ones) "
              "instead of one decode token")
      .flag("--timeline", &request.timeline,
            "also print GPU 0's spans of the middle MoE layer for the first batch size (scenario "
            "routing): start and duration from the layer's start (with --json the output becomes "
            "{\"rows\": [...], \"timeline\": [...]})")
      .flag("--json", &json, "one JSON document");
  if (!cl.parse(argv)) return 0;
  if (context) request.context_tokens = *context;
  if (seed) request.seed = *seed;
  if (prefill) request.prefill_tokens = *prefill;
  const sim::api::LayersReport report = sim::api::layers(request);
  if (json) {
    std::cout << sim::api::layers_json(report).dump(2) << "\n";
  } else {
    sim::api::write_layers_text(std::cout, report);
  }
  return 0;
}

}  // namespace moesim::cli
