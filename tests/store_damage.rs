//! Storage you can trust: every file of a database (the manifest, each segment, each stored
//! view and result) with a bit flipped, truncated or deleted either answers exactly as before or fails with an error
//! naming the damage, never a changed answer and never a panic; a full disk fails an import
//! cleanly and keeps the other traces; dropping a trace gives its space back; a stored result
//! of an older schema version is recomputed.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use mtfdb::analysis::structure;
use mtfdb::gen::{generate, GenConfig, Scenario};
use mtfdb::query::Session;
use mtfdb::Database;
use proptest::prelude::*;

/// Statements every observation runs on every trace: messages between two processes (an
/// index read and message chunks), fan-in (the stored traffic) and a size filter (operation
/// chunks).
const QUERIES: &[&str] = &[
    "SELECT ALL MESSAGES BETWEEN PROCESS(1,2)",
    "SELECT FAN_IN",
    "SELECT OPERATIONS WHERE SIZE > 1024",
];

/// Imports a trace the generator makes, through the library.
fn import_generated(db: &Database, name: &str, scenario: Scenario, ranks: u32, iterations: u32) {
    db.import_events(name, |sink| {
        generate(&GenConfig::new(scenario, ranks, iterations), sink).map(|_| ())
    })
    .unwrap();
}

/// Imports three small generated traces, as a user would have them, with a view and a
/// stored analysis result of one.
fn populate(path: &Path) {
    let db = Database::open(path).unwrap();
    for (name, scenario, ranks) in [
        ("ring", Scenario::Ring, 4),
        ("stencil", Scenario::Stencil2d, 9),
        ("cg", Scenario::Cg, 8),
    ] {
        import_generated(&db, name, scenario, ranks, 3);
    }
    let mut session = Session::new(db);
    session.use_trace("ring").unwrap();
    session.run(VIEW_DEFINITION).unwrap();
    session.run("SELECT PATTERNS FOR PROCESS(0)").unwrap();
}

/// The view [`populate`] makes of `ring`, and what [`observe`] asks of it.
const VIEW_DEFINITION: &str = "CREATE VIEW sends AS SELECT ALL MESSAGES WHERE SIZE > 0";
const VIEW_QUERY: &str = "SELECT COUNT(*) FROM MESSAGES IN VIEW sends";

/// Everything a user sees of the database, as text: the trace list with each trace's
/// `info`-level summary, every operation and message, and the [`QUERIES`]' rows.
fn observe(path: &Path) -> mtfdb::Result<String> {
    let db = Database::open(path)?;
    let mut out = String::new();
    let names = db.trace_names()?;
    // `populate`'s view and stored result, where this database has them.
    let with_view = names.iter().any(|n| n == "ring") && db.trace("ring")?.view("sends")?.is_some();
    for info in db.traces()? {
        out += &format!("{info:?}\n");
    }
    for name in &names {
        let trace = db.trace(name)?;
        out += &format!("{:?}\n", trace.info());
        for rank in 0..trace.info().processes as u32 {
            out += &format!("{:?}\n", trace.process_operations(rank)?);
        }
        out += &format!("{:?}\n", trace.messages()?);
        out += &format!("{:?}\n", trace.anomalies()?);
    }
    let mut session = Session::new(db);
    for name in &names {
        session.use_trace(name)?;
        for q in QUERIES {
            out += &format!("{q}: {:?}\n", session.run(q)?);
        }
        if name == "ring" && with_view {
            out += &format!("{VIEW_QUERY}: {:?}\n", session.run(VIEW_QUERY)?);
            out += &format!("{:?}\n", session.run("SELECT PATTERNS FOR PROCESS(0)")?);
        }
    }
    Ok(out)
}

/// Every file under `dir`, relative to it, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.push(p.strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn copy_dir(from: &Path, to: &Path) {
    for f in files(from) {
        let dest = to.join(&f);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(from.join(&f), dest).unwrap();
    }
    std::fs::create_dir_all(to.join("segments")).unwrap();
}

/// Bytes of the files under `dir`.
fn du(dir: &Path) -> u64 {
    files(dir)
        .iter()
        .map(|f| std::fs::metadata(dir.join(f)).unwrap().len())
        .sum()
}

#[derive(Debug, Clone, Copy)]
enum Damage {
    /// Flip bit `bit` of the byte at this offset.
    Flip(u64, u8),
    /// Keep only the first bytes.
    Truncate(u64),
    Delete,
}

