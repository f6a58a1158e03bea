// What `ddpbench suite` runs: the matrix (workloads x modes x world sizes, a DDP bucket-size
// sweep, overlap off, comm hooks), its defaults for the detected hardware, the suite-file
// overrides, and its expansion into a list of `ddpbench run` command lines.
// The results-folder layout and suite.json are described in docs/suite-format.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/run/designs.h"
#include "bench/run/run_config.h"
#include "bench/suite/design_flags.h"
#include "bench/suite/suite_hosts.h"
#include "core/device.h"
#include "core/ops.h"
#include "impl_ddp/comm_hooks.h"
#include "reports/suite_record.h"

namespace ddpb::bench {

// One run a suite file names itself, besides the matrix (key "runs"; group "explicit"): a
// configuration the matrix has no axis for, such as the GPU check's --cuda-graph, --attention
// flash or two-ranks-on-one-GPU runs. Typed like the rest of the spec, it sets only flags that
// name no file: its arguments are rebuilt from these fields, never stored as text.
struct ExplicitRun {
  std::string name;  // its id in suite.json and its file stem: letters, digits, '.', '_', '-'
  std::string workload;
  std::string mode = "single";  // a design's name (bench/run/designs.h)
  int world_size = 1;
  int64_t global_batch = 0;  // 0: the suite's per-device batch of the workload x world_size
  std::string devices;       // dp/ddp: "cuda:0,cuda:0"; empty: the suite's device
  std::optional<comm::CommBackend> backend;                   // ddp
  std::optional<ops::MathMode> precision;                     // empty: the suite's
  std::optional<ops::AttentionKind> attention;                // empty: the suite's
  bool cuda_graph = false;                                    // single
  std::optional<ddp::CommHook> comm_hook;                     // ddp
  std::optional<int64_t> powersgd_rank, powersgd_start_iter;  // ddp, --comm-hook powersgd
  std::optional<double> bucket_cap_mb;                        // ddp
  // Files (docs/cli.md "Data"): a path (kSuiteImageFolder: the one the suite makes) and the
  // loader's settings; empty or unset: synthetic data and the run's defaults.
  std::string data;
  std::optional<int64_t> num_workers;
  bool pin_memory = false, normalize_on_device = false;

  nlohmann::json to_json() const;
  // The `ddpbench run` flags beyond the suite's own (workload, mode, batch, steps...).
  std::vector<std::string> flags() const;
};

// The image folder a suite makes for its loader group, relative to its results folder (where
// its runs start).
inline constexpr const char* kSuiteImageFolder = "data/imagefolder";

struct SuiteSpec {
  std::string name = "default-cpu";
  DeviceType device = DeviceType::CPU;
  bool quick = false;
  std::vector<std::string> workloads;
  // The rows of the design table it scales: by default every row but ZeRO's stages.
  std::vector<std::string> modes = design_names_in_order(/*default_suite=*/true);
  std::vector<int> world_sizes = {1, 2};
  int64_t steps = 20;
  int64_t warmup = 3;
  uint64_t seed = 0;
  std::map<std::string, int64_t> per_device_batch;  // workload -> samples per device
  std::vector<double> bucket_sweep_mb;              // DDP bucket caps besides the default 25
  std::string sweep_workload;                       // where the sweep, overlap-off and hooks run
  bool overlap_off = true;
  bool bucket_autotune = true;  // a --bucket-cap-mb auto run next to the sweep
  std::vector<ddp::CommHook> comm_hooks = {ddp::CommHook::FP16, ddp::CommHook::PowerSGD};
  // Where the comm hooks run (DDP at the largest world size). Empty: the sweep workload, then
  // embed and mlp-wide where the suite has them (comm_hook_workloads()).
  std::vector<std::string> comm_hook_workloads;
  // Workloads also run with --precision bf16 (group "precision"): single at world size 1 and
  // DDP at the largest world size. The GPU default: resnet50.
  std::vector<std::string> bf16_workloads;
  ops::MathMode precision = ops::MathMode::FP32;  // every run's --precision, and the GEMM peak's
  ops::AttentionKind attention = ops::AttentionKind::Math;  // every run's --attention
  bool with_pytorch = false;
  // The projection the suite runs on its own results (bench/project/projection.h): device
  // counts and topology. The CPU default projects this machine (measured) at 2..8 ranks; the
  // GPU default an NVLink node and InfiniBand between nodes at 8, 64 and 512.
  std::vector<int> projection_devices = {2, 4, 8};
  std::string projection_topology = "measured";
  // --validate-projection: adds world size 3 (oversubscribed on a 2-core machine) so that the
  // model's predictions of world sizes 2 and 3 from world size 1 are checked.
  bool validate_projection = false;
  double timeout_s = 300;  // DDP collective timeout; a run's wall limit is 2x this + 60 s
  // On the largest per-tensor relative L2 difference of the final parameters (docs/metrics.md):
  // rounding-level differences grow through ReLU units switching sides over the steps (1.6e-3
  // on embed after 45 steps); a wrong gradient scale gives 0.2 and more.
  double correctness_threshold = 1e-2;       // fp32 paths
  double hook_correctness_threshold = 5e-2;  // with an fp16/bf16 comm hook (lossy by design)
  std::vector<ExplicitRun> runs;             // after the matrix, in this order
  // `suite --hosts` (Note [Runs across hosts]): not a suite-file key; suite.json keeps it
  // beside the matrix ("hosts", "launch"), for --resume.
  SuiteHosts hosts;
  // Group "flags" (the cost ledger, reports/flag_ledger.h): rows of the flag table
  // (bench/suite/design_flags.h, Note [Design flags]), each on the suite's first design with
  // the flag's trait (DDP's reducer flags: the first with buckets) at the largest world size on
  // `flags_workload` (empty: the sweep workload), once with the design's defaults and once with
  // each flag, in `flags_repeats` alternated rounds. Empty: no such group (the quick suites).
  // The flags that price BatchNorm (sync_bn, broadcast_buffers_off) run on a workload with it
  // (this one, else the suite's first such) against that workload's own default.
  std::vector<const DesignFlag*> flags;
  std::string flags_workload;
  int64_t flags_repeats = 3;
  // Note [Design rounds]: the verdict's factor between the designs comes from this many
  // alternated rounds at the largest world size: the matrix's own runs are round 0, group
  // "rounds" the others. 1: the matrix alone (the quick suites).
  int64_t design_rounds = 3;
  // Note [Sharding rounds]: group "sharding", DDP, its ZeRO stages and FSDP on the sweep workload
  // at the largest world size, in this many alternated rounds; 0: none (the quick suites).
  int64_t sharding_rounds = 3;
  // Group "loader": the image workload at world size 1 on an image folder, at each of these
  // loader worker counts (and, on CUDA, with and without --pin-memory). `loader_data` empty:
  // the user's folder for that workload in `data`, else an image folder the suite makes in its
  // results folder (kSuiteImageFolder). Empty workers: no such group. `loader_workload` empty:
  // the first workload with images that `data` puts on files, else the first with images.
  std::vector<int> loader_workers = {0, 1, 2};
  std::string loader_workload;
  std::string loader_data;
  // Files for whole workloads: every run the suite makes of a workload named here (matrix,
  // references, sweep, hooks, bf16) trains on that --data path; the others on synthetic data.
  std::map<std::string, std::string> data;

