#include "comm/rendezvous.h"

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>

#include "base/open_files.h"
#include "comm/file_store.h"
#include "comm/local_address.h"
#include "comm/peer_probe.h"
#include "comm/tcp_store.h"
#include "core/check.h"
#include "core/clock.h"

namespace ddpb::comm {

ClockOffset measure_clock_offset(Store& store, int rank, int world_size) {
  const auto now = steady_now_ns;
  if (rank == 0) {
    for (int r = 1; r < world_size; ++r) {
      store.get("ddpbench/clock/ping/" + std::to_string(r));
      store.set_string("ddpbench/clock/pong/" + std::to_string(r), std::to_string(now()));
    }
    return {};
  }
  const int64_t sent = now();
  store.set_string("ddpbench/clock/ping/" + std::to_string(rank), std::to_string(sent));
  const int64_t remote =
      std::stoll(store.get_string("ddpbench/clock/pong/" + std::to_string(rank)));
  const int64_t received = now();
  // Rounded up: the midpoint below is rounded down, and the bound must hold exactly.
  return {remote - (sent + received) / 2, (received - sent + 1) / 2};
}

int64_t sync_clock(Store& store, int rank, int world_size) {
  return measure_clock_offset(store, rank, world_size).offset_ns;
}

namespace {

constexpr std::string_view kEnvMethod = "env://", kFileMethod = "file://";

// Note [Rendezvous deadline].
class Deadline {
 public:
  explicit Deadline(std::chrono::milliseconds timeout)
      : timeout_(timeout), end_(std::chrono::steady_clock::now() + timeout) {}
  // What is left for the next phase; throws CommTimeout naming the phase that used it up.
  std::chrono::milliseconds left(const char* after) const {
    const auto rest = std::chrono::duration_cast<std::chrono::milliseconds>(
        end_ - std::chrono::steady_clock::now());
    if (rest.count() > 0) return rest;
    throw CommTimeout("the rendezvous did not complete within --timeout (" +
                      std::to_string(timeout_.count()) + " ms): " + after + " used all of it");
  }

