//! `import`: a trace file into a bundle, stopped cleanly by a termination signal.

use std::io::IsTerminal;
use std::path::PathBuf;

use super::args::ImportArgs;
use super::inputs::{default_input, machine};
use crate::bundle::{self, ImportOptions};
use crate::trace;
use crate::Error;

/// `import`: reads a trace file into a bundle under the traces directory.
pub(super) fn import(args: ImportArgs) -> Result<(), Error> {
    let ImportArgs {
        file,
        name,
        machine: machine_spec,
        traces,
        json,
    } = args;
    let file = default_input(file);
    let topology = machine_spec.as_deref().map(machine).transpose()?;
    let name = name.unwrap_or_else(|| {
        file.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "trace".into())
    });
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return Err(Error::Usage(format!(
            "--name {name:?}: a bundle name is one plain directory name"
        )));
    }
    // SIGINT, SIGTERM and SIGHUP stop the import between batches, so that it unwinds
    // and removes its temporary directory (what a SIGKILL leaves, the next import sweeps).
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    ctrlc::set_handler(move || flag.store(true, std::sync::atomic::Ordering::Release))?;
    let src = crate::input::open(&file)?.source;
    let mut src = Interruptible {
        inner: src,
        stop: stop.clone(),
        path: file.clone(),
    };
    let tty = std::io::stderr().is_terminal();
    let mut progress = |n: u64| {
        if tty {
            eprint!("\r{n} events read");
        }
    };
    let dest = traces.join(&name);
    let result = bundle::write_bundle(
        &mut src,
        &dest,
        ImportOptions {
            topology,
            source_path: &file,
            provenance: bundle::Provenance::Import,
            sched_features: None,
            progress: Some(&mut progress),
        },
    );
    if tty {
        eprint!("\r");
    }
    match result {
        Ok(meta) => {
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&meta).expect("serialises")
                );
            } else {
                println!(
                    "{}: {} events, {} CPUs, {} lost, from {} ({})",
                    dest.display(),
                    meta.events,
                    meta.nr_cpus,
                    meta.lost_total(),
                    file.display(),
                    meta.source.format
                );
                if meta.topology_assumed {
                    println!("topology: not given; CPUs are treated as one LLC without SMT (use --machine)");
                }
            }
            Ok(())
        }
        Err(_) if stop.load(std::sync::atomic::Ordering::Acquire) => Err(Error::Interrupted(dest)),
        Err(e) => Err(e.into()),
    }
}

/// A source that fails once a termination signal has arrived.
struct Interruptible {
    inner: Box<dyn trace::EventSource>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    path: PathBuf,
}

impl Interruptible {
    fn check(&self) -> trace::Result<()> {
        if self.stop.load(std::sync::atomic::Ordering::Acquire) {
            return Err(trace::TraceError::io(
                &self.path,
                std::io::Error::new(std::io::ErrorKind::Interrupted, "interrupted by a signal"),
            ));
        }
        Ok(())
    }
}

impl trace::EventSource for Interruptible {
    fn info(&self) -> &trace::SourceInfo {
        self.inner.info()
    }
    fn next_event(&mut self) -> trace::Result<Option<trace::Event>> {
        self.check()?;
        self.inner.next_event()
    }
    fn next_batch(&mut self, out: &mut Vec<trace::Event>, max: usize) -> trace::Result<usize> {
        self.check()?;
        self.inner.next_batch(out, max)
    }
    fn stats(&self) -> trace::ReadStats {
        self.inner.stats()
    }
}
