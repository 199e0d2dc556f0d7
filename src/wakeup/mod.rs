//! The kernel's wakeup path that decision replay and the closed-loop simulation share, so
//! both place a wakeup through the same code: select_task_rq_fair's choice of a target
//! (wake_wide, wake_affine), the select_idle_sibling walk every policy runs under its own
//! budget, and the periodic LLC balance whose statistics the policies read.
//!
//! Policies themselves live in `policy/`: what they decide is how far the walk may scan
//! and which idle CPUs it may take.

pub mod affine;
pub mod balance;
pub mod sis;
pub mod target;
