// Fuzzes the model-card TOML reader (sim/model/model_card_parser.h).
#include <sstream>
#include <string>

#include "sim/config/toml_source.h"
#include "sim/model/model_card_parser.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  moesim::fuzz::expect_clean_or_config_error([&] {
    moesim::sim::TomlDocument doc =
        moesim::sim::TomlDocument::parse_string(moesim::fuzz::as_text(data, size), "fuzz.toml");
    moesim::sim::TomlTable root = doc.root();
    moesim::sim::parse_model_card(root);
  });
  return 0;
}
