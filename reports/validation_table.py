"""Sets the simulated runs of make-validation.sh (one `sisreplay synth --json` file per
experiment and load in the directory given) beside the seeds' published tables, row by
row, and says per row whether the simulated change has the seed's direction."""
import json
import pathlib
import sys

LOADS = [28, 56, 84, 112, 140, 168, 196, 224]
GROUPS = [1, 2, 3, 4, 5, 6, 7, 8]

# Seed 000, vanilla (SIS_PROP) se_eff% per load.
SEED000_SE_EFF = {
    "netperf-tcp-rr": [99.978, 99.397, 21.721, 12.500, 8.524, 6.438, 5.397, 4.874],
    "netperf-udp-rr": [99.988, 99.528, 24.219, 13.907, 9.408, 7.095, 5.757, 5.124],
    "tbench": [99.976, 99.222, 19.723, 11.283, 0.0, 0.0, 0.0, 0.0],
    "hackbench:fds=14": [99.991, 99.934, 99.597, 98.378, 27.474, 20.201, 16.423, 13.165],
    "schbench:workers=28": [99.152, 97.844, 96.395, 55.288, 7.004, 3.354, 2.183, 1.653],
}
# Seed 000, SIS_UTIL against vanilla: throughput compare% (schbench: p90 latency change,
# lower is better), at the loads the seed reports.
SEED000_CHANGE = {
    "netperf-tcp-rr": dict(zip(LOADS, [1.14, 0.62, 0.26, 0.29, 0.14, 0.40, 183.40, 188.44])),
    "netperf-udp-rr": dict(zip(LOADS, [1.45, -0.22, 1.72, 0.01, 0.32, 0.91, 191.97, 194.88])),
    "tbench": dict(zip(LOADS, [1.05, 0.36, 0.26, 0.04, 2.98, 2.88, 2.63, 2.60])),
    "hackbench:fds=14": {28: -0.54, 56: 0.89, 112: 0.90, 224: 0.31},
    "schbench:workers=28": {28: -1.7, 56: 1.6, 112: 1.4, 224: 21.0},
}
SEED000_LABEL = {
    "netperf-tcp-rr": "TCP_RR",
    "netperf-udp-rr": "UDP_RR",
    "tbench": "tbench",
    "hackbench:fds=14": "hackbench process-pipe",
    "schbench:workers=28": "schbench",
}
# Seed 001 (Kunpeng 920), TCP_RR throughput change with SIS_UTIL, by threads.
SEED001 = {
    2: dict(zip([16, 32, 64, 128, 256], [0.64, 2.45, 145.52, 25.30, 11.42])),
    1: dict(zip([16, 32, 64, 128, 256], [1.09, 116.84, 14.48, 12.23, 12.01])),
}


def load(d, name):
    p = d / name
    return {r["result"]["policy"]: r["result"] for r in json.loads(p.read_text())}


def pct(a, b):
    return 100.0 * (a - b) / b if b else float("nan")


def direction(seed, sim, noise=1.0):
    """'yes' when both changes point the same way, 'flat' when both are within noise."""
    if abs(seed) < noise and abs(sim) < noise:
        return "flat"
    if abs(seed) < noise:
        return "no (seed flat)"
    if abs(sim) < noise:
        return "no (sim flat)"
    return "yes" if (seed > 0) == (sim > 0) else "NO"


