#!/usr/bin/env python3
"""Makes the `bundle` fuzz target's seeds from a small bundle (sisreplay import of the
first 400 lines of traces/samples/hackbench-tracefs.txt): its events.parquet as
sisreplay writes it, and as polars writes it back (string views; categoricals, which are
dictionaries; uncompressed, so the fuzzer sees the values), plus the mutants the reader
must refuse: rows out of time order and an event on a CPU beyond meta.json's count.
Usage: make-bundle-seeds.py BUNDLE_DIR OUT_DIR"""
import os
import shutil
import sys

import polars as pl

src, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
shutil.copy(os.path.join(src, "events.parquet"), os.path.join(out, "sisreplay.parquet"))
df = pl.read_parquet(os.path.join(src, "events.parquet"))
strings = [c for c, t in df.schema.items() if t == pl.String]
variants = {
    "polars.parquet": (df, "zstd"),
    "polars-uncompressed.parquet": (df, "uncompressed"),
    "polars-categorical.parquet": (
        df.with_columns([pl.col(c).cast(pl.Categorical) for c in strings]),
        "uncompressed",
    ),
    "reversed.parquet": (df.reverse(), "uncompressed"),
    "cpu5.parquet": (
        df.with_columns(
            pl.when(pl.int_range(pl.len()) == 42).then(5).otherwise(pl.col("cpu")).cast(pl.UInt32).alias("cpu")
        ),
        "uncompressed",
    ),
}
for name, (frame, compression) in variants.items():
    frame.write_parquet(os.path.join(out, name), compression=compression)
