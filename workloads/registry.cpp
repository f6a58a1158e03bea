// The registry of workload families and presets (Note [Workload families]), and the
// factories, which ask the spec's family.
#include <deque>
#include <mutex>
#include <sstream>

#include "core/check.h"
#include "core/functional.h"
#include "workloads/family.h"

namespace ddpb {
namespace {

// Families and presets, only ever added to: a deque keeps every reference handed out valid.
struct Registry {
  std::mutex mutex;
  std::deque<WorkloadFamily> families;
  std::deque<WorkloadSpec> presets;

  const WorkloadFamily* family(const std::string& name) {
    for (const auto& f : families) {
      if (f.name == name) return &f;
    }
    return nullptr;
  }
  const WorkloadSpec* preset(const std::string& name) {
    for (const auto& s : presets) {
      if (s.name == name) return &s;
    }
    return nullptr;
  }
  void add_family(WorkloadFamily f) {
    DDPB_CHECK(!f.name.empty() && family(f.name) == nullptr)
        << "workload family '" << f.name << "' is empty or already registered";
    DDPB_CHECK(f.make_model && f.make_dataset && f.parameter_count && f.training_gemms &&
               f.batch_shapes)
        << "workload family '" << f.name << "' lacks one of its functions";
    DDPB_CHECK(f.default_batch > 0) << "workload family '" << f.name << "': default_batch";
    if (!f.blocks)  // optional: without blocks a sharded design wraps the whole model
      f.blocks = [](const WorkloadSpec&) { return std::vector<std::vector<std::string>>{}; };
    families.push_back(std::move(f));
  }
  void add_preset(WorkloadSpec s) {
    DDPB_CHECK(!s.name.empty() && preset(s.name) == nullptr)
        << "workload preset '" << s.name << "' is empty or already registered";
    DDPB_CHECK(family(s.family) != nullptr)
        << "workload preset '" << s.name << "' names no known family ('" << s.family << "')";
    presets.push_back(std::move(s));
  }
};

Registry& registry() {
  static Registry* r = [] {
    auto* built = new Registry;  // never destroyed: lookups may run during static teardown
    for (WorkloadFamily& f : builtin_families()) built->add_family(std::move(f));
    for (WorkloadSpec& s : builtin_presets()) built->add_preset(std::move(s));
    return built;
  }();
  return *r;
}

}  // namespace

void register_workload_family(WorkloadFamily family) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.add_family(std::move(family));
}

void register_workload_preset(WorkloadSpec preset) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.add_preset(std::move(preset));
}

const WorkloadFamily& workload_family(const std::string& name) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const WorkloadFamily* f = r.family(name);
  DDPB_CHECK(f != nullptr) << "no workload family is named '" << name << "'";
  return *f;
}

const WorkloadFamily& family_of(const WorkloadSpec& spec) {
  return workload_family(spec.family);
}

std::vector<std::string> workload_family_names() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& f : r.families) names.push_back(f.name);
  return names;
}

std::vector<WorkloadSpec> workload_presets() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return {r.presets.begin(), r.presets.end()};
}

const WorkloadSpec& find_workload(const std::string& name) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (const WorkloadSpec* s = r.preset(name)) return *s;
  std::ostringstream known;
  for (const auto& s : r.presets) known << (known.tellp() ? ", " : "") << s.name;
  DDPB_USAGE_FAIL() << "unknown workload '" << name << "' (known: " << known.str() << ")";
  return r.presets.front();
}

int64_t estimated_parameter_count(const WorkloadSpec& spec) {
  return family_of(spec).parameter_count(spec);
}

int64_t default_global_batch(const std::string& workload) {
  return family_of(find_workload(workload)).default_batch;
}

nlohmann::json preset_json(const WorkloadSpec& s) {
  const WorkloadFamily& f = family_of(s);
  const BatchShapes batch = f.batch_shapes(s, f.default_batch);
  return {{"name", s.name},
          {"family", s.family},
          {"description", s.description},
          {"gpu_size", s.gpu_size},
          {"default_batch", f.default_batch},
          {"parameters", f.parameter_count(s)},
          {"traits",
           {{"batch_norm", f.traits.batch_norm},
            {"images", f.traits.images},
            {"graph_capturable", f.traits.graph_capturable},
            {"files", f.traits.files ? std::string(enum_name(*f.traits.files)) : ""}}},
          {"batch",
           {{"input", batch.input},
            {"input_dtype", std::string(dtype_name(batch.input_dtype))},
            {"logits", batch.logits}}},
          {"dataset_size", s.dataset_size},
          {"in_features", s.in_features},
          {"hidden", s.hidden},
          {"classes", s.classes},
          {"n_layer", s.n_layer},
          {"n_embd", s.n_embd},
          {"n_head", s.n_head},
          {"seq_len", s.seq_len},
          {"vocab", s.vocab},
          {"ids_per_sample", s.ids_per_sample},
          {"conditional_branch", s.conditional_branch},
          {"blocks", s.blocks},
          {"bottleneck", s.bottleneck},
          {"image_size", s.image_size}};
}

nlohmann::json workload_table_json() {
  nlohmann::json table = nlohmann::json::array();
  for (const auto& w : workload_presets()) table.push_back(preset_json(w));
  return table;
}

autograd::Var model_loss(const autograd::Var& logits, const Tensor& targets) {
  return fn::cross_entropy(logits, targets.view({targets.numel()}));
}

std::unique_ptr<Model> make_model(const WorkloadSpec& spec, const Device& device, uint64_t seed) {
  return family_of(spec).make_model(spec, device, seed);
}

std::shared_ptr<const Dataset> make_dataset(const WorkloadSpec& spec, uint64_t seed) {
  // The data seed is derived from, but distinct from, the initialisation seed.
  return family_of(spec).make_dataset(spec, seed ^ 0xD47A5EEDull);
}

}  // namespace ddpb
