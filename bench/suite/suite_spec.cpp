#include "bench/suite/suite_spec.h"

#include <fmt/core.h>

#include <algorithm>
#include <functional>
#include <set>

#include "bench/run/bucket_tuner.h"
#include "bench/run/run_config.h"
#include "core/check.h"
#include "core/ops.h"
#include "workloads/model.h"

namespace ddpb::bench {
namespace {

constexpr size_t kMaxListLength = 64;
constexpr int kMaxWorldSize = 1024;

std::string fmt_mb(double mb) {
  return fmt::format("{:g}", mb);
}

// Typed getters that name the key in their errors.
struct KeyReader {
  const std::string& file;
  const std::string& key;
  const nlohmann::json& value;

  [[noreturn]] void fail(const std::string& why) const {
    throw UsageError(file + ": key \"" + key + "\": " + why);
  }
  bool boolean() const {
    if (!value.is_boolean()) fail("expected true or false");
    return value.get<bool>();
  }
  std::string string() const {
    if (!value.is_string()) fail("expected a string");
    auto s = value.get<std::string>();
    if (s.size() > 256) fail("string longer than 256 characters");
    return s;
  }
  int64_t integer(int64_t lo, int64_t hi) const {
    if (!value.is_number_integer()) fail("expected an integer");
    const auto v = value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(INT64_MAX)
                       ? INT64_MAX
                       : value.get<int64_t>();
    if (v < lo || v > hi) fail(fmt::format("{} is outside [{}, {}]", v, lo, hi));
    return v;
  }
  // One of E's names (base/named_enum.h), as "precision \"fp16\" is not fp32, tf32 or bf16".
  template <typename E>
  E named(const std::string& noun) const {
    const std::string text = string();
    const auto v = enum_from_name<E>(text);
    if (!v) fail(noun + " \"" + text + "\" is not " + enum_choices<E>());
    return *v;
  }
  // A list of E's names, each checked as named<E>() checks one.
  template <typename E>
  std::vector<E> named_list(const std::string& noun) const {
    std::vector<E> out;
    for (const auto& v : list()) out.push_back(KeyReader{file, key, v}.named<E>(noun));
    return out;
  }
  double number(double lo, double hi) const {
    if (!value.is_number()) fail("expected a number");
    const double v = value.get<double>();
    if (!(v >= lo && v <= hi)) fail(fmt::format("{} is outside [{}, {}]", v, lo, hi));
    return v;
  }
  const nlohmann::json& list() const {
    if (!value.is_array()) fail("expected a list");
    if (value.size() > kMaxListLength) fail(fmt::format("more than {} entries", kMaxListLength));
    return value;
  }
  std::vector<std::string> strings() const {
    std::vector<std::string> out;
    for (const auto& v : list()) {
      KeyReader r{file, key, v};
      out.push_back(r.string());
    }
    return out;
  }
};

template <typename E>
std::vector<std::string> names_of(const std::vector<E>& values) {
  std::vector<std::string> out;
  for (E v : values) out.emplace_back(enum_name(v));
  return out;
}

int64_t default_batch(const std::string& workload) {
  try {
    return default_global_batch(workload);
  } catch (const UsageError&) {
    return 0;  // an unknown workload: validate_suite names it
  }
}

}  // namespace

nlohmann::json SuiteSpec::to_json() const {
  return {{"name", name},
          {"device", enum_name(device)},
          {"quick", quick},
          {"workloads", workloads},
          {"modes", names_of(modes)},
          {"world_sizes", world_sizes},
          {"steps", steps},
          {"warmup", warmup},
          {"seed", seed},
          {"per_device_batch", per_device_batch},
          {"bucket_sweep_mb", bucket_sweep_mb},
          {"sweep_workload", sweep_workload},
          {"overlap_off", overlap_off},
          {"bucket_autotune", bucket_autotune},
          {"comm_hooks", names_of(comm_hooks)},
          {"comm_hook_workloads", comm_hook_workloads},
          {"bf16_workloads", bf16_workloads},
          {"precision", enum_name(precision)},
          {"attention", enum_name(attention)},
          {"with_pytorch", with_pytorch},
          {"projection_devices", projection_devices},
          {"projection_topology", projection_topology},
          {"validate_projection", validate_projection},
          {"timeout_s", timeout_s},
          {"correctness_threshold", correctness_threshold},
          {"hook_correctness_threshold", hook_correctness_threshold}};
}

// The communication-bound workloads are where a compression hook can pay off.
std::vector<std::string> SuiteSpec::resolved_comm_hook_workloads() const {
  if (!comm_hook_workloads.empty()) return comm_hook_workloads;
  std::vector<std::string> out;
  if (!sweep_workload.empty()) out.push_back(sweep_workload);
  for (const char* w : {"embed", "mlp-wide"}) {
    if (std::find(workloads.begin(), workloads.end(), w) != workloads.end() &&
        std::find(out.begin(), out.end(), w) == out.end())
      out.push_back(w);
  }
  return out;
}

reports::SuiteMatrix SuiteSpec::to_matrix() const {
  return reports::record_from_json<reports::SuiteMatrix>(to_json());
}

SuiteSpec SuiteSpec::from_json(const nlohmann::json& j) {
  SuiteSpec spec;
  spec.workloads.clear();
  apply_suite_file(spec, j, "suite.json \"suite\" block");
  return spec;
}

SuiteSpec default_suite(DeviceType device, int gpus, bool quick) {
  SuiteSpec s;
  s.device = device;
  s.quick = quick;
  if (device == DeviceType::CUDA) {
    s.name = quick ? "quick-cuda" : "default-cuda";
    s.workloads = {"gpt2-small", "mlp-wide", "embed", "resnet50"};
    s.world_sizes.clear();
    for (int n = 1; n <= std::max(1, gpus); n *= 2) s.world_sizes.push_back(n);
    s.bucket_sweep_mb = {1, 5, 100};
    s.bf16_workloads = {"resnet50"};
    s.projection_devices = {8, 64, 512};
    s.projection_topology = "nvlink+ib-ndr";
  } else {
    s.name = quick ? "quick-cpu" : "default-cpu";
    s.workloads = {"mlp-small", "gpt-tiny", "embed", "resnet-tiny"};
    s.world_sizes = {1, 2};
    s.bucket_sweep_mb = {1, 5};
    // 2 cores are noisy: more steps than on GPUs for stable medians (about a minute in all).
    s.steps = 40;
    s.warmup = 5;
  }
  if (quick) {
    s.steps = 4;
    s.warmup = 1;
    s.bucket_sweep_mb.resize(1);
    if (device != DeviceType::CUDA) s.workloads = {"mlp-small", "gpt-tiny", "embed-tiny"};
  }
  for (const auto& w : s.workloads) s.per_device_batch[w] = default_batch(w);
  // ResNet-50 at 64 images per GPU, the batch its published benchmarks use.
  if (s.per_device_batch.count("resnet50")) s.per_device_batch["resnet50"] = 64;
  s.sweep_workload = s.workloads.front();
  return s;
}

namespace {

using SuiteSetter = std::function<void(const KeyReader&)>;

// One setter per key a suite file may hold, each checking its value's type and range.
std::map<std::string, SuiteSetter> suite_file_setters(SuiteSpec& s, const std::string& file) {
  return {
      {"name", [&](const KeyReader& r) { s.name = r.string(); }},
      {"device", [&](const KeyReader& r) { s.device = r.named<DeviceType>("device"); }},
      {"quick", [&](const KeyReader& r) { s.quick = r.boolean(); }},
      {"workloads", [&](const KeyReader& r) { s.workloads = r.strings(); }},
      {"modes", [&](const KeyReader& r) { s.modes = r.named_list<Mode>("mode"); }},
      {"world_sizes",
       [&](const KeyReader& r) {
         s.world_sizes.clear();
         for (const auto& v : r.list()) {
           s.world_sizes.push_back(
               static_cast<int>(KeyReader{file, r.key, v}.integer(1, kMaxWorldSize)));
         }
       }},
      {"steps", [&](const KeyReader& r) { s.steps = r.integer(1, 100000); }},
      {"warmup", [&](const KeyReader& r) { s.warmup = r.integer(0, 10000); }},
      {"seed",
       [&](const KeyReader& r) { s.seed = static_cast<uint64_t>(r.integer(0, INT64_MAX)); }},
      {"per_device_batch",
       [&](const KeyReader& r) {
         if (!r.value.is_object()) r.fail("expected an object {\"workload\": batch}");
         if (r.value.size() > kMaxListLength) r.fail("too many entries");
         for (const auto& [w, b] : r.value.items()) {
           const std::string sub = r.key + "." + w;
           s.per_device_batch[w] = KeyReader{file, sub, b}.integer(1, 1 << 20);
         }
       }},
      {"bucket_sweep_mb",
       [&](const KeyReader& r) {
         s.bucket_sweep_mb.clear();
         for (const auto& v : r.list())
           s.bucket_sweep_mb.push_back(KeyReader{file, r.key, v}.number(1e-3, 4096));
       }},
      {"sweep_workload", [&](const KeyReader& r) { s.sweep_workload = r.string(); }},
      {"overlap_off", [&](const KeyReader& r) { s.overlap_off = r.boolean(); }},
      {"bucket_autotune", [&](const KeyReader& r) { s.bucket_autotune = r.boolean(); }},
      {"bf16_workloads", [&](const KeyReader& r) { s.bf16_workloads = r.strings(); }},
      {"comm_hooks",
       [&](const KeyReader& r) {
         s.comm_hooks = r.named_list<ddp::CommHook>("hook");
         // "none" is every other DDP run of the suite, not a variant of its own.
         if (std::count(s.comm_hooks.begin(), s.comm_hooks.end(), ddp::CommHook::None))
           r.fail("hook \"none\" is the suite's plain DDP run; list only hooks that compress");
       }},
      {"comm_hook_workloads", [&](const KeyReader& r) { s.comm_hook_workloads = r.strings(); }},
      {"precision", [&](const KeyReader& r) { s.precision = r.named<ops::MathMode>("precision"); }},
      {"attention",
       [&](const KeyReader& r) { s.attention = r.named<ops::AttentionKind>("attention"); }},
      {"with_pytorch", [&](const KeyReader& r) { s.with_pytorch = r.boolean(); }},
      {"projection_devices",
       [&](const KeyReader& r) {
         s.projection_devices.clear();
         for (const auto& v : r.list())
           s.projection_devices.push_back(
               static_cast<int>(KeyReader{file, r.key, v}.integer(1, 1 << 20)));
       }},
      {"projection_topology", [&](const KeyReader& r) { s.projection_topology = r.string(); }},
      {"validate_projection", [&](const KeyReader& r) { s.validate_projection = r.boolean(); }},
      {"timeout_s", [&](const KeyReader& r) { s.timeout_s = r.number(1, 86400); }},
      {"correctness_threshold",
       [&](const KeyReader& r) { s.correctness_threshold = r.number(0, 1); }},
      {"hook_correctness_threshold",
       [&](const KeyReader& r) { s.hook_correctness_threshold = r.number(0, 1); }},
  };
}

}  // namespace

void apply_suite_file(SuiteSpec& s, const nlohmann::json& j, const std::string& file) {
  DDPB_USAGE_CHECK(j.is_object()) << file << ": a suite file is a JSON object of settings";
  const auto setters = suite_file_setters(s, file);
  for (const auto& [key, value] : j.items()) {
    auto it = setters.find(key);
    if (it == setters.end()) {
      std::string known;
      for (const auto& [k, _] : setters) known += (known.empty() ? "" : ", ") + k;
      DDPB_USAGE_FAIL() << file << ": unknown key \"" << key << "\" (known keys: " << known << ")";
    }
    it->second(KeyReader{file, key, value});
  }
  // A new workload list keeps the batches given and fills in defaults for the rest.
  for (const auto& w : s.workloads) {
    if (!s.per_device_batch.count(w)) s.per_device_batch[w] = default_batch(w);
  }
  if (!j.contains("sweep_workload") && !s.workloads.empty() &&
      std::find(s.workloads.begin(), s.workloads.end(), s.sweep_workload) == s.workloads.end()) {
    s.sweep_workload = s.workloads.front();
  }
}

void apply_suite_text(SuiteSpec& spec, const std::string& text, const std::string& file) {
  DDPB_USAGE_CHECK(text.size() <= kMaxSuiteFileBytes)
      << file << ": " << text.size() << " bytes; a suite file is at most " << kMaxSuiteFileBytes;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  DDPB_USAGE_CHECK(!j.is_discarded()) << file << ": not valid JSON";
  apply_suite_file(spec, j, file);
}

void validate_suite(const SuiteSpec& s, int gpus) {
  DDPB_USAGE_CHECK(!s.workloads.empty()) << "suite: \"workloads\" is empty";
  DDPB_USAGE_CHECK(!s.modes.empty()) << "suite: \"modes\" is empty";
  DDPB_USAGE_CHECK(!s.world_sizes.empty()) << "suite: \"world_sizes\" is empty";
  std::set<std::string> seen;
  for (const auto& w : s.workloads) {
    find_workload(w);  // UsageError naming the known presets
    DDPB_USAGE_CHECK(seen.insert(w).second) << "suite: workload " << w << " is listed twice";
    auto b = s.per_device_batch.find(w);
    DDPB_USAGE_CHECK(b != s.per_device_batch.end() && b->second > 0)
        << "suite: no \"per_device_batch\" for workload " << w;
  }
  for (const auto& [w, b] : s.per_device_batch) find_workload(w);
  std::set<int> sizes;
  for (int n : s.world_sizes) {
    DDPB_USAGE_CHECK(n >= 1) << "suite: world size " << n << " must be positive";
    DDPB_USAGE_CHECK(sizes.insert(n).second) << "suite: world size " << n << " is listed twice";
    if (s.device == DeviceType::CUDA) {
      DDPB_USAGE_CHECK(n <= gpus) << "suite: world size " << n << " needs " << n
                                  << " GPUs, this machine has " << gpus
                                  << " (lower \"world_sizes\" or --max-world-size)";
    }
  }
  if (s.device == DeviceType::CUDA) {
    DDPB_USAGE_CHECK(gpus > 0) << "suite: --device cuda, but no usable GPU (use --device cpu)";
  }
  DDPB_USAGE_CHECK(s.sweep_workload.empty() || std::find(s.workloads.begin(), s.workloads.end(),
                                                         s.sweep_workload) != s.workloads.end())
      << "suite: \"sweep_workload\" " << s.sweep_workload << " is not one of the suite's workloads";
  for (const auto& [key, list] : {std::pair{"bf16_workloads", &s.bf16_workloads},
                                  std::pair{"comm_hook_workloads", &s.comm_hook_workloads}}) {
    for (const auto& w : *list) {
      DDPB_USAGE_CHECK(std::find(s.workloads.begin(), s.workloads.end(), w) != s.workloads.end())
          << "suite: \"" << key << "\" names " << w
          << ", which is not one of the suite's workloads";
    }
  }
}

std::string run_file_stem(std::string id) {
  std::replace(id.begin(), id.end(), '/', '_');
  return id;
}

std::vector<SuiteRun> expand_suite(const SuiteSpec& s) {
  using reports::RunGroup;
  std::vector<SuiteRun> runs;
  auto has_mode = [&](Mode m) {
    return std::find(s.modes.begin(), s.modes.end(), m) != s.modes.end();
  };
  auto make = [&](const std::string& workload, Mode mode, int n, int64_t global_batch,
                  RunGroup group, const std::string& variant, std::vector<std::string> extra) {
    SuiteRun r;
    const std::string mode_name(enum_name(mode));
    r.workload = workload;
    r.mode = mode;
    r.world_size = n;
    r.global_batch = global_batch;
    r.group = group;
    r.variant = variant;
    r.status = reports::RunStatus::Pending;
    r.id = workload + "/" + mode_name + "/w" + std::to_string(n) +
           (variant.empty() ? "" : "/" + variant);
    r.args = {"run",
              "--mode",
              mode_name,
              "--workload",
              workload,
              "--device",
              std::string(enum_name(s.device)),
              "--global-batch",
              std::to_string(global_batch),
              "--steps",
              std::to_string(s.steps),
              "--warmup",
              std::to_string(s.warmup),
              "--seed",
              std::to_string(s.seed),
              "--precision",
              std::string(enum_name(s.precision)),
              "--attention",
              std::string(enum_name(s.attention)),
              "--quiet"};
    if (mode != Mode::Single) r.args.insert(r.args.end(), {"--world-size", std::to_string(n)});
    if (mode == Mode::Ddp)
      r.args.insert(r.args.end(), {"--timeout", fmt::format("{:g}", s.timeout_s)});
    // A variant's own --precision or --warmup replaces the suite's.
    for (const char* flag : {"--precision", "--warmup"}) {
      if (std::find(extra.begin(), extra.end(), flag) == extra.end()) continue;
      const auto at = std::find(r.args.begin(), r.args.end(), flag);
      r.args.erase(at, at + 2);
    }
    r.args.insert(r.args.end(), extra.begin(), extra.end());
    runs.push_back(std::move(r));
  };
  const bool parallel = has_mode(Mode::Dp) || has_mode(Mode::Ddp);
  for (const auto& w : s.workloads) {
    const int64_t b = s.per_device_batch.at(w);
    if (has_mode(Mode::Single) || parallel) make(w, Mode::Single, 1, b, RunGroup::Scaling, "", {});
    for (const Mode mode : {Mode::Dp, Mode::Ddp}) {
      if (!has_mode(mode)) continue;
      for (int n : s.world_sizes) make(w, mode, n, n * b, RunGroup::Scaling, "", {});
    }
    // Single device at each larger global batch: the correctness reference of DP and DDP at
    // that world size, and the strong-scaling baseline.
    for (int n : s.world_sizes) {
      if (n > 1 && parallel)
        make(w, Mode::Single, 1, n * b, RunGroup::Reference, fmt::format("b{}", n * b), {});
    }
  }
  const int sweep_n = *std::max_element(s.world_sizes.begin(), s.world_sizes.end());
  for (const auto& w : s.bf16_workloads) {
    if (s.precision == ops::MathMode::BF16) break;  // every run is bf16 already
    const int64_t b = s.per_device_batch.at(w);
    const std::vector<std::string> bf16 = {"--precision", "bf16"};
    if (has_mode(Mode::Single)) make(w, Mode::Single, 1, b, RunGroup::Precision, "bf16", bf16);
    if (has_mode(Mode::Ddp) && sweep_n > 1)
      make(w, Mode::Ddp, sweep_n, sweep_n * b, RunGroup::Precision, "bf16", bf16);
  }
  if (has_mode(Mode::Ddp) && sweep_n > 1 && !s.sweep_workload.empty()) {
    const std::string& w = s.sweep_workload;
    const int64_t g = sweep_n * s.per_device_batch.at(w);
    for (double mb : s.bucket_sweep_mb) {
      make(w, Mode::Ddp, sweep_n, g, RunGroup::BucketSweep, "bucket-" + fmt_mb(mb) + "mb",
           {"--bucket-cap-mb", fmt_mb(mb)});
    }
    if (s.bucket_autotune) {
      // The tuner's search takes its own warm-up; the measured steps are the suite's.
      const int64_t warmup = std::max<int64_t>(s.warmup, BucketCapTuner::kStepsNeeded);
      make(w, Mode::Ddp, sweep_n, g, RunGroup::BucketAutotune, "bucket-auto",
           {"--bucket-cap-mb", "auto", "--warmup", std::to_string(warmup)});
    }
    if (s.overlap_off)
      make(w, Mode::Ddp, sweep_n, g, RunGroup::Overlap, "no-overlap", {"--no-overlap"});
  }
  if (has_mode(Mode::Ddp) && sweep_n > 1) {
    // PowerSGD compresses from the first measured step (PyTorch's minimum of 2 where the
    // warm-up is shorter), so that its step time is the compressed one.
    const std::string start = std::to_string(std::max<int64_t>(2, s.warmup));
    for (const auto& w : s.resolved_comm_hook_workloads()) {
      const int64_t g = sweep_n * s.per_device_batch.at(w);
      for (const ddp::CommHook hook : s.comm_hooks) {
        const std::string h(enum_name(hook));
        std::vector<std::string> args = {"--comm-hook", h};
        if (hook == ddp::CommHook::PowerSGD)
          args.insert(args.end(), {"--powersgd-start-iter", start});
        make(w, Mode::Ddp, sweep_n, g, RunGroup::CommHook, h + "-hook", args);
      }
    }
  }
  return runs;
}

}  // namespace ddpb::bench
