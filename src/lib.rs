//! sisreplay captures Linux scheduler traces and replays them through counterfactual
//! models of the kernel's idle-CPU search (select_idle_sibling and its scan budgets), to
//! say what each policy would have done on the same wakeups.
//!
//! The path of a trace through the crate:
//!
//! - **Reading**: [`trace`] decodes trace.dat, perf.data and trace text into [`trace::Event`]s;
//!   [`capture`] records them on this machine; [`bundle`] stores them as Parquet with
//!   typed provenance; [`input`] opens either kind; [`derived`] turns the event stream
//!   into run slices per CPU and wakeup latencies, for every command that needs them.
//! - **The kernel model**: [`topology`] and [`presets`] describe machines; [`state`]
//!   follows the traced machine event by event; [`wakeup`] is the kernel's wakeup path
//!   (wake_affine, select_idle_sibling, periodic balance) shared by replay and
//!   simulation; [`policy`] holds the idle-search policies as a registry.
//! - **Decision replay**: [`replay`] asks every policy at every traced wakeup and
//!   [`metrics`] counts what they did, with the fidelity of the traced kernel's own
//!   policy; [`info`] summarises a trace.
//! - **Closed loop**: [`sim`] is a discrete-event simulator of tasks on a machine,
//!   [`synth`] its workload models and [`simulate`] its re-run of a traced workload.
//! - **Output**: [`compare`] builds the seeds' tables with paired statistics and
//!   [`report`] the HTML, text and JSON reports.
//!
//! The command line is [`cli::run`]; every command ends in one [`Error`].
#![deny(missing_docs)]

pub mod abi;
pub mod atomic;
pub mod bundle;
pub mod capture;
pub mod cli;
pub mod compare;
pub mod derived;
pub mod error;
pub mod info;
pub mod input;
pub mod metrics;
pub mod pid_table;
pub mod policy;
pub mod presets;
pub mod replay;
pub mod report;
pub mod sim;
pub mod simulate;
pub mod state;
pub mod synth;
pub mod topology;
pub mod trace;
pub mod wakeup;

mod parallel;
mod stale;

pub use error::Error;
