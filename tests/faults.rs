//! Faults a database must survive: a full disk under every command that writes, processes
//! killed while the disk is full, a catalog deleted, truncated or rolled back (found by
//! `mtfdb check`, rebuilt by `--repair`), a drop while other processes read, read-only
//! media. The tests that mount a small tmpfs need root; without it they say so and pass.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{mtfdb_output as mtfdb, succeeded as ok, text, EXAMPLE_TRACE as EXAMPLE};

/// The answers a user checks first: the traces, their counts, and a view's rows.
fn answers(db: &Path) -> String {
    let mut out = ok(mtfdb(db, &["traces"]));
    for t in ["a", "b"] {
        out += &ok(mtfdb(
            db,
            &[
                "query",
                "SELECT COUNT(*), SUM(SIZE) FROM MESSAGES GROUP BY PROCESS",
                "--trace",
                t,
                "--format",
                "csv",
            ],
        ));
    }
    out
}

/// `mtfdb ARGS` on `db`, killed and reported as hung if it runs past `limit`.
fn run_within(db: &Path, args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mtfdb"))
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("MTFDB_DB")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "mtfdb {args:?} hung for {limit:?} (killed): {}{}",
                text(&out.stdout),
                text(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| text(&o.stdout).trim() == "0")
}

/// A tmpfs of a few MiB mounted on a fresh folder, unmounted when dropped.
struct Tmpfs {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Tmpfs {
    /// `None`, having said why, unless this runs as root and may mount.
    fn new(mib: u32, test: &str) -> Option<Tmpfs> {
        if !is_root() {
            eprintln!("{test}: skipped: mounting a tmpfs needs root (CI runs as root)");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("fs");
        std::fs::create_dir(&root).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(&root)
            .status()
            .unwrap();
        if !status.success() {
            eprintln!("{test}: skipped: this machine does not let root mount a tmpfs");
            return None;
        }
        Some(Tmpfs { _dir: dir, root })
    }

    /// Fills the file system to the last byte; returns the filler to remove later.
    fn fill(&self) -> PathBuf {
        use std::io::Write;
        let filler = self.root.join("filler");
        let mut f = std::fs::File::create(&filler).unwrap();
        let block = vec![0xa5u8; 64 * 1024];
        loop {
            if f.write_all(&block).is_err() {
                break;
            }
        }
        // The last partial block too.
        for _ in 0..64 {
            if f.write_all(&block[..1024]).is_err() {
                break;
            }
        }
        let _ = f.sync_all();
        filler
    }

    fn remount_read_only(&self) {
        let status = Command::new("mount")
            .args(["-o", "remount,ro"])
            .arg(&self.root)
            .status()
            .unwrap();
        assert!(status.success(), "remount read-only");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.root).status();
    }
}

/// Imports the example as `a` and `b` into `db`.
fn two_traces(db: &Path) {
    ok(mtfdb(db, &["import", EXAMPLE, "--name", "a"]));
    ok(mtfdb(db, &["import", EXAMPLE, "--name", "b"]));
}

/// Files in `dir` other than those named in `keep`.
fn stray_files(dir: &Path, keep: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !keep.contains(&n.as_str()))
        .collect();
    v.sort();
    v
}

