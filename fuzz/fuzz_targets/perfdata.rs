//! Any bytes given to the perfdata reader give events or an error, never a panic or a hang.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("sisreplay-fuzz-perfdata-{}", std::process::id()));
    std::fs::write(&path, data).unwrap();
    if let Ok(mut src) = sisreplay::trace::perfdata::PerfData::open(&path) {
        use sisreplay::trace::EventSource;
        let mut batch = Vec::new();
        while let Ok(n) = src.next_batch(&mut batch, 1024) {
            if n == 0 {
                break;
            }
            batch.clear();
        }
    }
});
