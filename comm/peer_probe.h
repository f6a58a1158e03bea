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

// Publishes this rank's host and bind address, and keeps the store for probe_hosts. Called
// once by init_process_group.
void register_host(std::shared_ptr<Store> store, const RankEnv& env, const std::string& host,
                   const std::string& address);

// "; host b (10.0.0.2: ranks 2, 3) does not answer a connection from host a within 1000 ms:
// ...", or "" when every host answers, the job has one host, or none was registered. The
// knocks take at most `budget`; the store read, `budget` plus the store's reply grace.
std::string probe_hosts(std::chrono::milliseconds budget = std::chrono::milliseconds(1000));

}  // namespace ddpb::comm
