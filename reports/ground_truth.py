#!/usr/bin/env python3
"""Writes reports/ground-truth.txt: every policy model against rig kernels built with that
policy (traces/rig/kernel-*/, Debian 6.1 source, or 6.12 for kernel-6.12-*, with the patch
series its name lists):

1. how often the model picks the CPU the patched kernel picked, on the kernel's own trace;
2. the model's SIS counters against the kernel's own (Mel Gorman's schedstat counters,
   read before and after the workload);
3. the counterfactual: the capture of the same workload on the kernel without the policy
   patch (sis-stats+noinline on the same source, same sched features) replayed with the
   model, against what
   the patched kernel measured.

Usage: reports/ground_truth.py [SISREPLAY]  (default target/release/sisreplay)
Standard library only; run reports/make-reports.sh's build first.
"""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RIG = ROOT / "traces" / "rig"
BASE = "sis-stats+noinline"
AGREE_TARGET = 95.0
COUNTER_TARGET = 2.0
# The name's end of a capture taken while the host starved the guest of CPU time.
STARVED = "-starved-tracefs"
METRICS = [
    ("se_eff", "se_eff %"),
    ("dom_eff", "dom_eff %"),
    ("success_rate", "success %"),
    ("fast_rate", "fast %"),
]


def run(binary, *args):
    out = subprocess.run(
        [str(binary), *map(str, args)], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def per_search(c):
    """Runqueues scanned per search."""
    return c["scanned"] / max(c["search"], 1)


def rel(model, kernel):
    return 100.0 * (model - kernel) / kernel if kernel else 0.0


def source_of(kernel):
    """A kernel directory's source and series: `6.12-SERIES`, or 6.1 when it names none."""
    head, _, rest = kernel.partition("-")
    if head[:1].isdigit():
        return head, rest
    return "6.1", kernel


def bundles():
    for kdir in sorted(RIG.glob("kernel-*")):
        for b in sorted(kdir.glob("*/rig-*")):
            if b.is_dir():
                yield kdir.name[len("kernel-"):], b


def main():
    binary = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "target/release/sisreplay"
    rows = []
    for kernel, b in bundles():
        f = run(binary, "fidelity", b, "--json")[0]
        model = f["as_kernel"]
        replayed = run(binary, "replay", b, "--policy", model, "--json")
        modelled = next(p for p in replayed["policies"] if p["policy"] == model)
        rows.append((kernel, b, f, modelled, replayed["observed"]))

    out = []
    w = out.append
    w("Ground truth: each policy model against a rig kernel built with that policy")
    w("(traces/rig/kernel-*/: Debian 6.1 source, or 6.12 for kernel-6.12-*, with the patch")
    w("series the name lists, under QEMU TCG; regenerate with reports/ground_truth.py). A")
    w("patched kernel's model is the policy its release and sched features select;")
    w("newidle-llc changes load balancing, which decision replay does not model, so its")
    w("kernel is replayed with SIS_UTIL's.")
    w("")
    w(f"1. Agreement with the kernel's own choices (target >= {AGREE_TARGET:.0f} %; ! below)")
    w("")
    w(f"{'kernel':<32} {'trace':<31} {'model':<12} {'wakeups':>7} {'agree%':>7} {'prev%':>6} {'xLLC rec/pred':>13}")
    for kernel, b, f, _, _ in rows:
        fid = f["fidelity"]
        n = max(fid["decisions"], 1)
        agree = 100.0 * fid["agree"] / n
        mark = "!" if agree < AGREE_TARGET else " "
        trace = b.name.removeprefix("rig-").removesuffix("-tracefs")
        w(
            f"{kernel:<32} {trace:<31} {f['as_kernel']:<12} {fid['decisions']:>7} "
            f"{agree:>6.2f}{mark} {100.0 * fid['always_prev'] / n:>6.2f} "
            f"{fid['recorded_cross_llc']:>6}/{fid['predicted_cross_llc']}"
        )
    starved = [(k, b, obs) for k, b, _, _, obs in rows if b.name.endswith(STARVED)]
    if starved:
        w("")
        w(f"Captures named *{STARVED} were taken while the host was saturated: under TCG each")
        w("vCPU is a host thread, and a wakeup onto an idle vCPU waits for that thread to run.")
        w("A ping-pong shows it (its wakees are woken onto idle vCPUs); a saturated hackbench")
        w("hardly does (its wakees wait for busy CPUs either way). Each is kept beside a")
        w("capture of the same kernel and workload on a quiet host:")
        for k, b, obs in starved:
            quiet = next(
                (o for k2, b2, _, _, o in rows
                 if k2 == k and b2.name == b.name.replace(STARVED, "-tracefs")),
                None,
            )
            trace = b.name.removeprefix("rig-").removesuffix(STARVED)
            def said(o):
                lat = o["latency"]
                return (f"{o['wakeups']} wakeups, waking-to-running p50 "
                        f"{lat['p50'] / 1e3:.1f} us, p99 {lat['p99'] / 1e6:.1f} ms")
            w(f"  {trace}: {said(obs)}")
            if quiet:
                w(f"  {' ' * len(trace)}  quiet: {said(quiet)}")
    w("")
    w("2. SIS counters: the model on the kernel's trace against the kernel's own counts")
    w(f"   (relative difference; target within {COUNTER_TARGET:.0f} %, ! beyond). The captures read")
    w("   /proc/schedstat while tracing was on, so both sides count the same wakeups.")
    w("")
    w("   A relative difference of a small count says little: the failed searches are also")
    w("   given as counts, the kernel's and the model's.")
    w("")
    w(f"{'kernel':<32} {'trace':<31} {'search':>8} {'scanned':>8} {'failed':>8} {'scan/search':>11} {'se_eff':>13} {'failed k->m':>15}")
    for kernel, b, f, modelled, _ in rows:
        measured = f.get("kernel_sis")
        trace = b.name.removeprefix("rig-").removesuffix("-tracefs")
        if not measured:
            w(f"{kernel:<32} {trace:<31} (no kernel counters in this capture)")
            continue
        k, m = measured["counters"], modelled["counters"]

        def cell(key):
            r = rel(m[key], k[key])
            return f"{r:>+7.1f}{'!' if abs(r) > COUNTER_TARGET else ' '}"

        ps = rel(per_search(m), per_search(k))
        se_k, se_m = f["kernel_sis_derived"]["se_eff"], modelled["derived"]["se_eff"]
        w(
            f"{kernel:<32} {trace:<31} {cell('search')} {cell('scanned')} {cell('failed')} "
            f"{ps:>+10.1f}{'!' if abs(ps) > COUNTER_TARGET else ' '} "
            f"{se_k:>5.1f}->{se_m:<5.1f} {k['failed']:>7}->{m['failed']:<7}"
        )
    w("")
    w("3. Counterfactual: the same workload captured on the kernel without the policy patch")
    w(f"   ({BASE} on the same source, same sched features) replayed with the patched")
    w("   kernel's model, against what the patched kernel measured (percentage points)")
    w("")
    base = {
        (source_of(k)[0], b.parent.name, b.name): b
        for k, b, _, _, _ in rows
        if source_of(k)[1] == BASE
    }
    w(f"{'kernel':<32} {'trace':<31} {'model':<12} " + " ".join(f"{label:>17}" for _, label in METRICS))
    for kernel, b, f, _, _ in rows:
        source, series = source_of(kernel)
        if series == BASE or not f.get("kernel_sis") or b.name.endswith(STARVED):
            continue
        trace = b.name.removeprefix("rig-").removesuffix("-tracefs")
        unpatched = base.get((source, b.parent.name, b.name))
        model = f["as_kernel"]
        if unpatched is None:
            base_dir = "kernel-" + (BASE if source == "6.1" else f"{source}-{BASE}")
            w(f"{kernel:<32} {trace:<31} {model:<12} (no {base_dir} capture of this topology)")
            continue
        predicted = run(binary, "replay", unpatched, "--policy", model, "--json")
        dp = next(x for x in predicted["policies"] if x["policy"] == model)["derived"]
        dk = f["kernel_sis_derived"]
        cells = " ".join(
            f"{dk[key]:>5.1f}->{dp[key]:>5.1f} {dp[key] - dk[key]:>+5.1f}" for key, _ in METRICS
        )
        w(f"{kernel:<32} {trace:<31} {model:<12} {cells}")
    w("")
    (ROOT / "reports" / "ground-truth.txt").write_text("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
