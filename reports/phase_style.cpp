#include "reports/phase_style.h"

#include <array>
#include <cstdint>
#include <utility>

namespace ddpb::reports {
namespace {

// Note [Phase colours]: the vocabulary's phases, then the non-phase spans.
constexpr std::array<std::pair<std::string_view, std::string_view>, 19> kStyles = {{
    {"data", "#edc948"},              // data: yellow
    {"scatter", "#ffbe7d"},           // communication
    {"replicate", "#f28e2b"},         // communication
    {"buffer_broadcast", "#b07aa1"},  // communication
    {"forward", "#4e79a7"},           // compute
    {"sync_bn", "#d4a6c8"},           // communication
    {"gather", "#d37295"},            // communication
    {"loss", "#a0cbe8"},              // compute
    {"backward", "#59a14f"},          // compute
    {"backward_compute", "#8cd17d"},  // compute
    {"comm_exposed", "#ff9da7"},      // communication
    {"reduce", "#e15759"},            // communication
    {"optimizer", "#499894"},         // compute
    {"graph", "#76b7b2"},             // compute: a replayed CUDA graph of the whole step
    {"param_allgather", "#c9a0dc"},   // communication: ZeRO's parameters after the optimizer
    {"param_broadcast", "#9d7660"},   // communication: the same, PyTorch's broadcasts
    {kCollectiveSpan, "#9c755f"},     // not a phase
    {kWaitSpan, "#bab0ac"},           // not a phase
    {kHostSpan, "#79706e"},           // not a phase
}};
constexpr size_t kNumPhases = 16;

// Colours for names outside the table: none of them is in it.
constexpr std::array<std::string_view, 4> kOthers = {"#b6992d", "#86bcb6", "#f1ce63", "#7b848f"};

}  // namespace

const std::vector<std::string>& phase_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (size_t i = 0; i < kNumPhases; ++i) out.emplace_back(kStyles[i].first);
    return out;
  }();
  return names;
}

size_t phase_order(std::string_view name) {
  for (size_t i = 0; i < kStyles.size(); ++i)
    if (kStyles[i].first == name) return i;
  return kStyles.size();
}

std::string phase_color(std::string_view name) {
  const size_t i = phase_order(name);
  if (i < kStyles.size()) return std::string(kStyles[i].second);
  // FNV-1a of the name: the same colour in every chart and every run of the program.
  uint32_t h = 2166136261u;
  for (const char c : name) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  return std::string(kOthers[h % kOthers.size()]);
}

}  // namespace ddpb::reports
