# CPU dependencies come from Debian packages: no vendored copies and no downloads.
find_package(Threads REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(fmt REQUIRED)
find_package(CLI11 REQUIRED)
find_package(Gloo REQUIRED)

# MPI (Debian's libopenmpi-dev): the third process-group backend, comm/process_group_mpi.cpp.
# Optional: without it `--backend mpi` is a usage error naming the missing package.
option(DDPB_MPI "Build the MPI process group when an MPI library is found" ON)
set(DDPB_HAVE_MPI OFF)
if(DDPB_MPI)
  find_package(MPI COMPONENTS C)
  set(DDPB_HAVE_MPI ${MPI_C_FOUND})
endif()

# OpenBLAS: we call cblas_sgemm single-threaded per logical device.
find_path(OPENBLAS_INCLUDE_DIR cblas.h
          PATHS /usr/include/x86_64-linux-gnu/openblas-pthread /usr/include/openblas /usr/include
          NO_DEFAULT_PATH)
find_library(OPENBLAS_LIBRARY NAMES openblas REQUIRED)
add_library(ddpb_openblas INTERFACE)
target_include_directories(ddpb_openblas INTERFACE ${OPENBLAS_INCLUDE_DIR})
target_link_libraries(ddpb_openblas INTERFACE ${OPENBLAS_LIBRARY})

# oneDNN (Debian's libdnnl-dev): the CPU convolutions (core/cpu/cpu_conv.cpp). Its OpenMP
# runtime is held to one thread per calling thread through libgomp's omp_set_num_threads.
# Found by hand: Debian's dnnl-config.cmake also demands OpenCL (its GPU runtime), which the
# CPU primitives do not use.
find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp REQUIRED)
find_library(DNNL_LIBRARY NAMES dnnl REQUIRED)
find_library(GOMP_LIBRARY NAMES gomp libgomp.so.1 REQUIRED)
add_library(ddpb_onednn INTERFACE)
target_include_directories(ddpb_onednn SYSTEM INTERFACE ${DNNL_INCLUDE_DIR})
target_link_libraries(ddpb_onednn INTERFACE ${DNNL_LIBRARY} ${GOMP_LIBRARY})

# CUDA is optional: AUTO enables it when a CUDA compiler is found.
set(DDPB_HAVE_CUDA OFF)
set(DDPB_HAVE_NCCL OFF)
if(NOT DDPBENCH_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "80;90")
    endif()
    # One CUDA runtime: the shared one that CUDA::cudart links, not also the static one.
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    enable_language(CUDA)
    # CMake before 3.26 has no C++20 flag for nvcc, so CUDA_STANDARD 20
    # fails to generate ("requires the language dialect CUDA20"). nvcc >= 12 takes -std=c++20;
    # teach CMake the flag.
    if(CMAKE_VERSION VERSION_LESS 3.26 AND CMAKE_CUDA_COMPILER_ID STREQUAL "NVIDIA"
       AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0
       AND NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    find_package(NCCL)
    # cuDNN 9's headers (the CUDA convolutions, core/cuda/cuda_conv.cpp). The library is not
    # linked: cuda_conv.cpp opens libcudnn.so.9 at the first convolution, so that a machine
    # without cuDNN runs every binary (test: NoBinaryLinksCudnn).
    find_path(CUDNN_INCLUDE_DIR cudnn_graph.h HINTS ${CUDAToolkit_INCLUDE_DIRS} REQUIRED)
    set(DDPB_HAVE_CUDA ON)
    set(DDPB_HAVE_NCCL ${NCCL_FOUND})
  elseif(DDPBENCH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "DDPBENCH_CUDA=ON but no CUDA compiler was found")
  endif()
endif()

# NVTX3 is header-only; it ships with the CUDA toolkit.
set(DDPB_HAVE_NVTX OFF)
if(DDPB_NVTX)
  find_path(NVTX3_INCLUDE_DIR nvtx3/nvToolsExt.h
            HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  if(NVTX3_INCLUDE_DIR)
    set(DDPB_HAVE_NVTX ON)
  endif()
endif()