 private:
  std::chrono::milliseconds timeout_;
  std::chrono::steady_clock::time_point end_;
};

using Fingerprint = std::vector<std::pair<std::string, std::string>>;

std::string fingerprint_text(const Fingerprint& f) {
  std::string out;
  for (const auto& [name, value] : f) out += name + "=" + value + "\n";
  return out;
}

Fingerprint parse_fingerprint(const std::string& text) {
  Fingerprint f;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    const std::string line = text.substr(start, end - start);
    const size_t eq = line.find('=');
    if (eq != std::string::npos) f.emplace_back(line.substr(0, eq), line.substr(eq + 1));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return f;
}

// The first field where rank `r`'s fingerprint differs from rank 0's, as the verdict's line;
// "" when they agree.
std::string compare_fingerprints(const Fingerprint& mine, const Fingerprint& theirs, int r) {
  for (const auto& [name, value] : mine) {
    std::string other = "(missing)";
    for (const auto& [n, v] : theirs) {
      if (n == name) other = v;
    }
    if (other == value) continue;
    return "configuration mismatch at rendezvous: " + name + " is " + value + " on rank 0 but " +
           other + " on rank " + std::to_string(r) +
           " (every rank of a job must run the same configuration and build)";
  }
  return "";
}

constexpr const char* kFingerprintKey = "ddpbench/fingerprint/";

// "node 1 (ranks 2, 3)" for the ranks in `missing` (ascending), by node where nodes hold
// blocks of local_world_size ranks, else "ranks 2, 3".
std::string name_missing(const std::vector<int>& missing, int local_world_size) {
  const auto list = [](const std::vector<int>& ranks) {
    std::string out = ranks.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
    return out;
  };
  if (local_world_size <= 0) return list(missing);
  std::string out;
  for (size_t i = 0; i < missing.size();) {
    const int node = missing[i] / local_world_size;
    std::vector<int> ranks;
    for (; i < missing.size() && missing[i] / local_world_size == node; ++i) {
      ranks.push_back(missing[i]);
    }
    out += (out.empty() ? "" : "; ") + ("node " + std::to_string(node)) + " (" + list(ranks) + ")";
  }
  return out;
}

// Note [Who joined]
// Ranks started by separate launchers can claim the same rank (two nodes given one
// --node-rank) or disagree on the world (--world-size 4 on one node, 2 on another); both once
// ended in a timeout on a store key (issue 48, P10). Each rank that reaches the store counts
// itself under its rank, so the second claimant of a rank fails at once naming it, and writes
// who it is under a ticket of its own, with the job's shape as it sees it (its world size and,
// from ddpbench's launcher, its number of nodes), so rank 0, when someone never arrives, can
// say who came instead. While rank 0 waits for a fingerprint it watches the tickets: a second
// claim, or a rank of another world size or another --nnodes, is the verdict at once, for
// every rank waiting on it (nodes given different --nnodes once waited the whole --timeout,
// and node 0 then blamed node 1 for never arriving). The fingerprint compares the rest, once
// every rank is there.
constexpr const char* kJoinKey = "ddpbench/join/";
constexpr const char* kVerdictKey = "ddpbench/fingerprint/verdict";

// The nodes of the job as this rank was told (ddpbench's launcher: --nnodes), else 0.
int nodes_of(const RankEnv& env) {
  return env.source == "ddpbench" && env.local_world_size > 0
             ? env.world_size / env.local_world_size
             : 0;
}

std::string who_joins(const RankEnv& env) {
  std::string who = "rank " + std::to_string(env.rank) + " of " + std::to_string(env.world_size) +
                    " on host " + host_name();
  if (nodes_of(env) > 1) {
    who += " (node " + std::to_string(env.rank / env.local_world_size) + " of " +
           std::to_string(nodes_of(env)) + ")";
  }
  return who;
}

std::string shape_of(const RankEnv& env) {
  return std::to_string(env.world_size) + " " + std::to_string(nodes_of(env));
}

void register_join(Store& store, const RankEnv& env) {
  const int64_t ticket = store.add(std::string(kJoinKey) + "count", 1);
  store.set_string(kJoinKey + std::to_string(ticket), who_joins(env));
  store.set_string(kJoinKey + ("shape/" + std::to_string(ticket)), shape_of(env));
  const int64_t claims = store.add(kJoinKey + ("rank/" + std::to_string(env.rank)), 1);
  if (claims == 1) return;
  const std::string twice =
      "rank " + std::to_string(env.rank) + " joined the job twice (" + who_joins(env) +
      " came second): two launchers gave out the same ranks; give every node its own "
      "--node-rank and the same --world-size and --nnodes";
  // Rank 0 sees it while it waits and makes it the verdict for every rank waiting (only rank
  // 0 writes the verdict: one written here could overwrite an "ok" the others already read).
  store.add(std::string(kJoinKey) + "duplicates", 1);
  store.set_string(kJoinKey + std::string("twice"), twice);
  throw UsageError(twice);
}

// The ranks that joined with another world size than `env`'s, as "; rank 1 of 2 on host b
// joined with another world size", or "".
// Ticket `t`'s world size and node count (shape_of), once its joiner has written them.
std::optional<std::pair<int, int>> ticket_shape(Store& store, int64_t t) {
  const std::string key = kJoinKey + ("shape/" + std::to_string(t));
  if (!store.check({key})) return std::nullopt;
  int world = 0, nodes = 0;
  if (std::sscanf(store.get_string(key).c_str(), "%d %d", &world, &nodes) != 2) return std::nullopt;
  return std::pair{world, nodes};
}

std::string other_worlds(Store& store, const RankEnv& env) {
  std::string out;
  const int64_t joined = store.add(std::string(kJoinKey) + "count", 0);
  for (int64_t t = 1; t <= std::min<int64_t>(joined, 64); ++t) {
    const auto shape = ticket_shape(store, t);
    if (shape && shape->first != env.world_size)
      out +=
          "; " + store.get_string(kJoinKey + std::to_string(t)) + " joined with another world size";
  }
  return out;
}

// What the tickets show, as rank 0 waits, that makes the job impossible: a rank claimed twice,
// or a rank that joined with another world size or --nnodes than `env`'s; "" while nothing
// does. Each ticket is read once.
class JoinWatch {
 public:
  JoinWatch(Store& store, const RankEnv& env) : store_(store), env_(env) {}

