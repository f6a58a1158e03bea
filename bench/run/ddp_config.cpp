#include "bench/run/ddp_config.h"

#include <fmt/core.h>

#include <vector>

#include "bench/measure/context.h"
#include "bench/run/designs.h"
#include "comm/flight_recorder.h"
#include "comm/tcp_store.h"
#include "core/check.h"
#include "core/rng.h"
#include "reports/json_io.h"

namespace ddpb::bench {

ddp::DdpOptions ddp_options(const RunConfig& config) {
  ddp::DdpOptions o;
  o.reducer.first_bucket_bytes = static_cast<size_t>(config.first_bucket_mb * 1048576.0);
  o.reducer.bucket_bytes = static_cast<size_t>(config.bucket_cap_mb * 1048576.0);
  o.reducer.grad_as_bucket_view = config.grad_as_bucket_view;
  o.reducer.find_unused_parameters = config.find_unused_params;
  o.reducer.static_graph = config.static_graph;
  o.reducer.overlap = !config.no_overlap;
  o.reducer.comm_hook = config.comm_hook;
  o.reducer.powersgd = config.powersgd;
  o.reducer.powersgd.seed = config.seed;
  o.reducer.powersgd.keep_random_q = !config.dump.empty();
  o.reducer.check_finite = config.check_finite;
  const Design& design = design_of(config);
  o.reducer.zero_stage = design.zero_broadcast ? 0 : design.zero_stage;  // Note [ZeRO in DDP]
  o.zero_broadcast = design.zero_broadcast;
  o.broadcast_buffers = config.broadcast_buffers;
  o.sync_batch_norm = config.sync_bn;
  o.join = {config.uneven_join, config.join_divide_by_initial_world_size};
  return o;
}

std::unique_ptr<WarmupBucketSearch> make_ddp_bucket_search(ddp::DistributedDataParallel& ddp,
                                                           const nn::Module& model) {
  double gradient_bytes = 0;
  for (auto& p : model.parameters()) gradient_bytes += static_cast<double>(p.data().nbytes());
  const Device device = model.parameters().front().data().device();
  return std::make_unique<WarmupBucketSearch>(
      gradient_bytes / 1048576.0,
      [&ddp](double mb) {
        ddp.reducer().set_bucket_cap(static_cast<size_t>(mb * 1048576.0));
        return ddp.reducer().layout().dump();
      },
      [&ddp, device](double value) {  // rank 0's value on every rank
        Tensor t = Tensor::from_floats({static_cast<float>(value)}, {1}, device);
        ddp.process_group().broadcast(t, /*root=*/0)->wait();
        return static_cast<double>(t.item());
      });
}

std::string buffer_semantics(const RunConfig& config, bool has_buffers) {
  if (!has_buffers) return "none";
  if (config.sync_bn) return "SyncBatchNorm: statistics of the global batch on every rank";
  return config.broadcast_buffers
             ? "broadcast from rank 0 before every step (PyTorch's broadcast_buffers=True)"
             : "each rank keeps its own (broadcast_buffers=False); the end-of-run check "
               "compares parameters only";
}

nlohmann::json ddp_mode_details(const RunConfig& config, const comm::RankEnv& env,
                                const ddp::DistributedDataParallel& ddp, bool has_buffers,
                                const WarmupBucketSearch* search) {
  const ddp::Reducer& reducer = ddp.reducer();
  nlohmann::json details = {{"backend", ddp.process_group().backend()},
                            {"buffers", buffer_semantics(config, has_buffers)},
                            {"world_size", env.world_size},
                            {"launcher", env.source},
                            {"buckets_initial", reducer.initial_layout()},
                            {"buckets_rebuilt", reducer.layout()},
                            {"rebuilt", reducer.rebuilt()}};
  if (search) details["bucket_autotune"] = search->tuner().to_json();
  return details;
}

}  // namespace ddpb::bench
