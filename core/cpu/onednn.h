// oneDNN's CPU engine and the calling thread's stream, shared by the convolutions
// (cpu_conv.cpp) and the GEMMs (cpu_matmul.cpp).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

namespace ddpb::cpu {

dnnl::engine& onednn_engine();

// The calling thread's stream, its OpenMP runtime set to `openmp_threads` threads for the
// calls that follow (use_openmp_threads).
dnnl::stream& onednn_stream(int openmp_threads);

}  // namespace ddpb::cpu