#[test]
fn every_write_command_fails_cleanly_on_a_full_disk_and_the_database_works_once_space_is_back() {
    let Some(fs) = Tmpfs::new(48, "full disk") else {
        return;
    };
    let db = fs.root.join("db");
    two_traces(&db);
    let before = answers(&db);
    let filler = fs.fill();
    let out = |name: &str| fs.root.join(name).to_string_lossy().into_owned();
    let limit = Duration::from_secs(60);
    let writes: Vec<(&str, Vec<String>)> = vec![
        (
            "import",
            vec!["import".into(), EXAMPLE.into(), "--name".into(), "c".into()],
        ),
        ("drop", vec!["drop".into(), "b".into()]),
        (
            "CREATE VIEW",
            vec![
                "query".into(),
                "CREATE VIEW big AS SELECT ALL MESSAGES WHERE SIZE > 1000".into(),
                "--trace".into(),
                "a".into(),
            ],
        ),
        (
            "patterns",
            vec![
                "query".into(),
                "SELECT PATTERNS FOR PROCESS(0)".into(),
                "--trace".into(),
                "a".into(),
            ],
        ),
        (
            "phases",
            vec![
                "query".into(),
                "SELECT PHASES".into(),
                "--trace".into(),
                "a".into(),
            ],
        ),
        (
            "loops",
            vec![
                "query".into(),
                "SELECT LOOPS FOR PROCESS(0)".into(),
                "--trace".into(),
                "a".into(),
            ],
        ),
        (
            "wait states",
            vec![
                "query".into(),
                "SELECT WAIT STATES".into(),
                "--trace".into(),
                "a".into(),
            ],
        ),
        (
            "global model",
            vec![
                "query".into(),
                "SELECT GLOBAL MODEL".into(),
                "--trace".into(),
                "a".into(),
            ],
        ),
        (
            "topology",
            vec![
                "query".into(),
                "SELECT TOPOLOGY".into(),
                "--trace".into(),
                "a".into(),
            ],
        ),
        (
            "critical path",
            vec![
                "query".into(),
                "SELECT CRITICAL PATH".into(),
                "--trace".into(),
                "a".into(),
            ],
        ),
        (
            "report",
            vec!["report".into(), "a".into(), "-o".into(), out("report.html")],
        ),
        (
            "picture",
            vec![
                "query".into(),
                "SELECT ALL MESSAGES".into(),
                "--trace".into(),
                "a".into(),
                "--format".into(),
                "svg".into(),
                "-o".into(),
                out("m.svg"),
            ],
        ),
        (
            "export mtf",
            vec![
                "export".into(),
                "a".into(),
                "--format".into(),
                "mtf".into(),
                "-o".into(),
                out("a.mtf"),
            ],
        ),
        (
            "export gxl",
            vec![
                "export".into(),
                "a".into(),
                "--format".into(),
                "gxl".into(),
                "-o".into(),
                out("a.gxl"),
            ],
        ),
        (
            "export chrome",
            vec![
                "export".into(),
                "a".into(),
                "--format".into(),
                "chrome".into(),
                "-o".into(),
                out("a.json"),
            ],
        ),
        (
            "export parquet",
            vec![
                "export".into(),
                "a".into(),
                "--format".into(),
                "parquet".into(),
                "-o".into(),
                out("pq"),
            ],
        ),
        (
            "gen",
            vec![
                "gen".into(),
                "ring".into(),
                "--ranks".into(),
                "64".into(),
                "-o".into(),
                out("g.mtf"),
            ],
        ),
    ];
    for (what, args) in &writes {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = run_within(&db, &args, limit);
        let err = text(&o.stderr);
        assert!(
            !o.status.success(),
            "{what} on a full disk succeeded: {}{err}",
            text(&o.stdout)
        );
        assert!(
            err.contains("No space left on device") && !err.contains("panicked"),
            "{what}: the error says why: {err}"
        );
        assert_eq!(answers(&db), before, "{what} left the database as it was");
        assert_eq!(
            stray_files(&fs.root, &["db", "filler"]),
            Vec::<String>::new(),
            "{what} left nothing beside its output"
        );
    }
    std::fs::remove_file(&filler).unwrap();
    // Space is back: the database is sound and every write works.
    ok(mtfdb(&db, &["check"]));
    assert_eq!(answers(&db), before);
    for (what, args) in &writes {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = run_within(&db, &args, limit);
        assert!(
            o.status.success(),
            "{what} once space is back: {}{}",
            text(&o.stdout),
            text(&o.stderr)
        );
    }
    let traces = ok(mtfdb(&db, &["traces"]));
    assert!(traces.contains('a') && traces.contains('c') && !traces.contains("\nb "));
    let view = ok(mtfdb(
        &db,
        &[
            "query",
            "SELECT COUNT(*) FROM MESSAGES IN VIEW big",
            "--trace",
            "a",
            "--format",
            "csv",
        ],
    ));
    assert!(
        view.lines().nth(1).is_some_and(|n| n.trim() != "0"),
        "{view}"
    );
    ok(mtfdb(&db, &["check"]));
}

