// How many of a source's tokens reach a destination (docs/serving.md, "Unique tokens"): with q
// the destination's share of the source's k selections per token, T (1 - (1 - q)^k) of its T
// tokens send it at least one selection. The exact fidelity applies it per (source, destination)
// pair (ExactMoeLayer); the fast fidelity per destination, from the layer's totals (FastReach).
#pragma once

#include <algorithm>
#include <cstdint>

namespace moesim::sim {

// x^k for a small integer k >= 0 by squaring (the hot path avoids std::pow).
inline double ipow(double x, int64_t k) {
  if (k == 8) {
    // The loop's products for k = 8 (the usual top-k) without its branches: r = 1 x x^8 = x^8.
    const double x2 = x * x, x4 = x2 * x2;
    return x4 * x4;
  }
  double r = 1.0;
  while (k > 0) {
    if (k & 1) r *= x;
    x *= x;
    k >>= 1;
  }
  return r;
}

// The fast fidelity's reach of a destination (rows per source token; fast_all_to_all.h) from its
// selections and the sources' tokens.
struct FastReach {
  int64_t top_k = 0;
  bool per_selection = false;  // low-latency dispatch: every selection is a row
  double of(double sel, double src_tokens) const {
    // Product-form token counts: reach_d = 1 - (1 - q_d)^k with q_d the destination's share of
    // the layer's selections; low-latency dispatch sends every selection, so its rows per source
    // token are k q_d (the exact fidelity's counts are the selections).
    const double selections = src_tokens * static_cast<double>(top_k);
    const double share = selections > 0 ? sel / selections : 0;
    if (per_selection) return share * static_cast<double>(top_k);
    return 1.0 - ipow(1.0 - std::min(share, 1.0), top_k);
  }
};

}  // namespace moesim::sim