fn apply(file: &Path, damage: Damage) {
    match damage {
        Damage::Flip(at, bit) => {
            let mut bytes = std::fs::read(file).unwrap();
            bytes[at as usize] ^= 1 << bit;
            std::fs::write(file, bytes).unwrap();
        }
        Damage::Truncate(len) => std::fs::File::options()
            .write(true)
            .open(file)
            .unwrap()
            .set_len(len)
            .unwrap(),
        Damage::Delete => std::fs::remove_file(file).unwrap(),
    }
}

/// What a damaged file's error must name: its file name.
fn name_of_damage(rel: &Path) -> String {
    rel.file_name().unwrap().to_string_lossy().into_owned()
}

/// The write lock's file: its content only explains a wait, so damage to it changes nothing.
fn is_lock_file(rel: &Path) -> bool {
    rel == Path::new("LOCK")
}

/// Copies the pristine database, damages one file, observes it twice (the second open sees
/// what the first left), and checks the outcome; returns whether the damage was reported.
fn trial(pristine: &Path, expected: &str, rel: &Path, damage: Damage) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    copy_dir(pristine, &path);
    apply(&path.join(rel), damage);
    let mut reported = false;
    for attempt in 0..2 {
        let outcome = catch_unwind(AssertUnwindSafe(|| observe(&path)));
        match outcome {
            Err(_) => panic!("{} {damage:?} (attempt {attempt}): panicked", rel.display()),
            Ok(Ok(seen)) => assert!(
                seen == expected,
                "{} {damage:?} (attempt {attempt}): a changed answer without an error",
                rel.display()
            ),
            Ok(Err(e)) => {
                let message = e.to_string();
                let names = name_of_damage(rel);
                assert!(
                    message.contains(&names),
                    "{} {damage:?} (attempt {attempt}): the error does not name {names:?}: {message}",
                    rel.display()
                );
                reported = true;
            }
        }
    }
    reported
}

/// The length of a file up to its last non-zero byte (at least 1).
fn used_len(file: &Path) -> u64 {
    let bytes = std::fs::read(file).unwrap();
    bytes
        .iter()
        .rposition(|&b| b != 0)
        .map_or(1, |i| i as u64 + 1)
}

/// A small deterministic generator of offsets (splitmix64).
fn offsets(seed: u64, len: u64, n: usize) -> Vec<u64> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (z ^ (z >> 31)) % len
        })
        .collect()
}

fn pristine() -> (tempfile::TempDir, PathBuf, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    populate(&path);
    let expected = observe(&path).unwrap();
    assert!(expected.contains("\"stencil\""), "{expected}");
    (dir, path, expected)
}

#[test]
fn every_file_flipped_truncated_or_deleted_answers_as_before_or_names_the_damage() {
    let (_dir, path, expected) = pristine();
    let all = files(&path);
    for kind in ["MANIFEST", "segments", "stored"] {
        assert!(
            all.iter().any(|f| f.starts_with(kind)),
            "the database has its {kind}: {all:?}"
        );
    }
    let mut reported = 0;
    let mut trials = 0;
    for rel in &all {
        let len = std::fs::metadata(path.join(rel)).unwrap().len();
        let mut damages = vec![Damage::Delete];
        if len > 0 {
            damages.push(Damage::Flip(0, 0));
            // Most flips where the file holds data, a few anywhere.
            let used = used_len(&path.join(rel));
            damages.extend(
                offsets(len, used, 16)
                    .into_iter()
                    .chain(offsets(len + 1, len, 3))
                    .map(|at| Damage::Flip(at, (at % 8) as u8)),
            );
            damages.push(Damage::Flip(len - 1, 7));
            damages.extend([0, len / 2, len - 1].map(Damage::Truncate));
        }
        for damage in damages {
            trials += 1;
            if trial(&path, &expected, rel, damage) {
                reported += 1;
            }
        }
    }
    // Damage to what the answers read (the manifest, the segments, the stored files) is
    // always seen.
    for rel in all.iter().filter(|f| !is_lock_file(f)) {
        for damage in [Damage::Delete, Damage::Truncate(0), Damage::Flip(0, 0)] {
            assert!(
                trial(&path, &expected, rel, damage),
                "{} {damage:?} went unnoticed",
                rel.display()
            );
        }
    }
    println!(
        "{trials} damaged databases, {reported} reported the damage, the rest answered as before"
    );
}

