#include "bench/measure/mfu.h"

#include <array>

namespace ddpb::bench {
namespace {

struct Row {
  const char* name_part;  // matched as a substring; more specific rows come first
  const char* label;
  double fp32, tf32, bf16;  // dense TFLOP/s
};

// NVIDIA's published dense figures (the datasheets list tf32/bf16 "with sparsity"; these are
// half of those). SXM and PCIe/NVL parts differ, so their rows are told apart by name.
constexpr std::array<Row, 9> kTable = {{
    {"H200 NVL", "H200 NVL", 60.0, 417.5, 835.5},
    {"H200", "H200 SXM", 67.0, 494.7, 989.4},
    {"H100 PCIe", "H100 PCIe", 51.0, 378.0, 756.0},
    {"H100 NVL", "H100 NVL", 60.0, 417.5, 835.5},
    {"H100", "H100 SXM", 67.0, 494.7, 989.4},
    {"A100", "A100", 19.5, 156.0, 312.0},
    {"L40S", "L40S", 91.6, 183.0, 362.05},
    {"L4", "L4", 30.3, 60.0, 121.0},
    {"A10", "A10", 31.2, 62.5, 125.0},
}};

}  // namespace

std::optional<DatasheetPeak> datasheet_peak(const std::string& gpu_name, ops::MathMode precision) {
  for (const Row& r : kTable) {
    if (gpu_name.find(r.name_part) == std::string::npos) continue;
    const double tflops = precision == ops::MathMode::FP32   ? r.fp32
                          : precision == ops::MathMode::TF32 ? r.tf32
                                                             : r.bf16;
    return DatasheetPeak{tflops * 1e12, std::string("NVIDIA ") + r.label + " datasheet, dense " +
                                            std::string(enum_name(precision))};
  }
  return std::nullopt;
}

std::optional<reports::Mfu> run_mfu(double achieved_flops_per_s, int gpus,
                                    const std::string& gpu_name, ops::MathMode precision) {
  const auto peak = datasheet_peak(gpu_name, precision);
  if (!peak || gpus < 1) return std::nullopt;
  return reports::Mfu{achieved_flops_per_s / (peak->flops_per_s * gpus), peak->flops_per_s,
                      peak->source, gpus};
}

}  // namespace ddpb::bench
