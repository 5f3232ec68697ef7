//! Every command that writes a file the user names (`report`, `query -o`, `gen`, `export` in
//! each format) acts only on what it creates: a regular file is replaced whole, a link is
//! followed, a device or FIFO is written in place and never replaced or removed, and a killed
//! export leaves the earlier file whole (`src/export/output.rs`).

mod common;

use std::fs;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use mtfdb::gen::{GenConfig, Scenario};

/// The marker in the name of a temporary file an output writes beside its target.
const TEMP_MARKER: &str = ".mtfdb-tmp-";

/// A database holding a small generated trace named `t`, in a fresh folder.
fn small_db() -> (tempfile::TempDir, PathBuf) {
    let config = GenConfig::new(Scenario::Stencil2d, 4, 3);
    let (dir, db) = common::generated_db(&config);
    // The binary opens the database itself.
    drop(db);
    let path = dir.path().join("db");
    (dir, path)
}

/// Every command that writes to `-o`, with its arguments for the output `out`. Parquet is
/// last: it writes a folder, so a device, FIFO or file at `out` is refused.
fn commands(out: &Path) -> Vec<(&'static str, Vec<String>)> {
    let out = out.to_str().unwrap().to_string();
    let args = |a: &[&str]| -> Vec<String> {
        a.iter()
            .map(|s| s.to_string())
            .chain(["-o".to_string(), out.clone()])
            .collect()
    };
    vec![
        ("report", args(&["report", "t"])),
        (
            "query --format svg",
            args(&[
                "query",
                "SELECT COMMUNICATION MATRIX",
                "--trace",
                "t",
                "--format",
                "svg",
            ]),
        ),
        (
            "query -o (table)",
            args(&["query", "SELECT OPERATIONS", "--trace", "t"]),
        ),
        (
            "gen",
            args(&["gen", "ring", "--ranks", "4", "--iterations", "2"]),
        ),
        ("export mtf", args(&["export", "t", "--format", "mtf"])),
        ("export gxl", args(&["export", "t", "--format", "gxl"])),
        (
            "export chrome",
            args(&["export", "t", "--format", "chrome"]),
        ),
        (
            "export parquet",
            args(&["export", "t", "--format", "parquet"]),
        ),
    ]
}

fn mtfdb(db: &Path, args: &[String]) -> Output {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    common::mtfdb_output(db, &args)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `args` and expects success.
fn ok(what: &str, db: &Path, args: &[String]) {
    let o = mtfdb(db, args);
    assert!(
        o.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        stderr(&o)
    );
}

/// What each command (but parquet) writes to a fresh regular file, by command.
fn reference_outputs(dir: &Path, db: &Path) -> Vec<Vec<u8>> {
    let reference = dir.join("reference.out");
    commands(&reference)
        .into_iter()
        .filter(|(what, _)| *what != "export parquet")
        .map(|(what, args)| {
            ok(what, db, &args);
            let bytes = fs::read(&reference).unwrap();
            fs::remove_file(&reference).unwrap();
            assert!(!bytes.is_empty(), "{what} wrote nothing");
            bytes
        })
        .collect()
}

/// The names of the temporary files an output left in `dir`.
fn leftovers(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(TEMP_MARKER) || n.starts_with(".mtfdb-export-"))
        .collect()
}

/// True when the tests run as root (the only user who may make device files).
fn is_root() -> bool {
    // /proc/self belongs to the process's effective user.
    fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// A character device `major`:`minor` at `path`, made by the test.
fn make_device(path: &Path, major: u32, minor: u32) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o666),
        rustix::fs::makedev(major, minor),
    )
    .unwrap();
}

/// Asserts that `path` is still the character device `major`:`minor`.
fn assert_device(path: &Path, major: u32, minor: u32, what: &str) {
    let meta = fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{what}: {} is gone: {e}", path.display()));
    assert!(
        meta.file_type().is_char_device(),
        "{what}: {} is no longer a character device",
        path.display()
    );
    assert_eq!(
        meta.rdev(),
        rustix::fs::makedev(major, minor),
        "{what}: the device's numbers changed"
    );
}

#[test]
fn every_output_to_a_null_device_writes_in_place_and_leaves_the_device() {
    if !is_root() {
        println!("skipped: making a device file needs root");
        return;
    }
    let (dir, db) = small_db();
    let null = dir.path().join("null");
    make_device(&null, 1, 3);
    for (what, args) in commands(&null) {
        let o = mtfdb(&db, &args);
        if what == "export parquet" {
            assert_eq!(o.status.code(), Some(1), "{what}");
            assert!(
                stderr(&o).contains("not a directory"),
                "{what}: {}",
                stderr(&o)
            );
        } else {
            assert!(o.status.success(), "{what}: {}", stderr(&o));
        }
        assert_device(&null, 1, 3, what);
        assert!(leftovers(dir.path()).is_empty(), "{what}");
    }
}

