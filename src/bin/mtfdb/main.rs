//! The `mtfdb` command: import MPI traces into a database and inspect them.

mod complete;
mod demo;
mod info;
mod pager;
mod progress;
mod repl;
mod stream;

/// mimalloc rather than glibc's malloc: an import's threads hand buffers to one another, and
/// glibc's arenas made allocating and freeing them a sixth of an import of 100,000 ranks
/// (`perf`); `cargo bench --bench import` measured 0.40x -> 0.6x of the 16-rank rate there.
/// Transparent huge pages are off: with them, peak memory doubled for no gain.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use clap::{CommandFactory, Parser, Subcommand};
use mtfdb::analysis::clock::ClockCorrection;
use mtfdb::default_database_path;
use mtfdb::export::chrome::Restriction;
use mtfdb::export::Format as ExportFormat;
use mtfdb::gen::{generate, GenConfig, Scenario};
use mtfdb::ingest::mtf_text::MtfWriter;
use mtfdb::query::Session;
use mtfdb::results::{printable, printable_lines, ResultSet};
use mtfdb::{Database, Error, SourceFormat};

/// How a result is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    /// An aligned table with the row count.
    Table,
    /// CSV with a header line.
    Csv,
    /// A JSON array of objects.
    Json,
    /// A picture of the statement (`mtfdb::export::svg`), for the statements that have one.
    Svg,
}

impl OutputFormat {
    /// The format named `s` (`--format`).
    fn parse(s: &str) -> Result<OutputFormat, Error> {
        match s.to_ascii_lowercase().as_str() {
            "table" => Ok(OutputFormat::Table),
            "csv" => Ok(OutputFormat::Csv),
            "json" => Ok(OutputFormat::Json),
            "svg" => Ok(OutputFormat::Svg),
            other => Err(Error::Usage(format!(
                "unknown output format {other:?}; use table, csv, json or svg"
            ))),
        }
    }

    /// A format for a command that prints a table and has no picture: table, csv or json.
    fn parse_tabular(s: &str, command: &str) -> Result<OutputFormat, Error> {
        match OutputFormat::parse(s)? {
            OutputFormat::Svg => Err(Error::Usage(format!(
                "{command} has no picture; use --format table, csv or json"
            ))),
            format => Ok(format),
        }
    }

    /// The format's name, as `--format` and `.mode` take it.
    pub fn name(self) -> &'static str {
        match self {
            OutputFormat::Table => "table",
            OutputFormat::Csv => "csv",
            OutputFormat::Json => "json",
            OutputFormat::Svg => "svg",
        }
    }

    /// The result as this format prints it (a result set has no picture of its own: in svg
    /// mode, what is not a picture, such as `USE TRACE`'s answer, prints as a table).
    pub fn render(self, r: &ResultSet) -> String {
        self.render_with(r, &[], true, true)
    }

    /// [`render`](Self::render) with the shell's `.width` (a table's minimum column widths),
    /// `.headers` (the column names above a table's or CSV's rows) and `.units` (a table's
    /// durations and sizes with units; CSV and JSON always carry the exact values).
    pub fn render_with(
        self,
        r: &ResultSet,
        widths: &[usize],
        headers: bool,
        units: bool,
    ) -> String {
        match self {
            OutputFormat::Table | OutputFormat::Svg => {
                format!(
                    "{}({} row{})\n",
                    r.to_table_styled(widths, headers, units),
                    r.len(),
                    if r.len() == 1 { "" } else { "s" }
                )
            }
            OutputFormat::Csv if headers => r.to_csv(),
            OutputFormat::Csv => r
                .rows
                .iter()
                .map(|row| mtfdb::results::csv_row(row))
                .collect(),
            OutputFormat::Json => format!("{}\n", r.to_json()),
        }
    }
}

