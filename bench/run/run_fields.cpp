#include "bench/run/run_fields.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>

#include "bench/run/cli_flags.h"
#include "bench/run/designs.h"

namespace ddpb::bench {
namespace {

using nlohmann::json;

// Each row reaches its field through an accessor: a generic lambda such as
// [](auto& c) -> auto& { return c.optimizer.lr; }, which gives T& on a RunConfig to fill and
// const T& on one to read, so a row names its field once.
template <class Access>
using FieldOf = std::remove_cvref_t<decltype(std::declval<Access>()(std::declval<RunConfig&>()))>;

const RunConfig& defaults() {
  static const RunConfig config;
  return config;
}

// The flag and its value as text, unless the value is the default and the flag not pinned.
template <class Access, class Text>
auto valued_argv(Access access, Text text) {
  return [access, text](const RunConfig& c, const RunField& f,
                        bool pinned) -> std::vector<std::string> {
    if (!pinned && access(c) == access(defaults())) return {};
    return {f.name(), text(access(c))};
  };
}

// The flag alone, unless the value is the default: giving a switch sets the other value, so a
// switch at its default has nothing to write, pinned or not.
template <class Access>
auto switch_argv(Access access) {
  return [access](const RunConfig& c, const RunField& f, bool) -> std::vector<std::string> {
    if (access(c) == access(defaults())) return {};
    return {f.name()};
  };
}

RunField row(std::string flag, std::string key, std::string help) {
  RunField f;
  f.flag = std::move(flag);
  f.key = std::move(key);
  f.help = std::move(help);
  return f;
}

template <class Access>
RunField integer(std::string flag, std::string key, Access access, int64_t lo, int64_t hi,
                 std::string help) {
  using T = FieldOf<Access>;
  RunField f = row(std::move(flag), std::move(key), std::move(help));
  f.bind = [access, lo, hi](CLI::App& app, RunConfig& c, const RunField& self) {
    return add_int_flag(app, self.flag, access(c), lo, hi, self.help);
  };
  f.get = [access](const RunConfig& c) { return json(access(c)); };
  f.set = [access](RunConfig& c, const json& v) { access(c) = v.get<T>(); };
  f.argv = valued_argv(access, [](T v) { return fmt::format("{}", v); });
  return f;
}

// A float field is recorded and written as the user wrote it (as_written): 0.05, not
// 0.05000000074505806, which parses back to the same float.
template <class T>
double real_value(T v) {
  if constexpr (std::is_same_v<T, float>) {
    return as_written(v);
  } else {
    return v;
  }
}

template <class Access>
RunField real(std::string flag, std::string key, Access access, double lo, double hi,
              std::string help, LowerBound lower = LowerBound::Closed) {
  using T = FieldOf<Access>;
  RunField f = row(std::move(flag), std::move(key), std::move(help));
  f.bind = [access, lo, hi, lower](CLI::App& app, RunConfig& c, const RunField& self) {
    return add_real_flag(app, self.flag, access(c), lo, hi, self.help, lower);
  };
  f.get = [access](const RunConfig& c) { return json(real_value(access(c))); };
  f.set = [access](RunConfig& c, const json& v) { access(c) = static_cast<T>(v.get<double>()); };
  f.argv = valued_argv(access, [](T v) { return fmt::format("{}", real_value(v)); });
  return f;
}

template <class Access>
RunField text(std::string flag, std::string key, Access access, std::string help) {
  RunField f = row(std::move(flag), std::move(key), std::move(help));
  f.bind = [access](CLI::App& app, RunConfig& c, const RunField& self) {
    return app.add_option(self.flag, access(c), self.help);
  };
  f.get = [access](const RunConfig& c) { return json(access(c)); };
  f.set = [access](RunConfig& c, const json& v) { access(c) = v.get<std::string>(); };
  f.argv = valued_argv(access, [](const std::string& v) { return v; });
  return f;
}

// An E or an optional<E> (empty unless the flag is given: recorded as "").
template <class Access>
RunField named(std::string flag, std::string key, Access access, std::string help) {
  using T = FieldOf<Access>;
  using E = typename EnumOf<T>::type;
  constexpr bool kOptional = !std::is_same_v<T, E>;
  RunField f = row(std::move(flag), std::move(key), std::move(help));
  f.bind = [access](CLI::App& app, RunConfig& c, const RunField& self) {
    return add_enum_flag(app, self.flag, access(c), self.help);
  };
  const auto name_of = [](const T& v) -> std::string {
    if constexpr (kOptional) {
      return v ? std::string(enum_name(*v)) : std::string();
    } else {
      return std::string(enum_name(v));
    }
  };
  f.get = [access, name_of](const RunConfig& c) { return json(name_of(access(c))); };
  f.set = [access](RunConfig& c, const json& v) {
    const std::string name = v.get<std::string>();
    if constexpr (kOptional) {
      if (name.empty()) {
        access(c).reset();
        return;
      }
    }
    access(c) = parse_enum_flag<E>("config", name);
  };
  f.argv = valued_argv(access, name_of);
  return f;
}

// A bool that a flag sets to the other value: --pin-memory (true), --no-broadcast-buffers
// (false, CLI11's "{false}").
template <class Access>
RunField toggle(std::string flag, std::string key, Access access, std::string help) {
  RunField f = row(std::move(flag), std::move(key), std::move(help));
  f.bind = [access](CLI::App& app, RunConfig& c, const RunField& self) {
    return app.add_flag(access(defaults()) ? self.flag + "{false}" : self.flag, access(c),
                        self.help);
  };
  f.get = [access](const RunConfig& c) { return json(access(c)); };
  f.set = [access](RunConfig& c, const json& v) { access(c) = v.get<bool>(); };
  f.argv = switch_argv(access);
  return f;
}

// A bool given as one of two words: --sampler padded|unpadded.
template <class Access>
RunField choice(std::string flag, std::string key, Access access, std::string yes, std::string no,
                std::string help) {
  RunField f = row(std::move(flag), std::move(key), std::move(help));
  f.bind = [access, yes, no](CLI::App& app, RunConfig& c, const RunField& self) {
    return app
        .add_option_function<std::string>(
            self.flag, [&target = access(c), yes](const std::string& v) { target = v == yes; },
            self.help)
        ->check(CLI::IsMember({yes, no}));
  };
  const auto word = [yes, no](bool v) { return v ? yes : no; };
  f.get = [access, word](const RunConfig& c) { return json(word(access(c))); };
  f.set = [access, yes](RunConfig& c, const json& v) { access(c) = v.get<std::string>() == yes; };
  f.argv = valued_argv(access, word);
  return f;
}

// In the record, set by no flag: what PyTorch's equivalent call would also be given.
RunField recorded(std::string key, std::function<json(const RunConfig&)> get,
                  std::function<void(RunConfig&, const json&)> set = {}) {
  RunField f = row("", std::move(key), "");
  f.get = std::move(get);
  f.set = std::move(set);
  return f;
}

// The fields that need more than a builder: --mode is a row of the design table, given
// always; --bucket-cap-mb is a size or auto, recorded as two fields.
RunField mode_field() {
  RunField f = row("--mode", "/mode", "how the devices train together (the design)");
  // The names are read when the option is added: a design registered later is listed too.
  f.bind = [](CLI::App& app, RunConfig& c, const RunField& self) {
    return app.add_option_function<std::string>(
        self.flag, [&c](const std::string& text) { c.mode = design_named(text).info.name; },
        self.help + ": " + design_names());
  };
  f.get = [](const RunConfig& c) { return json(c.mode); };
  f.set = [](RunConfig& c, const json& v) { c.mode = v.get<std::string>(); };
  f.argv = [](const RunConfig& c, const RunField& self, bool) {
    return std::vector<std::string>{self.name(), c.mode};
  };
  return f;
}

RunField bucket_cap_field() {
  RunField f = row("--bucket-cap-mb", "/bucket_cap_mb",
                   "ddp: bucket cap in MiB (default 25), or auto: searched during the warm-up");
  f.bind = [](CLI::App& app, RunConfig& c, const RunField& self) {
    return app.add_option_function<std::string>(
        self.flag,
        [&c](const std::string& text) {
          c.bucket_cap_auto = text == "auto";
          if (!c.bucket_cap_auto)
            c.bucket_cap_mb = parse_real_flag("--bucket-cap-mb", text, 1e-3, kMaxMiB);
        },
        self.help);
  };
  f.get = [](const RunConfig& c) { return json(c.bucket_cap_mb); };
  f.set = [](RunConfig& c, const json& v) { c.bucket_cap_mb = v.get<double>(); };
  f.argv = [](const RunConfig& c, const RunField& self, bool pinned) -> std::vector<std::string> {
    if (c.bucket_cap_auto) return {self.name(), "auto"};
    if (!pinned && c.bucket_cap_mb == defaults().bucket_cap_mb) return {};
    return {self.name(), fmt::format("{}", c.bucket_cap_mb)};
  };
  return f;
}

#define DDPB_FIELD(path) \
  [](auto& c) -> auto& { \
    return c.path;       \
  }

// What the run trains, on what, for how long.
void add_run_rows(std::vector<RunField>& rows) {
  rows.push_back(mode_field());
  RunField workload = text("--workload", "/workload", DDPB_FIELD(workload),
                           "workload preset (see `ddpbench workloads`)");
  workload.argv = [](const RunConfig& c, const RunField& self, bool) {
    return std::vector<std::string>{self.name(), c.workload};
  };
  rows.push_back(std::move(workload));
  rows.push_back(text("--device", "/device", DDPB_FIELD(device), "cpu, cpu:N, cuda or cuda:N"));
  rows.push_back(integer("--world-size", "/world_size", DDPB_FIELD(world_size), 1, kMaxWorldSize,
                         "dp: number of devices; ddp: number of ranks"));
  rows.push_back(text("--devices", "/devices", DDPB_FIELD(devices),
                      "dp: explicit device list, e.g. cuda:0,cuda:0"));
  rows.push_back(real("--dp-broadcast-mb", "/dp_broadcast_mb", DDPB_FIELD(dp_broadcast_mb), 1e-3,
                      kMaxMiB, "dp: coalescing cap in MiB (default 10)"));
  rows.push_back(named("--backend", "/backend", DDPB_FIELD(backend),
                       "ddp: collective library (default nccl on CUDA, gloo on CPU)"));
}

// DDP's reducer, its comm hook and PyTorch's PowerSGDState.
void add_ddp_rows(std::vector<RunField>& rows) {
  rows.push_back(bucket_cap_field());
  rows.push_back(recorded(
      "/bucket_cap_auto", [](const RunConfig& c) { return json(c.bucket_cap_auto); },
      [](RunConfig& c, const json& v) { c.bucket_cap_auto = v.get<bool>(); }));
  rows.push_back(real("--first-bucket-mb", "/first_bucket_mb", DDPB_FIELD(first_bucket_mb), 1e-3,
                      kMaxMiB, "ddp: first bucket cap in MiB (default 1)"));
  rows.push_back(toggle("--grad-as-bucket-view", "/grad_as_bucket_view",
                        DDPB_FIELD(grad_as_bucket_view), "ddp: gradients live in the buckets"));
  rows.push_back(integer("--accumulate", "/accumulate", DDPB_FIELD(accumulate), 1, kMaxAccumulate,
                         "ddp: micro-steps per step (no_sync for K-1)"));
  rows.push_back(toggle("--find-unused-params", "/find_unused_params",
                        DDPB_FIELD(find_unused_params), "ddp: mark unused parameters ready"));
  rows.push_back(
      toggle("--static-graph", "/static_graph", DDPB_FIELD(static_graph),
             "ddp: the graph is the same every step (learned in the first, buckets rebuilt once)"));
  rows.push_back(
      named("--comm-hook", "/comm_hook", DDPB_FIELD(comm_hook), "ddp: bucket compression"));
  rows.push_back(integer("--powersgd-rank", "/powersgd/rank", DDPB_FIELD(powersgd.rank), 1, 1024,
                         "ddp powersgd: matrix approximation rank (default 1)"));
  rows.push_back(integer("--powersgd-start-iter", "/powersgd/start_iter",
                         DDPB_FIELD(powersgd.start_iter), 0, kMaxSteps,
                         "ddp powersgd: plain AllReduce for the first K steps (default 10)"));
  rows.push_back(real("--powersgd-min-compression-rate", "/powersgd/min_compression_rate",
                      DDPB_FIELD(powersgd.min_compression_rate), 0, 1e9,
                      "ddp powersgd: AllReduce a matrix uncompressed below this rate (default 2)"));
  rows.push_back(real("--powersgd-epsilon", "/powersgd/epsilon", DDPB_FIELD(powersgd.epsilon), 0, 1,
                      "ddp powersgd: orthogonalisation epsilon (default 0)"));
  rows.push_back(toggle("--powersgd-no-error-feedback", "/powersgd/error_feedback",
                        DDPB_FIELD(powersgd.error_feedback), "ddp powersgd: no error feedback"));
  rows.push_back(toggle("--powersgd-no-warm-start", "/powersgd/warm_start",
                        DDPB_FIELD(powersgd.warm_start),
                        "ddp powersgd: a new random Q every step"));
  rows.push_back(toggle("--no-overlap", "/no_overlap", DDPB_FIELD(no_overlap),
                        "ddp: launch every bucket after backward"));
  rows.push_back(toggle("--no-broadcast-buffers", "/broadcast_buffers",
                        DDPB_FIELD(broadcast_buffers),
                        "ddp: keep each rank's own buffers (default: rank 0's before every step)"));
  rows.push_back(toggle("--sync-bn", "/sync_bn", DDPB_FIELD(sync_bn),
                        "ddp, fsdp: BatchNorm as SyncBatchNorm (global batch statistics)"));
  rows.push_back(integer("--zero-stage", "/zero_stage", DDPB_FIELD(zero_stage), 0, 2,
                         "ddp: ZeRO stage 1 (the optimizer state sharded, the gradients "
                         "reduce-scattered after backward) or 2 (reduce-scattered as backward "
                         "runs); the same as --mode zero1 or zero2; 0: plain DDP (default)"));
  rows.push_back(choice("--zero-variant", "/zero_variant", DDPB_FIELD(zero_pytorch), "pytorch",
                        "paper",
                        "ddp --zero-stage 1: paper (the default: reduce-scatter, all-gather) or "
                        "pytorch (AllReduce, then each shard broadcast, as PyTorch's "
                        "ZeroRedundancyOptimizer; --mode zero1-pytorch)"));
}

// FSDP's strategy, wrapping policy, groups, rate limiter and prefetch (Note [FSDP's step]).
void add_fsdp_rows(std::vector<RunField>& rows) {
  rows.push_back(named("--sharding-strategy", "/sharding_strategy", DDPB_FIELD(sharding_strategy),
                       "fsdp: what each rank shards (the same as --mode fsdp, fsdp-grad-op, "
                       "fsdp-no-shard or fsdp-hybrid)"));
  rows.push_back(named("--fsdp-wrap", "/fsdp_wrap", DDPB_FIELD(fsdp_wrap),
                       "fsdp: each of the workload's blocks a unit (default), or the whole model"));
  rows.push_back(integer("--shard-group-size", "/shard_group_size", DDPB_FIELD(shard_group_size), 1,
                         kMaxWorldSize,
                         "fsdp hybrid_shard: ranks per shard group, dividing the world size "
                         "(default: the ranks of one node)"));
  rows.push_back(integer("--limit-all-gathers", "/limit_all_gathers", DDPB_FIELD(limit_all_gathers),
                         0, 1024,
                         "fsdp: resharded units whose compute may be in flight before the next "
                         "all-gather waits (default 2; 0: no limit)"));
  rows.push_back(toggle("--no-forward-prefetch", "/forward_prefetch", DDPB_FIELD(forward_prefetch),
                        "fsdp: gather each unit only when it runs forward"));
  rows.push_back(toggle("--no-backward-prefetch", "/backward_prefetch",
                        DDPB_FIELD(backward_prefetch),
                        "fsdp: gather each unit only when its backward runs (not the one before "
                        "it, PyTorch's BACKWARD_PRE)"));
}

// The devices' threads, the timeouts and the fault injector.
void add_process_rows(std::vector<RunField>& rows) {
  rows.push_back(
      integer("--cpu-threads", "/cpu_threads", DDPB_FIELD(cpu_threads), 1, 1024,
              "CPU devices: BLAS threads per device (default 1; PyTorch's default is every core)"));
  rows.push_back(real("--timeout", "/timeout_s", DDPB_FIELD(timeout_s), kMinTimeoutS, kMaxTimeoutS,
                      "seconds a step may go without progress (every mode; Note [Step "
                      "watchdog]); ddp: also the rendezvous and collective timeout"));
  rows.push_back(text("--inject-fault", "/inject_fault", DDPB_FIELD(inject_fault),
                      "ddp: KIND@rank=R,step=S; KIND: crash, hang, slow=MS, slow-backward=MS, "
                      "slow-data=MS, corrupt-grad, store-drop"));
}

// The batch, the steps and the optimizer (PyTorch's torch.optim arguments).
void add_training_rows(std::vector<RunField>& rows) {
  rows.push_back(integer("--global-batch", "/global_batch", DDPB_FIELD(global_batch), 1,
                         kMaxGlobalBatch, "samples per step over all devices"));
  rows.push_back(integer("--steps", "/steps", DDPB_FIELD(steps), 1, kMaxSteps, "measured steps"));
  rows.push_back(integer("--warmup", "/warmup", DDPB_FIELD(warmup), 0, kMaxSteps,
                         "warm-up steps before the measured ones"));
  rows.push_back(integer("--seed", "/seed", DDPB_FIELD(seed), 0, INT64_MAX,
                         "seed for initialisation, data and shuffling"));
  rows.push_back(
      text("--optimizer", "/optimizer/name", DDPB_FIELD(optimizer.name), "sgd or adamw"));
  rows.push_back(real("--lr", "/optimizer/lr", DDPB_FIELD(optimizer.lr), 0, 1e6, "learning rate",
                      LowerBound::Open));
  rows.push_back(real("--momentum", "/optimizer/momentum", DDPB_FIELD(optimizer.momentum), 0, 1,
                      "SGD momentum"));
  rows.push_back(real("--weight-decay", "/optimizer/weight_decay",
                      DDPB_FIELD(optimizer.weight_decay), 0, 1e6, "weight decay"));
  using Member = float optim::OptimizerConfig::*;
  for (const auto& adam :
       {std::pair<const char*, Member>{"/optimizer/beta1", &optim::OptimizerConfig::beta1},
        std::pair<const char*, Member>{"/optimizer/beta2", &optim::OptimizerConfig::beta2},
        std::pair<const char*, Member>{"/optimizer/eps", &optim::OptimizerConfig::eps}}) {
    const Member value = adam.second;
    rows.push_back(recorded(
        adam.first, [value](const RunConfig& c) { return json(as_written(c.optimizer.*value)); },
        [value](RunConfig& c, const json& v) {
          c.optimizer.*value = static_cast<float>(v.get<double>());
        }));
  }
  // torch.optim.SGD's arguments that ddpbench's SGD always has at these values.
  rows.push_back(recorded("/optimizer/nesterov", [](const RunConfig&) { return json(false); }));
  rows.push_back(recorded("/optimizer/dampening", [](const RunConfig&) { return json(0.0); }));
}

// How the step computes: graphs, attention, precision, layout.
void add_compute_rows(std::vector<RunField>& rows) {
  rows.push_back(toggle("--cuda-graph", "/cuda_graph", DDPB_FIELD(cuda_graph),
                        "single: capture the steady-state step once and replay it (CUDA graph; "
                        "on CPU the recorded ops)"));
  rows.push_back(named("--attention", "/attention", DDPB_FIELD(attention),
                       "math keeps the [B,H,T,T] probabilities, flash is tiled and keeps [B,H,T]"));
  // --math is the flag's earlier name, kept so that older scripts still run.
  rows.push_back(named("--precision,--math", "/precision", DDPB_FIELD(precision),
                       "GEMM compute (weights, optimizer state and gradients stay f32)"));
  rows.push_back(toggle("--channels-last", "/channels_last", DDPB_FIELD(channels_last),
                        "resnet: images in NHWC, PyTorch's channels_last (default NCHW)"));
}

// The input pipeline (data/, docs/cli.md "Data").
void add_data_rows(std::vector<RunField>& rows) {
  rows.push_back(text("--data", "/data", DDPB_FIELD(data),
                      "train on files: token shards (gpt: nanoGPT's train.bin or llm.c's *.bin) "
                      "or an image folder (resnet: DIR/<class>/*.jpg); default synthetic data"));
  rows.push_back(named("--data-format", "/data_format", DDPB_FIELD(data_format),
                       "the format of --data (default: detected)"));
  rows.push_back(named("--data-split", "/data_split", DDPB_FIELD(data_split),
                       "token shards: the split of a folder holding train*.bin and val*.bin "
                       "(default train)"));
  rows.push_back(
      integer("--num-workers", "/num_workers", DDPB_FIELD(num_workers), 0, kMaxLoaderWorkers,
              "loader threads (default 1; 0: the training thread loads, as PyTorch's 0)"));
  rows.push_back(integer("--prefetch-factor", "/prefetch_factor", DDPB_FIELD(prefetch_factor), 1,
                         kMaxPrefetchFactor, "batches in flight per loader worker (default 2)"));
  rows.push_back(toggle("--pin-memory", "/pin_memory", DDPB_FIELD(pin_memory),
                        "CUDA: page-locked staging and asynchronous copies (CPU: does not apply)"));
  rows.push_back(named("--on-bad-sample", "/on_bad_sample", DDPB_FIELD(on_bad_sample),
                       "a corrupt file: fail the run (default) or skip it, counted in the record"));
  rows.push_back(toggle("--normalize-on-device", "/normalize_on_device",
                        DDPB_FIELD(normalize_on_device),
                        "image folders: ship u8 images to the device and normalize there (4x "
                        "fewer bytes over PCIe)"));
  rows.push_back(integer("--epochs", "/epochs", DDPB_FIELD(epochs), 0, kMaxSteps,
                         "end when the loader has given N epochs (and at --steps at the latest)"));
  rows.push_back(choice("--sampler", "/sampler", DDPB_FIELD(sampler_padded), "padded", "unpadded",
                        "padded (PyTorch's DistributedSampler, the default) or unpadded (each "
                        "rank its own share: uneven with --epochs)"));
  rows.push_back(choice("--uneven-inputs", "/uneven_inputs", DDPB_FIELD(uneven_join), "join",
                        "fail",
                        "ddp with --epochs: fail (default: name the rank that ran out) or join "
                        "(PyTorch's Join: shadow the others' collectives)"));
  rows.push_back(toggle("--no-divide-by-initial-world-size", "/join_divide_by_initial_world_size",
                        DDPB_FIELD(join_divide_by_initial_world_size),
                        "join: average gradients over the ranks still active, not the world size"));
}

// What the run writes, and what it prints.
void add_output_rows(std::vector<RunField>& rows) {
  rows.push_back(text("--out", "/out", DDPB_FIELD(out), "write the JSON record here"));
  rows.push_back(text("--dump", "/dump", DDPB_FIELD(dump),
                      "write init/final parameters, batches and meta.json here"));
  rows.push_back(text("--init-from", "/init_from", DDPB_FIELD(init_from),
                      "start from these parameters (safetensors)"));
  rows.push_back(text("--save-params", "/save_params", DDPB_FIELD(save_params),
                      "write the final parameters (safetensors) here"));
  rows.push_back(toggle("--quiet", "", DDPB_FIELD(quiet), "no per-step lines"));
  rows.push_back(
      toggle("--verbose", "", DDPB_FIELD(verbose), "also print the resolved configuration (JSON)"));
  rows.push_back(text("--trace", "/trace", DDPB_FIELD(trace),
                      "write a Chrome trace (Perfetto, chrome://tracing) here"));
  rows.push_back(text("--trace-steps", "/trace_steps", DDPB_FIELD(trace_steps),
                      "trace only steps A:B (1-based, inclusive)"));
  rows.push_back(toggle("--check-finite", "/check_finite", DDPB_FIELD(check_finite),
                        "ddp: stop on a NaN/Inf gradient, naming it"));
}

// Where a DDP job's ranks meet: the launcher's nodes, the rendezvous and the flight recorder.
void add_launcher_rows(std::vector<RunField>& rows) {
  rows.push_back(integer("--nnodes", "", DDPB_FIELD(nnodes), 1, kMaxWorldSize,
                         "ddp launcher: nodes in the job"));
  rows.push_back(
      integer("--node-rank", "", DDPB_FIELD(node_rank), 0, kMaxWorldSize - 1,
              "ddp launcher: this node's index (its ranks are node-rank * world/nnodes + k)"));
  rows.push_back(
      text("--master-addr", "", DDPB_FIELD(master_addr),
           "ddp launcher: rank 0's address, where the store listens (default 127.0.0.1)"));
  rows.push_back(integer("--master-port", "", DDPB_FIELD(master_port), 1, 65535,
                         "ddp launcher: the store's port (required with --nnodes > 1)"));
  rows.push_back(text("--rendezvous", "/rendezvous", DDPB_FIELD(rendezvous),
                      "ddp: where the ranks meet: env:// (default: the TCPStore at MASTER_ADDR:"
                      "MASTER_PORT) or file://PATH (a FileStore, as torch's file:// init method)"));
  rows.push_back(text("--flight-dir", "/flight_dir", DDPB_FIELD(flight_dir),
                      "ddp: flight-recorder dump directory (default ddpbench-flight-<port> under "
                      "$XDG_RUNTIME_DIR, $TMPDIR or /tmp)"));
}

#undef DDPB_FIELD

std::vector<RunField> make_rows() {
  std::vector<RunField> rows;
  add_run_rows(rows);
  add_ddp_rows(rows);
  add_fsdp_rows(rows);
  add_process_rows(rows);
  add_training_rows(rows);
  add_compute_rows(rows);
  add_data_rows(rows);
  add_output_rows(rows);
  add_launcher_rows(rows);
  return rows;
}

}  // namespace

std::span<const RunField> run_fields() {
  static const std::vector<RunField> rows = make_rows();
  return rows;
}

std::vector<std::string> run_argv(const RunConfig& config, std::span<const std::string> always) {
  std::vector<std::string> out = {"run"};
  for (const RunField& f : run_fields()) {
    if (!f.argv) continue;
    const bool pinned = std::find(always.begin(), always.end(), f.name()) != always.end();
    const std::vector<std::string> args = f.argv(config, f, pinned);
    out.insert(out.end(), args.begin(), args.end());
  }
  return out;
}

nlohmann::json RunConfig::to_json() const {
  json out = json::object();
  for (const RunField& f : run_fields())
    if (!f.key.empty()) out[json::json_pointer(f.key)] = f.get(*this);
  return out;
}

RunConfig RunConfig::from_json(const nlohmann::json& config) {
  RunConfig out;
  for (const RunField& f : run_fields()) {
    if (f.key.empty() || !f.set) continue;
    const json::json_pointer at(f.key);
    if (config.contains(at)) f.set(out, config.at(at));
  }
  return out;
}

}  // namespace ddpb::bench
