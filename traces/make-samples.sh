#!/usr/bin/env bash
# Re-creates the committed sample traces under traces/samples/ from a real run of
# hackbench on this machine. Needs root, trace-cmd, perf and hackbench (rt-tests).
#
# trace-cmd record fails on machines where /proc/sys/kernel/ftrace_enabled is locked, so
# the events are enabled through tracefs directly and the buffer is saved with
# `trace-cmd extract`. That writes trace.dat v7 with zstd; `trace-cmd convert` makes the
# v6 copy. The zlib copy is rewritten from the zstd one by zstd-to-zlib.py (this
# trace-cmd build has no zlib).
set -euo pipefail
cd "$(dirname "$0")/samples"
T=/sys/kernel/tracing
[ -d "$T/events" ] || mount -t tracefs nodev "$T"
LOAD=(hackbench -g 2 -l 100)
EVENTS=(sched/sched_switch sched/sched_waking sched/sched_wakeup sched/sched_wakeup_new
        sched/sched_migrate_task sched/sched_process_fork sched/sched_process_exit
        irq/irq_handler_entry irq/irq_handler_exit irq/softirq_entry irq/softirq_exit)

restore() {
    echo 0 > "$T/tracing_on"
    for e in "${EVENTS[@]}"; do echo 0 > "$T/events/$e/enable"; done
    echo 1408 > "$T/buffer_size_kb"
    echo 1 > "$T/tracing_on"
}
trap restore EXIT

echo 0 > "$T/tracing_on"
echo > "$T/trace"
echo 4096 > "$T/buffer_size_kb"
for e in "${EVENTS[@]}"; do echo 1 > "$T/events/$e/enable"; done
echo 1 > "$T/tracing_on"
"${LOAD[@]}" > /dev/null
echo 0 > "$T/tracing_on"
# The text form first: reading `trace` does not consume the buffer, extract does.
cp "$T/trace" hackbench-tracefs.txt
rm -f hackbench-v7-zstd.dat hackbench-v6.dat
trace-cmd extract -o hackbench-v7-zstd.dat
trace-cmd convert -i hackbench-v7-zstd.dat --file-version 6 --compression none -o hackbench-v6.dat
python3 ../zstd-to-zlib.py hackbench-v7-zstd.dat hackbench-v7-zlib.dat
restore
trap - EXIT

PERF_EVENTS=()
for e in "${EVENTS[@]}"; do PERF_EVENTS+=(-e "${e/\//:}"); done
perf record -q -a "${PERF_EVENTS[@]}" -o hackbench-perf.data -- "${LOAD[@]}" > /dev/null
perf record -q -z -a "${PERF_EVENTS[@]}" -o hackbench-perf-z.data -- "${LOAD[@]}" > /dev/null
perf sched record -q -o hackbench-perf-sched.data -- hackbench -g 2 -l 50 > /dev/null
# A perf.data without tracepoints, for the error path.
perf record -q -e task-clock -o no-tracepoints.data -- true
rm -f *.old
ls -l
