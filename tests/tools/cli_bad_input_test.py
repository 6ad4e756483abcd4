#!/usr/bin/python3
"""Mutated and hostile files through the real command lines (issue 11).

Every reader of outside bytes (text IR, ONNX, cluster files, images) refuses
what it cannot use with one `error:` line and an exit status in 1..127, or,
for an image in a folder, skips it and says why: never an abort, a segfault,
std::bad_alloc or a silent default. The cases are the ones the issue lists.
"""
import os
import struct
import sys
import unittest
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_test import GRAPHC, GRAPHRUN, CliCase, run, write_cluster  # noqa: E402


class TextIrTest(CliCase):
    def setUp(self):
        super().setUp()
        # The ONNX round trip spells out every attribute the issue's mutations hit.
        onnx_path = self.path("small.onnx")
        run(GRAPHC, "export", "--model", "small_cnn", "-o", onnx_path)
        self.text = run(GRAPHC, "print", onnx_path).stdout

    def mutated(self, old, new):
        self.assertIn(old, self.text)
        path = self.path("t.gir")
        with open(path, "w") as f:
            f.write(self.text.replace(old, new, 1))
        return path

    def assertRefusedEverywhere(self, path, *fragments):
        """inspect, print, compile and train all refuse it the same way."""
        for args in (["inspect"], ["print"], ["compile", "--batch", "8", "-o", self.path("x.gmod")]):
            self.assertFailsClearly(run(GRAPHC, *args, path, ok=False), *fragments)
        self.assertFailsClearly(run(GRAPHRUN, "train", path, "--steps", "1", "--batch", "8",
                                    "--no-progress", ok=False), *fragments)

    def test_issue_repro_var_of_the_wrong_kind(self):
        text = run(GRAPHC, "print", "--model", "mlp").stdout
        path = self.path("t.gir")
        with open(path, "w") as f:
            f.write(text.replace('{var = "fc2.bias"}', "{var = f32}"))
        self.assertRefusedEverywhere(path, "node 'fc2.bias' (Variable): attribute 'var' must be a string, found f32")

    def test_attribute_mutations(self):
        cases = [
            ('var = "fc1.weight"', "var = []", "attribute 'var' must be a string, found []"),
            ("strides = [2, 2]", "strides = -1", "(MaxPool): attribute 'strides' must be a list of positive integers, found -1"),
            ("momentum = 0.9", "momentum = 1e999", "(BatchNorm): attribute 'momentum' must be a finite number, found inf"),
            ("ratio = 0.5", "ratio = nan", "(Dropout): attribute 'ratio' must be a finite number, found nan"),
            # Accepted by inspect before, aborting compile.
            ("beta = 1.0", 'beta = ""', "(Gemm): attribute 'beta' must be a finite number, found \"\""),
            ("momentum = 0.9", 'momentum = "str"', "attribute 'momentum' must be a finite number, found \"str\""),
            ("ratio = 0.5", 'ratio = ["a"]', "attribute 'ratio' must be a finite number, found [\"a\"]"),
            # Values of the right kind that no kernel can use.
            ("group = 1", "group = 0", "attribute 'group' must be a positive integer, found 0"),
            ("ratio = 0.5", "ratio = 1.5", "attribute 'ratio' is 1.5, outside [0, 1]"),
            ("transB = 1", "transB = 7", "attribute 'transB' must be 0 or 1, found 7"),
            ("momentum = 0.9", "momentum = 2.0", "attribute 'momentum' is 2.0, outside [0, 1]"),
        ]
        for old, new, expected in cases:
            with self.subTest(new=new):
                self.assertRefusedEverywhere(self.mutated(old, new), expected)

    def test_oversized_declared_shape(self):
        # f32[4611686018427387904,4] counted as 0 parameters (the product wrapped).
        text = run(GRAPHC, "print", "--model", "mlp").stdout
        path = self.path("t.gir")
        with open(path, "w") as f:
            f.write(text.replace("var fc1.weight : f32[256,784]", "var fc1.weight : f32[4611686018427387904,4]"))
        self.assertFailsClearly(run(GRAPHC, "inspect", path, ok=False),
                                "f32[4611686018427387904,4] is larger than the 1 TiB a tensor may take")
        # A batch whose counts would wrap.
        huge = "100000000000000"
        self.assertFailsClearly(run(GRAPHC, "inspect", "--model", "mlp", "--batch", huge, ok=False),
                                "at batch %s, 'input' f32[%s,784] is larger than the 1 TiB" % (huge, huge))
        self.assertFailsClearly(run(GRAPHC, "compile", "--model", "mlp", "--batch", huge, "-o",
                                    self.path("x.gmod"), ok=False), "is larger than the 1 TiB")

    def test_names_with_newlines_stay_on_one_line(self):
        path = self.path("t.gir")
        with open(path, "w") as f:
            f.write('module m {\n graph main {\n  %x = Input : f32[2]\n'
                    '  %y = Relu(%"evil\\nerror: injected") : f32[2]\n  return %y\n }\n}\n')
        p = run(GRAPHC, "inspect", path, ok=False)
        self.assertFailsClearly(p, "use of undefined value '%evil\\nerror: injected'")
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)


