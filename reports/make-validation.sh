#!/usr/bin/env bash
# Runs the seeds' experiments in the simulator on the seeds' machine presets, with the
# default model parameters (one set for all), and prints the simulated tables beside the
# published ones (validation.txt):
#   seed 000 (SIS_UTIL, spr-2s112): netperf TCP_RR/UDP_RR and tbench at 28..224 threads,
#     hackbench process-pipe at 1..8 groups of 28 tasks, schbench at 1..8 message
#     threads of 28 workers; SIS_PROP (vanilla) against SIS_UTIL.
#   seed 001 (SIS_UTIL tested on Kunpeng 920): netperf TCP_RR at 16..256 threads on
#     node 0 (one 32-CPU LLC) and nodes 0-1 (two).
#   seed 002 (newidle balance kept in the LLC, hygon-384): hackbench -g 4.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=target/release/sisreplay
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run() { # tag machine workload threads policies
    $bin synth --machine "$2" --workload "$3" --threads "$4" --policy "$5" \
        --warmup 200ms --duration 100ms --no-bundle --json >"$out/$1-$3-$4.json"
}
for t in 28 56 84 112 140 168 196 224; do
    run seed000 spr-2s112 netperf-tcp-rr $t sis_prop,sis_util
    run seed000 spr-2s112 netperf-udp-rr $t sis_prop,sis_util
    run seed000 spr-2s112 tbench $t sis_prop,sis_util
done
for g in 1 2 3 4 5 6 7 8; do
    run seed000 spr-2s112 hackbench:fds=14 $((28 * g)) sis_prop,sis_util
    run seed000 spr-2s112 schbench:workers=28 $((28 * g)) sis_prop,sis_util
done
# Kunpeng 920 restricted to its first nodes, as the seed's runs were pinned.
for nodes in 1 2; do
    $bin machines kunpeng920 --json | python3 -c "
import json, sys
t = json.load(sys.stdin)
t['cpus'] = [c for c in t['cpus'] if c['node'] < $nodes]
t['source'] = 'kunpeng920, nodes 0..$((nodes - 1))'
json.dump(t, sys.stdout)" >"$out/kunpeng920-$nodes-node.json"
    for t in 16 32 64 128 256; do
        run "seed001-$nodes" "$out/kunpeng920-$nodes-node.json" netperf-tcp-rr $t sis_prop,sis_util
    done
done
run seed002 hygon-384 hackbench 160 sis_util,newidle_llc
python3 reports/validation_table.py "$out"
cat reports/validation-notes.txt
