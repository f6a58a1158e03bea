#include "comm/process_group_mpi.h"

// MPI's C API only: Open MPI's deprecated C++ bindings would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // MPIX_Query_cuda_support (Open MPI)
#endif
#include <pthread.h>

#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/flight_recorder.h"
#include "comm/host_sum.h"
#include "core/clock.h"
#include "core/ops.h"
#include "core/stream.h"

namespace ddpb::comm {
namespace {

using Kind = HostCollective::Kind;

// ---- The process's MPI ---------------------------------------------------------------------

// MPI_Init_thread once per process; MPI_Finalize at exit (Open MPI's mpirun reports a rank
// that exits without it as a failure).
struct MpiProcess {
  int provided = MPI_THREAD_SINGLE;
  // Taken around every MPI call unless the library granted MPI_THREAD_MULTIPLE.
  std::mutex serialize;
  bool serialized() const { return provided < MPI_THREAD_MULTIPLE; }
};

MpiProcess& mpi_process() {
  static MpiProcess* process = [] {
    auto* p = new MpiProcess;  // never destroyed: the atexit hook below may outlive statics
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      DDPB_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &p->provided) ==
                 MPI_SUCCESS)
          << "MPI_Init_thread failed";
      std::atexit([] {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) MPI_Finalize();
      });
    } else {
      MPI_Query_thread(&p->provided);
    }
    DDPB_USAGE_CHECK(p->provided >= MPI_THREAD_SERIALIZED)
        << "the MPI library offers only thread level " << p->provided
        << "; the MPI backend needs MPI_THREAD_SERIALIZED (its collectives run on a thread of "
           "their own)";
    return p;
  }();
  return *process;
}

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}

void check_mpi(int code, const char* call) {
  if (code != MPI_SUCCESS) throw Error(std::string(call) + " failed: " + mpi_error_string(code));
}

// ---- Sums of 16-bit floats -----------------------------------------------------------------

template <DType D>
void sum_16bit(void* in, void* inout, int* len, MPI_Datatype*) {
  static const SumFn sum = sum_function(D);
  sum(inout, in, inout, static_cast<size_t>(*len));
}

// The datatype and operation that sum `dtype`; bf16 and f16 travel as 16-bit words and are
// summed by user-defined operations (created once, freed at MPI_Finalize).
template <DType D>
MPI_Op sum_16bit_op() {
  static const MPI_Op op = [] {
    MPI_Op created;
    MPI_Op_create(&sum_16bit<D>, /*commute=*/1, &created);
    return created;
  }();
  return op;
}

std::pair<MPI_Datatype, MPI_Op> summation(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return {MPI_FLOAT, MPI_SUM};
    case DType::I32:
      return {MPI_INT32_T, MPI_SUM};
    case DType::I64:
      return {MPI_INT64_T, MPI_SUM};
    case DType::U8:
      return {MPI_UINT8_T, MPI_SUM};
    case DType::BF16:
      return {MPI_UINT16_T, sum_16bit_op<DType::BF16>()};
    case DType::F16:
      return {MPI_UINT16_T, sum_16bit_op<DType::F16>()};
  }
  // A throw the compiler sees (DDPB_FAIL's is conditional to it: -Wreturn-type at -O0).
  throw Error(std::string("mpi cannot sum ") + std::string(dtype_name(dtype)));
}

// MPI counts are ints: a payload of more than INT_MAX elements goes in pieces.
constexpr int64_t kMaxCount = INT_MAX;

}  // namespace

struct ProcessGroupMpi::Mpi {
  MPI_Comm comm = MPI_COMM_NULL;
  bool cuda_aware = false;
  std::mutex mutex;
  std::condition_variable stop_changed;
  bool stopping = false;
  std::thread watchdog;
};

ProcessGroupMpi::ProcessGroupMpi(int rank, int size, const ProcessGroupOptions& options,
                                 const std::vector<int>& members)
    : HostProcessGroup(rank, size, options, "mpi"), mpi_(std::make_unique<Mpi>()) {
  MpiProcess& process = mpi_process();
  int world_rank = -1, world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  const bool whole = members.empty();
  DDPB_USAGE_CHECK(whole ? world_rank == rank && world_size == size
                         : static_cast<int>(members.size()) == size &&
                               members[static_cast<size_t>(rank)] == world_rank)
      << "the MPI backend needs its ranks started by one MPI launcher (mpirun or srun): this "
         "process is rank "
      << world_rank << " of " << world_size << " in MPI_COMM_WORLD, but rank " << rank << " of "
      << size << (whole ? " of the job" : " of a sub-group");
  {
    std::unique_lock<std::mutex> lock(process.serialize, std::defer_lock);
    if (process.serialized()) lock.lock();
    if (whole)
      check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &mpi_->comm), "MPI_Comm_dup");
    else  // ordered by the position in `members`
      check_mpi(MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &mpi_->comm), "MPI_Comm_split");
    MPI_Comm_set_errhandler(mpi_->comm, MPI_ERRORS_RETURN);
  }
