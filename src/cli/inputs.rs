//! What a command reads when told little: the default sample trace, a machine named by
//! preset, `here` or file, and how many threads to use.

use std::path::{Path, PathBuf};

use crate::topology::Topology;
use crate::Error;

/// The sample every command falls back to when given no input.
const DEFAULT_SAMPLE: &str = "traces/samples/hackbench-v7-zstd.dat";
/// The same sample, inside the binary, for runs outside the source tree.
const EMBEDDED_SAMPLE: &[u8] = include_bytes!("../../traces/samples/hackbench-v7-zstd.dat");

/// The default sample's path: in the working directory's traces/ as in a checkout, else
/// in the source tree the binary was built from, else the embedded copy written once to
/// the temporary directory.
pub(super) fn default_sample() -> PathBuf {
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join(DEFAULT_SAMPLE);
    for p in [PathBuf::from(DEFAULT_SAMPLE), built] {
        if p.is_file() {
            return p;
        }
    }
    let p = std::env::temp_dir().join(format!(
        "sisreplay-{}-{}",
        env!("CARGO_PKG_VERSION"),
        Path::new(DEFAULT_SAMPLE)
            .file_name()
            .expect("a file name")
            .to_string_lossy()
    ));
    let current = std::fs::metadata(&p).is_ok_and(|m| m.len() == EMBEDDED_SAMPLE.len() as u64);
    if !current {
        if let Err(e) = crate::atomic::write(&p, EMBEDDED_SAMPLE) {
            eprintln!("sisreplay: cannot unpack the built-in sample: {e}");
        }
    }
    p
}

/// The input as given, else the default sample.
pub(super) fn default_input(given: Option<PathBuf>) -> PathBuf {
    given.unwrap_or_else(default_sample)
}

/// The machine `--machine` names: a preset, `here` (this machine, from sysfs) or a JSON
/// file as `sisreplay machines NAME` prints.
pub(super) fn machine(spec: &str) -> Result<Topology, Error> {
    match spec {
        "here" => Ok(Topology::from_sysfs(Path::new("/sys"))?),
        name if crate::presets::lookup(name).is_some() => {
            let p = crate::presets::lookup(name).expect("checked");
            Ok(p.shape.topology(p.name))
        }
        f if Path::new(f).exists() => Ok(Topology::from_json_file(Path::new(f))?),
        f => {
            let presets: Vec<&str> = crate::presets::PRESETS.iter().map(|p| p.name).collect();
            Err(Error::Usage(format!(
                "--machine {f:?}: not a preset ({}), not `here`, and no such JSON file",
                presets.join(", ")
            )))
        }
    }
}

/// Threads to use: as asked, else one per CPU available.
pub(super) fn jobs_or_cpus(jobs: Option<usize>) -> usize {
    jobs.unwrap_or_else(crate::parallel::default_jobs)
}
