// `ddpbench suite`, `report` and `compare` end to end, as real processes: the --quick suite,
// a failed run recorded while the suite goes on, Ctrl-C and --resume, usage errors.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <regex>
#include <thread>

#include <nlohmann/json.hpp>

#include "reports/schema_validator.h"
#include "tests/util/run_cli.h"

namespace ddpb::testing {
namespace {

namespace fs = std::filesystem;

nlohmann::json load(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

const nlohmann::json* find_run(const nlohmann::json& suite, const std::string& id) {
  for (const auto& r : suite["runs"]) {
    if (r["id"] == id) return &r;
  }
  return nullptr;
}

// Processes whose working directory is `dir` (suite runs start there).
int processes_in(const std::string& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code ec;
    const auto cwd = fs::read_symlink(e.path() / "cwd", ec);
    if (!ec && cwd == fs::path(dir)) ++n;
  }
  return n;
}

// The suite's own projection and validation, and `ddpbench project` on its folder, on one
// run record, and on bad input (exit 2, one line).
void check_projection(const nlohmann::json& suite, const std::string& out, const TempDir& dir) {
  ASSERT_TRUE(suite.contains("comm_fit"));
  EXPECT_GT(suite["comm_fit"]["allreduce"]["bandwidth_GBps"].get<double>(), 0);
  ASSERT_TRUE(suite.contains("projection"));
  const auto& p = suite["projection"];
  EXPECT_EQ(p["topology"]["name"], "measured");
  EXPECT_EQ(p["workloads"].size(), suite["suite"]["workloads"].size());
  // Every DP and DDP scaling run at world size 2 is predicted from world size 1.
  EXPECT_EQ(p["validation"]["runs"].size(), 2 * suite["suite"]["workloads"].size());
  for (const auto& v : p["validation"]["runs"]) {
    EXPECT_GT(v["predicted_ms"].get<double>(), 0);
    EXPECT_TRUE(v.contains("workload")) << v.dump();
  }
  EXPECT_EQ(p["validation"]["tolerance"], 0.15) << "Note [Validation tolerance]";
  const std::string json_out = dir / "projection.json", html = dir / "projection.html";
  CliResult r = run_cli("project " + out + " --devices 8,64 --topology nvlink+ib-ndr --json " +
                        json_out + " -o " + html);
  ASSERT_EQ(r.code, 0) << r.output;
  const auto projected = load(json_out);
  EXPECT_TRUE(reports::validate_projection_record(projected).empty());
  EXPECT_EQ(projected["workloads"][0]["points"].back()["devices"], 64);
  EXPECT_FALSE(projected["workloads"][0]["points"].back()["designs"].contains("dp"))
      << "DP stops at a node";
  EXPECT_TRUE(fs::file_size(html) > 2000);
  // One CPU run record has no peak to take a fraction of: pcie4's A100s need --device-flops.
  r = run_cli("project " + out +
              "/runs/mlp-small_ddp_w2.json --devices 4 --topology pcie4 --device-flops 100e12");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("mlp-small"), std::string::npos) << r.output;
  write_file(dir / "topo.json", R"({"name": "t", "node_size": 8, "intra": {"alpha_us": 1}})");
  auto no_buckets = load(out + "/runs/mlp-small_ddp_w2.json");
  no_buckets["summary"]["comm"].erase("buckets");
  write_file(dir / "no_buckets.json", no_buckets.dump());
  const std::pair<std::string, std::string> bad[] = {
      {"project " + out + " --devices 8 --topology infiniband", "unknown topology preset"},
      {"project " + out + " --devices 8 --topology " + (dir / "topo.json"), "bandwidth_GBps"},
      {"project " + (dir / "no_buckets.json") + " --devices 8", "without bucket timings"},
      {"project " + out + "/runs/mlp-small_single_w1.json --devices 8", "needs a DDP record"},
      {"project " + out + " --devices 64 --topology nvlink", "need an inter-node link"},
      {"project " + out + " --devices 0", "not in 1..1048576"}};
  for (const auto& [args, message] : bad) {
    r = run_cli(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
}

TEST(Suite, QuickSuiteRunsEndToEndAndEveryReportValidates) {
  TempDir dir("suite_quick");
  const std::string out = dir / "results";
  CliResult r = run_cli("suite --quick --device cpu --out " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("report:  " + out + "/report.html"), std::string::npos) << r.output;
  const auto suite = load(out + "/suite.json");
  EXPECT_TRUE(reports::validate_suite_record(suite).empty())
      << reports::format_errors(reports::validate_suite_record(suite));
  EXPECT_TRUE(suite["complete"].get<bool>());
  EXPECT_GT(suite["gemm_peak"]["flops_per_s"].get<double>(), 0);
  EXPECT_NE(suite["context"]["git_commit"], "");
  EXPECT_TRUE(suite["context"].contains("environment"));
  EXPECT_TRUE(suite["context"]["system"].contains("cpu_model"));
  int ddp_runs = 0, correctness_checked = 0;
  for (const auto& run : suite["runs"]) {
    SCOPED_TRACE(run["id"].get<std::string>());
    ASSERT_EQ(run["status"], "ok") << run.value("error", "");
    const auto record = load(out + "/" + run["record"].get<std::string>());
    EXPECT_TRUE(reports::validate_run_record(record).empty()) << "every run record validates";
    EXPECT_TRUE(fs::exists(out + "/" + run["trace"].get<std::string>()));
    const auto& m = run["metrics"];
    EXPECT_GT(m["samples_per_s"].get<double>(), 0);
    EXPECT_GT(m["flop_fraction"].get<double>(), 0);
    EXPECT_GT(m["peak_memory_bytes"].get<int64_t>(), 0);
    EXPECT_FALSE(m["loss_per_step"].empty());
    if (run["variant"] == "powersgd-hook") {
      // Lossy by design: no correctness gate, but far fewer bytes than the fp32 run.
      EXPECT_TRUE(run["correctness"].contains("skipped"));
      const auto* fp32 = find_run(suite, run["workload"].get<std::string>() + "/ddp/w2");
      ASSERT_NE(fp32, nullptr);
      EXPECT_LT(m["comm_bytes_per_step"].get<int64_t>() * 10,
                (*fp32)["metrics"]["comm_bytes_per_step"].get<int64_t>());
    } else if (run["group"] == "bucket_autotune") {
      EXPECT_EQ(m["bucket_autotune"]["candidates"].size(), 6u);
      EXPECT_TRUE(m["bucket_autotune"].contains("chosen_mb"));
      EXPECT_TRUE(run["correctness"].contains("skipped"));
    } else if (run["mode"] != "single") {
      ASSERT_TRUE(run.contains("correctness"));
      EXPECT_TRUE(run["correctness"]["passed"].get<bool>()) << run["correctness"].dump();
      ++correctness_checked;
      EXPECT_TRUE(m.contains("overlap_ratio"));
      EXPECT_TRUE(m.contains("busbw"));
    }
    if (run["mode"] == "ddp" && run["world_size"] == 2) {
      ++ddp_runs;
      ASSERT_TRUE(m.contains("buckets"));
      for (const auto& b : m["buckets"]) {
        EXPECT_GE(b["collective_ms"].get<double>(), 0);
        EXPECT_GE(b["ready_to_launch_ms"].get<double>(), 0);
      }
      EXPECT_EQ(m["busbw"]["factor"], 1.0) << "allreduce over 2 ranks: 2(n-1)/n = 1";
      EXPECT_TRUE(m.contains("bucket_blame")) << "every DDP run at world size 2";
    }
    // Note [Speed of light]: every run against its bound, from the GEMM peak and the comm fit.
    ASSERT_TRUE(m.contains("speed_of_light"));
    EXPECT_GT(m["speed_of_light"]["achieved"].get<double>(), 0);
    EXPECT_LE(m["speed_of_light"]["bound_ms"].get<double>(),
              m["step_time_ms"]["median"].get<double>() * 1.5);
    if (run["group"] == "scaling") EXPECT_TRUE(run["scaling"].contains("weak_efficiency"));
  }
  EXPECT_GE(ddp_runs, 4) << "scaling + sweep + overlap off + fp16 hook";
  // The collectives sweep ran before the runs, and the projection's AllReduce fit is on it.
  ASSERT_TRUE(suite.contains("collectives"));
  ASSERT_EQ(suite["collectives"].size(), 1u);
  const auto& sweep = suite["collectives"][0];
  EXPECT_EQ(sweep["status"], "ok") << sweep.dump();
  EXPECT_EQ(sweep["backend"], "gloo");
  const auto coll = load(out + "/" + sweep["record"].get<std::string>());
  EXPECT_TRUE(reports::validate_collectives_record(coll).empty());
  ASSERT_TRUE(suite.contains("comm_fit"));
  EXPECT_EQ(suite["comm_fit"]["allreduce_points"].size(), coll["results"].size())
      << "the AllReduce link is fitted on the sweep, not timed again";
  EXPECT_GE(correctness_checked, 12);
  const auto* w2 = find_run(suite, "mlp-small/ddp/w2");
  ASSERT_NE(w2, nullptr);
  EXPECT_EQ((*w2)["scaling"]["strong_baseline"], "mlp-small/single/w1/b128");
  // The suite also rendered its report; report and validate work on the folder too.
  EXPECT_TRUE(fs::file_size(out + "/report.html") > 10000);
  EXPECT_TRUE(fs::exists(out + "/report.md"));
  r = run_cli("report " + out + "/suite.json -o " + (dir / "again.md"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(fs::exists(dir / "again-throughput.svg")) << r.output;
  r = run_cli("validate " + out + "/suite.json");
  EXPECT_EQ(r.code, 0) << r.output;
  // compare: the suite against itself is no regression; a planted one is caught. The planted
  // run's step-time spread is set to 0, so the threshold alone judges it (Note [Step-time
  // noise]): a quick suite's 4 steps on 2 busy cores can spread wider than the planted 20%.
  r = run_cli("compare " + out + "/suite.json " + out + "/suite.json");
  EXPECT_EQ(r.code, 0) << r.output;
  auto base = suite;
  for (auto& run : base["runs"]) {
    if (run["id"] == "mlp-small/ddp/w2") run["metrics"]["step_time_ms"]["stddev"] = 0.0;
  }
  write_file(dir / "base.json", base.dump());
  auto slower = base;
  for (auto& run : slower["runs"]) {
    if (run["id"] == "mlp-small/ddp/w2")
      run["metrics"]["samples_per_s"] = run["metrics"]["samples_per_s"].get<double>() * 0.8;
  }
  write_file(dir / "slower.json", slower.dump());
  r = run_cli("compare " + (dir / "base.json") + " " + (dir / "slower.json") + " --threshold 5");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("mlp-small/ddp/w2"), std::string::npos) << r.output;
  check_projection(suite, out, dir);
}

// "precision" reaches every run and the GEMM peak; DDP in bf16 (with and without the bf16
// hook) still matches the single-device bf16 reference.
TEST(Suite, Bf16SuitePassesItsCorrectnessChecks) {
  TempDir dir("suite_bf16");
  write_file(dir / "s.json", R"({"workloads": ["mlp-small"], "modes": ["single", "ddp"],
      "world_sizes": [2], "steps": 8, "warmup": 1, "per_device_batch": {"mlp-small": 16},
      "bucket_sweep_mb": [], "bucket_autotune": false, "overlap_off": false, "comm_hooks": ["bf16"], "precision": "bf16",
      "flags": ["static_graph", "no_sync_k4"], "flags_repeats": 1})");
  CliResult r = run_cli("suite " + (dir / "s.json") + " --out " + (dir / "out"));
  ASSERT_EQ(r.code, 0) << r.output;
  const auto suite = load(dir / "out/suite.json");
  EXPECT_EQ(suite["suite"]["precision"], "bf16");
  int checked = 0;
  for (const auto& run : suite["runs"]) {
    EXPECT_EQ(run["status"], "ok") << run.dump();
    const auto record = load(dir / ("out/" + run["record"].get<std::string>()));
    EXPECT_EQ(record["config"]["precision"], "bf16") << run["id"];
    if (run.contains("correctness") && run["correctness"].contains("passed")) {
      EXPECT_TRUE(run["correctness"]["passed"].get<bool>()) << run["correctness"].dump();
      ++checked;
    }
  }
  EXPECT_GE(checked, 4) << "ddp w2, its bf16-hook variant and the two flag runs beside them";
  // Group "flags": the default and each flag once, and their ledger in the report.
  int flag_runs = 0;
  for (const auto& run : suite["runs"]) flag_runs += run["group"] == "flags";
  EXPECT_EQ(flag_runs, 3);
  const std::string html = read_file(dir / "out/report.html");
  EXPECT_NE(html.find("What each DDP flag costs"), std::string::npos);
  EXPECT_NE(html.find("no_sync_k4"), std::string::npos);
}

// A suite of named runs only (key "runs", group explicit), as scripts/gpu_check.sh runs its
// training, started through a dynamic loader as the check starts a bundle on an older
// glibc: the suite's runs must start the same way (base/subprocess.h self_command).
// Note [Design rounds], end to end: DP and DDP run in three alternated rounds, every round's
// runs are recorded with their round, and the report's first screen gives the factor over the
// rounds (or the tie they make), after saying what the box is.
TEST(Suite, DesignRoundsFeedTheVerdict) {
  TempDir dir("suite_rounds");
  write_file(dir / "s.json", R"({"workloads": ["mlp-small"], "modes": ["dp", "ddp"],
      "world_sizes": [2], "steps": 10, "warmup": 1, "per_device_batch": {"mlp-small": 8},
      "bucket_sweep_mb": [], "bucket_autotune": false, "overlap_off": false, "comm_hooks": [],
      "flags": [], "loader_workers": [], "design_rounds": 3, "sharding_rounds": 0})");
  const std::string out = dir / "out";
  CliResult r = run_cli("suite " + (dir / "s.json") + " --out " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  const auto suite = load(out + "/suite.json");
  EXPECT_TRUE(reports::validate_suite_record(suite).empty())
      << reports::format_errors(reports::validate_suite_record(suite));
  std::vector<std::string> order;
  for (const auto& run : suite["runs"]) {
    EXPECT_EQ(run["status"], "ok") << run.dump();
    if (run["group"] == "rounds") order.push_back(run["id"].get<std::string>());
  }
  EXPECT_EQ(order,
            (std::vector<std::string>{"mlp-small/ddp/w2/round-1", "mlp-small/dp/w2/round-1",
                                      "mlp-small/dp/w2/round-2", "mlp-small/ddp/w2/round-2"}));
  std::ifstream md(out + "/report.md");
  const std::string report((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
  EXPECT_NE(report.find("This box: 2 logical devices share"), std::string::npos) << report;
  const bool factor = report.find("over 3 alternated rounds") != std::string::npos;
  const bool tie = report.find("mlp-small: DP and DDP tie at 2 devices") != std::string::npos;
  EXPECT_TRUE(factor || tie) << report.substr(0, 3000);
}

TEST(Suite, ExplicitRunsRunThroughTheLoaderThatStartedTheSuite) {
  const std::string loader = "/lib64/ld-linux-x86-64.so.2";
  if (!fs::exists(loader)) GTEST_SKIP() << "no " << loader << " on this machine";
  TempDir dir("suite_explicit");
  write_file(dir / "s.json", R"({"workloads": [], "steps": 2, "warmup": 1, "runs": [
      {"name": "single-mlp", "workload": "mlp-small", "mode": "single", "precision": "bf16"},
      {"name": "dp-mlp", "workload": "mlp-small", "mode": "dp", "world_size": 2,
       "devices": "cpu:0,cpu:1"},
      {"name": "ddp-powersgd", "workload": "mlp-small", "mode": "ddp", "world_size": 2,
       "comm_hook": "powersgd", "powersgd_start_iter": 2, "powersgd_rank": 2}]})");
  const std::string cmd = loader + " --library-path /nonexistent " + DDPBENCH_BIN + " suite " +
                          (dir / "s.json") + " --device cpu --out " + (dir / "out") + " 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  std::string output;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), pipe)) output.append(buf, n);
  const int status = ::pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  const auto suite = load(dir / "out/suite.json");
  EXPECT_TRUE(reports::validate_suite_record(suite).empty());
  ASSERT_EQ(suite["runs"].size(), 3u) << suite["runs"].dump();
  for (const char* id : {"single-mlp", "dp-mlp", "ddp-powersgd"}) {
    const auto* run = find_run(suite, id);
    ASSERT_TRUE(run) << id;
    EXPECT_EQ((*run)["group"], "explicit");
    EXPECT_EQ((*run)["status"], "ok") << run->dump();
    EXPECT_TRUE(fs::exists(dir / ("out/runs/" + std::string(id) + ".json"))) << id;
  }
  const auto single = load(dir / "out/runs/single-mlp.json");
  EXPECT_EQ(single["config"]["precision"], "bf16");
  const auto ddp = load(dir / "out/runs/ddp-powersgd.json");
  EXPECT_EQ(ddp["config"]["comm_hook"], "powersgd");
  const auto* hook = find_run(suite, "ddp-powersgd");
  EXPECT_NE((*hook)["correctness"].dump().find("no single-device run"), std::string::npos)
      << "no reference at its batch in this suite: skipped, and said so: "
      << (*hook)["correctness"].dump();
  EXPECT_FALSE(suite.contains("projection")) << "nothing to project from without a matrix";
  EXPECT_TRUE(fs::exists(dir / "out/report.html"));
}

// Issue 43: the loader group measured the suite's own JPEGs although "data" named the user's
// image folder. It trains on the user's folder (the suite makes none), and the report's input
// pipeline section names it with what it held.
TEST(Suite, TheLoaderGroupMeasuresTheUsersImagesAndTheReportSaysSo) {
  TempDir dir("suite_user_images");
  const std::string images = dir / "my_images";
  CliResult r = run_cli(
      "data make imagefolder --classes 2 --images-per-class 6 --min-side 40 "
      "--max-side 48 --out " +
      images);
  ASSERT_EQ(r.code, 0) << r.output;
  write_file(dir / "s.json", R"({"workloads": ["resnet-tiny"], "modes": ["single"],
      "world_sizes": [1], "steps": 2, "warmup": 0, "per_device_batch": {"resnet-tiny": 4},
      "loader_workers": [0], "data": {"resnet-tiny": ")" +
                                 images + R"("}})");
  r = run_cli("suite " + (dir / "s.json") + " --device cpu --out " + (dir / "out"));
  ASSERT_EQ(r.code, 0) << r.output;
  const auto suite = load(dir / "out/suite.json");
  const auto* run = find_run(suite, "resnet-tiny/single/w1/loader-w0");
  ASSERT_TRUE(run) << suite["runs"].dump();
  EXPECT_EQ((*run)["status"], "ok") << run->dump();
  const auto loader =
      load(dir / "out/runs/resnet-tiny_single_w1_loader-w0.json")["summary"]["loader"];
  EXPECT_EQ(loader["data"], images);
  EXPECT_EQ(loader["files"].size(), 2u) << loader.dump();
  EXPECT_FALSE(fs::exists(dir / "out/data/imagefolder")) << "the suite made its own JPEGs";
  const std::string report = read_file(dir / "out/report.html");
  EXPECT_NE(report.find("resnet-tiny measured on " + images + " (12 images in 2 class folders)"),
            std::string::npos)
      << report;
}

TEST(Suite, AFailedRunIsRecordedAndTheSuiteGoesOn) {
  TempDir dir("suite_fail");
  // embed-tiny's dataset is smaller than this batch: that run fails at start-up (exit 2).
  write_file(dir / "s.json",
             R"({"workloads": ["embed-tiny"], "modes": ["single"], "world_sizes": [1],
      "steps": 2, "warmup": 0, "per_device_batch": {"embed-tiny": 1000000}})");
  write_file(dir / "ok.json", R"({"workloads": ["embed-tiny", "mlp-small"], "modes": ["single"],
      "world_sizes": [1], "steps": 2, "warmup": 0, "per_device_batch": {"embed-tiny": 1000000, "mlp-small": 8}})");
  CliResult r = run_cli("suite " + (dir / "ok.json") + " --out " + (dir / "out"));
  EXPECT_EQ(r.code, 1) << "a failed run fails the suite's exit code\n" << r.output;
  const auto suite = load(dir / "out/suite.json");
  EXPECT_TRUE(suite["complete"].get<bool>()) << "every run has a result, failed ones included";
  const auto* bad = find_run(suite, "embed-tiny/single/w1");
  const auto* good = find_run(suite, "mlp-small/single/w1");
  ASSERT_TRUE(bad && good);
  EXPECT_EQ((*bad)["status"], "failed");
  EXPECT_NE((*bad)["error"].get<std::string>().find("exceeds the dataset"), std::string::npos)
      << (*bad)["error"];
  EXPECT_EQ((*good)["status"], "ok") << "the suite went on after the failure";
  EXPECT_TRUE(fs::exists(dir / "out/report.html"));
}

