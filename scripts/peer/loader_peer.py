#!/usr/bin/env python3
"""PyTorch's input pipeline on an image folder, side by side with `ddpbench data bench`:
torchvision's ImageFolder with the ImageNet training transform (RandomResizedCrop(size),
RandomHorizontalFlip, ToTensor, Normalize), a DistributedSampler (one replica) and a
DataLoader(num_workers, pin_memory, prefetch_factor), with PIL decoding in worker processes.

    loader_peer.py --data DIR [--size 224] [--batch 64] [--batches 20] [--num-workers N]
        [--prefetch-factor 2] [--pin-memory] [--seed 0] [--train resnet-tiny|resnet18]

It times --batches batches after one warm-up batch and prints one JSON line:
{"loader_images_per_s": ..., "workers": N, ...}; with --train it also trains the named
torchvision-style model (scripts/peer/models.py) on those batches, one step per batch, and adds
"training_images_per_s". CPU only; torch's and BLAS's threads are pinned to one per process
(OPENBLAS_NUM_THREADS=1 is set here), as ddpbench's CPU runs use one thread per rank.
"""
import argparse
import json
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402
import torchvision  # noqa: E402
from torch.utils.data import DataLoader, DistributedSampler  # noqa: E402
from torchvision import transforms  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--num-workers", type=int, default=1)
    ap.add_argument("--prefetch-factor", type=int, default=2)
    ap.add_argument("--pin-memory", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--train", default="", help="also train this model on the batches")
    return ap.parse_args(argv)


def loader_of(a):
    tf = transforms.Compose([transforms.RandomResizedCrop(a.size), transforms.RandomHorizontalFlip(),
                             transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
    dataset = torchvision.datasets.ImageFolder(a.data, transform=tf)
    sampler = DistributedSampler(dataset, num_replicas=1, rank=0, shuffle=True, seed=a.seed)
    extra = {"prefetch_factor": a.prefetch_factor, "persistent_workers": True} if a.num_workers else {}
    return DataLoader(dataset, batch_size=a.batch, sampler=sampler, num_workers=a.num_workers,
                      pin_memory=a.pin_memory, drop_last=True, **extra), len(dataset)


def batches(loader, count):
    """`count` batches, cycling through epochs."""
    epoch, given = 0, 0
    while given < count:
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            yield x, y
            given += 1
            if given == count:
                return
        epoch += 1


def model_of(name, classes):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import models  # noqa: E402  (scripts/peer/models.py, ddpbench's workloads in PyTorch)
    return models.resnet_for(name, classes)


def main(argv):
    a = parse(argv)
    torch.set_num_threads(1)
    loader, n = loader_of(a)
    model = model_of(a.train, len(loader.dataset.classes)) if a.train else None
    opt = torch.optim.SGD(model.parameters(), lr=0.01) if model is not None else None
    stream = batches(loader, a.batches + 1)
    next(stream)  # warm-up: workers started, first batch decoded
    t0 = time.perf_counter()
    for x, y in stream:
        if model is not None:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    secs = time.perf_counter() - t0
    key = "training_images_per_s" if model is not None else "loader_images_per_s"
    print(json.dumps({key: a.batches * a.batch / secs, "workers": a.num_workers,
                      "batch": a.batch, "batches": a.batches, "size": a.size, "images": n,
                      "torch": torch.__version__, "torchvision": torchvision.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
