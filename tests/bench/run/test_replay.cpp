// Equivalence with PyTorch: ddpbench trains a few steps with --dump, and
// scripts/peer/replay_pytorch.py replays the same batches from the same initial parameters in
// PyTorch 1.13 (torch.optim.SGD / AdamW) and compares the final parameters. The gate is the
// script's update_diff (norm-wise relative error of the parameter update, see the script's
// docstring), <= 1e-4.
//
// The tests skip, with the reason, when DDPB_TEST_PYTHON cannot `import torch`.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

struct Outcome {
  int status = -1;     // exit status, or 128 + signal
  std::string output;  // stdout and stderr together
};

Outcome run_command(const std::string& cmd) {
  Outcome o;
  FILE* pipe = ::popen((cmd + " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    o.output = "popen failed for: " + cmd;
    return o;
  }
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) o.output.append(buf.data(), n);
  const int rc = ::pclose(pipe);
  o.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + (WIFSIGNALED(rc) ? WTERMSIG(rc) : 0);
  return o;
}

bool torch_available(std::string* why) {
  Outcome o = run_command(std::string(DDPB_TEST_PYTHON) + " -c 'import torch'");
  if (o.status != 0) {
    while (!o.output.empty() && std::isspace(static_cast<unsigned char>(o.output.back()))) {
      o.output.pop_back();
    }
    *why = "'" + std::string(DDPB_TEST_PYTHON) + " -c \"import torch\"' exited with status " +
           std::to_string(o.status) + ": " + o.output;
  }
  return o.status == 0;
}

// The "RESULT ..." line of the replay script, or a note that it is missing.
std::string result_line(const std::string& output) {
  const auto at = output.rfind("RESULT ");
  if (at == std::string::npos) return "(no RESULT line in the replay output)";
  return output.substr(at, output.find('\n', at) - at);
}

struct RunSpec {
  std::string workload;
  std::string optimizer;
  int global_batch;
  double lr;
  double momentum;
  double weight_decay;
  std::string replay_dtype = "float32";
  std::string mode = "--mode single";
  int steps = 3;
  // Note [Replay seeds]: ResNet's parallel runs are replayed at several seeds with a decision
  // margin. float32 rounding (it differs with the CPU's kernels, AVX2 or AVX-512) can put a
  // ReLU input or a max-pool pair within a rounding step of its boundary, on the other side
  // from the float64 replay; then one element's gradient is routed differently, and through
  // BatchNorm's backward every lower layer's update moves by about a percent. The replay
  // measures the smallest margin of its own decisions and calls such a failure inconclusive
  // (exit 3). Measured on an AVX2 EPYC, DDP resnet-tiny: seed 7 fails by 1.2e-1 after 2 steps
  // with a ReLU input at 2e-7 of its tensor's scale, the forward and the fc gradients equal to
  // 1e-7 and the error entering exactly below that ReLU; seed 0 matches to 4e-5. The test
  // passes when no seed fails conclusively and at least one matches: a wrong formula fails at
  // every seed, with or without near ties. Seeds run in order until two have matched: the later
  // ones stand by for near ties.
  std::vector<int> seeds = {7};
  double min_margin = 0;  // replay_pytorch.py --min-margin
};

class ReplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!torch_available(&why)) GTEST_SKIP() << "python3 torch not available: " << why;
    std::string pattern = (fs::path(::testing::TempDir()) / "ddpb_replay_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr) << "mkdtemp(" << pattern << ")";
    dir_ = pattern;
  }
  void TearDown() override {
    if (dir_.empty()) return;
    if (HasFailure()) {
      std::cout << "dump kept for inspection: " << dir_ << "\n";
      return;
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // ddpbench: s.steps steps, no warm-up, dumped into dir_ (rank 0's, for DDP).
  void train(const RunSpec& s, int seed = 7) {
    fs::remove_all(dir_ / "meta.json");
    const std::string cmd =
        std::string(DDPBENCH_BIN) + " run " + s.mode + " --workload " + s.workload + " --steps " +
        std::to_string(s.steps) + " --warmup 0 --seed " + std::to_string(seed) + " --optimizer " +
        s.optimizer + " --lr " + std::to_string(s.lr) +
        // --momentum is SGD's: ddpbench refuses it with AdamW, which would ignore it.
        (s.optimizer == "sgd" ? " --momentum " + std::to_string(s.momentum) : std::string()) +
        " --weight-decay " + std::to_string(s.weight_decay) + " --global-batch " +
        std::to_string(s.global_batch) + " --quiet --dump '" + dir_.string() + "'";
    Outcome o = run_command(cmd);
    ASSERT_EQ(o.status, 0) << cmd << "\n" << o.output;
    ASSERT_TRUE(fs::exists(dir_ / "meta.json")) << "no meta.json after " << cmd << "\n" << o.output;
  }

  Outcome replay(const std::string& dtype = "float32", double min_margin = 0) {
    const std::string cmd = std::string(DDPB_TEST_PYTHON) + " " + DDPB_SOURCE_DIR +
                            "/scripts/peer/replay_pytorch.py --quiet --dtype " + dtype +
                            " --min-margin " + std::to_string(min_margin) + " '" + dir_.string() +
                            "'";
    Outcome o = run_command(cmd);
    std::cout << "[replay " << dir_.filename().string() << "] " << result_line(o.output) << "\n";
    return o;
  }

  void expect_replay_matches(const RunSpec& s) {
    size_t matched = 0;
    std::string failures, inconclusive;
    for (int seed : s.seeds) {
      if (matched == 2) break;
      ASSERT_NO_FATAL_FAILURE(train(s, seed));
      Outcome o = replay(s.replay_dtype, s.min_margin);
      RecordProperty("replay_result_seed_" + std::to_string(seed), result_line(o.output));
      const std::string tag = "seed " + std::to_string(seed) + ": ";
      if (o.status == 0) {
        ++matched;
      } else if (o.status == 3) {
        inconclusive += tag + result_line(o.output) + "\n";
      } else {
        failures += tag + "\n" + o.output;
      }
    }
    EXPECT_TRUE(failures.empty()) << "PyTorch replay of " << s.workload << " (" << s.optimizer
                                  << ") does not match ddpbench:\n"
                                  << failures;
    EXPECT_GE(matched, 1u) << "no seed of " << s.workload
                           << " could be compared (every one had a near tie):\n"
                           << inconclusive;
  }

  fs::path dir_;
};

TEST_F(ReplayTest, MlpSmallSgdMatchesPyTorch) {
  expect_replay_matches({"mlp-small", "sgd", 32, 0.01, 0.9, 0.01});
}

TEST_F(ReplayTest, GptTinySgdMatchesPyTorch) {
  expect_replay_matches({"gpt-tiny", "sgd", 8, 0.01, 0.9, 0.01});
}

TEST_F(ReplayTest, MlpSmallAdamWMatchesPyTorch) {
  // weight decay 0.1 (a usual AdamW setting) so that a wrong decay would be visible.
  // Replayed in float64: AdamW moves every element by ~lr whatever its gradient's size, and
  // PyTorch 1.13's own float32 replay here drifts from its float64 result (update_diff ~1e-2
  // on some batches), while ddpbench's float32 run stays within ~2e-5 of the float64 one.
  expect_replay_matches({"mlp-small", "adamw", 32, 0.001, 0.0, 0.1, "float64"});
}

// torchvision's own ResNet, parameters and buffers (running statistics, num_batches_tracked),
// replayed in float64 in training mode. 16 images: at layer4's 1x1 planes BatchNorm normalises
// over the batch alone, and fewer values amplify float32 rounding past the gate.
TEST_F(ReplayTest, ResNetTinyMatchesTorchvisionParametersAndBuffers) {
  expect_replay_matches({"resnet-tiny", "sgd", 16, 0.01, 0.9, 0.0, "float64"});
}

// DataParallel with BatchNorm: each replica normalises its own chunk of the batch, and only
// replica 0's running-statistic updates survive (Note [DP buffers]); the replay runs the
// same chunks and keeps the same buffers. 16 images per device, 2 and 3 devices.
//
// Two steps, not three, for ResNet's parallel cases: float32 rounding decides a few ReLU zero
// crossings and max-pool near-ties differently from the float64 replay, each moving one
// gradient element by its whole size. On a BatchNorm bias, whose gradient is a sum with heavy
// cancellation, one such flip can exceed 1e-4 of the update once the parameters have moved for
// a few steps at lr 0.01 (seen on 2 of 8 seeds at 2 steps and most at 3, in every mode, single
// included); the first steps' gradients match PyTorch's float32 to 1e-6. Each case runs at
// several seeds with the decision margin (Note [Replay seeds]).
RunSpec resnet_parallel_spec(const std::string& mode, int global_batch = 32) {
  return {"resnet-tiny", "sgd", global_batch,   0.01, 0.9, 0.0, "float64",
          mode,          2,     {0, 7, 11, 13}, 2e-6};
}
TEST_F(ReplayTest, ResNetTinyDataParallelKeepsDeviceZerosBuffers) {
  expect_replay_matches(resnet_parallel_spec("--mode dp --world-size 2"));
}
TEST_F(ReplayTest, ResNetTinyDataParallelOnThreeDevices) {
  expect_replay_matches(resnet_parallel_spec("--mode dp --world-size 3", 48));
}

// DDP with BatchNorm: per-rank statistics, gradients averaged; rank 0's buffers with and
// without the broadcast (Note [DDP buffers]), and SyncBatchNorm as BatchNorm over the whole
// batch.
TEST_F(ReplayTest, ResNetTinyDdpBroadcastingBuffers) {
  expect_replay_matches(resnet_parallel_spec("--mode ddp --world-size 2"));
}
TEST_F(ReplayTest, ResNetTinyDdpWithoutBufferBroadcast) {
  expect_replay_matches(resnet_parallel_spec("--mode ddp --world-size 2 --no-broadcast-buffers"));
}
TEST_F(ReplayTest, ResNetTinyDdpSyncBatchNormIsOneFullBatch) {
  expect_replay_matches(resnet_parallel_spec("--mode ddp --world-size 2 --sync-bn"));
}

// --static-graph (Note [DDP static graph]: the first step reduces after backward, later ones in
// the rebuilt buckets) against the float64 replay.
TEST_F(ReplayTest, MlpSmallDdpStaticGraphMatchesTheFloat64Reference) {
  expect_replay_matches({"mlp-small", "sgd", 32, 0.01, 0.9, 0.01, "float64",
                         "--mode ddp --world-size 2 --static-graph", 3});
}

// ZeRO shards the optimizer state (stage 2 the gradients too), but every rank's update is
// DDP's (Note [ZeRO in DDP]): scripts/peer/replay_pytorch.py replays the dump as DDP. AdamW,
// the state ZeRO shards, against the float64 reference, for both stage-1 schemes and stage 2.
TEST_F(ReplayTest, MlpSmallZeroMatchesTheFloat64DdpReference) {
  for (const char* zero :
       {"--zero-stage 1", "--zero-stage 2", "--zero-stage 1 --zero-variant pytorch"}) {
    SCOPED_TRACE(zero);
    expect_replay_matches({"mlp-small", "adamw", 32, 0.001, 0.0, 0.1, "float64",
                           std::string("--mode ddp --world-size 2 ") + zero, 3});
  }
}

// Stage 2 on three ranks (shards that end in padding), SGD with momentum, in small buckets
// (Note [ZeRO gradient release]: buffers given back and allocated again every step).
TEST_F(ReplayTest, MlpSmallZero2OnThreeRanksMatchesPyTorch) {
  expect_replay_matches({"mlp-small", "sgd", 48, 0.01, 0.9, 0.01, "float32",
                         "--mode ddp --world-size 3 --zero-stage 2 --bucket-cap-mb 1", 3});
}

// FSDP's rows dump every rank's batches and rank 0's full state dict (the units gathered),
// DDP's layout; every strategy's update is DDP's (Note [FSDP's step]), so the replay runs them
// as DDP. full_shard and shard_grad_op on mlp (every Linear a unit, no root) and gpt (blocks
// as units, a root of the tied embedding and ln_f), and AdamW, whose state FSDP shards, against
// the float64 reference.
TEST_F(ReplayTest, FsdpMatchesTheFloat64DdpReference) {
  for (const char* mode : {"--mode fsdp --world-size 2", "--mode fsdp-grad-op --world-size 2"}) {
    SCOPED_TRACE(mode);
    expect_replay_matches({"mlp-small", "sgd", 32, 0.01, 0.9, 0.01, "float64", mode, 3});
    expect_replay_matches({"gpt-tiny", "sgd", 8, 0.01, 0.9, 0.01, "float64", mode, 3});
  }
  // AdamW on mlp, as the ZeRO case: on gpt-tiny AdamW's normalised step turns float32's
  // rounding of h.0.attn.c_attn.bias's near-zero gradients into 6e-4 of its update, on a
  // single device and under DDP alike (measured at seed 7).
  expect_replay_matches(
      {"mlp-small", "adamw", 32, 0.001, 0.0, 0.1, "float64", "--mode fsdp --world-size 2", 3});
}

// DDP over MPI (--backend mpi: ddpbench starts its ranks through mpirun) against the float64
// replay.
TEST_F(ReplayTest, MlpSmallDdpOverMpiMatchesTheFloat64Reference) {
  expect_replay_matches({"mlp-small", "sgd", 32, 0.01, 0.9, 0.01, "float64",
                         "--mode ddp --world-size 2 --backend mpi", 3});
}

// --comm-hook powersgd against the float64 reference (scripts/peer/powersgd_reference.py),
// fed the random Q that the run dumped: rank 1 and rank 2, two plain AllReduce steps and
// three compressed ones, with error feedback and warm start (the defaults).
TEST_F(ReplayTest, MlpSmallDdpPowerSgdMatchesTheFloat64Reference) {
  for (const char* rank : {"1", "2"}) {
    SCOPED_TRACE(std::string("--powersgd-rank ") + rank);
    expect_replay_matches({"mlp-small", "sgd", 32, 0.01, 0.9, 0.01, "float64",
                           std::string("--mode ddp --world-size 2 --comm-hook powersgd "
                                       "--powersgd-start-iter 2 --powersgd-rank ") +
                               rank,
                           5});
  }
}

// PyTorch 1.13's own powerSGD_hook (Debian's torch), in real torch DDP over Gloo, fed the Q
// ddpbench drew (scripts/peer/powersgd_torch_hook.py): ranks 1 and 2, where PyTorch
// orthogonalises by Gram-Schmidt too.
TEST_F(ReplayTest, MlpSmallDdpPowerSgdMatchesPyTorchsOwnHook) {
  for (const char* rank : {"1", "2"}) {
    SCOPED_TRACE(std::string("--powersgd-rank ") + rank);
    ASSERT_NO_FATAL_FAILURE(train({"mlp-small", "sgd", 32, 0.01, 0.9, 0.01, "float64",
                                   std::string("--mode ddp --world-size 2 --comm-hook powersgd "
                                               "--powersgd-start-iter 2 --powersgd-rank ") +
                                       rank,
                                   5}));
    const std::string cmd = std::string(DDPB_TEST_PYTHON) + " " + DDPB_SOURCE_DIR +
                            "/scripts/peer/powersgd_torch_hook.py '" + dir_.string() + "'";
    Outcome o = run_command(cmd);
    std::cout << "[torch powerSGD_hook] " << result_line(o.output) << "\n";
    RecordProperty(std::string("torch_hook_rank_") + rank, result_line(o.output));
    EXPECT_EQ(o.status, 0) << cmd << "\n" << o.output;
  }
}

// The other switches: a fresh Q every step, no error feedback, the gradients kept in the
// buckets, three ranks; gpt-tiny's embeddings and 1-D LayerNorm parameters take the
// uncompressed path next to its matrices, and its first layers' matrices start compressing
// at iteration 0 (no state kept, so no bucket rebuild to wait for).
TEST_F(ReplayTest, GptTinyDdpPowerSgdWithoutWarmStartOrErrorFeedback) {
  expect_replay_matches({"gpt-tiny", "sgd", 12, 0.01, 0.9, 0.01, "float64",
                         "--mode ddp --world-size 3 --comm-hook powersgd --powersgd-rank 2 "
                         "--powersgd-start-iter 0 --powersgd-no-warm-start "
                         "--powersgd-no-error-feedback --grad-as-bucket-view",
                         3});
}

// Uneven inputs under PyTorch's Join: gpt-tiny on 2500 tokens of shards, one epoch, each rank
// its own share (--sampler unpadded): rank 1 runs out a step before rank 0. At that step rank 0
// averages its gradient with rank 1's shadowed zeros over the initial world size (PyTorch's
// default) or over the one active rank, and rank 1 does not step; at the end rank 0's model,
// the last to join, is every rank's. The replay runs the same steps in float64.
TEST_F(ReplayTest, GptTinyDdpJoinMatchesPyTorchsJoinArithmetic) {
  const fs::path tokens = dir_ / "tokens";
  const std::string make = std::string(DDPBENCH_BIN) + " data make tokens --tokens 2500 " +
                           "--shards 1 --out '" + tokens.string() + "'";
  const Outcome made = run_command(make);
  ASSERT_EQ(made.status, 0) << make << "\n" << made.output;
  const std::string join = "--mode ddp --world-size 2 --data '" + tokens.string() +
                           "' --epochs 1 --sampler unpadded --uneven-inputs join";
  for (const std::string divide : {"", " --no-divide-by-initial-world-size"}) {
    SCOPED_TRACE(join + divide);
    expect_replay_matches({"gpt-tiny", "sgd", 4, 0.01, 0.9, 0.01, "float64", join + divide, 100});
    const Outcome o =
        run_command("grep -c step10.x '" + (dir_ / "batches.rank0.safetensors").string() +
                    "' ; grep -c step10.x '" + (dir_ / "batches.rank1.safetensors").string() + "'");
    EXPECT_EQ(o.output, "1\n0\n") << "rank 0 should have 10 steps and rank 1 nine";
  }
  // The replay tells the two apart: the last run's dump replayed with the other divisor fails.
  const fs::path meta_path = dir_ / "meta.json";
  nlohmann::json meta = nlohmann::json::parse(std::ifstream(meta_path));
  meta["config"]["join_divide_by_initial_world_size"] = true;
  std::ofstream(meta_path) << meta.dump(2);
  EXPECT_EQ(replay("float64").status, 1) << "the last step's divisor must be visible";
}

// --channels-last computes the same model in NHWC: the same torchvision replay (NCHW) holds.
TEST_F(ReplayTest, ResNetTinyChannelsLastMatchesTorchvision) {
  expect_replay_matches(
      {"resnet-tiny", "sgd", 16, 0.01, 0.9, 0.0, "float64", "--mode single --channels-last"});
}

// The replay tells DP's per-replica BatchNorm from a whole-batch one: the same DP dump read
// as a single-device run is rejected.
TEST_F(ReplayTest, ReplayRejectsDataParallelBatchNormReadAsOneBatch) {
  ASSERT_NO_FATAL_FAILURE(
      train({"resnet-tiny", "sgd", 32, 0.01, 0.9, 0.0, "float64", "--mode dp --world-size 2", 2}));
  const fs::path meta_path = dir_ / "meta.json";
  nlohmann::json meta;
  {
    std::ifstream in(meta_path);
    in >> meta;
  }
  meta["config"]["mode"] = "single";
  {
    std::ofstream out(meta_path);
    out << meta.dump(2);
  }
  Outcome o = replay("float64");
  EXPECT_EQ(o.status, 1) << "per-replica statistics read as one batch must mismatch:\n" << o.output;
}

// The comparison must be able to fail: replaying with a learning rate 1% off is rejected.
TEST_F(ReplayTest, ReplayRejectsAWrongLearningRate) {
  ASSERT_NO_FATAL_FAILURE(train({"mlp-small", "sgd", 32, 0.01, 0.9, 0.01}));
  const fs::path meta_path = dir_ / "meta.json";
  nlohmann::json meta;
  {
    std::ifstream in(meta_path);
    ASSERT_TRUE(in) << "cannot read " << meta_path;
    in >> meta;
  }
  meta["config"]["optimizer"]["lr"] = meta["config"]["optimizer"]["lr"].get<double>() * 1.01;
  {
    std::ofstream out(meta_path);
    out << meta.dump(2);
  }
  Outcome o = replay();
  EXPECT_EQ(o.status, 1) << "a replay with lr x1.01 should report a mismatch (exit 1):\n"
                         << o.output;
}

}  // namespace
