//! The one error a command ends with: any of the library's errors, or a usage mistake,
//! with the exit status the manual documents for it.

use std::path::PathBuf;

use crate::atomic::WriteError;
use crate::bundle::BundleError;
use crate::capture::CaptureError;
use crate::compare::CompareError;
use crate::policy::PolicyError;
use crate::replay::ReplayError;
use crate::report::ReportError;
use crate::simulate::SimulateError;
use crate::synth::steps::SynthError;
use crate::topology::TopologyError;
use crate::trace::TraceError;

/// Exit status for bad input or usage.
pub const EXIT_INPUT: u8 = 2;
/// Exit status of a capture whose workload failed on its own (the bundle is written).
pub const EXIT_WORKLOAD: u8 = 1;
/// Exit status of an import stopped by SIGINT, SIGTERM or SIGHUP (128 + SIGINT, as a
/// shell reports it).
pub const EXIT_INTERRUPTED: u8 = 130;

/// Why a command failed. Printed as one line after `sisreplay: `.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Arguments that do not fit together, or name nothing that exists.
    #[error("{0}")]
    Usage(String),
    /// A trace that cannot be read.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// A bundle that cannot be read or written.
    #[error(transparent)]
    Bundle(#[from] BundleError),
    /// A replay that cannot run.
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// A replay of one of several inputs that cannot run.
    #[error("{}: {source}", path.display())]
    ReplayOf {
        /// The input.
        path: PathBuf,
        /// What went wrong with it.
        source: ReplayError,
    },
    /// A comparison that cannot be made.
    #[error(transparent)]
    Compare(#[from] CompareError),
    /// A report that cannot be built.
    #[error(transparent)]
    Report(#[from] ReportError),
    /// A capture that cannot start or finish.
    #[error(transparent)]
    Capture(#[from] CaptureError),
    /// A policy that does not exist or is given wrong parameters.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// A machine description that cannot be read.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// A synthetic run that cannot be made.
    #[error(transparent)]
    Synth(#[from] SynthError),
    /// A closed-loop re-run that cannot be made.
    #[error(transparent)]
    Simulate(#[from] SimulateError),
    /// An output file that cannot be replaced.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// An output file that cannot be created.
    #[error("{}: {source}", path.display())]
    Create {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Standard output cannot be written.
    #[error(transparent)]
    Stdout(std::io::Error),
    /// The handler that lets a signal stop a command cleanly cannot be installed.
    #[error("cannot install the signal handler: {0}")]
    Signal(#[from] ctrlc::Error),
    /// An import stopped by a termination signal; nothing was written.
    #[error("import interrupted by a signal; {} was not written", .0.display())]
    Interrupted(PathBuf),
    /// Some traces of a fleet could not be replayed; each was named as it failed, and
    /// the others' results are written.
    #[error("{failed} of {of} traces could not be replayed (each is named above); the others' results are written")]
    Fleet {
        /// How many failed.
        failed: usize,
        /// How many there were.
        of: usize,
    },
    /// A captured workload that failed on its own; its trace is written.
    #[error("the workload `{command}` {how}; the trace is written")]
    Workload {
        /// The workload's command line.
        command: String,
        /// How it ended: "exited with status 3", "was killed by signal 9".
        how: String,
    },
}

impl Error {
    /// The process's exit status for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Interrupted(_) => EXIT_INTERRUPTED,
            Error::Workload { .. } => EXIT_WORKLOAD,
            _ => EXIT_INPUT,
        }
    }
}
