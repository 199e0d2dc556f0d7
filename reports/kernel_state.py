"""The kernel's own wake_wide inputs against replay's, on captures that recorded them.

A capture made with `traces/rig/rig.sh --kernel-state` holds, beside its events,
BUNDLE/kernel-state.txt.gz: at every select_task_rq_fair call the woken task's
wakee_flips and the waking task's (with its last halving and last wakee, so that
record_wakee can be applied as the kernel does). This sets replay's values (the
`waker_flips` and `wakee_flips` of `replay --decisions`, flips before the trace fitted as
by default) beside the kernel's, wakeup by wakeup, and says how often wake_wide decided
alike; where the probe read them, SIS_UTIL's budget beside the kernel's nr_idle_scan, and
the woken task's util_avg against PELT run over the trace's own times and its last
update against its sleep in the trace (whether the kernel's scheduler clock kept to the
trace's); where a second probe recorded the periodic
balances (find_busiest_group), which CPU balanced the LLC and when, against the rules
replay balances by, and whether SIS_UTIL's formula over what that balance read gives the
nr_idle_scan the next call sees.

    python3 reports/kernel_state.py [--flips-before-trace X] BUNDLE...
    (SISREPLAY= the binary, default target/release/sisreplay)
"""

import bisect
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import polars as pl

LINE = re.compile(r"\s*.+?-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): select: \(\S+\) (.*)")
BALANCE = re.compile(r"\s*.+?-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): balance: \(\S+\) (.*)")
# enum cpu_idle_type
CPU_IDLE, CPU_NOT_IDLE, CPU_NEWLY_IDLE = 0, 1, 2
WF_TTWU = 0x08
HZ = 250
# PELT's y: a contribution halves in 32 periods of 1024 us.
PELT_Y = 0.5 ** (1 / 32)
PELT_PERIOD_NS = 1024 * 1024


def probe_records(path):
    """Each select_task_rq_fair probe line of a kernel-state file: the waking task, the
    CPU, the time (s) and the fields read, by name."""
    with gzip.open(path, "rt") as f:
        for line in f:
            m = LINE.match(line)
            if m:
                yield int(m[1]), int(m[2]), float(m[3]), dict(x.split("=", 1) for x in m[4].split())


def balance_records(path):
    """Each find_busiest_group probe line: the CPU it ran on, the time (ns) and the fields
    read, by name (none on captures without the balance probe)."""
    with gzip.open(path, "rt") as f:
        for line in f:
            m = BALANCE.match(line)
            if m:
                yield int(m[2]), round(float(m[3]) * 1e9), dict(x.split("=", 1) for x in m[4].split())