#[test]
fn writers_killed_while_the_disk_is_full_leave_every_trace_readable() {
    let Some(fs) = Tmpfs::new(48, "killed while full") else {
        return;
    };
    let db = fs.root.join("db");
    two_traces(&db);
    ok(mtfdb(
        &db,
        &[
            "query",
            "CREATE VIEW early AS SELECT ALL MESSAGES",
            "--trace",
            "a",
        ],
    ));
    let before = answers(&db);
    let filler = fs.fill();
    let writes: [&[&str]; 4] = [
        &["drop", "b"],
        &[
            "query",
            "CREATE VIEW v AS SELECT ALL MESSAGES",
            "--trace",
            "a",
        ],
        &["query", "SELECT PATTERNS FOR PROCESS(0)", "--trace", "b"],
        &["import", EXAMPLE, "--name", "c"],
    ];
    for (i, args) in writes.iter().cycle().take(24).enumerate() {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mtfdb"))
            .arg("--db")
            .arg(&db)
            .args(*args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(3 * (i as u64 % 8)));
        let _ = child.kill();
        let _ = child.wait();
        // Opened again while the disk is still full: it reads.
        assert_eq!(answers(&db), before, "after killing {args:?}");
    }
    std::fs::remove_file(&filler).unwrap();
    assert_eq!(answers(&db), before);
    let view = ok(mtfdb(
        &db,
        &[
            "query",
            "SELECT COUNT(*) FROM MESSAGES IN VIEW early",
            "--trace",
            "a",
            "--format",
            "csv",
        ],
    ));
    assert!(view.contains("1440"), "{view}");
    ok(mtfdb(&db, &["check"]));
}

/// A database holding `a` and `b`, a view of `a` and its stored patterns.
fn database_with_views() -> (tempfile::TempDir, PathBuf, String) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    two_traces(&db);
    ok(mtfdb(
        &db,
        &[
            "query",
            "CREATE VIEW big AS SELECT ALL MESSAGES WHERE SIZE > 1000",
            "--trace",
            "a",
        ],
    ));
    ok(mtfdb(
        &db,
        &["query", "SELECT PATTERNS FOR PROCESS(0)", "--trace", "a"],
    ));
    let before = answers(&db) + &view_rows(&db);
    (dir, db, before)
}

fn view_rows(db: &Path) -> String {
    ok(mtfdb(
        db,
        &[
            "query",
            "SELECT COUNT(*) FROM MESSAGES IN VIEW big",
            "--trace",
            "a",
            "--format",
            "csv",
        ],
    ))
}

/// `check` on a database whose catalog is as `damage` left it: not sound, saying what can
/// be recovered; `check --repair` brings back every trace and view; then sound.
fn repaired_after(damage: impl FnOnce(&Path), expect_in_check: &str) {
    let (_dir, db, before) = database_with_views();
    damage(&db);
    let o = mtfdb(&db, &["check"]);
    let report = text(&o.stdout) + &text(&o.stderr);
    assert!(!o.status.success(), "check finds the damage: {report}");
    assert!(report.contains(expect_in_check), "{report}");
    assert!(report.contains("--repair"), "{report}");
    assert!(
        !report.to_lowercase().contains("re-import") && !report.contains("new database"),
        "no advice to throw away intact data: {report}"
    );
    let repaired = ok(mtfdb(&db, &["check", "--repair"]));
    assert!(repaired.contains("repaired"), "{repaired}");
    assert_eq!(answers(&db) + &view_rows(&db), before);
    let again = ok(mtfdb(&db, &["check"]));
    assert!(again.contains("sound: 0 damaged, 0 recoverable"), "{again}");
}

