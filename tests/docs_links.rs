//! Every relative link in README.md and docs/*.md resolves in a clone: the file it names exists
//! inside the repository, and an `#anchor` names a heading of the Markdown file it points to.
//! Web links (http, https, mailto) are not followed.

use std::collections::HashSet;
use std::fs;
use std::path::{Component, Path, PathBuf};

fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .map(|e| e.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// The lines outside fenced code blocks.
fn prose_lines(text: &str) -> Vec<&str> {
    let mut in_fence = false;
    let mut lines = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if !in_fence {
            lines.push(line);
        }
    }
    lines
}

/// GitHub's anchor for a heading: lower case, letters, digits, `-` and `_` kept, spaces made
/// `-`, everything else dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(file: &Path) -> HashSet<String> {
    let text = fs::read_to_string(file).expect("markdown file reads");
    prose_lines(&text)
        .into_iter()
        .filter(|l| l.starts_with('#'))
        .map(|l| slug(l.trim_start_matches('#')))
        .collect()
}

/// The targets of `[text](target)` and `![alt](target)` on one line.
fn link_targets(line: &str) -> Vec<&str> {
    let mut targets = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        match after.find(')') {
            Some(j) => {
                targets.push(&after[..j]);
                rest = &after[j + 1..];
            }
            None => break,
        }
    }
    targets
}

/// The path with `.` and `..` folded, or None when it climbs out of where it started.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(p) => out.push(p),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

#[test]
fn every_relative_link_in_the_documentation_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in markdown_files(root) {
        let rel_file = file
            .strip_prefix(root)
            .expect("under the root")
            .to_path_buf();
        let dir = rel_file.parent().unwrap_or(Path::new("")).to_path_buf();
        let text = fs::read_to_string(&file).expect("markdown file reads");
        for line in prose_lines(&text) {
            for target in link_targets(line) {
                if target.starts_with("http://")
                    || target.starts_with("https://")
                    || target.starts_with("mailto:")
                {
                    continue;
                }
                checked += 1;
                let (path, anchor) = match target.split_once('#') {
                    Some((p, a)) => (p, Some(a)),
                    None => (target, None),
                };
                let resolved = if path.is_empty() {
                    Some(rel_file.clone())
                } else {
                    normalize(&dir.join(path))
                };
                let Some(resolved) = resolved else {
                    broken.push(format!(
                        "{}: {target} leaves the repository",
                        rel_file.display()
                    ));
                    continue;
                };
                if !root.join(&resolved).exists() {
                    broken.push(format!("{}: {target} does not exist", rel_file.display()));
                    continue;
                }
                if let Some(anchor) = anchor {
                    let is_md = resolved.extension().is_some_and(|x| x == "md");
                    if is_md && !anchors(&root.join(&resolved)).contains(anchor) {
                        broken.push(format!("{}: {target} names no heading", rel_file.display()));
                    }
                }
            }
        }
    }
    assert!(checked > 0, "no links found: is the parser right?");
    assert!(
        broken.is_empty(),
        "broken documentation links:\n{}",
        broken.join("\n")
    );
}
