#include "bench/suite/suite_spec.h"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <functional>
#include <set>

#include "bench/run/bucket_tuner.h"
#include "bench/run/designs.h"
#include "bench/run/run_config.h"
#include "bench/run/run_fields.h"
#include "bench/run/run_flags.h"
#include "core/check.h"
#include "core/ops.h"
#include "reports/json_io.h"
#include "workloads/family.h"
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
    // Issue 48, P31: a C string stops at a NUL, so what follows would be dropped unseen.
    if (s.find('\0') != std::string::npos) fail("a string holds a NUL character (\\u0000)");
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
  // A design's name: a row of the design table (bench/run/designs.h).
  std::string design() const {
    const std::string text = string();
    for (const Design& d : designs())
      if (d.info.name == text) return text;
    fail("mode \"" + text + "\" is not " + design_names());
  }
  // A flag's name: a row of the flag table (bench/suite/design_flags.h).
  const DesignFlag* design_flag() const {
    const std::string text = string();
    if (const DesignFlag* f = find_design_flag(text)) return f;
    fail("flag \"" + text + "\" is not " + design_flag_names());
  }
  std::vector<std::string> design_list() const {
    std::vector<std::string> out;
    for (const auto& v : list()) out.push_back(KeyReader{file, key, v}.design());
    return out;
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
  // Issue 48, P19: an entry listed twice would run twice under one id, and one record would
  // be lost; every list of a suite file refuses it.
  const nlohmann::json& list() const {
    if (!value.is_array()) fail("expected a list");
    if (value.size() > kMaxListLength) fail(fmt::format("more than {} entries", kMaxListLength));
    for (size_t i = 0; i < value.size(); ++i) {
      for (size_t k = 0; k < i; ++k) {
        if (value[i] == value[k])
          fail(fmt::format("{} is listed twice",
                           value[i]
                               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                               .substr(0, 80)));
      }
    }
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

int64_t explicit_global_batch(const SuiteSpec& s, const ExplicitRun& r) {
  if (r.global_batch > 0) return r.global_batch;
  const auto it = s.per_device_batch.find(r.workload);
  return (it != s.per_device_batch.end() ? it->second : default_batch(r.workload)) * r.world_size;
}

std::vector<std::string> flag_names(const std::vector<const DesignFlag*>& flags) {
  std::vector<std::string> out;
  for (const DesignFlag* f : flags) out.emplace_back(f->name);
  return out;
}

nlohmann::json explicit_runs_json(const std::vector<ExplicitRun>& runs) {
  nlohmann::json out = nlohmann::json::array();
  for (const ExplicitRun& r : runs) out.push_back(r.to_json());
  return out;
}

}  // namespace

nlohmann::json ExplicitRun::to_json() const {
  nlohmann::json j = {
      {"name", name}, {"workload", workload}, {"mode", mode}, {"world_size", world_size}};
  if (global_batch > 0) j["global_batch"] = global_batch;
  if (!devices.empty()) j["devices"] = devices;
  if (backend) j["backend"] = enum_name(*backend);
  if (precision) j["precision"] = enum_name(*precision);
  if (attention) j["attention"] = enum_name(*attention);
  if (cuda_graph) j["cuda_graph"] = true;
  if (comm_hook) j["comm_hook"] = enum_name(*comm_hook);
  if (powersgd_rank) j["powersgd_rank"] = *powersgd_rank;
  if (powersgd_start_iter) j["powersgd_start_iter"] = *powersgd_start_iter;
  if (bucket_cap_mb) j["bucket_cap_mb"] = *bucket_cap_mb;
  if (!data.empty()) j["data"] = data;
  if (num_workers) j["num_workers"] = *num_workers;
  if (pin_memory) j["pin_memory"] = true;
  if (normalize_on_device) j["normalize_on_device"] = true;
  return j;
}

std::vector<std::string> ExplicitRun::flags() const {
  std::vector<std::string> f;
  auto add = [&](const char* flag, const std::string& value) { f.insert(f.end(), {flag, value}); };
  if (!devices.empty()) add("--devices", devices);
  if (backend) add("--backend", std::string(enum_name(*backend)));
  if (precision) add("--precision", std::string(enum_name(*precision)));
  if (attention) add("--attention", std::string(enum_name(*attention)));
  if (cuda_graph) f.emplace_back("--cuda-graph");
  if (comm_hook) add("--comm-hook", std::string(enum_name(*comm_hook)));
  if (powersgd_rank) add("--powersgd-rank", std::to_string(*powersgd_rank));
  if (powersgd_start_iter) add("--powersgd-start-iter", std::to_string(*powersgd_start_iter));
  if (bucket_cap_mb) add("--bucket-cap-mb", fmt_mb(*bucket_cap_mb));
  if (!data.empty()) add("--data", data);
  if (num_workers) add("--num-workers", std::to_string(*num_workers));
  if (pin_memory) f.emplace_back("--pin-memory");
  if (normalize_on_device) f.emplace_back("--normalize-on-device");
  return f;
}

nlohmann::json SuiteSpec::to_json() const {
  return {{"name", name},
          {"device", enum_name(device)},
          {"quick", quick},
          {"workloads", workloads},
          {"modes", modes},
          {"world_sizes", world_sizes},
          {"steps", steps},
          {"warmup", warmup},
          {"seed", seed},
          {"per_device_batch", per_device_batch},
          {"bucket_sweep_mb", bucket_sweep_mb},
          {"sweep_workload", sweep_workload},
          {"overlap_off", overlap_off},
          {"loader_workers", loader_workers},
          {"loader_workload", loader_workload},
          {"loader_data", loader_data},
          {"data", data},
          {"bucket_autotune", bucket_autotune},
          {"comm_hooks", names_of(comm_hooks)},
          {"comm_hook_workloads", comm_hook_workloads},
          {"flags", flag_names(flags)},
          {"flags_workload", flags_workload},
          {"flags_repeats", flags_repeats},
          {"design_rounds", design_rounds},
          {"sharding_rounds", sharding_rounds},
          {"bf16_workloads", bf16_workloads},
          {"precision", enum_name(precision)},
          {"attention", enum_name(attention)},
          {"with_pytorch", with_pytorch},
          {"projection_devices", projection_devices},
          {"projection_topology", projection_topology},
          {"validate_projection", validate_projection},
          {"timeout_s", timeout_s},
          {"correctness_threshold", correctness_threshold},
          {"hook_correctness_threshold", hook_correctness_threshold},
          {"runs", explicit_runs_json(runs)}};
}

std::string SuiteSpec::resolved_loader_workload() const {
  if (loader_workers.empty()) return "";
  if (!loader_workload.empty()) return loader_workload;
  const auto images = [](const std::string& w) {
    return family_of(find_workload(w)).traits.files == DataFormat::ImageFolder;
  };
  // The user's own images first: a user who names a folder under "data" wants the loader
  // measured on it, not on the JPEGs the suite makes.
  for (const auto& w : workloads) {
    if (images(w) && data.count(w)) return w;
  }
  for (const auto& w : workloads) {
    if (images(w)) return w;
  }
  return "";
}

std::string SuiteSpec::resolved_loader_data() const {
  if (!loader_data.empty()) return loader_data;
  const auto d = data.find(resolved_loader_workload());
  return d != data.end() ? d->second : kSuiteImageFolder;
}

std::map<std::string, int64_t> SuiteSpec::batches_per_device() const {
  std::map<std::string, int64_t> out;
  for (const auto& w : workloads) out[w] = per_device_batch.at(w);
  for (const ExplicitRun& r : runs) {
    if (out.count(r.workload)) continue;
    const int64_t global = explicit_global_batch(*this, r);
    out[r.workload] = std::max<int64_t>(1, global / std::max(1, r.world_size));
  }
  return out;
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

std::string SuiteSpec::resolved_flags_workload() const {
  if (flags.empty()) return "";
  return flags_workload.empty() ? sweep_workload : flags_workload;
}

reports::SuiteMatrix SuiteSpec::to_matrix() const {
  return reports::record_from_json<reports::SuiteMatrix>(to_json());
}

SuiteSpec SuiteSpec::from_json(const nlohmann::json& j) {
  SuiteSpec spec;
  spec.workloads.clear();
  // A suite written before the sharding group ran none: resumed, it still runs none.
  if (j.is_object() && !j.contains("sharding_rounds")) spec.sharding_rounds = 0;
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
    s.flags = design_flags_named({"find_unused_parameters", "static_graph", "broadcast_buffers_off",
                                  "gradient_as_bucket_view", "sync_bn", "no_sync_k4",
                                  "first_bucket_at_cap", "one_bucket", "fp16_hook", "bf16_hook",
                                  "powersgd_hook"});
    s.projection_devices = {8, 64, 512};
    s.projection_topology = "nvlink+ib-ndr";
  } else {
    s.name = quick ? "quick-cpu" : "default-cpu";
    s.workloads = {"mlp-small", "gpt-tiny", "embed", "resnet-tiny"};
    s.world_sizes = {1, 2};
    s.bucket_sweep_mb = {1, 5};
    // 2 cores are noisy: more steps than on GPUs for stable medians (90 runs, about 4.5 minutes).
    s.steps = 40;
    s.warmup = 5;
    s.flags = design_flags_named({"find_unused_parameters", "static_graph", "broadcast_buffers_off",
                                  "gradient_as_bucket_view", "sync_bn", "no_sync_k4",
                                  "first_bucket_at_cap", "one_bucket", "fp16_hook", "powersgd_hook",
                                  "cpu_threads_all"});
  }
  if (quick) {
    s.steps = 4;
    s.warmup = 1;
    s.flags.clear();  // 4 steps cannot tell a flag's cost from noise
    s.design_rounds = 1;
    s.sharding_rounds = 0;
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

// One setter per key of an entry of "runs" (ExplicitRun).
std::map<std::string, SuiteSetter> explicit_run_setters(ExplicitRun& e) {
  return {
      {"name", [&](const KeyReader& r) { e.name = r.string(); }},
      {"workload", [&](const KeyReader& r) { e.workload = r.string(); }},
      {"mode", [&](const KeyReader& r) { e.mode = r.design(); }},
      {"world_size",
       [&](const KeyReader& r) { e.world_size = static_cast<int>(r.integer(1, kMaxWorldSize)); }},
      {"global_batch", [&](const KeyReader& r) { e.global_batch = r.integer(1, 1 << 24); }},
      {"devices", [&](const KeyReader& r) { e.devices = r.string(); }},
      {"backend", [&](const KeyReader& r) { e.backend = r.named<comm::CommBackend>("backend"); }},
      {"precision", [&](const KeyReader& r) { e.precision = r.named<ops::MathMode>("precision"); }},
      {"attention",
       [&](const KeyReader& r) { e.attention = r.named<ops::AttentionKind>("attention"); }},
      {"cuda_graph", [&](const KeyReader& r) { e.cuda_graph = r.boolean(); }},
      {"comm_hook", [&](const KeyReader& r) { e.comm_hook = r.named<ddp::CommHook>("hook"); }},
      {"powersgd_rank", [&](const KeyReader& r) { e.powersgd_rank = r.integer(1, 1024); }},
      {"powersgd_start_iter",
       [&](const KeyReader& r) { e.powersgd_start_iter = r.integer(1, 1000000); }},
      {"bucket_cap_mb", [&](const KeyReader& r) { e.bucket_cap_mb = r.number(1e-3, 4096); }},
      {"data", [&](const KeyReader& r) { e.data = r.string(); }},
      {"num_workers", [&](const KeyReader& r) { e.num_workers = r.integer(0, kMaxLoaderWorkers); }},
      {"pin_memory", [&](const KeyReader& r) { e.pin_memory = r.boolean(); }},
      {"normalize_on_device", [&](const KeyReader& r) { e.normalize_on_device = r.boolean(); }},
  };
}

// Applies `j`'s keys through `setters`, naming an unknown key and the known ones.
void apply_keys(const std::map<std::string, SuiteSetter>& setters, const nlohmann::json& j,
                const std::string& file, const std::string& prefix) {
  for (const auto& [key, value] : j.items()) {
    const std::string name = prefix + key;
    auto it = setters.find(key);
    if (it == setters.end()) {
      std::string known;
      for (const auto& [k, _] : setters) known += (known.empty() ? "" : ", ") + k;
      DDPB_USAGE_FAIL() << file << ": unknown key \"" << name << "\" (known keys: " << known << ")";
    }
    it->second(KeyReader{file, name, value});
  }
}

std::vector<ExplicitRun> read_explicit_runs(const KeyReader& r) {
  std::vector<ExplicitRun> runs;
  for (const auto& item : r.list()) {
    const std::string at = fmt::format("runs[{}]", runs.size());
    if (!item.is_object()) KeyReader{r.file, at, item}.fail("expected an object");
    ExplicitRun e;
    apply_keys(explicit_run_setters(e), item, r.file, at + ".");
    if (e.name.empty() || e.workload.empty())
      KeyReader{r.file, at, item}.fail("a run needs a \"name\" and a \"workload\"");
    runs.push_back(std::move(e));
  }
  return runs;
}

// Runs start in the results folder: a path relative to where the suite was started is made
// absolute here, once (suite.json then holds the absolute one).
std::string run_path(const std::string& path) {
  std::error_code ec;
  const auto absolute = std::filesystem::absolute(path, ec);
  return ec ? path : absolute.lexically_normal().string();
}

// The setters of the keys about files: the loader group and whole workloads on --data.
std::map<std::string, SuiteSetter> data_setters(SuiteSpec& s, const std::string& file) {
  return {
      {"loader_workers",
       [&](const KeyReader& r) {
         s.loader_workers.clear();
         for (const auto& v : r.list())
           s.loader_workers.push_back(
               static_cast<int>(KeyReader{file, r.key, v}.integer(0, kMaxLoaderWorkers)));
       }},
      {"loader_workload", [&](const KeyReader& r) { s.loader_workload = r.string(); }},
      {"loader_data",
       [&](const KeyReader& r) {
         // kSuiteImageFolder names the folder the suite makes in its results folder.
         s.loader_data = r.string();
         if (!s.loader_data.empty() && s.loader_data != kSuiteImageFolder)
           s.loader_data = run_path(s.loader_data);
       }},
      {"data",
       [&](const KeyReader& r) {
         if (!r.value.is_object()) r.fail("expected an object {\"workload\": \"PATH\"}");
         if (r.value.size() > kMaxListLength) r.fail("too many entries");
         s.data.clear();
         for (const auto& [w, value] : r.value.items()) {
           const KeyReader entry{file, r.key + "." + w, value};
           const std::string path = entry.string();
           if (path.empty()) entry.fail("an empty path");
           s.data[w] = run_path(path);
         }
       }},
  };
}

// One setter per key a suite file may hold, each checking its value's type and range.
std::map<std::string, SuiteSetter> suite_file_setters(SuiteSpec& s, const std::string& file) {
  std::map<std::string, SuiteSetter> setters = data_setters(s, file);
  setters.merge(std::map<std::string, SuiteSetter>{
      {"name", [&](const KeyReader& r) { s.name = r.string(); }},
      {"device", [&](const KeyReader& r) { s.device = r.named<DeviceType>("device"); }},
      {"quick", [&](const KeyReader& r) { s.quick = r.boolean(); }},
      {"workloads", [&](const KeyReader& r) { s.workloads = r.strings(); }},
      {"modes", [&](const KeyReader& r) { s.modes = r.design_list(); }},
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
      {"flags",
       [&](const KeyReader& r) {
         s.flags.clear();
         for (const auto& v : r.list()) s.flags.push_back(KeyReader{file, r.key, v}.design_flag());
         if (std::count(s.flags.begin(), s.flags.end(), &default_design_flag()))
           r.fail("flag \"default\" is every pair's A run; list only flags to price");
       }},
      {"flags_workload", [&](const KeyReader& r) { s.flags_workload = r.string(); }},
      {"flags_repeats", [&](const KeyReader& r) { s.flags_repeats = r.integer(1, 100); }},
      {"design_rounds", [&](const KeyReader& r) { s.design_rounds = r.integer(1, 20); }},
      {"sharding_rounds", [&](const KeyReader& r) { s.sharding_rounds = r.integer(0, 20); }},
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
      {"runs", [&](const KeyReader& r) { s.runs = read_explicit_runs(r); }},
  });
  return setters;
}

}  // namespace

void apply_suite_file(SuiteSpec& s, const nlohmann::json& j, const std::string& file) {
  DDPB_USAGE_CHECK(j.is_object()) << file << ": a suite file is a JSON object of settings";
  apply_keys(suite_file_setters(s, file), j, file, "");
  // A new workload list keeps the batches given and fills in defaults for the rest.
  for (const auto& w : s.workloads) {
    if (!s.per_device_batch.count(w)) s.per_device_batch[w] = default_batch(w);
  }
  if (!j.contains("sweep_workload") &&
      std::find(s.workloads.begin(), s.workloads.end(), s.sweep_workload) == s.workloads.end()) {
    s.sweep_workload = s.workloads.empty() ? "" : s.workloads.front();
  }
}

SuiteSpec suite_from_text(DeviceType device, int gpus, bool quick, const std::string& text,
                          const std::string& file) {
  // The file's own "quick" chooses the defaults its other keys override, as --quick does; a
  // text that is not JSON is refused by apply_suite_text below.
  const nlohmann::json j = reports::json_depth(text) <= reports::kMaxJsonDepth
                               ? nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false)
                               : nlohmann::json();  // refused in one line below
  const bool file_quick =
      j.is_object() && j.contains("quick") && j["quick"].is_boolean() && j["quick"].get<bool>();
  SuiteSpec spec = default_suite(device, gpus, quick || file_quick);
  apply_suite_text(spec, text, file);
  return spec;
}

void apply_suite_text(SuiteSpec& spec, const std::string& text, const std::string& file) {
  DDPB_USAGE_CHECK(text.size() <= kMaxSuiteFileBytes)
      << file << ": " << text.size() << " bytes; a suite file is at most " << kMaxSuiteFileBytes;
  DDPB_USAGE_CHECK(reports::json_depth(text) <= reports::kMaxJsonDepth)  // Note [JSON depth]
      << file << ": nests arrays and objects more than " << reports::kMaxJsonDepth
      << " levels deep; a suite file is a few levels deep";
  // Issue 48, P31: JSON leaves a repeated key to the reader (nlohmann keeps the last), and a
  // NUL byte is no JSON: both are refused rather than read one way silently.
  const size_t nul = text.find('\0');
  DDPB_USAGE_CHECK(nul == std::string::npos)
      << file << ": a NUL byte at offset " << nul << "; a suite file is JSON text";
  std::vector<std::set<std::string>> keys;  // the keys of each object being read
  std::string repeated;
  const auto note_keys = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) keys.emplace_back();
    if (event == Event::object_end && !keys.empty()) keys.pop_back();
    if (event == Event::key && !keys.empty() &&
        !keys.back().insert(parsed.get<std::string>()).second && repeated.empty())
      repeated = parsed.get<std::string>();
    return true;
  };
  nlohmann::json j = nlohmann::json::parse(text, note_keys, /*allow_exceptions=*/false);
  DDPB_USAGE_CHECK(!j.is_discarded()) << file << ": not valid JSON";
  DDPB_USAGE_CHECK(repeated.empty())
      << file << ": key \"" << repeated.substr(0, 80)
      << "\" appears twice in one object (JSON leaves which one counts to the reader)";
  apply_suite_file(spec, j, file);
}

