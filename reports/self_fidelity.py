#!/usr/bin/env python3
"""Writes reports/self-fidelity.txt: the closed loop's self-fidelity gate over every
committed capture. Each capture is re-run by `sisreplay simulate` under its traced
kernel's own policy and set against the trace (the gate's 8 checks), once per seed of the
re-runs' draws (the wakeup delays taken from the trace). How far the figures move from
one seed to the next is how large a change in the model has to be before the gate can
tell it from chance.

Usage: reports/self_fidelity.py [SISREPLAY] [SEEDS]  (default target/release/sisreplay,
seeds 1,2,3). Standard library only.
"""

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECKS = [
    ("wakeups", "wakeups"),
    ("moved off prev", "moved"),
    ("cross-LLC", "xLLC"),
    ("busy %", "busy"),
    ("latency p50 ns", "p50"),
    ("latency p99 ns", "p99"),
    ("tasks' CPU time ±10 %", "CPU time"),
    ("tasks finished", "finished"),
]


def bundles():
    """Every committed bundle under traces/, by its path there."""
    return sorted(p.parent for p in (ROOT / "traces").rglob("meta.json"))


def workload(name):
    for w in ("hackbench", "pingpong", "periodic"):
        if w in name:
            return w
    return "other"


def gate(binary, bundle, seed):
    """The gate's checks of one re-run, by name; None if the bundle cannot be re-run."""
    # The traced policy is re-run first whatever is asked; sis_util is the cheapest to
    # add where it is not the traced one.
    out = subprocess.run(
        [binary, "simulate", str(bundle), "--policy", "sis_util", "--seed", str(seed),
         "--jobs", "1", "--json"],
        capture_output=True, text=True)
    if out.returncode != 0:
        print(f"{bundle}: {out.stderr.strip()}", file=sys.stderr)
        return None
    r = json.loads(out.stdout)
    return {c["name"]: c for c in r["self_fidelity"]["checks"]}


def missed(check):
    """Missed: outside its tolerance, by more than its counts' noise (see simulate.rs,
    too_few_to_judge)."""
    return not check["pass"] and not check.get("too_few", False)


def ratio(check, name):
    t, r = check["trace"], check["rerun"]
    if name == "busy %":
        return f"{r - t:+.1f}"
    if name in ("tasks' CPU time ±10 %", "tasks finished"):
        return f"{int(r)}/{int(t)}"
    return "–" if not t else f"x{r / t:.2f}"


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "target/release/sisreplay")
    seeds = [int(s) for s in (sys.argv[2] if len(sys.argv) > 2 else "1,2,3").split(",")]
    paths = bundles()
    jobs = [(b, s) for s in seeds for b in paths]
    with ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
        found = list(pool.map(lambda j: gate(binary, *j), jobs))
    runs = {j: g for j, g in zip(jobs, found) if g is not None}
    names = {b: str(b.relative_to(ROOT / "traces")) for b in paths}
    done = [b for b in paths if all((b, s) in runs for s in seeds)]

    lines = [
        "Closed-loop self-fidelity over every committed capture: each re-run under its",
        "traced kernel's own policy against the trace (sisreplay simulate), once per seed",
        "of the re-runs' draws; regenerate with python3 reports/self_fidelity.py.",
        "",
        f"{len(done)} captures; seeds {', '.join(map(str, seeds))}.",
        "",
        "Checks missed, by seed (a difference smaller than the spread between seeds is",
        "chance, not the model). A count outside its tolerance is too few to judge where",
        "the trace's and the re-run's counts differ by no more than twice √(their sum)",
        "(a count of n varies by about √n between runs of one workload); the checks too",
        "few to judge, and the misses had every count been judged, follow:",
        "",
        f"{'check':24}" + "".join(f"{'seed ' + str(s):>9}" for s in seeds),
    ]
    by_seed = {s: [runs[(b, s)] for b in done] for s in seeds}

    def row(label, count):
        """A row of `count(gates)` for each seed's gates."""
        return f"{label:24}" + "".join(f"{count(by_seed[s]):9d}" for s in seeds)

    for name, _ in CHECKS:
        lines.append(row(name, lambda gs: sum(1 for g in gs if missed(g[name]))))
    lines += [
        row("all checks", lambda gs: sum(1 for g in gs for c in g.values() if missed(c))),
        row("captures missing none",
            lambda gs: sum(1 for g in gs if not any(missed(c) for c in g.values()))),
        row("too few to judge",
            lambda gs: sum(1 for g in gs for c in g.values() if c.get("too_few"))),
        row("missed if all judged",
            lambda gs: sum(1 for g in gs for c in g.values() if not c["pass"])),
    ]
    lines += ["", "Checks missed by workload, by seed:", ""]
    for w in ("hackbench", "pingpong", "periodic", "other"):
        group = [b for b in done if workload(names[b]) == w]
        if not group:
            continue
        counts = [sum(1 for b in group for c in runs[(b, s)].values() if missed(c))
                  for s in seeds]
        lines.append(f"{w + ' (' + str(len(group)) + ')':24}" + "".join(f"{n:9d}" for n in counts))

    # The median re-run/trace ratio of each check by workload, at the first seed: which
    # way the misses lean.
    lines += ["", f"Median re-run/trace by workload (seed {seeds[0]}; busy in points):", ""]
    head = f"{'workload':12}" + "".join(f"{short:>9}" for _, short in CHECKS[:6])
    lines.append(head)
    for w in ("hackbench", "pingpong", "periodic", "other"):
        group = [runs[(b, seeds[0])] for b in done if workload(names[b]) == w]
        if not group:
            continue
        row = f"{w:12}"
        for name, _ in CHECKS[:6]:
            vals = []
            for g in group:
                t, r = g[name]["trace"], g[name]["rerun"]
                if name == "busy %":
                    vals.append(r - t)
                elif t:
                    vals.append(r / t)
            vals.sort()
            if not vals:
                row += f"{'–':>9}"
            elif name == "busy %":
                row += f"{vals[len(vals) // 2]:+9.1f}"
            else:
                row += f"{'x' + format(vals[len(vals) // 2], '.2f'):>9}"
        lines.append(row)

    lines += [
        "",
        f"Per capture, seed {seeds[0]}: re-run/trace of each check (busy in points, CPU time",
        "and finished as tasks that pass), and checks not missed with each seed:",
        "",
    ]
    width = max(len(n) for n in names.values())
    lines.append(f"{'capture':{width}}" + "".join(f"{short:>9}" for _, short in CHECKS)
                 + "  passed")
    for b in done:
        g = runs[(b, seeds[0])]
        row = f"{names[b]:{width}}"
        for name, _ in CHECKS:
            mark = "~" if g[name].get("too_few") else "" if g[name]["pass"] else "!"
            cell = ratio(g[name], name) + mark
            row += f"{cell:>9}"
        passed = [str(sum(1 for c in runs[(b, s)].values() if not missed(c))) for s in seeds]
        lines.append(row + "  " + "/".join(passed))
    lines += ["", "! marks a check missed, ~ a count too few to judge (passed counts it)."]
    failed = [names[b] for b in paths if b not in done]
    if failed:
        lines += ["", "Not re-run (see stderr): " + ", ".join(failed)]
    (ROOT / "reports" / "self-fidelity.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
