#!/usr/bin/env bash
# Boots Debian's packaged 6.1 kernel, or one built from source (--kernel), under QEMU (TCG)
# with a multi-LLC topology and runs `sisreplay capture` inside it around a workload, once
# per sched-feature setting, then brings the bundles back under traces/rig/.
#
#   traces/rig/rig.sh [--check] [--topology 2x4|2x4x2|2x4x2-numa|1x2x4x2]
#                     [--backend tracefs|perf|both] [--seconds N] [--out DIR]
#                     [--workloads hackbench,pingpong] [--settings sis_util,no_limit,sis_prop]
#                     [--settings sis_util_no_delay,no_limit_no_delay]
#                     [--no-search-latency | --probes duration|flags] [--tag TAG]
#                     [--timeout SECONDS] [--bin PATH]
#                     [--kernel NAME] [--kernel-state]
#
# --workloads takes any of: hackbench (4 groups, saturating the 8 CPUs of 2x4), pingpong
# (4 pairs), pingpong-1pair, -2pairs, -3pairs, hackbench-g1-f2, hackbench-g2-f2,
# periodic-4tasks, -8tasks, -12tasks, -16tasks (the lighter loads; see `workloads` below).
# The default is hackbench,pingpong.
#
# Needs root (apt-get) the first time; the kernel and its modules are cached in
# target/rig-cache/. --check validates the inputs (packages, kernel, binary, topology)
# and builds the initramfs without booting.
#
# --kernel NAME boots a kernel built from Debian's linux-source-6.1 (or, with a `6.12:`
# prefix, linux-source-6.12) by traces/rig/kernel/build.sh instead of the packaged one:
# `stock`, or patch series of traces/rig/patches/ joined by `+` (`sis-stats+noinline`,
# `6.12:sis-stats+noinline`). It is built first if it is not cached (long: see
# traces/rig/kernel/README.md); with --check it is only checked (the patches apply, the
# config is accepted), not built. Such a kernel has the virtio drivers built in (no modules
# are loaded), boots with `schedstats=enable`, and its results go to
# traces/rig/kernel-NAME/TOPOLOGY/, the NAME's `6.12:` written `6.12-`.
#
# A setting whose feature the kernel does not have is skipped in the guest (SIS_PROP,
# removed in 6.7, on 6.12), and a NO_ feature the kernel lacks is not written (the
# _no_delay settings on 6.1, which has no DELAY_DEQUEUE, are the plain ones).
#
# --kernel-state records beside each capture the kernel's own state at every
# select_task_rq_fair call (traces/rig/kernel-state.sh: the wakee flips of the woken and
# the waking task, every CPU's load), as BUNDLE/kernel-state.txt.gz, the tracefs text of
# a kprobe in an instance of its own; reports/kernel_state.py sets it beside replay's.
#
# Why TCG: /dev/kvm on these machines is a software hypervisor a stock kernel cannot
# boot under. Timing under TCG is not hardware timing; the rig is for trace structure:
# which CPU the kernel chose, how often it left the LLC, what the search looked like.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
cache=$top/target/rig-cache
topology=2x4
backends=tracefs
seconds=6
check=0
out=$top/traces/rig
only_workloads=hackbench,pingpong
only_settings=sis_util,no_limit,sis_prop
search=1
# --probes: the probe mode for every workload, instead of each one's own (below).
probes=
# --tag: added to every bundle's name (rig-TOPOLOGY-WORKLOAD-SETTING-TAG-BACKEND), so a
# run unlike the usual (other probes, a loaded host) does not replace the usual bundles.
tag=
guest_timeout=1200
bin=$top/target/release/sisreplay
kernel=
kernel_state=0
# Feature settings: bundle suffix and what is written to sched/features. The _no_delay
# ones (not run unless asked for) turn 6.12's DELAY_DEQUEUE off; they come last, since the
# others do not turn it back on.
settings=("sis_util:SIS_UTIL NO_SIS_PROP" "no_limit:NO_SIS_UTIL NO_SIS_PROP" "sis_prop:NO_SIS_UTIL SIS_PROP"
          "sis_util_no_delay:SIS_UTIL NO_SIS_PROP NO_DELAY_DEQUEUE"
          "no_limit_no_delay:NO_SIS_UTIL NO_SIS_PROP NO_DELAY_DEQUEUE")