#if defined(MPIX_CUDA_AWARE_SUPPORT)
  mpi_->cuda_aware = MPIX_Query_cuda_support() == 1;
#endif
  start_thread();
  mpi_->watchdog = std::thread([this] { watch(); });
}

void ProcessGroupMpi::split_without_me() {
  MpiProcess& process = mpi_process();
  std::unique_lock<std::mutex> lock(process.serialize, std::defer_lock);
  if (process.serialized()) lock.lock();
  MPI_Comm none = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(MPI_COMM_WORLD, MPI_UNDEFINED, 0, &none), "MPI_Comm_split");
}

// The communication thread stops first, while the watchdog still watches: a collective that
// never completes (a peer gone) would block the join forever, and the watchdog ends the job
// instead (Note [MPI watchdog]).
ProcessGroupMpi::~ProcessGroupMpi() {
  stop_thread();  // no collective runs after this
  {
    std::lock_guard<std::mutex> lock(mpi_->mutex);
    mpi_->stopping = true;
  }
  mpi_->stop_changed.notify_all();
  if (mpi_->watchdog.joinable()) mpi_->watchdog.join();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && mpi_->comm != MPI_COMM_NULL) {
    MpiProcess& process = mpi_process();
    std::unique_lock<std::mutex> lock(process.serialize, std::defer_lock);
    if (process.serialized()) lock.lock();
    MPI_Comm_free(&mpi_->comm);
  }
}

bool ProcessGroupMpi::cuda_aware() const {
  return mpi_->cuda_aware;
}
bool ProcessGroupMpi::takes_device_pointers() const {
  return mpi_->cuda_aware;
}

