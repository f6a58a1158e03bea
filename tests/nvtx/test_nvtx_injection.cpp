// Runs the real ddpbench binary with the NVTX recorder injected through NVTX's own
// mechanism (NVTX_INJECTION64_PATH, see nvtx_recorder.cpp) and checks the ranges it
// emits: all in the "ddpbench" domain, the expected names, push/pop nesting per thread,
// start/end pairing by id, and bytes on every communication range.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nvtx3/nvToolsExt.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/util/run_cli.h"

namespace {

using nlohmann::json;

// One range as the analysis sees it: a push (with the pushes open around it on its thread)
// or a start (with whether it ended).
struct RangeRecord {
  std::string kind;  // "push" or "start"
  std::string message;
  uint32_t category = 0;
  bool has_payload = false;
  uint64_t payload = 0;
  uint64_t tid = 0;
  std::vector<std::string> parents;  // push: enclosing pushes on its thread, outermost first
  bool ended = false;                // start: a matching end was seen
};

struct ProcessTrace {
  long pid = 0;
  std::vector<json> events;                        // in sequence order
  std::map<uint64_t, std::string> thread_names;    // OS thread id -> name
  std::map<uint32_t, std::string> category_names;  // in the ddpbench domain
  std::vector<RangeRecord> ranges;                 // in start order
  std::vector<std::string> problems;               // well-formedness violations

  std::vector<const RangeRecord*> named(const std::string& message) const {
    std::vector<const RangeRecord*> out;
    for (const auto& r : ranges)
      if (r.message == message) out.push_back(&r);
    return out;
  }
  bool has_ranges() const { return !ranges.empty(); }
  std::string thread_name(uint64_t tid) const {
    auto it = thread_names.find(tid);
    return it == thread_names.end() ? "" : it->second;
  }
};

bool is_comm_range(const std::string& m) {
  return m == "dp.replicate" || m == "dp.gather" || m == "dp.reduce" || m == "ddp.copy_in" ||
         m.rfind("ddp.allreduce bucket ", 0) == 0;
}

std::string where(const json& e) {
  return "event " + e.dump() + " (pid " + std::to_string(e.value("pid", 0L)) + ")";
}

// Replays one process's events: per-thread push stacks, open async ranges by id, and the
// domain / payload rules. Violations go to `problems` with the offending event.
void analyse(ProcessTrace& p) {
  std::map<uint64_t, std::vector<size_t>> stacks;  // tid -> indices into ranges
  std::map<uint64_t, size_t> open_async;           // range id -> index into ranges
  for (const json& e : p.events) {
    const std::string type = e.at("type");
    const uint64_t tid = e.at("tid");
    if (type == "thread_name") {
      p.thread_names[e.at("target_tid").get<uint64_t>()] = e.at("message");
      continue;
    }
    const std::string domain = e.value("domain", "");
    if (domain != "ddpbench") p.problems.push_back("not in domain ddpbench: " + where(e));
    if (type == "category") {
      p.category_names[e.at("category").get<uint32_t>()] = e.at("message");
    } else if (type == "push" || type == "start") {
      RangeRecord r;
      r.kind = type;
      r.message = e.at("message");
      r.category = e.at("category");
      r.has_payload = e.contains("payload");
      r.payload = e.value("payload", uint64_t{0});
      r.tid = tid;
      if (is_comm_range(r.message) && !(r.has_payload && r.payload > 0)) {
        p.problems.push_back("communication range without a positive uint64 payload: " + where(e));
      }
      if (type == "push") {
        for (size_t i : stacks[tid]) r.parents.push_back(p.ranges[i].message);
        stacks[tid].push_back(p.ranges.size());
      } else {
        const uint64_t id = e.at("id");
        if (!open_async.emplace(id, p.ranges.size()).second) {
          p.problems.push_back("range id started twice: " + where(e));
        }
      }
      p.ranges.push_back(std::move(r));
    } else if (type == "pop") {
      auto& stack = stacks[tid];
      if (stack.empty()) {
        p.problems.push_back("pop without a push on the same thread: " + where(e));
      } else {
        stack.pop_back();
      }
    } else if (type == "end") {
      auto it = open_async.find(e.at("id").get<uint64_t>());
      if (it == open_async.end()) {
        p.problems.push_back("end of a range id that is not open: " + where(e));
      } else {
        p.ranges[it->second].ended = true;
        open_async.erase(it);
      }
    } else if (type == "mark" || type == "string" || type == "domain") {
      // Domain and string registrations only need the domain check above.
    } else {
      p.problems.push_back("unknown event type: " + where(e));
    }
  }
  for (const auto& [tid, stack] : stacks) {
    for (size_t i : stack) {
      p.problems.push_back("push never popped on thread " + std::to_string(tid) + " (" +
                           p.thread_name(tid) + "): " + p.ranges[i].message);
    }
  }
  for (const auto& [id, i] : open_async) {
    p.problems.push_back("start never ended: id " + std::to_string(id) + " " + p.ranges[i].message);
  }
}

// Reads one recorder file (JSON lines) and analyses it.
ProcessTrace load_trace(const std::filesystem::path& path, long pid) {
  ProcessTrace t;
  t.pid = pid;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) t.events.push_back(json::parse(line));
  }
  std::sort(t.events.begin(), t.events.end(), [](const json& a, const json& b) {
    return a.at("seq").get<uint64_t>() < b.at("seq").get<uint64_t>();
  });
  analyse(t);
  return t;
}

