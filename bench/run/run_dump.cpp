#include "bench/run/run_dump.h"

#include <fmt/core.h>

#include <filesystem>

#include "core/check.h"
#include "reports/json_io.h"
#include "workloads/state_dict.h"

namespace ddpb::bench {

RunDump::RunDump(std::string dir, std::string batches_file)
    : dir_(std::move(dir)), batches_file_(std::move(batches_file)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  DDPB_USAGE_CHECK(!ec) << "cannot create --dump directory " << dir_ << ": " << ec.message();
}

void RunDump::save_init(const std::vector<NamedTensor>& state) {
  save_safetensors(dir_ + "/init.safetensors", state, {{"format", "pt"}});
}

void RunDump::add_batch(int64_t step, int micro, const Batch& batch) {
  // fmt, not "step" + std::to_string(...): GCC 12 warns (-Wrestrict) on the latter.
  const std::string prefix =
      micro > 0 ? fmt::format("step{}.{}", step, micro) : fmt::format("step{}", step);
  batches_.push_back({prefix + ".x", batch.x.to(Device::cpu())});
  batches_.push_back({prefix + ".y", batch.y.to(Device::cpu())});
}

void RunDump::save_extra(const std::string& file, const std::vector<NamedTensor>& tensors) {
  save_safetensors(dir_ + "/" + file, tensors);
}

void RunDump::finish(const nn::Module* model, const std::vector<NamedTensor>& state,
                     const nlohmann::json& meta) {
  save_safetensors(dir_ + "/" + batches_file_, batches_);
  if (!model) return;
  save_safetensors(dir_ + "/final.safetensors", state, {{"format", "pt"}});
  nlohmann::json m = meta;
  nlohmann::json names = nlohmann::json::array();
  for (auto& p : model->named_parameters()) names.push_back(p.name);
  m["parameters"] = names;
  nlohmann::json buffers = nlohmann::json::array();
  for (auto& b : model->named_buffers()) buffers.push_back(b.name);
  m["buffers"] = buffers;
  reports::write_json_atomic(dir_ + "/meta.json", m);
}

}  // namespace ddpb::bench