// Note [MPI watchdog] (in the header).
void ProcessGroupMpi::watch() {
  pthread_setname_np(pthread_self(), "ddpb-mpi-watch");
  const int64_t limit_ns = static_cast<int64_t>(timeout().count()) * 1'000'000;
  std::unique_lock<std::mutex> lock(mpi_->mutex);
  while (!mpi_->stop_changed.wait_for(lock, std::chrono::milliseconds(50),
                                      [&] { return mpi_->stopping; })) {
    const auto [sequence, since_ns] = running();
    if (sequence < 0 || steady_now_ns() - since_ns <= limit_ns) continue;
    const std::string what = "mpi collective #" + std::to_string(sequence) + " on rank " +
                             std::to_string(rank_) + " of " + std::to_string(size_) +
                             " did not complete within the group timeout of " +
                             std::to_string(timeout().count()) + " ms";
    dump_flight_recorder(what);
    std::fprintf(stderr, "ddpbench: error: %s; ending the MPI job (MPI_Abort)\n", what.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

// ---- The collectives -----------------------------------------------------------------------

namespace {

// MPI_IN_PLACE when `in` is where MPI would read this rank's part of `out` anyway.
const void* in_place_or(const Tensor& in, const void* own_part) {
  return in.raw_data() == own_part ? MPI_IN_PLACE : in.raw_data();
}

void run_reduction(MPI_Comm comm, Kind kind, const Tensor& t, int root, int rank) {
  const auto [type, op] = summation(t.dtype());
  const int64_t n = t.numel();
  const size_t esize = dtype_size(t.dtype());
  for (int64_t start = 0; start < n; start += kMaxCount) {
    const int count = static_cast<int>(std::min(kMaxCount, n - start));
    char* data = static_cast<char*>(t.raw_data()) + static_cast<size_t>(start) * esize;
    if (kind == Kind::AllReduce) {
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, data, count, type, op, comm), "MPI_Allreduce");
    } else {
      const void* send = rank == root ? MPI_IN_PLACE : data;
      check_mpi(MPI_Reduce(send, data, count, type, op, root, comm), "MPI_Reduce");
    }
  }
}

void run_reduce_scatter(MPI_Comm comm, const Tensor& out, const Tensor& in) {
  const auto [type, op] = summation(out.dtype());
  DDPB_CHECK(out.numel() <= kMaxCount)
      << "mpi reduce_scatter of " << out.describe() << ": more than INT_MAX elements per rank";
  // In place (the output is a chunk of the input, as ZeRO-1 reduces) MPI forbids, and its
  // MPI_IN_PLACE puts the result at the start of the buffer: reduce into a copy instead, on
  // the output's device (a CUDA-aware MPI takes device pointers), copied back before return.
  const auto* lo = static_cast<const uint8_t*>(in.raw_data());
  const auto* at = static_cast<const uint8_t*>(out.raw_data());
  const bool aliased = at >= lo && at < lo + in.nbytes();
  const Tensor result = aliased ? Tensor::empty(out.shape(), out.dtype(), out.device()) : out;
  check_mpi(MPI_Reduce_scatter_block(in.raw_data(), result.raw_data(),
                                     static_cast<int>(out.numel()), type, op, comm),
            "MPI_Reduce_scatter_block");
  if (!aliased) return;
  ops::copy(result, out);
  current_stream(out.device()).synchronize();
}

// Byte-moving collectives: bytes as MPI_BYTE, in pieces of at most INT_MAX bytes per rank.
void run_bytes(MPI_Comm comm, const HostCollective& c, const HostTensors& host, int rank, int size,
               int tag) {
  switch (c.kind) {
    case Kind::Broadcast:
      for (size_t at = 0; at < host[0].nbytes(); at += kMaxCount) {
        const int count = static_cast<int>(std::min<size_t>(kMaxCount, host[0].nbytes() - at));
        check_mpi(
            MPI_Bcast(static_cast<char*>(host[0].raw_data()) + at, count, MPI_BYTE, c.root, comm),
            "MPI_Bcast");
      }
      return;
    case Kind::AllGather: {
      const size_t part = host[1].nbytes();
      DDPB_CHECK(part <= static_cast<size_t>(kMaxCount)) << "mpi allgather over INT_MAX bytes";
      char* own = static_cast<char*>(host[0].raw_data()) + static_cast<size_t>(rank) * part;
      check_mpi(MPI_Allgather(in_place_or(host[1], own), static_cast<int>(part), MPI_BYTE,
                              host[0].raw_data(), static_cast<int>(part), MPI_BYTE, comm),
                "MPI_Allgather");
      return;
    }
    case Kind::AllToAll: {
      const size_t part = host[1].nbytes() / static_cast<size_t>(size);
      DDPB_CHECK(part <= static_cast<size_t>(kMaxCount)) << "mpi alltoall over INT_MAX bytes";
      check_mpi(MPI_Alltoall(in_place_or(host[1], host[0].raw_data()), static_cast<int>(part),
                             MPI_BYTE, host[0].raw_data(), static_cast<int>(part), MPI_BYTE, comm),
                "MPI_Alltoall");
      return;
    }
    case Kind::SendRecv: {
      const size_t bytes = host[1].nbytes();
      DDPB_CHECK(bytes <= static_cast<size_t>(kMaxCount)) << "mpi sendrecv over INT_MAX bytes";
      check_mpi(MPI_Sendrecv(host[1].raw_data(), static_cast<int>(bytes), MPI_BYTE, c.dst, tag,
                             host[0].raw_data(), static_cast<int>(bytes), MPI_BYTE, c.src, tag,
                             comm, MPI_STATUS_IGNORE),
                "MPI_Sendrecv");
      return;
    }
    default:
      DDPB_FAIL() << "not a byte-moving collective";
  }
}

}  // namespace

void ProcessGroupMpi::run_host(const HostCollective& c, const HostTensors& host, int64_t sequence) {
  MpiProcess& process = mpi_process();
  std::unique_lock<std::mutex> lock(process.serialize, std::defer_lock);
  if (process.serialized()) lock.lock();
  // Tags only need to tell this group's point-to-point operations apart; MPI guarantees
  // tags up to at least 32767.
  const int tag = static_cast<int>(sequence % 32768);
  switch (c.kind) {
    case Kind::AllReduce:
    case Kind::Reduce:
      if (host[0].numel() > 0) run_reduction(mpi_->comm, c.kind, host[0], c.root, rank_);
      return;
    case Kind::ReduceScatter:
      if (host[0].numel() > 0) run_reduce_scatter(mpi_->comm, host[0], host[1]);
      return;
    case Kind::Barrier:
      check_mpi(MPI_Barrier(mpi_->comm), "MPI_Barrier");
      return;
    default:
      if (host.back().numel() > 0) run_bytes(mpi_->comm, c, host, rank_, size_, tag);
      return;
  }
}

bool mpi_compiled_in() {
  return true;
}

std::string mpi_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string version(text, static_cast<size_t>(len));
  return version.substr(0, version.find_first_of(",\n"));
}

bool started_by_mpi_launcher() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"}) {
    if (std::getenv(var) != nullptr) return true;
  }
  return false;
}

void abort_mpi_job(int code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return;
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > 1) MPI_Abort(MPI_COMM_WORLD, code);
}

}  // namespace ddpb::comm
