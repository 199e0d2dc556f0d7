//! Reads every event of a trace and prints the count: the inner loop of every command,
//! handy for profiling (`perf record target/release/examples/readall FILE`).
use sisreplay::trace;
fn main() {
    let path = std::env::args().nth(1).expect("usage: readall FILE");
    let mut src = trace::open(std::path::Path::new(&path)).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let mut n = 0u64;
    let mut batch = Vec::with_capacity(4096);
    loop {
        batch.clear();
        match src.next_batch(&mut batch, 4096) {
            Ok(0) => break,
            Ok(k) => n += k as u64,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(2)
            }
        }
        std::hint::black_box(&batch);
    }
    println!("{n}");
}