# Workloads: name, what --search-latency records, command. hackbench saturates the
# CPUs; four ping-pong pairs over pipes (perf bench sched pipe, a loopback
# request/response like netperf's TCP_RR) keep a quarter to a half of them busy, which
# is what exercises the idle search. Under the ping-pong load the guest hangs with a
# kretprobe on select_task_rq_fair (seen on 6.1 under TCG), so there only the entry
# probe records wake flags and selections. Probes are armed and disarmed by live text
# patching, which TCG gets wrong while other vCPUs run the patched code (an oops in
# try_to_wake_up was seen): capture arms them before the workload starts and disarms
# them after it has been stopped, and the loads stay bounded.
#
# The lighter loads, where the idle search itself decides, take the entry probe only, as
# ping-pong does (`--probes duration` arms the return probes too, and select_idle_cpu's on
# a noinline kernel: periodic-12tasks ran with them on sis-stats+noinline, tagged
# idle-scan; not for ping-pong, which they hang). Measured busy on the sis-stats kernel's
# 2x4 captures, the capture's own 2-7 % included (hackbench 86-91 %, pingpong 23-29 %):
# pingpong-1pair, -2pairs and -3pairs 16-18, 20-25 and 23-31 %; hackbench-g1-f2 and
# -g2-f2, one and two groups of 2 fds (4 and 8 tasks; one group of the default 20 fds
# keeps the CPUs 98 % busy), 30-40 and 63-70 %; periodic-Ntasks, N tasks that each sleep 2
# ms and run 2 ms (`periodic`, below) like schbench's workers, 24-25, 41-45, 54-57 and
# 60-67 % for N = 4, 8, 12, 16 (under TCG a task ran about 5 ms at a time and woke every
# 12 ms, in the traces). Each outlasts the capture, which stops it.
pipes() { echo "sh -c 'for i in $(seq -s ' ' "$1"); do perf bench sched pipe -l 1000000 > /dev/null & done; wait'"; }
workloads=("hackbench:duration:hackbench -g 4 -l 40"
           "pingpong:flags:sh -c 'for i in 1 2 3 4; do perf bench sched pipe -l 30000 > /dev/null & done; wait'"
           "pingpong-1pair:flags:$(pipes 1)"
           "pingpong-2pairs:flags:$(pipes 2)"
           "pingpong-3pairs:flags:$(pipes 3)"
           "hackbench-g1-f2:flags:hackbench -g 1 -f 2 -l 100000"
           "hackbench-g2-f2:flags:hackbench -g 2 -f 2 -l 50000"
           "periodic-4tasks:flags:periodic 4 2 2"
           "periodic-8tasks:flags:periodic 8 2 2"
           "periodic-12tasks:flags:periodic 12 2 2"
           "periodic-16tasks:flags:periodic 16 2 2")

while [ $# -gt 0 ]; do
    case $1 in
        --check) check=1 ;;
        --topology) topology=$2; shift ;;
        --backend) backends=$2; shift ;;
        --seconds) seconds=$2; shift ;;
        --out) out=$2; shift ;;
        --workloads) only_workloads=$2; shift ;;
        --settings) only_settings=$2; shift ;;
        --no-search-latency) search=0 ;;
        --probes) probes=$2; shift ;;
        --tag) tag=$2; shift ;;
        --timeout) guest_timeout=$2; shift ;;
        --bin) bin=$(realpath "$2"); shift ;;
        --kernel) kernel=$2; shift ;;
        --kernel-state) kernel_state=1 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
        *) echo "rig.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
case $probes in
    ""|duration|flags) ;;
    *) echo "rig.sh: --probes takes duration or flags, not $probes" >&2; exit 2 ;;
