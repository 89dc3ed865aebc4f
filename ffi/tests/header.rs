//! `include/leakgate.h` is what cbindgen makes of the crate today (after the clean-up below),
//! so the committed header never drifts from the functions. `LEAKGATE_BLESS=1 cargo test -p
//! leakgate-ffi --test header` rewrites it.

use std::path::Path;

/// The header cbindgen writes, with rustdoc's markup made plain for C readers: intra-doc links
/// become their text, and Rust examples are left out.
fn generate() -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let renames: Vec<(String, String)> = config
        .export
        .rename
        .iter()
        .map(|(rust, c)| (format!("`{rust}`"), format!("`{c}`")))
        .collect();
    let mut out = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen parses the crate")
        .write(&mut out);
    let mut header = plain(&String::from_utf8(out).expect("UTF-8"));
    for (rust, c) in renames {
        header = header.replace(&rust, &c);
    }
    header
}

/// Drops the lines of ``` blocks in comments (and an empty comment line left last or doubled), rewrites
/// `[text](target)` and `[`name`]` links as their text, and puts negative constants in
/// parentheses.
fn plain(header: &str) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut in_code = false;
    for line in header.lines() {
        let comment = line.trim_start().strip_prefix("//");
        if comment.is_some_and(|c| c.trim_start().starts_with("```")) {
            in_code = !in_code;
            continue;
        }
        // An example between two paragraphs leaves their two blank lines: keep one.
        if in_code || (line.trim() == "//" && lines.last().is_some_and(|l| l.trim() == "//")) {
            continue;
        }
        if !line.trim_start().starts_with("//") && lines.last().is_some_and(|l| l.trim() == "//") {
            lines.pop();
        }
        lines.push(match line.split_once(" -") {
            Some((define, n)) if define.starts_with("#define ") => format!("{define} (-{n})"),
            _ => delink(line),
        });
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// `[text](target)` -> `text`; `[`name`]` -> `` `name` ``.
fn delink(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else {
            out.push_str(&rest[open..]);
            return out;
        };
        let text = &after[..close];
        let tail = &after[close + 1..];
        out.push_str(text);
        rest = match tail.strip_prefix('(').and_then(|t| t.find(')').map(|end| &t[end + 1..])) {
            Some(after_target) => after_target,
            None => tail,
        };
    }
    out.push_str(rest);
    out
}

#[test]
fn the_committed_header_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/leakgate.h");
    let fresh = generate();
    if std::env::var_os("LEAKGATE_BLESS").is_some() {
        std::fs::write(&path, &fresh).expect("write include/leakgate.h");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == fresh,
        "ffi/include/leakgate.h is out of date: run LEAKGATE_BLESS=1 cargo test -p leakgate-ffi --test header"
    );
}

#[test]
fn links_become_text() {
    assert_eq!(
        delink("see [`LG_OK`](crate::LG_OK) and [`lg_now_ns`]."),
        "see `LG_OK` and `lg_now_ns`."
    );
    assert_eq!(delink("[the pointer rules](crate#pointers)"), "the pointer rules");
    assert_eq!(delink("a [b"), "a [b");
}
