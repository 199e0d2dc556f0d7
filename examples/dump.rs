use sisreplay::trace::{tracedat::TraceDat, EventSource};
fn main() {
    let p = std::env::args().nth(1).unwrap();
    let mut t = TraceDat::open(std::path::Path::new(&p)).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let mut n = 0;
    while let Some(e) = t.next_event().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    }) {
        if n < 5 {
            println!("{e:?}");
        }
        n += 1;
    }
    println!("{n} events, {:?}", t.stats());
    println!("{:?}", t.info().clock);
}
