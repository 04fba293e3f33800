// `moesim model show CARD [--context TOKENS] [--json]`: a model card's derived quantities
// (sim/model/model_summary.h) as text or as one JSON document.
#include <cstdio>
#include <string>
#include <vector>

#include "apps/moesim/cli.h"
#include "sim/model/model_card_parser.h"
#include "sim/model/model_summary.h"

namespace moesim::cli {
namespace {

constexpr int64_t kDefaultContextTokens = 4096;

const char kUsage[] =
    "usage: moesim model show CARD [--context TOKENS] [--json]\n"
    "\n"
    "Prints a model card's parameters (total and active per token), weight bytes by tensor\n"
    "group and precision, KV / latent bytes per token per layer kind, recurrent-state bytes\n"
    "per sequence, and FLOPs per token for prefill and decode at a context length.\n"
    "\n"
    "  CARD              a TOML card (models/*.toml) or a HuggingFace config.json\n"
    "  --context TOKENS  context length for decode FLOPs, prefill prompt length and KV bytes\n"
    "                    per sequence (default 4096; at most the card's max_context_tokens)\n"
    "  --json            one JSON document, units in key names\n";

}  // namespace

int model_command(const std::vector<std::string>& argv) {
  Args args(argv, {"--context"});
  if (args.help_requested()) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string& sub = args.positional(0, "subcommand (show)");
  if (sub != "show") throw UsageError{"unknown subcommand '" + sub + "' (valid: show)"};
  const std::string& path = args.positional(1, "CARD");
  const bool json = args.flag("--json");
  const int64_t context_tokens = args.int_value("--context").value_or(kDefaultContextTokens);
  args.finish(2);

  const sim::ModelCard card = sim::load_model_card(path);
  if (context_tokens < 1 || context_tokens > card.max_context_tokens) {
    throw UsageError{"--context " + std::to_string(context_tokens) + " is out of range [1, " +
                     std::to_string(card.max_context_tokens) + "] (the card's max_context_tokens)"};
  }
  const sim::ModelSummary summary = sim::describe_model(card, context_tokens);
  const std::string out =
      json ? sim::format_model_summary_json(summary) : sim::format_model_summary_text(summary);
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace moesim::cli
