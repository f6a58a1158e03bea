"""torchvision's resized crop of a JPEG, for tests/data/test_image_folder.cpp to hold ddpbench's
transform against: PIL decodes IMAGE, F.resized_crop(top, left, height, width, [out, out],
BILINEAR), ToTensor and Normalize(ImageNet's mean and std), optionally flipped; the CHW floats
go to OUT as raw little-endian float32. Exit 77 without torchvision.

    torchvision_crop.py IMAGE TOP LEFT HEIGHT WIDTH OUT_SIZE FLIP OUT
"""
import sys

try:
    import torch
    from PIL import Image
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms import functional as F
except ImportError as e:
    print(f"no torchvision: {e}", file=sys.stderr)
    sys.exit(77)


def main(argv):
    path, top, left, height, width, size, flip, out = argv
    img = Image.open(path).convert("RGB")
    img = F.resized_crop(img, int(top), int(left), int(height), int(width), [int(size)] * 2,
                         InterpolationMode.BILINEAR)
    if flip == "1":
        img = F.hflip(img)
    t = F.normalize(F.to_tensor(img), [0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    t.contiguous().numpy().astype("<f4").tofile(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