class ClusterTest(CliCase):
    def test_deeply_nested_cluster_file(self):
        cluster = self.path("nested.json")
        with open(cluster, "w") as f:
            f.write("[" * 100000)
        expected = "nests arrays and objects 100000 deep"
        self.assertFailsClearly(run(GRAPHC, "place", "--model", "small_cnn", "--cluster", cluster,
                                    "--batch", "8", "-o", self.path("x"), ok=False), expected)
        self.assertFailsClearly(run(GRAPHRUN, "train", "--model", "small_cnn", "--cluster", cluster,
                                    "--steps", "1", "--batch", "8", "--emulate", "--no-progress",
                                    ok=False), expected)

    def test_too_many_gpus(self):
        expected = "--gpus 100000 is more than graphc places on: at most 1023 GPUs"
        self.assertFailsClearly(run(GRAPHC, "place", "--model", "small_cnn", "--gpus", "100000",
                                    "--batch", "8", "-o", self.path("x"), ok=False, timeout=60), expected)
        self.assertFailsClearly(run(GRAPHRUN, "train", "--model", "small_cnn", "--gpus", "100000",
                                    "--emulate", "--steps", "1", "--no-progress", ok=False, timeout=60),
                                expected)


class TowerModeTest(CliCase):
    """--params, --bn, --remainder and --split are parsed once, before any compile."""

    def test_unknown_modes(self):
        cases = [
            (["--params", "sharded"], "--params: unknown parameter mode 'sharded'; known: cpu, gpu:K, spread, mirrored, auto"),
            (["--params", "gpu:x"], "--params: unknown parameter mode 'gpu:x'"),
            (["--bn", "global"], "--bn: unknown batch norm mode 'global'; known: local, sync, frozen"),
            (["--remainder", "pad"], "--remainder: unknown remainder policy 'pad'; known: error, drop, uneven"),
            (["--split", "4,,2"], "--split takes 'auto' or non-negative weights such as 4,4,2"),
        ]
        for flags, expected in cases:
            with self.subTest(flags=flags):
                self.assertFailsClearly(run(GRAPHC, "place", "--model", "mlp", "--gpus", "2", "--batch", "8",
                                            *flags, "-o", self.path("x"), ok=False), expected)
                self.assertFailsClearly(run(GRAPHRUN, "train", "--model", "mlp", "--gpus", "2", "--emulate",
                                            "--batch", "8", "--steps", "1", "--no-progress", *flags, ok=False),
                                        expected)


class SplitAutoTest(CliCase):
    def test_a_device_of_speed_zero(self):
        cluster = self.path("zero.json")
        write_cluster(cluster, [1, 0])
        expected = ("device 'gpu:1': relative speed must be positive and finite, got 0 (a device that never "
                    "finishes its work cannot be placed on or given a share of the batch")
        self.assertFailsClearly(run(GRAPHC, "place", "--model", "mlp", "--cluster", cluster, "--split", "auto",
                                    "--batch", "8", "-o", self.path("x"), ok=False), expected)
        self.assertFailsClearly(run(GRAPHRUN, "train", "--model", "mlp", "--cluster", cluster, "--split", "auto",
                                    "--emulate", "--batch", "8", "--steps", "1", "--no-progress", ok=False),
                                expected)

    def test_without_devices_to_take_speeds_from(self):
        self.assertFailsClearly(run(GRAPHRUN, "train", "--model", "mlp", "--split", "auto", "--batch", "8",
                                    "--steps", "1", "--no-progress", ok=False),
                                "--split auto shares the batch by the speeds of the towers' devices")


class OnnxTest(CliCase):
    def edited(self, edit):
        import onnx
        src = self.path("mlp.onnx")
        if not os.path.exists(src):
            run(GRAPHC, "export", "--model", "mlp", "-o", src)
        model = onnx.load(src)
        edit(model.graph)
        out = self.path("edited.onnx")
        onnx.save(model, out)
        return out

    def test_declared_output_type_and_dims(self):
        out = self.edited(lambda g: g.output[0].type.tensor_type.__setattr__("elem_type", 99))
        self.assertFailsClearly(run(GRAPHC, "inspect", out, ok=False),
                                "graph output 'fc3' is declared with element type type 99")
        for d in (-1, -(2 ** 63)):
            out = self.edited(lambda g: g.output[0].type.tensor_type.shape.dim[1].__setattr__("dim_value", d))
            self.assertFailsClearly(run(GRAPHC, "inspect", out, ok=False),
                                    "graph output 'fc3' has a negative dimension (%d) at axis 1" % d)
            out = self.edited(lambda g: g.input[0].type.tensor_type.shape.dim[1].__setattr__("dim_value", d))
            self.assertFailsClearly(run(GRAPHC, "inspect", out, ok=False),
                                    "negative dimension (%d) at axis 1" % d)

    def test_initializer_retyped_to_int32(self):
        import onnx

        def retype(g):
            w = next(t for t in g.initializer if t.name == "fc1.weight")
            w.data_type = onnx.TensorProto.INT32

        self.assertFailsClearly(run(GRAPHC, "inspect", self.edited(retype), ok=False),
                                "'fc1.weight'", "i32[256,784]", "different dtypes")


