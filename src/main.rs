//! The `sisreplay` binary: the command line lives in the library ([`sisreplay::cli`]).

use std::process::ExitCode;

fn main() -> ExitCode {
    // Output piped into `head` ends quietly, as with other command-line tools, instead of
    // a panic on the failed write.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    match sisreplay::cli::run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sisreplay: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