def softirqs_due(rows, events_path, llc_of):
    """Of the trace's SCHED softirqs on a CPU whose LLC interval (as replay takes it, idle
    or busy as the CPU's running task says) has passed since the kernel's last LLC
    balance there: how many, and how many of them the kernel balanced in; and the same
    two counts for softirqs on a CPU idle for at most a tick and for one idle longer (by
    then NOHZ has stopped the tick of a CPU with no timer due, so its softirqs come from
    kicks, which balance only when they are balance kicks, not statistics ones)."""
    ev = (
        pl.scan_parquet(events_path)
        .select("ts_ns", "cpu", "event", "vec", "next_pid")
        .filter((pl.col("event") == "sched_switch") | ((pl.col("event") == "softirq_entry") & (pl.col("vec") == 7)))
        .collect()
    )
    balanced = {}
    for _, t, kv in rows:
        balanced.setdefault(int(kv["dst"]), []).append(t)
    curr, idle_from, due, taken = {}, {}, 0, 0
    by_idle = {"a tick or less": [0, 0], "longer": [0, 0]}
    for t, cpu, event, next_pid in ev.select("ts_ns", "cpu", "event", "next_pid").iter_rows():
        if event == "sched_switch":
            if next_pid == 0 and curr.get(cpu, 1) != 0:
                idle_from[cpu] = t
            curr[cpu] = next_pid
            continue
        ts = balanced.get(cpu, [])
        i = bisect.bisect_left(ts, t)
        if i == 0:
            continue
        # The kernel's balance in this softirq, if it ran one (within 1 ms of its entry).
        here = i < len(ts) and ts[i] - t < 1_000_000
        w = len(llc_of[cpu])
        busy = curr.get(cpu, 0) != 0
        interval = (16 * w - 1000 // HZ if busy else w) * 1_000_000
        if t - ts[i - 1] >= interval:
            due += 1
            taken += here
            if not busy and cpu in idle_from:
                counts = by_idle["a tick or less" if t - idle_from[cpu] <= 1_000_000_000 // HZ else "longer"]
                counts[0] += 1
                counts[1] += here
    return due, taken, by_idle


def balance_check(balances, records, llcs, span, events_path):
    """The LLC's periodic balances (its domain's span, not newly idle) within the trace's
    `span` (first, last ns): how many ran on the balancing CPU itself and how many on
    behalf of a tickless one, by whether that CPU was idle at its tick; the jiffies since
    the domain's last balance against the interval replay takes (the LLC's weight in
    ms idle, 16 times that less a jiffy busy); and whether SIS_UTIL's formula over what
    the balance read gives the nr_idle_scan of the next select_task_rq_fair call. None
    without the balance probe."""
    weight = {len(c) for c in llcs.values()}
    llc_of = {c: cpus for cpus in llcs.values() for c in cpus}
    rows = [
        (cpu, t, kv)
        for cpu, t, kv in balances
        if int(kv["w"]) in weight and int(kv["idle"]) != CPU_NEWLY_IDLE and span[0] <= t <= span[1]
    ]
    if not rows:
        return None
    own = sum(1 for cpu, _, kv in rows if cpu == int(kv["dst"]))
    idle = sum(1 for _, _, kv in rows if int(kv["idle"]) == CPU_IDLE)
    jiffy_ms = 1000 // HZ
    early = 0
    for _, _, kv in rows:
        w = len(llc_of[int(kv["dst"])])
        busy = int(kv["idle"]) != CPU_IDLE
        interval = (16 * w - jiffy_ms if busy else w) // jiffy_ms
        early += int(kv["jif"]) - int(kv["lb"]) < interval
    # The select_task_rq_fair calls that read nr_idle_scan, in time order.
    calls = sorted(((round(ts * 1e9), kv) for _, _, ts, kv in records if "s0" in kv), key=lambda c: c[0])
    times = [t for t, _ in calls]
    after = [kv for _, kv in calls]
    valid = checked = 0
    for _, t, kv in rows:
        d = int(kv["dst"])
        cpus = llc_of[d]
        su = sum(min(1024, max(int(kv[f"v{c}"]), int(kv[f"e{c}"]) & ~1)) for c in cpus)
        i = bisect.bisect_right(times, t)
        if i < len(times) and f"s{d}" in after[i]:
            checked += 1
            valid += nr_idle_scan(su, len(cpus)) == int(after[i][f"s{d}"])
    n = len(rows)
    due, taken, by_idle = softirqs_due(rows, events_path, llc_of)
    idle_split = "; ".join(f"on a CPU idle {k}, {b} of {d}" for k, (d, b) in by_idle.items())
    return (
        f"  LLC balances in the trace: {n}, {100 * own / n:.1f} % on the balancing CPU itself"
        f" ({n - own} on behalf of a tickless one), {100 * idle / n:.1f} % by a CPU idle at its"
        f" tick; {100 * early / n:.1f} % came sooner than replay's interval allows (jiffies);"
        f" SIS_UTIL's formula over what the balance read is the next call's nr_idle_scan on"
        f" {valid} of {checked}; of the trace's {due} SCHED softirqs on a CPU whose interval"
        f" had passed since its last balance, the kernel balanced in {taken} ({idle_split})"
    )


def kernel_rows(records):
    """One row per wakeup selection: time (us), waker, wakee, the flips wake_wide
    compared (the waker's after record_wakee, as the probe reads them before it), and
    each CPU's LLC's nr_idle_scan where the probe read it."""
    rows = []
    for waker, cpu, ts, kv in records:
        if int(kv["wf"]) & WF_TTWU == 0:
            continue
        wakee, jif = int(kv["gpid"]), int(kv["jif"])
        flips, decay, last = int(kv[f"f{cpu}"]), int(kv[f"d{cpu}"]), int(kv[f"w{cpu}"])
        if jif > decay + HZ:
            flips >>= 1
        if last != wakee:
            flips += 1
        cpus = sum(1 for k in kv if k[0] == "l" and k[1:].isdigit())
        scan = [int(kv[f"s{c}"]) for c in range(cpus)] if "s0" in kv else None
        rows.append((round(ts * 1e6), waker, wakee, flips, int(kv["pf"]), scan))
    return pl.DataFrame(
        rows,
        schema=["us", "k_waker", "pid", "k_waker_flips", "k_wakee_flips", "k_nr_idle_scan"],
        orient="row",
    )


def nr_idle_scan(sum_util, weight, pct=117):
    """update_idle_cpu_scan's budget for an LLC of `weight` CPUs whose cpu_util_cfs sum
    to `sum_util` (integer arithmetic, as fair.c of 6.1)."""
    x = sum_util // weight
    tmp = min(x * x * pct * pct // (10000 * 1024), 1024)
    return (1024 - tmp) * weight // 1024


def budget_check(records, llcs):
    """Where the probe read every CPU's util_avg (v), util_est.enqueued (e) and its LLC's
    nr_idle_scan (s): at each change of an LLC's nr_idle_scan, whether SIS_UTIL's formula
    over the LLC's utilisation at the next call gives the new value, from util_avg alone
    and from cpu_util_cfs (the larger of the two, as replay takes it). None without them."""
    counts = {}
    last = {}
    for _, _, _, kv in records:
        if "s0" not in kv:
            return None
        for llc, cpus in llcs.items():
            now = int(kv[f"s{cpus[0]}"])
            if llc in last and now != last[llc]:
                avg = sum(int(kv[f"v{c}"]) for c in cpus)
                cfs = sum(min(1024, max(int(kv[f"v{c}"]), int(kv[f"e{c}"]) & ~1)) for c in cpus)
                n, a, c = counts.get(llc, (0, 0, 0))
                w = len(cpus)
                counts[llc] = (n + 1, a + (nr_idle_scan(avg, w) == now), c + (nr_idle_scan(cfs, w) == now))
            last[llc] = now
    return counts


def task_util_check(records, events_path):
    """Where the probe read the woken task's util_avg (pu): for each task, from one wakeup
    to its next with exactly one sleep between, the kernel's util at the second sleep
    against PELT run from the first over the trace's own run and sleep times (running
    where the trace shows it switched in, decaying elsewhere; continuous, so within a few
    units of the kernel's arithmetic), by whether the task was preempted or migrated
    between. None without the field; the events are read only when it is there."""
    if not records or "pu" not in records[0][3]:
        return None
    wakes = {}
    for _, _, ts, kv in records:
        if int(kv["wf"]) & WF_TTWU:
            wakes.setdefault(int(kv["gpid"]), []).append((round(ts * 1e9), int(kv["pu"])))
    ev = (
        pl.scan_parquet(events_path)
        .filter(pl.col("event").is_in(["sched_switch", "sched_migrate_task"]))
        .select("ts_ns", "event", "pid", "prev_pid", "prev_state", "next_pid")
        .collect()
    )
    per_task = {}
    for ts, event, pid, prev, state, nxt in ev.iter_rows():
        if event == "sched_migrate_task":
            per_task.setdefault(pid, []).append((ts, "migrate"))
            continue
        if nxt:
            per_task.setdefault(nxt, []).append((ts, "in"))
        if prev:
            per_task.setdefault(prev, []).append((ts, "preempted" if state == 0 else "sleep"))
    rows = []
    for pid, ws in wakes.items():
        seq = per_task.get(pid, [])
        times = [t for t, _ in seq]
        for (t0, u0), (t1, u1) in zip(ws, ws[1:]):
            # From the sleep before the first wakeup to the one before the second.
            a = bisect.bisect_left(times, t0) - 1
            while a >= 0 and seq[a][1] != "sleep":
                a -= 1
            between = seq[a + 1 : bisect.bisect_left(times, t1)]
            if a < 0 or [k for _, k in between if k == "sleep"] != ["sleep"] or between[-1][1] != "sleep":
                continue
            util, at, running = float(u0), seq[a][0], False
            for t, kind in between:
                decay = PELT_Y ** ((t - at) / PELT_PERIOD_NS)
                util = 1024 - (1024 - util) * decay if running else util * decay
                at, running = t, kind == "in"
            kinds = {k for _, k in between}
            rows.append(("preempted" in kinds, "migrate" in kinds, u1 - util))
    if not rows:
        return None
    d = pl.DataFrame(rows, schema=["preempted", "migrated", "err"], orient="row")
    out = []
    for (pre, mig), g in sorted(d.group_by(["preempted", "migrated"]), key=lambda x: x[0]):
        what = ("preempted" if pre else "not preempted") + (", migrated" if mig else "")
        out.append(
            f"    {what}: {g.height} runs, kernel minus PELT median {g['err'].median():+.1f},"
            f" within 10 on {100 * (g['err'].abs() < 10).mean():.0f} %"
        )
    return "  the woken task's util_avg at its sleep against PELT over the trace's run time:\n" + "\n".join(out)


def clock_check(records, events_path):
    """Where the probe read the woken task's last_update_time (plu): the scheduler clock at
    the dequeue of the task's last sleep against that sleep's sched_switch in the trace. A
    stable sched_clock keeps the two a constant apart (the clocks' offset, taken as the
    median). An unstable one (a guest whose TSC the kernel does not trust) lets a CPU's
    clock run at most a tick past the last tick it took, so a vCPU the host left unrun for
    a while dequeues its task at a stale time, and PELT charges the rest of the run to
    whatever runs when the next tick brings the clock up. None without the field."""
    if not records or "plu" not in records[0][3]:
        return None
    ev = (
        pl.scan_parquet(events_path)
        .filter((pl.col("event") == "sched_switch") & ~pl.col("prev_state").is_in([0, 256]))
        .select("ts_ns", "prev_pid")
        .collect()
    )
    sleeps = {}
    for ts, pid in ev.iter_rows():
        sleeps.setdefault(pid, []).append(ts)
    diffs = []
    for _, _, ts, kv in records:
        s = sleeps.get(int(kv["gpid"]))
        plu, t = int(kv["plu"]), round(ts * 1e9)
        if not s or not plu:
            continue
        i = bisect.bisect_right(s, t) - 1
        if i >= 0 and t - s[i] < 1_000_000_000:
            diffs.append(plu - s[i])
    if not diffs:
        return None
    d = pl.Series(diffs)
    d = d - d.median()
    behind = -d.filter(d < -500_000)
    return (
        f"  the scheduler clock at the woken task's last dequeue against its sleep in the trace"
        f" (less the clocks' offset): within 50 us on {100 * (d.abs() <= 50_000).mean():.1f} %"
        f" of {d.len()} sleeps, behind by more than 0.5 ms on {100 * behind.len() / d.len():.1f} %"
        + (f" (median {behind.median() / 1e6:.1f} ms, most {behind.max() / 1e6:.1f} ms)" if behind.len() else "")
    )


def sis_util_budgets(d, k):
    """Replay's SIS_UTIL budget (the `budget` of `--decisions`) against the kernel's
    nr_idle_scan of the target's LLC, over the searches that reached select_idle_cpu,
    and the agreement with the kernel's CPU where the two are equal and where not. None
    where the probe did not read nr_idle_scan or nothing replayed SIS_UTIL."""
    if k["k_nr_idle_scan"].null_count() == k.height:
        return None
    d = d.filter((pl.col("policy") == "sis_util") & pl.col("budget").is_not_null())
    if d.height == 0:
        return None
    d = d.with_columns(us=pl.col("ts_ns") // 1000).sort("us")
    j = d.join_asof(k.sort("us"), on="us", by="pid", strategy="nearest", tolerance=500)
    j = j.drop_nulls("k_nr_idle_scan").with_columns(
        k_budget=pl.col("k_nr_idle_scan").list.get(pl.col("target")),
        agree=pl.col("cpu") == pl.col("recorded_cpu"),
    )
    same = j.filter(pl.col("budget") == pl.col("k_budget"))
    other = j.filter(pl.col("budget") != pl.col("k_budget"))
    pct = lambda f: 100 * f["agree"].mean() if f.height else float("nan")
    above = other.filter(pl.col("budget") > pl.col("k_budget"))
    return (
        f"  SIS_UTIL's budget the kernel's nr_idle_scan on {100 * same.height / j.height:.1f} % of"
        f" {j.height} searches; the kernel's CPU chosen on {pct(same):.1f} % of those and"
        f" {pct(other):.1f} % of the rest ({(~other['agree']).sum()} of"
        f" {(~j['agree']).sum()} misses); replay's above the kernel's on {above.height}"
        f" ({(~above['agree']).sum()} misses), below on {other.height - above.height}"
    )


def wide(master, slave, llc):
    lo, hi = pl.min_horizontal(master, slave), pl.max_horizontal(master, slave)
    return (lo >= llc) & (hi >= lo * llc)


def compare(bundle, binary, replay_args):
    meta = json.loads((bundle / "meta.json").read_text())
    cpus = meta["topology"]["cpus"]
    llc = {c["cpu"]: sum(1 for d in cpus if d["llc"] == c["llc"]) for c in cpus}
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "d.csv"
        subprocess.run(
            [binary, "replay", str(bundle), "--decisions", str(csv), "--out", tmp, *replay_args],
            check=True, capture_output=True,
        )
        d = pl.read_csv(csv)
    records = list(probe_records(bundle / "kernel-state.txt.gz"))
    k = kernel_rows(records)
    budgets = sis_util_budgets(d, k)
    # Every policy's row of a wakeup carries the same flips.
    d = d.filter(pl.col("policy") == d["policy"][0]).with_columns(us=pl.col("ts_ns") // 1000)
    j = d.sort("us").join_asof(
        k.sort("us"), on="us", by="pid", strategy="nearest", tolerance=500
    ).drop_nulls("k_wakee_flips")
    j = j.with_columns(llc=pl.col("waker_cpu").replace_strict(llc))
    j = j.with_columns(
        m_wide=wide(pl.col("waker_flips"), pl.col("wakee_flips"), pl.col("llc")),
        k_wide=wide(pl.col("k_waker_flips"), pl.col("k_wakee_flips"), pl.col("llc")),
    )
    t0, t1 = j["ts_ns"].min(), j["ts_ns"].max()
    j = j.with_columns(tenth=(pl.col("ts_ns") - t0) * 10 // (t1 - t0 + 1))
    eq = lambda a, b: (pl.col(a) == pl.col(b)).mean() * 100
    total = j.select(
        n=pl.len(),
        wakee=eq("wakee_flips", "k_wakee_flips"),
        waker=eq("waker_flips", "k_waker_flips"),
        wide=eq("m_wide", "k_wide"),
        m_wide=pl.col("m_wide").mean() * 100,
        k_wide=pl.col("k_wide").mean() * 100,
    ).row(0, named=True)
    tenths = j.group_by("tenth").agg(w=eq("m_wide", "k_wide")).sort("tenth")
    before = " ".join(replay_args) or "flips before the trace fitted"
    print(f"{bundle.name} ({before}; {total['n']} of {d.height} wakeups matched)")
    print(
        f"  flips equal to the kernel's: wakee {total['wakee']:.1f} %, waker {total['waker']:.1f} %"
    )
    print(
        f"  wake_wide decided alike: {total['wide']:.1f} % (wide: replay {total['m_wide']:.1f} %,"
        f" kernel {total['k_wide']:.1f} %); by tenth: "
        + " ".join(f"{w:.0f}" for w in tenths["w"])
    )
    if budgets is not None:
        print(budgets)
    llcs = {}
    for c in cpus:
        llcs.setdefault(c["llc"], []).append(c["cpu"])
    util = task_util_check(records, bundle / "events.parquet")
    if util is not None:
        print(util)
    clock = clock_check(records, bundle / "events.parquet")
    if clock is not None:
        print(clock)
    balanced = balance_check(
        list(balance_records(bundle / "kernel-state.txt.gz")),
        records,
        llcs,
        (meta["first_ts_ns"], meta["last_ts_ns"]),
        bundle / "events.parquet",
    )
    if balanced is not None:
        print(balanced)
    checked = budget_check(records, llcs)
    for llc, (n, a, c) in sorted((checked or {}).items()):
        print(
            f"  LLC {llc}: nr_idle_scan changed {n} times; SIS_UTIL's formula at the next call"
            f" gives it from util_avg {100 * a / n:.0f} %, from cpu_util_cfs {100 * c / n:.0f} %"
        )


def main():
    binary = os.environ.get("SISREPLAY", str(Path(__file__).parent.parent / "target/release/sisreplay"))
    warnings.filterwarnings("ignore", message="Sortedness")
    args = sys.argv[1:]
    replay_args = []
    if args[:1] == ["--flips-before-trace"]:
        replay_args, args = args[:2], args[2:]
    bundles = [Path(b) for b in args]
    if not bundles:
        sys.exit(__doc__)
    for b in bundles:
        if not (b / "kernel-state.txt.gz").exists():
            sys.exit(f"{b}: no kernel-state.txt.gz (capture with traces/rig/rig.sh --kernel-state)")
        compare(b, binary, replay_args)


if __name__ == "__main__":
    main()
