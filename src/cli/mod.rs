//! The `sisreplay` command line: parses the arguments, runs the command through the
//! library, prints its output. The binary only calls [`run`] and reports its error.

mod args;
mod capture;
mod compare;
mod import;
mod inputs;
mod replay;
mod show;
mod synth;

use clap::Parser;

use crate::Error;
use args::{Cli, Command};

/// Runs the command the process's arguments name (clap prints help, versions and usage
/// errors itself, and exits).
pub fn run() -> Result<(), Error> {
    match Cli::parse().command {
        Command::Import(a) => import::import(a),
        Command::Capture(a) => capture::capture(a),
        Command::Replay(a) => replay::replay(a),
        Command::Compare(a) => compare::compare(a),
        Command::Report(a) => compare::report(a),
        Command::Fidelity(a) => replay::fidelity(a),
        Command::Machines(a) => show::machines(a),
        Command::Synth(a) => synth::synth(a),
        Command::Simulate(a) => synth::simulate(a),
        Command::Policies(a) => show::policies(a),
        Command::Info(a) => show::info(a),
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "sisreplay", &mut std::io::stdout());
            Ok(())
        }
        Command::Man { command } => show::man_page(command.as_deref()),
        Command::CaptureWatchdog { pid, spool } => {
            crate::capture::watchdog(pid, &spool);
            Ok(())
        }
    }
}
