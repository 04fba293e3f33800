// moesim-engine command line: exit codes 0 / 1 / 2 and one-line messages.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/support/scratch_files.h"

namespace {

const std::string kBinary = std::string(MOESIM_BINARY_DIR) + "/engine/moesim-engine";
const std::string kTrace = std::string(MOESIM_SOURCE_DIR) + "/tests/data/engine/tiny_steps.jsonl";

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// Runs the binary with `args`; `env` ("NAME=value ...") is prepended to the command line.
Result run(const std::string& args, const std::string& env = "") {
  Result r;
  FILE* pipe = popen((env + " " + kBinary + " " + args + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string temp_path(const std::string& name) { return moesim::scratch::path(name); }

TEST(EngineMain, VersionAndHelp) {
  const Result v = run("--version");
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_NE(v.output.find("moesim-engine "), std::string::npos);
  EXPECT_NE(v.output.find("cpu"), std::string::npos);
  const Result h = run("--help");
  EXPECT_EQ(h.exit_code, 0);
  EXPECT_NE(h.output.find("usage:"), std::string::npos);
}

TEST(EngineMain, UsageErrorsExitWith2) {
  EXPECT_EQ(run("").exit_code, 2);
  const Result unknown = run("replay " + kTrace + " --out /dev/null --frobnicate 1");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("unknown option --frobnicate"), std::string::npos);
  const Result backend = run("replay " + kTrace + " --out /dev/null --backend tpu");
  EXPECT_EQ(backend.exit_code, 2);
  EXPECT_NE(backend.output.find("unknown backend 'tpu'"), std::string::npos);
  // One line naming the problem and --help, not the usage text.
  const Result missing = run("replay");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.output,
            "moesim-engine: replay needs a STEPS.jsonl argument (see moesim-engine --help)\n");
}

TEST(EngineMain, MalformedTraceExitsWith2NamingFileLineAndField) {
  const std::string bad = temp_path("bad_trace.jsonl");
  FILE* f = fopen(bad.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("{\"record\": \"header\", \"schema\": \"moesim.step_trace.v1\"}\n", f);
  fclose(f);
  const Result r = run("replay " + bad + " --out " + temp_path("m.jsonl"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output, "moesim-engine: " + bad + ":1: model: missing\n");
}

TEST(EngineMain, DeeplyNestedJsonExitsWith2InOneShortLine) {
  const std::string bad = temp_path("deep_trace.jsonl");
  FILE* f = fopen(bad.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs(("{\"record\": " + std::string(200000, '[') + "\n").c_str(), f);
  fclose(f);
  const Result r = run("replay " + bad + " --out " + temp_path("m.jsonl"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find(bad + ":1"), std::string::npos) << r.output.substr(0, 300);
  EXPECT_NE(r.output.find("nested more than 64 deep"), std::string::npos)
      << r.output.substr(0, 300);
  EXPECT_LT(r.output.size(), 300u);
}

TEST(EngineMain, OutOfMemoryExitsWith1WithBytes) {
  const Result r =
      run("replay " + kTrace + " --out " + temp_path("m.jsonl") + " --memory-limit-gib 0.0001");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("requested "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" bytes, available 107374 bytes"), std::string::npos) << r.output;
}

TEST(EngineMain, ReplayAndBenchSucceed) {
  const Result r = run("replay " + kTrace + " --out " + temp_path("m.jsonl") +
                       " --warmup 0 --repeats 1 --layers sample --gpus 1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("replayed 2 steps x 1 GPUs x 3 layers"), std::string::npos) << r.output;
  const Result b =
      run("bench --tokens 2 --contexts 8 --warmup 0 --repeats 1 --out " + temp_path("b.jsonl"));
  EXPECT_EQ(b.exit_code, 0) << b.output;
  EXPECT_NE(b.output.find("attn_mla_decode"), std::string::npos);
  EXPECT_NE(b.output.find("n/a"), std::string::npos);  // CPU peaks unknown
}

std::string read_file(const std::string& path) {
  std::string text;
  FILE* f = fopen(path.c_str(), "r");
  if (f == nullptr) return text;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) text.append(buf.data(), n);
  fclose(f);
  return text;
}

TEST(EngineMain, CpuRanksReplayEveryGpuWithMeasuredAllToAlls) {
  const std::string out = temp_path("ranks.jsonl");
  const Result r = run("replay " + kTrace + " --out " + out + " --nranks 2 --warmup 0 --repeats 1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("replayed 2 steps x 2 GPUs x 3 layers on 2 in-process ranks on cpu"),
            std::string::npos)
      << r.output;
  const std::string text = read_file(out);
  EXPECT_NE(text.find("\"sim_gpus\":[0,1]"), std::string::npos);
  EXPECT_NE(text.find("\"op\":\"dispatch_a2a\""), std::string::npos);
  EXPECT_EQ(text.find("\"measured\":false"), std::string::npos);
  // --ranks is --gpus.
  const Result one =
      run("replay " + kTrace + " --out " + out + " --ranks 1 --warmup 0 --repeats 1 --max-steps 1");
  EXPECT_EQ(one.exit_code, 0) << one.output;
  EXPECT_NE(one.output.find("replayed 1 steps x 1 GPUs"), std::string::npos) << one.output;
}

TEST(EngineMain, InconsistentRankOptionsExitWith2) {
  const std::string out = " --out " + temp_path("m.jsonl");
  struct Case {
    std::string args, env, message;
  };
  const std::vector<Case> cases = {
      {"--rank 1", "", "--rank needs --nranks N"},
      {"--rank 2 --nranks 2", "", "--rank 2: must be in [0, 2) for --nranks 2"},
      {"--nranks 0", "", "--nranks 0: must be >= 1"},
      {"--nranks 3", "", "topology mismatch: replica 0 has 2 GPUs but 3 ranks are running"},
      {"--nranks 2 --gpus 1", "", "--gpus/--ranks choose the GPUs of a single-rank replay"},
      {"--gpus 0 --ranks 1", "", "--gpus and --ranks are the same option"},
      {"--replica 0", "", "--replica is for multi-rank replays"},
      {"--rank 0 --nranks 2", "", "--backend cpu runs several ranks as threads of one process"},
      {"--backend cuda --nccl-id-file " + temp_path("id"),
       "OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2", "put {rank} in the path"},
      {"--nranks 2", "PMI_RANK=0 PMI_SIZE=4", "--nranks 2 disagrees with the launcher"},
      {"--backend cuda --nranks 2", "", "runs one process per rank: give each process --rank R"},
      {"--backend cuda --rank 1 --nranks 2 --nccl-id-file " + temp_path("id"), "",
       "put {rank} in the path"},
  };
  for (const Case& c : cases) {
    const Result r = run("replay " + kTrace + out + " " + c.args, c.env);
    EXPECT_EQ(r.exit_code, 2) << c.args << ": " << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << ": " << r.output;
  }
  const Result bench = run("bench --nranks 2");
  EXPECT_EQ(bench.exit_code, 2);
  EXPECT_NE(bench.output.find("--nranks is a replay option"), std::string::npos) << bench.output;
}

}  // namespace

namespace {

const std::string kRequests =
    std::string(MOESIM_SOURCE_DIR) + "/tests/data/engine/tiny_serve_ep2.jsonl";

std::string read_all(const std::string& path) {
  FILE* f = fopen(path.c_str(), "r");
  if (f == nullptr) return "";
  std::string s;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) s.append(buf.data(), n);
  fclose(f);
  return s;
}

TEST(EngineMain, ServeWritesRequestsStepsAndSummaryLast) {
  const std::string dir = temp_path("serve_out");
  const Result r = run("serve " + kRequests + " --out " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("served 10 requests (10 completed, 0 rejected, 0 in flight)"),
            std::string::npos)
      << r.output;
  const std::string csv = read_all(dir + "/requests.csv");
  EXPECT_EQ(csv.rfind("request_id,session_id,turn_idx,attempt_idx,replica,domain,outcome,", 0), 0u);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 11);
  EXPECT_NE(read_all(dir + "/steps.jsonl").find("\"record\":\"step\""), std::string::npos);
  EXPECT_NE(read_all(dir + "/summary.json").find("\"completed\": 10"), std::string::npos);
  EXPECT_EQ(read_all(dir + "/summary.json.tmp"), "");
}

TEST(EngineMain, ServeUsageErrorsExitWith2) {
  const Result flag = run("serve " + kRequests + " --out /tmp --repeats 3");
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_NE(flag.output.find("--repeats is not a serve option"), std::string::npos);
  const Result out = run("serve " + kRequests + " --out " + kRequests);
  EXPECT_EQ(out.exit_code, 2);
  EXPECT_NE(out.output.find("not a directory"), std::string::npos) << out.output;
  const Result tp = run("serve " + std::string(MOESIM_SOURCE_DIR) +
                        "/tests/data/engine/tiny_requests.jsonl --out " + temp_path("serve_tp"));
  EXPECT_EQ(tp.exit_code, 2);
  EXPECT_NE(tp.output.find("data-parallel attention only"), std::string::npos) << tp.output;
  const Result wall = run("replay " + kTrace + " --out /dev/null --max-wall-s 1");
  EXPECT_EQ(wall.exit_code, 2);
  EXPECT_NE(wall.output.find("--max-wall-s is a serve option"), std::string::npos);
}

}  // namespace
