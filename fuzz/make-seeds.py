#!/usr/bin/env python3
"""Makes small fuzzing seeds from the committed samples: a trace.dat v6 with only the
sched and irq formats, no kallsyms or printk formats, and two pages per CPU (a few KB
instead of 8 MB), so the fuzzer reaches the page decoder quickly."""
import struct
import sys

src, dst = sys.argv[1], sys.argv[2]
d = open(src, "rb").read()
p = 10
ver_end = d.index(b"\0", p)
p = ver_end + 1
out = bytearray(d[:p + 6])  # version, endian, long size, page size
page_size = struct.unpack_from("<I", d, p + 2)[0]
p += 6
for tag in (b"header_page\0", b"header_event\0"):
    assert d[p:p + len(tag)] == tag
    size = struct.unpack_from("<Q", d, p + len(tag))[0]
    out += d[p:p + len(tag) + 8 + size]
    p += len(tag) + 8 + size
n = struct.unpack_from("<I", d, p)[0]
p += 4
for _ in range(n):
    p += 8 + struct.unpack_from("<Q", d, p)[0]
out += struct.pack("<I", 0)  # no ftrace formats
nsys = struct.unpack_from("<I", d, p)[0]
p += 4
kept = bytearray()
nkept = 0
for _ in range(nsys):
    e = d.index(b"\0", p)
    name = d[p:e]
    p = e + 1
    nev = struct.unpack_from("<I", d, p)[0]
    p += 4
    start = p
    for _ in range(nev):
        p += 8 + struct.unpack_from("<Q", d, p)[0]
    if name in (b"sched", b"irq"):
        kept += name + b"\0" + struct.pack("<I", nev) + d[start:p]
        nkept += 1
out += struct.pack("<I", nkept) + kept
p += 4 + struct.unpack_from("<I", d, p)[0]  # kallsyms
p += 4 + struct.unpack_from("<I", d, p)[0]  # printk
out += struct.pack("<I", 0) + struct.pack("<I", 0)
size = struct.unpack_from("<Q", d, p)[0]
out += d[p:p + 8 + min(size, 0)] if False else struct.pack("<Q", 0)
p += 8 + size
ncpu = struct.unpack_from("<I", d, p)[0]
out += d[p:p + 4]
p += 4
tag = d[p:p + 10]
if tag == b"options  \0":
    p += 10
    while True:
        oid = struct.unpack_from("<H", d, p)[0]
        p += 2
        if oid == 0:
            break
        p += 4 + struct.unpack_from("<I", d, p)[0]
    tag = d[p:p + 10]
assert tag == b"flyrecord\0"
p += 10
cpus = [struct.unpack_from("<QQ", d, p + 16 * i) for i in range(ncpu)]
out += b"flyrecord\0"
table = len(out)
out += b"\0" * (16 * ncpu)
for i, (off, size) in enumerate(cpus):
    while len(out) % page_size:
        out.append(0)
    keep = min(size, 2 * page_size)
    struct.pack_into("<QQ", out, table + 16 * i, len(out), keep)
    out += d[off:off + keep]
open(dst, "wb").write(out)
