#include "comm/flight_doctor.h"
#include "comm/flight_recorder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/clock.h"

namespace ddpb::comm {
namespace {

TEST(FlightRecorder, KeepsTheLastNCollectivesWithTheirStates) {
  FlightRecorder r(4);
  for (int64_t s = 0; s < 6; ++s) r.enqueued(s, "allreduce", 100 * s, "f32", steady_now_ns());
  r.started(4, steady_now_ns());
  r.finished(4, /*failed=*/false, steady_now_ns());
  r.started(5, steady_now_ns());
  r.tag(5, "bucket 2");
  r.finished(0, false, steady_now_ns());  // overwritten: ignored
  auto j = r.to_json();
  ASSERT_EQ(j.size(), 4u) << j.dump();
  EXPECT_EQ(j[0]["seq"], 2);
  EXPECT_EQ(j[2]["seq"], 4);
  EXPECT_EQ(j[2]["state"], "completed");
  EXPECT_EQ(j[3]["state"], "started");
  EXPECT_EQ(j[3]["tag"], "bucket 2");
  EXPECT_EQ(j[3]["bytes"], 500);
  EXPECT_GT(j[2]["end_ns"].get<int64_t>(), 0);
}

TEST(FlightRecorder, FailedCollectivesAreMarked) {
  FlightRecorder r(8);
  r.enqueued(0, "broadcast", 4, "f32", steady_now_ns());
  r.started(0, steady_now_ns());
  r.finished(0, /*failed=*/true, steady_now_ns());
  EXPECT_EQ(r.to_json()[0]["state"], "failed");
}

// `ddpbench doctor` reads untrusted files: a dump claiming a world of 10^9 ranks once made
// it allocate 3.5 GB and print nothing. The missing ranks are now one range.
TEST(FlightDoctor, AHugeClaimedWorldSizeCostsNothing) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("ddpb_doctor_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  nlohmann::json entry = {{"seq", 0},   {"op", "allreduce"}, {"tag", ""},
                          {"bytes", 4}, {"dtype", "f32"},    {"state", "started"}};
  std::ofstream(dir / "rank0.json") << nlohmann::json{
      {"rank", 0},
      {"world_size", 1000000000},
      {"reason", "test"},
      {"entries", {entry}}}.dump();
  const std::string report = diagnose_flight_dumps(dir.string());
  EXPECT_LT(report.size(), 2000u) << report;
  EXPECT_NE(report.find("ranks 1-999999999 are behind: they left no dump"), std::string::npos)
      << report;
  // A malformed entry is a usage error naming the file, not a JSON exception.
  std::ofstream(dir / "rank0.json")
      << nlohmann::json{{"rank", 0}, {"world_size", 1}, {"entries", {{{"seq", "x"}}}}}.dump();
  EXPECT_THROW(diagnose_flight_dumps(dir.string()), UsageError);
  std::filesystem::remove_all(dir);
}

// A dump directory planted in a shared /tmp (a link, or another user's directory) is refused
// before the run starts; the default directory prefers $XDG_RUNTIME_DIR and $TMPDIR.
TEST(FlightDir, PlantedDirectoriesAreRefused) {
  const auto base =
      std::filesystem::temp_directory_path() / ("ddpb_flightdir_" + std::to_string(::getpid()));
  std::filesystem::create_directories(base / "real");
  std::filesystem::create_symlink(base / "real", base / "link");
  EXPECT_THROW(check_flight_dir((base / "link").string()), UsageError);
  EXPECT_NO_THROW(check_flight_dir((base / "real").string()));
  EXPECT_NO_THROW(check_flight_dir((base / "missing").string()));
  if (::geteuid() == 0) {  // root can plant a directory owned by someone else
    ASSERT_EQ(::chown((base / "real").c_str(), 65534, 65534), 0);
    EXPECT_THROW(check_flight_dir((base / "real").string()), UsageError);
  }
  const char* old_tmpdir = std::getenv("TMPDIR");
  const std::string saved = old_tmpdir ? old_tmpdir : "";
  ::setenv("TMPDIR", base.c_str(), 1);
  ::unsetenv("XDG_RUNTIME_DIR");
  EXPECT_EQ(default_flight_dir(1234), base.string() + "/ddpbench-flight-1234");
  // Issue 48, P17: a TMPDIR that is no directory is passed over, and said.
  ::setenv("TMPDIR", (base / "missing").c_str(), 1);
  std::string skipped;
  EXPECT_EQ(default_flight_dir(1234, &skipped), "/tmp/ddpbench-flight-1234");
  EXPECT_EQ(skipped, "TMPDIR=" + (base / "missing").string() + " is no directory");
  if (old_tmpdir) {
    ::setenv("TMPDIR", saved.c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
  std::filesystem::remove_all(base);
}

// Issue 25, M10: TMPDIR=/nonexistent/dir made the dump create /nonexistent. Only the dump
// folder itself is ever created.
TEST(FlightDir, NoFolderAboveTheDumpFolderIsCreated) {
  const auto missing =
      std::filesystem::temp_directory_path() / ("ddpb_no_parent_" + std::to_string(::getpid()));
  std::filesystem::remove_all(missing);
  // Issue 48, P17: refused at start, where the dumps would silently not be written.
  EXPECT_THROW(set_flight_identity(0, 1, (missing / "below" / "ddpbench-flight-1").string()),
               UsageError);
  EXPECT_FALSE(std::filesystem::exists(missing)) << "the check created " << missing;
  std::filesystem::create_directories(missing / "below");
  set_flight_identity(0, 1, (missing / "below" / "ddpbench-flight-1").string());
  const std::string path = dump_flight_recorder("test");
  EXPECT_EQ(path, (missing / "below" / "ddpbench-flight-1" / "rank0.json").string());
  set_flight_identity(0, 1, "");
  std::filesystem::remove_all(missing);
}

// Dumps written into a fresh folder, for the doctor.
class DumpFolder {
 public:
  DumpFolder()
      : dir_(std::filesystem::temp_directory_path() /
             ("ddpb_doctor_" + std::to_string(::getpid()) + "_" + std::to_string(++count_))) {
    std::filesystem::create_directories(dir_);
  }
  ~DumpFolder() { std::filesystem::remove_all(dir_); }
  void write(int rank, const nlohmann::json& fields, const nlohmann::json& entries) {
    nlohmann::json doc = fields;
    doc["rank"] = rank;
    doc["world_size"] = 2;
    // One entry in braces is that entry, not an array of it (nlohmann's initializer lists).
    doc["entries"] = entries.is_array() ? entries : nlohmann::json::array({entries});
    std::ofstream(dir_ / ("rank" + std::to_string(rank) + ".json")) << doc.dump();
  }
  std::string str() const { return dir_.string(); }

 private:
  static inline int count_ = 0;
  std::filesystem::path dir_;
};

nlohmann::json entry(int64_t seq, const std::string& op, int64_t bytes, const std::string& state) {
  return {{"seq", seq},     {"op", op},       {"tag", ""},
          {"bytes", bytes}, {"dtype", "f32"}, {"state", state}};
}

// Issue 25, M3: allreduce #2 on one rank and allgather #2 on the other was "rank 1 issued
// collectives only up to #2, while other ranks wait in #2", which never says the ops differ.
TEST(FlightDoctor, ACollectiveMismatchIsNamedWithBothOps) {
  DumpFolder d;
  d.write(0, {{"reason", "timeout"}},
          {entry(1, "allreduce", 64, "completed"), entry(2, "allreduce", 4096, "started")});
  d.write(1, {{"reason", "timeout"}},
          {entry(1, "allreduce", 64, "completed"), entry(2, "allgather", 8192, "started")});
  const FlightDiagnosis diag = diagnose_flight_dir(d.str());
  ASSERT_FALSE(diag.verdicts.empty());
  EXPECT_EQ(diag.verdicts.front(),
            "collective mismatch at #2: rank 0 allreduce f32[1024], rank 1 allgather f32[2048]");
}

// Issue 25, M3: a rank stopped by someone else's SIGTERM is named as stopped, with where it
// stood; one its own launcher stopped after another rank failed is a casualty.
TEST(FlightDoctor, ARankStoppedFromOutsideIsNamedAsSignalled) {
  DumpFolder d;
  d.write(0, {{"reason", "timeout"}},
          {entry(1, "allreduce", 64, "completed"), entry(2, "allreduce", 64, "started")});
  d.write(1,
          {{"reason", "signal SIGTERM from pid 4242"},
           {"signal", {{"name", "SIGTERM"}, {"sender_pid", 4242}, {"from_parent", false}}},
           {"progress", {{"step", 5}, {"phase", "backward_compute"}, {"in_phase_s", 2.5}}}},
          {entry(1, "allreduce", 64, "completed")});
  const FlightDiagnosis diag = diagnose_flight_dir(d.str());
  ASSERT_FALSE(diag.verdicts.empty());
  EXPECT_EQ(diag.verdicts.front(),
            "rank 1 was stopped by SIGTERM from pid 4242 (not its launcher) after issuing "
            "collectives up to #1 and was in phase backward_compute of step 5 for 2.5 s");
  // Stopped by its launcher: the rank behind, with where it stood and what it never issued.
  d.write(1,
          {{"reason", "signal SIGTERM"},
           {"signal", {{"name", "SIGTERM"}, {"sender_pid", 1}, {"from_parent", true}}},
           {"progress", {{"step", 5}, {"phase", "forward"}, {"in_phase_s", 3.0}}}},
          {entry(1, "allreduce", 64, "completed")});
  EXPECT_EQ(diagnose_flight_dir(d.str()).verdicts.front(),
            "rank 1 is behind: it issued collectives only up to #1 and was in phase forward of "
            "step 5 for 3.0 s, while other ranks wait in #2 allreduce, 64 bytes f32");
}

// A host killed with its processes: the launcher dies first, and the kernel's SIGTERM on its
// death (PR_SET_PDEATHSIG, sent in the launcher's name) stops the rank, which dumps. It issued
// as many collectives as its peers, so only the launcher's death explains the failure.
TEST(FlightDoctor, ARankWhoseLauncherDiedIsNamedAsTheCulprit) {
  DumpFolder d;
  d.write(0, {{"reason", "gloo allreduce failed"}},
          {entry(1, "allreduce", 64, "completed"), entry(2, "allreduce", 64, "failed")});
  // Rank 1 stopped by its launcher's SIGTERM, the launcher dead or not.
  const auto stopped = [&](bool launcher_died) {
    d.write(1,
            {{"reason", "signal SIGTERM from pid 7985"},
             {"signal",
              {{"name", "SIGTERM"},
               {"sender_pid", 7985},
               {"from_parent", true},
               {"launcher_died", launcher_died}}},
             {"progress", {{"step", 12}, {"phase", "comm_exposed"}, {"in_phase_s", 0.1}}}},
            {entry(1, "allreduce", 64, "completed"), entry(2, "allreduce", 64, "started")});
  };
  stopped(true);
  const FlightDiagnosis diag = diagnose_flight_dir(d.str());
  EXPECT_TRUE(diag.culprit_named);
  ASSERT_FALSE(diag.verdicts.empty());
  EXPECT_EQ(diag.verdicts.front(),
            "rank 1 was stopped as its launcher (pid 7985) died, after issuing collectives up to "
            "#2 and was in phase comm_exposed of step 12 for 0.1 s");
  // Its launcher alive, the same dump is a casualty's: no culprit.
  stopped(false);
  EXPECT_FALSE(diagnose_flight_dir(d.str()).culprit_named);
}

// Issue 25, M1: the folder of a port outlives its job; the launcher reads only its job's dumps.
TEST(FlightDoctor, DumpsOfAnotherJobAreIgnored) {
  DumpFolder d;
  d.write(0, {{"reason", "timeout"}, {"job", "mine"}},
          {entry(1, "allreduce", 64, "completed"), entry(2, "allreduce", 64, "started")});
  d.write(1, {{"reason", "old"}, {"job", "earlier"}}, {entry(7, "allreduce", 64, "completed")});
  const FlightDiagnosis mine = diagnose_flight_dir(d.str(), "mine");
  EXPECT_EQ(mine.other_jobs, 1);
  EXPECT_TRUE(mine.collective_trouble);
  ASSERT_FALSE(mine.verdicts.empty());
  EXPECT_EQ(mine.verdicts.front(),
            "rank 1 is behind: it left no dump, while other ranks wait in #2 allreduce, 64 bytes "
            "f32");
  EXPECT_THROW(diagnose_flight_dir(d.str(), "a third job"), UsageError);
}

// Note [Dumps of an earlier job]: jobs across hosts share a token, so a dump that an earlier job
// left on the same port reads as this job's; the launcher's start time tells them apart. Rank 1
// of the earlier job dumped; this job's rank 1 died without one.
TEST(FlightDoctor, ADumpOlderThanTheLaunchIsAnEarlierJobs) {
  DumpFolder d;
  d.write(1, {{"reason", "signal SIGTERM"}, {"job", "shared"}},
          {entry(1, "allreduce", 64, "completed"), entry(2, "allreduce", 64, "completed")});
  const auto launched = std::filesystem::file_time_type::clock::now();
  std::filesystem::last_write_time(d.str() + "/rank1.json", launched - std::chrono::seconds(30));
  d.write(0, {{"reason", "timeout"}, {"job", "shared"}},
          {entry(1, "allreduce", 64, "completed"), entry(2, "allreduce", 64, "started")});
  // Without the launch time the earlier dump hides the rank that died.
  EXPECT_TRUE(diagnose_flight_dir(d.str(), "shared").missing.empty());
  const FlightDiagnosis diag =
      diagnose_flight_dir(d.str(), "shared", launched - std::chrono::milliseconds(50));
  EXPECT_EQ(diag.other_jobs, 1);
  ASSERT_FALSE(diag.verdicts.empty());
  EXPECT_EQ(diag.verdicts.front(),
            "rank 1 is behind: it left no dump, while other ranks wait in #2 allreduce, 64 bytes "
            "f32");
}

// Issue 48, P30: rank 1 stopped inside #2; rank 0 issued #3 behind #2 (under MPI only queued)
// and still waits in #2. The doctor named #3.
TEST(FlightDoctor, TheOthersWaitInTheFirstCollectiveTheyDidNotComplete) {
  DumpFolder d;
  d.write(0, {{"reason", "timeout"}},
          {entry(1, "allreduce", 64, "completed"), entry(2, "allreduce", 4096, "started"),
           entry(3, "allreduce", 256, "enqueued")});
  d.write(1, {{"reason", "watchdog"}},
          {entry(1, "allreduce", 64, "completed"), entry(2, "allreduce", 4096, "started")});
  EXPECT_EQ(diagnose_flight_dir(d.str()).verdicts.front(),
            "rank 1 is behind: it issued collectives only up to #2, while other ranks wait in #2 "
            "allreduce, 4096 bytes f32");
}

// Note [Sub-groups]: a dump lists each sub-group's collectives under that group's numbers,
// and the doctor compares the members of each group by them. The world's numbers agree here
// (a hybrid job has no world collectives in its step), so only the groups' name a rank.
nlohmann::json group(const std::string& name, const nlohmann::json& entries) {
  // One entry in braces is that entry, not an array of it (as in DumpFolder::write).
  const nlohmann::json list = entries.is_array()  ? entries
                              : entries.is_null() ? nlohmann::json::array()
                                                  : nlohmann::json::array({entries});
  return {{"group", name}, {"entries", list}};
}

nlohmann::json tagged(nlohmann::json e, const std::string& tag) {
  e["tag"] = tag;
  return e;
}

TEST(FlightDoctor, ARankBehindInASubGroupIsNamedByThatGroupsNumbers) {
  DumpFolder d;
  const nlohmann::json world = {entry(0, "broadcast", 64, "completed")};
  d.write(0,
          {{"reason", "timeout"},
           {"groups",
            {group("ranks 0,1",
                   {entry(0, "allgather", 64, "completed"),
                    tagged(entry(1, "allgather", 64, "started"), "fsdp unit h.1, backward")})}}},
          world);
  d.write(1,
          {{"reason", "watchdog"},
           {"progress", {{"step", 3}, {"phase", "forward"}}},
           {"groups", {group("ranks 0,1", {entry(0, "allgather", 64, "completed")})}}},
          world);
  const FlightDiagnosis diag = diagnose_flight_dir(d.str());
  ASSERT_FALSE(diag.verdicts.empty());
  EXPECT_TRUE(diag.culprit_named);
  EXPECT_TRUE(diag.collective_trouble);
  EXPECT_EQ(diag.behind, std::vector<int64_t>{1});
  EXPECT_EQ(diag.verdicts.front(),
            "rank 1 is behind in group ranks 0,1: it issued that group's collectives only up to "
            "#0 and was in phase forward of step 3, while other ranks wait in #1 allgather (fsdp "
            "unit h.1, backward), 64 bytes f32");
  EXPECT_EQ(diag.verdicts.size(), 1u) << "no \"none is behind\" beside it";
  EXPECT_NE(diag.report.find("rank 0 in group ranks 0,1: waiting in #1 allgather"),
            std::string::npos)
      << diag.report;
}

// A member whose dump holds none of its group's collectives issued none of them; and a rank
// behind in one group only because it waits in another's collective is a bystander, named
// after the rank that waits in nothing.
TEST(FlightDoctor, ABystanderWaitingInAnotherGroupIsNamedAfterTheRankItWaitsFor) {
  DumpFolder d;
  const nlohmann::json none = nlohmann::json::array();
  // World of 2 as DumpFolder writes it; the groups "ranks 0,1" (both) and "ranks 0" (rank 0
  // alone, done) stand for a shard group and a replicate group.
  d.write(0,
          {{"reason", "timeout"},
           {"groups",
            {group("ranks 0,1", {entry(0, "allreduce", 64, "started")}),
             group("ranks 0", {entry(0, "allreduce", 64, "completed")})}}},
          none);
  d.write(1, {{"reason", "watchdog"}}, none);
  const FlightDiagnosis diag = diagnose_flight_dir(d.str());
  ASSERT_FALSE(diag.verdicts.empty());
  EXPECT_EQ(diag.verdicts.front(),
            "rank 1 is behind in group ranks 0,1: it issued none of that group's collectives, "
            "while other ranks wait in #0 allreduce, 64 bytes f32");
  // Three ranks: rank 2 waits in the replicate group's #0 for rank 0, which waits in its
  // shard group's #0 for rank 1, which waits in nothing.
  DumpFolder e;
  auto write3 = [&](int rank, const nlohmann::json& fields) {
    nlohmann::json f = fields;
    e.write(rank, f, none);
  };
  write3(0, {{"reason", "timeout"},
             {"groups", {group("ranks 0,1", {entry(0, "allgather", 64, "started")})}}});
  write3(1, {{"reason", "watchdog"}});
  std::ofstream(std::filesystem::path(e.str()) / "rank2.json") << nlohmann::json{
      {"rank", 2},
      {"world_size", 3},
      {"reason", "timeout"},
      {"entries", none},
      {"groups",
       {group("ranks 0,2", {entry(0, "allreduce", 64, "started")})}}}.dump();
  for (int r : {0, 1}) {  // the world is 3 ranks in every dump
    std::ifstream in(std::filesystem::path(e.str()) / ("rank" + std::to_string(r) + ".json"));
    nlohmann::json doc = nlohmann::json::parse(in);
    doc["world_size"] = 3;
    std::ofstream(std::filesystem::path(e.str()) / ("rank" + std::to_string(r) + ".json"))
        << doc.dump();
  }
  const FlightDiagnosis three = diagnose_flight_dir(e.str());
  ASSERT_EQ(three.verdicts.size(), 2u) << three.report;
  EXPECT_EQ(three.verdicts[0].rfind("rank 1 is behind in group ranks 0,1: it issued none", 0), 0u)
      << three.report;
  EXPECT_EQ(three.verdicts[1],
            "rank 0 is behind in group ranks 0,2: it issued none of that group's collectives, "
            "while other ranks wait in #0 allreduce, 64 bytes f32, itself waiting in #0 "
            "allgather, 64 bytes f32 of group ranks 0,1");
}

// Review of issue 47's doctor: a group's members come from its whole name, not the 200
// characters printed of it (cut there, "ranks 0,2,...,124,1" would make rank 1 a member); a
// rank stopped inside its own group's collective waits for no one there and stays the
// suspect; a name may claim two billion ranks at the cost of the dumps alone.
void write_doc(const std::string& dir, int rank, int64_t world, const nlohmann::json& groups) {
  nlohmann::json doc = {{"rank", rank},
                        {"world_size", world},
                        {"reason", "timeout"},
                        {"entries", nlohmann::json::array()}};
  // One group in braces is that group, not a list of it (nlohmann's initializer lists).
  if (!groups.is_null())
    doc["groups"] = groups.is_array() ? groups : nlohmann::json::array({groups});
  std::ofstream(std::filesystem::path(dir) / ("rank" + std::to_string(rank) + ".json"))
      << doc.dump();
}

TEST(FlightDoctor, AGroupsMembersAreReadFromItsWholeName) {
  DumpFolder d;
  std::string evens = "ranks 0";
  for (int r = 2; r < 400; r += 2) evens += "," + std::to_string(r);
  ASSERT_EQ(evens.substr(198, 2), ",1") << "the name cut at 200 ends in rank 1";
  write_doc(d.str(), 0, 400, {group(evens, {entry(0, "allreduce", 64, "completed")})});
  write_doc(d.str(), 1, 400, nlohmann::json());
  const FlightDiagnosis diag = diagnose_flight_dir(d.str());
  for (const std::string& v : diag.verdicts)
    EXPECT_EQ(v.find("rank 1 is behind in group"), std::string::npos) << v;
}

TEST(FlightDoctor, ARankStoppedInsideItsGroupsCollectiveIsTheSuspect) {
  DumpFolder d;
  d.write(0,
          {{"reason", "timeout"},
           {"groups",
            {group("ranks 0,1",
                   {entry(0, "allgather", 64, "completed"), entry(1, "allgather", 64, "started"),
                    entry(2, "allgather", 64, "enqueued")})}}},
          nlohmann::json::array());
  d.write(1,
          {{"reason", "watchdog"},
           {"groups",
            {group("ranks 0,1", {entry(0, "allgather", 64, "completed"),
                                 entry(1, "allgather", 64, "started")})}}},
          nlohmann::json::array());
  const FlightDiagnosis diag = diagnose_flight_dir(d.str());
  ASSERT_FALSE(diag.verdicts.empty());
  EXPECT_EQ(diag.verdicts.front(),
            "rank 1 is behind in group ranks 0,1: it issued that group's collectives only up to "
            "#1, while other ranks wait in #1 allgather, 64 bytes f32");
}

TEST(FlightDoctor, AGroupClaimingTwoBillionRanksCostsOnlyItsDumps) {
  DumpFolder d;
  const int64_t world = int64_t{1} << 31;
  const nlohmann::json all = {group("ranks 0-2147483647", {entry(0, "allreduce", 64, "started")})};
  write_doc(d.str(), 0, world, all);
  write_doc(d.str(), 1, world, nlohmann::json());
  const FlightDiagnosis diag = diagnose_flight_dir(d.str());  // not 2^31 members in memory
  EXPECT_NE(diag.report.find("rank 1 is behind in group ranks 0-2147483647: it issued none"),
            std::string::npos)
      << diag.report;
}

TEST(FlightDoctor, MalformedGroupsInADumpAreNamed) {
  DumpFolder d;
  const nlohmann::json world = {entry(0, "broadcast", 64, "completed")};
  d.write(0, {{"reason", "timeout"}, {"groups", "ranks 0,1"}}, world);
  d.write(1, {{"reason", "timeout"}}, world);
  EXPECT_THROW(diagnose_flight_dir(d.str()), UsageError);
  d.write(0, {{"reason", "timeout"}, {"groups", {{{"group", 3}}}}}, world);
  EXPECT_THROW(diagnose_flight_dir(d.str()), UsageError);
  d.write(0, {{"reason", "timeout"}, {"groups", {group("ranks 0,1", {{{"seq", "x"}}})}}}, world);
  EXPECT_THROW(diagnose_flight_dir(d.str()), UsageError);
  // A group name that lists no ranks (untrusted text) names no members beyond its entries.
  d.write(0, {{"reason", "timeout"}, {"groups", {group("ranks 0-99999999999", {})}}}, world);
  EXPECT_NO_THROW(diagnose_flight_dir(d.str()));
}

// Note [Flight dumps across hosts]: once the dumps span hosts, the rank behind is named with
// its host; a host name from a dump reaches the terminal as hostname characters only.
TEST(FlightDoctor, TheRankBehindIsNamedWithItsHostAcrossHosts) {
  DumpFolder d;
  const auto write_pair = [&](const std::string& host0, const std::string& host1) {
    d.write(0, {{"reason", "timeout"}, {"host", host0}},
            {entry(1, "allreduce", 64, "completed"), entry(2, "allreduce", 64, "started")});
    d.write(1, {{"reason", "watchdog"}, {"host", host1}}, {entry(1, "allreduce", 64, "completed")});
  };
  write_pair("node-a", "node-b");
  EXPECT_EQ(diagnose_flight_dir(d.str()).verdicts.front(),
            "rank 1 on host node-b is behind: it issued collectives only up to #1, while other "
            "ranks wait in #2 allreduce, 64 bytes f32");
  write_pair("node-a", "node-a");  // one host: no host to name
  EXPECT_EQ(diagnose_flight_dir(d.str()).verdicts.front().find("rank 1 is behind"), 0u);
  // Op, tag and phase from a dump reach the terminal as printable ASCII only (issue 48, P21).
  d.write(0, {{"reason", "timeout"}},
          {entry(1, "allreduce", 64, "completed"), entry(2, "all\x1b[2Jreduce", 64, "started")});
  d.write(1, {{"reason", "w"}, {"progress", {{"step", 2}, {"phase", "fwd\nddpbench: ok"}}}},
          {entry(1, "allreduce", 64, "completed")});
  const std::string said = diagnose_flight_dir(d.str()).verdicts.front();
  EXPECT_NE(said.find("phase fwd?ddpbench: ok of step 2"), std::string::npos) << said;
  EXPECT_NE(said.find("#2 all?[2Jreduce"), std::string::npos) << said;
  write_pair("node-a", "b\x1b[2J\nddpbench: all good");
  EXPECT_EQ(diagnose_flight_dir(d.str()).verdicts.front().find(
                "rank 1 on host b??2J?ddpbench??all?good is behind"),
            0u)
      << diagnose_flight_dir(d.str()).verdicts.front();
}

}  // namespace
}  // namespace ddpb::comm