TEST(Suite, CtrlCKeepsFinishedRunsAndResumeRunsOnlyWhatIsMissing) {
  TempDir dir("suite_resume");
  write_file(dir / "s.json",
             R"({"workloads": ["mlp-small"], "modes": ["single", "ddp"], "world_sizes": [1, 2],
      "steps": 30, "warmup": 1, "bucket_sweep_mb": [], "bucket_autotune": false,
      "comm_hooks": [], "overlap_off": false, "flags": [], "sharding_rounds": 1})");
  const std::string out = dir / "out";
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::string log = dir / "suite.log";
    std::freopen(log.c_str(), "w", stdout);
    std::freopen(log.c_str(), "a", stderr);
    const std::string file = dir / "s.json";
    ::execl(DDPBENCH_BIN, DDPBENCH_BIN, "suite", file.c_str(), "--out", out.c_str(), nullptr);
    _exit(127);
  }
  // Interrupt once the first run has finished.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  bool one_done = false;
  while (!one_done && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    try {
      const auto suite = load(out + "/suite.json");  // named: a temporary would die before the loop
      for (const auto& run : suite["runs"]) one_done = one_done || run["status"] == "ok";
    } catch (...) {
    }
  }
  ASSERT_TRUE(one_done);
  const auto t0 = std::chrono::steady_clock::now();
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const double stop_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  EXPECT_LT(stop_s, 15) << "Ctrl-C stops the suite within seconds";
  auto suite = load(out + "/suite.json");
  EXPECT_FALSE(suite["complete"].get<bool>());
  int ok = 0, missing = 0;
  std::map<std::string, double> durations;
  for (const auto& run : suite["runs"]) {
    if (run["status"] == "ok") {
      ++ok;
      durations[run["id"]] = run["duration_s"].get<double>();
    } else {
      EXPECT_TRUE(run["status"] == "interrupted" || run["status"] == "pending") << run.dump();
      ++missing;
    }
  }
  EXPECT_GE(ok, 1);
  EXPECT_GE(missing, 1);
  // The report of an incomplete suite says so.
  std::ifstream html(out + "/report.html");
  const std::string page((std::istreambuf_iterator<char>(html)), {});
  EXPECT_NE(page.find("INCOMPLETE"), std::string::npos);
  EXPECT_EQ(processes_in(out), 0) << "no rank of the interrupted run outlives it";

  CliResult r = run_cli("suite --resume " + out + " --quick");
  EXPECT_EQ(r.code, 2) << "--resume takes the matrix from the folder\n" << r.output;
  r = run_cli("suite --resume " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  suite = load(out + "/suite.json");
  EXPECT_TRUE(suite["complete"].get<bool>());
  for (const auto& run : suite["runs"]) {
    EXPECT_EQ(run["status"], "ok") << run.dump();
    if (durations.count(run["id"])) {
      EXPECT_EQ(run["duration_s"].get<double>(), durations[run["id"]])
          << "finished runs are not rerun";
    }
  }
  EXPECT_EQ(suite["context"]["resumed"].size(), 1u);
}

