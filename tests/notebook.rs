//! The notebook runs headless on the committed bundle and results, and reproduces the
//! report's numbers (it asserts that itself) and its plot.

use std::process::Command;

#[test]
#[ignore = "needs Jupyter and the notebook packages (notebooks/requirements.txt) (.ci/run installs them and runs ignored tests: cargo test -- --include-ignored)"]
fn replay_notebook_executes() {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = tempfile::tempdir().unwrap();
    let o = Command::new("python3")
        .args([
            "-m",
            "jupyter",
            "nbconvert",
            "--to",
            "notebook",
            "--execute",
        ])
        .arg(format!("{root}/notebooks/replay.ipynb"))
        .arg("--output-dir")
        .arg(out.path())
        .current_dir(format!("{root}/notebooks"))
        .output()
        .expect("python3 runs (.ci/run installs notebooks/requirements.txt)");
    assert!(
        o.status.success(),
        "nbconvert failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let nb: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("replay.ipynb")).unwrap())
            .unwrap();
    let outputs: Vec<&serde_json::Value> = nb["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["outputs"].as_array())
        .flatten()
        .collect();
    assert!(outputs.iter().all(|o| o["output_type"] != "error"));
    let text: String = outputs
        .iter()
        .filter_map(|o| o["text"].as_array())
        .flatten()
        .filter_map(|t| t.as_str())
        .collect();
    assert!(text.contains("no_limit   1.00 ("), "{text}");
    assert!(text.contains("sis_util   +"), "{text}");
    // The fleet cell: the bundles of reports/data/fleet as one table, every row printed.
    for t in ["hackbench-no_limit-tracefs", "pingpong-sis_util-tracefs"] {
        assert!(text.contains(t), "{text}");
    }
    assert!(
        outputs.iter().any(|o| o["data"]["image/png"].is_string()),
        "the histogram was not drawn"
    );
}
