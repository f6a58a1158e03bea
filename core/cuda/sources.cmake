# CUDA backend sources, relative to core/ (included by core/CMakeLists.txt when CUDA is on).
# Kernel files are .cu; host-only orchestration is plain C++ and gets the C++ warnings.
set(DDPB_CUDA_SOURCES
  cuda/cuda_runtime.cpp
  cuda/cuda_backend.cpp
  cuda/cuda_gemm.cpp
  cuda/cuda_elementwise.cu
  cuda/cuda_reduce.cu
  cuda/cuda_norm_softmax.cu
  cuda/cuda_attention.cu
  cuda/cuda_loss_embedding.cu
  cuda/cuda_optim.cu
)

# CMake before 3.26 has no C++20 flag for nvcc, so CUDA_STANDARD 20 (cmake/Dependencies.cmake)
# fails to generate ("requires the language dialect CUDA20"). nvcc >= 12 takes -std=c++20;
# teach CMake the flag for this directory, the only one that compiles .cu files.
if(CMAKE_VERSION VERSION_LESS 3.26 AND CMAKE_CUDA_COMPILER_ID STREQUAL "NVIDIA"
   AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0
   AND NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()