namespace {

void validate_matrix(const SuiteSpec& s, int gpus) {
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
  DDPB_USAGE_CHECK(s.sweep_workload.empty() || std::find(s.workloads.begin(), s.workloads.end(),
                                                         s.sweep_workload) != s.workloads.end())
      << "suite: \"sweep_workload\" " << s.sweep_workload << " is not one of the suite's workloads";
  for (const auto& [w, path] : s.data) {
    DDPB_USAGE_CHECK(std::find(s.workloads.begin(), s.workloads.end(), w) != s.workloads.end())
        << "suite: \"data\" names " << w << ", which is not one of the suite's workloads";
  }
  DDPB_USAGE_CHECK(s.flags_workload.empty() || std::find(s.workloads.begin(), s.workloads.end(),
                                                         s.flags_workload) != s.workloads.end())
      << "suite: \"flags_workload\" " << s.flags_workload << " is not one of the suite's workloads";
  for (const auto& [key, list] : {std::pair{"bf16_workloads", &s.bf16_workloads},
                                  std::pair{"comm_hook_workloads", &s.comm_hook_workloads}}) {
    for (const auto& w : *list) {
      DDPB_USAGE_CHECK(std::find(s.workloads.begin(), s.workloads.end(), w) != s.workloads.end())
          << "suite: \"" << key << "\" names " << w
          << ", which is not one of the suite's workloads";
    }
  }
}

// An explicit run's flags must make sense for its mode, as `ddpbench run` would check them:
// a suite that fails a run on a flag it could have refused up front wastes the runs before.
void validate_explicit_run(const SuiteSpec& s, const ExplicitRun& r, int gpus) {
  const std::string what = "suite: run \"" + r.name + "\": ";
  DDPB_USAGE_CHECK(r.name.size() <= 64 &&
                   std::all_of(r.name.begin(), r.name.end(),
                               [](char c) {
                                 return std::isalnum(static_cast<unsigned char>(c)) || c == '.' ||
                                        c == '_' || c == '-';
                               }))
      << what << "a name is at most 64 letters, digits, '.', '_' or '-'";
  find_workload(r.workload);
  const reports::DesignInfo& design = design_named(r.mode).info;
  const bool single = !design.parallel, buckets = design.has_buckets;
  DDPB_USAGE_CHECK(!single || (r.world_size == 1 && r.devices.empty()))
      << what << "a single-device run has world_size 1 and no devices";
  DDPB_USAGE_CHECK(single || !r.cuda_graph) << what << "cuda_graph is for mode single";
  DDPB_USAGE_CHECK(design.processes_per_rank || !r.backend)
      << what << "backend is for a mode whose ranks are processes ("
      << design_names(&reports::DesignInfo::processes_per_rank) << ")";
  DDPB_USAGE_CHECK(buckets ||
                   (!r.comm_hook && !r.bucket_cap_mb && !r.powersgd_rank && !r.powersgd_start_iter))
      << what << "comm_hook, bucket_cap_mb and powersgd_* are for a mode with buckets ("
      << design_names(&reports::DesignInfo::has_buckets) << ")";
  DDPB_USAGE_CHECK((!r.powersgd_rank && !r.powersgd_start_iter) ||
                   r.comm_hook == ddp::CommHook::PowerSGD)
      << what << "powersgd_* need \"comm_hook\": \"powersgd\"";
  if (!r.devices.empty()) {
    const int count = static_cast<int>(parse_device_list(r.devices).size());  // UsageError
    DDPB_USAGE_CHECK(count == r.world_size)
        << what << "\"devices\" lists " << count << " devices for world_size " << r.world_size;
  } else if (s.device == DeviceType::CUDA) {
    DDPB_USAGE_CHECK(r.world_size <= gpus)
        << what << "world_size " << r.world_size << " needs " << r.world_size
        << " GPUs, this machine has " << gpus << " (or list \"devices\")";
  }
  const int64_t batch = explicit_global_batch(s, r);
  DDPB_USAGE_CHECK(batch % r.world_size == 0)
      << what << "global batch " << batch << " does not divide into " << r.world_size << " ranks";
}

}  // namespace

