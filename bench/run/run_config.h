// The configuration of `ddpbench run`: one struct, filled by one parser (bench/cli/cli.cpp),
// printed at start-up and embedded in every report and dump.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/named_enum.h"
#include "comm/process_group.h"
#include "comm/rank_env.h"
#include "core/device.h"
#include "core/ops.h"
#include "core/optim.h"
#include "data/data_format.h"
#include "data/dataloader.h"
#include "impl_ddp/reducer.h"
#include "impl_fsdp/fully_sharded_data_parallel.h"
#include "reports/run_record.h"

namespace ddpb::bench {

// The ranges of the numeric flags (bench/run/cli_flags.h). A CPU run is further bounded by
// kMaxCpuDevices and by the memory its ranks or replicas need (RunConfig::validate).
inline constexpr int64_t kMaxWorldSize = 1024;
static_assert(kMaxWorldSize == comm::kMaxEnvWorldSize, "--world-size and WORLD_SIZE share a limit");
inline constexpr int64_t kMaxCpuDevices = kMaxDeviceIndex;
inline constexpr int64_t kMaxGlobalBatch = int64_t{1} << 30;
inline constexpr int64_t kMaxSteps = 1'000'000'000;
inline constexpr int64_t kMaxAccumulate = 1 << 20;
inline constexpr double kMaxMiB = 1 << 20;  // bucket and coalescing caps: 1 TiB
inline constexpr double kMinTimeoutS = 1e-3, kMaxTimeoutS = 1e6;

// --fsdp-wrap: FSDP's wrapping policy. block: each of the workload family's blocks (a
// transformer block, a ResNet stage) is a unit (WorkloadFamily::blocks); model: no unit, the
// whole model is the root (Note [FSDP's step]).
enum class FsdpWrap : uint8_t { Block, Model };
constexpr NameTable<FsdpWrap, 2> enum_names(FsdpWrap) {
  return {{{"block", FsdpWrap::Block}, {"model", FsdpWrap::Model}}};
}

// The enum-valued fields are parsed from their names once, by the CLI (base/named_enum.h),
// and written back as names in to_json().
struct RunConfig {
  std::string mode = "single";  // the design: a row of bench/run/designs.h
  std::string workload;
  std::string device = "cpu";
  int world_size = 1;                        // dp: number of devices
  std::string devices;                       // dp: explicit list, e.g. "cuda:0,cuda:0"
  double dp_broadcast_mb = 10;               // dp: coalescing cap of replicate and reduce_add
  std::optional<comm::CommBackend> backend;  // ddp (default: nccl on CUDA, gloo on CPU)
  double bucket_cap_mb = 25;                 // ddp
  bool bucket_cap_auto = false;              // ddp: --bucket-cap-mb auto (bench/run/bucket_tuner.h)
  double first_bucket_mb = 1;                // ddp
  bool grad_as_bucket_view = false;
  int64_t accumulate = 1;  // ddp: micro-steps per step (no_sync for the first K-1)
  bool find_unused_params = false;
  bool static_graph = false;  // ddp: Note [DDP static graph] (impl_ddp/reducer.h)
  ddp::CommHook comm_hook = ddp::CommHook::None;
  ddp::PowerSgdOptions powersgd;  // ddp, --comm-hook powersgd: the --powersgd-* flags
  bool no_overlap = false;
  double timeout_s = 300;         // ddp: rendezvous and collective timeout
  std::string inject_fault;       // ddp: KIND@rank=R,step=S (bench/run/fault_injection.h)
  bool check_finite = false;      // ddp: NaN/Inf check on every gradient before the AllReduce
  bool broadcast_buffers = true;  // ddp: rank 0's buffers to every rank before each step
  bool sync_bn = false;           // ddp: BatchNorm layers as SyncBatchNorm
  int zero_stage = 0;         // ddp: --zero-stage, the rows zero1 and zero2 (Note [ZeRO in DDP])
  bool zero_pytorch = false;  // ddp: --zero-variant pytorch, the row zero1-pytorch
  // fsdp: --sharding-strategy, the rows fsdp, fsdp-grad-op, fsdp-no-shard and fsdp-hybrid
  // (resolve_sharding_strategy); empty until resolved, and for every other design.
  std::optional<fsdp::ShardingStrategy> sharding_strategy;
  FsdpWrap fsdp_wrap = FsdpWrap::Block;  // fsdp: which modules are units
  int shard_group_size = 0;   // fsdp hybrid_shard: ranks per shard group; 0: the local world size
  int limit_all_gathers = 2;  // fsdp: outstanding reshards before a gather waits; 0: no limit
  bool forward_prefetch = true;   // fsdp: --no-forward-prefetch
  bool backward_prefetch = true;  // fsdp: --no-backward-prefetch
  int cpu_threads = 1;            // CPU devices: BLAS threads per device (core/cpu/cpu_backend.h)
  // ddp: flight-recorder dumps (default: ddpbench-flight-<port> under $XDG_RUNTIME_DIR, $TMPDIR
  // or /tmp; comm::default_flight_dir)
  std::string flight_dir;
  // ddp: where the ranks meet, as torch's init_method: env:// (the TCPStore at MASTER_ADDR:
  // MASTER_PORT) or file://PATH (a FileStore; Note [File rendezvous] in comm/rendezvous.h).
  std::string rendezvous = "env://";
  // ddp launcher, one node of several (Note [Launcher nodes] in comm/launcher.h); the ranks it
  // starts ignore these.
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;       // 0: a free port (one node only)
  int64_t global_batch = 0;  // the CLI fills in the workload's default when not given
  int64_t steps = 20;        // measured steps
  int64_t warmup = 3;        // steps before the measured ones (they train too)
  uint64_t seed = 0;
  optim::OptimizerConfig optimizer;
  ops::MathMode precision = ops::MathMode::FP32;  // GEMM compute
  ops::AttentionKind attention = ops::AttentionKind::Math;
  bool channels_last = false;  // resnet: images in NHWC (ops::ImageLayout), on both devices
  // The input pipeline (data/): synthetic data unless --data names files.
  std::string data;                       // token shards (gpt) or an image folder (resnet)
  std::optional<DataFormat> data_format;  // --data-format; empty: detected from --data
  // --data-split: a folder of token shards' train or val split (Note [Token splits]); empty:
  // the train split of a folder holding both, else every shard.
  std::optional<DataSplit> data_split;
  int num_workers = 1;      // loader threads; 0: in the training thread
  int prefetch_factor = 2;  // batches in flight per worker
  bool pin_memory = false;  // CUDA: page-locked staging, asynchronous copies
  OnBadSample on_bad_sample = OnBadSample::Fail;
  bool normalize_on_device = false;  // image folders: ship u8 images, normalize on the device
  // The run ends when the loader has given this many epochs (and at --steps at the latest); 0:
  // --steps alone. With --sampler unpadded, ranks may then run out at different steps.
  int64_t epochs = 0;
  bool sampler_padded = true;  // --sampler padded|unpadded: PyTorch's DistributedSampler or not
  bool uneven_join = false;    // --uneven-inputs join (Note [DDP Join]); default fail
  bool join_divide_by_initial_world_size = true;
  bool cuda_graph = false;  // single: capture the step once, replay it (Stream::begin_capture)
  std::string out;          // JSON record
  std::string dump;         // directory for meta.json and safetensors dumps
  std::string init_from;    // safetensors with the initial parameters
  std::string save_params;  // safetensors with the final parameters (primary process)
  bool quiet = false;       // no per-step lines
  bool verbose = false;     // also the config line (the resolved configuration as JSON)
  std::string trace;        // Chrome trace file
  std::string trace_steps;  // "A:B" window of steps to trace

  int64_t total_steps() const { return warmup + steps; }
  // Checks values that the parser cannot (throws UsageError).
  void validate() const;
  // The record's "config", and back (Note [One run field list] in bench/run/run_fields.h);
  // from_json leaves a field the JSON lacks at its default.
  nlohmann::json to_json() const;
  static RunConfig from_json(const nlohmann::json& config);
  nlohmann::json powersgd_json() const;  // the --powersgd-* options
};

}  // namespace ddpb::bench
