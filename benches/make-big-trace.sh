#!/usr/bin/env bash
# Captures a large real trace for the read benchmark: hackbench under tracefs, saved with
# trace-cmd extract as trace.dat v7 (zstd) and converted to v6. Needs root, trace-cmd and
# hackbench. Usage: make-big-trace.sh OUTDIR [GROUPS LOOPS]
set -euo pipefail
out=$1; groups=${2:-8}; loops=${3:-5000}
mkdir -p "$out"
T=/sys/kernel/tracing
[ -d "$T/events" ] || mount -t tracefs nodev "$T"
EVENTS=(sched/sched_switch sched/sched_waking sched/sched_wakeup sched/sched_wakeup_new
        sched/sched_migrate_task sched/sched_process_fork sched/sched_process_exit)
# "7 (expanded: 1408)" before the buffer was first used: restore the expanded size.
old_size=$(grep -o "[0-9]*" "$T/buffer_size_kb" | tail -1)
restore() {
    echo 0 > "$T/tracing_on"
    for e in "${EVENTS[@]}"; do echo 0 > "$T/events/$e/enable"; done
    echo "$old_size" > "$T/buffer_size_kb"
    echo 1 > "$T/tracing_on"
}
trap restore EXIT
echo 0 > "$T/tracing_on"
echo > "$T/trace"
echo 200000 > "$T/buffer_size_kb"
for e in "${EVENTS[@]}"; do echo 1 > "$T/events/$e/enable"; done
echo 1 > "$T/tracing_on"
hackbench -g "$groups" -l "$loops" > /dev/null
echo 0 > "$T/tracing_on"
cat "$T"/per_cpu/cpu*/stats | grep -E "overrun|dropped" | sort | uniq -c >&2
rm -f "$out/big-v7.dat" "$out/big-v6.dat"
trace-cmd extract -o "$out/big-v7.dat" > /dev/null 2>&1
trace-cmd convert -i "$out/big-v7.dat" --file-version 6 --compression none -o "$out/big-v6.dat" > /dev/null 2>&1
