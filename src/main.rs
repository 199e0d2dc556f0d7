//! The `sisreplay` command line: parses arguments, calls the library, prints.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use sisreplay::bundle::{self, ImportOptions};
use sisreplay::topology::Topology;
use sisreplay::{info, trace};

/// The sample every command falls back to when given no input.
const DEFAULT_SAMPLE: &str = "traces/samples/hackbench-v7-zstd.dat";

#[derive(Parser)]
#[command(
    name = "sisreplay",
    version,
    about = "Capture Linux scheduler traces and replay them through counterfactual \
             idle-CPU search policies"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Read a trace (trace.dat v6/v7, perf.data, tracefs/trace-cmd/perf text) into a bundle
    /// under traces/NAME: meta.json plus events.parquet.
    Import {
        /// The trace file [default: the committed hackbench sample]
        file: Option<PathBuf>,
        /// Bundle name [default: the file name without its extension]
        #[arg(long)]
        name: Option<String>,
        /// Machine description: `here` (this machine's sysfs) or a JSON file
        #[arg(long)]
        machine: Option<String>,
        /// Directory that holds bundles
        #[arg(long, default_value = "traces")]
        traces: PathBuf,
        /// Print the bundle's metadata as JSON
        #[arg(long)]
        json: bool,
    },
    /// Summarise a bundle or trace file: duration, CPUs, events by type, wakeups,
    /// migrations, lost events, top tasks by runtime.
    Info {
        /// A bundle directory or trace file [default: the committed hackbench sample]
        input: Option<PathBuf>,
        /// How many tasks to list
        #[arg(long, default_value_t = 10)]
        top: usize,
        #[arg(long)]
        json: bool,
    },
}

/// Exit code for bad input or usage, as documented.
const EXIT_INPUT: u8 = 2;

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("sisreplay: {msg}");
    ExitCode::from(EXIT_INPUT)
}

fn default_input(given: Option<PathBuf>) -> PathBuf {
    given.unwrap_or_else(|| PathBuf::from(DEFAULT_SAMPLE))
}

fn machine(spec: Option<&str>) -> Result<Option<Topology>, String> {
    match spec {
        None => Ok(None),
        Some("here") => Topology::from_sysfs(Path::new("/sys"))
            .map(Some)
            .map_err(|e| e.to_string()),
        Some(f) => Topology::from_json_file(Path::new(f))
            .map(Some)
            .map_err(|e| e.to_string()),
    }
}

fn import(
    file: Option<PathBuf>,
    name: Option<String>,
    machine_spec: Option<String>,
    traces: PathBuf,
    json: bool,
) -> ExitCode {
    let file = default_input(file);
    let topology = match machine(machine_spec.as_deref()) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    let name = name.unwrap_or_else(|| {
        file.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "trace".into())
    });
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return fail(format!(
            "--name {name:?}: a bundle name is one plain directory name"
        ));
    }
    let mut src = match trace::open(&file) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let tty = std::io::stderr().is_terminal();
    let mut progress = |n: u64| {
        if tty {
            eprint!("\r{n} events read");
        }
    };
    let dest = traces.join(&name);
    let result = bundle::write_bundle(
        src.as_mut(),
        &dest,
        ImportOptions {
            topology,
            source_path: &file,
            capture: None,
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
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

fn show_info(input: Option<PathBuf>, top: usize, json: bool) -> ExitCode {
    let input = default_input(input);
    let mut src = match trace::open(&input) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    match info::summarise(src.as_mut(), top) {
        Ok(s) if json => {
            println!("{}", serde_json::to_string_pretty(&s).expect("serialises"));
            ExitCode::SUCCESS
        }
        Ok(s) => {
            println!("{}", input.display());
            print!("{}", s.to_text());
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Import {
            file,
            name,
            machine,
            traces,
            json,
        } => import(file, name, machine, traces, json),
        Command::Info { input, top, json } => show_info(input, top, json),
    }
}
