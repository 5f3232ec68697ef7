//! `mtfdb export`: a stored trace written as MTF text or GXL and imported again is the same
//! trace (header, every operation, routine call, message, request link, collective instance
//! and anomaly, ids aside), gives the same answers to the statistics queries and to `info`,
//! and exporting the copy gives the same bytes. For generated scenarios, a hand-built trace
//! that uses every field and anomaly class, and every trace in `../shared/traces` that imports.

mod common;

use std::path::{Path, PathBuf};

use mtfdb::export::{export_file, Format};
use mtfdb::gen::{GenConfig, Scenario};
use mtfdb::ingest::EventSink;
use mtfdb::model::{OpKind, Operation, RoutineEvent, TraceHeader};
use mtfdb::query::Session;
use mtfdb::Database;

use common::contents::{answers, contents, info_lines, mtfdb, rich_trace};
use common::import_generated;

const FORMATS: [Format; 2] = [Format::MtfText, Format::Gxl];

// ---------------------------------------------------------------------------------------
// Everything a trace holds, with ids replaced by what does not depend on the import's order:
// operations by position (rank, thread, index), names instead of string ids.

/// Exports trace `name` of the database at `db` in `format`, imports the file as a new
/// trace, and checks that both are the same trace, answer the same, and export to the same
/// bytes. Returns the exported file's text.
fn round_trip(db: &Path, name: &str, format: Format, dir: &Path) -> String {
    let ext = format.name();
    let file = dir.join(format!("{name}.{ext}"));
    let copy = format!("{name}.{ext}-copy");
    {
        let database = Database::open(db).unwrap();
        let original = database.trace(name).unwrap();
        let stored = original.stored_bytes().unwrap();
        export_file(&original, format, &file).unwrap();
        assert_eq!(
            original.stored_bytes().unwrap(),
            stored,
            "export wrote to the store"
        );
        database
            .import(&file, Some(&copy))
            .unwrap_or_else(|e| panic!("{name} as {ext}: {e}"));
        let imported = database.trace(&copy).unwrap();
        assert_eq!(contents(&imported), contents(&original), "{name} as {ext}");
        let again = dir.join(format!("{name}-again.{ext}"));
        export_file(&imported, format, &again).unwrap();
        assert!(
            std::fs::read(&again).unwrap() == std::fs::read(&file).unwrap(),
            "{name}: export, import, export gave other bytes as {ext}"
        );
    }
    let mut session = Session::new(Database::open(db).unwrap());
    assert_eq!(
        answers(&mut session, &copy),
        answers(&mut session, name),
        "{name} as {ext}"
    );
    drop(session);
    let (a, b) = (info_lines(db, &copy), info_lines(db, name));
    let only = |x: &[String], y: &[String]| -> Vec<String> {
        x.iter()
            .filter(|l| !y.contains(l))
            .map(|l| l.chars().take(200).collect())
            .collect()
    };
    assert!(
        a == b,
        "{name} as {ext}: info differs: only in the copy {:?}, only in the original {:?}",
        only(&a, &b),
        only(&b, &a)
    );
    String::from_utf8(std::fs::read(&file).unwrap()).unwrap()
}

// ---------------------------------------------------------------------------------------
// Generated scenarios

