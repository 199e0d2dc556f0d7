//! Machine state reconstructed from the event stream, independent of any policy.

pub mod pelt;