// Runs ddpbench with the recorder and returns one trace per process that wrote a file.
std::vector<ProcessTrace> run_recorded(const std::string& args, const std::string& tag) {
  ddpb::testing::TempDir dir(tag);
  const std::string base = dir / "nvtx";
  const std::string env = std::string("NVTX_INJECTION64_PATH='") + DDPB_NVTX_RECORDER +
                          "' DDPB_NVTX_RECORD='" + base + "'";
  auto result = ddpb::testing::run_cli(args, env);
  EXPECT_EQ(result.code, 0) << "ddpbench " << args << "\n" << result.output;

  std::vector<ProcessTrace> traces;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    const std::string name = entry.path().filename().string();
    // nvtx.<pid>; a leftover nvtx.<pid>.tmp means a write did not finish.
    if (name.rfind("nvtx.", 0) != 0) continue;
    const std::string suffix = name.substr(5);
    const bool is_pid = !suffix.empty() && std::all_of(suffix.begin(), suffix.end(),
                                                       [](char c) { return c >= '0' && c <= '9'; });
    EXPECT_TRUE(is_pid) << "unexpected recorder file " << name;
    if (is_pid) traces.push_back(load_trace(entry.path(), std::stol(suffix)));
  }
  std::sort(traces.begin(), traces.end(),
            [](const ProcessTrace& a, const ProcessTrace& b) { return a.pid < b.pid; });
  return traces;
}

std::vector<const ProcessTrace*> with_ranges(const std::vector<ProcessTrace>& traces) {
  std::vector<const ProcessTrace*> out;
  for (const auto& t : traces)
    if (t.has_ranges()) out.push_back(&t);
  return out;
}

void expect_well_formed(const ProcessTrace& p) {
  std::string listed;
  for (size_t i = 0; i < p.problems.size() && i < 20; ++i) listed += "\n  " + p.problems[i];
  EXPECT_TRUE(p.problems.empty()) << "pid " << p.pid << ": " << p.problems.size()
                                  << " problems (first 20):" << listed;
}

std::string category_of(const ProcessTrace& p, const RangeRecord& r) {
  auto it = p.category_names.find(r.category);
  return it == p.category_names.end() ? "<unnamed " + std::to_string(r.category) + ">" : it->second;
}

constexpr int kSteps = 2;

nvtxEventAttributes_t attributes(uint32_t category, int64_t payload_bytes = -1) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.category = category;
  if (payload_bytes >= 0) {
    a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
    a.payload.ullValue = static_cast<uint64_t>(payload_bytes);
  }
  return a;
}

