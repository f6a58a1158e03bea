// ProcessGroupMpi under the real mpirun: ctest starts this binary as `mpirun -np 2` and
// `-np 3` (tests/comm/CMakeLists.txt); every rank runs every test, and they meet through
// MPI_COMM_WORLD. Started without mpirun it skips, saying so.
//
// Inputs are small integers times (rank + 1), so every expected sum is exact in f32, bf16
// and f16: sum over ranks of (rank + 1) = n(n+1)/2.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "comm/hash_store.h"
#include "comm/process_group.h"
#include "comm/process_group_mpi.h"
#include "core/device.h"
#include "core/tensor.h"
#include "pg_test_util.h"

namespace ddpb::comm {
namespace {

using testing::cast_to;
using testing::floats_of;
using testing::ramp;
using testing::ramp_sum;
using testing::triangle;

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? -1 : std::atoi(v);
}

// This process's group, made once: the MPI world of the test run.
ProcessGroup& group() {
  static std::shared_ptr<ProcessGroup> pg = [] {
    ProcessGroupOptions o;
    o.backend = CommBackend::Mpi;
    o.device = Device::cpu();
    o.timeout = std::chrono::seconds(60);
    return make_process_group(std::make_shared<HashStore>(), env_int("OMPI_COMM_WORLD_RANK"),
                              env_int("OMPI_COMM_WORLD_SIZE"), o);
  }();
  return *pg;
}

class MpiGroup : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!started_by_mpi_launcher()) GTEST_SKIP() << "not started by mpirun (ctest runs it so)";
  }
  int rank() { return group().rank(); }
  int size() { return group().size(); }
};

Tensor tensor_of(const std::vector<float>& v, DType dtype = DType::F32) {
  return cast_to(Tensor::from_floats(v, {static_cast<int64_t>(v.size())}), dtype, Device::cpu());
}

TEST_F(MpiGroup, AllreduceSumsExactlyInEveryDtype) {
  for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{70001}}) {
      Tensor t = tensor_of(ramp(rank(), n), dtype);
      group().allreduce(t)->wait();
      EXPECT_EQ(floats_of(t), ramp_sum(size(), n)) << dtype_name(dtype) << " n=" << n;
    }
  }
  Tensor i = Tensor::zeros({3}, DType::I64, Device::cpu());
  i.data<int64_t>()[0] = int64_t{1} << 40;
  group().allreduce(i)->wait();
  EXPECT_EQ(i.data<int64_t>()[0], size() * (int64_t{1} << 40));
}

// Note [Sub-groups]: the last and the first rank, in that order, split from MPI_COMM_WORLD;
// a rank between them (at -np 3) takes part in the split and gets no group.
TEST_F(MpiGroup, ASubGroupIsSplitFromTheWorldInTheOrderGiven) {
  ProcessGroupOptions o;
  o.backend = CommBackend::Mpi;
  o.device = Device::cpu();
  o.timeout = std::chrono::seconds(60);
  const std::shared_ptr<ProcessGroup> ends = new_group(nullptr, rank(), size(), {size() - 1, 0}, o);
  if (rank() != 0 && rank() != size() - 1) {
    EXPECT_EQ(ends, nullptr);
    return;
  }
  ASSERT_NE(ends, nullptr);
  EXPECT_EQ(ends->size(), 2);
  EXPECT_EQ(ends->rank(), rank() == 0 ? 1 : 0);
  Tensor t = tensor_of({static_cast<float>(rank() + 1)});
  ends->allreduce(t)->wait();
  EXPECT_EQ(floats_of(t), (std::vector<float>{static_cast<float>(1 + size())}));
}

TEST_F(MpiGroup, ManyAsyncAllreducesCompleteInIssueOrder) {
  std::vector<Tensor> ts;
  std::vector<WorkPtr> works;
  for (int k = 0; k < 50; ++k) {
    ts.push_back(tensor_of(ramp(rank(), 100 + k, k)));
    works.push_back(group().allreduce(ts.back()));
  }
  for (int k = 0; k < 50; ++k) {
    works[size_t(k)]->wait();
    EXPECT_EQ(floats_of(ts[size_t(k)]), ramp_sum(size(), 100 + k, k)) << k;
    if (k > 0) EXPECT_GT(works[size_t(k)]->sequence, works[size_t(k) - 1]->sequence);
    EXPECT_GE(works[size_t(k)]->end_ns, works[size_t(k)]->start_ns);
  }
}

