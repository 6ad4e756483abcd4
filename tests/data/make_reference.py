#!/usr/bin/python3
"""The independent side of the input pipeline's tests, written into OUT_DIR.

  images/          a folder of class folders written with PIL: JPEG and PNG in
                   grey, RGB, RGBA and palette modes, a nested file, files that
                   must be ignored, and a corrupt JPEG and PNG
  expected/*.npy   for every good image, what torchvision makes of it:
                   convert("RGB") -> to_tensor -> resize(S, antialias=True)
                   -> center_crop(S) -> normalize(ImageNet mean, std)
  decoded/*.npy    PIL's decoded RGB pixels (int32, H x W x 3)
  extra/grey16.*   a 16-bit grey PNG and its values
  resize/*.npy     random planes and torch's antialiased bilinear resize of
                   them, followed by a centre crop (the policy of Resize.h)
  fmnist/*.npy     the first Fashion-MNIST images and labels as read by numpy
"""
import gzip
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
import torchvision.transforms.functional as TF
from PIL import Image

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
SIDE = 32  # the target of the image folder test


def smooth_image(h, w, seed):
    """Smooth colour gradients plus a little noise: realistic for JPEG."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    chans = []
    for c in range(3):
        a, b, p = rng.uniform(0.02, 0.2, size=3)
        v = 127 + 100 * np.sin(a * x + b * y + p * 6) + rng.normal(0, 8, size=(h, w))
        chans.append(v)
    return np.clip(np.stack(chans, -1), 0, 255).astype(np.uint8)


def torchvision_reference(path):
    img = Image.open(path).convert("RGB")
    t = TF.to_tensor(img).double()  # float64: torch's float32 weights are off by ~1e-5
    t = TF.resize(t, SIDE, antialias=True)
    t = TF.center_crop(t, [SIDE, SIDE])
    return TF.normalize(t, MEAN, STD).numpy().astype(np.float32)


def write_images(root, out):
    files = {}
    cat = os.path.join(root, "cat")
    dog = os.path.join(root, "dog")
    empty = os.path.join(root, "elk")  # a class without images keeps its number
    for d in (cat, dog, empty, os.path.join(dog, "nested"), os.path.join(cat, ".cache")):
        os.makedirs(d, exist_ok=True)

    rgb = smooth_image(45, 60, 1)
    Image.fromarray(rgb).save(os.path.join(cat, "a_rgb.jpg"), quality=90)
    Image.fromarray(smooth_image(23, 17, 2)).save(os.path.join(cat, "b_rgb.png"))
    Image.fromarray(smooth_image(50, 40, 3)[:, :, 0]).save(os.path.join(cat, "c_grey.png"))
    Image.fromarray(smooth_image(33, 33, 4)[:, :, 1]).save(os.path.join(cat, "d_grey.JPG"))
    rgba = np.concatenate([smooth_image(40, 70, 5), smooth_image(40, 70, 6)[:, :, :1]], -1)
    Image.fromarray(rgba, "RGBA").save(os.path.join(dog, "e_rgba.png"))
    Image.fromarray(smooth_image(64, 48, 7)).convert("P", palette=Image.ADAPTIVE).save(
        os.path.join(dog, "f_palette.png"))
    Image.fromarray(smooth_image(32, 32, 8)).save(os.path.join(dog, "nested", "g_exact.png"))
    Image.fromarray(smooth_image(300, 200, 9)).save(os.path.join(dog, "h_big.jpeg"), quality=80)

    # Must be ignored: not an image extension, hidden, or not inside a class.
    with open(os.path.join(dog, "notes.txt"), "w") as f:
        f.write("not an image\n")
    Image.fromarray(rgb).save(os.path.join(cat, ".hidden.png"))
    Image.fromarray(rgb).save(os.path.join(cat, ".cache", "x.png"))
    Image.fromarray(rgb).save(os.path.join(root, "top_level.png"))

    # Corrupt: a JPEG cut in half, and a PNG whose data is garbage.
    with open(os.path.join(cat, "a_rgb.jpg"), "rb") as f:
        jpeg = f.read()
    with open(os.path.join(dog, "z_truncated.jpg"), "wb") as f:
        f.write(jpeg[: len(jpeg) // 2])
    with open(os.path.join(cat, "b_rgb.png"), "rb") as f:
        png = bytearray(f.read())
    for i in range(60, len(png) - 20):
        png[i] ^= 0x5A
    with open(os.path.join(cat, "y_garbage.png"), "wb") as f:
        f.write(bytes(png))

    os.makedirs(os.path.join(out, "expected"))
    os.makedirs(os.path.join(out, "decoded"))
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            key = rel.replace("/", "__")
            parts = rel.split("/")
            ignored = len(parts) == 1 or any(p.startswith(".") for p in parts)
            if ignored or name.startswith(("y_", "z_")) or name.endswith(".txt"):
                continue
            np.save(os.path.join(out, "expected", key + ".npy"), torchvision_reference(path))
            decoded = np.asarray(Image.open(path).convert("RGB")).astype(np.int32)
            np.save(os.path.join(out, "decoded", key + ".npy"), decoded)


def write_16bit(out):
    """A 16-bit grey PNG and its raw values: PIL cannot convert it to RGB faithfully."""
    d = os.path.join(out, "extra")
    os.makedirs(d)
    values = (np.arange(24 * 40, dtype=np.int64).reshape(24, 40) * 68 + 7) % 65536
    Image.fromarray(values.astype(np.uint16)).save(os.path.join(d, "grey16.png"))
    np.save(os.path.join(d, "grey16.npy"), values.astype(np.int32))


def write_resize(out):
    """Planes and their resize + centre crop, computed by torch."""
    d = os.path.join(out, "resize")
    os.makedirs(d)
    rng = np.random.default_rng(42)
    cases = [  # in_h, in_w, out_h, out_w
        (28, 28, 299, 299),  # Fashion-MNIST to inception_v3
        (375, 500, 224, 224),  # a typical photo, downscaled 1.67x with a crop
        (300, 200, 32, 32),  # strong downscale (antialiasing matters)
        (17, 23, 32, 32),  # upscale with a crop
        (50, 40, 20, 28),  # a non-square target
        (32, 32, 32, 32),  # identity
    ]
    for n, (ih, iw, oh, ow) in enumerate(cases):
        plane = rng.normal(size=(ih, iw)).astype(np.float32)
        # The policy in Resize.h, computed independently here.
        if oh * iw >= ow * ih:
            sh, sw = oh, max(ow, oh * iw // ih)
        else:
            sh, sw = max(oh, ow * ih // iw), ow
        # In float64: torch computes float32 filter centres, off by up to 4e-5.
        scaled = F.interpolate(torch.from_numpy(plane).double()[None, None], size=(sh, sw),
                               mode="bilinear", align_corners=False, antialias=True)
        top = int(round((sh - oh) / 2.0))
        left = int(round((sw - ow) / 2.0))
        ref = scaled[0, 0, top:top + oh, left:left + ow].numpy().astype(np.float32)
        np.save(os.path.join(d, "in%d.npy" % n), plane)
        np.save(os.path.join(d, "out%d.npy" % n), np.ascontiguousarray(ref))


def write_fmnist(out):
    d = os.path.join(out, "fmnist")
    os.makedirs(d)
    src = "/usr/share/datasets/fashion-mnist"
    for split in ("train", "t10k"):
        with gzip.open(os.path.join(src, split + "-images-idx3-ubyte.gz")) as f:
            images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
        with gzip.open(os.path.join(src, split + "-labels-idx1-ubyte.gz")) as f:
            labels = np.frombuffer(f.read(), np.uint8, offset=8)
        np.save(os.path.join(d, split + "_images_first.npy"), images[:3].astype(np.int32))
        np.save(os.path.join(d, split + "_labels.npy"), labels.astype(np.int64))


def main():
    out = sys.argv[1]
    root = os.path.join(out, "images")
    os.makedirs(root)
    write_images(root, out)
    write_16bit(out)
    write_resize(out)
    if os.path.isdir("/usr/share/datasets/fashion-mnist"):
        write_fmnist(out)


if __name__ == "__main__":
    main()
