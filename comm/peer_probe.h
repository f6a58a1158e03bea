// After a collective timed out across hosts: which hosts does this one still reach?
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "comm/rank_env.h"
#include "comm/store.h"

namespace ddpb::comm {

// Note [Unreachable hosts]
// A collective that times out says which collective, never why: a peer that died resets its
// connections (Gloo names it), but a host whose link went down, or that lost power, only
// stops answering. At rendezvous each rank publishes its host and address in the store
// (ddpbench/host/<rank>). When a collective times out, the rank reads them back (rank 0 from
// the store it serves) and knocks on each other host at MASTER_PORT: a connection, or a
// refusal, is an answer; silence for a second is none (a firewall that drops that port reads
// as silence too, hence "may"). The timeout's message then names the hosts that do not answer,
// and their ranks. A rank whose store read times out is itself cut off from rank 0's host; one
// whose store refuses has lost rank 0's process. On one host there is nothing to ask. Reading
// the store can take the budget plus the TCPStore's reply grace, so the rank says its failure
// first and the probe's finding after it.

// Publishes this rank's host and bind address, and keeps the store for probe_hosts. With a
// TCPStore (`job_identity` its handshake token where DDPBENCH_STORE_TOKEN is unset), a rank
// on a host where MASTER_ADDR is not local ships its flight dumps there, and rank 0 collects
// them also when SIGTERM stops it (Note [Flight dumps across hosts]). Called once by
// init_process_group.
void register_host(std::shared_ptr<Store> store, const RankEnv& env, const std::string& host,
                   const std::string& address, const std::string& job_identity = "",
                   bool tcp_store = false);

// Rank 0 of a job across hosts: waits up to `budget` for the flight dumps of the ranks on
// other hosts (not of those probe_hosts found silent) and writes those that came into its own
// dump folder. Returns how many; 0 on
// one host, on other ranks, or without a dump folder. Never throws.
int collect_flight_dumps(std::chrono::milliseconds budget = std::chrono::milliseconds(3000));

// "; host b (10.0.0.2: ranks 2, 3) does not answer a connection from host a within 1000 ms:
// ...", or "" when every host answers, the job has one host, or none was registered. The
// knocks take at most `budget`; the store read, `budget` plus the store's reply grace.
std::string probe_hosts(std::chrono::milliseconds budget = std::chrono::milliseconds(1000));

}  // namespace ddpb::comm