TEST_F(MpiGroup, BroadcastAndReduceUseTheirRoot) {
  const int root = size() - 1;
  Tensor b = tensor_of(ramp(rank(), 333));
  group().broadcast(b, root)->wait();
  EXPECT_EQ(floats_of(b), ramp(root, 333));
  Tensor r = tensor_of(ramp(rank(), 257));
  group().reduce(r, root)->wait();
  if (rank() == root) EXPECT_EQ(floats_of(r), ramp_sum(size(), 257));
}

TEST_F(MpiGroup, AllgatherReduceScatterAndAlltoallMoveTheRightChunks) {
  const int n = size();
  const int64_t chunk = 5;
  Tensor in = tensor_of(ramp(rank(), chunk));
  Tensor out = Tensor::zeros({n * chunk}, DType::F32, Device::cpu());
  group().allgather(out, in)->wait();
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(floats_of(out.narrow(r * chunk, chunk)), ramp(r, chunk)) << r;
  }
  Tensor full = tensor_of(ramp(rank(), n * chunk));
  Tensor mine = Tensor::zeros({chunk}, DType::F32, Device::cpu());
  group().reduce_scatter(mine, full)->wait();
  const std::vector<float> all = ramp_sum(n, n * chunk);
  EXPECT_EQ(floats_of(mine),
            std::vector<float>(all.begin() + rank() * chunk, all.begin() + (rank() + 1) * chunk));
  // The sharded designs' pair (ProcessGroup's defaults over MPI's own collectives): the
  // all-gather of the reduce-scatter's chunks is the sum of the whole.
  Tensor chunk_sum = Tensor::zeros({chunk}, DType::F32, Device::cpu());
  Tensor gathered = Tensor::zeros({n * chunk}, DType::F32, Device::cpu());
  group()
      .reduce_scatter_tensor_coalesced({chunk_sum}, {tensor_of(ramp(rank(), n * chunk))})
      ->wait();
  group().allgather_into_tensor_coalesced({gathered}, {chunk_sum})->wait();
  EXPECT_EQ(floats_of(gathered), all);
  // alltoall: chunk j of rank i's input holds 100 i + j; rank j's output chunk i gets it.
  std::vector<float> send(size_t(n * chunk));
  for (int j = 0; j < n; ++j) {
    for (int64_t e = 0; e < chunk; ++e) send[size_t(j * chunk + e)] = float(100 * rank() + j);
  }
  Tensor a_out = Tensor::zeros({n * chunk}, DType::F32, Device::cpu());
  group().alltoall(a_out, tensor_of(send))->wait();
  for (int i = 0; i < n; ++i)
    EXPECT_EQ(floats_of(a_out)[size_t(i * chunk)], float(100 * i + rank()));
}

TEST_F(MpiGroup, SendrecvGoesAroundTheRingAndBarrierCompletes) {
  const int dst = (rank() + 1) % size(), src = (rank() + size() - 1) % size();
  Tensor send = tensor_of(ramp(rank(), 64));
  Tensor recv = Tensor::zeros({64}, DType::F32, Device::cpu());
  group().sendrecv(send, dst, recv, src)->wait();
  EXPECT_EQ(floats_of(recv), ramp(src, 64));
  group().barrier()->wait();
  EXPECT_EQ(group().backend(), "mpi");
}

TEST_F(MpiGroup, EmptyTensorsAreNoOps) {
  Tensor t = Tensor::zeros({0}, DType::F32, Device::cpu());
  group().allreduce(t)->wait();
  group().broadcast(t, 0)->wait();
}

TEST_F(MpiGroup, ARankThatIsNotMpisIsAUsageError) {
  ProcessGroupOptions o;
  o.backend = CommBackend::Mpi;
  o.device = Device::cpu();
  const int wrong = (rank() + 1) % size();
  try {
    make_process_group(std::make_shared<HashStore>(), wrong, size(), o);
    ADD_FAILURE() << "a rank other than MPI's was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("started by one MPI launcher"), std::string::npos)
        << e.what();
  }
}

TEST(MpiVersion, NamesTheLibrary) {
  EXPECT_TRUE(mpi_compiled_in());
  EXPECT_NE(mpi_version().find("MPI"), std::string::npos) << mpi_version();
}

}  // namespace
}  // namespace ddpb::comm
