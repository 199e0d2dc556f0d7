"""Formats the JSON of `sisreplay synth --json` runs (concatenated on stdin) as the
validation tables: per workload, thread count and policy the SIS percentages, scans per
search, throughput and p99 latency; then SIS_UTIL against SIS_PROP."""
import json
import sys

dec = json.JSONDecoder()
text = sys.stdin.read()
rows, i = [], 0
while i < len(text):
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        break
    obj, i = dec.raw_decode(text, i)
    rows.extend(obj)

print("workload        threads  policy    se_eff%  success%  scan/search    units/s   p99 us")
by = {}
for r in rows:
    s, k, d = r["result"], r["result"]["counters"], r["result"]["derived"]
    threads = r["step"]["threads"]
    by[(s["workload"], threads, s["policy"])] = s
    scan = k["scanned"] / max(k["search"], 1)
    p99 = s["latency"]["p99"] / 1e3
    print(
        f"{s['workload']:<15} {threads:>7}  {s['policy']:<8} {d['se_eff']:>8.3f} "
        f"{d['success_rate']:>9.3f} {scan:>12.2f} {s['throughput_per_s']:>10.0f} {p99:>8.1f}"
    )
print()
print("SIS_UTIL against SIS_PROP (vanilla): runqueues scanned, throughput")
for (w, t, p), s in sorted(by.items()):
    if p != "sis_util" or (w, t, "sis_prop") not in by:
        continue
    b = by[(w, t, "sis_prop")]
    scanned = 100 * (s["counters"]["scanned"] - b["counters"]["scanned"]) / max(b["counters"]["scanned"], 1)
    tput = 100 * (s["throughput_per_s"] - b["throughput_per_s"]) / b["throughput_per_s"]
    print(f"{w:<15} {t:>4} threads: scanned {scanned:+7.1f}%  throughput {tput:+7.2f}%")