void validate_suite(const SuiteSpec& s, int gpus) {
  DDPB_USAGE_CHECK(!s.workloads.empty() || !s.runs.empty())
      << "suite: \"workloads\" is empty and there are no \"runs\"";
  if (!s.workloads.empty()) validate_matrix(s, gpus);
  for (const auto& [w, b] : s.per_device_batch) find_workload(w);
  if (s.device == DeviceType::CUDA) {
    DDPB_USAGE_CHECK(gpus > 0) << "suite: --device cuda, but no usable GPU (use --device cpu)";
  }
  for (const DesignFlag* f : s.flags) {
    DDPB_USAGE_CHECK(s.device == DeviceType::CPU || f->cpu_only == nullptr)
        << "suite: flag " << f->name << " prices " << f->cpu_only << "; this suite runs on "
        << enum_name(s.device);
  }
  std::set<std::string> names;
  for (const ExplicitRun& r : s.runs) {
    DDPB_USAGE_CHECK(names.insert(r.name).second)
        << "suite: run \"" << r.name << "\" is listed twice";
    validate_explicit_run(s, r, gpus);
  }
}

std::string run_file_stem(std::string id) {
  std::replace(id.begin(), id.end(), '/', '_');
  return id;
}

namespace {

using reports::RunGroup;

// expand_suite's state: the spec and the runs made so far, one method per group.
class SuiteExpansion {
 public:
  explicit SuiteExpansion(const SuiteSpec& s) : s_(s) {}

