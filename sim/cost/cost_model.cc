#include "sim/cost/cost_model.h"

namespace moesim::sim {

void CostModel::throw_bad_op_duration(const OpWork& work, double seconds) const {
  const std::string what =
      "cost model '" + std::string(name()) + "': " + std::string(op_kind_name(work.kind)) + " (" +
      std::string(dtype_name(work.dtype)) + ", " + format_number(work.flops) + " FLOPs, " +
      format_number(work.bytes) + " bytes, " + std::to_string(work.tokens) + " tokens)";
  throw_bad_duration(what, seconds, "check " + describe_inputs());
}

}  // namespace moesim::sim
