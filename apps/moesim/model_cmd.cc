// `moesim model show CARD [--context TOKENS] [--json]`: a model card's derived quantities
// (sim/api/load.h, sim/output/model_summary.h) as text or as one JSON document.
#include <cstdio>
#include <string>
#include <vector>

#include "apps/moesim/cli.h"
#include "sim/api/load.h"

namespace moesim::cli {

int model_command(const std::vector<std::string>& argv) {
  std::string sub;
  sim::api::ModelShowRequest request;
  std::optional<int64_t> context;
  bool json = false;
  CommandLine cl("model show CARD [options]",
                 "Prints a model card's parameters (total and active per token), weight bytes by\n"
                 "tensor group and precision, KV / latent bytes per token per layer kind,\n"
                 "recurrent-state bytes per sequence, and FLOPs per token for prefill and decode\n"
                 "at a context length.");
  cl.positional("subcommand (show)", &sub, "show")
      .positional("CARD", &request.card_path,
                  "a TOML card (models/*.toml) or a HuggingFace config.json")
      .option("--context", &context, "TOKENS",
              "context length for decode FLOPs, prefill prompt length and KV bytes per sequence "
              "(default 4096; at most the card's max_context_tokens)")
      .flag("--json", &json, "one JSON document, units in key names");
  if (!cl.parse(argv)) return 0;
  if (sub != "show") throw UsageError{"unknown subcommand '" + sub + "' (valid: show)"};
  if (context) request.context_tokens = *context;
  const sim::ModelSummary summary = sim::api::model_show(request);
  const std::string out =
      json ? sim::format_model_summary_json(summary) : sim::format_model_summary_text(summary);
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace moesim::cli
