#!/usr/bin/env bash
# Prints the lines rig.sh's guest runs to record the kernel's own wakeup state: a kprobe
# on select_task_rq_fair, in a tracefs instance of its own (`kstate`), that reads at
# every call what the trace cannot show and replay models:
#
#   gpid pf pdts       the task selected for: pid, p->wakee_flips, p->wakee_flip_decay_ts
#   pu pe pw plu       its se.avg: util_avg, util_est.enqueued and .ewma (as its last
#                      sleep left them), last_update_time
#   wf jif             the wake flags and jiffies_64
#   l<c> u<c> n<c>     CPU c's cfs_rq load_avg and its last_update_time, rq->nr_running
#   f<c> d<c> w<c>     CPU c's current task: wakee_flips, wakee_flip_decay_ts, the pid of
#                      its last_wakee (the waker is the current task of the probe's CPU)
#   v<c> e<c> s<c>     CPU c's cfs_rq util_avg and util_est.enqueued (cpu_util_cfs takes
#                      the larger), and its LLC's nr_idle_scan (SIS_UTIL's budget, set at
#                      the LLC's periodic balance), on machines of at most 13 CPUs (a
#                      kprobe takes at most 128 fetch arguments: 9 + 9 per CPU)
#
# and a second (`kstate/balance`) on find_busiest_group, which load_balance reaches once
# should_we_balance has let this CPU balance the domain, and whose statistics pass sets
# SIS_UTIL's nr_idle_scan at the LLC's level (update_idle_cpu_scan):
#
#   dst idle           the balancing CPU (on behalf of an idle one under nohz) and the
#                      cpu_idle_type (0 idle, 1 not idle, 2 newly idle)
#   w lb bi            the domain's span_weight, last_balance (jiffies, the balance
#                      before this one) and balance_interval (ms)
#   jif                jiffies_64
#   v<c> e<c> s<c>     as above: what update_idle_cpu_scan reads, and its result before
#
# Fields are found by offset (kprobes of 6.1 take no BTF names): the offsets come from
# the kernel's BTF through pahole, per-CPU data through __per_cpu_offset and the
# per-CPU symbols' offsets, read from the guest's /proc/kallsyms at boot.
#
#   traces/rig/kernel-state.sh KERNEL     (a vmlinux, or a bzImage compressed with xz or gzip)
set -euo pipefail
kernel=${1:?usage: kernel-state.sh VMLINUX|BZIMAGE}
command -v pahole > /dev/null || { echo "kernel-state.sh: needs pahole (Debian: dwarves)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
vmlinux=$kernel
if [ "$(head -c 4 "$kernel" | od -An -tx1 | tr -d ' ')" != 7f454c46 ]; then
    vmlinux=$work/vmlinux
    python3 - "$kernel" "$vmlinux" <<'PY'
import gzip, lzma, sys
data = open(sys.argv[1], "rb").read()
for magic, open_ in ((b"\xfd7zXZ\x00", lzma.LZMADecompressor), (b"\x1f\x8b\x08", None)):
    at = data.find(magic)
    if at < 0:
        continue
    out = (open_().decompress(data[at:]) if open_ else gzip.GzipFile(fileobj=__import__("io").BytesIO(data[at:])).read())
    if out[:4] == b"\x7fELF":
        open(sys.argv[2], "wb").write(out)
        sys.exit(0)
sys.exit(f"kernel-state.sh: no xz or gzip vmlinux found in {sys.argv[1]}")
PY
fi
# offset STRUCT MEMBER: the member's byte offset, from pahole's `/* offset size */`.
# awk reads to the end: leaving early would kill pahole with SIGPIPE, which pipefail
# makes this script's failure.
offset() {
    pahole -F btf -C "$1" "$vmlinux" |
        awk -v m="$2" '!done && $0 ~ "[ *]" m "( __attribute__.*)?;" { for (i = 1; i <= NF; i++) if ($i == "/*") { print $(i + 1); done = 1; break } }'
}
for s in "task_struct wakee_flips" "task_struct wakee_flip_decay_ts" "task_struct last_wakee" \
         "task_struct pid" "task_struct se" "sched_entity avg" "sched_avg load_avg" \
         "sched_avg last_update_time" "sched_avg util_avg" "sched_avg util_est" "rq nr_running" "rq cfs" "cfs_rq avg" \
         "sched_domain_shared nr_idle_scan" "lb_env sd" "lb_env dst_cpu" "lb_env idle" \
         "sched_domain span_weight" "sched_domain last_balance" "sched_domain balance_interval"; do
    v=$(offset $s)
    [ -n "$v" ] || { echo "kernel-state.sh: no offset for $s in $kernel's BTF" >&2; exit 1; }
    eval "o_${s// /_}=$v"
done
cpu_load=$((o_rq_cfs + o_cfs_rq_avg + o_sched_avg_load_avg))
cpu_lut=$((o_rq_cfs + o_cfs_rq_avg + o_sched_avg_last_update_time))
cpu_util=$((o_rq_cfs + o_cfs_rq_avg + o_sched_avg_util_avg))
# util_est's first member is `enqueued`.
cpu_util_est=$((o_rq_cfs + o_cfs_rq_avg + o_sched_avg_util_est))
task_util=$((o_task_struct_se + o_sched_entity_avg + o_sched_avg_util_avg))
task_lut=$((o_task_struct_se + o_sched_entity_avg + o_sched_avg_last_update_time))
# util_est is { enqueued, ewma }, 32 bits each.
task_util_est=$((o_task_struct_se + o_sched_entity_avg + o_sched_avg_util_est))
cat <<GUEST
T=/sys/kernel/tracing
# current_task (to 6.1) or pcpu_hot, whose first member it became (6.2)
RQ=\$(awk '\$3 == "runqueues" { print \$1 }' /proc/kallsyms)
CT=\$(awk '\$3 == "current_task" || \$3 == "pcpu_hot" { print \$1; exit }' /proc/kallsyms)
SDS=\$(awk '\$3 == "sd_llc_shared" { print \$1 }' /proc/kallsyms)
args="gpid=+$o_task_struct_pid(%di):s32 pf=+$o_task_struct_wakee_flips(%di):u32 pdts=+$o_task_struct_wakee_flip_decay_ts(%di):u64 wf=%dx:u32 jif=@jiffies_64:u64"
args="\$args pu=+$task_util(%di):u64 pe=+$task_util_est(%di):u32 pw=+$((task_util_est + 4))(%di):u32 plu=+$task_lut(%di):u64"
# What SIS_UTIL's update reads, per CPU: read by both probes.
util=
c=0
while [ \$c -lt \$(nproc) ]; do
    b="@__per_cpu_offset+\$((8 * c))"
    cur="+\$((0x\$CT))(\$b)"
    args="\$args l\$c=+\$((0x\$RQ + $cpu_load))(\$b):u64 u\$c=+\$((0x\$RQ + $cpu_lut))(\$b):u64 n\$c=+\$((0x\$RQ + $o_rq_nr_running))(\$b):u32"
    args="\$args f\$c=+$o_task_struct_wakee_flips(\$cur):u32 d\$c=+$o_task_struct_wakee_flip_decay_ts(\$cur):u64 w\$c=+$o_task_struct_pid(+$o_task_struct_last_wakee(\$cur)):s32"
    if [ \$(nproc) -le 13 ]; then
        util="\$util v\$c=+\$((0x\$RQ + $cpu_util))(\$b):u64 e\$c=+\$((0x\$RQ + $cpu_util_est))(\$b):u32 s\$c=+$o_sched_domain_shared_nr_idle_scan(+\$((0x\$SDS))(\$b)):s32"
    fi
    c=\$((c + 1))
done
echo "p:kstate/select select_task_rq_fair \$args\$util" >> \$T/kprobe_events || echo "rig: kernel state probe refused: \$(tail -2 \$T/error_log)"
# find_busiest_group out of line, under its own name or a compiler's suffixed one.
FBG=\$(awk '\$3 ~ /^find_busiest_group(\.|\$)/ { print \$3; exit }' /proc/kallsyms)
sd="+$o_lb_env_sd(%di)"
bargs="dst=+$o_lb_env_dst_cpu(%di):s32 idle=+$o_lb_env_idle(%di):u32 w=+$o_sched_domain_span_weight(\$sd):u32"
bargs="\$bargs lb=+$o_sched_domain_last_balance(\$sd):u64 bi=+$o_sched_domain_balance_interval(\$sd):u32 jif=@jiffies_64:u64\$util"
if [ -z "\$FBG" ]; then
    echo "rig: find_busiest_group is not out of line: no balance probe"
else
    echo "p:kstate/balance \$FBG \$bargs" >> \$T/kprobe_events || echo "rig: balance probe refused: \$(tail -2 \$T/error_log)"
fi
mkdir -p \$T/instances/kstate
echo mono > \$T/instances/kstate/trace_clock
echo 16384 > \$T/instances/kstate/buffer_size_kb
GUEST
