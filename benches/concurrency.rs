//! Concurrency benchmark: many processes reading one database at once, with and without a
//! writer importing, and what a reader pays for its snapshot.
//!
//! The database holds three generated `stencil2d` traces (16 ranks, 10M events each by
//! default; written once under `target/tmp/bench-data/` and reused while it opens and holds
//! them). Each *reading process* (this bench run again as a child) loops for a fixed window:
//! open the database, query the next trace with `SELECT COUNT(*), SUM(SIZE) FROM MESSAGES
//! GROUP BY PROCESS`, check the answer against its first one; each statement opens afresh, as
//! `mtfdb query` does, so each pays its snapshot. The *writer* (a child too) imports a 1M-event
//! trace and drops it again, in a loop, through the library as `mtfdb import` does. Configurations:
//! 1, 2, 4 and 8 readers alone, the same with the writer, and the writer alone; the baseline,
//! measured in the same round, is one reader alone (and, for the writer's rate, the writer
//! alone). Rounds alternate the configurations' order; medians over the rounds are printed with
//! each round's figure. Statements are counted in the window, the one running at its end by the
//! part of it inside the window.
//!
//! Open-to-first-row: from opening the database to the first row of `SELECT ALL MESSAGES LIMIT
//! 1`, in this process, the snapshot open (no lock) alternating with the *exclusive-open
//! baseline*: the same open and statement inside an exclusive `flock` on `<db>/LOCK`, the
//! one-process-at-a-time open formats 6 and 7 had (sled's exclusive lock on its catalog),
//! without sled's own work; once alone and once while the writer imports.
//!
//! `cargo bench --bench concurrency`; `MTFDB_BENCH_EVENTS=4000000` picks the traces' size,
//! `MTFDB_BENCH_CONCURRENCY_SECS` the window (3 s), `MTFDB_BENCH_CONCURRENCY_ROUNDS` the rounds
//! (3).

mod common;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mtfdb::gen::{generate, iterations_for_events, GenConfig, Scenario};
use mtfdb::{Database, ResultSet, Session};

// As the `mtfdb` binary allocates, so that the children do what the command line would.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const RANKS: u32 = 16;
/// The traces the readers query, in turn.
const TRACES: [&str; 3] = ["a", "b", "c"];
/// The trace the writer imports and drops.
const WRITTEN: &str = "w";
const WRITTEN_EVENTS: u64 = 1_000_000;
const STATEMENT: &str = "SELECT COUNT(*), SUM(SIZE) FROM MESSAGES GROUP BY PROCESS";
const FIRST_ROW: &str = "SELECT ALL MESSAGES LIMIT 1";
/// Reader counts measured, each alone and with the writer.
const READERS: [usize; 4] = [1, 2, 4, 8];
/// Open-to-first-row probes of each kind per round, alone.
const PROBES: usize = 100;

