//! The commands that show rather than compute: `machines`, `policies`, `info`, `man`.

use super::args::{Cli, InfoArgs, MachinesArgs, PoliciesArgs};
use super::inputs::{default_input, machine};
use crate::policy;
use crate::presets::PRESETS;
use crate::Error;

/// `machines`: the presets, or one machine as the JSON `--machine` reads.
pub(super) fn machines(args: MachinesArgs) -> Result<(), Error> {
    match args.name.as_deref() {
        None if args.json => {
            let v: Vec<_> = PRESETS
                .iter()
                .map(|p| {
                    serde_json::json!({"name": p.name, "cpus": p.shape.cpus(), "source": p.source})
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&v).expect("serialises"));
            Ok(())
        }
        None => {
            for p in PRESETS {
                let s = &p.shape;
                println!(
                    "{:<12} {:>3} CPUs: {} sockets, {} NUMA nodes, {} LLCs of {} cores{}{}",
                    p.name,
                    s.cpus(),
                    s.sockets,
                    s.sockets * s.nodes_per_socket,
                    s.sockets * s.nodes_per_socket * s.llcs_per_node,
                    s.cores_per_llc,
                    if s.threads > 1 { " x SMT2" } else { "" },
                    if s.cores_per_cluster < s.cores_per_llc {
                        format!(", clusters of {}", s.cores_per_cluster)
                    } else {
                        String::new()
                    }
                );
                println!(
                    "{}",
                    crate::report::text::fit(&format!("{:13}{}", "", p.source))
                );
            }
            println!("here         this machine, from sysfs");
            Ok(())
        }
        Some(name) => {
            let t = machine(name)?;
            println!("{}", serde_json::to_string_pretty(&t).expect("serialises"));
            Ok(())
        }
    }
}

/// `policies`: the registry, one policy's parameters, or its scan budget curve.
pub(super) fn policies(args: PoliciesArgs) -> Result<(), Error> {
    let PoliciesArgs {
        name,
        budget,
        llc_size,
        json,
    } = args;
    let Some(spec) = name else {
        if budget {
            return Err(Error::Usage("--budget needs a policy name".into()));
        }
        let all: Vec<_> = policy::registry().collect();
        if json {
            println!(
                "{}",
                serde_json::to_string_pretty(&all).expect("serialises")
            );
        } else {
            for p in all {
                let aliases = if p.aliases.is_empty() {
                    String::new()
                } else {
                    format!(" (alias {})", p.aliases.join(", "))
                };
                println!(
                    "{}{aliases}\n    {}\n    follows: {}",
                    p.name, p.summary, p.follows
                );
                for q in p.params {
                    println!("    {}={} : {}", q.name, q.default_text(), q.doc);
                }
            }
        }
        return Ok(());
    };
    policy::build(&spec)?;
    let base = spec.split(':').next().unwrap_or("");
    let info = policy::lookup(base).expect("built above");
    if !budget {
        if json {
            println!(
                "{}",
                serde_json::to_string_pretty(info).expect("serialises")
            );
        } else {
            println!("{}: {}\nfollows: {}", info.name, info.summary, info.follows);
            for q in info.params {
                println!("  {}={} : {}", q.name, q.default_text(), q.doc);
            }
        }
        return Ok(());
    }
    if llc_size == 0 {
        return Err(Error::Usage("--llc-size must be at least 1".into()));
    }
    let curve = policy::budget_curve(&spec, llc_size)?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&curve).expect("serialises")
        );
        return Ok(());
    }
    println!("{spec}: CPUs scanned in a {llc_size}-CPU LLC after a periodic balance");
    if base == "sis_prop" || base == "vanilla" || base == "cas" || base == "cas_static" {
        println!("(SIS_PROP's budget follows the waker's idle time, not utilisation: shown for the initial 1 ms avg_idle and no scan cost yet)");
    }
    let (u, n): (Vec<String>, Vec<String>) = curve
        .iter()
        .map(|p| (format!("{:>4}", p.util_pct), format!("{:>4}", p.nr_scan)))
        .unzip();
    for (a, b) in u.chunks(11).zip(n.chunks(11)) {
        println!("util%   {}", a.join(""));
        println!("nr_scan {}", b.join(""));
    }
    Ok(())
}

/// `info`: a bundle's or trace's summary.
pub(super) fn info(args: InfoArgs) -> Result<(), Error> {
    let InfoArgs { input, top, json } = args;
    let input = default_input(input);
    let s = crate::info::summarise_path(&input, top)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&s).expect("serialises"));
    } else {
        println!("{}", input.display());
        print!("{}", s.to_text());
    }
    Ok(())
}

/// The overview page, or one command's page (named sisreplay-COMMAND, as the overview
/// refers to it).
pub(super) fn man_page(command: Option<&str>) -> Result<(), Error> {
    let cmd = <Cli as clap::CommandFactory>::command();
    let page = match command {
        None => clap_mangen::Man::new(cmd),
        Some(name) => match cmd.find_subcommand(name) {
            Some(sub) => clap_mangen::Man::new(sub.clone().bin_name(format!("sisreplay {name}")))
                .title(format!("sisreplay-{name}")),
            None => {
                return Err(Error::Usage(format!(
                    "man {name}: no such command; `sisreplay --help` lists them"
                )))
            }
        },
    };
    page.render(&mut std::io::stdout()).map_err(Error::Stdout)
}
