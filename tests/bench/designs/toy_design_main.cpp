// ddpbench with one more design, registered here and nowhere else (issue 44's proof that a
// design is a row): "toy-ddp", DDP whose AllReduce waits for the end of backward, under a
// name, label and runner of its own. The CLI, the suite (whose runs and ranks start this
// binary again), the reports, the projection and compare learn it from its row and from the
// records alone.
#include "bench/cli/cli.h"
#include "bench/run/designs.h"
#include "bench/run/trainer.h"

namespace {

std::unique_ptr<ddpb::bench::ModeRunner> make_toy_runner(const ddpb::bench::RunConfig& config,
                                                         const ddpb::WorkloadSpec& spec) {
  ddpb::bench::RunConfig after_backward = config;
  after_backward.no_overlap = true;
  return ddpb::bench::make_ddp_runner(after_backward, spec);
}

void register_toy_design() {
  ddpb::bench::Design toy = ddpb::bench::design_named("ddp");
  toy.info.name = "toy-ddp";
  toy.info.label = "ToyDDP";
  toy.info.overlaps_backward = false;
  toy.make_runner = make_toy_runner;
  toy.pytorch_peer = "";
  ddpb::bench::register_design(std::move(toy));
}

}  // namespace

int main(int argc, char** argv) {
  register_toy_design();
  return ddpb::bench::ddpbench_main(argc, argv);
}
