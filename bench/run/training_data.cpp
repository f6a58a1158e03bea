#include "bench/run/training_data.h"

#include <fmt/core.h>

#include <algorithm>

#include "bench/measure/stats.h"
#include "core/check.h"
#include "data/image_folder.h"
#include "data/token_shards.h"
#include "workloads/family.h"

namespace ddpb::bench {

std::shared_ptr<const Dataset> make_training_dataset(const RunConfig& config,
                                                     const WorkloadSpec& spec) {
  if (config.data.empty()) return make_dataset(spec, config.seed);
  const DataFormat format =
      config.data_format ? *config.data_format : detect_data_format(config.data);
  if (format == DataFormat::Tokens) {
    return std::make_shared<TokenShardDataset>(config.data, static_cast<int>(spec.seq_len),
                                               static_cast<int>(spec.vocab), config.data_split);
  }
  return std::make_shared<ImageFolderDataset>(config.data, static_cast<int>(spec.image_size),
                                              static_cast<int>(spec.classes), config.seed,
                                              config.normalize_on_device);
}

std::string describe_training_data(const RunConfig& config, const Dataset& dataset) {
  if (config.data.empty()) return "";
  return fmt::format("data: {} ({}): ", config.data, dataset.source()) +
         describe_data_files(dataset.data_files());
}

void add_data_files(const Dataset& dataset, reports::LoaderSummary& s) {
  const DataFiles d = dataset.data_files();
  if (d.files.empty()) return;
  s.files.emplace();
  for (const DataFile& f : d.files) {
    reports::DataFileRecord r{f.path, std::nullopt, std::nullopt, f.samples};
    (d.unit == "tokens" ? r.tokens : r.images) = f.count;
    s.files->push_back(std::move(r));
  }
  s.split = d.split;
  if (!d.left_out.empty()) s.left_out = d.left_out;
  s.meta_vocab_size = d.meta_vocab_size;
}

LoaderOptions loader_options(const RunConfig& config) {
  LoaderOptions o;
  o.num_workers = config.num_workers;
  o.prefetch_factor = config.prefetch_factor;
  o.pin_memory = config.pin_memory;
  o.on_bad_sample = config.on_bad_sample;
  o.epochs = config.epochs;
  return o;
}

reports::LoaderSummary loader_summary(const RunConfig& config, const DataLoader& loader,
                                      const Dataset& dataset, const Device& data_device,
                                      const std::vector<reports::StepRecord>& steps,
                                      double median_step_ms) {
  const LoaderTotals totals = loader.totals();
  reports::LoaderSummary s;
  s.source = dataset.source();
  if (!config.data.empty()) s.data = config.data;
  add_data_files(dataset, s);
  s.workers = config.num_workers;
  s.prefetch_factor = config.prefetch_factor;
  s.pin_memory = data_device.is_cpu() ? "not applicable (" + data_device.str() + " device)"
                                      : (config.pin_memory ? "on" : "off");
  s.normalize_on_device = config.normalize_on_device;
  s.samples = totals.samples;
  s.fill_ms_total = totals.fill_ms;
  // What the loader can give: its workers side by side (the training thread alone with 0).
  const double parallel = std::max(1, config.num_workers);
  s.samples_per_s = totals.fill_ms > 0 ? totals.samples * parallel / (totals.fill_ms / 1e3) : 0;
  std::vector<double> waits, h2d;
  int64_t copies = 0, overlapped = 0;
  for (const reports::StepRecord& step : steps) {
    if (!step.measured || !step.loader) continue;
    waits.push_back(step.loader->data_wait_ms);
    if (step.loader->h2d_ms) h2d.push_back(*step.loader->h2d_ms);
    if (step.loader->h2d_overlapped) {
      ++copies;
      overlapped += *step.loader->h2d_overlapped;
    }
  }
  s.data_wait_ms_median = waits.empty() ? 0 : percentile(waits, 50);
  s.data_wait_share = median_step_ms > 0 ? s.data_wait_ms_median / median_step_ms : 0;
  if (!h2d.empty()) s.h2d_ms_median = percentile(h2d, 50);
  if (copies > 0) s.h2d_overlap_ratio = static_cast<double>(overlapped) / copies;
  s.skipped_samples = totals.skipped;
  if (!totals.first_skip.empty()) s.first_skip = totals.first_skip;
  s.padded_samples = loader.padded_samples();
  return s;
}

}  // namespace ddpb::bench
