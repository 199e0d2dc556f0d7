//! The command line as a user meets it: the README's synopsis names exactly the flags each
//! command's --help lists, and the completion scripts and manual pages generate.

use std::collections::BTreeSet;
use std::process::Command;

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_sisreplay"))
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `--long` flags in `text`.
fn flags(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices("--") {
        let rest = &text[i + 2..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '-')
            .collect();
        if !name.is_empty() && !name.starts_with('-') {
            out.insert(name.trim_end_matches('-').to_string());
        }
    }
    out.remove("help");
    out
}

/// The synopsis block under `## Commands`: command → its lines.
fn synopsis() -> Vec<(String, String)> {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let block = readme
        .split("## Commands\n")
        .nth(1)
        .expect("README has a Commands section");
    let mut out: Vec<(String, String)> = Vec::new();
    // Failures list every command at once.
    for line in block.lines().skip_while(|l| l.is_empty()) {
        if !line.starts_with("    ") {
            break;
        }
        match line.trim().strip_prefix("sisreplay ") {
            Some(rest) => {
                let cmd = rest.split_whitespace().next().unwrap().to_string();
                out.push((cmd, rest.to_string()));
            }
            None => out.last_mut().expect("a continuation").1.push_str(line),
        }
    }
    out
}

#[test]
fn readme_synopsis_names_every_flag_of_every_command() {
    let syn = synopsis();
    assert!(syn.len() >= 10, "{syn:?}");
    let (_, top, _) = run(&["--help"]);
    let mut wrong = Vec::new();
    for (cmd, text) in &syn {
        assert!(
            top.contains(&format!("  {cmd} ")),
            "{cmd} is not a command:\n{top}"
        );
        let (code, help, err) = run(&[cmd, "--help"]);
        assert_eq!(code, Some(0), "{err}");
        let options = help.split("Options:").nth(1).unwrap_or("");
        // Short flags in the synopsis (`-o DIR`) stand for the long ones --help pairs them with.
        let mut readme = flags(text);
        for l in options.lines() {
            let l = l.trim_start();
            if let (Some(short), Some(long)) =
                (l.get(..2), l.get(4..).and_then(|r| r.strip_prefix("--")))
            {
                let long: String = long
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '-')
                    .collect();
                if short.starts_with('-') && text.contains(&format!("{short} ")) {
                    readme.insert(long);
                }
            }
        }
        let actual = flags(options);
        if readme != actual {
            wrong.push(format!(
                "{cmd}: README only {:?}, --help only {:?}",
                readme.difference(&actual).collect::<Vec<_>>(),
                actual.difference(&readme).collect::<Vec<_>>()
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "README synopsis against --help:\n{}",
        wrong.join("\n")
    );
    // Every public command is in the synopsis.
    let listed: BTreeSet<&str> = syn.iter().map(|(c, _)| c.as_str()).collect();
    for line in top.split("Commands:").nth(1).unwrap().lines() {
        let Some(cmd) = line.split_whitespace().next() else {
            break;
        };
        if !["help", "completions", "man"].contains(&cmd) {
            assert!(
                listed.contains(cmd),
                "`{cmd}` is missing from the README synopsis"
            );
        }
    }
}

#[test]
fn completions_and_manual_pages_generate() {
    for shell in ["bash", "zsh", "fish"] {
        let (code, out, err) = run(&["completions", shell]);
        assert_eq!(code, Some(0), "{err}");
        for cmd in ["replay", "compare", "report", "capture", "policy"] {
            assert!(out.contains(cmd), "{shell} completion lacks {cmd}");
        }
    }
    let (code, out, _) = run(&["man"]);
    assert_eq!(code, Some(0));
    assert!(out.contains(".TH sisreplay 1"), "{out}");
    let (code, out, _) = run(&["man", "replay"]);
    assert_eq!(code, Some(0));
    assert!(out.contains(".TH sisreplay-replay 1"));
    assert!(out.contains("\\-\\-policy"), "{out}");
    let (code, _, err) = run(&["man", "replya"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("no such command"), "{err}");
}

/// `--flips-before-trace` takes a count, a count with the age of its last halving, or
/// `auto`; the age changes when the tasks first seen halve their flips (on this 6.12
/// capture 0 flips halved 800 ms before agree 5.5 points over 0 halved as first seen),
/// and one of a second or more, or no number, is refused naming the value.
#[test]
fn flips_before_the_trace_take_a_count_and_an_age() {
    let b = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/traces/rig/kernel-6.12-sis-stats+noinline/2x4/rig-2x4-hackbench-no_limit_no_delay-tracefs"
    );
    let agree = |flips: &str| -> (f64, serde_json::Value) {
        let (code, out, err) = run(&["fidelity", b, "--json", "--flips-before-trace", flips]);
        assert_eq!(code, Some(0), "{flips}: {err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let f = &v[0]["fidelity"];
        let pct = 100.0 * f["agree"].as_f64().unwrap() / f["decisions"].as_f64().unwrap();
        (pct, v[0]["flips_before_trace"].clone())
    };
    let (plain, before) = agree("0");
    assert_eq!(before, serde_json::json!({"flips": 0, "halved_ago_ns": 0}));
    assert_eq!(agree("0/0ms"), (plain, before));
    let (aged, before) = agree("0/800ms");
    assert_eq!(
        before,
        serde_json::json!({"flips": 0, "halved_ago_ns": 800_000_000u64})
    );
    assert!(aged > plain + 4.0, "{aged} against {plain}");
    for bad in ["1/1s", "1/2000ms", "x", "1/abc"] {
        let (code, _, err) = run(&["fidelity", b, "--flips-before-trace", bad]);
        assert_eq!(code, Some(2), "{bad}");
        assert!(
            err.contains(&format!("`{bad}`")) || err.contains("abc"),
            "{bad}: {err}"
        );
    }
}