#[test]
fn every_output_to_dev_full_fails_with_the_path_and_leaves_the_device() {
    if !is_root() {
        println!("skipped: making a device file needs root");
        return;
    }
    let (dir, db) = small_db();
    let full = dir.path().join("full");
    make_device(&full, 1, 7);
    for (what, args) in commands(&full) {
        let o = mtfdb(&db, &args);
        assert_eq!(o.status.code(), Some(1), "{what}: {}", stderr(&o));
        let err = stderr(&o);
        let why = if what == "export parquet" {
            "not a directory"
        } else {
            "No space left on device (os error 28)"
        };
        assert!(
            err.starts_with(&format!("error: {}: ", full.display())) && err.contains(why),
            "{what}: {err}"
        );
        assert_device(&full, 1, 7, what);
        assert!(leftovers(dir.path()).is_empty(), "{what}");
    }
}

#[test]
fn every_output_to_a_fifo_writes_its_bytes_into_the_fifo() {
    let (dir, db) = small_db();
    let expected = reference_outputs(dir.path(), &db);
    let fifo = dir.path().join("fifo");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap();
    for ((what, args), expected) in commands(&fifo).into_iter().zip(expected) {
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                fs::File::open(&fifo)
                    .unwrap()
                    .read_to_end(&mut bytes)
                    .unwrap();
                bytes
            })
        };
        let o = mtfdb(&db, &args);
        // A command that never opened the FIFO would leave the reader waiting: a writer of
        // our own that writes nothing lets it see the end.
        while !reader.is_finished() {
            use std::os::unix::fs::OpenOptionsExt;
            let _ = fs::OpenOptions::new()
                .write(true)
                .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
                .open(&fifo);
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(o.status.success(), "{what}: {}", stderr(&o));
        let got = reader.join().unwrap();
        assert!(got == expected, "{what}: the FIFO got other bytes");
        assert!(
            fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(),
            "{what}: the FIFO was replaced"
        );
        assert!(leftovers(dir.path()).is_empty(), "{what}");
    }
    // A Parquet export needs a folder: refused without opening (nor removing) the FIFO.
    let parquet = &commands(&fifo)[7];
    let o = mtfdb(&db, &parquet.1);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("not a directory"), "{}", stderr(&o));
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
}

#[test]
fn dev_stdout_writes_to_the_pipe_and_appends_to_the_file_standard_output_is() {
    let (dir, db) = small_db();
    let expected = reference_outputs(dir.path(), &db);
    let stdout = Path::new("/dev/stdout");
    for ((what, args), expected) in commands(stdout).into_iter().zip(expected) {
        // Standard output is a pipe: what the command says after the output follows it.
        let o = mtfdb(&db, &args);
        assert!(o.status.success(), "{what}: {}", stderr(&o));
        assert!(o.stdout.starts_with(&expected), "{what}: other bytes");
        assert!(fs::symlink_metadata(stdout)
            .unwrap()
            .file_type()
            .is_symlink());
    }
    // Standard output is a file opened to append (`>> log`): what it held stays.
    let log = dir.path().join("log");
    fs::write(&log, "earlier\n").unwrap();
    let inode = fs::metadata(&log).unwrap().ino();
    let (what, args) = commands(stdout).swap_remove(4);
    assert_eq!(what, "export mtf");
    let o = Command::new(env!("CARGO_BIN_EXE_mtfdb"))
        .arg("--db")
        .arg(&db)
        .args(&args)
        .env_remove("MTFDB_DB")
        .stdout(fs::OpenOptions::new().append(true).open(&log).unwrap())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let held = fs::read(&log).unwrap();
    let mtf = &reference_outputs(dir.path(), &db)[4];
    assert!(
        held.starts_with(b"earlier\n"),
        "the earlier lines were lost"
    );
    assert!(
        held[b"earlier\n".len()..].starts_with(mtf),
        "the export is not after them"
    );
    assert_eq!(
        fs::metadata(&log).unwrap().ino(),
        inode,
        "the file was replaced"
    );
    assert!(leftovers(dir.path()).is_empty());
}