  std::vector<SuiteRun> runs() && {
    matrix();
    rounds();
    sharding();
    precision();
    sweep();
    hooks();
    flags();
    loader();
    for (const ExplicitRun& e : s_.runs) {
      make(e.workload, e.mode, e.world_size, explicit_global_batch(s_, e), RunGroup::Explicit,
           e.name, e.flags());
      runs_.back().id = e.name;
    }
    return std::move(runs_);
  }

 private:
  // The suite asks the design table for the designs of each group (Note [The design table]):
  // the reference is the first row that trains on one device, the scaling matrix and the
  // rounds take every parallel row the suite names, the groups that vary DDP's reducer
  // (bucket sweep, autotune, overlap, hooks) take the first named row with buckets, and each
  // flag the first named parallel row with its trait (Note [Design flags]).
  bool has_mode(const std::string& m) const {
    return std::find(s_.modes.begin(), s_.modes.end(), m) != s_.modes.end();
  }
  static std::string reference_mode() {
    for (const Design& d : designs())
      if (!d.info.parallel) return d.info.name;
    return {};
  }
  std::vector<std::string> parallel_modes() const {
    std::vector<std::string> out;
    for (const Design& d : designs())
      if (d.info.parallel && has_mode(d.info.name)) out.push_back(d.info.name);
    return out;
  }
  // The design with buckets whose flags, sweep and hooks the suite prices: not a ZeRO stage,
  // which refuses the hooks and reduce-scatters instead (Note [ZeRO in DDP]).
  std::optional<std::string> bucketed_mode() const {
    for (const Design& d : designs())
      if (d.info.has_buckets && d.zero_stage == 0 && has_mode(d.info.name)) return d.info.name;
    return std::nullopt;
  }
  // The largest world size: where the sweep, the hooks and DDP in bf16 run.
  int sweep_n() const {
    return s_.world_sizes.empty() ? 1
                                  : *std::max_element(s_.world_sizes.begin(), s_.world_sizes.end());
  }