/// mtfdb: an embedded query database for MPI communication traces.
#[derive(Parser)]
#[command(name = "mtfdb", version, about)]
struct Cli {
    /// The database directory [default: $MTFDB_DB, else ./mtfdb.db]
    #[arg(long, global = true, value_name = "PATH")]
    db: Option<PathBuf>,
    /// How long a write (import, drop, a view) waits for another process writing the same
    /// database before it gives up, saying who writes
    #[arg(long, global = true, value_name = "SECONDS", default_value_t = 10.0, value_parser = parse_busy_timeout)]
    busy_timeout: f64,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate a synthetic MTF text trace of a real application shape.
    Gen {
        /// stencil2d, ring, sweep, lu, bt, cg or alltoall
        scenario: Scenario,
        /// Number of MPI processes
        #[arg(long, default_value_t = 16)]
        ranks: u32,
        /// Number of solver iterations
        #[arg(long, default_value_t = 10)]
        iterations: u32,
        /// Seed of the timing jitter (and of --shuffle-ranks)
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Renumber ranks randomly (the topology stays, the numbering is scrambled)
        #[arg(long)]
        shuffle_ranks: bool,
        /// Make RANK compute DURATION longer in ITERATION (from 0), as RANK:ITERATION:DURATION
        /// with the duration in ns or with a unit (3:5:2ms); repeat for several
        #[arg(long = "delay", value_name = "RANK:ITERATION:DURATION")]
        delays: Vec<mtfdb::gen::Delay>,
        /// Time every MPI call by this LogGP network (latency, overhead, gap, G in ns per
        /// byte or as a bandwidth, eager limit), as `SIMULATE` replays it: 1.5us,0.4us,0,0.2,64KiB
        #[arg(long, value_name = "L,o,g,G,EAGER")]
        network: Option<mtfdb::analysis::replay::network::NetworkModel>,
        /// Where to write the trace
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
        /// Also write the generator's ground truth (messages per pair, bytes per rank) as JSON
        #[arg(long, value_name = "FILE")]
        truth: Option<PathBuf>,
    },
    /// Import a trace into the database: an MTF text file, an OTF2 archive (its anchor
    /// file, such as traces.otf2, or its folder), an OTF v1 trace (its NAME.otf master
    /// file or its folder), a Paraver trace (its .prv), a GXL graph, a DUMPI trace (its .meta
    /// file or folder), or a Parquet export of mtfdb (its folder).
    Import {
        /// The trace file (or OTF2 archive or OTF v1 trace folder)
        file: PathBuf,
        /// The trace's name in the database [default: the file's stem]
        #[arg(long)]
        name: Option<String>,
        /// Force the source format instead of detecting it (mtf, otf2, otf1, paraver, gxl, dumpi,
        /// parquet)
        #[arg(long)]
        format: Option<String>,
        /// Also print the import's peak memory (resident set size)
        #[arg(long)]
        stats: bool,
        /// Then show what the trace holds, as `mtfdb info` does
        #[arg(long)]
        info: bool,
        /// Correct the tracer's clocks from the messages and synchronizing collectives: none, offsets (one per rank),
        /// interpolate (offset and drift per rank) or clc (interpolate, then the controlled
        /// logical clock); the source is read twice
        #[arg(long, default_value = "none", value_name = "CORRECTION")]
        clock_correction: String,
    },
    /// Show a trace's clock: messages received before they were sent (per pair of ranks),
    /// the clock offsets and drifts the messages give, and the wait states under that clock.
    Clock {
        /// The trace's name
        name: String,
        /// The correction to estimate and apply: none, offsets, interpolate or clc
        #[arg(long, default_value = "interpolate")]
        correction: String,
    },
    /// List the traces in the database.
    Traces {
        /// How to print them: table, csv or json
        #[arg(long, default_value = "table")]
        format: String,
    },
    /// Show what a trace holds: processes, communicators, operations, messages, anomalies.
    Info {
        /// The trace's name
        name: String,
        /// List every anomaly, not only their counts
        #[arg(long)]
        anomalies: bool,
        /// How to print it: table (the report), or its counts as csv or json
        #[arg(long, default_value = "table")]
        format: String,
    },
    /// Run one query and print its result.
    Query {
        /// The statement, e.g. "SELECT FAN_IN FOR ALL PROCESSES" (it may start with `-`, as a
        /// `-- comment` line does)
        #[arg(allow_hyphen_values = true)]
        statement: String,
        /// The trace to query [default: the only one in the database]
        #[arg(long)]
        trace: Option<String>,
        /// How to print the result: table, csv, json, or svg (a picture: heatmap, histogram,
        /// timeline, phases, topology, bars)
        #[arg(long, default_value = "table")]
        format: String,
        /// Write the result to FILE instead of standard output (whole, or not at all)
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Durations and sizes in a table: on (`235.1 ms`, `16.0 KiB`) or off (the exact
        /// nanoseconds and bytes, as CSV and JSON always print them)
        #[arg(long, default_value = "on", value_name = "on|off", value_parser = parse_on_off, action = clap::ArgAction::Set)]
        units: bool,
    },
    /// Import the bundled example into a fresh database, run the MTF paper's example queries,
    /// then open the shell when standard input is a terminal.
    Demo,
    /// The interactive shell (or run a script piped on standard input).
    Repl {
        /// The trace to query [default: the only one in the database]
        #[arg(long)]
        trace: Option<String>,
        /// Safe mode, as sqlite3's -safe: refuse .shell, .system, .output/.once FILE, .open,
        /// .import and .read, so that a script reaches nothing outside the database
        #[arg(long)]
        safe: bool,
    },
    /// Write a stored trace as MTF text or as a GXL graph (importing the file gives the same
    /// trace back), as a folder of Parquet tables (docs/parquet.md; importing it gives the
    /// same trace back too), or as Chrome trace JSON for ui.perfetto.dev and chrome://tracing.
    Export {
        /// The trace's name
        name: String,
        /// mtf (MTF text), gxl, parquet or chrome [default: from the output's extension, .mtf,
        /// .gxl or .json]
        #[arg(long)]
        format: Option<String>,
        /// Where to write it (for parquet: the folder the tables go in)
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
        /// chrome only: write what ends at or after this time (seconds, or with a unit: 1.5ms)
        #[arg(long, value_name = "TIME")]
        from: Option<String>,
        /// chrome only: write what starts at or before this time (seconds, or with a unit)
        #[arg(long, value_name = "TIME")]
        to: Option<String>,
        /// chrome only: write these ranks only (like 0-15,32)
        #[arg(long, value_name = "RANKS")]
        processes: Option<String>,
        /// chrome only: the clocks written: none (the stored times), offsets, interpolate or
        /// clc (see `mtfdb clock`)
        #[arg(long, value_name = "CORRECTION", default_value = "none")]
        clock_correction: String,
    },
    /// Write a one-page HTML report of a trace (summary, matrix, sizes, a timeline of one
    /// iteration, phases, patterns, topology, time in MPI, waits): one self-contained file.
    Report {
        /// The trace's name
        name: String,
        /// Where to write it
        #[arg(short, long, value_name = "FILE", default_value = "report.html")]
        output: PathBuf,
        /// The clocks its wait states are computed on: none (the stored times), offsets,
        /// interpolate or clc (see `mtfdb clock`)
        #[arg(long, value_name = "CORRECTION", default_value = "none")]
        clock_correction: String,
    },
    /// Remove a trace from the database.
    Drop {
        /// The trace's name
        name: String,
    },
    /// Verify a whole database (every trace's file, view and stored result against its
    /// checksums) and list what is damaged, what can be recovered and what interrupted
    /// writes left; exits 1 unless it is sound.
    Check {
        /// Rebuild the catalog from the traces' own files (adding back every sound trace and
        /// stored result it lacks) and remove what dead writers left
        #[arg(long)]
        repair: bool,
    },
    /// Print a completion script for a shell (bash, zsh, fish, elvish or powershell), e.g.
    /// `mtfdb completions bash > ~/.local/share/bash-completion/completions/mtfdb`.
    Completions {
        /// The shell
        shell: clap_complete::Shell,
    },
    /// Print mtfdb's man page (roff), e.g. `mtfdb man > mtfdb.1; man ./mtfdb.1`.
    Man,
}

/// glibc gives every thread its own heap arena, and an import's three threads each keep their
/// own high-water mark, so the resident size crept up with the trace although the heap did not
/// grow. Two arenas keep it flat at no measurable cost in speed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn limit_malloc_arenas() {
    extern "C" {
        fn mallopt(param: i32, value: i32) -> i32;
    }
    const M_ARENA_MAX: i32 = -8;
    // SAFETY: mallopt only tunes the allocator; it is called before any other thread exists.
    unsafe {
        mallopt(M_ARENA_MAX, 2);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn limit_malloc_arenas() {}

/// A write past the file size limit (`ulimit -f`) raises SIGXFSZ, which kills the process
/// without a word; ignored, the write fails with EFBIG instead, and the error that names the
/// file says "File too large".
#[cfg(all(
    any(target_os = "linux", target_os = "macos", target_os = "freebsd"),
    not(any(target_arch = "mips", target_arch = "mips64"))
))]
fn ignore_file_size_signal() {
    extern "C" {
        fn signal(signum: i32, handler: usize) -> usize;
    }
    // The signal's number on these systems (not on MIPS), and the "ignore" disposition.
    const SIGXFSZ: i32 = 25;
    const SIG_IGN: usize = 1;
    // SAFETY: setting a signal to be ignored installs no handler; done before any thread.
    unsafe {
        signal(SIGXFSZ, SIG_IGN);
    }
}