TEST(Suite, WithPytorchPutsPytorchsRunBesideEachConfiguration) {
  if (std::system((std::string(DDPB_TEST_PYTHON) + " -c 'import torch' >/dev/null 2>&1").c_str()) !=
      0) {
    GTEST_SKIP() << DDPB_TEST_PYTHON << " cannot import torch (apt install python3-torch)";
  }
  TempDir dir("suite_torch");
  write_file(dir / "s.json",
             R"({"workloads": ["mlp-small"], "world_sizes": [1, 2], "steps": 3, "warmup": 1,
      "per_device_batch": {"mlp-small": 16}, "bucket_sweep_mb": [], "bucket_autotune": false,
      "comm_hooks": [], "overlap_off": true, "flags": [], "design_rounds": 1,
      "sharding_rounds": 1})");
  const std::string out = dir / "out";
  CliResult r = run_cli("suite " + (dir / "s.json") + " --with-pytorch --out " + out,
                        std::string("DDPBENCH_PYTHON=") + DDPB_TEST_PYTHON);
  ASSERT_EQ(r.code, 0) << r.output;
  const auto suite = load(out + "/suite.json");
  // Note [Links by collective]: a suite that shards sweeps the all-gather and reduce-scatter
  // too, and its projection fits each on the sweep.
  const auto coll = load(out + "/" + suite["collectives"][0]["record"].get<std::string>());
  size_t gathers = 0, scatters = 0;
  for (const auto& row : coll["results"])
    gathers += row["op"] == "allgather", scatters += row["op"] == "reduce_scatter";
  EXPECT_GE(gathers, 2u);
  EXPECT_EQ(suite["comm_fit"]["all_gather_points"].size(), gathers);
  EXPECT_EQ(suite["comm_fit"]["reduce_scatter_points"].size(), scatters);
  EXPECT_TRUE(suite["projection"]["topology"].contains("reduce_scatter"));
  for (const auto& run : suite["runs"]) {
    SCOPED_TRACE(run["id"].get<std::string>());
    ASSERT_TRUE(run.contains("pytorch"));
    const auto& p = run["pytorch"];
    if (run["mode"] == "dp" || run["variant"] == "no-overlap" || run["variant"] == "bucket-auto" ||
        (run["group"] == "sharding" && run["mode"] != "ddp")) {
      EXPECT_EQ(p["status"], "skipped") << "PyTorch's DataParallel needs CUDA; no --no-overlap, "
                                           "bucket autotuner or ZeRO in DDP there";
      EXPECT_FALSE(p["error"].get<std::string>().empty());
      continue;
    }
    ASSERT_EQ(p["status"], "ok") << p.dump();
    EXPECT_GT(p["samples_per_s"].get<double>(), 0);
    const auto record = load(out + "/" + p["record"].get<std::string>());
    EXPECT_EQ(record["implementation"], "pytorch");
    if (run["mode"] == "ddp" && run["world_size"] == 2) EXPECT_TRUE(p.contains("overlap_ratio"));
  }
  std::ifstream html(out + "/report.html");
  const std::string page((std::istreambuf_iterator<char>(html)), {});
  EXPECT_NE(page.find("PyTorch"), std::string::npos);
  // Note [Sharding rounds]: DDP and its ZeRO stages, side by side in their own section.
  const size_t sharding = page.find("<section id=\"sharding\">");
  ASSERT_NE(sharding, std::string::npos);
  // What a stage saves (or, with buckets as large as this small model, costs) per rank, and
  // at 8 ranks by the formulas (records from this build promise their model state), in the
  // section and in the verdict before it.
  const std::regex stage(
      "ZeRO-2 (saves [0-9.]+% of|uses [0-9.]+% more) memory per rank at [0-9.]+x "
      "DDP(&#39;|')s step; at 8 ranks it would (save|use) ");
  std::smatch in_section, in_verdict;
  const std::string after = page.substr(sharding), before = page.substr(0, sharding);
  EXPECT_TRUE(std::regex_search(after, in_section, stage)) << after.substr(0, 4000);
  EXPECT_TRUE(std::regex_search(before, in_verdict, stage)) << "the verdict says it first";
}