// The checker itself, on misuse made on purpose in this process: the recorder attaches to
// this test's own NVTX instance and is dumped through its exported function.
TEST(NvtxInjection, RecorderAndCheckerCatchMisuse) {
  ddpb::testing::TempDir dir("nvtx_self");
  const std::string base = dir / "nvtx";
  // NVTX reads the variable at its first call, which is below.
  ASSERT_EQ(::setenv("NVTX_INJECTION64_PATH", DDPB_NVTX_RECORDER, 1), 0);
  ASSERT_EQ(::setenv("DDPB_NVTX_RECORD", base.c_str(), 1), 0);

  nvtxDomainHandle_t domain = nvtxDomainCreateA("ddpbench");
  nvtxDomainHandle_t other = nvtxDomainCreateA("other");
  nvtxDomainNameCategoryA(domain, 4, "comm");
  nvtxNameOsThreadA(static_cast<uint32_t>(::syscall(SYS_gettid)), "self-test");

  auto reduce = attributes(4, 128);  // well formed: registered name, bytes
  reduce.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  reduce.message.registered = nvtxDomainRegisterStringA(domain, "dp.reduce");
  nvtxDomainRangePushEx(domain, &reduce);
  nvtxDomainRangePop(domain);

  auto copy_in = attributes(4);  // a communication range without bytes
  copy_in.messageType = NVTX_MESSAGE_TYPE_ASCII;
  copy_in.message.ascii = "ddp.copy_in";
  nvtxDomainRangePushEx(domain, &copy_in);
  nvtxDomainRangePop(domain);

  auto stray = attributes(1);  // outside the ddpbench domain
  stray.messageType = NVTX_MESSAGE_TYPE_ASCII;
  stray.message.ascii = "stray";
  nvtxDomainRangePushEx(other, &stray);
  nvtxDomainRangePop(other);

  auto outer = attributes(1);  // pushed here, popped on another thread
  outer.messageType = NVTX_MESSAGE_TYPE_ASCII;
  outer.message.ascii = "outer";
  nvtxDomainRangePushEx(domain, &outer);
  std::thread([&] { nvtxDomainRangePop(domain); }).join();

  auto bucket = attributes(4, 64);  // started, never ended
  bucket.messageType = NVTX_MESSAGE_TYPE_ASCII;
  bucket.message.ascii = "ddp.allreduce bucket 0";
  const nvtxRangeId_t id = nvtxDomainRangeStartEx(domain, &bucket);
  EXPECT_NE(id, 0u);
  nvtxDomainRangeEnd(domain, id + 1000);  // not open

  void* recorder = ::dlopen(DDPB_NVTX_RECORDER, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(recorder, nullptr) << "NVTX did not load the recorder";
  auto dump = reinterpret_cast<int (*)()>(::dlsym(recorder, "ddpb_nvtx_recorder_dump"));
  ASSERT_NE(dump, nullptr);
  ASSERT_EQ(dump(), 0);
  ::dlclose(recorder);
  ::unsetenv("DDPB_NVTX_RECORD");  // no second write at exit, into a removed directory

  const long pid = static_cast<long>(::getpid());
  ProcessTrace t = load_trace(base + "." + std::to_string(pid), pid);
  EXPECT_EQ(t.thread_name(static_cast<uint64_t>(::syscall(SYS_gettid))), "self-test");
  auto reduces = t.named("dp.reduce");
  ASSERT_EQ(reduces.size(), 1u) << "registered string not resolved";
  EXPECT_EQ(reduces[0]->payload, 128u);
  EXPECT_EQ(category_of(t, *reduces[0]), "comm");

  const std::vector<std::string> expected = {
      "not in domain ddpbench",                                 // creating "other"
      "communication range without a positive uint64 payload",  // ddp.copy_in
      "not in domain ddpbench",                                 // stray push
      "not in domain ddpbench",                                 // stray pop
      "pop without a push on the same thread",
      "end of a range id that is not open",
      "push never popped",  // outer
      "start never ended",  // bucket 0
  };
  ASSERT_EQ(t.problems.size(), expected.size()) << ::testing::PrintToString(t.problems);
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NE(t.problems[i].find(expected[i]), std::string::npos)
        << "problem " << i << ": " << t.problems[i];
  }
}

