#include "bench/cli/collectives_command.h"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <iostream>

#include "base/atomic_file.h"
#include "base/memory_limits.h"
#include "bench/measure/context.h"
#include "bench/run/cli_flags.h"
#include "bench/run/run_config.h"
#include "comm/launcher.h"
#include "comm/rank_env.h"
#include "comm/rendezvous.h"
#include "core/check.h"
#include "core/rng.h"
#include "reports/json_io.h"
#include "reports/schema_validator.h"

namespace ddpb::bench {

namespace {

// nccl-tests' sizes: an integer with an optional K, M or G (1024-based), from 1 byte to 16G.
// P28: "-b 64G" was "-b must be an integer from 0 to 16, got '64'", the range in units of G
// and the unit dropped; the message now quotes the value as given and says what a size is.
int64_t parse_bytes(const std::string& flag, const std::string& text) {
  constexpr int64_t kMaxBytes = int64_t{16} << 30;
  const std::string sizes =
      "give bytes from 1 to 16G as an integer with an optional K, M or G (1024-based), such as "
      "8, 1K or 64M";
  std::string digits = text;
  int64_t unit = 1;
  if (!digits.empty() && std::isalpha(static_cast<unsigned char>(digits.back()))) {
    const char u = static_cast<char>(std::toupper(static_cast<unsigned char>(digits.back())));
    unit = u == 'K' ? 1024 : u == 'M' ? 1024 * 1024 : u == 'G' ? int64_t{1} << 30 : 0;
    digits.pop_back();
  }
  int64_t value = 0;
  const char* end = digits.data() + digits.size();
  const auto [ptr, ec] = std::from_chars(digits.data(), end, value);
  DDPB_USAGE_CHECK(unit != 0 && !digits.empty() && ptr == end &&
                   (ec == std::errc() || ec == std::errc::result_out_of_range))
      << flag << " '" << text << "' is not a size: " << sizes;
  DDPB_USAGE_CHECK(ec == std::errc() && value >= 1 && value <= kMaxBytes / unit)
      << flag << " '" << text << "' is out of range: " << sizes;
  return value * unit;
}

DType parse_dtype(const std::string& text) {
  if (text == "f32" || text == "float") return DType::F32;
  if (text == "bf16" || text == "bfloat16") return DType::BF16;
  if (text == "f16" || text == "half") return DType::F16;
  throw UsageError("-d '" + text + "': expected f32, bf16 or f16");
}

std::vector<CollectiveOp> parse_ops(const std::string& text) {
  std::vector<CollectiveOp> ops;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string name = text.substr(start, comma - start);
    const auto op = enum_from_name<CollectiveOp>(name);
    DDPB_USAGE_CHECK(op) << "-o '" << name << "': expected " << enum_choices<CollectiveOp>();
    ops.push_back(*op);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return ops;
}

// -c's value: CLI11 hands a bare -c over as "".
bool parse_check(const std::string& text) {
  DDPB_USAGE_CHECK(text.empty() || text == "0" || text == "1")
      << "-c '" << text << "': expected 0 or 1 (nccl-tests' -c <0|1>; a bare -c is 1)";
  return text != "0";
}

void resolve(CollectivesCommandOptions& o) {
  o.sweep.min_bytes = parse_bytes("-b", o.min_bytes);
  o.sweep.max_bytes = parse_bytes("-e", o.max_bytes);
  if (!o.step_bytes.empty()) o.sweep.step_bytes = parse_bytes("-i", o.step_bytes);
  o.sweep.ops = parse_ops(o.ops);
  o.sweep.dtype = parse_dtype(o.dtype);
  DDPB_USAGE_CHECK(o.device == "cpu" || o.device == "cuda")
      << "--device '" << o.device << "': expected cpu or cuda";
  sweep_sizes(o.sweep);  // an empty or endless sweep is refused before any rank starts
}

// --node-size K must cut the world into nodes of K, two at least.
void check_node_size(int node_size, int world_size) {
  DDPB_USAGE_CHECK(node_size == 0 ||
                   (node_size >= 2 && node_size < world_size && world_size % node_size == 0))
      << "--node-size " << node_size << " must divide the world of " << world_size
      << " ranks into two or more nodes of two or more ranks";
}

// The host memory one rank of the sweep takes at its largest size: an input and an output
// buffer (an allgather's output is the size), and with -c the expected values as floats
// beside a copy, plus the process itself.
int64_t sweep_bytes_per_rank(const CollectivesCommandOptions& o) {
  const int64_t buffers = 2 * o.sweep.max_bytes;
  const auto elements = o.sweep.max_bytes / static_cast<int64_t>(dtype_size(o.sweep.dtype));
  const int64_t check = o.sweep.check ? 2 * elements * 4 : 0;
  return buffers + check + (int64_t{64} << 20);
}

// Issue 48, P4: `-b 16G -e 16G` started its ranks, and the OOM killer ended one after 54 s,
// with other processes at risk. As `run` does, the ranks of this node must fit before any
// starts, and each rank within the process limit (ulimit -v). CUDA buffers live on the GPU.
void check_sweep_memory(const CollectivesCommandOptions& o, int ranks_here) {
  if (o.device != "cpu") return;
  const int64_t per_rank = sweep_bytes_per_rank(o);
  const MemoryLimits limits = read_memory_limits();
  const int64_t have = limits.available.value_or(0);
  DDPB_USAGE_CHECK(have == 0 || per_rank * ranks_here <= have)
      << ranks_here << " rank(s) of this sweep up to -e " << o.max_bytes << " need about "
      << ((per_rank * ranks_here) >> 20) << " MiB, but this machine has " << (have >> 20)
      << " MiB available (lower -e)";
  const auto limit = limits.process_limit();
  DDPB_USAGE_CHECK(!limit || limits.mapped + per_rank <= *limit)
      << "each rank of this sweep up to -e " << o.max_bytes << " needs about "
      << ((limits.mapped + per_rank) >> 20) << " MiB of address space, above the "
      << limits.describe() << " (lower -e)";
}

// The ranks a launcher started on this host: its LOCAL_WORLD_SIZE, else mpirun's or Slurm's
// count of them ("2(x3)" reads as 2), else this one.
int ranks_on_this_host(const comm::RankEnv& env) {
  if (env.local_world_size > 0) return env.local_world_size;
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"}) {
    const char* v = std::getenv(name);
    int n = 0;
    for (; v != nullptr && std::isdigit(static_cast<unsigned char>(*v)) && n < kMaxWorldSize; ++v)
      n = 10 * n + (*v - '0');
    if (n >= 1 && n <= kMaxWorldSize) return n;
  }
  return 1;
}

int launch(const CollectivesCommandOptions& o, int argc, char** argv) {
  check_node_size(o.node_size, o.world_size);
  check_every_op_measured(o.sweep, o.world_size);
  check_sweep_memory(o, o.world_size / std::max(o.nnodes, 1));
  comm::LaunchSpec spec;
  spec.world_size = o.world_size;
  spec.nnodes = o.nnodes;
  spec.node_rank = o.node_rank;
  spec.master_addr = o.master_addr;
  spec.master_port = o.master_port;
  spec.args.assign(argv, argv + argc);
  spec.via_mpirun = o.backend == comm::CommBackend::Mpi;
  spec.timeout = std::chrono::milliseconds(std::llround(o.timeout_s * 1000));
  fmt::print("{}\n", comm::launch_banner(spec));
  std::fflush(stdout);
  const comm::LaunchResult r = comm::launch_local(spec);
  if (r.exit_code != 0) std::cerr << "ddpbench launcher: " << r.failure << "\n";
  return r.exit_code;
}

reports::CollectivesRecord make_record(const CollectivesCommandOptions& o, const comm::RankEnv& env,
                                       const std::string& backend,
                                       std::vector<reports::CollectiveResult> results) {
  reports::CollectivesRecord rec;
  rec.context = reports::record_from_json<reports::RunContext>(build_context());
  reports::CollectivesConfigInfo& c = rec.config;
  c.backend = backend;
  c.device = o.device;
  c.dtype = std::string(dtype_name(o.sweep.dtype));
  c.world_size = env.world_size;
  c.min_bytes = o.sweep.min_bytes;
  c.max_bytes = o.sweep.max_bytes;
  c.step_factor = o.sweep.step_bytes > 0 ? 0.0 : o.sweep.step_factor;
  c.step_bytes = o.sweep.step_bytes;
  c.iters = o.sweep.iters;
  c.warmup = o.sweep.warmup;
  c.check = o.sweep.check;
  c.per_iteration = o.sweep.per_iteration;
  c.launcher = env.source;
  rec.ops = summarize_collectives(results, env.world_size);
  rec.results = std::move(results);
  return rec;
}

// Rank 0: the tables, then -J.
void report(const CollectivesCommandOptions& o, const comm::RankEnv& env,
            const std::string& backend, std::vector<reports::CollectiveResult> results,
            reports::CollectivesClock clock, const std::vector<reports::CollectivesLevel>& levels) {
  reports::CollectivesRecord rec = make_record(o, env, backend, std::move(results));
  rec.clock = std::move(clock);
  if (!levels.empty()) rec.levels = levels;
  fmt::print("# ddpbench collectives: {} ranks on {}, {} backend, {}, {} iterations ({} warm-up)\n",
             env.world_size, o.device, backend, rec.config.dtype, o.sweep.iters, o.sweep.warmup);
  fmt::print("{}", one_rank_note(env.world_size));
  for (const reports::CollectiveOpSummary& s : rec.ops) {
    fmt::print("#\n# {}: {}\n", s.op, s.busbw.formula);
    fmt::print("{}", collectives_table(rec.results, s, rec.config));
  }
  for (const reports::CollectivesLevel& l : levels) {
    reports::CollectivesConfigInfo config = rec.config;
    config.world_size = l.ranks;
    for (const reports::CollectiveOpSummary& s : l.ops) {
      fmt::print("#\n# {} {}: {} ranks a group, {} groups at once{}\n",
                 l.level == "intra" ? "within a node" : "between nodes", s.op, l.ranks, l.groups,
                 l.level == "inter" && l.groups > 1 ? " sharing each node's link" : "");
      fmt::print("{}", collectives_table(l.results, s, config));
    }
  }
  std::fflush(stdout);
  if (o.json_out.empty()) return;
  const nlohmann::json j = rec.to_json();
  const auto errors = reports::validate_collectives_record(j);
  DDPB_CHECK(errors.empty()) << "the collectives record does not match its schema: "
                             << reports::format_errors(errors);
  reports::write_json_atomic(o.json_out, j);
}

// Note [Hierarchical sweep]
// `--node-size K` sweeps twice more, as nccl-tests users do by hand with NCCL_P2P/NET
// settings: within a node (each node's K ranks, every node at once) and between nodes (the
// ranks of one local index, K groups at once, so that a node's link is shared by K rings as
// a design's traffic between nodes shares it: per-device bandwidth, Note [Topology]). Every
// rank makes every group, in one order (Note [Sub-groups]); each level's store keys live
// under a prefix of their own. Rank 0 is in the first group of each level and reports it.
std::vector<reports::CollectivesLevel> sweep_levels(const CollectivesCommandOptions& o,
                                                    const comm::RankEnv& env,
                                                    comm::Rendezvous& joined,
                                                    const Device& device) {
  const int k = o.node_size, nodes = env.world_size / k;
  comm::ProcessGroupOptions pg;
  pg.backend =
      o.backend.value_or(device.is_cuda() ? comm::CommBackend::Nccl : comm::CommBackend::Gloo);
  pg.device = device;
  pg.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  pg.hostname = joined.bind_address.empty() ? pg.hostname : joined.bind_address;
  std::vector<reports::CollectivesLevel> levels;
  for (const bool intra : {true, false}) {
    std::shared_ptr<comm::ProcessGroup> mine;
    const int groups = intra ? nodes : k, size = intra ? k : nodes;
    for (int g = 0; g < groups; ++g) {
      std::vector<int> ranks;
      for (int i = 0; i < size; ++i) ranks.push_back(intra ? g * k + i : i * k + g);
      if (auto made = comm::new_group(joined.store, env.rank, env.world_size, ranks, pg)) {
        mine = std::move(made);
      }
    }
    const std::string level = intra ? "intra" : "inter";
    const int group = intra ? env.rank / k : env.rank % k;
    auto store = std::make_shared<comm::PrefixStore>(
        "ddpbench/levels/" + level + "/" + std::to_string(group) + "/", joined.store);
    reports::CollectivesClock unused;
    auto results = run_collectives(*mine, *store, device, o.sweep,
                                   {joined.clock_offset_ns, joined.clock_uncertainty_ns}, &unused);
    joined.group->barrier()->wait();  // one level at a time over the whole world
    // Rank 0 reports its groups: 0..K-1 within a node, 0, K, 2K... between nodes. Their last
    // ranks are the world's.
    for (reports::CollectiveResult& r : results) {
      if (r.last_rank && !intra) r.last_rank = *r.last_rank * k;
    }
    reports::CollectivesLevel l{level, size, groups, {}, {}};
    l.ops = summarize_collectives(results, size);
    l.results = std::move(results);
    levels.push_back(std::move(l));
  }
  return levels;
}

// What every rank of a sweep must agree on (Note [Configuration fingerprint]): ranks started
// with other flags (another node's command line) once timed out or died in a Gloo enforce
// (issue 48, P14); now rank 0 names the first flag that differs.
std::vector<std::pair<std::string, std::string>> sweep_fingerprint(
    const CollectivesCommandOptions& o, int world) {
  const CollectivesOptions& s = o.sweep;
  return {{"WORLD_SIZE", std::to_string(world)},
          {"ddpbench version", ddpbench_version()},
          {"git commit", git_commit()},
          {"-o", o.ops},
          {"-b", std::to_string(s.min_bytes)},
          {"-e", std::to_string(s.max_bytes)},
          {"-f", fmt::format("{}", s.step_factor)},
          {"-i", std::to_string(s.step_bytes)},
          {"-d", o.dtype},
          {"-n", std::to_string(s.iters)},
          {"-w", std::to_string(s.warmup)},
          {"-c", s.check ? "1" : "0"},
          {"-I", s.per_iteration ? "on" : "off"},
          {"--device", o.device},
          {"--backend", o.backend ? std::string(enum_name(*o.backend)) : "default"},
          {"--node-size", std::to_string(o.node_size)}};
}

int run_as_rank(const CollectivesCommandOptions& o, const comm::RankEnv& env, int argc,
                char** argv) {
  comm::follow_launcher(env);  // Note [Ranks die with their launcher]
  check_node_size(o.node_size, env.world_size);
  // Issue 48, P24: -g under another launcher (mpirun -np 2 ... -g 4) said nothing.
  DDPB_USAGE_CHECK(!o.world_size_given || o.world_size == env.world_size)
      << "-g " << o.world_size << " but the launcher started " << env.world_size
      << " ranks: under a launcher its rank count is the world (drop -g)";
  // Across hosts a node must be a host: ranks r*K .. r*K+K-1 (Note [Hierarchical sweep]).
  DDPB_USAGE_CHECK(o.node_size == 0 || env.local_world_size == 0 ||
                   env.local_world_size == env.world_size || o.node_size == env.local_world_size)
      << "--node-size " << o.node_size << " but each node of this job holds "
      << env.local_world_size << " ranks";
  check_every_op_measured(o.sweep, env.world_size);
  // Under another launcher: the ranks of this host start at once.
  check_sweep_memory(o, ranks_on_this_host(env));
  const Device device{o.device == "cuda" ? DeviceType::CUDA : DeviceType::CPU, env.local_rank};
  require_device(device);
  DeviceGuard guard(device);
  comm::RendezvousOptions ro;
  ro.backend = o.backend;
  ro.device = device;
  ro.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  std::string identity = "collectives|" + std::to_string(env.master_port);
  for (int i = 1; i < argc; ++i) identity += std::string("|") + argv[i];
  ro.job_identity = fmt::format("{:016x}", hash_name(identity.c_str()));
  ro.fingerprint = sweep_fingerprint(o, env.world_size);
  comm::Rendezvous joined = comm::init_process_group(env, ro);
  const std::string backend = joined.group->backend();
  reports::CollectivesClock clock;
  auto results = run_collectives(*joined.group, *joined.store, device, o.sweep,
                                 {joined.clock_offset_ns, joined.clock_uncertainty_ns}, &clock);
  std::vector<reports::CollectivesLevel> levels;
  if (o.node_size > 0) levels = sweep_levels(o, env, joined, device);
  if (env.rank == 0) report(o, env, backend, std::move(results), std::move(clock), levels);
  joined.group->barrier()->wait();  // rank 0 serves the store: the others leave after it read
  return 0;
}

}  // namespace

