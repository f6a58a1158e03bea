// The open-file limit (ulimit -n) of this process, and raising it for what a rank needs.
//
// Note [Open files of a rank]
// A DDP rank holds a socket per peer (Gloo's full mesh), rank 0's store holds one per rank,
// and the runtime holds a few dozen more (libraries, pipes, logs). A world of W ranks needs
// about 2W + 64 descriptors on rank 0. When the soft limit is lower and the hard limit
// allows, the soft limit is raised, as most servers do; when the hard limit is lower, the run
// is refused up front naming the limit, instead of failing later as a rank that "did not
// arrive" (issue 25, M8).
#pragma once

#include <cstdint>
#include <string>

namespace ddpb {

// The soft limit, or -1 when unlimited or unknown.
int64_t open_files_limit();
// Descriptors a rank of a world of `world_size` ranks needs (see the Note).
int64_t open_files_needed(int64_t world_size);
// Raises the soft limit to `needed` when it is lower and the hard limit allows; returns "" when
// the limit now suffices, else why not ("the limit (ulimit -n) is 10, hard limit 10").
std::string ensure_open_files(int64_t needed);

}  // namespace ddpb