#[cfg(not(all(
    any(target_os = "linux", target_os = "macos", target_os = "freebsd"),
    not(any(target_arch = "mips", target_arch = "mips64"))
)))]
fn ignore_file_size_signal() {}

fn main() -> ExitCode {
    limit_malloc_arenas();
    ignore_file_size_signal();
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        // `mtfdb query … | head -1`: the reader has all it wanted; end quietly, as Unix tools do.
        Err(e) if is_closed_stdout(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // Errors quote names from traces and from the user: shown, not obeyed.
            eprintln!("error: {}", printable_lines(&e.to_string()));
            match e {
                Error::Cancelled => ExitCode::from(130),
                _ => ExitCode::FAILURE,
            }
        }
    }
}

/// Where standard output is named in errors.
const STDOUT: &str = "<stdout>";

/// Writes `text` to standard output. A closed pipe is an [`Error::Io`] on [`STDOUT`] that
/// [`is_closed_stdout`] recognises, so that callers stop and the command ends with status 0.
pub fn emit(text: &str) -> Result<(), Error> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|_| out.flush())
        .map_err(|e| Error::io(STDOUT, e))
}

/// `emit!("…", args)`: [`emit`] of the formatted text.
#[macro_export]
macro_rules! emit {
    ($($arg:tt)*) => {
        $crate::emit(&format!($($arg)*))
    };
}

