//! Runs every packetdrill script in tests/packetdrill/ against the TCP model. A script listed in
//! tests/packetdrill/KNOWN_DEPARTURES.md must fail exactly as listed there (so that a fix to the
//! model shows up as a change); every other script must pass. The scripts in
//! tests/packetdrill/runner/ test the runner itself and carry their expected outcome here.

use leoguard_proto::packetdrill::{run_script, Outcome};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/packetdrill")
}

fn scripts(d: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(d)
        .expect("the scripts directory")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "pkt"))
        .collect();
    v.sort();
    v
}

fn run(p: &Path) -> Outcome {
    run_script(&std::fs::read_to_string(p).expect("a readable script"))
}

/// The manifest: rows `| file.pkt | kernel function | message |`, message in backticks.
fn known_departures() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(dir().join("KNOWN_DEPARTURES.md")).expect("KNOWN_DEPARTURES.md");
    let mut m = BTreeMap::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() >= 4 && cells[1].trim_matches('`').ends_with(".pkt") {
            let last = cells[cells.len() - 2];
            let msg = last.strip_prefix('`').and_then(|m| m.strip_suffix('`')).unwrap_or(last).to_string();
            m.insert(cells[1].trim_matches('`').to_string(), msg);
        }
    }
    m
}

#[test]
fn scripts_pass_or_depart_as_listed() {
    let known = known_departures();
    let all = scripts(&dir());
    let mut problems = Vec::new();
    for p in &all {
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(p).unwrap();
        assert!(text.starts_with("// "), "{name}: must start with a comment naming the kernel function");
        let got = run(p);
        println!("{name}: {got}");
        match known.get(&name) {
            Some(want) if got.to_string() != *want => {
                problems.push(format!("{name}: listed as departing with `{want}`, got `{got}`"))
            }
            None if got != Outcome::Pass => problems.push(format!("{name}: {got}")),
            _ => {}
        }
    }
    for k in known.keys() {
        assert!(dir().join(k).exists(), "KNOWN_DEPARTURES.md lists {k}, which does not exist");
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(all.len() >= 40, "only {} scripts", all.len());
}

#[test]
fn runner_reports_the_first_mismatch_syntax_errors_and_unsupported() {
    let r = dir().join("runner");
    let out = |f: &str| {
        let o = run(&r.join(f)).to_string();
        println!("{f}: {o}");
        o
    };
    assert_eq!(out("ok_iw10.pkt"), "pass");
    let wrong = out("wrong_seq.pkt");
    assert_eq!(
        wrong,
        "fail: line 12: expected `. 6001:10001(4000) ack 1` at 0.100000, got `. 5001:6001(1000) ack 1` at 0.100000"
    );
    let syntax = out("syntax_error.pkt");
    assert_eq!(syntax, "fail: line 9: syntax error: expected a sequence range start:end(len), got '1:1001'");
    assert_eq!(out("unknown_syscall.pkt"), "unsupported: system call getsockopt() (line 11)");
    let t = out("wrong_time.pkt");
    assert_eq!(
        t,
        "fail: line 12: expected `P. 1:1001(1000) ack 1` at 0.250000, got `P. 1:1001(1000) ack 1` at 0.100000"
    );
    let a = out("failed_assert.pkt");
    assert!(a.starts_with("fail: line 12: expected `tcpi_snd_cwnd == 11` to hold, got False (10)"), "{a}");
    let x = out("unexpected_packet.pkt");
    assert!(x.starts_with("fail: line 11: expected no outbound packet before this line's event"), "{x}");
    assert!(out("unknown_sysctl.pkt").starts_with("unsupported: sysctl net.ipv4.tcp_foo=1"));
}
