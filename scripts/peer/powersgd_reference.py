"""A float64 reference of ddpbench's PowerSGD comm hook (impl_ddp/powersgd_hook.h), which
follows PyTorch's powerSGD_hook. replay_pytorch.py uses it for dumps of
`--comm-hook powersgd` runs.

PowerSGD works on each parameter's gradient on its own (the buckets only batch the
collectives), so the reference holds its state per parameter instead of per bucket:
  * every rank's error (error feedback), and the shared Q (warm start);
  * the random Q of each draw comes from the run's dump (powersgd_q.safetensors, as
    iter{i}.{parameter} before orthogonalisation), since ddpbench draws it with its own
    generator.
The ranks are simulated: `combine` takes every rank's local gradient of one step and returns
the gradient every rank ends the step with.
"""
import torch


def orthogonalize(m, epsilon):
    """Modified Gram-Schmidt on the columns of m [n, r], in place, as
    ops::orthogonalize_columns (Note [Orthogonalisation epsilon] in core/ops.h)."""
    for i in range(m.shape[1]):
        col = m[:, i]
        norm = col.norm()
        denom = norm + epsilon if epsilon > 0 else norm
        if denom > 0:
            col /= denom
        else:
            col.zero_()
        for j in range(i + 1, m.shape[1]):
            m[:, j] -= torch.dot(col, m[:, j]) * col
    return m


def should_compress(rows, cols, rank, min_compression_rate):
    # ddpbench's rule (impl_ddp/powersgd_hook.h): PyTorch's, and never into more values than M.
    compressed = (rows + cols) * rank
    return compressed * min_compression_rate < rows * cols and compressed < rows * cols


class PowerSgdReference:
    def __init__(self, options, world_size, drawn_q):
        self.rank = int(options["rank"])
        self.start_iter = int(options["start_iter"])
        self.min_rate = float(options["min_compression_rate"])
        self.error_feedback = bool(options["error_feedback"])
        self.warm_start = bool(options["warm_start"])
        self.epsilon = float(options["epsilon"])
        self.world = world_size
        self.drawn_q = drawn_q
        self.iteration = 0
        self.errors = {}  # name -> [per-rank error]
        self.q = {}       # name -> Q kept for warm start
        self.draws_used = 0

    def combine(self, name, grads):
        """The averaged gradient of parameter `name`, given each rank's local gradient."""
        if self.iteration < self.start_iter:
            return sum(g / self.world for g in grads)
        shape = grads[0].shape
        rows = shape[0] if len(shape) > 0 else 1
        cols = grads[0].numel() // rows if rows else 0
        r = min(rows, cols, self.rank)
        inputs = [g.reshape(rows, cols).clone() for g in grads]
        if self.error_feedback:
            errs = self.errors.setdefault(name, [torch.zeros_like(inputs[0]) for _ in grads])
            inputs = [x + e for x, e in zip(inputs, errs)]
        if r > 0 and should_compress(rows, cols, r, self.min_rate):
            out = self._compress(name, inputs, r)
        else:
            out = sum(inputs) / self.world
        if self.error_feedback:
            self.errors[name] = [x - out for x in inputs]
        return out.reshape(shape)

    def _compress(self, name, inputs, r):
        if not self.warm_start or name not in self.q:
            key = f"iter{self.iteration}.{name}"
            if key not in self.drawn_q:
                raise KeyError(f"powersgd_q.safetensors has no {key}")
            self.q[name] = self.drawn_q[key].to(inputs[0].dtype).clone()
            self.draws_used += 1
        q = orthogonalize(self.q[name], self.epsilon)
        p = orthogonalize(sum(m @ q for m in inputs), self.epsilon)
        q = sum(m.t() @ p for m in inputs) / self.world
        self.q[name] = q
        return p @ q.t()

    def end_iteration(self):
        self.iteration += 1
