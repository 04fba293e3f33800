// Scratch files for tests. ctest runs every test case as its own process, in parallel, so two
// cases writing the same fixed name race (one reads the other's half-written file). Each case
// gets a directory of its own instead.
#pragma once

#include <string>

namespace moesim::scratch {

// TempDir()/moesim-<Suite>.<Test>/<name>, the directory created. Outside a running test the
// directory is moesim-no-test.
std::string path(const std::string& name);

// Writes `text` to path(name) and returns that path.
std::string write(const std::string& name, const std::string& text);

}  // namespace moesim::scratch