/// True for the error of writing to a standard output whose reader has gone.
pub fn is_closed_stdout(e: &Error) -> bool {
    matches!(e, Error::Io { path, source }
        if path.as_os_str() == STDOUT && source.kind() == std::io::ErrorKind::BrokenPipe)
}

/// The flag Ctrl-C sets to stop the running statement; a second Ctrl-C before the statement
/// notices ends the process (status 130), as an unresponsive one would expect.
pub fn cancel_flag() -> Arc<AtomicBool> {
    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    FLAG.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        let seen = flag.clone();
        // Without a handler (when one cannot be installed) Ctrl-C ends the process, which
        // leaves the database as it was too: imports and views are written atomically.
        let _ = ctrlc::set_handler(move || {
            if seen.swap(true, Ordering::SeqCst) {
                let _ = std::io::stderr().write_all(b"\nstopped\n");
                std::process::exit(130);
            }
        });
        flag
    })
    .clone()
}

/// The process's peak resident set size, from `/proc/self/status` (Linux).
fn peak_memory_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// `--busy-timeout`, set once before the command runs.
static BUSY_TIMEOUT: OnceLock<std::time::Duration> = OnceLock::new();

/// `on` or `off` (any case), as `--units` takes it.
fn parse_on_off(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("{s:?} is neither on nor off")),
    }
}

/// A `--busy-timeout` value: seconds, at least 0, at most a day.
fn parse_busy_timeout(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=86_400.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?} is not a number of seconds from 0 to 86400")),
    }
}

/// `db` with the `--busy-timeout` the command was given.
fn with_busy_timeout(db: Database) -> Database {
    if let Some(t) = BUSY_TIMEOUT.get() {
        db.set_busy_timeout(*t);
    }
    db
}

/// Opens (or creates) the database where `import` was asked to put the trace.
fn open_db(cli_db: Option<PathBuf>) -> Result<Database, Error> {
    Database::open(cli_db.unwrap_or_else(default_database_path)).map(with_busy_timeout)
}

/// Opens an existing database for a command that only reads: a path without one is an
/// error, and nothing is created.
fn open_existing_db(cli_db: Option<PathBuf>) -> Result<Database, Error> {
    Database::open_existing(cli_db.unwrap_or_else(default_database_path)).map(with_busy_timeout)
}

