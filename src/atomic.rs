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
    let mut pending = Pending::create(path)?;
    fill(&mut pending.file).map_err(at(&pending.tmp))?;
    pending.commit()
}

/// A file being written under a temporary name beside `path`, for content that is
/// streamed rather than filled at once: [`Pending::commit`] puts it in place; dropped
/// uncommitted, it is removed and the old file stays.
pub struct Pending {
    file: File,
    tmp: PathBuf,
    path: PathBuf,
    committed: bool,
}

impl Pending {
    /// Creates the temporary file (and `path`'s directory).
    pub fn create(path: &Path) -> Result<Pending, WriteError> {
        let dir = parent(path);
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
        let file = File::create(&tmp).map_err(at(&tmp))?;
        Ok(Pending {
            file,
            tmp,
            path: path.to_path_buf(),
            committed: false,
        })
    }

    /// Syncs the content and renames it over `path`; the rename is durable once the
    /// directory is synced too.
    pub fn commit(mut self) -> Result<(), WriteError> {
        self.file.sync_all().map_err(at(&self.tmp))?;
        std::fs::rename(&self.tmp, &self.path).map_err(at(&self.path))?;
        self.committed = true;
        let dir = parent(&self.path);
        File::open(dir).and_then(|d| d.sync_all()).map_err(at(dir))
    }
}

impl Write for Pending {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

fn parent(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
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