def main():
    d = pathlib.Path(sys.argv[1])
    tally = {}

    def note(key, verdict):
        t = tally.setdefault(key, [0, 0])
        t[0] += verdict in ("yes", "flat")
        t[1] += 1

    print("Seed 000 (SIS_UTIL) on spr-2s112: vanilla's SIS search efficiency, se_eff%")
    print(f"{'case':<24}{'load':>6}{'seed':>9}{'sim sis_prop':>14}{'sim sis_util':>14}")
    for w, seed in SEED000_SE_EFF.items():
        for i, t in enumerate(LOADS):
            r = load(d, f"seed000-{w}-{t}.json")
            label = f"{GROUPS[i]} mthr" if w.startswith("schbench") else (
                f"{GROUPS[i]} grp" if w.startswith("hackbench") else f"{t}")
            print(
                f"{SEED000_LABEL[w]:<24}{label:>6}{seed[i]:>9.3f}"
                f"{r['sis_prop']['derived']['se_eff']:>14.3f}{r['sis_util']['derived']['se_eff']:>14.3f}"
            )
    print()
    print("Seed 000: SIS_UTIL against vanilla, throughput change % (schbench: p90 wakeup")
    print("latency change %, lower is better), and runqueues scanned")
    print(f"{'case':<24}{'load':>6}{'seed':>9}{'sim':>9}{'scanned':>10}  same direction")
    for w, seed in SEED000_CHANGE.items():
        for t in LOADS:
            r = load(d, f"seed000-{w}-{t}.json")
            b, s = r["sis_prop"], r["sis_util"]
            if w.startswith("schbench"):
                sim = pct(s["latency"]["p90"], max(b["latency"]["p90"], 1))
                # The seed's schbench figure is a latency change: positive is worse.
                sim_better, seed_better = -sim, (-seed[t] if t in seed else None)
            else:
                sim = pct(s["throughput_per_s"], b["throughput_per_s"])
                sim_better, seed_better = sim, seed.get(t)
            scanned = pct(s["counters"]["scanned"], max(b["counters"]["scanned"], 1))
            verdict = ""
            seed_txt = ""
            if seed_better is not None:
                verdict = direction(seed_better, sim_better)
                note(SEED000_LABEL[w], verdict)
                seed_txt = f"{seed[t]:+.2f}"
            print(f"{SEED000_LABEL[w]:<24}{t:>6}{seed_txt:>9}{sim:>+9.2f}{scanned:>+9.1f}%  {verdict}")
    r = load(d, "seed000-netperf-tcp-rr-224.json")
    scanned = pct(r["sis_util"]["counters"]["scanned"], r["sis_prop"]["counters"]["scanned"])
    print(f"\nTCP_RR at 224 threads, sis_scanned: seed -87.9 %, sim {scanned:+.1f} %")
    locks = {p: r[p]["rq_lock_waits"] for p in ("sis_prop", "sis_util")}
    remote = {p: r[p]["remote_rq_locks"] for p in ("sis_prop", "sis_util")}
    print(
        f"TCP_RR at 224 threads, rq lock contention: seed -13 % (perf profile); sim: remote "
        f"rq locks {remote['sis_prop']} -> {remote['sis_util']}, waits {locks['sis_prop']} -> "
        f"{locks['sis_util']}"
    )
    print()
    print("Seed 001 (SIS_UTIL tested on Kunpeng 920): TCP_RR throughput change %")
    print(f"{'CPUs':<24}{'threads':>8}{'seed':>9}{'sim':>9}{'scanned':>10}  same direction")
    for nodes, seed in SEED001.items():
        for t, v in seed.items():
            r = load(d, f"seed001-{nodes}-netperf-tcp-rr-{t}.json")
            b, s = r["sis_prop"], r["sis_util"]
            sim = pct(s["throughput_per_s"], b["throughput_per_s"])
            scanned = pct(s["counters"]["scanned"], max(b["counters"]["scanned"], 1))
            verdict = direction(v, sim)
            note("Kunpeng TCP_RR", verdict)
            label = "node 0 (32)" if nodes == 1 else "nodes 0-1 (64)"
            print(f"{label:<24}{t:>8}{v:>+9.2f}{sim:>+9.2f}{scanned:>+9.1f}%  {verdict}")
    print()
    print("Seed 002 (newidle balance kept off NUMA domains) on hygon-384, hackbench -g 4")
    r = load(d, "seed002-hackbench-160.json")
    print(f"{'policy':<14}{'loops/s':>12}{'p99 us':>9}  newidle pulls by level; balance moves across nodes")
    for p in ("sis_util", "newidle_llc"):
        s = r[p]
        pulls = ", ".join(f"{k} {v}" for k, v in sorted(s["newidle_pulls"].items())) or "none"
        print(
            f"{p:<14}{s['throughput_per_s']:>12.0f}{s['latency']['p99'] / 1e3:>9.1f}  {pulls}; "
            f"{s['balance_migrations']['cross_numa']}"
        )
    print(
        f"newidle_llc against the default: throughput "
        f"{pct(r['newidle_llc']['throughput_per_s'], r['sis_util']['throughput_per_s']):+.2f} %"
    )
    print()
    print("Rows where the simulated change has the seed's direction (or both are flat):")
    for k, (ok, n) in tally.items():
        print(f"  {k:<24}{ok} of {n}")


main()
