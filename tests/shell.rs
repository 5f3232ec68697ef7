//! The shell as a person uses it, driven through tmux: keys are sent to a terminal of a fixed
//! size and the screen is read back. Covers the continuation prompt, context-aware Tab
//! completion, `.output` and `.once`, `.read`, the pager, Ctrl-C during a long statement and
//! history after a killed terminal; and, without a terminal, a piped script's pager and bail.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

mod common;

use common::{mtfdb_output as mtfdb, mtfdb_repl};

/// How long the screen may take to show what a test waits for.
const PATIENCE: Duration = Duration::from_secs(20);

/// A shell running in its own tmux server (so that tests do not share one).
struct Terminal {
    socket: String,
}

impl Terminal {
    /// Starts `mtfdb --db DB repl` in `cwd` in an 160 x 40 terminal with HOME set to `home` and
    /// the extra environment `env`; `None` when tmux is not installed.
    fn start(db: &Path, cwd: &Path, home: &Path, env: &[(&str, &str)]) -> Option<Terminal> {
        if Command::new("tmux").arg("-V").output().is_err() {
            eprintln!("skipped: tmux is not installed (the shell's terminal tests need it)");
            return None;
        }
        let socket = format!(
            "mtfdb-test-{}-{}",
            std::process::id(),
            cwd.file_name().unwrap().to_string_lossy()
        );
        let mut command = format!("env -u MTFDB_DB HOME={} TERM=xterm", home.display());
        for (k, v) in env {
            command.push_str(&format!(" {k}='{v}'"));
        }
        command.push_str(&format!(
            " {} --db {} repl",
            env!("CARGO_BIN_EXE_mtfdb"),
            db.display()
        ));
        let status = Command::new("tmux")
            .args(["-L", &socket, "-f", "/dev/null", "new-session", "-d"])
            .args(["-x", "160", "-y", "40", "-c"])
            .arg(cwd)
            .arg(&command)
            .status()
            .unwrap();
        assert!(status.success(), "tmux new-session failed");
        let terminal = Terminal { socket };
        terminal.wait_for("mtfdb>");
        Some(terminal)
    }

    fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .unwrap()
    }

    /// Types `text` (literally).
    fn type_text(&self, text: &str) {
        // tmux reads an argument ending in `;` as the end of its command; `\;` is the text.
        let text = match text.strip_suffix(';') {
            Some(start) => format!("{start}\\;"),
            None => text.to_string(),
        };
        assert!(self.tmux(&["send-keys", "-l", &text]).status.success());
    }

    /// Presses keys by name: Enter, Tab, C-c, Up.
    fn press(&self, key: &str) {
        assert!(self.tmux(&["send-keys", key]).status.success());
    }

    /// Types `line` and presses Enter, once the shell waits at an empty prompt (keys typed
    /// ahead while a statement runs could reach the terminal before the editor).
    fn enter(&self, line: &str) {
        self.wait_for_prompt();
        self.type_text(line);
        self.press("Enter");
    }

    /// Waits until the shell shows an empty prompt: only then is the line editor reading keys
    /// (it discards keys typed ahead while it switches the terminal to raw mode).
    fn wait_for_prompt(&self) {
        self.wait_until("an empty prompt", |s| {
            let last = s.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
            matches!(last.trim(), "mtfdb>" | "...>")
        });
    }

    /// What the terminal shows.
    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-p"]).stdout).into_owned()
    }

    /// Waits until the screen satisfies `ok`, and returns it.
    fn wait_until(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let started = Instant::now();
        loop {
            let screen = self.screen();
            if ok(&screen) {
                return screen;
            }
            assert!(
                started.elapsed() < PATIENCE,
                "the screen never showed {what}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the screen contains `needle`.
    fn wait_for(&self, needle: &str) -> String {
        self.wait_until(&format!("{needle:?}"), |s| s.contains(needle))
    }

    /// Waits until `needle` appears `n` times on the screen.
    fn wait_count(&self, needle: &str, n: usize) -> String {
        self.wait_until(&format!("{needle:?} {n} times"), |s| {
            s.matches(needle).count() >= n
        })
    }

    /// Kills the terminal (not the shell's `.quit`): as closing its window would.
    fn kill(&self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A folder holding a database `db` with a generated trace `t` (SCENARIO RANKS ITERATIONS), a
/// home folder, and the trace's file; returns the folder and the database's path.
fn setup(scenario: &str, ranks: &str, iterations: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let trace = dir.path().join(format!("{scenario}.mtf"));
    let gen = mtfdb(
        &db,
        &[
            "gen",
            scenario,
            "--ranks",
            ranks,
            "--iterations",
            iterations,
            "-o",
            trace.to_str().unwrap(),
        ],
    );
    assert!(gen.status.success());
    let import = mtfdb(&db, &["import", trace.to_str().unwrap(), "--name", "t"]);
    assert!(import.status.success(), "{import:?}");
    std::fs::create_dir(dir.path().join("home")).unwrap();
    (dir, db)
}

/// The count `statement` gives (its csv's second line).
fn count(db: &Path, statement: &str) -> String {
    let o = mtfdb(db, &["query", statement, "--format", "csv"]);
    assert!(o.status.success());
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .nth(1)
        .unwrap()
        .to_string()
}

#[test]
fn an_unfinished_statement_shows_the_continuation_prompt_and_a_meta_line_ends_it() {
    let (dir, db) = setup("ring", "4", "2");
    let messages = count(&db, "SELECT COUNT(*) FROM MESSAGES");
    let home = dir.path().join("home");
    let Some(t) = Terminal::start(&db, dir.path(), &home, &[]) else {
        return;
    };
    t.enter("SELECT COUNT(*)");
    t.wait_for("\n   ...>");
    t.enter("FROM MESSAGES;");
    let screen = t.wait_for("(1 row)");
    assert!(
        screen.contains(&format!("\n{messages:>8}\n")),
        "{messages}:\n{screen}"
    );
    // `.help` after a statement without `;`: the statement runs, then the help shows.
    t.enter("SELECT COUNT(*) FROM MESSAGES");
    t.wait_count("   ...>", 2);
    t.enter(".help");
    let screen = t.wait_for(".width N ...");
    let result = screen
        .find(&format!("{messages:>8}\n(1 row)\n"))
        .expect(&screen);
    let help = screen.find("Statements end with ';'").expect(&screen);
    assert!(result < help, "the statement ran first:\n{screen}");
    t.enter(".quit");
}

#[test]
fn tab_completes_a_mode_and_a_file_path() {
    let (dir, db) = setup("ring", "4", "2");
    let home = dir.path().join("home");
    let Some(t) = Terminal::start(&db, dir.path(), &home, &[]) else {
        return;
    };
    t.type_text(".mode c");
    t.press("Tab");
    t.wait_for("mtfdb> .mode csv");
    t.press("Enter");
    // The folder holds db, home and ring.mtf: "ri" can only be the trace file.
    t.wait_for_prompt();
    t.type_text(".import ri");
    t.press("Tab");
    t.wait_for("mtfdb> .import ring.mtf");
    t.type_text(" again");
    t.press("Enter");
    t.wait_for("imported ring.mtf as \"again\"");
    // In csv mode, the traces print as csv.
    t.enter("SHOW TRACES;");
    t.wait_for("\nagain,");
}

#[test]
fn output_sends_results_to_a_file_and_once_only_the_next() {
    let (dir, db) = setup("ring", "4", "2");
    let messages = count(&db, "SELECT COUNT(*) FROM MESSAGES");
    let operations = count(&db, "SELECT COUNT(*) FROM OPERATIONS");
    let home = dir.path().join("home");
    let Some(t) = Terminal::start(&db, dir.path(), &home, &[]) else {
        return;
    };
    t.enter(".mode csv");
    t.enter(".timer off");
    t.enter(".output all.csv");
    t.enter("SELECT COUNT(*) FROM MESSAGES;");
    t.enter("SELECT COUNT(*) FROM OPERATIONS;");
    t.enter(".output");
    t.enter(".once one.csv");
    t.enter("SELECT COUNT(*) FROM MESSAGES;");
    t.enter("SHOW TRACES;");
    // The last statement prints on the screen again.
    t.wait_for("\nt,4,");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("all.csv")).unwrap(),
        format!("count(*)\n{messages}\ncount(*)\n{operations}\n")
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("one.csv")).unwrap(),
        format!("count(*)\n{messages}\n")
    );
}

#[test]
fn read_runs_a_script_and_names_the_file_and_line_of_its_error() {
    let (dir, db) = setup("ring", "4", "2");
    let home = dir.path().join("home");
    std::fs::write(
        dir.path().join("script.sql"),
        ".mode csv\nSELECT COUNT(*)\n  FROM MESSAGES;\nSELECT NOTHING;\nSHOW TRACES;\n",
    )
    .unwrap();
    let messages = count(&db, "SELECT COUNT(*) FROM MESSAGES");
    let Some(t) = Terminal::start(&db, dir.path(), &home, &[]) else {
        return;
    };
    t.enter(".read script.sql");
    let screen = t.wait_for("error: script.sql: at line 4, column 8");
    assert!(
        screen.contains(&format!("count(*)\n{messages}\n")),
        "{screen}"
    );
    // .bail is off on a terminal: the script went on past the error.
    assert!(screen.contains("\nt,4,"), "{screen}");
    t.wait_for("error: script.sql: 1 statement failed (reported above)");
}

#[test]
fn a_long_result_goes_through_the_pager_on_a_terminal_and_is_cut_without_one() {
    let (dir, db) = setup("stencil2d", "16", "2");
    let home = dir.path().join("home");
    let paged = dir.path().join("paged.txt");
    let pager = format!("cat > {}", paged.display());
    let messages: usize = count(&db, "SELECT COUNT(*) FROM MESSAGES").parse().unwrap();
    assert!(messages > 40, "longer than the 40-line screen");
    let Some(t) = Terminal::start(&db, dir.path(), &home, &[("PAGER", &pager)]) else {
        return;
    };
    t.enter("SELECT ALL MESSAGES;");
    t.wait_for("time: ");
    let text = std::fs::read_to_string(&paged).unwrap();
    assert!(
        text.ends_with(&format!("({messages} rows)\n")),
        "the pager had the whole result: {text}"
    );
    std::fs::remove_file(&paged).unwrap();
    t.enter(".pager off");
    t.enter(".maxrows 5");
    t.enter("SELECT ALL MESSAGES;");
    t.wait_for(&format!(
        "… {} more rows not shown (.maxrows 5 cuts",
        messages - 5
    ));
    assert!(!paged.exists(), "the pager ran with .pager off");
}

#[test]
fn a_piped_script_has_no_pager_and_stops_at_its_first_error_naming_it() {
    let (dir, db) = setup("stencil2d", "16", "10");
    let paged = dir.path().join("paged.txt");
    let messages: usize = count(&db, "SELECT COUNT(*) FROM MESSAGES").parse().unwrap();
    assert!(messages > 200);
    let pager = format!("cat > {}", paged.display());
    let run = |script: &str| mtfdb_repl(&db, script, &[("PAGER", &pager)]);
    let o = run("SELECT ALL MESSAGES;\n");
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(&format!(
            "… {} more rows not shown (.maxrows 200 cuts",
            messages - 200
        )),
        "{out}"
    );
    assert!(!paged.exists(), "a pager ran without a terminal");

    let script = "SELECT COUNT(*) FROM MESSAGES;\n\nSELECT COUNT(*)\n  FROM MESSAGES IN VIEW nope;\nSHOW TRACES;\n";
    let o = run(script);
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        out.matches("(1 row)").count(),
        1,
        "stopped before SHOW TRACES: {out}"
    );
    assert!(err.starts_with("error: line 3: "), "{err}");
    assert!(
        err.ends_with("\n  in: SELECT COUNT(*) FROM MESSAGES IN VIEW nope\n"),
        "{err}"
    );
    // With .bail off the script goes on, then fails saying how many statements failed.
    let o = run(&format!(".bail off\n{script}"));
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout)
            .matches("(1 row)")
            .count(),
        2
    );
    assert!(String::from_utf8_lossy(&o.stderr)
        .ends_with("error: 1 statement failed (reported above)\n"));
}