def png_of_zeros(path, width, height):
    """A valid RGB PNG of zeros, written fast: one deflate block per 100 rows,
    repeated (each ends in a full flush, so the copies join into one stream)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = 100
    assert height % rows == 0
    block = b"\0" * ((1 + 3 * width) * rows)
    co = zlib.compressobj(9, zlib.DEFLATED, -15)
    piece = co.compress(block) + co.flush(zlib.Z_FULL_FLUSH)
    adler = 1
    for _ in range(height // rows):
        adler = zlib.adler32(block, adler)
    idat = (b"\x78\xda" + piece * (height // rows) + zlib.compressobj(9, zlib.DEFLATED, -15).flush()
            + struct.pack(">I", adler))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", idat) + chunk(b"IEND", b""))


class ImageTest(CliCase):
    def test_decompression_bomb_is_skipped_before_decoding(self):
        from PIL import Image
        for c in ("a", "b"):
            os.makedirs(self.path("imgs/" + c))
            for i in range(3):
                arr = (np.random.RandomState(i).rand(32, 32, 3) * 255).astype(np.uint8)
                Image.fromarray(arr).save(self.path("imgs/%s/%d.png" % (c, i)))
        # 16000 x 16000: under a megabyte on disk, 1 GB of RGBA decoded.
        png_of_zeros(self.path("imgs/a/bomb.png"), 16000, 16000)
        p = run(GRAPHRUN, "train", "--no-progress", "--threads", "2", "--model", "small_cnn",
                "--num-classes", "2", "--image-size", "28", "--data", "images:" + self.path("imgs"),
                "--steps", "2", "--batch", "4", timeout=120)
        self.assertIn("could not be loaded", p.stdout)
        self.assertIn("bomb.png: PNG image of 16000x16000 pixels is larger than the limit of 64 megapixels",
                      p.stdout)


class MemoryLimitTest(CliCase):
    """--memory-limit: declared sizes and host allocations past it are refused before allocating."""

    def test_a_declared_tensor_past_the_limit(self):
        path = self.path("mlp.gir")
        with open(path, "w") as f:
            f.write(run(GRAPHC, "print", "--model", "mlp").stdout)
        # fc1.weight, f32[256,784], is 784 KiB.
        self.assertFailsClearly(run(GRAPHC, "inspect", path, "--memory-limit", "512K", ok=False),
                                "f32[256,784] is larger than the --memory-limit of 512.00 KiB")
        self.assertIn("nodes", run(GRAPHC, "--memory-limit", "1M", "inspect", path).stdout)

    def test_training_past_the_limit_stops_before_its_first_step(self):
        args = ["train", "--model", "small_cnn", "--steps", "1", "--batch", "32", "--no-progress"]
        p = run(GRAPHRUN, *args, "--memory-limit", "5M", ok=False)
        self.assertFailsClearly(p, "cpu:0 needs", "more than the --memory-limit of 5.00 MiB")
        self.assertNotIn("trained", p.stdout)
        self.assertIn("trained 1 steps", run(GRAPHRUN, *args, "--memory-limit", "1G").stdout)

    def test_an_image_past_the_limit_is_skipped_before_decoding(self):
        for c in ("a", "b"):
            os.makedirs(self.path("imgs/" + c))
            for i in range(3):
                png_of_zeros(self.path("imgs/%s/%d.png" % (c, i)), 100, 100)
        png_of_zeros(self.path("imgs/a/big.png"), 2048, 2400)  # 18.75 MiB as RGBA
        p = run(GRAPHRUN, "train", "--no-progress", "--model", "small_cnn", "--num-classes", "2",
                "--image-size", "28", "--data", "images:" + self.path("imgs"), "--steps", "2",
                "--batch", "4", "--memory-limit", "12M", timeout=120)
        self.assertIn("big.png: PNG image of 2048x2400 pixels needs 18.75 MiB, more than the "
                      "--memory-limit of 12.00 MiB", p.stdout)

    def test_bad_sizes(self):
        for bad in ("abc", "0", "-1", "1Q", "", "1e400"):
            self.assertFailsClearly(run(GRAPHC, "inspect", "--model", "mlp", "--memory-limit", bad,
                                        ok=False), "--memory-limit")


if __name__ == "__main__":
    unittest.main(verbosity=2)