esac
if [ -n "$probes" ] && [ "$search" = 0 ]; then
    echo "rig.sh: --probes and --no-search-latency exclude each other" >&2; exit 2
fi
for w in ${only_workloads//,/ }; do
    printf '%s\n' "${workloads[@]%%:*}" | grep -x -- "$w" > /dev/null ||
        { echo "rig.sh: unknown workload $w ($(printf '%s\n' "${workloads[@]%%:*}" | paste -sd ' '))" >&2; exit 2; }
done
[ "$backends" = both ] && backends="tracefs perf"
for b in $backends; do
    case $b in tracefs|perf) ;; *) echo "rig.sh: unknown backend $b" >&2; exit 2 ;; esac
done

# QEMU's view of each topology. SMT needs an Intel vendor string for the guest to build
# an SMT domain.
case $topology in
    2x4) smp="-cpu max -smp 8,sockets=2,cores=4,threads=1"; numa="" ;;
    2x4x2) smp="-cpu max,vendor=GenuineIntel -smp 16,sockets=2,cores=4,threads=2"; numa="" ;;
    2x4x2-numa)
        smp="-cpu max,vendor=GenuineIntel -smp 16,sockets=2,cores=4,threads=2"
        numa="-object memory-backend-ram,id=m0,size=1G -numa node,nodeid=0,memdev=m0
              -object memory-backend-ram,id=m1,size=1G -numa node,nodeid=1,memdev=m1
              -numa cpu,node-id=0,socket-id=0 -numa cpu,node-id=1,socket-id=1" ;;
    1x2x4x2) smp="-cpu max,vendor=GenuineIntel -smp 16,sockets=1,dies=2,cores=4,threads=2"; numa="" ;;
    *) echo "rig.sh: unknown topology $topology (2x4, 2x4x2, 2x4x2-numa, 1x2x4x2)" >&2; exit 2 ;;
esac

