"""Reads and writes graphc archives (module files and checkpoints) in Python.

The format is ir/Archive.h's, version 2: the tests use this to take files
apart, damage them on purpose (a removed tensor, another shape, a NaN) with
valid checksums, and compare checkpoints bit for bit.
"""
import os
import struct
import zlib

import numpy as np

MAGIC = b"GRPHCAR2"
END = b"GRPHCEND"
# DType order of ir/DType.h; bf16 has no NumPy type and stays raw bytes.
DTYPES = [np.float32, np.float16, None, np.int64, np.int32, np.bool_]
DTYPE_SIZES = [4, 2, 2, 8, 4, 1]


class Archive:
    def __init__(self, text, tensors):
        self.text = text  # str
        self.tensors = tensors  # list of (name, dtype code, shape tuple, raw bytes)

    def array(self, name):
        for n, dt, shape, raw in self.tensors:
            if n == name:
                return np.frombuffer(raw, dtype=DTYPES[dt]).reshape(shape)
        raise KeyError(name)

    def names(self):
        return [t[0] for t in self.tensors]


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == MAGIC, "not a version-2 graphc archive: %r" % data[:8]
    (header_bytes,) = struct.unpack_from("<Q", data, 8)
    header_end = 16 + header_bytes
    (stored,) = struct.unpack_from("<I", data, header_end)
    assert zlib.crc32(data[:header_end]) == stored, "header checksum"
    pos = 16
    (text_len,) = struct.unpack_from("<Q", data, pos)
    pos += 8
    text = data[pos:pos + text_len].decode()
    pos += text_len
    (count,) = struct.unpack_from("<Q", data, pos)
    pos += 8
    entries = []
    for _ in range(count):
        (name_len,) = struct.unpack_from("<I", data, pos)
        pos += 4
        name = data[pos:pos + name_len].decode()
        pos += name_len
        dt, rank = struct.unpack_from("<BB", data, pos)
        pos += 2
        shape = struct.unpack_from("<%dq" % rank, data, pos)
        pos += 8 * rank
        nbytes, crc = struct.unpack_from("<QI", data, pos)
        pos += 12
        entries.append((name, dt, shape, nbytes, crc))
    pos = header_end + 4
    tensors = []
    for name, dt, shape, nbytes, crc in entries:
        raw = data[pos:pos + nbytes]
        assert zlib.crc32(raw) == crc, "tensor %s checksum" % name
        tensors.append((name, dt, tuple(shape), raw))
        pos += nbytes
    assert data[pos:] == END
    return Archive(text, tensors)


def write(path, archive):
    """Writes an archive with correct checksums (whatever its tensors say)."""
    header = bytearray()
    text = archive.text.encode()
    header += struct.pack("<Q", len(text)) + text
    header += struct.pack("<Q", len(archive.tensors))
    for name, dt, shape, raw in archive.tensors:
        n = name.encode()
        header += struct.pack("<I", len(n)) + n + struct.pack("<BB", dt, len(shape))
        header += struct.pack("<%dq" % len(shape), *shape)
        header += struct.pack("<QI", len(raw), zlib.crc32(raw))
    head = MAGIC + struct.pack("<Q", len(header)) + bytes(header)
    out = head + struct.pack("<I", zlib.crc32(head))
    for _, _, _, raw in archive.tensors:
        out += raw
    out += END
    with open(path, "wb") as f:
        f.write(out)


class CheckpointAssertions:
    """For unittest cases: a checkpoint directory's newest file, and two checkpoints whose tensors
    are the same bits."""

    def latest(self, d):
        with open(os.path.join(d, "latest")) as f:
            return os.path.join(d, f.read().strip())

    def assertSameTensors(self, a, b):
        x, y = read(a), read(b)
        self.assertEqual(x.names(), y.names())
        for (name, _, sa, ra), (_, _, sb, rb) in zip(x.tensors, y.tensors):
            self.assertEqual(sa, sb, name)
            self.assertTrue(ra == rb, "tensor %s differs between %s and %s" % (name, a, b))
