#include "sim/serving/sequence.h"

#include <string>

namespace moesim::sim {

RequestRecord arrival_record(const Request& r, SimTime now_ns) {
  RequestRecord rec;
  rec.request_id = r.id.value;
  rec.session_id = r.session.valid() ? r.session.value : -1;
  rec.turn_idx = r.turn_idx;
  rec.attempt_idx = r.attempt_idx;
  rec.domain = std::string(domain_name(r.domain));
  rec.arrival_ns = now_ns;
  rec.prompt_tokens = r.prompt_tokens;
  rec.output_tokens = r.output_tokens;
  return rec;
}

void sync_record(const Seq& s, RequestRecord& rec) {
  rec.first_scheduled_ns = s.first_scheduled_ns;
  rec.cached_prompt_tokens = s.cached_prompt_tokens;
  rec.num_preemptions = s.num_preemptions;
  rec.kv_load_ns = s.kv_load_ns;
  rec.loaded_prompt_tokens = s.loaded_prompt_tokens;
}

}  // namespace moesim::sim