need=()
command -v qemu-system-x86_64 > /dev/null || need+=(qemu-system-x86)
[ $kernel_state = 0 ] || command -v pahole > /dev/null || need+=(dwarves)
dpkg -s busybox-static > /dev/null 2>&1 || need+=(busybox-static)
command -v cpio > /dev/null || need+=(cpio)
command -v hackbench > /dev/null || need+=(rt-tests)
command -v perf > /dev/null || need+=(linux-perf)
if [ ${#need[@]} -gt 0 ]; then
    echo "rig.sh: installing ${need[*]}" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" > /dev/null
fi

# The kernel: built from source with --kernel, else the image linux-image-amd64 names,
# fetched once.
mkdir -p "$cache"
# tsc=reliable: under TCG the guest otherwise marks its TSCs unsynchronised, falls back
# to the HPET and leaves sched_clock unstable, so each CPU's rq clock (and with it PELT)
# only advances up to a tick past the last tick that arrived: a late tick (a vCPU the
# host did not run) stalls it while the trace's monotonic clock goes on. A machine with
# a stable TSC keeps the two in step, and so does the guest with this (clock.txt:
# "sched_clock: Marking stable"). Captures before it was added ran without.
append="console=ttyS0 quiet panic=-1 loglevel=3 tsc=reliable"
if [ -n "$kernel" ]; then
    if [ $check = 1 ]; then
        bash "$top/traces/rig/kernel/build.sh" --check "$kernel"
    else
        vmlinuz=$(bash "$top/traces/rig/kernel/build.sh" "$kernel" | tail -1)
        release=$(sed -n 's/^release=//p' "$(dirname "$vmlinuz")/info")
    fi
    append="$append schedstats=enable"
    kdir=${kernel#6.1:}
    out=$out/kernel-${kdir/:/-}
elif [ ! -f "$cache/vmlinuz" ]; then
    pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
    [ -n "$pkg" ] || { echo "rig.sh: apt-cache names no kernel for linux-image-amd64 (run apt-get update)" >&2; exit 1; }
    (cd "$cache" && rm -rf deb root && mkdir deb && cd deb && apt-get download "$pkg" > /dev/null)
    # Only what the guest boots with: the image, its config and the virtio modules (the
    # package's other modules are 390 MB).
    mkdir -p "$cache/root"
    dpkg-deb --fsys-tarfile "$cache"/deb/*.deb | tar -x -C "$cache/root" --wildcards \
        './boot/*' '*/kernel/drivers/virtio/*' '*/kernel/drivers/block/virtio_blk*'
    cp "$cache"/root/boot/vmlinuz-* "$cache/vmlinuz"
    ls "$cache"/root/lib/modules > "$cache/release"
fi
if [ -z "$kernel" ]; then
    vmlinuz=$cache/vmlinuz
    release=$(cat "$cache/release")
    moddir=$cache/root/lib/modules/$release/kernel
fi

[ -x "$bin" ] || (cd "$top" && cargo build --release --quiet)

# The kernel-state probe's guest lines, its offsets from the kernel's BTF (a built
# kernel's vmlinux, else the image's).
kstate=
if [ $kernel_state = 1 ] && [ -n "${vmlinuz:-}" ]; then
    image=$vmlinuz
    [ ! -f "$(dirname "$vmlinuz")/vmlinux" ] || image=$(dirname "$vmlinuz")/vmlinux
    kstate=$(bash "$top/traces/rig/kernel-state.sh" "$image")
fi

# The initramfs: static busybox, sisreplay and hackbench with their libraries, the
# virtio modules for the results disk, and an /init that runs the plan.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rd=$work/rd
mkdir -p "$rd"/{bin,sbin,lib,lib64,proc,sys,dev,tmp,out,modules,usr/bin}
cp /bin/busybox "$rd/bin/busybox"
# copy_with_libs PATH [NAME]: PATH as /usr/bin/NAME (its own name by default).
copy_with_libs() {
    local name=${2:-$(basename "$1")}
    cp "$1" "$rd/usr/bin/$name"
    strip -s "$rd/usr/bin/$name" 2>/dev/null || true
    for lib in $(ldd "$1" | grep -o '/[^ ]*'); do
        mkdir -p "$rd$(dirname "$lib")"
        cp -L "$lib" "$rd$lib"
    done
}
# The kernel's config where a capture looks for it: it says whether interrupts take CPU
# capacity (CONFIG_IRQ_TIME_ACCOUNTING), which replay then follows.
if [ -n "${release:-}" ]; then
    config=$cache/root/boot/config-$release
    [ -z "$kernel" ] || config=$(dirname "$vmlinuz")/.config
    mkdir -p "$rd/boot"
    cp "$config" "$rd/boot/config-$release"
fi
# The guest runs it as sisreplay, whatever --bin named it.
copy_with_libs "$bin" sisreplay
copy_with_libs "$(command -v hackbench)"
copy_with_libs "$(command -v perf)"
# periodic TASKS SLEEP_MS RUN_MS: TASKS loops, each sleeping SLEEP_MS (a read timing out
# on a FIFO no one writes, so no sleep process is forked) and then spinning RUN_MS of wall
# time (so a preempted task does not run longer), until killed.
cat > "$rd/usr/bin/periodic" << 'EOF_PERIODIC'
#!/bin/sh
n=$1; sleep_s=$(($2 / 1000)).$(printf %03d $(($2 % 1000))); run_us=$(($3 * 1000))
[ -p /tmp/periodic.fifo ] || mkfifo /tmp/periodic.fifo
task() {
    exec 3<> /tmp/periodic.fifo
    while :; do
        read -t "$sleep_s" x <&3
        t=$EPOCHREALTIME; now=$((${t%.*} * 1000000 + 1${t#*.} - 1000000)); end=$((now + run_us))
        while [ $now -lt $end ]; do
            t=$EPOCHREALTIME; now=$((${t%.*} * 1000000 + 1${t#*.} - 1000000))
        done
    done
}
i=0
while [ $i -lt "$n" ]; do task & i=$((i + 1)); done
wait
EOF_PERIODIC
chmod +x "$rd/usr/bin/periodic"
[ -n "$kernel" ] || for m in virtio/virtio_ring virtio/virtio virtio/virtio_pci_legacy_dev \
         virtio/virtio_pci_modern_dev virtio/virtio_pci block/virtio_blk; do
    f=$(ls "$moddir/drivers/$m.ko"* 2>/dev/null | head -1)
    [ -n "$f" ] || { echo "rig.sh: module $m not in $moddir" >&2; exit 1; }
    case $f in
        *.xz) xz -dc "$f" > "$rd/modules/$(basename "$m").ko" ;;
        *.zst) zstd -qdc "$f" > "$rd/modules/$(basename "$m").ko" ;;
        *) cp "$f" "$rd/modules/$(basename "$m").ko" ;;
    esac
done

{
    echo '#!/bin/busybox sh'
    echo '/bin/busybox --install -s /bin'
    echo 'export PATH=/usr/bin:/bin'
    echo 'mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev'
    echo 'mount -t tmpfs tmp /tmp; mount -t tmpfs out /out'
    echo 'mount -t debugfs debugfs /sys/kernel/debug; mount -t tracefs tracefs /sys/kernel/tracing'
    [ -n "$kernel" ] ||
        echo 'for m in virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci virtio_blk; do insmod /modules/$m.ko; done'
    [ -z "$kstate" ] || printf '%s\n' "$kstate"
    echo 'F=/sys/kernel/debug/sched/features'
    # Whether the kernel has feature $1 (listed as $1 or NO_$1).
    echo 'has() { grep -qE "(^| )(NO_)?$1( |\$)" $F; }'
    echo 'echo "rig: $(uname -r), $(nproc) CPUs, features: $(cat $F)"'
    echo 'cat /sys/kernel/debug/sched/features > /out/features-default.txt'
    # 6.3+ lists sched/domains/ in debugfs only with sched/verbose on.
    echo 'echo Y > /sys/kernel/debug/sched/verbose'
    echo 'ls /sys/kernel/debug/sched/domains/cpu0 > /out/domains.txt 2>&1'
    echo 'cat /sys/kernel/debug/sched/domains/cpu0/domain*/name >> /out/domains.txt 2>&1'
    # The clock source and whether sched_clock was marked stable.
    echo '{ cat /sys/devices/system/clocksource/clocksource0/current_clocksource; dmesg | grep -i -E "tsc|sched_clock|clocksource"; } > /out/clock.txt 2>&1'
    # Which of the idle search's functions a probe can reach (out of line, traceable).
    echo 'T=/sys/kernel/tracing; for f in select_task_rq_fair select_idle_sibling select_idle_cpu select_idle_core select_idle_smt; do'
    echo '  k=$(grep -cE " $f(\.[a-z]+\.[0-9]+)?$" /proc/kallsyms); t=$(grep -cE "^$f(\.[a-z]+\.[0-9]+)?( |$)" $T/available_filter_functions)'
    echo '  echo "$f kallsyms=$k traceable=$t"; done > /out/probeable.txt'
    for s in "${settings[@]}"; do
        name=${s%%:*}; feats=${s#*:}
        [[ ",$only_settings," == *",$name,"* ]] || continue
        for w in "${workloads[@]}"; do
            wname=${w%%:*}; rest=${w#*:}; probe=${rest%%:*}; wcmd=${rest#*:}
            [[ ",$only_workloads," == *",$wname,"* ]] || continue
            for b in $backends; do
                bundle=rig-$topology-$wname-$name${tag:+-$tag}-$b
                probe_arg=""
                [ "$search" = 1 ] && probe_arg="--search-latency ${probes:-$probe}"
                # The features the setting turns on; it is skipped if the kernel lacks one.
                on=$(for f in $feats; do [[ $f == NO_* ]] || echo "$f"; done | tr '\n' ' ')
                [ -z "$on" ] || echo "if $(for f in $on; do echo -n "has $f && "; done | sed 's/ && $//'); then"
                echo "for f in $feats; do has \${f#NO_} && echo \$f > \$F; done"
                echo "echo \"rig: $bundle: \$(cat \$F | tr ' ' '\n' | grep SIS_ | tr '\n' ' ')\""
                [ -z "$kstate" ] || echo 'echo > $T/instances/kstate/trace; echo 1 > $T/instances/kstate/events/kstate/enable'
                echo "sisreplay capture --backend $b $probe_arg --duration ${seconds}s --buffer-kb 16384 -o /out/$bundle -- $wcmd > /out/$bundle.log 2>&1 || echo \"rig: $bundle failed\""
                echo "killall -q perf hackbench periodic; tail -3 /out/$bundle.log"
                [ -z "$kstate" ] || echo "echo 0 > \$T/instances/kstate/events/kstate/enable; [ ! -d /out/$bundle ] || gzip -1 < \$T/instances/kstate/trace > /out/$bundle/kernel-state.txt.gz"
                [ -z "$on" ] || echo "else echo \"rig: $bundle skipped: the kernel has no ${on% }\"; fi"
            done
        done
    done
    echo 'for f in SIS_UTIL NO_SIS_PROP DELAY_DEQUEUE; do has ${f#NO_} && echo $f > $F; done'
    echo 'cd /out && tar -cf /dev/vda . && sync || echo "rig: writing results to /dev/vda failed"'
    echo 'echo "rig: done"'
    echo 'poweroff -f'
} > "$rd/init"
chmod +x "$rd/init"
(cd "$rd" && find . | cpio -o -H newc --quiet | gzip -1) > "$work/initrd.gz"
echo "rig.sh: kernel ${release:-$kernel (not built)}, initramfs $(du -h "$work/initrd.gz" | cut -f1), topology $topology, backends $backends" >&2
if [ $check = 1 ]; then
    # The guest runs these: each must be in the initramfs and start there.
    mods=modules/virtio_blk.ko
    [ -z "$kernel" ] || mods=
    for f in init usr/bin/sisreplay usr/bin/hackbench usr/bin/perf usr/bin/periodic bin/busybox $mods; do
        [ -e "$rd/$f" ] || { echo "rig.sh: --check: $f missing from the initramfs" >&2; exit 1; }
    done
    chroot "$rd" /usr/bin/sisreplay --version > /dev/null ||
        { echo "rig.sh: --check: sisreplay does not start inside the initramfs" >&2; exit 1; }
    # shellcheck disable=SC2086
    qemu-system-x86_64 -accel tcg $smp -m 2G $numa -display none -S -nodefaults \
        -daemonize -pidfile "$work/q.pid" > /dev/null 2>&1 &&
        kill "$(cat "$work/q.pid")" ||
        { echo "rig.sh: --check: QEMU rejects the $topology topology" >&2; exit 1; }
    echo "rig.sh: --check: inputs are in place; not booting" >&2
    exit 0
fi

truncate -s 1G "$work/out.img"
mem="-m 2G"
start=$(date +%s)
mkdir -p "$out/$topology"
# shellcheck disable=SC2086
timeout "$guest_timeout" qemu-system-x86_64 -accel tcg,thread=multi $smp $mem $numa \
    -kernel "$vmlinuz" -initrd "$work/initrd.gz" \
    -append "$append" \
    -drive file="$work/out.img",format=raw,if=virtio \
    -display none -serial file:"$out/$topology/console.log" -no-reboot ||
    echo "rig.sh: the guest did not power off within $guest_timeout s (console: $out/$topology/console.log)" >&2
echo "rig.sh: guest ran $(( $(date +%s) - start )) s" >&2
grep '^rig:' "$out/$topology/console.log" >&2 || { echo "rig.sh: /init never ran" >&2; exit 1; }
grep -q '^rig: done' "$out/$topology/console.log" || exit 1
tar -xf "$work/out.img" -C "$out/$topology" || { echo "rig.sh: no results on the disk image" >&2; exit 1; }
ls "$out/$topology"
