// What a ddpbench process does first under an address-space limit (`ulimit -v`).
//
// Note [OpenBLAS under an address-space limit]
// OpenBLAS starts a worker thread per core when it is loaded, before main() runs. Under an
// address-space limit just above what start-up maps (about 1 GB with the CUDA libraries), a
// worker fails to map its buffer and spins for ever in blas_memory_alloc, and the main
// thread joins it at exit() or in fork()'s atfork handler: every command hung, `--help`
// included, and SIGTERM did not end it (issue 48, P1). ddpbench never uses those workers
// (one BLAS thread per device, core/cpu/cpu_runtime.cpp), and OpenBLAS reads
// OPENBLAS_NUM_THREADS only as it loads. So under a finite limit, without that variable,
// main() starts the program again with OPENBLAS_NUM_THREADS=1 (exec ends the workers with
// the old image, never joined); with it, it refuses in one line when the limit leaves less
// than kAddressHeadroomBytes beyond what start-up mapped, before anything maps a buffer.
// Without a limit nothing changes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ddpb {

// What a process needs beyond its start-up mappings: its first buffers and a thread's stack.
inline constexpr int64_t kAddressHeadroomBytes = int64_t{32} << 20;

// Under a finite RLIMIT_AS without OPENBLAS_NUM_THREADS: sets it to 1 and executes this
// program again with the same arguments (does not return); returns otherwise, or when the
// exec fails (the process then goes on as it is).
void restart_without_blas_workers(char** argv);

// The one-line refusal when `limit_bytes` leaves less than kAddressHeadroomBytes beyond
// `mapped_bytes`; nullopt when it is enough or there is no limit.
std::optional<std::string> address_limit_problem(std::optional<int64_t> limit_bytes,
                                                 int64_t mapped_bytes);

}  // namespace ddpb
