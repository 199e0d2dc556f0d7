//! Machine state reconstructed from the event stream, independent of any policy.

pub mod bitset;
pub mod flips;
pub mod llc_idle;
pub mod machine;
pub mod pelt;
pub mod util_est;

pub use machine::{Change, Machine, Topo};