CLI::App* add_collectives_command(CLI::App& app, CollectivesCommandOptions& o) {
  auto* c = app.add_subcommand("collectives",
                               "nccl-tests' collective sweep (busbw table) over gloo, nccl or mpi");
  c->add_option("-b,--minbytes", o.min_bytes,
                "smallest size in bytes, 1 to 16G (K, M, G: 1024-based; default 8)");
  c->add_option("-e,--maxbytes", o.max_bytes, "largest size in bytes (default 32M)");
  add_real_flag(*c, "-f,--stepfactor", o.sweep.step_factor, 1, 1024,
                "multiply the size by F each step (default 2)", LowerBound::Open);
  c->add_option("-i,--stepbytes", o.step_bytes, "add STEP bytes each step instead of -f")
      ->excludes("-f");  // issue 48, P24: both given, -f was silently ignored
  c->add_option("-o,--op", o.ops,
                "allreduce, allgather, reduce_scatter, broadcast, reduce, alltoall, sendrecv, "
                "allgather_coalesced, reduce_scatter_coalesced (ZeRO's: the size in 4 tensors, "
                "one call), or a comma-separated list (default allreduce)");
  c->add_option("-d,--datatype", o.dtype, "f32, bf16 or f16 (default f32)");
  add_int_flag(*c, "-n,--iters", o.sweep.iters, 1, 1'000'000, "timed iterations (default 20)");
  add_int_flag(*c, "-w,--warmup_iters", o.sweep.warmup, 0, 1'000'000,
               "untimed iterations first (default 5)");
  // nccl-tests' -c <0|1>; a bare -c, as scripts and muscle memory write it, is -c 1.
  c->add_option_function<std::string>(
       "-c,--check", [&o](const std::string& text) { o.sweep.check = parse_check(text); },
       "1 (or bare -c): check every probed result (#wrong); 0: do not (default)")
      ->expected(0, 1)
      ->type_name("[0|1]");
  c->add_flag("-I,--per-iteration", o.sweep.per_iteration,
              "time every iteration alone: p50 and p99 columns");
  c->add_option("-J,--json", o.json_out, "write the results as a collectives record")
      ->check([](const std::string& path) {
        return path.empty() ? std::string("an empty file name") : std::string();  // P24
      });
  add_enum_flag(*c, "--backend", o.backend, "collective library");
  c->add_option("--device", o.device, "cpu or cuda (default cpu)");
  add_int_flag(*c, "-g,--world-size", o.world_size, 1, kMaxWorldSize,
               "ranks to start without a launcher (default 2), on every node together")
      ->each([&o](const std::string&) { o.world_size_given = true; });
  add_int_flag(*c, "--nnodes", o.nnodes, 1, kMaxWorldSize, "nodes in the job (default 1)");
  add_int_flag(*c, "--node-rank", o.node_rank, 0, kMaxWorldSize - 1,
               "this node's index (its ranks are node-rank * world/nnodes + k)");
  c->add_option("--master-addr", o.master_addr,
                "rank 0's address, where the store listens (default 127.0.0.1)");
  add_int_flag(*c, "--master-port", o.master_port, 1, 65535,
               "the store's port (required with --nnodes > 1)");
  add_int_flag(*c, "--node-size", o.node_size, 1, kMaxWorldSize,
               "also sweep within each node of this many ranks and between the nodes "
               "(Note [Hierarchical sweep]); it must divide the world size");
  add_real_flag(*c, "--timeout", o.timeout_s, 0, 86400, "seconds (default 300)", LowerBound::Open);
  return c;
}

int collectives_command(CollectivesCommandOptions o, int argc, char** argv) {
  resolve(o);
  if (!o.json_out.empty()) {
    try {
      o.json_out = check_output_path(o.json_out);
    } catch (const WriteFileError& e) {
      throw UsageError(std::string("-J: ") + e.what());
    }
  }
  const auto env = comm::detect_rank_env();
  if (!env) return launch(o, argc, argv);
  return run_as_rank(o, *env, argc, argv);
}

}  // namespace ddpb::bench
