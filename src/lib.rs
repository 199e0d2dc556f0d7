pub mod bundle;
pub mod info;
pub mod topology;
pub mod trace;