#[test]
fn a_deleted_catalog_is_found_and_rebuilt_from_the_traces_files() {
    repaired_after(
        |db| {
            std::fs::remove_file(db.join("MANIFEST")).unwrap();
            // Every command says what happened and how to repair it.
            let o = mtfdb(db, &["traces"]);
            let err = text(&o.stderr);
            assert!(!o.status.success());
            assert!(
                err.contains("check --repair") && !err.contains("re-import"),
                "{err}"
            );
        },
        "recoverable",
    );
}

#[test]
fn a_truncated_catalog_is_found_and_rebuilt() {
    repaired_after(
        |db| {
            let path = db.join("MANIFEST");
            let bytes = std::fs::read(&path).unwrap();
            std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        },
        "damaged",
    );
}

#[test]
fn a_rolled_back_catalog_is_found_and_the_later_traces_and_views_added_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    ok(mtfdb(&db, &["import", EXAMPLE, "--name", "a"]));
    let old = std::fs::read(db.join("MANIFEST")).unwrap();
    ok(mtfdb(&db, &["import", EXAMPLE, "--name", "b"]));
    ok(mtfdb(
        &db,
        &[
            "query",
            "CREATE VIEW big AS SELECT ALL MESSAGES WHERE SIZE > 1000",
            "--trace",
            "a",
        ],
    ));
    let before = answers(&db) + &view_rows(&db);
    std::fs::write(db.join("MANIFEST"), old).unwrap();
    // The old catalog is consistent, so the database opens as it was then; the files of
    // what came later are kept, never removed as leftovers.
    let listed = ok(mtfdb(&db, &["traces"]));
    assert!(!listed.contains(" b "), "{listed}");
    let o = mtfdb(&db, &["check"]);
    let report = text(&o.stdout);
    assert!(!o.status.success(), "{report}");
    assert!(report.contains("recoverable  trace \"b\""), "{report}");
    assert!(report.contains("view \"big\""), "{report}");
    ok(mtfdb(&db, &["check", "--repair"]));
    assert_eq!(answers(&db) + &view_rows(&db), before);
    ok(mtfdb(&db, &["check"]));
}

#[test]
fn check_reads_every_byte_and_names_a_damaged_segment() {
    let (_dir, db, _) = database_with_views();
    assert!(ok(mtfdb(&db, &["check"])).contains("sound"));
    // A flipped bit in the middle of a segment: the cheap open check does not see it;
    // check reads every blob and does.
    let seg = std::fs::read_dir(db.join("segments"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "seg"))
        .unwrap();
    let mut bytes = std::fs::read(&seg).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x10;
    std::fs::write(&seg, bytes).unwrap();
    let o = mtfdb(&db, &["check"]);
    let report = text(&o.stdout);
    assert!(!o.status.success());
    assert!(
        report.contains("damaged") && report.contains("fail their checksum"),
        "{report}"
    );
    // Repair does not throw the damaged trace away.
    let _ = mtfdb(&db, &["check", "--repair"]);
    assert!(seg.exists());
}