#[test]
fn generated_scenarios_come_back_the_same_from_mtf_text_and_gxl() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    for (i, scenario) in Scenario::ALL.into_iter().enumerate() {
        let mut config = GenConfig::new(scenario, 16, 5);
        config.shuffle_ranks = i % 2 == 1;
        let name = scenario.to_string();
        let truth = {
            let database = Database::open(&db).unwrap();
            import_generated(&database, &config, &name)
        };
        for format in FORMATS {
            let text = round_trip(&db, &name, format, dir.path());
            // The file holds the generator's operations and routine events, one item each.
            let items = match format {
                Format::MtfText => text
                    .lines()
                    .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
                    .count() as u64,
                Format::Gxl => {
                    let ops = text
                        .lines()
                        .filter(|l| l.starts_with("<node id=\"o"))
                        .count() as u64;
                    let calls = text
                        .lines()
                        .filter(|l| l.starts_with("<node id=\"r"))
                        .count() as u64;
                    ops + 2 * calls
                }
                Format::Chrome => unreachable!("nothing reads a Chrome export back"),
                // A folder of tables, not a file: tests/parquet.rs.
                Format::Parquet => unreachable!("not one of FORMATS"),
            };
            assert_eq!(
                items,
                truth.operations + truth.routine_events,
                "{name} {format:?}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// A hand-built trace with every field, odd names, threads, locations and anomalies

/// The anomalies the hand-built trace's source reported.
const SOURCE_ANOMALIES: u64 = 8;

#[test]
fn every_field_name_thread_location_and_anomaly_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    {
        let database = Database::open(&db).unwrap();
        database
            .import_events("rich", |sink| rich_trace(sink))
            .unwrap();
        let t = database.trace("rich").unwrap();
        let s = t.summary();
        // What the import found itself, beside the source's anomalies.
        for (kind, n) in [
            ("send never received", 1),
            ("receive never matched", 1),
            ("incomplete collective", 1),
            ("wildcard receive never resolved", 2),
            ("missing MPI_Finalize", 2),
            ("routine never left", 1),
            ("crossed routine leave", 1),
            ("request never completed", 1),
            ("MPI call without its records", 2),
        ] {
            assert_eq!(s.anomaly_count(kind), n, "{kind}");
        }
        assert_eq!((s.messages, s.request_links, s.routine_calls), (1, 2, 5));
        assert_eq!(t.header().locations.len(), 3);
    }
    let text = round_trip(&db, "rich", Format::MtfText, dir.path());
    let anomaly_lines: Vec<&str> = text.lines().filter(|l| l.starts_with("anomaly ")).collect();
    assert_eq!(
        anomaly_lines.len() as u64,
        SOURCE_ANOMALIES + 1,
        "{anomaly_lines:#?}"
    );
    for line in [
        "anomaly CrossedLeave rank=0 thread=0 time=50 routine=crossed innermost=\"solve<int, \\\"x\\\">\"",
        "anomaly CallWithoutRecords op=0.1:1 rank=0 name=MPI_Send",
        "anomaly LengthMismatch send_op=0:1 recv_op=1:2 sent=1024 received=1000",
        "anomaly MissingFinalize rank=2",
        "anomaly RequestNeverCompleted op=0:1 rank=0 request=77",
        "anomaly UnclosedRoutine rank=0 routine=\"\"",
    ] {
        assert!(anomaly_lines.contains(&line), "{line} not in {anomaly_lines:#?}");
    }
    assert!(text.contains("location uncore\u{1}reader metric\n"));
    // The call recorded without its records keeps its flag; the import finds the anomaly.
    assert!(text.contains("\n0.1 5 6 MPI_Comm_rank rec=0\n"));
    let gxl = round_trip(&db, "rich", Format::Gxl, dir.path());
    let derived = gxl
        .matches("<attr name=\"derived\"><bool>true</bool>")
        .count() as u64;
    let source = gxl
        .matches("<attr name=\"derived\"><bool>false</bool>")
        .count() as u64;
    assert_eq!((derived, source), (7, SOURCE_ANOMALIES + 1));
    assert!(gxl.contains("<string>uncore\u{E000}0001reader</string>"));
    assert!(gxl.contains("<string>CUDA[0:13] &lt;stream&gt; &amp; &quot;x&quot;</string>"));
}

// ---------------------------------------------------------------------------------------
// Every real trace that imports

/// Where the real traces are: `../shared/traces` beside the crate.
fn shared_traces() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/traces");
    dir.is_dir().then_some(dir)
}

/// Every folder under `dir` (itself included), sorted, parents before children.
fn folders(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    entries.sort();
    for e in entries {
        out.extend(folders(&e));
    }
    out
}

/// Imports every trace under `root` that `Database::import` accepts (a folder, or else each
/// file of a folder), under a name made of its path; returns the names, and prints what it
/// skipped and why.
fn import_every_trace(db: &Database, root: &Path) -> Vec<(String, PathBuf)> {
    let mut imported: Vec<(String, PathBuf)> = Vec::new();
    for folder in folders(root) {
        if imported.iter().any(|(_, p)| folder.starts_with(p)) {
            continue;
        }
        let name = |p: &Path| {
            p.strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace(['/', '\\'], "_")
        };
        let files: Vec<PathBuf> = {
            let mut f: Vec<PathBuf> = std::fs::read_dir(&folder)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.is_file())
                .collect();
            f.sort();
            f
        };
        if files.is_empty() {
            continue;
        }
        match db.import(&folder, Some(&name(&folder))) {
            Ok(_) => {
                imported.push((name(&folder), folder.clone()));
                continue;
            }
            Err(e) => println!("skipped folder {}: {e}", folder.display()),
        }
        for file in files {
            match db.import(&file, Some(&name(&file))) {
                Ok(_) => imported.push((name(&file), file.clone())),
                Err(e) => println!(
                    "skipped {}: {}",
                    file.display(),
                    e.to_string().lines().next().unwrap_or_default()
                ),
            }
        }
    }
    imported
}