  std::string conflict() {
    const std::string twice = std::string(kJoinKey) + "twice";
    if (store_.check({twice})) return store_.get_string(twice);
    const int64_t joined = std::min<int64_t>(store_.add(std::string(kJoinKey) + "count", 0), 4096);
    for (; read_ < joined; ++read_) {
      const std::string ticket = std::to_string(read_ + 1);
      const auto shape = ticket_shape(store_, read_ + 1);
      if (!shape) break;  // taken, not written yet: the next round reads it
      const auto [world, nodes] = *shape;
      const bool other_world = world != env_.world_size;
      if (!other_world && (nodes == 0 || nodes_of(env_) == 0 || nodes == nodes_of(env_))) continue;
      const std::string flag = other_world ? "--world-size" : "--nnodes";
      const std::string mine =
          other_world ? std::to_string(env_.world_size) : std::to_string(nodes_of(env_));
      const std::string theirs = other_world ? std::to_string(world) : std::to_string(nodes);
      return flag + " differs between the nodes of this job (" + theirs + " and " + mine +
             "): " + store_.get_string(kJoinKey + ticket) + " joined the job of " +
             who_joins(env_) + "; every node needs the same --world-size and --nnodes";
    }
    return "";
  }

 private:
  Store& store_;
  const RankEnv& env_;
  int64_t read_ = 0;
};

// Rank 0: `key` once it is there, as store.get would give it, or a UsageError as soon as the
// tickets show a conflict (the verdict then names it to every rank waiting). Throws
// StoreTimeout past the store's timeout, as get does.
std::string await_fingerprint(Store& store, const char* store_name, const std::string& key,
                              JoinWatch& watch) {
  const Duration timeout = store.timeout();
  const auto end = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  // The tickets are read four times a second at most: a FileStore appends a record for each
  // counter read, and every other rank's reads replay them.
  auto next_watch = std::chrono::steady_clock::now();
  for (;;) {
    if (store.check({key})) return store.get_string(key);
    if (std::chrono::steady_clock::now() >= next_watch) {
      const std::string conflict = watch.conflict();
      if (!conflict.empty()) throw UsageError(conflict);
      next_watch = std::chrono::steady_clock::now() + std::chrono::milliseconds(250);
    }
    if (std::chrono::steady_clock::now() >= end)
      detail::throw_timeout(store_name, "get", {key}, timeout);
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

// Any rank, when a fingerprint or the verdict did not come in time: who never arrived, named
// by node (issue 48, P29: "TCPStore get('ddpbench/fingerprint/1') timed out" named a key).
[[noreturn]] void throw_not_arrived(Store& store, const RankEnv& env, const StoreTimeout& e) {
  std::vector<int> missing;
  std::string others;
  try {
    for (int r = 1; r < env.world_size; ++r) {
      if (!store.check({kFingerprintKey + std::to_string(r)})) missing.push_back(r);
    }
    if (!missing.empty()) others = other_worlds(store, env);
  } catch (const std::exception&) {
    missing.clear();  // rank 0's store went away meanwhile: the timeout is all there is to say
  }
  if (missing.empty()) throw CommTimeout(std::string("the rendezvous timed out: ") + e.what());
  throw CommTimeout(
      name_missing(missing, env.local_world_size) + " never arrived at the rendezvous" +
      (env.master_port > 0 ? " on " + env.master_addr + ":" + std::to_string(env.master_port)
                           : std::string()) +
      (others.empty() ? ": its launcher did not start, or cannot reach that address (" +
                            std::string(e.what()) + ")"
                      : others + ": every node needs the same --world-size and --nnodes"));
}

// Where this rank's process group listens (Gloo: `strict`, a wrong interface is an error), or
// for other backends this host's address for Note [Unreachable hosts], "" when there is none.
LocalAddress this_hosts_address(const RankEnv& env, bool strict) {
  const bool spans_hosts = env.local_world_size > 0 && env.local_world_size < env.world_size;
  if (strict) return choose_local_address(env.master_addr, spans_hosts);
  try {
    return choose_local_address(env.master_addr, spans_hosts);
  } catch (const UsageError&) {
    return {};
  }
}

// Note [Configuration fingerprint].
void check_fingerprints(Store& store, const char* store_name, const RankEnv& env,
                        const Fingerprint& mine) {
  if (mine.empty()) return;
  const int rank = env.rank, world_size = env.world_size;
  const std::string key = kFingerprintKey;
  store.set_string(key + std::to_string(rank), fingerprint_text(mine));
  if (rank == 0) {
    std::string verdict;
    JoinWatch watch(store, env);  // Note [Who joined]
    for (int r = 1; r < world_size && verdict.empty(); ++r) {
      try {
        const std::string theirs =
            await_fingerprint(store, store_name, key + std::to_string(r), watch);
        verdict = compare_fingerprints(mine, parse_fingerprint(theirs), r);
      } catch (const StoreTimeout& e) {
        throw_not_arrived(store, env, e);
      } catch (const UsageError& e) {
        verdict = e.what();
      }
    }
    if (verdict.empty()) verdict = watch.conflict();  // every rank came, one of them twice
    store.set_string(kVerdictKey, verdict.empty() ? "ok" : verdict);
    // Rank 0 serves the store: on a mismatch it stays until the others that joined have read
    // the verdict (or a few seconds passed), so that they fail with it rather than a lost
    // connection. A second claimant of a rank reads none.
    const auto readers = [&] {
      const int64_t joined = store.add(std::string(kJoinKey) + "count", 0) -
                             store.add(std::string(kJoinKey) + "duplicates", 0);
      return std::min<int64_t>(world_size, joined) - 1;
    };
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!verdict.empty() && store.add(key + "seen", 0) < readers() &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    DDPB_USAGE_CHECK(verdict.empty()) << verdict;
    return;
  }
  // Rank 0 gives no verdict while a rank is missing: this rank names who, as rank 0 does
  // (a rank of node 0 waits here while node 1 never starts).
  std::string verdict;
  try {
    verdict = store.get_string(kVerdictKey);
  } catch (const StoreTimeout& e) {
    throw_not_arrived(store, env, e);
  }
  store.add(key + "seen", 1);
  DDPB_USAGE_CHECK(verdict == "ok") << verdict;
}

std::shared_ptr<Store> rendezvous_store(const RankEnv& env, const RendezvousOptions& o) {
  check_init_method(o.init_method);
  if (o.init_method == kEnvMethod) return make_store_from_env(env.rank, o.timeout, o.job_identity);
  auto file = std::make_shared<FileStore>(o.init_method.substr(kFileMethod.size()), env.world_size);
  file->set_timeout(o.timeout);
  return std::make_shared<PrefixStore>("job/" + o.job_identity + "/", std::move(file));
}

}  // namespace

void check_init_method(const std::string& m) {
  if (m == kEnvMethod) return;
  DDPB_USAGE_CHECK(m.starts_with(kFileMethod) && m.size() > kFileMethod.size())
      << "--rendezvous must be env:// or file://PATH, got '" << m << "'";
  const std::filesystem::path path(m.substr(kFileMethod.size()));
  const auto folder = std::filesystem::absolute(path).parent_path();
  DDPB_USAGE_CHECK(std::filesystem::is_directory(folder))
      << "--rendezvous " << m << ": the folder " << folder.string() << " does not exist";
}

Rendezvous init_process_group(const RankEnv& env, const RendezvousOptions& options) {
  const std::string files = ensure_open_files(open_files_needed(env.world_size));
  DDPB_USAGE_CHECK(files.empty()) << "too many open files for a rank of " << env.world_size
                                  << " ranks: it needs about " << open_files_needed(env.world_size)
                                  << " descriptors, but " << files
                                  << " (Note [Open files of a rank])";
  const Deadline deadline(options.timeout);
  Rendezvous r;
  r.env = env;
  ProcessGroupOptions pg;
  pg.backend =
      options.backend.value_or(options.device.is_cuda() ? CommBackend::Nccl : CommBackend::Gloo);
  // Chosen before the store, so that a wrong interface fails this rank before the others wait.
  const LocalAddress bind = this_hosts_address(env, pg.backend == CommBackend::Gloo);
  r.host = host_name();
  r.bind_address = bind.address;
  if (options.verbose && pg.backend == CommBackend::Gloo) {
    std::fprintf(stderr, "ddpbench: rank %d on host %s binds its process group to %s (%s)\n",
                 env.rank, r.host.c_str(), bind.address.c_str(), bind.why.c_str());
  }
  r.store = rendezvous_store(env, options);
  r.store->set_timeout(deadline.left("the store"));
  register_join(*r.store, env);
  check_fingerprints(*r.store, options.init_method == kEnvMethod ? "TCPStore" : "FileStore", env,
                     options.fingerprint);
  pg.device = options.device;
  pg.timeout = options.timeout;
  pg.connect_timeout = deadline.left("the configuration check");
  pg.hostname = bind.address;
  r.group = make_process_group(r.store, env.rank, env.world_size, pg);
  if (!r.bind_address.empty()) {
    register_host(r.store, env, r.host, r.bind_address, options.job_identity,
                  options.init_method == kEnvMethod);
  }
  r.store->set_timeout(deadline.left("the process group"));
  const ClockOffset clock = measure_clock_offset(*r.store, env.rank, env.world_size);
  r.clock_offset_ns = clock.offset_ns;
  r.clock_uncertainty_ns = clock.uncertainty_ns;
  r.store->set_timeout(options.timeout);
  return r;
}

}  // namespace ddpb::comm