/// Set in a child: `reader` or `writer`.
const ROLE: &str = "MTFDB_BENCH_CONCURRENCY_ROLE";
/// Set in a child: the database's path.
const DB: &str = "MTFDB_BENCH_CONCURRENCY_DB";
/// Set in a child: the window, `START END` in ns since the epoch (all children share it).
const WINDOW: &str = "MTFDB_BENCH_CONCURRENCY_WINDOW";
/// Set in a reader: which trace it queries first (the readers start on different ones).
const FIRST: &str = "MTFDB_BENCH_CONCURRENCY_FIRST";

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// This process's processor time (user and system, all threads), in seconds.
fn cpu_secs() -> f64 {
    extern "C" {
        fn clock_gettime(clock: i32, ts: *mut [i64; 2]) -> i32;
    }
    const CLOCK_PROCESS_CPUTIME_ID: i32 = 2;
    let mut ts = [0i64; 2];
    // SAFETY: writes one `struct timespec` (two 64-bit fields on 64-bit Linux) into `ts`.
    let rc = unsafe { clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime failed");
    ts[0] as f64 + ts[1] as f64 / 1e9
}

fn window() -> (u128, u128) {
    let text = std::env::var(WINDOW).expect("the window");
    let mut parts = text.split(' ').map(|p| p.parse::<u128>().unwrap());
    (parts.next().unwrap(), parts.next().unwrap())
}

fn sleep_until(at: u128) {
    let now = now_ns();
    if at > now {
        std::thread::sleep(Duration::from_nanos((at - now) as u64));
    }
}

/// One statement in a fresh open of the database: what a reading process does each time.
fn read_once(dir: &Path, trace: &str) -> ResultSet {
    let mut session = Session::new(Database::open_existing(dir).unwrap());
    session.use_trace(trace).unwrap();
    session.run(STATEMENT).unwrap()
}

/// What a child did in its window: the loops it completed in it (the one running at its end
/// counted by its part inside), and, over the whole loops it ran, how many, their processor
/// time and their wall time; `late` if it was not ready when the window opened.
struct Done {
    credit: f64,
    whole: u64,
    cpu: f64,
    wall: f64,
    late: bool,
}

impl Done {
    fn line(&self) -> String {
        let Done {
            credit,
            whole,
            cpu,
            wall,
            late,
        } = self;
        format!("{credit} {whole} {cpu} {wall} {late}")
    }

    fn parse(line: &str) -> Done {
        let p: Vec<&str> = line.split_whitespace().collect();
        Done {
            credit: p[0].parse().unwrap(),
            whole: p[1].parse().unwrap(),
            cpu: p[2].parse().unwrap(),
            wall: p[3].parse().unwrap(),
            late: p[4] == "true",
        }
    }
}

/// Runs `step` from the window's start until one ends after the window closes.
fn in_window(mut step: impl FnMut()) -> Done {
    let (start, end) = window();
    let late = now_ns() > start;
    sleep_until(start);
    let (cpu, began_at) = (cpu_secs(), Instant::now());
    let (mut credit, mut whole) = (0.0, 0);
    loop {
        let began = now_ns();
        step();
        let ended = now_ns();
        whole += 1;
        if ended <= end {
            credit += 1.0;
        } else {
            credit += (end - began.min(end)) as f64 / (ended - began).max(1) as f64;
            break;
        }
    }
    Done {
        credit,
        whole,
        cpu: cpu_secs() - cpu,
        wall: began_at.elapsed().as_secs_f64(),
        late,
    }
}

fn reader(dir: &Path) {
    let first: usize = std::env::var(FIRST).unwrap().parse().unwrap();
    // The answers, read once before the window; every later answer must equal them (the
    // writer never touches these traces).
    let expected: Vec<ResultSet> = TRACES.iter().map(|t| read_once(dir, t)).collect();
    let mut next = first;
    let done = in_window(|| {
        let i = next % TRACES.len();
        let answer = read_once(dir, TRACES[i]);
        assert!(
            answer == expected[i],
            "trace {} answered otherwise",
            TRACES[i]
        );
        next += 1;
    });
    println!("{}", done.line());
}

fn written_config() -> GenConfig {
    let iterations = iterations_for_events(Scenario::Stencil2d, RANKS, WRITTEN_EVENTS).unwrap();
    let mut config = GenConfig::new(Scenario::Stencil2d, RANKS, iterations);
    config.seed = 99;
    config
}

fn writer(dir: &Path) {
    let db = Database::open(dir).unwrap();
    // The baseline's probes hold the lock for a millisecond; the writer waits them out.
    db.set_busy_timeout(Duration::from_secs(60));
    let config = written_config();
    let done = in_window(|| {
        db.import_events(WRITTEN, |sink| generate(&config, sink).map(|_| ()))
            .unwrap();
        db.drop_trace(WRITTEN).unwrap();
    });
    println!("{}", done.line());
}

/// The database, made unless a previous run's still opens and holds the traces of this size.
fn database(events: u64) -> PathBuf {
    let dir = common::data_dir().join("concurrency-db");
    let marker = common::data_dir().join("concurrency-db.events");
    let reusable = std::fs::read_to_string(&marker).ok() == Some(events.to_string())
        && Database::open_existing(&dir).is_ok_and(|db| {
            // A writer stopped by Ctrl-C may have left its trace.
            let _ = db.drop_trace(WRITTEN);
            db.trace_names().ok() == Some(TRACES.iter().map(|t| t.to_string()).collect())
        });
    if !reusable {
        let _ = std::fs::remove_file(&marker);
        let _ = std::fs::remove_dir_all(&dir);
        let started = Instant::now();
        let db = Database::open(&dir).unwrap();
        let iterations = iterations_for_events(Scenario::Stencil2d, RANKS, events).unwrap();
        for (i, name) in TRACES.iter().enumerate() {
            let mut config = GenConfig::new(Scenario::Stencil2d, RANKS, iterations);
            config.seed = 1 + i as u64;
            db.import_events(name, |sink| generate(&config, sink).map(|_| ()))
                .unwrap();
        }
        std::fs::write(&marker, events.to_string()).unwrap();
        println!(
            "generated and imported the traces in {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    dir
}

/// One configuration: how many readers, and whether the writer runs.
#[derive(Clone, Copy, PartialEq)]
struct Config {
    readers: usize,
    writer: bool,
}

/// What one configuration measured in one round.
#[derive(Clone, Copy, Default)]
struct Measured {
    /// Statements per second, all readers together.
    statements: f64,
    /// Processor milliseconds per statement, over the readers.
    cpu_ms: f64,
    /// The cores the readers kept busy: their processor time over their wall time.
    cores: f64,
    /// The writer's imports (each with its drop) per minute.
    imports: f64,
    /// The cores the writer kept busy.
    writer_cores: f64,
}

fn spawn(dir: &Path, role: &str, window: &str, first: usize) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .env(ROLE, role)
        .env(DB, dir)
        .env(WINDOW, window)
        .env(FIRST, first.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

fn finish(child: Child, role: &str) -> Done {
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "a {role} failed");
    let done = Done::parse(&String::from_utf8_lossy(&out.stdout));
    if done.late {
        eprintln!("warning: a {role} was not ready when its window opened (a busy machine)");
    }
    done
}

/// The window for children started now: time for the readers to open and answer once first.
fn next_window(readers: usize, secs: f64) -> (u128, String) {
    let start = now_ns() + Duration::from_secs_f64(0.5 + 0.15 * readers as f64).as_nanos();
    let end = start + Duration::from_secs_f64(secs).as_nanos();
    (end, format!("{start} {end}"))
}

fn measure(dir: &Path, config: Config, secs: f64) -> Measured {
    let (_, window) = next_window(config.readers, secs);
    let writer = config.writer.then(|| spawn(dir, "writer", &window, 0));
    let readers: Vec<Child> = (0..config.readers)
        .map(|i| spawn(dir, "reader", &window, i))
        .collect();
    let done: Vec<Done> = readers.into_iter().map(|c| finish(c, "reader")).collect();
    let written = writer.map(|w| finish(w, "writer"));
    let whole: u64 = done.iter().map(|d| d.whole).sum();
    Measured {
        statements: done.iter().map(|d| d.credit).sum::<f64>() / secs,
        cpu_ms: done.iter().map(|d| d.cpu).sum::<f64>() * 1e3 / whole.max(1) as f64,
        cores: done.iter().map(|d| d.cpu / d.wall).sum(),
        imports: written.as_ref().map_or(0.0, |w| w.credit * 60.0 / secs),
        writer_cores: written.map_or(0.0, |w| w.cpu / w.wall),
    }
}

/// Seconds from opening the database to the database opened, to the trace opened and to the
/// first row of `FIRST_ROW`: with the snapshot open (no lock), or inside an exclusive lock on
/// `<db>/LOCK` (the baseline; taking the lock counts as opening).
fn first_row(dir: &Path, exclusive: bool) -> [f64; 3] {
    let started = Instant::now();
    let lock = exclusive.then(|| {
        let path = dir.join(mtfdb::store::lock::LOCK_FILE);
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .unwrap();
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive).unwrap();
        file
    });
    let mut session = Session::new(Database::open_existing(dir).unwrap());
    let opened = started.elapsed().as_secs_f64();
    session.use_trace(TRACES[0]).unwrap();
    let traced = started.elapsed().as_secs_f64();
    let mut rows = session.query(FIRST_ROW).unwrap();
    rows.next().expect("a row").unwrap();
    let first = started.elapsed().as_secs_f64();
    drop(rows);
    drop(lock);
    [opened, traced, first]
}

/// Probes of each kind (snapshot, baseline), alternating which goes first.
type Probes = [Vec<[f64; 3]>; 2];

/// `pairs` probes of each kind; `pause` after each pair.
fn probe(dir: &Path, pairs: usize, pause: Duration, into: &mut Probes) {
    for i in 0..pairs {
        for k in [i % 2, 1 - i % 2] {
            into[k].push(first_row(dir, k == 1));
        }
        std::thread::sleep(pause);
    }
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn list(values: impl Iterator<Item = f64>, digits: usize) -> String {
    values
        .map(|v| format!("{v:.digits$}"))
        .collect::<Vec<_>>()
        .join(" / ")
}

fn main() {
    if let Ok(role) = std::env::var(ROLE) {
        let dir = PathBuf::from(std::env::var(DB).unwrap());
        match role.as_str() {
            "reader" => reader(&dir),
            "writer" => writer(&dir),
            other => panic!("unknown role {other}"),
        }
        return;
    }
    let events = common::sizes(&[10_000_000])[0];
    let secs = common::env_list("MTFDB_BENCH_CONCURRENCY_SECS", &[3.0f64])[0];
    let rounds = common::env_list("MTFDB_BENCH_CONCURRENCY_ROUNDS", &[3usize])[0];
    let dir = database(events);
    let db = Database::open_existing(&dir).unwrap();
    let summary = db.trace(TRACES[0]).unwrap().summary().clone();
    drop(db);
    let started = Instant::now();
    let one = read_once(&dir, TRACES[0]);
    println!(
        "concurrency benchmark: {} stencil2d traces of {RANKS} ranks, {} messages each, on {} cores; \
         `{STATEMENT}` ({} rows) took {:.1} ms alone; load average {}",
        TRACES.len(),
        summary.messages,
        common::cores(),
        one.rows.len(),
        started.elapsed().as_secs_f64() * 1e3,
        load_average()
    );
    println!(
        "{rounds} rounds of {secs} s windows; baseline: 1 reader alone (the writer alone for its rate), \
         in the same round; the writer imports and drops a {WRITTEN_EVENTS}-event trace in a loop"
    );

    let mut configs: Vec<Config> = Vec::new();
    for writer in [false, true] {
        for readers in READERS {
            configs.push(Config { readers, writer });
        }
    }
    configs.push(Config {
        readers: 0,
        writer: true,
    });
    let mut results: Vec<Vec<Measured>> = vec![Vec::new(); configs.len()];
    let mut probes: Probes = [Vec::new(), Vec::new()];
    let mut probes_writing: Probes = [Vec::new(), Vec::new()];
    for round in 0..rounds {
        // Each round starts elsewhere in the list and every other one runs it backwards, so
        // that no configuration always follows the same one.
        let mut order: Vec<usize> = (0..configs.len()).collect();
        order.rotate_left(round * configs.len() / rounds.max(1) % configs.len());
        if round % 2 == 1 {
            order.reverse();
        }
        for &c in &order {
            results[c].push(measure(&dir, configs[c], secs));
        }
        probe(&dir, PROBES, Duration::ZERO, &mut probes);
        // The probes while the writer imports: paced, so that they leave it room.
        let (end, window) = next_window(0, secs);
        let writer = spawn(&dir, "writer", &window, 0);
        sleep_until(end - Duration::from_secs_f64(secs).as_nanos());
        while now_ns() < end {
            probe(&dir, 1, Duration::from_millis(10), &mut probes_writing);
        }
        finish(writer, "writer");
    }

    let alone = configs.iter().position(|c| c.readers == 1 && !c.writer);
    let writer_alone = configs.iter().position(|c| c.readers == 0);
    let ratio = |c: usize, base: Option<usize>, f: fn(&Measured) -> f64| -> Vec<f64> {
        let base = &results[base.unwrap()];
        results[c]
            .iter()
            .zip(base)
            .map(|(m, b)| f(m) / f(b))
            .collect()
    };
    println!(
        "\n{:<7} {:<6} {:>12} {:>9} {:>11} {:>6}  {:>11} {:>8} {:>6}  each round: statements/s; imports/min",
        "readers", "writer", "statements/s", "x 1 alone", "CPU ms/stmt", "cores", "imports/min", "x alone", "cores"
    );
    for (c, config) in configs.iter().enumerate() {
        let r = &results[c];
        let of = |f: fn(&Measured) -> f64| r.iter().map(f).collect::<Vec<f64>>();
        let (reading, writing) = (config.readers > 0, config.writer);
        // A figure when it applies, else a dash.
        let shown = |applies: bool, text: &dyn Fn() -> String| {
            if applies {
                text()
            } else {
                "-".to_string()
            }
        };
        let mut rounds = Vec::new();
        if reading {
            rounds.push(list(of(|m| m.statements).into_iter(), 1));
        }
        if writing {
            rounds.push(list(of(|m| m.imports).into_iter(), 1));
        }
        println!(
            "{:<7} {:<6} {:>12} {:>9} {:>11} {:>6}  {:>11} {:>8} {:>6}  {}",
            config.readers,
            if writing { "yes" } else { "no" },
            shown(reading, &|| format!("{:.1}", median(&of(|m| m.statements)))),
            shown(reading, &|| format!(
                "{:.2}x",
                median(&ratio(c, alone, |m| m.statements))
            )),
            shown(reading, &|| format!("{:.1}", median(&of(|m| m.cpu_ms)))),
            shown(reading, &|| format!("{:.2}", median(&of(|m| m.cores)))),
            shown(writing, &|| format!("{:.1}", median(&of(|m| m.imports)))),
            shown(writing, &|| format!(
                "{:.2}x",
                median(&ratio(c, writer_alone, |m| m.imports))
            )),
            shown(writing, &|| format!(
                "{:.2}",
                median(&of(|m| m.writer_cores))
            )),
            rounds.join("; ")
        );
    }
    println!(
        "(medians over the rounds; cores: the readers' processor time over their wall time, \
         then the writer's; CPU ms/stmt: the readers' processor time per statement)"
    );

    println!(
        "\nopen-to-first-row of `{FIRST_ROW}` (trace {:?}), ms, medians (p90) of {} probes of each \
         kind in alternation; baseline: the same inside an exclusive flock on <db>/LOCK (the \
         one-process-at-a-time open of formats 6-7, without sled's own work)",
        TRACES[0],
        probes[0].len()
    );
    println!(
        "{:<17} {:<24} {:>8} {:>12} {:>10} {:>8}  {:>16}",
        "", "open", "opened", "trace opened", "first row", "p90", "x baseline"
    );
    for (what, p) in [("alone", &probes), ("writer importing", &probes_writing)] {
        let medians = |k: usize| -> [f64; 3] {
            [0, 1, 2].map(|i| median(&p[k].iter().map(|t| t[i]).collect::<Vec<_>>()) * 1e3)
        };
        let (snap, excl) = (medians(0), medians(1));
        for (k, name, m) in [(0, "snapshot", snap), (1, "exclusive-open baseline", excl)] {
            let firsts: Vec<f64> = p[k].iter().map(|t| t[2] * 1e3).collect();
            println!(
                "{:<17} {name:<24} {:>8.3} {:>12.3} {:>10.3} {:>8.3}  {:>16}",
                if k == 0 { what } else { "" },
                m[0],
                m[1],
                m[2],
                p90(&firsts),
                if k == 0 {
                    format!("{:.2}x", snap[2] / excl[2])
                } else {
                    "1.00x".to_string()
                }
            );
        }
    }
    println!("load average at the end: {}", load_average());
}

/// The 90th percentile.
fn p90(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v.get((v.len() * 9 / 10).min(v.len().saturating_sub(1)))
        .copied()
        .unwrap_or(f64::NAN)
}

/// The machine's load averages (1, 5, 15 min), for the report: other work shares the cores.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