#[test]
fn a_drop_in_another_process_never_makes_readers_call_the_database_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    two_traces(&db);
    let expected_a = ok(mtfdb(&db, &["info", "a"]));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let db = db.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut rounds = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || rounds < 3 {
                ok(mtfdb(&db, &["drop", "b"]));
                ok(mtfdb(&db, &["import", EXAMPLE, "--name", "b"]));
                rounds += 1;
            }
            rounds
        })
    };
    let start = Instant::now();
    let mut reads = 0;
    while start.elapsed() < Duration::from_secs(8) {
        for args in [
            &["info", "a"][..],
            &["traces"][..],
            &["query", "SELECT COUNT(*) FROM MESSAGES", "--trace", "a"][..],
        ] {
            let o = mtfdb(&db, args);
            let err = text(&o.stderr);
            assert!(
                o.status.success(),
                "{args:?} while b is dropped and re-imported: {err}"
            );
            if args[0] == "info" {
                assert_eq!(text(&o.stdout), expected_a);
            }
            reads += 1;
        }
        // A reader of b itself sees b whole, or no b at all, never a corrupt database.
        let o = mtfdb(
            &db,
            &[
                "query",
                "SELECT COUNT(*) FROM MESSAGES",
                "--trace",
                "b",
                "--format",
                "csv",
            ],
        );
        let err = text(&o.stderr);
        if o.status.success() {
            assert_eq!(text(&o.stdout), "count(*)\n1440\n");
        } else {
            assert!(
                !err.contains("corrupt") && !err.contains("damaged"),
                "reading b while it is dropped: {err}"
            );
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let rounds = writer.join().unwrap();
    assert!(rounds >= 3 && reads > 10);
    ok(mtfdb(&db, &["check"]));
}

#[test]
fn a_database_on_read_only_media_answers_every_statement_that_stores_nothing() {
    let Some(fs) = Tmpfs::new(48, "read-only media") else {
        return;
    };
    let db = fs.root.join("db");
    two_traces(&db);
    let before = answers(&db);
    let patterns_rw = {
        // On a copy that can be written: the answer to compare with.
        let copy = tempfile::tempdir().unwrap();
        let c = copy.path().join("db");
        two_traces(&c);
        ok(mtfdb(
            &c,
            &[
                "query",
                "SELECT PATTERNS FOR PROCESS(0)",
                "--trace",
                "a",
                "--format",
                "csv",
            ],
        ))
    };
    fs.remount_read_only();
    assert_eq!(answers(&db), before);
    ok(mtfdb(&db, &["info", "a"]));
    // An analysis answers without storing its result.
    assert_eq!(
        ok(mtfdb(
            &db,
            &[
                "query",
                "SELECT PATTERNS FOR PROCESS(0)",
                "--trace",
                "a",
                "--format",
                "csv"
            ]
        )),
        patterns_rw
    );
    let out = tempfile::tempdir().unwrap();
    let export = out.path().join("a.mtf");
    ok(mtfdb(
        &db,
        &[
            "export",
            "a",
            "--format",
            "mtf",
            "-o",
            export.to_str().unwrap(),
        ],
    ));
    assert!(std::fs::metadata(&export).unwrap().len() > 1000);
    ok(mtfdb(&db, &["check"]));
    for args in [
        &["import", EXAMPLE, "--name", "c"][..],
        &["drop", "b"][..],
        &[
            "query",
            "CREATE VIEW v AS SELECT ALL MESSAGES",
            "--trace",
            "a",
        ][..],
    ] {
        let o = mtfdb(&db, args);
        let err = text(&o.stderr);
        assert!(!o.status.success(), "{args:?} on read-only media");
        assert!(
            err.contains("read-only") && err.contains("needs write access"),
            "{err}"
        );
    }
    assert_eq!(answers(&db), before);
}

#[test]
fn a_second_writer_waits_for_the_first_then_says_who_holds_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    ok(mtfdb(&db, &["import", EXAMPLE, "--name", "a"]));
    // Hold the write lock as another writer would.
    let lock = std::fs::File::options()
        .write(true)
        .open(db.join("LOCK"))
        .unwrap();
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).unwrap();
    std::fs::write(db.join("LOCK"), "pid 4242 since 0 drop trace \"x\"\n").unwrap();
    let start = Instant::now();
    let o = mtfdb(&db, &["--busy-timeout", "0.5", "drop", "a"]);
    let waited = start.elapsed();
    let err = text(&o.stderr);
    assert!(!o.status.success());
    assert!(waited >= Duration::from_millis(500), "{waited:?}");
    assert!(
        err.contains("process 4242") && err.contains("--busy-timeout"),
        "{err}"
    );
    // Readers never wait for the writer.
    ok(mtfdb(&db, &["info", "a"]));
    drop(lock);
    ok(mtfdb(&db, &["drop", "a"]));
}