// Issue 25, D3 / Note [Results folder lock]: a second suite on a folder in use refuses,
// naming the holder, and runs nothing; the lock goes with its holder.
TEST(Suite, AFolderInUseIsRefusedNamingTheHolder) {
  TempDir dir("suite_lock");
  write_file(dir / "s.json", R"({"workloads": ["mlp-small"], "modes": ["single"],
                                  "world_sizes": [1], "steps": 1, "warmup": 0})");
  const std::string out = dir / "results";
  fs::create_directories(out);
  const int fd = ::open((out + "/.ddpbench.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  const std::string pid = std::to_string(::getpid()) + "\n";
  ASSERT_EQ(::write(fd, pid.data(), pid.size()), static_cast<ssize_t>(pid.size()));
  const auto held = run_cli("suite " + (dir / "s.json") + " --out " + out);
  EXPECT_EQ(held.code, 2) << held.output;
  EXPECT_NE(held.output.find("in use by another ddpbench suite (PID " + std::to_string(::getpid())),
            std::string::npos)
      << held.output;
  EXPECT_FALSE(fs::exists(out + "/suite.json")) << "a refused suite wrote its record";
  ::close(fd);  // the holder is gone: the same command now runs
  const auto free = run_cli("suite " + (dir / "s.json") + " --out " + out);
  EXPECT_EQ(free.code, 0) << free.output;
  EXPECT_TRUE(fs::exists(out + "/suite.json"));
}

// Note [A results folder is data] (issue 25, D1, S3) and M7: --resume rebuilds every run from
// the matrix, refuses stored arguments or paths it would not have written, retries failed runs,
// and says when the folder comes from another build or machine.
TEST(Suite, ResumeRunsTheMatrixNotTheFolderAndRetriesFailedRuns) {
  TempDir dir("suite_data");
  write_file(dir / "s.json", R"({"workloads": ["mlp-small"], "modes": ["single"],
                                  "world_sizes": [1], "steps": 1, "warmup": 0})");
  const std::string out = dir / "out";
  ASSERT_EQ(run_cli("suite " + (dir / "s.json") + " --out " + out).code, 0);
  const nlohmann::json done = load(out + "/suite.json");
  const auto resume_with = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json s = done;
    edit(s);
    write_file(out + "/suite.json", s.dump());
    return run_cli("suite --resume " + out);
  };
  // An injected flag: refused, naming the run, and never run.
  const std::string planted = dir / "planted";
  CliResult r = resume_with([&](nlohmann::json& s) {
    s["runs"][0]["status"] = "pending";
    s["runs"][0]["args"].push_back("--dump");
    s["runs"][0]["args"].push_back(planted);
  });
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("run mlp-small/single/w1 holds arguments its matrix does not give"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(planted)) << "the planted --dump ran";
  // A record path outside the folder: refused, and nothing of the file is echoed.
  r = resume_with([](nlohmann::json& s) { s["runs"][0]["record"] = "/etc/passwd"; });
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("record is /etc/passwd, not this folder's runs/mlp-small_single_w1.json"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("root:"), std::string::npos) << r.output;
  // The same run written another way (an earlier ddpbench's order, a default spelled out) is
  // the matrix's run: resumed, and the matrix's text takes its place.
  r = resume_with([](nlohmann::json& s) {
    auto& args = s["runs"][0]["args"];
    args.insert(args.begin() + 1, {"--cpu-threads", "1", "--dp-broadcast-mb", "10"});
    s["runs"][0]["status"] = "pending";
  });
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(load(out + "/suite.json")["runs"][0]["args"], done["runs"][0]["args"]);
  // A failed run is retried; a folder of another commit and host is resumed with a warning.
  r = resume_with([](nlohmann::json& s) {
    s["runs"][0]["status"] = "failed";
    s["runs"][0]["error"] = "No space left on device";
    s["complete"] = true;
    s["context"]["git_commit"] = "0123abc";
    s["context"]["host"] = "another-host";
  });
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("--resume retries 1 failed run(s)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("was written by another build or machine: commit 0123abc"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("host another-host"), std::string::npos) << r.output;
  EXPECT_EQ(load(out + "/suite.json")["runs"][0]["status"], "ok");
}

