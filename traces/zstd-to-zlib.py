#!/usr/bin/env python3
"""Rewrites a trace.dat v7 file compressed with zstd as the same file compressed with zlib.

trace-cmd writes zlib when built with it; Debian's build on these machines has zstd only,
so the zlib sample is made from the zstd one: every compressed section and every CPU data
chunk is decompressed (zstd CLI) and recompressed (zlib), and every offset that points into
the file is updated. Layout, options and uncompressed sections are kept as they are.

Usage: zstd-to-zlib.py IN.dat OUT.dat
"""
import struct
import subprocess
import sys
import zlib

OPT_DONE, OPT_BUFFER, OPT_STRINGS = 0, 3, 15
SECTION_OPTS = range(16, 22)  # HEADER_INFO .. CMDLINES: their data is a section offset


def unzstd(data, size):
    out = subprocess.run(["zstd", "-dc"], input=data, capture_output=True, check=True).stdout
    assert len(out) == size, (len(out), size)
    return out


def cstr(buf, at):
    end = buf.index(b"\0", at)
    return buf[at:end], end + 1


def main(src, dst):
    d = open(src, "rb").read()
    assert d[:10] == b"\x17\x08Dtracing" and d[10:12] == b"7\0"
    page_size = struct.unpack_from("<I", d, 14)[0]
    name, at = cstr(d, 18)
    _ver, at = cstr(d, at)
    assert name == b"zstd", name
    first_opts = struct.unpack_from("<Q", d, at)[0]
    header_end = at + 8

    def section(off):
        sid, flags, sdesc, size = struct.unpack_from("<HHIQ", d, off)
        body = d[off + 16: off + 16 + size]
        if flags & 1:
            csize, usize = struct.unpack_from("<II", body, 0)
            body = unzstd(body[8: 8 + csize], usize)
        return {"id": sid, "flags": flags, "desc": sdesc, "content": body, "orig": off}

    def parse_options(content):
        opts, p = [], 0
        while p < len(content):
            oid, size = struct.unpack_from("<HI", content, p)
            opts.append([oid, content[p + 6: p + 6 + size]])
            p += 6 + size
            if oid == OPT_DONE:
                break
        return opts

    # Walk the options chain; collect every section the options point at.
    sections, buffers, off = {}, [], first_opts
    last_end = 0
    while off:
        s = section(off)
        assert s["flags"] & 1 == 0, "compressed options sections are not handled"
        s["options"] = parse_options(s["content"])
        sections[off] = s
        last_end = max(last_end, off + 16 + struct.unpack_from("<Q", d, off + 8)[0])
        nxt = 0
        for oid, data in s["options"]:
            if oid in SECTION_OPTS:
                o = struct.unpack_from("<Q", data)[0]
                sections[o] = section(o)
            elif oid == OPT_BUFFER:
                buffers.append(data)
            elif oid == OPT_DONE:
                nxt = struct.unpack_from("<Q", data)[0]
        off = nxt
    if last_end < len(d) and struct.unpack_from("<H", d, last_end)[0] == OPT_STRINGS:
        sections[last_end] = section(last_end)

    # Flyrecord sections: header, page-aligned per-CPU chunked data.
    flys = {}
    for b in buffers:
        fly_off = struct.unpack_from("<Q", b)[0]
        sid, flags, sdesc, size = struct.unpack_from("<HHIQ", d, fly_off)
        p = 8
        bname, p = cstr(b, p)
        clock, p = cstr(b, p)
        _psize, ncpu = struct.unpack_from("<II", b, p)
        p += 8
        cpus = []
        for _ in range(ncpu):
            cpu, coff, csz = struct.unpack_from("<IQQ", b, p)
            p += 20
            count = struct.unpack_from("<I", d, coff)[0]
            q, chunks = coff + 4, []
            for _ in range(count):
                cs, us = struct.unpack_from("<II", d, q)
                chunks.append(unzstd(d[q + 8: q + 8 + cs], us))
                q += 8 + cs
            cpus.append((cpu, chunks))
        flys[fly_off] = {"id": sid, "flags": flags, "desc": sdesc, "cpus": cpus,
                         "prefix": (bname, clock)}

    # Lay the new file out in the original order.
    out = bytearray(d[:18] + b"zlib\0" + zlib.ZLIB_VERSION.encode() + b"\0")
    opts_at = len(out)
    out += b"\0" * 8
    new_off = {}
    fly_cpu = {}

    def put_section(s, content):
        flags = s["flags"]
        if flags & 1:
            c = zlib.compress(content)
            content = struct.pack("<II", len(c), len(s["content"])) + c
        new_off[s["orig"]] = len(out)
        out.extend(struct.pack("<HHIQ", s["id"], flags, s["desc"], len(content)) + content)

    order = sorted(list(sections) + list(flys))
    # Options sections hold offsets of sections after them: lay out twice, patch once.
    for pass_no in (0, 1):
        del out[opts_at + 8:]
        for o in order:
            if o in flys:
                f = flys[o]
                new_off[o] = len(out)
                hdr_at = len(out)
                out.extend(b"\0" * 16)
                cpus = []
                for cpu, chunks in f["cpus"]:
                    while len(out) % page_size:
                        out.append(0)
                    start = len(out)
                    out.extend(struct.pack("<I", len(chunks)))
                    for ch in chunks:
                        c = zlib.compress(ch)
                        out.extend(struct.pack("<II", len(c), len(ch)) + c)
                    # trace-cmd's recorded size leaves out the chunk count.
                    cpus.append((cpu, start, len(out) - start - 4))
                struct.pack_into("<HHIQ", out, hdr_at, f["id"], f["flags"], f["desc"],
                                 len(out) - hdr_at - 16)
                fly_cpu[o] = cpus
                continue
            s = sections[o]
            if "options" in s:
                content = bytearray()
                for oid, data in s["options"]:
                    if oid in SECTION_OPTS or oid == OPT_DONE:
                        v = struct.unpack_from("<Q", data)[0]
                        data = struct.pack("<Q", new_off.get(v, 0) if v else 0)
                    elif oid == OPT_BUFFER:
                        v = struct.unpack_from("<Q", data)[0]
                        bname, clock = flys[v]["prefix"]
                        data = struct.pack("<Q", new_off.get(v, 0)) + bname + b"\0" + clock + b"\0"
                        data += struct.pack("<II", page_size, len(fly_cpu.get(v, [])))
                        for cpu, start, size in fly_cpu.get(v, []):
                            data += struct.pack("<IQQ", cpu, start, size)
                    content += struct.pack("<HI", oid, len(data)) + data
                put_section(s, bytes(content))
            else:
                put_section(s, s["content"])
    struct.pack_into("<Q", out, opts_at, new_off[first_opts])
    open(dst, "wb").write(out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