  void make(const std::string& workload, const std::string& mode, int n, int64_t global_batch,
            RunGroup group, const std::string& variant, const std::vector<std::string>& extra) {
    SuiteRun r;
    const std::string& mode_name = mode;
    r.workload = workload;
    r.mode = mode;
    r.world_size = n;
    r.global_batch = global_batch;
    r.group = group;
    r.variant = variant;
    r.status = reports::RunStatus::Pending;
    r.id = workload + "/" + mode_name + "/w" + std::to_string(n) +
           (variant.empty() ? "" : "/" + variant);
    // Note [Typed run configuration]: the run is a RunConfig, and its child's arguments are
    // generated from it (Note [One run field list]).
    RunConfig c;
    c.mode = mode;
    c.workload = workload;
    c.device = enum_name(s_.device);
    c.global_batch = global_batch;
    c.steps = s_.steps;
    c.warmup = s_.warmup;
    c.seed = s_.seed;
    c.precision = s_.precision;
    c.attention = s_.attention;
    c.quiet = true;
    const reports::DesignInfo& design = design_named(mode).info;
    if (design.parallel) c.world_size = n;
    if (design.processes_per_rank) c.timeout_s = s_.timeout_s;
    apply_run_flags(c, extra);  // a variant's own flags replace the suite's
    // The suite's files for the workload, unless the run names its own (the loader group) or is
    // a named run (its own "data" key says).
    if (const auto d = s_.data.find(workload);
        d != s_.data.end() && group != RunGroup::Explicit && c.data.empty())
      c.data = d->second;
    // What the suite chose is written out even where it is the run command's default: the
    // child, and the PyTorch peer that takes the same arguments, rely on no default of theirs.
    std::vector<std::string> pinned = {"--device", "--global-batch", "--steps",    "--warmup",
                                       "--seed",   "--precision",    "--attention"};
    if (design.parallel) pinned.emplace_back("--world-size");
    if (design.processes_per_rank) pinned.emplace_back("--timeout");
    r.args = run_argv(c, pinned);
    r.config = reports::record_from_json<reports::RunConfigInfo>(c.to_json());
    runs_.push_back(std::move(r));
  }

