#!/usr/bin/python3
"""Mutated and hostile files through the real command lines (issues 11 and 28).

Every reader of outside bytes (text IR, ONNX, cluster files, images) refuses
what it cannot use with one `error:` line and an exit status in 1..127, or,
for an image in a folder, skips it and says why: never an abort, a segfault,
std::bad_alloc or a silent default. The cases are the ones the issue lists.

Issue 28 adds where the bytes come from and go: a device or FIFO handed to
every reader, a full device, a nearly full disk and a file-size limit under
every writer, and the rules of every flag and of file contents
(docs/input-limits.md).
"""
import contextlib
import json
import os
import resource
import shutil
import stat
import struct
import subprocess
import sys
import unittest
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_test import GRAPHC, GRAPHRUN, CliCase, run, write_cluster  # noqa: E402


class TextIrTest(CliCase):
    def setUp(self):
        super().setUp()
        # The ONNX round trip spells out every attribute the issue's mutations hit (the training
        # form keeps Dropout's ratio and BatchNorm's training mark).
        onnx_path = self.path("small.onnx")
        run(GRAPHC, "export", "--model", "small_cnn", "--training-graph", "-o", onnx_path)
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


# ----- Issue 28: where the bytes come from and where they go; flag values -----

def limited_run(*args, fsize=None, timeout=120, env=None):
    """run() with the address space capped (a reader that read a device without bound fails
    fast instead of taking the machine's memory) and, with `fsize`, a file-size limit (ulimit -f)."""
    def limits():
        resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout,
                          preexec_fn=limits, env=env)


