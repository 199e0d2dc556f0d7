//! Which trace a report read: beside its path, a hash of its content, so a reviewer can
//! tell whether the file they hold is the one measured, whatever its name now.

use std::hash::Hasher;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::bundle::{self, EVENTS_FILE};

/// Hex digits of the hash the report prints: enough to tell traces apart by eye.
pub const HEX_DIGITS: usize = 12;

/// A trace's content hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContentHash {
    /// The hash function: XXH64 with seed 0, as `xxh64sum` prints it.
    pub algorithm: &'static str,
    /// The hash's first [`HEX_DIGITS`] hex digits.
    pub hex: String,
    /// The file hashed: a bundle's events.parquet, else the trace file itself.
    pub file: PathBuf,
}

impl std::fmt::Display for ContentHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.algorithm, self.hex)
    }
}

/// Hashes the trace at `path`: a bundle by its events, which every analysis reads (its
/// meta.json may be rewritten by an import without changing them), else the file.
pub fn of(path: &Path) -> std::io::Result<ContentHash> {
    let file = if bundle::is_bundle(path) {
        path.join(EVENTS_FILE)
    } else {
        path.to_path_buf()
    };
    let mut f = std::fs::File::open(&file)?;
    let mut h = twox_hash::XxHash64::with_seed(0);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.write(&buf[..n]);
    }
    let hex = format!("{:016x}", h.finish());
    Ok(ContentHash {
        algorithm: "xxh64",
        hex: hex[..HEX_DIGITS].to_string(),
        file,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_xxh64_of_the_content() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.txt");
        // XXH64 of no bytes, seed 0, is ef46db3751d8e999 (the reference's test vector).
        std::fs::write(&p, b"").unwrap();
        assert_eq!(of(&p).unwrap().hex, "ef46db3751d8");
        std::fs::write(&p, b"other").unwrap();
        assert_ne!(of(&p).unwrap().hex, "ef46db3751d8");
        assert_eq!(
            of(&p).unwrap().to_string().len(),
            "xxh64 ".len() + HEX_DIGITS
        );
    }
}
