# CUDA micro-benchmarks (CUDA builds only). Included from bench/micro/CMakeLists.txt with
#   include(${CMAKE_CURRENT_LIST_DIR}/cuda.cmake)
# *before* that file's Google Benchmark check: cuda_gemm_bench is a plain main (no
# libbenchmark), so it must not be dropped on machines without libbenchmark-dev.
# Paths are relative to this file, so it works from any including directory.
if(DDPB_HAVE_CUDA)
  # ddpb::ops::gemm (cuBLASLt, epilogues, dispatch) against plain cuBLAS on the GEMMs of
  # gpt2-small (batch 8 x seq 1024) and mlp-wide (batch 64), fp32 and tf32, CUDA-event timed.
  # scripts/gpu_check.sh runs it; without a GPU it exits 1 with "no CUDA device".
  add_executable(cuda_gemm_bench ${CMAKE_CURRENT_LIST_DIR}/cuda_gemm_bench.cpp)
  target_link_libraries(cuda_gemm_bench PRIVATE ddpb_bench_run ddpb_workloads ddpb_core CUDA::cublas CUDA::cudart
                                                nlohmann_json::nlohmann_json)
  target_compile_options(cuda_gemm_bench PRIVATE -Wall -Wextra)
endif()
if(DDPB_HAVE_CUDA)
  # The batch-norm kernels at resnet50's shapes in both layouts, against the copy bandwidth
  # (scripts/gpu_check.sh runs it; a plain main like cuda_gemm_bench).
  add_executable(cuda_bn_bench ${CMAKE_CURRENT_LIST_DIR}/cuda_bn_bench.cpp)
  target_link_libraries(cuda_bn_bench PRIVATE ddpb_bench_run ddpb_core CUDA::cudart
                                              nlohmann_json::nlohmann_json)
  target_compile_options(cuda_bn_bench PRIVATE -Wall -Wextra)
endif()