def char_device(path, minor, system_name):
    """A private node of /dev/zero (minor 5), /dev/null (3) or /dev/full (7) at `path` where mknod
    is allowed (root), so that a writer that wrongly renames over its target replaces only this
    node; otherwise the system's own (a process that may not make nodes may not rename in /dev)."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
        return path
    except PermissionError:
        return system_name


class DeviceInputTest(CliCase):
    """A character device, a FIFO or a directory where a file is read: one line naming the file
    and what it is, before a byte is read (the readers read /dev/zero without bound and aborted;
    a FIFO without a writer would have waited forever)."""

    def setUp(self):
        super().setUp()
        self.zero = char_device(self.path("zero"), 5, "/dev/zero")
        self.fifo = self.path("fifo")
        os.mkfifo(self.fifo)

    def assertRefused(self, args, what_fragment="not a regular file", timeout=60):
        for special, kind in ((self.zero, "a character device"), (self.fifo, "a FIFO (named pipe)")):
            with self.subTest(args=args, special=special):
                p = limited_run(*[special if a == "SPECIAL" else a for a in args], timeout=timeout)
                self.assertFailsClearly(p, "'%s': it is %s" % (special, kind), what_fragment)

    def test_models_in_every_command(self):
        self.assertRefused([GRAPHC, "inspect", "SPECIAL"])
        self.assertRefused([GRAPHC, "print", "SPECIAL"])
        self.assertRefused([GRAPHC, "view", "SPECIAL", "-o", self.path("v.html")])
        self.assertRefused([GRAPHRUN, "train", "SPECIAL", "--steps", "1", "--no-progress"])
        np.save(self.path("x.npy"), np.zeros((2, 784), np.float32))
        self.assertRefused([GRAPHRUN, "infer", "SPECIAL", "--input", self.path("x.npy"), "-o",
                            self.path("y.npy")])

    def test_npy_cluster_tasks_and_checkpoints(self):
        mlp = self.path("mlp.onnx")
        run(GRAPHC, "export", "--model", "mlp", "-o", mlp)
        self.assertRefused([GRAPHRUN, "infer", mlp, "--input", "SPECIAL", "-o", self.path("y.npy")])
        self.assertRefused([GRAPHC, "place", "--model", "mlp", "--cluster", "SPECIAL", "-o", self.path("x")],
                           "cluster file")
        self.assertRefused([GRAPHC, "place", "--model", "mlp", "--gpus", "1", "--tasks", "SPECIAL", "-o",
                            self.path("x")], "cluster of tasks")
        self.assertRefused([GRAPHRUN, "eval", "--checkpoint", "SPECIAL", "--data", "synthetic"])
        self.assertRefused([GRAPHRUN, "export", "--checkpoint", "SPECIAL", "-o", self.path("e.onnx")])
        # A checkpoint directory whose `latest` is a FIFO.
        ckpt = self.path("ckpt")
        os.makedirs(ckpt)
        os.mkfifo(os.path.join(ckpt, "latest"))
        p = limited_run(GRAPHRUN, "eval", "--checkpoint", ckpt, "--data", "synthetic", timeout=60)
        self.assertFailsClearly(p, "latest': it is a FIFO (named pipe), not a regular file")

    def test_idx_files_and_onnx_external_data(self):
        data = self.path("fm")
        os.makedirs(data)
        for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"):
            os.symlink(self.zero, os.path.join(data, name))
        p = limited_run(GRAPHRUN, "train", "--model", "mlp", "--data", "fashion-mnist:" + data,
                        "--steps", "1", "--no-progress")
        self.assertFailsClearly(p, "train-images-idx3-ubyte': it is a character device")
        import onnx
        run(GRAPHC, "export", "--model", "mlp", "-o", self.path("m.onnx"))
        model = onnx.load(self.path("m.onnx"))
        ext = self.path("ext")
        os.makedirs(ext)
        onnx.save_model(model, os.path.join(ext, "m.onnx"), save_as_external_data=True,
                        all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
        os.remove(os.path.join(ext, "weights.bin"))
        os.mkfifo(os.path.join(ext, "weights.bin"))
        p = limited_run(GRAPHC, "inspect", os.path.join(ext, "m.onnx"), timeout=60)
        self.assertFailsClearly(p, "external data file", "weights.bin': it is a FIFO (named pipe)")


class FullDeviceTest(CliCase):
    """Every writer on a full device: one line naming the file and ENOSPC, exit 1 (before, `-o
    /dev/full` reported success: the writer renamed its temporary file over the device, or a
    write error at close was never checked, and --metrics aborted)."""

    def full(self, name):
        path = char_device(self.path(name), 7, "/dev/full")
        if path == "/dev/full" and "." in name:
            self.skipTest("mknod is not permitted here, and /dev/full has no extension for %s" % name)
        return path

    def assertFullRefused(self, *args, target):
        p = limited_run(*args)
        self.assertFailsClearly(p, "cannot write '%s': No space left on device" % target)
        self.assertTrue(stat.S_ISCHR(os.stat(target).st_mode), "the device was replaced")
        return p

    def test_graphc_outputs(self):
        full = self.full("full")
        self.assertFullRefused(GRAPHC, "print", "--model", "mlp", "-o", full, target=full)
        self.assertFullRefused(GRAPHC, "export", "--model", "mlp", "-o", full, target=full)
        self.assertFullRefused(GRAPHC, "compile", "--model", "mlp", "--batch", "8", "-o", full, target=full)
        placed = self.path("mlp.placed")
        self.assertFullRefused(GRAPHC, "place", "--model", "mlp", "--gpus", "2", "--batch", "8", "-o", full,
                               target=full)
        run(GRAPHC, "place", "--model", "mlp", "--gpus", "2", "--batch", "8", "-o", placed)
        views = ["html", "dot"] + (["svg"] if shutil.which("dot") else [])
        for ext in views:
            target = self.full("full." + ext)
            self.assertFullRefused(GRAPHC, "view", placed, "-o", target, target=target)
        # The standard output, too.
        with open(full, "w") as out:
            p = subprocess.run([GRAPHC, "print", "--model", "mlp"], stdout=out, stderr=subprocess.PIPE,
                               text=True, timeout=60)
        p.stdout = ""
        self.assertFailsClearly(p, "cannot write the standard output: No space left on device")

    def test_graphrun_outputs(self):
        full = self.full("full")
        ckpt = self.path("ckpt")
        run(GRAPHRUN, "train", "--model", "mlp", "--steps", "1", "--batch", "8", "--no-progress",
            "--checkpoint", ckpt)
        self.assertFullRefused(GRAPHRUN, "export", "--checkpoint", ckpt, "-o", full, target=full)
        np.save(self.path("x.npy"), np.zeros((2, 784), np.float32))
        self.assertFullRefused(GRAPHRUN, "infer", ckpt, "--input", self.path("x.npy"), "-o", full, target=full)
        train = [GRAPHRUN, "train", "--model", "mlp", "--steps", "3", "--batch", "8", "--no-progress"]
        self.assertFullRefused(*train, "--trace", full, target=full)
        self.assertFullRefused(*train, "--profile", full, target=full)
        for ext in ("jsonl", "csv"):
            target = self.full("metrics." + ext)
            p = self.assertFullRefused(*train, "--metrics", target, target=target)
            self.assertIn("metrics: cannot write", p.stderr)


@contextlib.contextmanager
def nearly_full_tmpfs(test, where, free_bytes=4096):
    """A tmpfs at `where` filled until `free_bytes` (a page) are left; skips the test where
    mounting is not permitted."""
    os.makedirs(where)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", where], capture_output=True, text=True)
    if p.returncode != 0:
        test.skipTest("cannot mount a tmpfs here (%s): the nearly-full-disk cases need root"
                      % (p.stderr.strip() or p.returncode))
    try:
        filler = os.path.join(where, "filler")
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError:
            pass
        os.close(fd)
        os.truncate(filler, max(0, os.path.getsize(filler) - free_bytes))
        yield where
    finally:
        subprocess.run(["umount", where], capture_output=True)


class NearlyFullDiskTest(CliCase):
    """A disk that fills during a write: one line, exit 1, and nothing already there lost or half
    written (before, --metrics aborted and left a 4 KiB fragment)."""

    def test_metrics_keep_whole_records(self):
        with nearly_full_tmpfs(self, self.path("disk")) as disk:
            for ext in ("jsonl", "csv"):
                metrics = os.path.join(disk, "m." + ext)
                p = limited_run(GRAPHRUN, "train", "--model", "mlp", "--steps", "60", "--batch", "8",
                                "--no-progress", "--metrics", metrics)
                self.assertFailsClearly(p, "metrics: cannot write '%s': No space left on device" % metrics)
                with open(metrics) as f:
                    text = f.read()
                self.assertTrue(text.endswith("\n"), "a cut record was left: %r" % text[-80:])
                lines = text.splitlines()
                self.assertGreater(len(lines), 1)
                if ext == "jsonl":
                    self.assertEqual([json.loads(l)["step"] for l in lines], list(range(1, len(lines) + 1)))
                os.remove(metrics)

    def test_whole_files_and_checkpoints_keep_what_was_there(self):
        with nearly_full_tmpfs(self, self.path("disk")) as disk:
            target = os.path.join(disk, "model.onnx")
            with open(target, "w") as f:
                f.write("the old model")
            p = limited_run(GRAPHC, "export", "--model", "mlp", "-o", target)
            self.assertFailsClearly(p, "cannot write '%s': No space left on device" % target)
            with open(target) as f:
                self.assertEqual(f.read(), "the old model")
            self.assertEqual(sorted(os.listdir(disk)), ["filler", "model.onnx"])
            ckpt = os.path.join(disk, "ckpt")
            p = limited_run(GRAPHRUN, "train", "--model", "mlp", "--steps", "1", "--batch", "8",
                            "--no-progress", "--checkpoint", ckpt)
            self.assertFailsClearly(p, "No space left on device")
            # A dump that cannot be written is a warning; the compile goes on.
            p = limited_run(GRAPHC, "compile", "--model", "mlp", "--batch", "8", "--dump-dir",
                            os.path.join(disk, "dumps"), "-o", self.path("m.gmod"))
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("warning: dump not written: cannot write", p.stderr)


class FileSizeLimitTest(CliCase):
    """ulimit -f: the write fails with EFBIG, reported in one line, not SIGXFSZ killing the tool."""

    def test_exports_and_modules(self):
        limit = 256 << 10  # small_cnn is 1.7 MB as ONNX
        ckpt = self.path("ckpt")
        run(GRAPHRUN, "train", "--model", "small_cnn", "--steps", "1", "--batch", "4", "--no-progress",
            "--checkpoint", ckpt)
        out = self.path("m.onnx")
        with open(out, "w") as f:
            f.write("the old model")
        cases = [
            ([GRAPHC, "export", "--model", "small_cnn", "-o", out], limit),
            ([GRAPHRUN, "export", "--checkpoint", ckpt, "-o", out], limit),
            # A compiled module without trained values is its text, some 40 KB.
            ([GRAPHC, "compile", "--model", "small_cnn", "--batch", "4", "-o", out], 8 << 10),
        ]
        for args, fsize in cases:
            with self.subTest(args=args[:2]):
                p = limited_run(*args, fsize=fsize)
                self.assertFailsClearly(p, "cannot write '%s': File too large" % out)
                with open(out) as f:
                    self.assertEqual(f.read(), "the old model")
        self.assertEqual(sorted(os.listdir(self.dir)), ["ckpt", "m.onnx"])


class FlagRuleTest(CliCase):
    """Every flag value the issue found accepted, and its like: one line naming the flag and the
    rule, exit 1, nothing trained or written (docs/input-limits.md has the table)."""

    def test_graphc(self):
        place = [GRAPHC, "place", "--model", "mlp", "--batch", "8", "-o", self.path("x")]
        cases = [
            (place + ["--gpus", "-1"], "--gpus -1: the number of GPUs must be 0 or more"),
            (place + ["--gpus", "2", "--workers", "0"], "--workers 0: the number of worker processes must be at least 1"),
            (place + ["--gpus", "2", "--workers", "-1"], "--workers -1: the number of worker processes must be at least 1"),
            (place + ["--gpus", "2", "--ps", "-1"], "--ps -1: the number of parameter-server tasks must be at least 0"),
            (place + ["--gpus", "2", "--towers", "-1"], "--towers -1: the number of towers must be at least 0"),
            (place + ["--gpus", "2", "--bucket-mb", "0"], "--bucket-mb 0: must be a positive number"),
            ([GRAPHC, "inspect", "--model", "mlp", "--batch", "-1"], "--batch -1: the batch must be at least 1"),
            ([GRAPHC, "inspect", "--model", "mlp", "--batch", "0"], "--batch 0: the batch must be at least 1"),
            ([GRAPHC, "inspect", "--model", "small_cnn", "--image-size", "0"], "--image-size 0: the image side must be at least 1"),
            ([GRAPHC, "inspect", "--model", "mlp", "--num-classes", "0"], "--num-classes 0: the number of classes must be at least 1"),
            ([GRAPHC, "inspect", "--model", "mlp", "--seed", "18446744073709551616"],
             "--seed: '18446744073709551616' is not a whole number from 0 to 18446744073709551615"),
            ([GRAPHC, "inspect", "--model", "mlp", "--seed", "-1"], "--seed: '-1' is not a whole number"),
            ([GRAPHC, "simulate", "--model", "mlp", "--gpus", "1,2", "--workers-of", "0"],
             "--workers-of 0: the GPUs per worker must be at least 1"),
        ]
        for args, expected in cases:
            with self.subTest(args=args[1:]):
                self.assertFailsClearly(run(*args, ok=False), expected)
        self.assertFalse(os.path.exists(self.path("x")))

    def test_graphrun(self):
        train = [GRAPHRUN, "train", "--model", "mlp", "--steps", "1", "--batch", "8", "--no-progress"]
        cases = [
            (train + ["--gpus", "-1"], "--gpus -1: the number of GPUs must be 0 or more"),
            (train + ["--workers", "0"], "--workers 0: the number of worker processes must be at least 1"),
            (train + ["--workers", "-1"], "--workers -1: the number of worker processes must be at least 1"),
            (train + ["--num-classes", "0"], "--num-classes 0: the number of classes must be at least 1"),
            ([GRAPHRUN, "train", "--model", "small_cnn", "--image-size", "0", "--steps", "1"],
             "--image-size 0: the image side must be at least 1"),
            ([GRAPHRUN, "train", "--model", "small_cnn", "--dropout", "-0.1", "--steps", "1"],
             "--dropout -0.1: the dropout ratio must be in [0, 1)"),
            ([GRAPHRUN, "train", "--model", "small_cnn", "--dropout", "1", "--steps", "1"],
             "--dropout 1: the dropout ratio must be in [0, 1)"),
            (train + ["--synthetic-classes", "-1"], "--synthetic-classes -1: the model has 10 classes, so from 1 to 10"),
            (train + ["--synthetic-classes", "11"], "--synthetic-classes 11: the model has 10 classes, so from 1 to 10"),
            (train + ["--synthetic-classes", "1000000"], "--synthetic-classes 1000000: the model has 10 classes"),
            (train + ["--synthetic-samples", "0"], "--synthetic-samples 0: the number of samples must be at least 1"),
            (train + ["--synthetic-samples", "1000000000000"],
             "--synthetic-samples 1000000000000: a set of 2.79 PiB (3.06 KiB a sample) is more than the 1 TiB"),
            (train + ["--synthetic-samples", "100000", "--memory-limit", "64M"],
             "a set of 299.07 MiB (3.06 KiB a sample) is more than the --memory-limit of 64.00 MiB"),
            (train + ["--eval-batch", "0"], "--eval-batch 0: the evaluation batch must be at least 1"),
            (train + ["--seed", "18446744073709551616"],
             "--seed: '18446744073709551616' is not a whole number from 0 to 18446744073709551615"),
            (train + ["--steps", "99999999999999999999"], "--steps: '99999999999999999999' is not a whole number"),
            (train + ["--bucket-mb", "-1"], "--bucket-mb -1: must be a positive number"),
            ([GRAPHRUN, "eval", "--checkpoint", self.path("none"), "--synthetic-classes", "11", "--batch", "0"],
             "--batch 0: the batch must be at least 1"),
        ]
        for args, expected in cases:
            with self.subTest(args=args[1:]):
                p = run(*args, ok=False, timeout=120)
                self.assertFailsClearly(p, expected)
                self.assertNotIn("trained", p.stdout)

    def test_model_flags_go_with_built_in_models(self):
        mlp = self.path("mlp.onnx")
        run(GRAPHC, "export", "--model", "mlp", "-o", mlp)
        self.assertFailsClearly(run(GRAPHC, "inspect", mlp, "--num-classes", "5", ok=False),
                                "--num-classes applies to a built-in model (--model NAME)")
        self.assertFailsClearly(run(GRAPHRUN, "train", mlp, "--image-size", "32", "--steps", "1", ok=False),
                                "--image-size applies to a built-in model (--model NAME)")

    def test_synthetic_classes_against_the_model_and_its_default(self):
        ckpt = self.path("ckpt")
        run(GRAPHRUN, "train", "--model", "mlp", "--num-classes", "4", "--steps", "1", "--batch", "8",
            "--no-progress", "--checkpoint", ckpt)
        self.assertFailsClearly(run(GRAPHRUN, "eval", "--checkpoint", ckpt, "--data", "synthetic",
                                    "--synthetic-classes", "5", ok=False),
                                "--synthetic-classes 5: the model has 4 classes, so from 1 to 4")
        # Not given, it is 10 or the model's own, whichever is fewer.
        self.assertIn("accuracy", run(GRAPHRUN, "eval", "--checkpoint", ckpt, "--data", "synthetic").stdout)


class ContentRuleTest(CliCase):
    """Contents that parse but cannot give a working model or cluster: one line naming the place."""

    def test_initializers_that_only_give_nan(self):
        text = run(GRAPHC, "print", "--model", "mlp").stdout
        self.assertIn("var fc2.bias : f32[256] param uniform(", text)
        head, rest = text.split("var fc2.bias : f32[256] param ", 1)
        tail = rest.split("\n", 1)[1]
        for init, expected in (("constant(nan)", "initializer constant(nan): its arguments must be finite numbers"),
                               ("uniform(nan, 1)", "initializer uniform(nan, 1.0): its arguments must be finite"),
                               ("trunc_normal(0, 1, 8, 9)", "initializer trunc_normal(0.0, 1.0, 8.0, 9.0): [lo, hi] keeps 6.7e-14% of the draws; at least 1% must fall inside")):
            path = self.path("t.gir")
            with open(path, "w") as f:
                f.write(head + "var fc2.bias : f32[256] param " + init + "\n" + tail)
            with self.subTest(init=init):
                for args in (["inspect", path], ["compile", path, "--batch", "8", "-o", self.path("x")]):
                    self.assertFailsClearly(run(GRAPHC, *args, ok=False), "variable 'fc2.bias': " + expected)
                self.assertFailsClearly(run(GRAPHRUN, "train", path, "--steps", "1", "--batch", "8",
                                            "--no-progress", ok=False, timeout=60), expected)

    def test_onnx_graph_without_outputs(self):
        import onnx
        src = self.path("mlp.onnx")
        run(GRAPHC, "export", "--model", "mlp", "-o", src)
        model = onnx.load(src)
        del model.graph.output[:]
        out = self.path("no_outputs.onnx")
        onnx.save(model, out)
        for args in ([GRAPHC, "inspect", out], [GRAPHRUN, "train", out, "--steps", "1", "--no-progress"]):
            self.assertFailsClearly(run(*args, ok=False), "the graph has no outputs")

    def test_tf_config_with_nan_for_a_port(self):
        config = '{"cluster": {"chief": ["node0:NaN"], "worker": ["node1:2222"]}}'
        tasks = self.path("tf.json")
        with open(tasks, "w") as f:
            f.write(config)
        expected = "cluster.chief[0]: address 'node0:NaN' must be \"host:port\" with a port from 0 to 65535"
        self.assertFailsClearly(run(GRAPHC, "place", "--model", "mlp", "--gpus", "1", "--tasks", tasks,
                                    "-o", self.path("x"), ok=False), expected)
        env = dict(os.environ, TF_CONFIG=config)
        p = subprocess.run([GRAPHRUN, "train", "--model", "mlp", "--steps", "1", "--no-progress"],
                           capture_output=True, text=True, timeout=120, env=env)
        self.assertFailsClearly(p, "TF_CONFIG: " + expected)


if __name__ == "__main__":
    unittest.main(verbosity=2)