fn run(cli: Cli) -> Result<(), Error> {
    let _ = BUSY_TIMEOUT.set(std::time::Duration::from_secs_f64(cli.busy_timeout));
    match cli.command {
        Command::Gen {
            scenario,
            ranks,
            iterations,
            seed,
            shuffle_ranks,
            delays,
            network,
            output,
            truth,
        } => {
            let config = GenConfig {
                scenario,
                ranks,
                iterations,
                seed,
                shuffle_ranks,
                delays,
                network,
            };
            // Written beside the output and renamed over it once complete: a mistake the
            // generator finds leaves an existing file as it was.
            let mut ground_truth = None;
            mtfdb::export::write_whole_with(&output, |file| {
                let mut writer = MtfWriter::with_name(std::io::BufWriter::new(file), &output);
                ground_truth = Some(generate(&config, &mut writer)?);
                std::io::Write::flush(&mut writer.into_inner()?).map_err(|e| Error::io(&output, e))
            })?;
            let ground_truth = ground_truth.expect("set when the trace was written");
            if let Some(path) = truth {
                let json = serde_json::to_string_pretty(&ground_truth)
                    .map_err(|e| Error::Usage(format!("the ground truth: {e}")))?;
                mtfdb::export::write_whole(&path, json.as_bytes())?;
            }
            emit!(
                "wrote {} ({} operations and {} routine events: {} ranks, {} iterations of {})\n",
                output.display(),
                ground_truth.operations,
                ground_truth.routine_events,
                ranks,
                iterations,
                scenario
            )?;
        }
        Command::Import {
            file,
            name,
            format,
            stats,
            info: show_info,
            clock_correction,
        } => {
            let correction = ClockCorrection::from_name(&clock_correction)?;
            let db = open_db(cli.db)?;
            let started = std::time::Instant::now();
            let format = match format {
                Some(f) => SourceFormat::from_name(&f)?,
                None => SourceFormat::detect(&file)?,
            };
            let mut bar = progress::ProgressBar::new(started);
            let imported =
                db.import_corrected(&file, name.as_deref(), format, correction, &mut |p| {
                    bar.show(p)
                });
            bar.clear();
            let info = imported?;
            let secs = started.elapsed().as_secs_f64();
            emit!(
                "imported {} as \"{}\": {} operations, {} messages, {} collective instances in {:.2} s ({:.0} operations/s); {}\n",
                printable(&file.display().to_string()),
                printable(&info.name),
                info.summary.operations,
                info.summary.messages,
                info.summary.collective_instances,
                secs,
                info.summary.operations as f64 / secs.max(1e-9),
                anomaly_counts(&info.summary.anomalies)
            )?;
            if stats {
                match peak_memory_kib() {
                    Some(kib) => emit!("peak memory: {kib} KiB\n")?,
                    None => emit("peak memory: unknown on this system\n")?,
                }
            }
            if show_info {
                emit!("\n{}", info::render(&db.trace(&info.name)?, false)?)?;
            }
        }
        Command::Traces { format } => {
            let format = OutputFormat::parse_tabular(&format, "traces")?;
            // The rows of `SHOW TRACES`, printed as a query's are.
            let traces = Session::new(open_existing_db(cli.db)?).run("SHOW TRACES")?;
            if traces.is_empty() && format == OutputFormat::Table {
                emit("no traces (import one with `mtfdb import FILE`)\n")?;
            } else {
                emit(&format.render(&traces))?;
            }
        }
        Command::Info {
            name,
            anomalies,
            format,
        } => {
            let format = OutputFormat::parse_tabular(&format, "info")?;
            let db = open_existing_db(cli.db)?;
            let trace = db.trace(&name)?;
            match format {
                OutputFormat::Table => emit(&info::render(&trace, anomalies)?)?,
                _ => emit(&format.render(&info::info_result(&trace)))?,
            }
        }
        Command::Clock { name, correction } => {
            let correction = ClockCorrection::from_name(&correction)?;
            let db = open_existing_db(cli.db)?;
            emit(&mtfdb::analysis::clock::report(
                &db.trace(&name)?,
                correction,
            )?)?;
        }
        Command::Completions { shell } => {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "mtfdb", &mut out);
            emit(&String::from_utf8_lossy(&out))?;
        }
        Command::Man => {
            let mut out = Vec::new();
            clap_mangen::Man::new(Cli::command())
                .render(&mut out)
                .map_err(|e| Error::io(STDOUT, e))?;
            emit(&String::from_utf8_lossy(&out))?;
        }
        Command::Query {
            statement,
            trace,
            format,
            output,
            units,
        } => {
            let format = OutputFormat::parse(&format)?;
            let mut session = Session::new(open_existing_db(cli.db)?);
            session.set_cancel_flag(cancel_flag());
            if let Some(t) = trace {
                session.use_trace(&t)?;
            }
            // Rows written as they come (CSV, JSON on standard output) show no progress line
            // among them.
            let streamed = matches!(
                (format, &output),
                (OutputFormat::Csv | OutputFormat::Json, None)
            );
            let bar = (!streamed).then(|| progress::show_scans(std::time::Instant::now()));
            let done = || {
                if let Some(bar) = &bar {
                    progress::clear(bar);
                }
            };
            match (format, output) {
                (OutputFormat::Svg, output) => {
                    let svg = mtfdb::export::svg::statement_svg(&mut session, &statement);
                    done();
                    let svg = svg?;
                    match output {
                        Some(path) => {
                            mtfdb::export::write_whole(&path, svg.as_bytes())?;
                            emit!("wrote {} ({} bytes)\n", path.display(), svg.len())?;
                        }
                        None => emit(&svg)?,
                    }
                }
                (_, Some(path)) => {
                    let rows = session.run(&statement);
                    done();
                    let text = format.render_with(&rows?, &[], true, units);
                    mtfdb::export::write_whole(&path, text.as_bytes())?;
                }
                // A table needs every row for its column widths.
                (OutputFormat::Table, None) => {
                    let rows = session.run(&statement);
                    done();
                    emit(&format.render_with(&rows?, &[], true, units))?
                }
                // CSV and JSON are written as the rows come: `LIMIT`, a closed pipe or Ctrl-C
                // stop the reading, and memory holds no more than a chunk's rows.
                (OutputFormat::Csv | OutputFormat::Json, None) => {
                    let mut out = stream::RowWriter::new(format == OutputFormat::Json);
                    session.run_into(&statement, &mut out)?;
                    out.finish()?;
                }
            }
        }
        Command::Demo => demo::run(cli.db)?,
        Command::Repl { trace, safe } => {
            repl::run(open_existing_db(cli.db)?, trace.as_deref(), safe)?
        }
        Command::Export {
            name,
            format,
            output,
            from,
            to,
            processes,
            clock_correction,
        } => {
            let format = match format {
                Some(f) => ExportFormat::from_name(&f)?,
                None => match output.extension().and_then(|e| e.to_str()) {
                    Some(e) if e.eq_ignore_ascii_case("gxl") => ExportFormat::Gxl,
                    Some(e) if e.eq_ignore_ascii_case("mtf") => ExportFormat::MtfText,
                    Some(e) if e.eq_ignore_ascii_case("json") => ExportFormat::Chrome,
                    _ => {
                        return Err(Error::Usage(format!(
                        "{}: say which format to write with --format mtf, gxl, parquet or chrome",
                        output.display()
                    )))
                    }
                },
            };
            if format == ExportFormat::Chrome {
                let restriction = Restriction {
                    from: from
                        .map(|t| Restriction::parse_time(&t, "--from"))
                        .transpose()?,
                    to: to
                        .map(|t| Restriction::parse_time(&t, "--to"))
                        .transpose()?,
                    ranks: processes
                        .map(|p| Restriction::parse_ranks(&p))
                        .transpose()?,
                    clock: ClockCorrection::from_name(&clock_correction)?,
                };
                let db = open_existing_db(cli.db)?;
                let trace = db.trace(&name)?;
                let stats = mtfdb::export::chrome::export_file(&trace, &restriction, &output)?;
                println!(
                    "exported {name:?} to {} (chrome): {} MPI calls, {} routine calls, {} messages, {} collective instances",
                    output.display(),
                    stats.operations,
                    stats.routine_calls,
                    stats.messages,
                    stats.collective_instances
                );
                if stats.backward_messages > 0 {
                    eprintln!(
                        "warning: {} messages were received before they were sent in the clocks \
                         written (the ranks' clocks disagree) and are drawn as no flow; \
                         --clock-correction offsets, interpolate or clc corrects the clocks \
                         (see `mtfdb clock {name}`)",
                        stats.backward_messages
                    );
                }
                let size = std::fs::metadata(&output).map(|m| m.len()).unwrap_or(0);
                let limit = mtfdb::export::chrome::PERFETTO_UI_BYTES;
                if size > limit && output.is_file() {
                    eprintln!(
                        "warning: {} is {}, more than the {} the Perfetto UI opens in a browser \
                         (its memory is limited to about 2 GB); export a window (--from, --to, \
                         --processes) or open the file through a native `trace_processor --httpd`",
                        output.display(),
                        mtfdb::units::bytes(size),
                        mtfdb::units::bytes(limit)
                    );
                }
                return Ok(());
            }
            if from.is_some() || to.is_some() || processes.is_some() || clock_correction != "none" {
                return Err(Error::Usage(format!(
                    "--from, --to, --processes and --clock-correction restrict a chrome export only; {} writes the whole trace as stored",
                    format.name()
                )));
            }
            let db = open_existing_db(cli.db)?;
            let trace = db.trace(&name)?;
            if format == ExportFormat::Parquet {
                let started = std::time::Instant::now();
                let s = mtfdb::export::parquet::export_parquet(&trace, &output)?;
                emit!(
                    "exported {name:?} to {} (parquet): {} operations, {} messages, {} collective instances, {} routine calls, {} anomalies in {} files ({} bytes) in {:.2} s\n",
                    output.display(),
                    s.operations,
                    s.messages,
                    s.collectives,
                    s.routine_calls,
                    s.anomalies,
                    s.files,
                    s.bytes,
                    started.elapsed().as_secs_f64()
                )?;
                return Ok(());
            }
            let stats = mtfdb::export::export_file(&trace, format, &output)?;
            println!(
                "exported {name:?} to {} ({}): {} operations, {} routine calls, {} anomalies recorded by its source",
                output.display(),
                format.name(),
                stats.operations,
                stats.routine_calls,
                stats.source_anomalies
            );
        }
        Command::Report {
            name,
            output,
            clock_correction,
        } => {
            let correction = ClockCorrection::from_name(&clock_correction)?;
            let mut session = Session::new(open_existing_db(cli.db)?);
            session.set_cancel_flag(cancel_flag());
            session.use_trace(&name)?;
            let bar = progress::show_scans(std::time::Instant::now());
            let html = mtfdb::export::report::report_corrected(&mut session, correction);
            progress::clear(&bar);
            let html = html?;
            mtfdb::export::write_whole(&output, html.as_bytes())?;
            emit!(
                "wrote the report of {name:?} to {} ({} bytes)\n",
                output.display(),
                html.len()
            )?;
        }
        Command::Drop { name } => {
            let db = open_existing_db(cli.db)?;
            db.drop_trace(&name)?;
            emit!("dropped trace {name:?}\n")?;
        }
        Command::Check { repair } => {
            let path = cli.db.unwrap_or_else(default_database_path);
            let report = Database::check(&path, repair)?;
            for f in &report.findings {
                emit!(
                    "{:<11}  {}: {}\n",
                    f.status.word(),
                    mtfdb::results::printable(&f.item),
                    mtfdb::results::printable(&f.detail)
                )?;
            }
            use mtfdb::store::check::Status;
            let sound = report.sound();
            emit!(
                "{}: {} damaged, {} recoverable, {} leftover, {} repaired\n",
                if sound { "sound" } else { "NOT SOUND" },
                report.count(Status::Damaged),
                report.count(Status::Recoverable),
                report.count(Status::Leftover),
                report.count(Status::Repaired)
            )?;
            if !sound {
                return Err(Error::Corrupt(format!(
                    "the database {} is not sound (see above){}",
                    path.display(),
                    if report.count(Status::Recoverable) > 0 {
                        "; `mtfdb check --repair` recovers what can be recovered"
                    } else {
                        ""
                    }
                )));
            }
        }
    }
    Ok(())
}

/// The anomalies of an import by class, most frequent first: "no anomalies", or "125
/// anomalies: 100 send never received, 25 receive never matched".
fn anomaly_counts(by_kind: &[(String, u64)]) -> String {
    let total: u64 = by_kind.iter().map(|(_, n)| n).sum();
    if total == 0 {
        return "no anomalies".to_string();
    }
    let mut kinds: Vec<&(String, u64)> = by_kind.iter().filter(|(_, n)| *n > 0).collect();
    kinds.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let list: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
    let noun = if total == 1 { "anomaly" } else { "anomalies" };
    format!("{total} {noun}: {}", list.join(", "))
}
