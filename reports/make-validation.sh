#!/usr/bin/env bash
# Runs seed 000's netperf experiment in the simulator: spr-2s112, TCP_RR and UDP_RR at
# 28..224 threads, SIS_PROP (vanilla) against SIS_UTIL, with the default model
# parameters, and prints the rows to set beside the seed's tables (validation.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=target/release/sisreplay
for w in netperf-tcp-rr netperf-udp-rr; do
    for t in 28 56 84 112 140 168 196 224; do
        $bin synth --machine spr-2s112 --workload $w --threads $t --policy sis_prop,sis_util \
            --warmup 100ms --duration 50ms --no-bundle --json
    done
done | python3 reports/validation_table.py
