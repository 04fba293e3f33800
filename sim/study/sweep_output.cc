#include "sim/study/sweep_output.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "sim/config/config_error.h"
#include "sim/io/output_files.h"
#include "sim/study/sweep_merge.h"

namespace moesim::sim::study {
namespace {

// Forwards everything written to `sink` and keeps a copy (the CSV the planner reads back);
// flushes reach the sink (the journal's fsync per row).
class CopyingBuf final : public std::streambuf {
 public:
  CopyingBuf(std::streambuf* sink, std::string* copy) : sink_(sink), copy_(copy) {}

 protected:
  int overflow(int c) override {
    if (c == traits_type::eof()) return traits_type::not_eof(c);
    copy_->push_back(static_cast<char>(c));
    return sink_->sputc(static_cast<char>(c));
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    copy_->append(s, static_cast<size_t>(n));
    return sink_->sputn(s, n);
  }
  int sync() override { return sink_->pubsync(); }

 private:
  std::streambuf* sink_;
  std::string* copy_;
};

// Writes what `fill` writes to `sink`, keeping a copy in `copy`; a failed write marks `sink`.
void copying_into(std::ostream& sink, std::string* copy,
                  const std::function<void(std::ostream&)>& fill) {
  CopyingBuf copying(sink.rdbuf(), copy);
  std::ostream csv(&copying);
  fill(csv);
  if (!csv) sink.setstate(std::ios::badbit);
}

// The shards of an MPI job: each rank runs its own, rank 0 merges them into `sink`.
SweepStats run_on_ranks(const SweepSpec& spec, const ScenarioTemplate& scenario,
                        const SweepOptions& options, const RankGroup& ranks, std::ostream* sink,
                        std::string* csv_copy, const std::function<void(int64_t, int64_t)>& draw) {
  std::ostringstream part;
  SweepStats stats = run_sweep(spec, scenario, options, part, draw);
  const std::vector<std::string> parts = ranks.gather_to_root(part.str());
  stats.num_runs = ranks.sum(stats.num_runs);
  stats.num_errors = ranks.sum(stats.num_errors);
  stats.num_broken = ranks.sum(stats.num_broken);
  if (ranks.rank() != 0) return stats;
  std::vector<std::istringstream> streams;
  streams.reserve(parts.size());
  std::vector<NamedCsv> inputs;
  for (size_t r = 0; r < parts.size(); ++r) {
    streams.emplace_back(parts[r]);
    inputs.push_back({"rank " + std::to_string(r), &streams.back()});
  }
  copying_into(*sink, csv_copy, [&](std::ostream& csv) { merge_sweep_csv_streams(inputs, csv); });
  return stats;
}

}  // namespace

bool is_plain_output_file(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode);
}

SweepOutcome write_sweep(const SweepSpec& spec, const ScenarioTemplate& scenario,
                         SweepOptions options, const SweepOutput& output, const RankGroup& ranks,
                         const std::function<void(int64_t, int64_t, int64_t)>& progress) {
  const std::optional<std::string>& out_path = output.out_path;
  const bool root = ranks.rank() == 0;
  if (out_path && root) io::check_output_file(*out_path, "--out");
  const bool plain_file = !out_path || is_plain_output_file(*out_path);
  std::optional<io::AtomicFile> file;
  std::optional<io::JournalFile> journal;
  SweepOutcome outcome;
  if (out_path && root && (ranks.active() || !plain_file)) file.emplace(*out_path);
  if (out_path && !ranks.active() && plain_file) {
    const std::string partial = *out_path + ".partial";
    journal.emplace(partial, "--out");  // locked before it is read
    ResumePoint point;
    if (output.resume) {
      point = find_resume_point(partial, spec, options.shard, options.planner,
                                options.max_duration_factor);
    } else if (const int64_t num_rows = io::num_journal_records(partial); num_rows > 0) {
      throw ConfigError(partial, 0, 0, "--out",
                        "holds " + std::to_string(num_rows) + " finished run" +
                            (num_rows == 1 ? "" : "s") +
                            " of an interrupted sweep: add --resume to continue it, or delete "
                            "the file to start over");
    }
    if (point.keep_bytes > 0) {
      // The rows kept from the killed sweep, for the planner's table at the end.
      std::ifstream kept(partial, std::ios::binary);
      outcome.csv.resize(static_cast<size_t>(point.keep_bytes));
      kept.read(outcome.csv.data(), point.keep_bytes);
    }
    journal->start(point.keep_bytes);
    options.num_done = point.num_done;
    outcome.num_resumed = point.num_done;
  }
  std::function<void(int64_t, int64_t)> draw;
  if (progress) {
    draw = [&progress, resumed = outcome.num_resumed](int64_t done, int64_t total) {
      progress(done, total, resumed);
    };
  }
  std::ostream* sink = journal ? &journal->stream() : file ? &file->stream() : output.stream;
  if (!ranks.active()) {
    copying_into(*sink, &outcome.csv, [&](std::ostream& csv) {
      outcome.stats = run_sweep(spec, scenario, options, csv, draw);
    });
    if (journal) journal->commit(*out_path);
  } else {
    outcome.stats = run_on_ranks(spec, scenario, options, ranks, sink, &outcome.csv, draw);
    outcome.is_root = root;
    if (!root) return outcome;
  }
  if (file) {
    file->commit();
  } else if (!journal && !output.stream->flush()) {
    throw io::OutputError("cannot write the CSV to stdout");
  }
  return outcome;
}

}  // namespace moesim::sim::study
