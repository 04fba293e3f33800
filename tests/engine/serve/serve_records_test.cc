#include "engine/serve/serve_records.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>

namespace moesim::engine::serve {
namespace {

TEST(ServeRecords, RequestsCsvRowAsTheSimulatorWritesIt) {
  RequestRecord r;
  r.request_id = 7;
  r.session_id = 2;
  r.turn_idx = 1;
  r.replica = 0;
  r.domain = "chat";
  r.outcome = "completed";
  r.arrival_ns = 1000000;
  r.first_scheduled_ns = 3000000;
  r.first_token_ns = 5500000;
  r.done_ns = 9500000;
  r.prompt_tokens = 100;
  r.output_tokens = 5;
  r.generated_tokens = 5;
  r.preemptions = 1;
  std::ostringstream os;
  write_requests_csv_header(os);
  write_requests_csv_row(os, r);
  // queueing 2 ms, TTFT 4.5 ms, TPOT (9.5 - 5.5) / 4 = 1 ms, e2e 8.5 ms, prefill 2.5 ms.
  const std::string text = os.str();
  EXPECT_EQ(text.substr(text.find('\n') + 1),
            "7,2,1,0,0,chat,completed,,1000000,3000000,5500000,9500000,100,5,5,0,1,2.000000,"
            "4.500000,1.000000,8.500000,0,0.000000,2.500000\n");
  EXPECT_EQ(std::count(text.begin(), text.begin() + text.find('\n'), ','), 23);
}

TEST(ServeRecords, UnreachedTimesAreEmpty) {
  RequestRecord r;
  r.request_id = 1;
  r.outcome = "rejected";
  r.reject_reason = "queue_full";
  r.arrival_ns = 10;
  r.prompt_tokens = 3;
  r.output_tokens = 1;
  std::ostringstream os;
  write_requests_csv_row(os, r);
  EXPECT_EQ(os.str(), "1,-1,0,0,-1,,rejected,queue_full,10,-1,-1,-1,3,1,0,0,0,,,,,0,,\n");
}

TEST(ServeRecords, StepRecordIsOneJsonLine) {
  StepLogRecord s;
  s.step_idx = 3;
  s.replica = 1;
  s.start_ns = 10;
  s.end_ns = 25;
  s.sequences = {{4, 0, true, 64, 128, false}, {5, 1, false, 1, 77, true}};
  s.preempted = {9};
  std::ostringstream os;
  write_step_log_record(os, s);
  EXPECT_EQ(os.str(), R"({"record":"step","step":3,"replica":1,"start_ns":10,"end_ns":25,)"
                      R"("sequences":[[4,0,"prefill",64,128,false],[5,1,"decode",1,77,true]],)"
                      R"("preempted":[9]})"
                      "\n");
}

}  // namespace
}  // namespace moesim::engine::serve
