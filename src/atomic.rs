//! Replacing a file whole or not at all: the new content goes to a temporary file beside
//! the destination, is synced to disk, and is renamed over it; the directory is synced
//! after the rename. A reader, or a crash at any point, sees the old file or the new one,
//! never half of one.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A file that could not be written, with the path that failed.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct WriteError {
    /// The path that failed: the temporary file, the destination, or its directory.
    pub path: PathBuf,
    /// The operating system's error.
    pub source: std::io::Error,
}

fn at(path: &Path) -> impl FnOnce(std::io::Error) -> WriteError + '_ {
    move |source| WriteError {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `bytes` to `path` atomically.
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    write_with(path, |f| f.write_all(bytes))
}

/// Writes `path` atomically with `fill`, which writes the content into the open file.
pub fn write_with(
    path: &Path,
    fill: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> Result<(), WriteError> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(at(dir))?;
    let name = path.file_name().ok_or_else(|| WriteError {
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file name"),
    })?;
    let tmp = dir.join(format!(
        ".{}.tmp{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = File::create(&tmp)
        .and_then(|mut f| {
            fill(&mut f)?;
            f.sync_all()
        })
        .map_err(at(&tmp))
        .and_then(|()| std::fs::rename(&tmp, path).map_err(at(path)));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return result;
    }
    // The rename is durable once the directory is.
    File::open(dir).and_then(|d| d.sync_all()).map_err(at(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_and_leaves_nothing_beside() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub/out.txt");
        write(&p, b"one").unwrap();
        write(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        // A fill that fails keeps the old content and removes its temporary file.
        let e = write_with(&p, |_| Err(std::io::Error::other("disk full"))).unwrap_err();
        assert!(e.to_string().contains("disk full"), "{e}");
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(d.path().join("sub"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["out.txt"]);
        // A directory where the file should go is an error naming the path.
        let e = write(d.path(), b"x").unwrap_err();
        assert!(e.to_string().contains(&d.path().display().to_string()));
    }
}