#[test]
fn every_output_through_a_symlink_replaces_the_file_it_leads_to_and_keeps_the_link() {
    let (dir, db) = small_db();
    let expected = reference_outputs(dir.path(), &db);
    let real = dir.path().join("real");
    fs::create_dir(&real).unwrap();
    let target = real.join("target.out");
    let link = dir.path().join("link.out");
    // A relative link, followed from the link's folder.
    std::os::unix::fs::symlink("real/target.out", &link).unwrap();
    for (i, ((what, args), expected)) in commands(&link).into_iter().zip(expected).enumerate() {
        // Dangling for the first command (the file it names is created), then a file.
        assert_eq!(target.exists(), i > 0, "{what}");
        ok(what, &db, &args);
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink(),
            "{what}: the link was replaced"
        );
        assert_eq!(
            fs::read_link(&link).unwrap(),
            Path::new("real/target.out"),
            "{what}"
        );
        assert!(
            fs::read(&target).unwrap() == expected,
            "{what}: other bytes"
        );
        assert!(leftovers(dir.path()).is_empty(), "{what}");
        assert!(leftovers(&real).is_empty(), "{what}");
    }
    // Parquet: a link to a folder is followed too, the tables go in the folder.
    let folder_link = dir.path().join("tables");
    let tables = dir.path().join("real-tables");
    fs::create_dir(&tables).unwrap();
    std::os::unix::fs::symlink(&tables, &folder_link).unwrap();
    let parquet = commands(&folder_link).pop().unwrap();
    ok(parquet.0, &db, &parquet.1);
    assert!(fs::symlink_metadata(&folder_link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(tables.join("operations/trace=t").is_dir());
}

#[test]
fn every_output_over_an_existing_file_replaces_it_whole_and_keeps_its_permissions() {
    let (dir, db) = small_db();
    let expected = reference_outputs(dir.path(), &db);
    let out = dir.path().join("existing.out");
    for ((what, args), expected) in commands(&out).into_iter().zip(expected) {
        // Longer than any output, so that a write in place would leave its tail.
        fs::write(&out, vec![b'x'; expected.len() + 4096]).unwrap();
        fs::set_permissions(&out, fs::Permissions::from_mode(0o640)).unwrap();
        ok(what, &db, &args);
        assert!(
            fs::read(&out).unwrap() == expected,
            "{what}: not replaced whole"
        );
        let meta = fs::symlink_metadata(&out).unwrap();
        assert!(meta.file_type().is_file(), "{what}");
        assert_eq!(meta.permissions().mode() & 0o777, 0o640, "{what}");
        assert!(leftovers(dir.path()).is_empty(), "{what}");
    }
}

#[test]
fn an_output_that_fails_half_way_leaves_the_existing_file_and_no_temporary_file() {
    let (dir, db) = small_db();
    let out = dir.path().join("existing.out");
    for (what, args) in commands(&out) {
        if what == "export parquet" {
            continue;
        }
        fs::write(&out, "the earlier output\n").unwrap();
        // A file-size limit of 1 KiB (every output here is longer) makes the writing fail as
        // a full disk would (the signal that would kill the process is ignored, so the write
        // returns an error).
        let mut script = format!(
            "trap '' XFSZ; ulimit -f 1; exec '{}' --db '{}'",
            env!("CARGO_BIN_EXE_mtfdb"),
            db.display()
        );
        for a in &args {
            script.push_str(&format!(" '{a}'"));
        }
        let o = Command::new("sh").args(["-c", &script]).output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{what}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!("{}: File too large", out.display())),
            "{what}: {}",
            stderr(&o)
        );
        assert_eq!(
            fs::read_to_string(&out).unwrap(),
            "the earlier output\n",
            "{what}"
        );
        assert!(leftovers(dir.path()).is_empty(), "{what}");
    }
}

/// Runs `mtfdb export` of trace `name` with `args`, and kills it (SIGKILL) once the
/// temporary output in `dir` holds more than 2 MiB; fails if the export ends first.
fn kill_export_half_way(db: &Path, dir: &Path, name: &str, args: &[&str]) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mtfdb"))
        .arg("--db")
        .arg(db)
        .args(["export", name])
        .args(args)
        .env_remove("MTFDB_DB")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the export finished before it could be killed"
        );
        let written: u64 = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.contains(TEMP_MARKER) || n.starts_with(".mtfdb-export-")
            })
            .map(|e| size_of(&e.path()))
            .sum();
        if written > 2 << 20 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the export wrote nothing"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Bytes in the file or folder at `p`.
fn size_of(p: &Path) -> u64 {
    match fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => fs::read_dir(p)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| size_of(&e.path())).sum())
            .unwrap_or(0),
        Ok(m) => m.len(),
        Err(_) => 0,
    }
}

