// The [speculative] table of a scenario: speculative decoding with the model's multi-token
// prediction (MTP) modules. Per decode step every decoding sequence verifies k + 1 tokens through
// the target model (its last committed token and k draft tokens), commits the accepted prefix of
// the drafts plus one token, and pays k sequential draft passes of the MTP module
// (docs/serving.md, "Speculative decoding"; keys in docs/scenarios.md). Off by default: a
// scenario without the table runs exactly as before.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/config/toml_source.h"
#include "sim/model/model_card.h"
#include "sim/workload/request.h"

namespace moesim::sim {

// How draft tokens are produced: the model card's own MTP modules ("mtp"), or a separate dense
// draft model ("draft_model"), co-located with the target (every GPU holds the whole draft model
// and drafts for its attention rank's sequences) or on GPUs of its own (draft_gpus).
enum class SpeculativeMethod { kMtp, kDraftModel };
// "mtp", "draft_model".
const char* speculative_method_name(SpeculativeMethod method);

struct SpeculativeSpec {
  bool enabled = false;  // the table is present
  SpeculativeMethod method = SpeculativeMethod::kMtp;
  // k: draft tokens proposed per sequence and step, >= 1 when enabled. With MTP, draft pass i
  // (1-based) runs MTP module (i - 1) mod num_mtp_layers (one module is re-used autoregressively
  // when k exceeds the card's modules, as SGLang and vLLM do).
  int32_t num_draft_tokens = 0;
  // Acceptance per draft position (k values in [0, 1]): acceptance[i] is the probability that
  // draft token i + 1 is accepted given that drafts 1..i were. From the key `acceptance` (a
  // list) or `acceptance_rate` (the same rate at every position, so P(all of the first i
  // accepted) = rate^i).
  std::vector<double> acceptance;
  // Per request domain (Request::domain, indexed by Domain), the acceptance to use instead
  // (sub-table `acceptance_by_domain`: a list of k values or one rate per domain name); empty
  // for a domain the table leaves out (it uses `acceptance`).
  std::array<std::vector<double>, kNumDomains> acceptance_by_domain;
  // kDraftModel: the draft model card (key `draft_model`, a path resolved against the scenario's
  // directory): dense layers only, the target's vocabulary size. Null with kMtp.
  std::string draft_model_path;
  std::shared_ptr<const ModelCard> draft_model;
  // kDraftModel: GPUs of its own per replica for the draft model (key `draft_gpus`; 0, the
  // default: co-located on every target GPU). Replica r's draft GPUs follow all replicas' target
  // GPUs: [R G + r N, R G + (r + 1) N) for R replicas of G GPUs; each holds the whole draft model
  // and a share of the draft KV, and drafts for a share of the replica's sequences.
  int32_t draft_gpus = 0;
};

// Parses and validates a [speculative] table for the target `card`; every error names the key.
// Keys: method ("mtp": the card needs MTP modules; "draft_model": with draft_model, a card path
// resolved against `base_dir`), draft_tokens (1..16), and exactly one of acceptance (k numbers
// in [0, 1]) or acceptance_rate (in [0, 1]).
SpeculativeSpec parse_speculative(TomlTable& t, const ModelCard& card, const std::string& base_dir);

}  // namespace moesim::sim