  void matrix() {
    const std::string single = reference_mode();
    const std::vector<std::string> parallel = parallel_modes();
    for (const auto& w : s_.workloads) {
      const int64_t b = s_.per_device_batch.at(w);
      if (has_mode(single) || !parallel.empty()) make(w, single, 1, b, RunGroup::Scaling, "", {});
      for (const std::string& mode : parallel) {
        for (int n : s_.world_sizes) make(w, mode, n, n * b, RunGroup::Scaling, "", {});
      }
      // Single device at each larger global batch: the correctness reference of the parallel
      // designs at that world size, and the strong-scaling baseline.
      for (int n : s_.world_sizes) {
        if (n > 1 && !parallel.empty())
          make(w, single, 1, n * b, RunGroup::Reference, fmt::format("b{}", n * b), {});
      }
    }
  }

  // Note [Design rounds]
  // A design factor measured once on a shared machine is one draw: resnet-tiny's DP over DDP
  // read 1.25x, then 1.22x and 1.46x on reruns, as other processes came and went. So the
  // parallel designs run again at the largest world size, in design_rounds - 1 more rounds
  // after the matrix (whose runs are round 0), each round running every design once, in
  // reverse order on odd rounds, so that a drift over the suite weighs on every design alike
  // (Note [Flag pairs] does the same for flags). The verdict takes its factor from the rounds
  // (reports/verdict.cpp, Note [Factors from rounds]).
  void rounds() {
    const int n = sweep_n();
    if (n <= 1) return;
    const std::vector<std::string> parallel = parallel_modes();
    if (parallel.size() < 2) return;  // nothing to compare
    for (int64_t round = 1; round < s_.design_rounds; ++round) {
      for (const auto& w : s_.workloads) {
        std::vector<std::string> order = parallel;
        if (round % 2) std::reverse(order.begin(), order.end());
        for (const std::string& mode : order) {
          make(w, mode, n, n * s_.per_device_batch.at(w), RunGroup::Rounds,
               fmt::format("round-{}", round), {});
          runs_.back().repeat = round;
        }
      }
    }
  }

