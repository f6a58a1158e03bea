// The bare library's allreduce, timed as `ddpbench collectives` times its own (Note
// [Collectives measurement]): the yardstick of scripts/bench/collectives_vs_raw.sh. Ranks
// are processes started by mpirun (rank and size from OMPI_COMM_WORLD_RANK/SIZE):
//
//   mpirun -np 2 raw_allreduce mpi  MIN_BYTES MAX_BYTES ITERS WARMUP [serialized|single]
//   mpirun -np 2 raw_allreduce gloo MIN_BYTES MAX_BYTES ITERS WARMUP STORE_DIR
//
// mpi:  MPI_Allreduce(MPI_IN_PLACE, f32, MPI_SUM) on MPI_COMM_WORLD, in a process initialised
//       at MPI_THREAD_SERIALIZED (the default: the level ddpbench's MPI backend runs at, as
//       PyTorch's ProcessGroupMPI does; mpi4py asks for MULTIPLE) or at MPI_THREAD_SINGLE.
//       Open MPI takes its internal locks at any level above SINGLE, so SINGLE is the
//       library's floor and SERIALIZED what any program with a communication thread pays;
// gloo: gloo::allreduce, RING, gloo::sum<float>, over a TCP device on 127.0.0.1 whose ranks
//       meet through Gloo's FileStore in STORE_DIR (mpirun only starts the processes).
// After settling (below), for each size (doubling from MIN_BYTES), after WARMUP untimed calls:
// a barrier, ITERS calls back to back, and the slowest rank's (end - start) / ITERS. Rank 0 prints
// one line per size: "bytes time_us". No ddpbench code is linked: this is what the library alone
// does.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) {
    std::fprintf(stderr, "raw_allreduce: %s is not set: start it with mpirun\n", name);
    std::exit(2);
  }
  return std::atoi(v);
}

// One library: its allreduce of `n` floats in place, its barrier, and the max over ranks.
struct Library {
  std::function<void(float*, size_t)> allreduce;
  std::function<void()> barrier;
  std::function<double(double)> max_over_ranks;
};

Library mpi_library(const std::string& thread_level) {
  if (thread_level == "single") {
    MPI_Init(nullptr, nullptr);
  } else {
    int provided = MPI_THREAD_SINGLE;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  }
  Library lib;
  lib.allreduce = [](float* data, size_t n) {
    MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  };
  lib.barrier = [] { MPI_Barrier(MPI_COMM_WORLD); };
  lib.max_over_ranks = [](double v) {
    double out = 0;
    MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return out;
  };
  return lib;
}

Library gloo_library(int rank, int size, const std::string& store_dir) {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  gloo::rendezvous::FileStore store(store_dir);
  context->connectFullMesh(store, device);
  Library lib;
  lib.allreduce = [context](float* data, size_t n) {
    gloo::AllreduceOptions opts(context);
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    opts.setOutput(data, n);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    gloo::allreduce(opts);
  };
  lib.barrier = [context] {
    gloo::BarrierOptions opts(context);
    gloo::barrier(opts);
  };
  // The max of one double: every rank's value gathered by a sum over a one-hot vector.
  lib.max_over_ranks = [context, rank, size](double v) {
    std::vector<double> all(static_cast<size_t>(size), 0.0);
    all[static_cast<size_t>(rank)] = v;
    gloo::AllreduceOptions opts(context);
    opts.setOutput(all.data(), all.size());
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<double>));
    gloo::allreduce(opts);
    double out = 0;
    for (double x : all) out = std::max(out, x);
    return out;
  };
  return lib;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "";
  const std::string last = argc > 6 ? argv[6] : "serialized";
  if (argc < 6 || (which != "mpi" && which != "gloo") || (which == "gloo" && argc < 7) ||
      (which == "mpi" && last != "serialized" && last != "single")) {
    std::fprintf(stderr,
                 "usage: raw_allreduce mpi MIN_BYTES MAX_BYTES ITERS WARMUP [serialized|single]\n"
                 "       raw_allreduce gloo MIN_BYTES MAX_BYTES ITERS WARMUP STORE_DIR\n");
    return 2;
  }
  const size_t min_bytes = std::strtoull(argv[2], nullptr, 10);
  const size_t max_bytes = std::strtoull(argv[3], nullptr, 10);
  const int iters = std::atoi(argv[4]);
  const int warmup = std::atoi(argv[5]);
  const int rank = env_int("OMPI_COMM_WORLD_RANK");
  const int size = env_int("OMPI_COMM_WORLD_SIZE");
  Library lib = which == "mpi" ? mpi_library(last) : gloo_library(rank, size, last);
  std::vector<float> buffer(max_bytes / sizeof(float), 0.0f);
  // Settled as `ddpbench collectives` settles (Note [Settling], bench/collectives/collectives.h):
  // rounds of 16 calls until rank 0 has spent 25 ms in them.
  const size_t settle_n =
      std::max<size_t>(1, std::min<size_t>(min_bytes, 64 * 1024) / sizeof(float));
  const auto settle_start = Clock::now();
  for (bool settled = false; !settled;) {
    for (int i = 0; i < 16; ++i) lib.allreduce(buffer.data(), settle_n);
    const bool done = rank == 0 && Clock::now() - settle_start >= std::chrono::milliseconds(25);
    settled = lib.max_over_ranks(done ? 1.0 : 0.0) > 0;
  }
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    const size_t n = bytes / sizeof(float);
    for (int i = 0; i < warmup; ++i) lib.allreduce(buffer.data(), n);
    lib.barrier();
    const auto start = Clock::now();
    for (int i = 0; i < iters; ++i) lib.allreduce(buffer.data(), n);
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    const double slowest = lib.max_over_ranks(us / iters);
    if (rank == 0) std::printf("%zu %.3f\n", bytes, slowest);
    std::fflush(stdout);
  }
  lib.barrier();
  if (which == "mpi") MPI_Finalize();
  return 0;
}
