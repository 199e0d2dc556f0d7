//! Any bytes as a bundle's events.parquet (beside a valid meta.json of 2 CPUs) give events
//! or an error, never a panic, a hang or an unbounded allocation; every event the reader
//! hands out is in time order and on one of the bundle's CPUs; `info`'s summary from the
//! columns gives a summary or an error too.
#![no_main]
use libfuzzer_sys::fuzz_target;

const META: &str = r#"{"schema_version": 1, "sisreplay_version": "0.1.0",
 "source": {"path": "fuzz", "format": "fuzz"}, "kernel_release": null, "nr_cpus": 2,
 "clock": null, "topology": {"source": "assumed", "cpus": [
  {"cpu": 0, "core": 0, "smt_siblings": [0], "cluster": 0, "llc": 0, "package": 0, "node": 0},
  {"cpu": 1, "core": 1, "smt_siblings": [1], "cluster": 0, "llc": 0, "package": 0, "node": 0}]},
 "topology_assumed": true, "events": 0, "first_ts_ns": null, "last_ts_ns": null,
 "counts": {}, "unknown_events": {}, "lost": {}, "tasks": {}, "extra": {}}"#;

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("sisreplay-fuzz-bundle-{}", std::process::id()));
    if !dir.join("meta.json").exists() {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("meta.json"), META).unwrap();
    }
    std::fs::write(dir.join("events.parquet"), data).unwrap();
    if let Ok(mut b) = sisreplay::bundle::Bundle::open(&dir) {
        use sisreplay::trace::EventSource;
        let mut last = 0;
        while let Ok(Some(e)) = b.next_event() {
            assert!(e.cpu < 2 && e.ts >= last, "an unchecked row came through");
            last = e.ts;
        }
    }
    if let Ok(meta) = sisreplay::bundle::read_meta(&dir) {
        let _ = sisreplay::info::summarise_columns(&dir, &meta, 10);
    }
});
