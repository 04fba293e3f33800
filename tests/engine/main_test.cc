// moesim-engine command line: exit codes 0 / 1 / 2 and one-line messages.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace {

const std::string kBinary = std::string(MOESIM_BINARY_DIR) + "/engine/moesim-engine";
const std::string kTrace = std::string(MOESIM_SOURCE_DIR) + "/tests/data/engine/tiny_steps.jsonl";

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

Result run(const std::string& args) {
  Result r;
  FILE* pipe = popen((kBinary + " " + args + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string temp_path(const std::string& name) {
  return std::string(testing::TempDir()) + "/" + name;
}

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

}  // namespace