  // Note [Sharding rounds]
  // What sharding costs and saves is a ratio between designs on one workload, so it is
  // measured as the design rounds are (Note [Design rounds]): the suite's design with buckets
  // (DDP) and every row in the sharding group (ZeRO's stages, Note [ZeRO in DDP]; FSDP's
  // strategies, Note [FSDP's step]) on the sweep workload at the largest world size, each
  // round running every one of them once, in reverse order on odd rounds. They run whether or
  // not "modes" names them.
  void sharding() {
    const int n = sweep_n();
    const auto base = bucketed_mode();
    if (n <= 1 || !base || s_.sweep_workload.empty()) return;
    std::vector<std::string> order = {*base};
    for (const Design& d : designs())
      if (d.in_sharding_group && d.info.name != *base) order.push_back(d.info.name);
    if (order.size() < 2) return;
    const std::string& w = s_.sweep_workload;
    for (int64_t round = 0; round < s_.sharding_rounds; ++round) {
      std::vector<std::string> this_round = order;
      if (round % 2) std::reverse(this_round.begin(), this_round.end());
      for (const std::string& mode : this_round) {
        make(w, mode, n, n * s_.per_device_batch.at(w), RunGroup::Sharding,
             fmt::format("sharding-r{}", round), {});
        runs_.back().repeat = round;
      }
    }
  }

  void precision() {
    if (s_.precision == ops::MathMode::BF16) return;  // every run is bf16 already
    const int n = sweep_n();
    for (const auto& w : s_.bf16_workloads) {
      const int64_t b = s_.per_device_batch.at(w);
      const std::vector<std::string> bf16 = {"--precision", "bf16"};
      if (has_mode(reference_mode()))
        make(w, reference_mode(), 1, b, RunGroup::Precision, "bf16", bf16);
      if (const auto bucketed = bucketed_mode(); bucketed && n > 1)
        make(w, *bucketed, n, n * b, RunGroup::Precision, "bf16", bf16);
    }
  }

  void sweep() {
    const int n = sweep_n();
    const auto ddp = bucketed_mode();
    if (!ddp || n <= 1 || s_.sweep_workload.empty()) return;
    const std::string& w = s_.sweep_workload;
    const int64_t g = n * s_.per_device_batch.at(w);
    for (double mb : s_.bucket_sweep_mb) {
      make(w, *ddp, n, g, RunGroup::BucketSweep, "bucket-" + fmt_mb(mb) + "mb",
           {"--bucket-cap-mb", fmt_mb(mb)});
    }
    if (s_.bucket_autotune) {
      // The tuner's search takes its own warm-up; the measured steps are the suite's.
      const int64_t warmup = std::max<int64_t>(s_.warmup, BucketCapTuner::kStepsNeeded);
      make(w, *ddp, n, g, RunGroup::BucketAutotune, "bucket-auto",
           {"--bucket-cap-mb", "auto", "--warmup", std::to_string(warmup)});
    }
    if (s_.overlap_off) make(w, *ddp, n, g, RunGroup::Overlap, "no-overlap", {"--no-overlap"});
  }

