// `ddpbench env`: what this binary sees and was built with (CPU, OpenBLAS configuration, CUDA
// and its devices, NVTX, communication backends), ending in a `[X]`/`[ ]` checklist in the
// style of `horovodrun --check-build`. Paste it into bug reports next to the run record.
#pragma once

namespace ddpb::bench {

int env_command();

}  // namespace ddpb::bench
