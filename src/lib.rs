pub mod bundle;
pub mod capture;
pub mod info;
pub mod topology;
pub mod trace;