#[test]
fn ctrl_c_stops_a_long_statement_and_the_prompt_comes_back() {
    let (dir, db) = setup("stencil2d", "128", "800");
    let home = dir.path().join("home");
    let Some(t) = Terminal::start(&db, dir.path(), &home, &[]) else {
        return;
    };
    t.enter("SELECT ALL OPERATIONS ORDER BY duration_ns DESC, id;");
    std::thread::sleep(Duration::from_millis(300));
    t.press("C-c");
    let screen = t.wait_for("error: cancelled");
    assert!(!screen.contains(" rows)"), "it finished first:\n{screen}");
    t.enter("SHOW TRACES;");
    t.wait_for("(1 row)");
}

#[test]
fn history_survives_a_killed_terminal() {
    let (dir, db) = setup("ring", "4", "2");
    let home = dir.path().join("home");
    {
        let Some(t) = Terminal::start(&db, dir.path(), &home, &[]) else {
            return;
        };
        t.enter("SHOW TRACES;");
        t.wait_for("(1 row)");
        t.kill();
    }
    let history = std::fs::read_to_string(home.join(".mtfdb_history")).unwrap();
    assert!(history.lines().any(|l| l == "SHOW TRACES;"), "{history}");
    let t = Terminal::start(&db, dir.path(), &home, &[]).unwrap();
    t.press("Up");
    t.wait_for("mtfdb> SHOW TRACES;");
    t.press("Enter");
    t.wait_for("(1 row)");
}

