// `suite --hosts`: the hosts file, how runs spread over hosts, and how nodes start
// (Note [Runs across hosts]). Across emulated hosts: tests/scripts/multihost_test.py suite.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "../../util/error_of.h"
#include "../../util/temp_dir.h"
#include "bench/suite/suite_hosts.h"
#include "core/check.h"

namespace ddpb::bench {
namespace {

namespace fs = std::filesystem;

// A hosts file in a folder of the test's own (tests/util/temp_dir.h).
class HostsFile {
 public:
  explicit HostsFile(const std::string& text) : dir_("suite_hosts") {
    std::ofstream(dir_ / "hosts") << text;
  }
  std::string str() const { return dir_ / "hosts"; }

 private:
  testing::TempDir dir_;
};

std::string usage_error_of(const std::string& text, const std::string& launch = "") {
  HostsFile f(text);
  return testing::error_of<UsageError>([&] { read_suite_hosts(f.str(), launch); });
}

TEST(SuiteHosts, AHostsFileReadsAsNetnsClusterPrintsIt) {
  HostsFile f("# two hosts\nhere 127.0.0.1 slots=2\n\nthere 127.0.0.2 slots=2  # the other\n");
  const SuiteHosts h = read_suite_hosts(f.str(), "");
  ASSERT_EQ(h.hosts.size(), 2u);
  EXPECT_EQ(h.hosts[1].name, "there");
  EXPECT_EQ(h.hosts[1].address, "127.0.0.2");
  EXPECT_EQ(h.hosts[1].slots, 2);
  EXPECT_EQ(h.launch, "ssh -o BatchMode=yes {host}");
  // By slot, as mpirun places: a run that fits the first host stays on it.
  EXPECT_EQ(h.nodes_for(1), 1);
  EXPECT_EQ(h.nodes_for(2), 1);
  EXPECT_EQ(h.nodes_for(4), 2);
  EXPECT_THROW(h.nodes_for(3), UsageError);  // 2 hosts of 1 and 2 ranks: not even
  EXPECT_THROW(h.nodes_for(6), UsageError);  // 3 hosts needed
  // The fewest hosts with as many ranks each: 10 ranks on hosts of 4 slots take 5 of 2.
  HostsFile five(
      "a 127.0.0.1 slots=4\nb 127.0.0.2 slots=4\nc 127.0.0.3 slots=4\n"
      "d 127.0.0.4 slots=4\ne 127.0.0.5 slots=4\n");
  const SuiteHosts wide = read_suite_hosts(five.str(), "");
  EXPECT_EQ(wide.nodes_for(10), 5);
  EXPECT_EQ(wide.nodes_for(8), 2);
  EXPECT_EQ(wide.nodes_for(6), 2);
  // Round trip through suite.json.
  const SuiteHosts back = hosts_from_record(host_infos(h), h.launch, "suite.json");
  EXPECT_EQ(back.hosts.size(), 2u);
  EXPECT_EQ(back.hosts[0].address, "127.0.0.1");
}

TEST(SuiteHosts, ABadHostsFileIsAUsageErrorNamingTheLine) {
  EXPECT_NE(usage_error_of("a 127.0.0.1 slots=0\n").find("line 1: slots"), std::string::npos);
  EXPECT_NE(usage_error_of("a 127.0.0.1\na 127.0.0.2\n").find("line 2: host a twice"),
            std::string::npos);
  EXPECT_NE(usage_error_of("a 127.0.0.1 slots=2\nb 127.0.0.2\n").find("the same slots"),
            std::string::npos);
  EXPECT_NE(usage_error_of("a 127.0.0.1 b c\n").find("NAME [ADDRESS] [slots=K]"),
            std::string::npos);
  EXPECT_NE(usage_error_of("# nothing\n").find("names no host"), std::string::npos);
  EXPECT_NE(usage_error_of("a;rm 127.0.0.1\n").find("not a host name"), std::string::npos);
  // ssh would read it as an option ("-oProxyCommand=...").
  EXPECT_NE(usage_error_of("a 127.0.0.1\n-oBatchMode 127.0.0.2\n").find("not a host name"),
            std::string::npos);
  // TEST-NET-1 (RFC 5737) is no interface of this machine.
  EXPECT_NE(usage_error_of("far 192.0.2.1\n").find("is not this machine"), std::string::npos);
  EXPECT_NE(usage_error_of("a 127.0.0.1\n", "ssh").find("must name {host}"), std::string::npos);
  EXPECT_NE(usage_error_of("a 127.0.0.1\n", "no-such-launcher-ddpb {host}").find("not on PATH"),
            std::string::npos);
}

// Nodes 1.. start through the launch command with one shell line, the token on their standard
// input; node 0 starts here with it in its environment; every node gets its node flags.
TEST(SuiteHosts, NodesStartWithTheirFlagsAndTheTokenOffTheCommandLine) {
  HostsFile f("here 127.0.0.1\nthere 127.0.0.1\n");
  const SuiteHosts h = read_suite_hosts(f.str(), "env DDPB_TEST_HOST={host} sh -c");
  const testing::TempDir nodes("suite_nodes");
  const fs::path dir = nodes.path();
  ChildSpec node0;
  node0.argv = {"/bin/sh", "-c",
                "echo flags: \"$@\"; echo token=$DDPBENCH_STORE_TOKEN; echo host=$DDPB_TEST_HOST",
                "sh"};
  node0.cwd = dir.string();
  node0.log_path = (dir / "run.log").string();
  node0.timeout_s = 30;
  std::vector<NodeOutcome> others;
  const ChildResult r = run_across_hosts(node0, h, 2, 5, &others);
  EXPECT_EQ(r.exit_code, 0);
  ASSERT_EQ(others.size(), 1u);
  EXPECT_EQ(others[0].exit_code, 0);
  EXPECT_EQ(others[0].host, "there");
  EXPECT_EQ(others[0].log, (dir / "run-node1.log").string());
  const std::string zero = testing::read_file_bytes(node0.log_path),
                    one = testing::read_file_bytes(others[0].log);
  EXPECT_NE(zero.find("flags: --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 --master-port"),
            std::string::npos)
      << zero;
  EXPECT_NE(one.find("flags: --nnodes 2 --node-rank 1 --master-addr 127.0.0.1 --master-port"),
            std::string::npos)
      << one;
  EXPECT_NE(one.find("host=there"), std::string::npos) << one;
  const auto token = [](const std::string& log) {
    const size_t at = log.find("token=");
    return at == std::string::npos ? "" : log.substr(at + 6, log.find('\n', at) - at - 6);
  };
  EXPECT_EQ(token(zero).size(), 32u) << zero;
  EXPECT_EQ(token(zero), token(one));
}

}  // namespace
}  // namespace ddpb::bench
