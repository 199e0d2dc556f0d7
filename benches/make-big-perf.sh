#!/usr/bin/env bash
# Captures large real perf.data files for the read benchmark: hackbench under
# `perf record -a` on the scheduler tracepoints the model reads, once plain and once with
# -z (zstd). Needs root, perf and hackbench. Usage: make-big-perf.sh OUTDIR [GROUPS LOOPS]
set -euo pipefail
out=$1; groups=${2:-8}; loops=${3:-8000}
mkdir -p "$out"
EVENTS=(-e sched:sched_switch -e sched:sched_waking -e sched:sched_wakeup
        -e sched:sched_wakeup_new -e sched:sched_migrate_task -e sched:sched_process_fork
        -e sched:sched_process_exit)
# 16 MiB of ring buffer per CPU: the default 512 KiB loses samples under hackbench.
for z in "" -z; do
    f="$out/big${z}.perf.data"
    rm -f "$f"
    perf record -q -a $z -m 16M "${EVENTS[@]}" -o "$f" -- hackbench -g "$groups" -l "$loops" > /dev/null
done
