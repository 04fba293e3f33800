#include "sim/scenario/run_spec.h"

#include "sim/metrics/figure_text.h"

namespace moesim::sim {

RunSpec parse_run(TomlTable& t, const std::string& network_model) {
  RunSpec r;
  r.seed = static_cast<uint64_t>(t.get_int_in_or("seed", 0, INT64_MAX, 1));
  r.duration_s = t.get_double_in_or("duration_s", 1e-6, 1e7, r.duration_s);
  if (t.has("warmup_s")) {
    r.steady.warmup_s = t.get_double_in_or("warmup_s", 0, r.duration_s, 0);
    if (*r.steady.warmup_s >= r.duration_s) {
      t.fail("warmup_s", "must be below run.duration_s (" + number_text(r.duration_s) +
                             "): nothing would be measured");
    }
  }
  r.steady.max_rel_half_width =
      t.get_double_in_or("steady_half_width", 1e-6, 1.0, r.steady.max_rel_half_width);
  if (t.has("max_duration_s")) {
    r.max_duration_s = t.get_double_in_or("max_duration_s", r.duration_s, 1e7, r.duration_s);
  }
  if (t.has("tier")) t.fail("tier", "renamed: run.fidelity = \"exact\" or \"fast\"");
  const std::string fidelity = t.get_enum_or("fidelity", {"exact", "fast"}, "exact");
  r.fidelity = fidelity == "fast" ? Fidelity::kFast : Fidelity::kExact;
  if (r.fidelity == Fidelity::kFast && network_model != "bottleneck" &&
      network_model != "bottleneck_factored") {
    t.fail("fidelity", "\"fast\" times collectives with the link-load bound; network.model = \"" +
                           network_model + "\" needs fidelity = \"exact\"");
  }
  t.finish();
  return r;
}

}  // namespace moesim::sim