  // The workload the loader group runs, or "" when there is none.
  std::string resolved_loader_workload() const;
  // The image folder it reads: `loader_data`, the user's `data` of that workload, or
  // kSuiteImageFolder.
  std::string resolved_loader_data() const;

  // The samples per device of every workload the suite runs, the explicit runs' included:
  // the shapes of the GEMM peak measured before the runs.
  std::map<std::string, int64_t> batches_per_device() const;

  nlohmann::json to_json() const;
  // The block of suite.json that holds the matrix.
  reports::SuiteMatrix to_matrix() const;
  std::vector<std::string> resolved_comm_hook_workloads() const;
  // The workload group "flags" runs on, or "" when there is none.
  std::string resolved_flags_workload() const;
  // The inverse of to_json (for --resume); throws UsageError on a bad or unknown key.
  static SuiteSpec from_json(const nlohmann::json& j);
};

// The default suite for `device` on this machine: on GPUs gpt2-small,
// mlp-wide, embed and resnet50 (64 images per GPU; also in bf16) at world sizes 1, 2, 4, ...
// up to the GPU count (`gpus`); on CPU mlp-small, gpt-tiny, embed and resnet-tiny at 1 and 2.
// `quick` shortens every run for a smoke test (on CPU: mlp-small, gpt-tiny and embed-tiny).
SuiteSpec default_suite(DeviceType device, int gpus, bool quick);

// Applies a suite file's keys over `spec`. Unknown keys, wrong types and bad values throw
// UsageError naming the key (the CLI exits 2). `file` names the source in messages.
void apply_suite_file(SuiteSpec& spec, const nlohmann::json& j, const std::string& file);
// Parses suite-file text (size-limited) and applies it; the fuzz target's entry point.
void apply_suite_text(SuiteSpec& spec, const std::string& text, const std::string& file);

// The suite a file describes on `device`: default_suite's, quick when `quick` (--quick) or
// when the file says "quick": true (docs/suite-input.md: 4 steps, no flag ledger, one design
// round, one bucket cap), then the file's keys over it.
SuiteSpec suite_from_text(DeviceType device, int gpus, bool quick, const std::string& text,
                          const std::string& file);

// Suite files are small hand-written JSON; anything larger is a mistake or an attack.
inline constexpr size_t kMaxSuiteFileBytes = size_t{1} << 20;

// Checks the spec on its own (workload names, world sizes against the devices, batch sizes,
// named runs); check_suite_runs (suite_checks.h) adds the checks that need the runtime.
void validate_suite(const SuiteSpec& spec, int gpus);

// One `ddpbench run` of the suite, as suite.json holds it: expand_suite() fills the id, group,
// workload, mode, world size, global batch, variant and args, with status pending.
using reports::SuiteRun;

std::vector<SuiteRun> expand_suite(const SuiteSpec& spec);
// The file name stem of a run's outputs: its id with '/' replaced by '_'.
std::string run_file_stem(std::string id);

}  // namespace ddpb::bench
