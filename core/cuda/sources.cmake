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
  cuda/cuda_flash_attention.cu
  cuda/cuda_loss_embedding.cu
  cuda/cuda_optim.cu
  cuda/cuda_norm_pool.cu
  cuda/cuda_conv.cpp
)