TEST(Suite, UsageErrorsExitTwoWithOneLine) {
  TempDir dir("suite_usage");
  write_file(dir / "typo.json", R"({"wrokloads": ["mlp-small"]})");
  // Issue 25, E2 and E3: values `ddpbench run` would refuse, and a topology that does not
  // exist, are refused before any run (they used to run the suite and fail late).
  write_file(dir / "topo.json", R"({"projection_topology": "infiniband"})");
  write_file(dir / "huge.json", R"({"world_sizes": [1, 1024]})");
  write_file(dir / "far.hosts", "far 192.0.2.1\n");
  write_file(dir / "odd.hosts", "here 127.0.0.1\n");  // one slot, one host: 2 ranks cannot fit
  struct Case {
    std::string args, expect;
  } cases[] = {
      {"suite " + (dir / "typo.json") + " --out " + (dir / "a"), "unknown key \"wrokloads\""},
      {"suite " + (dir / "missing.json") + " --out " + (dir / "b"), "cannot read suite file"},
      {"suite --device cuda --out " + (dir / "c"), "GPU"},
      {"suite --device tpu --out " + (dir / "d"), "--device must be cpu or cuda"},
      {"suite --max-world-size 0 --out " + (dir / "e"), "--max-world-size"},
      {"suite --resume " + (dir / "nothing"), "no suite.json"},
      {"suite --quick --out /proc/ddpbench-results", "cannot create the results folder"},
      {"report " + (dir / "typo.json") + " -o " + (dir / "r.pdf"), ".html or .md"},
      {"compare " + (dir / "typo.json") + " " + (dir / "typo.json"), "typo.json"},
      {"suite " + (dir / "topo.json") + " --out " + (dir / "f"),
       "suite: \"projection_topology\": unknown topology preset 'infiniband'"},
      {"suite " + (dir / "huge.json") + " --out " + (dir / "g"),
       "/w1024: --world-size 1024 asks for more logical CPU devices than the limit"},
      // Note [Runs across hosts]: checked before anything runs.
      {"suite --quick --launch 'ssh {host}' --out " + (dir / "h"), "--launch needs --hosts FILE"},
      {"suite --quick --hosts " + (dir / "no-hosts") + " --out " + (dir / "i"),
       "--hosts: cannot read"},
      {"suite --quick --hosts " + (dir / "far.hosts") + " --out " + (dir / "j"),
       "the first host, far (192.0.2.1), is not this machine"},
      {"suite --quick --hosts " + (dir / "odd.hosts") + " --out " + (dir / "k"),
       "world size 2 does not spread evenly"},
  };
  for (const auto& c : cases) {
    CliResult r = run_cli(c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_FALSE(fs::exists(dir / "a/suite.json")) << "nothing written on a usage error";
  }
}

}  // namespace
}  // namespace ddpb::testing
