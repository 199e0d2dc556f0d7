pub mod bundle;
pub mod capture;
pub mod info;
pub mod metrics;
pub mod policy;
pub mod state;
pub mod topology;
pub mod trace;
