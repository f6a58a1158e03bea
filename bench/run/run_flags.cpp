#include "bench/run/run_flags.h"

#include <algorithm>

#include "bench/run/cli_flags.h"
#include "bench/run/designs.h"
#include "core/check.h"
#include "workloads/model.h"

namespace ddpb::bench {

namespace {

// The input pipeline's flags (data/, docs/cli.md "Data").
void add_data_options(CLI::App& run, RunConfig& c) {
  run.add_option("--data", c.data,
                 "train on files: token shards (gpt: nanoGPT's train.bin or llm.c's *.bin) or "
                 "an image folder (resnet: DIR/<class>/*.jpg); default synthetic data");
  add_enum_flag(run, "--data-format", c.data_format, "the format of --data (default: detected)");
  add_enum_flag(run, "--data-split", c.data_split,
                "token shards: the split of a folder holding train*.bin and val*.bin (default "
                "train)");
  add_int_flag(run, "--num-workers", c.num_workers, 0, kMaxLoaderWorkers,
               "loader threads (default 1; 0: the training thread loads, as PyTorch's 0)");
  add_int_flag(run, "--prefetch-factor", c.prefetch_factor, 1, kMaxPrefetchFactor,
               "batches in flight per loader worker (default 2)");
  run.add_flag("--pin-memory", c.pin_memory,
               "CUDA: page-locked staging and asynchronous copies (CPU: does not apply)");
  add_enum_flag(run, "--on-bad-sample", c.on_bad_sample,
                "a corrupt file: fail the run (default) or skip it, counted in the record");
  run.add_flag("--normalize-on-device", c.normalize_on_device,
               "image folders: ship u8 images to the device and normalize there (4x fewer "
               "bytes over PCIe)");
  add_int_flag(run, "--epochs", c.epochs, 0, kMaxSteps,
               "end when the loader has given N epochs (and at --steps at the latest)");
  run.add_option_function<std::string>(
         "--sampler", [&c](const std::string& v) { c.sampler_padded = v == "padded"; },
         "padded (PyTorch's DistributedSampler, the default) or unpadded (each rank its own "
         "share: uneven with --epochs)")
      ->check(CLI::IsMember({"padded", "unpadded"}));
  run.add_option_function<std::string>(
         "--uneven-inputs", [&c](const std::string& v) { c.uneven_join = v == "join"; },
         "ddp with --epochs: fail (default: name the rank that ran out) or join (PyTorch's "
         "Join: shadow the others' collectives)")
      ->check(CLI::IsMember({"fail", "join"}));
  run.add_flag("--no-divide-by-initial-world-size{false}", c.join_divide_by_initial_world_size,
               "join: average gradients over the ranks still active, not the world size");
}

// --comm-hook powersgd's options (PyTorch's PowerSGDState).
void add_powersgd_options(CLI::App& run, RunConfig& c) {
  add_int_flag(run, "--powersgd-rank", c.powersgd.rank, 1, 1024,
               "ddp powersgd: matrix approximation rank (default 1)");
  add_int_flag(run, "--powersgd-start-iter", c.powersgd.start_iter, 0, kMaxSteps,
               "ddp powersgd: plain AllReduce for the first K steps (default 10)");
  add_real_flag(run, "--powersgd-min-compression-rate", c.powersgd.min_compression_rate, 0, 1e9,
                "ddp powersgd: AllReduce a matrix uncompressed below this rate (default 2)");
  add_real_flag(run, "--powersgd-epsilon", c.powersgd.epsilon, 0, 1,
                "ddp powersgd: orthogonalisation epsilon (default 0)");
  run.add_flag("--powersgd-no-error-feedback{false}", c.powersgd.error_feedback,
               "ddp powersgd: no error feedback");
  run.add_flag("--powersgd-no-warm-start{false}", c.powersgd.warm_start,
               "ddp powersgd: a new random Q every step");
}

// Where a DDP job's ranks meet: the launcher's nodes, the rendezvous and the flight recorder.
void add_launcher_options(CLI::App& run, RunConfig& c) {
  add_int_flag(run, "--nnodes", c.nnodes, 1, kMaxWorldSize, "ddp launcher: nodes in the job");
  add_int_flag(run, "--node-rank", c.node_rank, 0, kMaxWorldSize - 1,
               "ddp launcher: this node's index (its ranks are node-rank * world/nnodes + k)");
  run.add_option("--master-addr", c.master_addr,
                 "ddp launcher: rank 0's address, where the store listens (default 127.0.0.1)");
  add_int_flag(run, "--master-port", c.master_port, 1, 65535,
               "ddp launcher: the store's port (required with --nnodes > 1)");
  run.add_option("--rendezvous", c.rendezvous,
                 "ddp: where the ranks meet: env:// (default: the TCPStore at MASTER_ADDR:"
                 "MASTER_PORT) or file://PATH (a FileStore, as torch's file:// init method)");
  run.add_option("--flight-dir", c.flight_dir,
                 "ddp: flight-recorder dump directory (default ddpbench-flight-<port> under "
                 "$XDG_RUNTIME_DIR, $TMPDIR or /tmp)");
}

}  // namespace

void add_run_options(CLI::App& run, RunConfig& c) {
  run.add_option_function<std::string>(
      "--mode", [&c](const std::string& text) { c.mode = design_named(text).info.name; },
      "how the devices train together (the design): " + design_names());
  run.add_option("--workload", c.workload, "workload preset (see `ddpbench workloads`)")
      ->required();
  run.add_option("--device", c.device, "cpu, cpu:N, cuda or cuda:N");
  add_int_flag(run, "--world-size", c.world_size, 1, kMaxWorldSize,
               "dp: number of devices; ddp: number of ranks");
  run.add_option("--devices", c.devices, "dp: explicit device list, e.g. cuda:0,cuda:0");
  add_real_flag(run, "--dp-broadcast-mb", c.dp_broadcast_mb, 1e-3, kMaxMiB,
                "dp: coalescing cap in MiB (default 10)");
  add_enum_flag(run, "--backend", c.backend,
                "ddp: collective library (default nccl on CUDA, gloo on CPU)");
  run.add_option_function<std::string>(
      "--bucket-cap-mb",
      [&c](const std::string& text) {
        c.bucket_cap_auto = text == "auto";
        if (!c.bucket_cap_auto)
          c.bucket_cap_mb = parse_real_flag("--bucket-cap-mb", text, 1e-3, kMaxMiB);
      },
      "ddp: bucket cap in MiB (default 25), or auto: searched during the warm-up");
  add_real_flag(run, "--first-bucket-mb", c.first_bucket_mb, 1e-3, kMaxMiB,
                "ddp: first bucket cap in MiB (default 1)");
  run.add_flag("--grad-as-bucket-view", c.grad_as_bucket_view,
               "ddp: gradients live in the buckets");
  add_int_flag(run, "--accumulate", c.accumulate, 1, kMaxAccumulate,
               "ddp: micro-steps per step (no_sync for K-1)");
  run.add_flag("--find-unused-params", c.find_unused_params, "ddp: mark unused parameters ready");
  run.add_flag(
      "--static-graph", c.static_graph,
      "ddp: the graph is the same every step (learned in the first, buckets rebuilt once)");
  add_enum_flag(run, "--comm-hook", c.comm_hook, "ddp: bucket compression");
  add_powersgd_options(run, c);
  run.add_flag("--no-overlap", c.no_overlap, "ddp: launch every bucket after backward");
  run.add_flag("--no-broadcast-buffers{false}", c.broadcast_buffers,
               "ddp: keep each rank's own buffers (default: rank 0's before every step)");
  run.add_flag("--sync-bn", c.sync_bn, "ddp: BatchNorm as SyncBatchNorm (global batch statistics)");
  add_int_flag(run, "--cpu-threads", c.cpu_threads, 1, 1024,
               "CPU devices: BLAS threads per device (default 1; PyTorch's default is every core)");
  add_real_flag(run, "--timeout", c.timeout_s, kMinTimeoutS, kMaxTimeoutS,
                "seconds a step may go without progress (every mode; Note [Step watchdog]); "
                "ddp: also the rendezvous and collective timeout");
  run.add_option("--inject-fault", c.inject_fault,
                 "ddp: KIND@rank=R,step=S; KIND: crash, hang, slow=MS, slow-backward=MS, "
                 "slow-data=MS, corrupt-grad, store-drop");
  add_int_flag(run, "--global-batch", c.global_batch, 1, kMaxGlobalBatch,
               "samples per step over all devices");
  add_int_flag(run, "--steps", c.steps, 1, kMaxSteps, "measured steps");
  add_int_flag(run, "--warmup", c.warmup, 0, kMaxSteps, "warm-up steps before the measured ones");
  add_int_flag(run, "--seed", c.seed, 0, INT64_MAX, "seed for initialisation, data and shuffling");
  run.add_option("--optimizer", c.optimizer.name, "sgd or adamw");
  add_real_flag(run, "--lr", c.optimizer.lr, 0, 1e6, "learning rate", LowerBound::Open);
  add_real_flag(run, "--momentum", c.optimizer.momentum, 0, 1, "SGD momentum");
  add_real_flag(run, "--weight-decay", c.optimizer.weight_decay, 0, 1e6, "weight decay");
  run.add_flag("--cuda-graph", c.cuda_graph,
               "single: capture the steady-state step once and replay it (CUDA graph; on CPU "
               "the recorded ops)");
  add_enum_flag(run, "--attention", c.attention,
                "math keeps the [B,H,T,T] probabilities, flash is tiled and keeps [B,H,T]");
  // --math is the flag's earlier name, kept so that older scripts still run.
  add_enum_flag(run, "--precision,--math", c.precision,
                "GEMM compute (weights, optimizer state and gradients stay f32)");
  run.add_flag("--channels-last", c.channels_last,
               "resnet: images in NHWC, PyTorch's channels_last (default NCHW)");
  add_data_options(run, c);
  run.add_option("--out", c.out, "write the JSON record here");
  run.add_option("--dump", c.dump, "write init/final parameters, batches and meta.json here");
  run.add_option("--init-from", c.init_from, "start from these parameters (safetensors)");
  run.add_option("--save-params", c.save_params, "write the final parameters (safetensors) here");
  run.add_flag("--quiet", c.quiet, "no per-step lines");
  run.add_flag("--verbose", c.verbose, "also print the resolved configuration (JSON)");
  run.add_option("--trace", c.trace, "write a Chrome trace (Perfetto, chrome://tracing) here");
  run.add_option("--trace-steps", c.trace_steps, "trace only steps A:B (1-based, inclusive)");
  run.add_flag("--check-finite", c.check_finite, "ddp: stop on a NaN/Inf gradient, naming it");
  add_launcher_options(run, c);
}

RunConfig parse_run_flags(const std::vector<std::string>& args) {
  DDPB_USAGE_CHECK(!args.empty() && args.front() == "run") << "not the arguments of `ddpbench run`";
  CLI::App app{"ddpbench"};
  RunConfig config;
  CLI::App* run = app.add_subcommand("run");
  add_run_options(*run, config);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses from the back
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
  if (run->count("--global-batch") == 0)
    config.global_batch = default_global_batch(config.workload);
  return config;
}

RunConfig parse_run_args(const std::vector<std::string>& args) {
  RunConfig config = parse_run_flags(args);
  config.validate();
  return config;
}

}  // namespace ddpb::bench
