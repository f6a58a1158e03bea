"""torch.utils.data.DistributedSampler's index lists over a grid of configurations, as JSON
lines "size replicas rank seed epoch shuffle drop_last: i0 i1 ...", for tests/data/test_sampler.cpp
to hold ddpbench's sampler against, element for element. Exit 77 without torch."""
import sys

try:
    import torch
    from torch.utils.data import DistributedSampler
except ImportError as e:
    print(f"no torch: {e}", file=sys.stderr)
    sys.exit(77)

SIZES = [1, 2, 7, 10, 64, 1001, 100003]
REPLICAS = [1, 2, 3, 8]
SEEDS = [0, 17, 2**40 + 5]
EPOCHS = [0, 1, 3]


def main():
    print(f"torch {torch.__version__}", file=sys.stderr)
    for n in SIZES:
        for replicas in REPLICAS:
            ranks = sorted({0, replicas - 1}) if n > 1000 else range(replicas)
            for rank in ranks:
                for seed in SEEDS:
                    for epoch in EPOCHS if n <= 1000 else [0, 3]:
                        for shuffle in (True, False):
                            for drop_last in (False, True):
                                s = DistributedSampler(range(n), num_replicas=replicas, rank=rank,
                                                       shuffle=shuffle, seed=seed,
                                                       drop_last=drop_last)
                                s.set_epoch(epoch)
                                head = (f"{n} {replicas} {rank} {seed} {epoch} {int(shuffle)} "
                                        f"{int(drop_last)}")
                                print(head + ": " + " ".join(map(str, list(s))))


if __name__ == "__main__":
    main()
