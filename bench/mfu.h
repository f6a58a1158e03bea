// Model FLOPs utilisation: the workload's training FLOPs per second (the model's own count,
// bench/trainer.cpp; recomputation such as flash attention's backward is not counted) over
// the GPU's datasheet peak at the run's precision. Measured peaks (bench/gemm_peak.h) answer
// "how close to what this machine's GEMMs reach"; MFU answers "how much of what was bought".
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace ddpb::bench {

struct DatasheetPeak {
  double flops_per_s = 0;  // dense (no structured sparsity), per GPU
  std::string source;      // e.g. "NVIDIA H200 datasheet, dense bf16"
};

// The peak of the GPU called `gpu_name` (as cudaGetDeviceProperties names it) for precision
// fp32, tf32 or bf16; nullopt for a GPU or precision not in the table.
std::optional<DatasheetPeak> datasheet_peak(const std::string& gpu_name,
                                            const std::string& precision);

// {"mfu", "peak_flops_per_s", "source", "gpus"} for a run that reached
// `achieved_flops_per_s` on `gpus` GPUs named `gpu_name`; null when the peak is unknown.
nlohmann::json mfu_json(double achieved_flops_per_s, int gpus, const std::string& gpu_name,
                        const std::string& precision);

}  // namespace ddpb::bench
