#include "bench/suite/design_flags.h"

#include <algorithm>
#include <thread>
#include <utility>
#include "base/text.h"

#include "core/check.h"

namespace ddpb::bench {
namespace {

using reports::DesignInfo;

// A flag run that adds `args` and keeps its default's global batch.
FlagArgs same_batch(const FlagPoint& at, std::vector<std::string> args) {
  return {std::move(args), at.global_batch};
}

// Four micro-batches of a quarter each: the same samples per step as the default.
FlagArgs no_sync_k4_args(const FlagPoint& at) {
  const int64_t n = at.world_size;
  return {{"--accumulate", "4"}, std::max<int64_t>(n, at.global_batch / 4 / n * n)};
}

// A cap larger than any model's gradients, the first bucket's too.
FlagArgs one_bucket_args(const FlagPoint& at) {
  return same_batch(at, {"--bucket-cap-mb", "4096", "--first-bucket-mb", "4096"});
}

// PowerSGD compresses from the first measured step (PyTorch's minimum of 2 where the warm-up
// is shorter), so that its step time is the compressed one.
FlagArgs powersgd_flag_args(const FlagPoint& at) {
  return {{"--comm-hook", "powersgd", "--powersgd-start-iter",
           std::to_string(std::max<int64_t>(2, at.warmup))},
          at.global_batch};
}

FlagArgs cpu_threads_all_args(const FlagPoint& at) {
  return {{"--cpu-threads", std::to_string(std::max(1u, std::thread::hardware_concurrency()))},
          at.global_batch};
}

// The rows, in the order suites list them; the ledger's sentences quote `mechanism`.
std::vector<DesignFlag> make_design_flags() {
  constexpr auto buckets = &DesignInfo::has_buckets;
  return {
      {.name = "default",
       .args = [](const FlagPoint& p) { return same_batch(p, {}); },
       .mechanism = "the design's defaults: the A run of every pair"},
      {.name = "find_unused_parameters",
       .design_trait = buckets,
       .args = [](const FlagPoint& p) { return same_batch(p, {"--find-unused-params"}); },
       .mechanism = "walks the autograd graph from the loss every step to mark the parameters "
                    "that get no gradient"},
      {.name = "static_graph",
       .design_trait = buckets,
       .args = [](const FlagPoint& p) { return same_batch(p, {"--static-graph"}); },
       .mechanism = "the first step learns the graph; no search for unused parameters after "
                    "it, buckets rebuilt once in the order gradients became ready"},
      {.name = "broadcast_buffers_off",
       .design_trait = buckets,
       .args = [](const FlagPoint& p) { return same_batch(p, {"--no-broadcast-buffers"}); },
       .mechanism = "skips broadcasting rank 0's buffers (BatchNorm statistics) before every "
                    "forward; nothing changes for a model without buffers",
       .prices_batch_norm = true},
      {.name = "gradient_as_bucket_view",
       .design_trait = buckets,
       .args = [](const FlagPoint& p) { return same_batch(p, {"--grad-as-bucket-view"}); },
       .mechanism = "gradients live in the buckets: no copy into them, one copy of the "
                    "gradients less in memory"},
      {.name = "sync_bn",
       .design_trait = buckets,
       .args = [](const FlagPoint& p) { return same_batch(p, {"--sync-bn"}); },
       .mechanism = "BatchNorm statistics over the global batch: collectives in every "
                    "BatchNorm layer's forward and backward, which wait for every rank",
       .prices_batch_norm = true,
       .syncs_batch_norm = true},
      {.name = "no_sync_k4",
       .design_trait = buckets,
       .args = no_sync_k4_args,
       .mechanism = "four micro-batches of a quarter each, the first three under no_sync: one "
                    "AllReduce per step as before, smaller GEMMs"},
      {.name = "first_bucket_at_cap",
       .design_trait = buckets,
       .args =
           [](const FlagPoint& p) {
             return same_batch(p, {"--first-bucket-mb", "25"});
           },
       .mechanism = "no small first bucket: the first AllReduce waits for a whole bucket of "
                    "gradients instead of 1 MB"},
      {.name = "one_bucket",
       .design_trait = buckets,
       .args = one_bucket_args,
       .mechanism = "every gradient in one bucket: nothing is sent until backward ends, so no "
                    "communication overlaps it"},
      {.name = "fp16_hook",
       .design_trait = buckets,
       .args =
           [](const FlagPoint& p) {
             return same_batch(p, {"--comm-hook", "fp16"});
           },
       .mechanism = "gradients cast to fp16 before the AllReduce: half the bytes, two casts "
                    "per bucket"},
      {.name = "bf16_hook",
       .design_trait = buckets,
       .args =
           [](const FlagPoint& p) {
             return same_batch(p, {"--comm-hook", "bf16"});
           },
       .mechanism = "gradients cast to bf16 before the AllReduce: half the bytes, two casts "
                    "per bucket"},
      {.name = "powersgd_hook",
       .design_trait = buckets,
       .args = powersgd_flag_args,
       .mechanism = "rank-1 PowerSGD: matrices sent as two thin factors, at the price of the "
                    "factors' GEMMs and orthogonalisation"},
      {.name = "cpu_threads_all",
       .design_trait = buckets,
       .args = cpu_threads_all_args,
       .mechanism = "every core's worth of BLAS threads in each rank (PyTorch's default) "
                    "against one: ranks that share cores oversubscribe them",
       .cpu_only = "CPU devices' BLAS threads"},
  };
}

}  // namespace

const std::vector<DesignFlag>& design_flags() {
  static const std::vector<DesignFlag> rows = make_design_flags();
  return rows;
}

const DesignFlag& default_design_flag() {
  return design_flags().front();
}

const DesignFlag* find_design_flag(std::string_view name) {
  for (const DesignFlag& f : design_flags())
    if (f.name == name) return &f;
  return nullptr;
}

std::vector<const DesignFlag*> design_flags_named(std::initializer_list<std::string_view> names) {
  std::vector<const DesignFlag*> out;
  for (const std::string_view name : names) {
    const DesignFlag* f = find_design_flag(name);
    DDPB_CHECK(f != nullptr) << "no flag \"" << name << "\" in the flag table";
    out.push_back(f);
  }
  return out;
}

std::string design_flag_names() {
  std::vector<std::string> names;
  for (const DesignFlag& f : design_flags()) names.push_back(f.name);
  return join_list(names, "or");
}

const DesignFlag* flag_of(const reports::SuiteRun& run) {
  if (run.group != reports::RunGroup::Flags || !run.flag) return nullptr;
  return find_design_flag(run.flag->name);
}

}  // namespace ddpb::bench
