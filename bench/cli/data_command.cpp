#include "bench/cli/data_command.h"

#include <fmt/core.h>

#include <chrono>

#include "base/printable.h"
#include "bench/run/cli_flags.h"
#include "bench/run/training_data.h"
#include "core/check.h"
#include "workloads/model.h"

namespace ddpb::bench {
namespace {

void add_make_commands(CLI::App& make, DataOptions& o) {
  o.make_tokens = make.add_subcommand("tokens", "token shards for the gpt workloads");
  o.make_tokens->add_option("--out", o.tokens.out, "the folder to create")->required();
  add_int_flag(*o.make_tokens, "--tokens", o.tokens.tokens, 2, int64_t{1} << 34,
               "tokens in all (default 1048576)");
  add_int_flag(*o.make_tokens, "--shards", o.tokens.shards, 1, 4096, "shard files (default 2)");
  add_int_flag(*o.make_tokens, "--vocab", o.tokens.vocab, 2, 65536,
               "vocabulary (default 512, gpt-tiny's; 50257 for gpt2-small)");
  o.make_tokens->add_option("--format", o.token_format, "llmc (default) or nanogpt")
      ->check(CLI::IsMember({"llmc", "nanogpt"}));
  add_int_flag(*o.make_tokens, "--seed", o.tokens.seed, 0, INT64_MAX, "seed (default 0)");
  o.make_images = make.add_subcommand("imagefolder", "an ImageFolder of JPEGs for resnet");
  o.make_images->add_option("--out", o.images.out, "the folder to create")->required();
  add_int_flag(*o.make_images, "--classes", o.images.classes, 1, 100000, "classes (default 10)");
  add_int_flag(*o.make_images, "--images-per-class", o.images.images_per_class, 1, 1000000,
               "JPEGs per class (default 20)");
  add_int_flag(*o.make_images, "--min-side", o.images.min_side, 8, 8192,
               "smallest side in pixels (default 300)");
  add_int_flag(*o.make_images, "--max-side", o.images.max_side, 8, 8192,
               "largest side in pixels (default 500)");
  add_int_flag(*o.make_images, "--quality", o.images.quality, 1, 100, "JPEG quality (default 95)");
  add_int_flag(*o.make_images, "--seed", o.images.seed, 0, INT64_MAX, "seed (default 0)");
}

void add_bench_command(CLI::App& data, DataOptions& o) {
  RunConfig& c = o.bench;
  o.bench_cmd = data.add_subcommand("bench", "the loader alone on a dataset, without training");
  o.bench_cmd->add_option("--data", c.data, "token shards or an image folder")->required();
  add_enum_flag(*o.bench_cmd, "--data-split", c.data_split,
                "token shards: the split of a folder holding train*.bin and val*.bin (default "
                "train)");
  o.bench_cmd->add_option("--workload", c.workload, "the workload whose samples it makes")
      ->required();
  o.bench_cmd->add_option("--device", c.device, "where batches go (default cpu)");
  add_int_flag(*o.bench_cmd, "--global-batch", c.global_batch, 1, kMaxGlobalBatch,
               "samples per batch (default: the workload's)");
  add_int_flag(*o.bench_cmd, "--batches", o.batches, 1, 1000000, "batches timed (default 20)");
  add_int_flag(*o.bench_cmd, "--num-workers", c.num_workers, 0, kMaxLoaderWorkers,
               "loader threads (default 1)");
  add_int_flag(*o.bench_cmd, "--prefetch-factor", c.prefetch_factor, 1, kMaxPrefetchFactor,
               "batches in flight per worker (default 2)");
  o.bench_cmd->add_flag("--pin-memory", c.pin_memory, "CUDA: page-locked staging");
  o.bench_cmd->add_flag("--normalize-on-device", c.normalize_on_device, "ship u8 images");
  add_enum_flag(*o.bench_cmd, "--on-bad-sample", c.on_bad_sample, "fail (default) or skip");
}

// The loader alone: one warm-up batch, then `batches` timed.
int data_bench(DataOptions& o) {
  RunConfig& c = o.bench;
  if (c.global_batch == 0) c.global_batch = default_global_batch(c.workload);
  c.validate();
  const WorkloadSpec& spec = find_workload(c.workload);
  const auto dataset = make_training_dataset(c, spec);
  const Device device = parse_device(c.device);
  require_device(device);
  DeviceGuard guard(device);
  DataLoader loader(dataset, DistributedSampler(dataset->size(), 1, 0, true, c.seed, false),
                    c.global_batch, device, loader_options(c));
  loader.next();
  const auto t0 = std::chrono::steady_clock::now();
  int64_t bytes = 0;
  for (int64_t b = 0; b < o.batches; ++b) {
    loader.next();
    for (int64_t i : loader.last_indices()) bytes += dataset->sample_bytes(i);
  }
  current_stream(device).synchronize();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const LoaderTotals totals = loader.totals();
  const double samples = static_cast<double>(o.batches * c.global_batch);
  fmt::print("data bench: {} ({}, {} samples), {} on {}, {} worker(s), prefetch {}\n", c.data,
             dataset->source(), dataset->size(), c.workload, device.str(), c.num_workers,
             c.prefetch_factor);
  fmt::print("data: {}", describe_data_files(dataset->data_files()));
  fmt::print("loader: {:.1f} samples/s, {:.1f} MB/s of files, {} batches of {} in {:.3f} s\n",
             samples / secs, bytes / 1e6 / secs, o.batches, c.global_batch, secs);
  fmt::print("decode: {:.2f} ms a sample per worker ({:.1f} ms in all over {} batches made)\n",
             totals.samples > 0 ? totals.fill_ms / totals.samples : 0.0, totals.fill_ms,
             totals.batches);
  if (totals.skipped > 0)
    fmt::print("skipped: {} bad sample(s), the first: {}\n", totals.skipped,
               printable(totals.first_skip));  // it names a dataset's file (issue 48, P21)
  return 0;
}

}  // namespace

CLI::App* add_data_command(CLI::App& app, DataOptions& o) {
  auto* data = app.add_subcommand("data", "make a dataset on disk, or time the loader on one");
  data->require_subcommand(1);
  auto* make = data->add_subcommand("make", "write a realistic dataset for tests and demos");
  make->require_subcommand(1);
  add_make_commands(*make, o);
  add_bench_command(*data, o);
  return data;
}

int data_command(DataOptions& o) {
  if (o.make_tokens->parsed()) {
    o.tokens.llmc = o.token_format == "llmc";
    fmt::print("data make: {}\n", make_token_data(o.tokens));
    return 0;
  }
  if (o.make_images->parsed()) {
    fmt::print("data make: {}\n", make_image_data(o.images));
    return 0;
  }
  return data_bench(o);
}

}  // namespace ddpb::bench
