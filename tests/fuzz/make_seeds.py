#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (tests/fuzz/corpus/<target>/seed-*), small valid
inputs the fuzzer mutates from: configs/*.toml and --set forms for `config`, IDX pairs (plain and
gzip) for `idx`, safetensors files with and without CRCs for `safetensors`. Deterministic; rerun
after a format change. Crashers found later are kept beside the seeds as crash-<what>."""
import gzip
import json
import pathlib
import struct
import zlib

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def write(target, name, data):
    path = HERE / "corpus" / target / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def config_seeds():
    for toml in sorted((ROOT / "configs").glob("*.toml")):
        write("config", f"seed-{toml.stem}", toml.read_bytes())
    spirals = (ROOT / "configs" / "spirals.toml").read_bytes()
    overrides = [
        "optimizer.lr=0.5", "train.steps=7", "model.widths=[2, 8, 3]", "parallel.mode=zero",
        "data.kind=teacher", "checkpoint.resume=true", "bench.modes=[\"ddp\"]",
        "newsection.key=1", "train.clip_grad_norm=1e-3",
    ]
    write("config", "seed-spirals-set", spirals + b"\n#--set\n" + "\n".join(overrides).encode())
    write("config", "seed-minimal", b"[model]\nwidths = [4, 2]\n[data]\nkind = \"spirals\"\n"
          b"[train]\nsteps = 1\n")


def idx_pair(images, labels, rows, cols):
    head = struct.pack(">IIII", 0x803, len(images), rows, cols)
    img = head + bytes(b for image in images for b in image)
    lab = struct.pack(">II", 0x801, len(labels)) + bytes(labels)
    return img, lab


def idx_input(img, lab):
    return struct.pack("<I", len(img)) + img + lab


def idx_seeds():
    img, lab = idx_pair([[0, 255, 17, 3], [9, 9, 9, 9], [1, 2, 3, 4]], [0, 2, 1], 2, 2)
    write("idx", "seed-plain", idx_input(img, lab))
    # mtime=0 keeps the gzip bytes identical run to run.
    write("idx", "seed-gzip", idx_input(gzip.compress(img, mtime=0), gzip.compress(lab, mtime=0)))
    write("idx", "seed-gzip-labels", idx_input(img, gzip.compress(lab, mtime=0)))
    img, lab = idx_pair([[x % 256 for x in range(28 * 28)]], [9], 28, 28)
    write("idx", "seed-28x28", idx_input(img, lab))


def safetensors(tensors, metadata, checksums):
    """tensors: [(name, dtype, shape, data bytes)]"""
    header, data, offset = {}, b"", 0
    meta = dict(metadata)
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        data += raw
        if checksums:
            meta[f"crc32.{name}"] = f"{zlib.crc32(raw):08x}"
    if checksums:
        meta["crc32"] = f"{zlib.crc32(data):08x}"
    if meta:
        header["__metadata__"] = meta
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def safetensors_seeds():
    f32 = lambda *v: struct.pack(f"<{len(v)}f", *v)
    model = [("layers.0.weight", "F32", [2, 3], f32(1, 2, 3, 4, 5, 6)),
             ("layers.0.bias", "F32", [2], f32(0.5, -0.5)),
             ("step", "I64", [], struct.pack("<q", 7))]
    meta = {"format": "zerolap", "optimizer_step": "7"}
    write("safetensors", "seed-crc", safetensors(model, meta, checksums=True))
    write("safetensors", "seed-no-crc", safetensors(model, {}, checksums=False))
    write("safetensors", "seed-empty", safetensors([], {}, checksums=False))
    write("safetensors", "seed-dtypes", safetensors(
        [("a", "F16", [2], b"\x00\x3c\x00\xc0"), ("b", "U8", [3], b"\x01\x02\x03"),
         ("c", "F32", [0, 4], b""), ("d", "BF16", [1, 1], b"\x80\x3f")], {}, checksums=True))


if __name__ == "__main__":
    config_seeds()
    idx_seeds()
    safetensors_seeds()
