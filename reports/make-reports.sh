#!/usr/bin/env bash
# Regenerates the sample reports under reports/ from the committed traces, and the replay
# results the notebook reads. Needs only the committed traces and a build.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=target/release/sisreplay
rig=traces/rig

# This machine (2 CPUs, one LLC, 6.18): SIS_PROP against SIS_UTIL and no limit.
host=(vanilla sis_util no_limit --trace traces/host/hackbench-g4-l2000 --trace traces/host/pingpong-2pairs)
$bin report "${host[@]}" -o reports/host.html
$bin report "${host[@]}" --format text -o reports/host.txt

# Debian 6.1 with two LLCs: the policies replayed over the NO_SIS_UTIL captures of
# ping-pong pairs and hackbench.
two=(no_limit sis_util sis_prop --trace $rig/2x4/rig-2x4-pingpong-no_limit-tracefs
     --trace $rig/2x4/rig-2x4-hackbench-no_limit-tracefs)
$bin report "${two[@]}" -o reports/rig-2x4.html
$bin report "${two[@]}" --format text -o reports/rig-2x4.txt
$bin report "${two[@]}" --format json -o reports/rig-2x4.json

# Two NUMA nodes with SMT: the model's arms beside what the SIS_UTIL capture recorded.
numa=$rig/2x4x2-numa
$bin report no_limit sis_util trace:$numa/rig-2x4x2-numa-pingpong-sis_util-tracefs \
    --trace $numa/rig-2x4x2-numa-pingpong-no_limit-tracefs -o reports/rig-2x4x2-numa.html

# Three runs per arm: the 2x4 ping-pong captured under SIS_UTIL and under SIS_PROP on
# three kernels (Debian's, and the sis-stats builds without and with the CAS patch). The
# policies replay the SIS_PROP runs, paired run by run (on the CAS kernel SIS_PROP's
# place is taken by CAS, which the model follows there); the SIS_UTIL runs, the same
# setting on every kernel, report what they recorded, against them by Welch's test.
# The 2x4 ping-pong captures of one setting on the three kernels, comma-separated.
on_three_kernels() {
    local runs=
    for k in "" kernel-sis-stats+noinline/ kernel-sis-stats+noinline+cas/; do
        runs+=${runs:+,}$rig/${k}2x4/rig-2x4-pingpong-$1-tracefs
    done
    echo "$runs"
}
three=(sis_prop sis_util trace:$(on_three_kernels sis_util) --trace $(on_three_kernels sis_prop))
$bin report "${three[@]}" -o reports/rig-2x4-runs.html
$bin report "${three[@]}" --format text -o reports/rig-2x4-runs.txt

# A machine where the policies differ: the seed 000 Sapphire Rapids (224 CPUs, two LLCs
# of 112) simulated under SIS_PROP with netperf TCP_RR at 50, 100 and 200 % load, each
# step replayed under SIS_PROP and SIS_UTIL. The bundles (20-35 MB each) are made in
# target/, never committed; they stay there for the report's --explain commands.
spr=target/synth-spr-2s112
rm -rf $spr
mkdir -p $spr
steps=()
for load in 50 100 200; do
    # One step of one policy: -o names the bundle itself.
    $bin synth --machine spr-2s112 --workload netperf-tcp-rr --load $load% --policy sis_prop \
        --duration 20ms --warmup 20ms -o $spr/spr-rr-${load}pct > /dev/null
    steps+=(--trace $spr/spr-rr-${load}pct)
done
$bin report vanilla sis_util "${steps[@]}" -o reports/spr-2s112.html
$bin report vanilla sis_util "${steps[@]}" --format text -o reports/spr-2s112.txt

# Fidelity of the model on every committed capture, and the counterfactual.
{
    echo "Fidelity: each capture replayed with the policy of its own sched features"
    echo "(sisreplay fidelity; regenerate with reports/make-reports.sh)."
    echo
    $bin fidelity $rig/2x4/rig-* $rig/2x4-own-threads/rig-* $rig/2x4x2-numa/rig-* $rig/1x2x4x2/rig-* \
        $rig/2x4x2-numa-own-threads/rig-* "$rig/kernel-6.12-sis-stats+noinline"/2x4/rig-*-tracefs \
        traces/host/*
    for t in 2x4 2x4x2-numa; do
        for w in pingpong hackbench; do
            d=$rig/$t
            echo
            echo "Counterfactual, $t $w: the NO_SIS_UTIL capture replayed with each policy,"
            echo "beside what the NO_SIS_UTIL and SIS_UTIL captures recorded."
            echo
            $bin compare no_limit sis_util trace:$d/rig-$t-$w-no_limit-tracefs \
                trace:$d/rig-$t-$w-sis_util-tracefs --trace $d/rig-$t-$w-no_limit-tracefs
        done
    done
} > reports/fidelity.txt

# Closed-loop re-runs of the captures: the traced policy's re-run against the trace (the
# model's fidelity), and what the other policies would have done next.
{
    echo "Closed-loop re-runs of captured traces (sisreplay simulate; regenerate with"
    echo "reports/make-reports.sh)."
    for b in traces/host/pingpong-2pairs traces/host/hackbench-g4-l2000 \
        $rig/2x4/rig-2x4-pingpong-sis_util-tracefs $rig/2x4/rig-2x4-hackbench-sis_util-tracefs \
        $rig/2x4/rig-2x4-pingpong-sis_util-costs-tracefs \
        $rig/2x4x2-numa/rig-2x4x2-numa-hackbench-sis_util-tracefs \
        $rig/kernel-6.12-sis-stats+noinline/2x4/rig-2x4-pingpong-sis_util-tracefs \
        $rig/kernel-6.12-sis-stats+noinline/2x4/rig-2x4-hackbench-sis_util-tracefs; do
        echo
        $bin simulate $b --policy sis_prop,no_limit
    done
} > reports/simulate.txt

# The gate over every committed capture, with three seeds of the re-runs' draws.
python3 reports/self_fidelity.py "$bin"

# The results the notebook reads.
b=$rig/2x4/rig-2x4-pingpong-no_limit-tracefs
$bin replay $b --policy no_limit,sis_util,sis_prop > /dev/null
rm -rf reports/data/$(basename $b)
mkdir -p reports/data
mv $b/results reports/data/$(basename $b)
# Several bundles' results as one dataset, for the notebook's last cell.
rm -rf reports/data/fleet
$bin replay $rig/kernel-sis-stats+noinline/2x4 --policy sis_prop,sis_util,no_limit \
    --out reports/data/fleet > /dev/null
# Each policy model against the rig kernels built with that policy.
python3 reports/ground_truth.py "$bin"
# Closed-loop counterfactuals against the rig's captures under the other settings.
python3 reports/counterfactual.py "$bin"

ls -l reports