#[test]
fn meta_commands_set_headers_widths_and_run_tables_schema_open_and_shell() {
    let (_dir, db) = setup("ring", "4", "2");
    let messages = count(&db, "SELECT COUNT(*) FROM MESSAGES");
    let script = format!(
        ".tables\n.schema MESSAGES\n.mode csv\n.headers off\nSELECT COUNT(*) FROM MESSAGES;\n\
         .mode table\n.headers on\n.width 12\nSELECT COUNT(*) FROM MESSAGES;\n.show\n\
         .open {}\n.shell echo from the shell\n.system false\nSHOW TRACES;\n",
        db.display()
    );
    let o = mtfdb_repl(&db, &script, &[]);
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    // SHOW TABLES and DESCRIBE MESSAGES.
    assert!(out.contains("\nROUTINE CALLS "), "{out}");
    assert!(out.contains("\nsend_time_ns "), "{out}");
    // Without headers the csv is the value alone; then with .width 12 the table's column is
    // 12 wide (a number's name aligned right, as its values).
    assert!(
        out.contains(&format!(
            "\n{messages}\n{:>12}\n{}\n{messages:>12}\n(1 row)\n",
            "count(*)",
            "-".repeat(12)
        )),
        "{out}"
    );
    for setting in [
        "    mode: table\n",
        " headers: on\n",
        "   width: 12\n",
        "    bail: on\n",
    ] {
        assert!(out.contains(setting), "{setting:?} in {out}");
    }
    assert!(
        out.contains(&format!("{} is already open\n", db.display())),
        "{out}"
    );
    assert!(out.contains("\nfrom the shell\n"), "{out}");
    // `.system false` fails and, piped, ends the script before SHOW TRACES.
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        err, "error: line 13: `false` ended with exit status: 1\n",
        "{out}"
    );
    assert!(!out.contains("\nt "), "{out}");
}

/// `mtfdb --db DB repl ARGS` run in `cwd` with `script` piped on its standard input.
fn repl_in(db: &Path, cwd: &Path, args: &[&str], script: &str) -> Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_mtfdb"))
        .arg("--db")
        .arg(db)
        .arg("repl")
        .args(args)
        .current_dir(cwd)
        .env_remove("MTFDB_DB")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let written = child.stdin.take().unwrap().write_all(script.as_bytes());
    let output = child.wait_with_output().unwrap();
    written.unwrap();
    output
}