#[test]
fn a_rolled_back_catalog_keeps_the_later_traces_files_and_check_names_them() {
    let (_dir, path, expected) = pristine();
    // The manifest of a database that held only `ring` (an older copy put back): it opens
    // as that state; the later traces' files are kept, and `check` names them recoverable.
    let older = tempfile::tempdir().unwrap();
    let older_db = older.path().join("db");
    {
        let db = Database::open(&older_db).unwrap();
        import_generated(&db, "ring", Scenario::Ring, 4, 3);
    }
    let mut old: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(older_db.join("MANIFEST"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    // Point the old catalog at this database's segment of `ring` (same id, this size).
    let now: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(path.join("MANIFEST"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let ring = now["traces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "ring")
        .unwrap()
        .clone();
    old["traces"] = serde_json::json!([ring]);
    let body = old.to_string();
    std::fs::write(
        path.join("MANIFEST"),
        format!("{body}\ncrc32 {:08x}\n", crc32fast::hash(body.as_bytes())),
    )
    .unwrap();
    let db = Database::open(&path).unwrap();
    assert_eq!(db.trace_names().unwrap(), vec!["ring"]);
    drop(db);
    let report = Database::check(&path, false).unwrap();
    let recoverable: Vec<String> = report
        .findings
        .iter()
        .filter(|f| f.status == mtfdb::store::check::Status::Recoverable)
        .map(|f| f.item.clone())
        .collect();
    assert_eq!(recoverable, vec!["trace \"stencil\"", "trace \"cg\""]);
    Database::check(&path, true).unwrap();
    assert_eq!(observe(&path).unwrap(), expected);
}

#[test]
fn a_damaged_segment_is_named_and_its_trace_can_be_dropped() {
    let (_dir, path, _) = pristine();
    let segment = path.join("segments/1.seg");
    let len = std::fs::metadata(&segment).unwrap().len();
    apply(&segment, Damage::Truncate(len - 10));
    let db = Database::open(&path).unwrap();
    let err = db.traces().unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "corrupt database: trace \"stencil\": segment file {}: is {} bytes long, but the catalog \
             recorded {len} (truncated or overwritten) (drop the damaged trace, or restore its file)",
            segment.display(),
            len - 10
        )
    );
    // The other traces still answer; the damaged one says why it cannot.
    assert_eq!(db.trace("ring").unwrap().info().processes, 4);
    assert!(db
        .trace("stencil")
        .err()
        .unwrap()
        .to_string()
        .contains("1.seg"));
    db.drop_trace("stencil").unwrap();
    assert!(!segment.exists());
    assert_eq!(db.trace_names().unwrap(), vec!["cg", "ring"]);
}

#[test]
fn an_old_database_is_refused_with_a_request_to_reimport() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old");
    {
        // Format 3 kept everything in sled, at the folder's top.
        let raw = sled::Config::new()
            .path(&path)
            .flush_every_ms(None)
            .open()
            .unwrap();
        raw.insert("format_version", &3u32.to_le_bytes()).unwrap();
        raw.flush().unwrap();
    }
    let err = Database::open(&path).err().expect("refused").to_string();
    assert_eq!(
        err,
        format!(
            "database {}: was written with storage format version 3, but this mtfdb reads version {}; \
             re-import its traces with a matching mtfdb",
            path.display(),
            mtfdb::store::FORMAT_VERSION
        )
    );
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 48,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Random single-bit flips anywhere in any file.
    #[test]
    fn a_random_flip_never_changes_an_answer(which in 0usize..1000, at in 0.0f64..1.0, bit in 0u8..8) {
        let (dir, path, expected) = PRISTINE.with(|p| p.clone());
        let _ = dir;
        let all = files(&path);
        let rel = &all[which % all.len()];
        let len = std::fs::metadata(path.join(rel)).unwrap().len();
        prop_assume!(len > 0);
        let used = used_len(&path.join(rel));
        let offset = ((used as f64 * at) as u64).min(used - 1);
        trial(&path, &expected, rel, Damage::Flip(offset, bit));
    }
}

thread_local! {
    /// One pristine database per test thread, shared by the property test's cases.
    static PRISTINE: (std::rc::Rc<tempfile::TempDir>, PathBuf, String) = {
        let (dir, path, expected) = pristine();
        (std::rc::Rc::new(dir), path, expected)
    };
}

#[test]
fn dropping_a_trace_gives_its_space_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Database::open(&path).unwrap();
    import_generated(&db, "small", Scenario::Ring, 4, 3);
    let before = du(&path);
    import_generated(&db, "big", Scenario::Stencil2d, 64, 1000);
    let with = du(&path);
    assert!(
        with > before + 4 * 1024 * 1024,
        "the import added {} bytes",
        with - before
    );
    db.drop_trace("big").unwrap();
    let after = du(&path);
    assert!(
        after.abs_diff(before) < 1024 * 1024,
        "before the import {before} bytes, with it {with}, after the drop {after}"
    );
    let reported = db.size_on_disk().unwrap();
    assert!(
        reported.abs_diff(after) < 1024 * 1024,
        "size_on_disk says {reported}, the files hold {after}"
    );
    drop(db);
    assert!(du(&path).abs_diff(before) < 1024 * 1024);
}

#[test]
fn a_result_stored_under_an_older_schema_is_recomputed() {
    #[derive(serde::Serialize, serde::Deserialize)]
    struct TopologyV0 {
        description: String,
    }
    impl mtfdb::store::StoredResult for TopologyV0 {
        const SCHEMA_VERSION: u32 = 0;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    import_generated(&db, "t", Scenario::Stencil2d, 16, 3);
    let trace = db.trace("t").unwrap();
    let key = structure::topology_key(None, None, &structure::TopologyParams::default());
    trace
        .put_result(
            &key,
            &TopologyV0 {
                description: "stored by an older build".into(),
            },
        )
        .unwrap();
    assert!(trace
        .result::<structure::TopologyResult>(&key)
        .unwrap()
        .is_none());
    let got = structure::topology_of(
        &trace,
        None,
        None,
        &structure::TopologyParams::default(),
        false,
    )
    .unwrap();
    let fresh = structure::topology_of(
        &trace,
        None,
        None,
        &structure::TopologyParams::default(),
        true,
    )
    .unwrap();
    assert_eq!(got, fresh);
    assert!(got.topology.is_some(), "{}", got.description);
    assert_ne!(got.description, "stored by an older build");
    assert_eq!(
        trace.result::<structure::TopologyResult>(&key).unwrap(),
        Some(fresh)
    );
}

/// A tmpfs mounted for one test, unmounted when it goes.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        if !root {
            return None;
        }
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_fails_the_import_cleanly_and_keeps_the_earlier_traces() {
    let dir = tempfile::tempdir().unwrap();
    let Some(_fs) = Tmpfs::mount(dir.path(), "8m") else {
        println!("skipped: mounting a small tmpfs needs root and a working mount");
        return;
    };
    let path = dir.path().join("db");
    {
        let db = Database::open(&path).unwrap();
        for (name, scenario) in [("ring", Scenario::Ring), ("stencil", Scenario::Stencil2d)] {
            import_generated(&db, name, scenario, 9, 3);
        }
    }
    let expected = observe(&path).unwrap();
    let db = Database::open(&path).unwrap();
    let started = Instant::now();
    let err = db
        .import_events("huge", |sink| {
            generate(&GenConfig::new(Scenario::Stencil2d, 64, 4000), sink).map(|_| ())
        })
        .unwrap_err()
        .to_string();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(30), "failing took {took:?}");
    let partial = format!("{}/import-", path.join("segments").display());
    assert!(
        err.starts_with(&format!("storage error: writing {partial}"))
            && err.contains(".partial failed: No space left on device (os error 28)")
            && err.ends_with(
            "the import was abandoned and nothing of it was kept (the other traces are untouched)"
        ),
        "{err}"
    );
    // The space is back, the database unchanged, in this process and the next.
    assert_eq!(db.trace_names().unwrap(), vec!["ring", "stencil"]);
    let segments: Vec<String> = std::fs::read_dir(path.join("segments"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        segments.len(),
        2,
        "only the two traces' segments: {segments:?}"
    );
    drop(db);
    assert_eq!(observe(&path).unwrap(), expected);
    // And with room again, the next import succeeds.
    let db = Database::open(&path).unwrap();
    import_generated(&db, "after", Scenario::Ring, 4, 3);
    assert_eq!(db.trace_names().unwrap(), vec!["after", "ring", "stencil"]);
}