  void hooks() {
    const int n = sweep_n();
    const auto ddp = bucketed_mode();
    if (!ddp || n <= 1) return;
    // PowerSGD compresses from the first measured step (PyTorch's minimum of 2 where the
    // warm-up is shorter), so that its step time is the compressed one.
    const std::string start = std::to_string(std::max<int64_t>(2, s_.warmup));
    for (const auto& w : s_.resolved_comm_hook_workloads()) {
      const int64_t g = n * s_.per_device_batch.at(w);
      for (const ddp::CommHook hook : s_.comm_hooks) {
        const std::string h(enum_name(hook));
        std::vector<std::string> args = {"--comm-hook", h};
        if (hook == ddp::CommHook::PowerSGD)
          args.insert(args.end(), {"--powersgd-start-iter", start});
        make(w, *ddp, n, g, RunGroup::CommHook, h + "-hook", args);
      }
    }
  }

  // Note [Flag pairs]: every flag is priced against its design's defaults on the same
  // workload, world size, batch and steps. Each round runs the default and every flag once;
  // odd rounds run them in reverse order, so that a drift over the suite (a warming machine, a
  // neighbour) weighs on A and B alike. The ledger compares each flag with the default of its
  // own round. A flag runs on the suite's first parallel design with its trait (Note [Design
  // flags]), and each design with flags gets its own defaults.
  void flags() {
    const int n = sweep_n();
    const std::string w = s_.resolved_flags_workload();
    if (n <= 1 || w.empty()) return;
    for (const Design& d : designs()) {
      std::vector<const DesignFlag*> mine;
      for (const DesignFlag* f : s_.flags)
        if (design_for(*f) == &d) mine.push_back(f);
      if (!mine.empty()) flag_pairs(d.info.name, w, n, mine);
    }
  }

  // The suite's first parallel design a flag applies to, or nullptr.
  const Design* design_for(const DesignFlag& flag) const {
    for (const Design& d : designs())
      if (d.info.parallel && has_mode(d.info.name) && flag.applies_to(d.info)) return &d;
    return nullptr;
  }

  // One design's flags in every round. The flags that price BatchNorm run on a workload that
  // has it (the flags workload, else the suite's first such), each pair with that workload's
  // own default. Without one, a flag that syncs BatchNorm is left out and the others stay
  // (broadcast_buffers_off changes nothing there, which the ledger then shows).
  void flag_pairs(const std::string& design, const std::string& w, int n,
                  const std::vector<const DesignFlag*>& flags) {
    const std::string norm = batch_norm_workload(w);
    std::vector<const DesignFlag*> main, on_norm;
    for (const DesignFlag* f : flags) {
      if (!f->prices_batch_norm || norm == w) {
        main.push_back(f);
      } else if (!norm.empty()) {
        on_norm.push_back(f);
      } else if (!f->syncs_batch_norm) {
        main.push_back(f);
      }
    }
    for (int64_t round = 0; round < s_.flags_repeats; ++round) {
      flag_round(design, w, n, main, round);
      if (!on_norm.empty()) flag_round(design, norm, n, on_norm, round);
    }
  }

  std::string batch_norm_workload(const std::string& preferred) const {
    if (family_of(find_workload(preferred)).traits.batch_norm) return preferred;
    for (const auto& w : s_.workloads)
      if (family_of(find_workload(w)).traits.batch_norm) return w;
    return "";
  }

  // One round of `w`'s pairs: its default and each flag, in reverse order on odd rounds.
  void flag_round(const std::string& design, const std::string& w, int n,
                  const std::vector<const DesignFlag*>& flags, int64_t round) {
    std::vector<const DesignFlag*> order = {&default_design_flag()};
    order.insert(order.end(), flags.begin(), flags.end());
    if (round % 2) std::reverse(order.begin(), order.end());
    const FlagPoint at{n * s_.per_device_batch.at(w), n, s_.warmup};
    for (const DesignFlag* f : order) {
      const FlagArgs run = f->args(at);
      std::string name(f->name);
      std::replace(name.begin(), name.end(), '_', '-');  // ids and file names take hyphens
      make(w, design, n, run.global_batch, RunGroup::Flags,
           fmt::format("flags-{}-r{}", name, round), run.args);
      runs_.back().flag = f->info();
      runs_.back().repeat = round;
    }
  }

  // The input pipeline on files: workers (x pin memory on CUDA) at world size 1.
  void loader() {
    const std::string w = s_.resolved_loader_workload();
    const std::string single = reference_mode();
    if (w.empty() || !has_mode(single)) return;
    const std::string data = s_.resolved_loader_data();
    for (int workers : s_.loader_workers) {
      for (bool pin :
           s_.device == DeviceType::CUDA ? std::vector{false, true} : std::vector{false}) {
        std::vector<std::string> args = {"--data", data, "--num-workers", std::to_string(workers)};
        if (pin) args.emplace_back("--pin-memory");
        make(w, single, 1, s_.per_device_batch.at(w), RunGroup::Loader,
             fmt::format("loader-w{}{}", workers, pin ? "-pin" : ""), args);
      }
    }
  }

  const SuiteSpec& s_;
  std::vector<SuiteRun> runs_;
};

}  // namespace

std::vector<SuiteRun> expand_suite(const SuiteSpec& s) {
  return SuiteExpansion(s).runs();
}

}  // namespace ddpb::bench