#[test]
fn safe_mode_refuses_what_reaches_outside_the_database_and_goes_on() {
    let (dir, db) = setup("ring", "4", "2");
    let d = dir.path();
    // What each refused command would have created, had it run.
    std::fs::write(d.join("inner.sql"), ".shell touch by-read\n").unwrap();
    let other = d.join("other");
    let script = ".shell touch by-shell\n\
                  .system touch by-system\n\
                  .output out.txt\n\
                  .once once.txt\n\
                  .output |touch by-pipe\n\
                  .open other\n\
                  .import ring.mtf second\n\
                  .read inner.sql\n\
                  .safe off\n\
                  .output\n\
                  .mode csv\n\
                  SHOW TRACES;\n\
                  .show\n\
                  .help\n";
    let o = repl_in(&db, d, &["--safe"], script);
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    for made in [
        "by-shell",
        "by-system",
        "out.txt",
        "once.txt",
        "|touch by-pipe",
        "by-pipe",
        "by-read",
    ] {
        assert!(!d.join(made).exists(), "{made} was created:\n{err}");
    }
    assert!(!other.exists(), "{err}");
    // Each refusal names the command, its line and why; the script went on to the end.
    for (line, command, why) in [
        (1, ".shell", "it runs a command in the system shell"),
        (2, ".system", "it runs a command in the system shell"),
        (3, ".output", "it writes to a file or a pipe"),
        (4, ".once", "it writes to a file or a pipe"),
        (5, ".output", "it writes to a file or a pipe"),
        (6, ".open", "it opens a database other than this one"),
        (7, ".import", "it reads a file"),
        (8, ".read", "it reads a file"),
    ] {
        let message = format!(
            "error: line {line}: {command} is refused in safe mode: {why}, and safe mode keeps a script to this database\n"
        );
        assert!(err.contains(&message), "{message:?} in\n{err}");
    }
    assert!(
        err.contains(
            "error: line 9: safe mode stays on until the shell ends: .safe off is refused\n"
        ),
        "{err}"
    );
    // `.output` alone (back to the screen) is allowed; statements run, in the only database.
    assert!(out.contains("\nt,4,"), "{out}");
    assert!(!out.contains("second"), "{out}");
    assert!(out.contains("    safe: on\n"), "{out}");
    assert!(
        out.contains(".safe on                      refuse .shell .system .output/.once FILE"),
        "{out}"
    );
    // The refusals make the script fail, after it ran to its end.
    assert!(
        err.ends_with("error: 9 statements failed (reported above)\n"),
        "{err}"
    );
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn safe_on_refuses_the_shell_from_then_on_and_a_read_script_cannot_undo_it() {
    let (dir, db) = setup("ring", "4", "2");
    let d = dir.path();
    let o = repl_in(
        &db,
        d,
        &[],
        ".shell echo before\n.safe on\n.shell echo hi\n.shell touch made\nSHOW TRACES;\n",
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    // Before `.safe on` the shell ran; after, it did not, and the script went on.
    assert!(out.starts_with("before\n"), "{out}");
    assert!(!out.contains("hi\n"), "{out}");
    assert!(!d.join("made").exists(), "{err}");
    assert!(
        err.contains(
            "error: line 3: .shell is refused in safe mode: it runs a command in the system shell"
        ),
        "{err}"
    );
    assert!(out.contains("\nt "), "SHOW TRACES ran: {out}");
    assert_eq!(o.status.code(), Some(1));

    // A script read before safe mode turns it on: it stays on in the script that read it,
    // and the script cannot turn it off.
    std::fs::write(
        d.join("inner.sql"),
        ".safe on\n.safe off\n.shell touch inner-made\n",
    )
    .unwrap();
    let o = repl_in(
        &db,
        d,
        &[],
        ".bail off\n.read inner.sql\n.safe off\n.shell touch outer-made\n.show\n",
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!d.join("inner-made").exists(), "{err}");
    assert!(!d.join("outer-made").exists(), "{err}");
    assert!(
        err.contains("error: inner.sql: line 2: safe mode stays on until the shell ends"),
        "{err}"
    );
    assert!(
        err.contains("error: line 4: .shell is refused in safe mode"),
        "{err}"
    );
    assert!(out.contains("    safe: on\n"), "{out}");
}

#[test]
fn the_shell_stays_open_while_the_cli_queries_imports_and_drops_the_same_database() {
    let (dir, db) = setup("ring", "4", "2");
    let messages = count(&db, "SELECT COUNT(*) FROM MESSAGES");
    let home = dir.path().join("home");
    let Some(t) = Terminal::start(&db, dir.path(), &home, &[]) else {
        return;
    };
    t.enter("USE TRACE t;");
    t.wait_for("(1 row)");
    t.enter("SELECT COUNT(*) FROM MESSAGES;");
    t.wait_count("(1 row)", 2);
    // The shell holds the database open: the command line reads and writes it all the same.
    assert_eq!(count(&db, "SELECT COUNT(*) FROM MESSAGES"), messages);
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/traces/stencil2d-16.mtf"
    );
    let import = mtfdb(&db, &["import", example, "--name", "second"]);
    assert!(import.status.success(), "{import:?}");
    // The shell's next statement sees what the command line committed.
    t.enter("SHOW TRACES;");
    t.wait_for("second");
    // A view the shell stores is seen by the command line at once.
    t.enter("CREATE VIEW from0 AS SELECT ALL MESSAGES WHERE SENDER = 0;");
    t.wait_count("(1 row)", 3);
    let o = mtfdb(
        &db,
        &[
            "query",
            "SELECT COUNT(*) FROM MESSAGES IN VIEW from0",
            "--trace",
            "t",
            "--format",
            "csv",
        ],
    );
    assert!(o.status.success(), "{o:?}");
    let in_view = String::from_utf8_lossy(&o.stdout)
        .lines()
        .nth(1)
        .unwrap()
        .to_string();
    assert!(in_view.trim() != "0", "{in_view}");
    let dropped = mtfdb(&db, &["drop", "second"]);
    assert!(dropped.status.success(), "{dropped:?}");
    t.enter("SELECT COUNT(*) FROM MESSAGES IN VIEW from0;");
    t.wait_for(&format!("{:>8}\n(1 row)", in_view.trim()));
    t.enter("SHOW TRACES;");
    t.wait_until("the list without the dropped trace", |s| {
        s.rfind("SHOW TRACES;")
            .is_some_and(|at| s[at..].contains("(1 row)") && !s[at..].contains("second"))
    });
    t.enter(".quit");
}

#[test]
fn units_off_prints_the_exact_values_in_tables_and_units_on_the_units() {
    let (_dir, db) = setup("cg", "4", "3");
    let exact = count(&db, "SELECT SUM(DURATION) FROM OPERATIONS");
    let script = "SELECT SUM(DURATION) FROM OPERATIONS;\n.units off\n.show\n\
                  SELECT SUM(DURATION) FROM OPERATIONS;\n.units on\n\
                  SELECT SUM(DURATION) FROM OPERATIONS;\n.mode csv\n.units on\n\
                  SELECT SUM(DURATION) FROM OPERATIONS;\n";
    let o = mtfdb_repl(&db, script, &[]);
    assert!(o.status.success(), "{o:?}");
    let out = String::from_utf8_lossy(&o.stdout);
    let ns: f64 = exact.parse().unwrap();
    let shown = mtfdb::units::duration(ns);
    // With units (the default, and again after .units on), then exact, then CSV exact.
    let tables: Vec<&str> = out.split("(1 row)\n").collect();
    assert!(
        tables[0].contains(&format!("\n{shown:>13}\n")),
        "{shown}: {out}"
    );
    assert!(out.contains("   units: off\n"), "{out}");
    assert!(
        tables[1].contains(&format!("\n{exact:>13}\n")),
        "{exact}: {out}"
    );
    assert!(tables[2].contains(&format!("\n{shown:>13}\n")), "{out}");
    assert!(
        tables[3].ends_with(&format!("sum(duration)\n{exact}\n")),
        "{out}"
    );
    let bad = mtfdb_repl(&db, ".units maybe\n", &[]);
    assert!(!bad.status.success());
}
