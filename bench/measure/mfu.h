// Model FLOPs utilisation: the workload's training FLOPs per second (the model's own count,
// bench/run/trainer.cpp; recomputation such as flash attention's backward is not counted) over
// the GPU's datasheet peak at the run's precision. Measured peaks (bench/measure/gemm_peak.h)
// answer "how close to what this machine's GEMMs reach"; MFU answers "how much of what was bought".
#pragma once

#include <optional>
#include <string>

#include "core/ops.h"
#include "reports/run_record.h"

namespace ddpb::bench {

struct DatasheetPeak {
  double flops_per_s = 0;  // dense (no structured sparsity), per GPU
  std::string source;      // e.g. "NVIDIA H200 datasheet, dense bf16"
};

// The peak of the GPU called `gpu_name` (as cudaGetDeviceProperties names it) for precision
// `precision`; nullopt for a GPU not in the table.
std::optional<DatasheetPeak> datasheet_peak(const std::string& gpu_name, ops::MathMode precision);

// The MFU (summary.mfu) of a run that reached `achieved_flops_per_s` on `gpus` GPUs named
// `gpu_name`; nullopt when the peak is unknown.
std::optional<reports::Mfu> run_mfu(double achieved_flops_per_s, int gpus,
                                    const std::string& gpu_name, ops::MathMode precision);

}  // namespace ddpb::bench
