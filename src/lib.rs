pub mod trace;
pub mod topology;
pub mod bundle;
pub mod info;