#[test]
fn every_real_trace_that_imports_comes_back_the_same_from_mtf_text_and_gxl() {
    let Some(root) = shared_traces() else {
        println!("skipped: ../shared/traces is absent");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let traces = import_every_trace(&Database::open(&db).unwrap(), &root);
    let names: Vec<&str> = traces.iter().map(|(n, _)| n.as_str()).collect();
    println!("round trips of: {names:?}");
    // Every trace of every format there: a reader that regresses fails here, not silently.
    for must in [
        "dumpi_testtrace",
        "otf1_jacobi",
        "paraver_lulesh_lulesh_7+1_with_uncores_sockets1+2.chop8.prv",
        "paraver_qsort_qsort_beo3.prv",
        "otf2_casita_1_ocl_deps",
        "otf2_casita_1_scorep-ompt-host-nested",
        "otf2_casita_1_xeonphi_jacobi_01",
        "otf2_casita_2_cuda_simple",
        "otf2_casita_2_jacobi_blame_cpu_015",
        "otf2_casita_4_mpi_ls_barr",
        "otf2_ping-pong",
        "otf2_ping-pong-papi",
        "otf2_mi300-hip",
    ] {
        assert!(names.contains(&must), "{must} did not import: {names:?}");
    }
    for (name, path) in &traces {
        for format in FORMATS {
            println!("{} as {}", path.display(), format.name());
            round_trip(&db, name, format, dir.path());
        }
    }
}

// ---------------------------------------------------------------------------------------
// Many routine calls: the enter order is sorted through a temporary file

#[test]
fn routine_calls_past_the_in_memory_sort_come_back_in_order() {
    // Two ranks, each a `main` around 75,000 `outer` calls, each holding a zero-length
    // `inner` call: 300,002 calls, more than one sort run (262,144). `main` is left last,
    // so the store's last chunk holds the call that must be entered first.
    const ITERATIONS: u64 = 75_000;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    {
        let database = Database::open(&db).unwrap();
        database
            .import_events("calls", |sink| {
                sink.header(&TraceHeader::world(2, "MPI_COMM_WORLD"))?;
                for (id, s) in ["main", "outer", "inner"].iter().enumerate() {
                    sink.string(id as u32, s)?;
                }
                let ev = |rank, time, routine, enter| RoutineEvent {
                    rank,
                    thread: 0,
                    time,
                    routine,
                    enter,
                };
                for rank in 0..2 {
                    sink.routine(&ev(rank, 0, 0, true))?;
                }
                for i in 0..ITERATIONS {
                    let t = 10 * i + 1;
                    for rank in 0..2u32 {
                        sink.routine(&ev(rank, t, 1, true))?;
                        sink.routine(&ev(rank, t, 2, true))?;
                        if i % 1000 == 0 {
                            // A message inside the zero-length call, at its time.
                            let mut op = Operation::new(rank, OpKind::Send, t, t);
                            if rank == 1 {
                                op.kind = OpKind::Recv;
                                (op.comm, op.source, op.recv_tag) = (Some(0), Some(0), Some(1));
                            } else {
                                (op.comm, op.dest, op.send_tag) = (Some(0), Some(1), Some(1));
                            }
                            sink.operation(&op)?;
                        }
                        sink.routine(&ev(rank, t, 2, false))?;
                        sink.routine(&ev(rank, t + 5, 1, false))?;
                    }
                }
                for rank in 0..2 {
                    sink.routine(&ev(rank, 10 * ITERATIONS, 0, false))?;
                }
                sink.finish()
            })
            .unwrap();
        let t = database.trace("calls").unwrap();
        assert_eq!(t.summary().routine_calls, 2 * (1 + 2 * ITERATIONS));
        assert_eq!(t.summary().messages, ITERATIONS / 1000);
    }
    let text = round_trip(&db, "calls", Format::MtfText, dir.path());
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    assert_eq!(
        &lines[..4],
        [
            "0 0 enter main",
            "1 0 enter main",
            "0 1 enter outer",
            "0 1 enter inner"
        ]
    );
    assert_eq!(
        &lines[4..6],
        ["0 1 1 Send c=0 to=1 tag=1", "0 1 leave inner"]
    );
}

// ---------------------------------------------------------------------------------------
// The command line, and damaged GXL

#[test]
fn the_export_command_writes_either_format_and_says_what_it_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    {
        let database = Database::open(&db).unwrap();
        import_generated(&database, &GenConfig::new(Scenario::Ring, 4, 3), "ring");
    }
    let gxl = dir.path().join("ring.gxl");
    let (ok, out, err) = mtfdb(&db, &["export", "ring", "-o", gxl.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(
        out.starts_with(&format!("exported \"ring\" to {} (gxl): ", gxl.display())),
        "{out}"
    );
    assert!(std::fs::read_to_string(&gxl)
        .unwrap()
        .contains("<gxl xmlns:xlink="));
    let text = dir.path().join("ring.txt");
    let (ok, _, err) = mtfdb(
        &db,
        &[
            "export",
            "ring",
            "--format",
            "mtf",
            "-o",
            text.to_str().unwrap(),
        ],
    );
    assert!(ok, "{err}");
    assert!(std::fs::read_to_string(&text)
        .unwrap()
        .starts_with("MTF 1\n"));
    let (ok, _, err) = mtfdb(&db, &["export", "ring", "-o", "ring.out"]);
    assert!(!ok);
    assert_eq!(
        err,
        "error: ring.out: say which format to write with --format mtf, gxl, parquet or chrome\n"
    );
    let (ok, _, err) = mtfdb(&db, &["export", "ring", "--format", "xml", "-o", "x"]);
    assert!(!ok);
    assert!(
        err.contains(
            "unknown export format \"xml\"; mtfdb exports to: mtf (MTF text), gxl (GXL graph)"
        ),
        "{err}"
    );
    // Both files import, detected from their content.
    let (ok, _, err) = mtfdb(&db, &["import", gxl.to_str().unwrap(), "--name", "g"]);
    assert!(ok, "{err}");
    let (ok, _, err) = mtfdb(&db, &["import", text.to_str().unwrap(), "--name", "m"]);
    assert!(ok, "{err}");
}

#[test]
fn damaged_gxl_is_refused_at_its_byte_offset_and_leaves_the_database_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let database = Database::open(&db).unwrap();
    import_generated(&database, &GenConfig::new(Scenario::Ring, 4, 2), "ring");
    let good = dir.path().join("ring.gxl");
    export_file(&database.trace("ring").unwrap(), Format::Gxl, &good).unwrap();
    let text = std::fs::read_to_string(&good).unwrap();
    let bad = dir.path().join("bad.gxl");
    let attempt = |content: &str| {
        std::fs::write(&bad, content).unwrap();
        let e = database.import(&bad, Some("bad")).unwrap_err().to_string();
        assert!(
            database.trace("bad").is_err(),
            "nothing of a failed import remains"
        );
        e
    };
    let path = bad.display().to_string();
    // Cut in the middle of an operation node.
    let op = text.find("<node id=\"o").unwrap();
    let e = attempt(&text[..op + 40]);
    assert!(e.starts_with(&format!("{path}: byte ")), "{e}");
    assert!(
        e.contains("the file ends inside a node") || e.contains("XML"),
        "{e}"
    );
    // An operation without its start time.
    let at = text[op..].find("<attr name=\"startTime\">").unwrap() + op;
    let end = text[at..].find("</attr>").unwrap() + at + "</attr>".len();
    let e = attempt(&format!("{}{}", &text[..at], &text[end..]));
    assert_eq!(
        e.lines().next().unwrap(),
        format!(
            "{path}: byte {op}: bad node: the {} node {:?} has no attribute startTime",
            node_class(&text[op..]),
            node_id(&text[op..])
        ),
    );
    // A number that is not one.
    let e = attempt(&text.replacen(
        "<attr name=\"rank\"><int>0</int>",
        "<attr name=\"rank\"><int>zero</int>",
        2,
    ));
    assert!(e.contains("bad node: the attribute rank of the Process node \"PRC0\" is not an int of 0 to 2^32-1"), "{e}");
    // Not XML at all after the root.
    let e = attempt("<gxl><graph id=\"g\"><node id=\"x\"><attr name=\"a\"><int>1</int></attrr></node></graph></gxl>");
    assert!(e.contains(": bad XML: the XML does not parse"), "{e}");
    // A declaration after the events.
    let processor = "<node id=\"PRCR9\"><type xlink:href=\"mtf.gxl#Processor\"/><attr name=\"processorId\"><int>9</int></attr><attr name=\"processorName\"><string>late</string></attr></node>\n";
    let close = text.find("</graph>").unwrap();
    let e = attempt(&format!("{}{processor}{}", &text[..close], &text[close..]));
    assert!(
        e.contains(&format!(
            "byte {close}: declaration after events: a Processor node (PRCR9)"
        )),
        "{e}"
    );
    // An operation the import's checks refuse (its rank is no process's) is placed at its
    // node, in the file.
    let rank = text[op..].find("<attr name=\"rank\"><int>").unwrap() + op;
    let e = attempt(&format!(
        "{}<attr name=\"rank\"><int>99{}",
        &text[..rank],
        &text[rank + "<attr name=\"rank\"><int>".len() + 1..]
    ));
    assert!(e.starts_with(&format!("{path}: byte {op}: ")), "{e}");
    assert!(e.contains("99"), "{e}");
    // A name's escape that is not one.
    let names = text.find("<string>").unwrap();
    let e = attempt(&format!(
        "{}<string>x\u{e000}zz{}",
        &text[..names],
        &text[names + "<string>".len()..]
    ));
    assert!(
        e.starts_with(&format!("{path}: byte ")) && e.contains("U+E000 escape"),
        "{e}"
    );
    assert_eq!(database.trace_names().unwrap(), vec!["ring"]);
}

/// The type of the node `text` starts with.
fn node_class(text: &str) -> String {
    let start = text.find("mtf.gxl#").unwrap() + "mtf.gxl#".len();
    let end = text[start..].find('"').unwrap() + start;
    text[start..end].to_string()
}

/// The id of the node `text` starts with.
fn node_id(text: &str) -> String {
    let start = text.find("id=\"").unwrap() + 4;
    let end = text[start..].find('"').unwrap() + start;
    text[start..end].to_string()
}

// ---------------------------------------------------------------------------------------
// Control characters in GXL

/// Names holding what XML 1.0 cannot carry (ESC, BEL, NUL, an OSC 52 sequence, U+FFFE,
/// U+FFFF), what it carries only as references (tab, line feed, carriage return), the
/// escape character U+E000 itself, a C1 control and U+202E export to a GXL file that an XML
/// parser independent of mtfdb (Python's `xml.etree`) reads, and import back exactly.
#[test]
fn gxl_with_control_characters_in_names_parses_as_xml_and_comes_back_exactly() {
    let names = [
        "esc\u{1b}[31mred\u{1b}[0m".to_string(),
        "bell\u{7} nul\u{0} end".into(),
        "osc\u{1b}]52;c;aGVsbG8=\u{7}".into(),
        "cr\rlf\ntab\tcrlf\r\n".into(),
        "noncharacters \u{fffe}\u{ffff}".into(),
        "escape \u{e000}0041 \u{e000}".into(),
        "c1 \u{85}\u{9b} rtl \u{202e}txt".into(),
        "every C0: ".to_string() + &(0u8..0x20).map(char::from).collect::<String>(),
    ];
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    db.import_events("controls", |sink| {
        let mut header = TraceHeader::world(2, "world");
        header.scenario = names[0].clone();
        header.comments = names[3].clone();
        header.processes[0].name = names[1].clone();
        header.processes[1].name = names[2].clone();
        header.communicators[0].name = names[4].clone();
        sink.header(&header)?;
        for (id, name) in names.iter().enumerate() {
            sink.string(id as u32, name)?;
        }
        for rank in 0..2 {
            sink.routine(&RoutineEvent {
                rank,
                thread: 0,
                time: 0,
                routine: 5 + rank,
                enter: true,
            })?;
            let mut op = Operation::new(rank, OpKind::Other(6), 10, 20);
            op.datatype = Some(7);
            sink.operation(&op)?;
            sink.routine(&RoutineEvent {
                rank,
                thread: 0,
                time: 30,
                routine: 5 + rank,
                enter: false,
            })?;
        }
        sink.finish()
    })
    .unwrap();
    let file = dir.path().join("controls.gxl");
    export_file(&db.trace("controls").unwrap(), Format::Gxl, &file).unwrap();
    let bytes = std::fs::read(&file).unwrap();
    // The only character references are the three XML 1.0 allows below U+0020.
    let text = String::from_utf8(bytes).unwrap();
    for (at, _) in text.match_indices("&#") {
        let reference: String = text[at..].chars().take_while(|&c| c != ';').collect();
        assert!(
            ["&#x9", "&#xA", "&#xD"].contains(&reference.as_str()),
            "{reference};"
        );
    }
    // Python's parser reads the file and sees the escapes as the format documents them.
    let script = r#"
import json, sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
print(json.dumps([s.text or "" for s in root.iter("string")]))
"#;
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(&file)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "xml.etree refused the file: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Vec<String> = serde_json::from_slice(&out.stdout).unwrap();
    for escaped in [
        "esc\u{e000}001B[31mred\u{e000}001B[0m",
        "bell\u{e000}0007 nul\u{e000}0000 end",
        "cr\rlf\ntab\tcrlf\r\n",
        "noncharacters \u{e000}FFFE\u{e000}FFFF",
        "escape \u{e000}E0000041 \u{e000}E000",
        "c1 \u{85}\u{9b} rtl \u{202e}txt",
    ] {
        assert!(
            seen.iter().any(|s| s == escaped),
            "{escaped:?} not among {seen:?}"
        );
    }
    // mtfdb reads back the exact names.
    db.import(&file, Some("back")).unwrap();
    let back = db.trace("back").unwrap();
    let h = back.header();
    assert_eq!(h.scenario, names[0]);
    assert_eq!(h.comments, names[3]);
    assert_eq!(h.processes[0].name, names[1]);
    assert_eq!(h.processes[1].name, names[2]);
    assert_eq!(h.communicators[0].name, names[4]);
    assert_eq!(back.strings(), &names[..]);
    assert_eq!(contents(&back), contents(&db.trace("controls").unwrap()));
}
