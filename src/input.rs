//! What a command is pointed at: a bundle directory or a trace file in any supported
//! format, opened as one event stream together with what is known about it. Readers of
//! trace files (`trace/`) know nothing of bundles; this is where the two meet.

use std::path::{Path, PathBuf};

use crate::bundle::{self, Bundle, BundleError, Meta};
use crate::trace::causal::Ordered;
use crate::trace::{self, EventSource};

/// An opened input: its events, and its metadata when it is a bundle.
pub struct Input {
    /// The events in time order; equal timestamps of different CPUs in causal order.
    pub source: Box<dyn EventSource>,
    /// The bundle's meta.json; None for a trace file.
    pub meta: Option<Meta>,
}

/// Opens a bundle, or a trace file by its first bytes (trace.dat, perf.data, text).
pub fn open(path: &Path) -> Result<Input, BundleError> {
    if bundle::is_bundle(path) {
        let b = Bundle::open(path)?;
        let meta = Some(b.meta.clone());
        // A bundle imported before equal timestamps were put in causal order gets that
        // as it is read.
        let source: Box<dyn EventSource> = if b.meta.ties.is_none() {
            Box::new(Ordered::new(b))
        } else {
            Box::new(b)
        };
        return Ok(Input { source, meta });
    }
    Ok(Input {
        source: trace::open(path)?,
        meta: None,
    })
}

/// The metadata of a bundle; None for a trace file.
pub fn meta(path: &Path) -> Result<Option<Meta>, BundleError> {
    if bundle::is_bundle(path) {
        Ok(Some(bundle::read_meta(path)?))
    } else {
        Ok(None)
    }
}

/// The traces a list of paths names: a bundle or trace file is itself; any other
/// directory stands for every bundle below it (not looking inside bundles), in path
/// order. A directory holding no bundle is an error, not an empty fleet.
pub fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, BundleError> {
    let mut out = Vec::new();
    for p in paths {
        if !p.is_dir() || bundle::is_bundle(p) {
            out.push(p.clone());
            continue;
        }
        let before = out.len();
        bundles_below(p, &mut out)?;
        if out.len() == before {
            return Err(BundleError::Bundle {
                path: p.clone(),
                what: format!(
                    "a directory with no bundle (a directory holding {}) below it",
                    bundle::META_FILE
                ),
            });
        }
    }
    Ok(out)
}

fn bundles_below(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), BundleError> {
    let unreadable = |e: std::io::Error| BundleError::Bundle {
        path: dir.into(),
        what: format!("cannot list the directory: {e}"),
    };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(unreadable)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(unreadable)?;
    entries.sort();
    for p in entries.into_iter().filter(|p| p.is_dir()) {
        if bundle::is_bundle(&p) {
            out.push(p);
        } else {
            bundles_below(&p, out)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_stands_for_the_bundles_below_it() {
        let d = tempfile::tempdir().unwrap();
        let mk = |rel: &str| {
            let p = d.path().join(rel);
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join(bundle::META_FILE), "{}").unwrap();
            p
        };
        let b = mk("x/b");
        let a = mk("x/a");
        // A bundle's own subdirectories are not searched.
        let inner = mk("x/a/results/c");
        let c = mk("y/deep/c");
        std::fs::create_dir_all(d.path().join("x/empty")).unwrap();
        let file = d.path().join("t.dat");
        std::fs::write(&file, b"").unwrap();
        let got = expand(&[d.path().join("x"), file.clone(), c.clone()]).unwrap();
        assert_eq!(got, vec![a, b, file, c.clone()]);
        assert!(!got.contains(&inner));
        assert_eq!(expand(&[d.path().to_path_buf()]).unwrap().len(), 3);
        let err = expand(&[d.path().join("x/empty")]).unwrap_err().to_string();
        assert!(
            err.contains("x/empty") && err.contains("no bundle"),
            "{err}"
        );
    }
}