TEST(NvtxInjection, DataParallelRanges) {
  auto traces = run_recorded(
      "run --mode dp --world-size 2 --workload mlp-small --global-batch 16 --steps 2 "
      "--warmup 0 --quiet",
      "nvtx_dp");
  auto procs = with_ranges(traces);
  ASSERT_EQ(procs.size(), 1u) << "DP is one process; " << traces.size() << " recorder files";
  const ProcessTrace& p = *procs[0];
  expect_well_formed(p);

  for (const char* phase : {"dp.scatter", "dp.replicate", "dp.forward", "dp.gather", "dp.loss",
                            "dp.backward", "dp.reduce", "optimizer.sgd"}) {
    auto rs = p.named(phase);
    EXPECT_EQ(rs.size(), static_cast<size_t>(kSteps)) << phase;
    for (const auto* r : rs) {
      EXPECT_EQ(r->kind, "push") << phase;
      EXPECT_EQ(category_of(p, *r), std::string(phase).rfind("dp.", 0) == 0 ? "dp" : "optimizer")
          << phase;
    }
  }
  // Replicate and reduce move the same parameter bytes, once per extra replica.
  auto replicate = p.named("dp.replicate"), reduce = p.named("dp.reduce");
  ASSERT_FALSE(replicate.empty());
  ASSERT_FALSE(reduce.empty());
  EXPECT_EQ(replicate[0]->payload, reduce[0]->payload);

  // Replica r runs on worker thread ddpb-dp-r; the two workers are distinct threads.
  std::set<uint64_t> replica_threads;
  for (const char* phase : {"dp.forward.replica ", "dp.backward.replica "}) {
    for (int r = 0; r < 2; ++r) {
      const std::string name = phase + std::to_string(r);
      auto rs = p.named(name);
      EXPECT_EQ(rs.size(), static_cast<size_t>(kSteps)) << name;
      for (const auto* range : rs) {
        EXPECT_EQ(p.thread_name(range->tid), "ddpb-dp-" + std::to_string(r))
            << name << " on thread " << range->tid;
        replica_threads.insert(range->tid);
      }
    }
  }
  EXPECT_EQ(replica_threads.size(), 2u);

  // Op ranges resolve through registered strings and nest inside the replica's forward.
  auto gemms = p.named("op.gemm");
  ASSERT_FALSE(gemms.empty());
  EXPECT_EQ(category_of(p, *gemms[0]), "op");
  std::set<std::string> gemm_parents;
  for (const auto* g : gemms) {
    if (!g->parents.empty()) gemm_parents.insert(g->parents.back());
  }
  EXPECT_TRUE(gemm_parents.count("dp.forward.replica 0")) << "no op.gemm in replica 0's forward";
  EXPECT_TRUE(gemm_parents.count("dp.forward.replica 1")) << "no op.gemm in replica 1's forward";
}

TEST(NvtxInjection, DistributedDataParallelRanges) {
  auto traces = run_recorded(
      "run --mode ddp --world-size 2 --workload mlp-small --global-batch 16 --steps 2 "
      "--warmup 0 --quiet --bucket-cap-mb 1 --first-bucket-mb 0.1",
      "nvtx_ddp");
  auto ranks = with_ranges(traces);
  ASSERT_EQ(ranks.size(), 2u) << "expected one recording per rank; " << traces.size()
                              << " recorder files";

  std::vector<std::vector<std::pair<std::string, uint64_t>>> launches(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i) {
    const ProcessTrace& p = *ranks[i];
    SCOPED_TRACE("pid " + std::to_string(p.pid));
    expect_well_formed(p);
    EXPECT_EQ(p.named("forward").size(), static_cast<size_t>(kSteps));
    EXPECT_EQ(p.named("backward").size(), static_cast<size_t>(kSteps));

    // Gradients are copied into buckets from the autograd hooks, inside backward.
    auto copies = p.named("ddp.copy_in");
    ASSERT_FALSE(copies.empty());
    for (const auto* c : copies) {
      EXPECT_NE(std::find(c->parents.begin(), c->parents.end(), "backward"), c->parents.end())
          << "ddp.copy_in outside backward";
      EXPECT_EQ(category_of(p, *c), "comm");
    }

    auto bucket0 = p.named("ddp.allreduce bucket 0");
    ASSERT_EQ(bucket0.size(), static_cast<size_t>(kSteps));
    for (const auto* b : bucket0) {
      EXPECT_EQ(b->kind, "start");
      EXPECT_TRUE(b->ended);
      EXPECT_EQ(category_of(p, *b), "comm");
    }
    for (const auto& r : p.ranges) {
      if (r.kind == "start") launches[i].emplace_back(r.message, r.payload);
    }
  }
  // See Note [DDP bucket launch order]: every rank launches the same buckets, with the
  // same sizes, in the same order.
  EXPECT_EQ(launches[0], launches[1]);
  std::set<std::string> buckets;
  for (const auto& [name, bytes] : launches[0]) buckets.insert(name);
  EXPECT_GE(buckets.size(), 2u) << "--bucket-cap-mb 1 --first-bucket-mb 0.1 should give "
                                   "several buckets";
}

}  // namespace
