#include "apps/moesim/plan_options.h"

#include "sim/io/output_files.h"

namespace moesim::cli {

std::optional<double> gpu_price_option(Args& args) {
  auto price = args.double_value("--gpu-price-per-hour");
  if (price && !(*price > 0 && *price < 1e9)) {
    throw UsageError{"--gpu-price-per-hour must be > 0 (US dollars per GPU-hour)"};
  }
  return price;
}

std::optional<std::string> plan_option(Args& args) {
  auto path = args.value("--plan");
  if (path) {
    sim::study::check_plan_path(*path, "--plan");
    sim::io::check_output_file(*path, "--plan");
  }
  return path;
}

void write_plan_file(const sim::study::Plan& plan, const std::string& path) {
  sim::io::write_file_atomically(path,
                                 [&](std::ostream& os) { sim::study::write_plan(plan, path, os); });
}

}  // namespace moesim::cli
