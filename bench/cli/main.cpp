#include "bench/cli/cli.h"

int main(int argc, char** argv) {
  return ddpb::bench::ddpbench_main(argc, argv);
}