#[test]
fn a_killed_export_leaves_the_earlier_file_whole_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let gen = |scenario: &str, ranks: &str, iterations: &str, out: &Path| {
        let args: Vec<String> = [
            "gen",
            scenario,
            "--ranks",
            ranks,
            "--iterations",
            iterations,
            "-o",
            out.to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        ok("gen", &db, &args);
    };
    let small = dir.path().join("small.mtf");
    let big = dir.path().join("big.mtf");
    gen("ring", "4", "5", &small);
    // Large enough that its export takes a while (about 100 MB of MTF text, 25 MB of Parquet).
    gen("stencil2d", "64", "1500", &big);
    for (file, name) in [(&small, "small"), (&big, "big")] {
        let args: Vec<String> = ["import", file.to_str().unwrap(), "--name", name]
            .iter()
            .map(|s| s.to_string())
            .collect();
        ok("import", &db, &args);
    }
    let out_dir = dir.path().join("out");
    fs::create_dir(&out_dir).unwrap();
    let target = out_dir.join("exported.mtf");

    // Nothing there before: nothing there after, but a hidden temporary file.
    kill_export_half_way(&db, &out_dir, "big", &["-o", target.to_str().unwrap()]);
    assert!(!target.exists(), "a killed export published its output");
    let left = leftovers(&out_dir);
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].starts_with(".exported.mtf.mtfdb-tmp-"), "{left:?}");
    fs::remove_file(out_dir.join(&left[0])).unwrap();

    // A complete earlier export there: still there, whole, and it imports as what it was.
    let args: Vec<String> = ["export", "small", "-o", target.to_str().unwrap()]
        .iter()
        .map(|s| s.to_string())
        .collect();
    ok("export small", &db, &args);
    let earlier = fs::read(&target).unwrap();
    kill_export_half_way(&db, &out_dir, "big", &["-o", target.to_str().unwrap()]);
    assert!(
        fs::read(&target).unwrap() == earlier,
        "the earlier export changed"
    );
    let args: Vec<String> = ["import", target.to_str().unwrap(), "--name", "again"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    ok("import again", &db, &args);
    let database = mtfdb::Database::open(&db).unwrap();
    assert_eq!(
        database.trace("again").unwrap().info().summary,
        database.trace("small").unwrap().info().summary,
        "the file at the target is the small trace, whole"
    );
    drop(database);

    // A Parquet export killed half way puts no table of the trace in place.
    let tables = dir.path().join("tables");
    fs::create_dir(&tables).unwrap();
    kill_export_half_way(
        &db,
        &tables,
        "big",
        &["--format", "parquet", "-o", tables.to_str().unwrap()],
    );
    let left = leftovers(&tables);
    assert!(
        left.len() == 1 && left[0].starts_with(".mtfdb-export-"),
        "{left:?}"
    );
    for table in mtfdb::export::parquet::TABLES {
        assert!(
            !mtfdb::export::parquet::table_dir(&tables, table, "big").exists(),
            "{table}"
        );
    }
}

/// `query -o FILE` writes what standard output would show: a table with units a person reads
/// (or the exact values with `--units off`), CSV and JSON the exact nanoseconds.
#[test]
fn a_table_written_to_a_file_has_units_and_csv_and_json_the_exact_values() {
    let (dir, db) = small_db();
    let out = dir.path().join("out");
    let write = |extra: &[&str]| -> String {
        let mut args: Vec<String> = [
            "query",
            "SELECT SUM(DURATION) FROM OPERATIONS",
            "--trace",
            "t",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        args.extend(["-o".to_string(), out.to_str().unwrap().to_string()]);
        ok("query -o", &db, &args);
        fs::read_to_string(&out).unwrap()
    };
    let csv = write(&["--format", "csv"]);
    let exact: u64 = csv.lines().nth(1).unwrap().parse().unwrap();
    let json: serde_json::Value = serde_json::from_str(&write(&["--format", "json"])).unwrap();
    assert_eq!(json[0]["sum(duration)"], exact);
    let table = write(&[]);
    let cell = table.lines().nth(2).unwrap().trim().to_string();
    assert_eq!(cell, mtfdb::units::duration(exact as f64), "{table}");
    assert!(!table.contains(&exact.to_string()), "{table}");
    let raw = write(&["--units", "off"]);
    assert_eq!(
        raw.lines().nth(2).unwrap().trim(),
        exact.to_string(),
        "{raw}"
    );
}
