#!/usr/bin/env bash
# Runs each fuzz target for a fixed budget, one after the other, one job each, at the
# lowest priority (the machine's cores are shared), seeded with fuzz/seeds/TARGET, the
# committed samples and the damaged files kept as test fixtures. Prints, per target, the
# executions run and the crashes found (their inputs land in fuzz/artifacts/TARGET/).
# Usage: fuzz/run-budget.sh [SECONDS_PER_TARGET] [TARGET...]   (default 900; all four)
set -uo pipefail
cd "$(dirname "$0")"
budget=${1:-900}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(tracedat perfdata text bundle)
samples=../traces/samples
declare -A extra=(
    [tracedat]="$samples/hackbench-v6.dat $samples/hackbench-v7-zstd.dat $samples/hackbench-v7-zlib.dat"
    [perfdata]="$samples/hackbench-perf.data $samples/hackbench-perf-sched.data $samples/no-tracepoints.data ../tests/fixtures/perf-bad-cmdline-count.data ../tests/fixtures/perf-bad-event-desc-count.data ../tests/fixtures/perf-bad-event-name-length.data ../tests/fixtures/perf-bad-feature-size.data ../tests/fixtures/perf-bad-sample-cpu.data"
    [text]="$samples/hackbench-tracefs.txt"
    [bundle]=""
)
for t in "${targets[@]}"; do
    RUSTC_BOOTSTRAP=1 cargo fuzz build -O "$t" >&2 || exit 1
done
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t" "artifacts/$t" "seeds-extra/$t"
    for f in ${extra[$t]:-}; do cp "$f" "seeds-extra/$t/"; done
    log="artifacts/$t/run.log"
    # Inputs are cut to 128 KiB (the large samples' headers and first pages); an input
    # that takes over 10 s or allocates over 2 GB counts as a crash.
    start=$(date +%s)
    nice -n 19 "target/x86_64-unknown-linux-gnu/release/$t" "corpus/$t" "seeds/$t" "seeds-extra/$t" \
        -max_total_time="$budget" -max_len=131072 -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="artifacts/$t/" -print_final_stats=1 > "$log" 2>&1
    code=$?
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    crashes=$(ls "artifacts/$t" | grep -c -E '^(crash|timeout|oom|leak)-')
    echo "$t: ${runs:-?} executions in $(( $(date +%s) - start )) s (budget $budget s), exit $code, $crashes crash inputs"
done
