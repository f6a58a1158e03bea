#include "reports/memory_model.h"

#include <cmath>

namespace ddpb::reports {
namespace {

// Note [Model-state memory]: each category, its fp32 bytes per parameter (the optimizer's
// come from K) and the trait that shards it.
struct ModelStateCategory {
  const char* name;
  double bytes_per_parameter;  // < 0: the optimizer's K
  bool DesignInfo::*sharded;
};
constexpr ModelStateCategory kModelStateCategories[] = {
    {"parameters", 4.0, &DesignInfo::shards_parameters},
    {"gradients", 4.0, &DesignInfo::shards_gradients},
    {"optimizer_state", -1.0, &DesignInfo::shards_optimizer_state},
};

const ModelStateCategory* model_state_category(std::string_view name) {
  for (const ModelStateCategory& c : kModelStateCategories)
    if (name == c.name) return &c;
  return nullptr;
}

}  // namespace

std::optional<double> optimizer_state_bytes_per_parameter(std::string_view optimizer,
                                                          double momentum) {
  if (optimizer == "adamw") return 8.0;
  if (optimizer == "sgd") return momentum != 0.0 ? 4.0 : 0.0;
  return std::nullopt;
}

NamedValues<int64_t> expected_model_state(const DesignInfo& design, int64_t params, int world,
                                          double optimizer_bytes_per_parameter) {
  NamedValues<int64_t> out;
  const double shards = world > 0 ? world : 1;
  for (const ModelStateCategory& c : kModelStateCategories) {
    const double per_parameter =
        c.bytes_per_parameter < 0 ? optimizer_bytes_per_parameter : c.bytes_per_parameter;
    const double bytes =
        per_parameter * static_cast<double>(params) / (design.*c.sharded ? shards : 1.0);
    out.emplace_back(c.name, std::llround(bytes));
  }
  return out;
}

NamedValues<int64_t> model_state_at_world(const DesignInfo& design,
                                          const NamedValues<int64_t>& expected, int from_world,
                                          int to_world) {
  NamedValues<int64_t> out;
  for (const auto& [name, bytes] : expected) {
    const ModelStateCategory* c = model_state_category(name);
    const bool sharded = c && design.*c->sharded && to_world > 0;
    out.emplace_back(
        name, sharded ? std::llround(static_cast<double>(bytes) * from_world / to_world) : bytes);
  }
  return out;
}

NamedValues<double> measured_over_expected(const NamedValues<int64_t>& measured,
                                           const NamedValues<int64_t>& expected) {
  NamedValues<double> out;
  int64_t measured_sum = 0, expected_sum = 0;
  for (const auto& [name, bytes] : expected) {
    const int64_t got = named_value(measured, name);
    measured_sum += got, expected_sum += bytes;
    if (bytes > 0) out.emplace_back(name, static_cast<double>(got) / static_cast<double>(bytes));
  }
  if (expected_sum > 0)
    out.emplace_back("model_state",
                     static_cast<double>(measured_sum) / static_cast<double>(expected_sum));
  return out;
}

int64_t total_bytes(const NamedValues<int64_t>& categories) {
  int64_t sum = 0;
  for (const auto& [name, bytes] : categories) sum += bytes;
  return sum;
}

}  // namespace ddpb::reports
