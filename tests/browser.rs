//! The report and every picture in a real browser: headless Chromium (Debian's `chromium`,
//! installed by `.ci/run`) opens each file, takes a screenshot, and the test checks that the
//! page logged nothing to the console (no script error, no refused resource) and that the
//! screenshot is not blank. Skipped, saying so, where Chromium is absent.
//!
//! With `MTFDB_SCREENSHOTS=DIR`, the screenshots are kept in DIR: the pictures of the report and
//! the timeline in docs/images (shown in README.md and docs/shell.md) are taken this way.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use mtfdb::export::report::report;
use mtfdb::export::svg::statement_svg;
use mtfdb::gen::Scenario;
use mtfdb::Session;

fn chromium() -> Option<PathBuf> {
    let found = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists());
    if found.is_none() {
        eprintln!("skipped: no chromium (.ci/run installs Debian's chromium)");
    }
    found
}

/// What Chromium made of `page`: the console lines it logged, and the screenshot's pixels
/// (RGBA rows).
struct Shot {
    console: Vec<String>,
    pixels: Vec<u8>,
    width: usize,
}

fn open_in_browser(browser: &Path, page: &Path, png: &Path, size: (u32, u32)) -> Shot {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--window-size={},{}", size.0, size.1))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        png.exists(),
        "{}: no screenshot; chromium said {}",
        page.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let console = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    let decoder = png::Decoder::new(std::fs::File::open(png).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut pixels).unwrap();
    pixels.truncate(info.buffer_size());
    let channels = info.color_type.samples();
    // Keep RGB only.
    let rgb: Vec<u8> = pixels
        .chunks(channels)
        .flat_map(|p| p[..3.min(p.len())].to_vec())
        .collect();
    Shot {
        console,
        pixels: rgb,
        width: info.width as usize,
    }
}

impl Shot {
    /// The share of pixels that are not the background (the top-left pixel's colour).
    fn drawn_share(&self) -> f64 {
        let background = &self.pixels[..3];
        let pixels = self.pixels.len() / 3;
        let drawn = self.pixels.chunks(3).filter(|p| *p != background).count();
        assert!(self.width > 0);
        drawn as f64 / pixels as f64
    }

    /// The number of distinct colours.
    fn colours(&self) -> usize {
        let mut seen: Vec<[u8; 3]> = self.pixels.chunks(3).map(|p| [p[0], p[1], p[2]]).collect();
        seen.sort_unstable();
        seen.dedup();
        seen.len()
    }
}

#[test]
fn the_report_and_every_picture_load_in_chromium_without_errors_and_show_something() {
    let Some(browser) = chromium() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let keep = std::env::var_os("MTFDB_SCREENSHOTS").map(PathBuf::from);
    let (_db_dir, db) = common::temp_db();
    common::import_generated(&db, &common::delayed_run(Scenario::Stencil2d), "stencil2d");
    let mut session = Session::new(db);
    let html = report(&mut session).unwrap();
    let page = dir.path().join("report.html");
    std::fs::write(&page, &html).unwrap();
    let mut pages = vec![("report".to_string(), page, (1280, 2400))];
    // The timeline: one halo exchange, from just before rank 0's 20th Isend.
    let sends = session.run("SELECT MPI_Isend FOR PROCESS(0)").unwrap();
    let at = sends.column("start_ns").unwrap();
    let t = match sends.rows[20][at] {
        mtfdb::Value::Int(t) => t as u64,
        ref other => panic!("{other:?}"),
    };
    let timeline = format!(
        "SELECT OPERATIONS BETWEEN TIME {} ns AND {} ns",
        t - 60_000,
        t + 240_000
    );
    let statements = [
        ("matrix", "SELECT COMMUNICATION MATRIX"),
        ("histogram", "SELECT HISTOGRAM OF SIZE"),
        ("timeline", timeline.as_str()),
        ("phases", "SELECT PHASES"),
        ("topology", "SELECT TOPOLOGY"),
        ("waits", "SELECT WAIT STATES GROUP BY PROCESS"),
        ("critical-path", "SELECT CRITICAL PATH"),
    ];
    for (name, statement) in statements {
        let svg = statement_svg(&mut session, statement).unwrap();
        let path = dir.path().join(format!("{name}.svg"));
        std::fs::write(&path, svg).unwrap();
        pages.push((name.to_string(), path, (1200, 1000)));
    }
    for (name, page, size) in pages {
        let png = dir.path().join(format!("{name}.png"));
        let shot = open_in_browser(&browser, &page, &png, size);
        assert!(
            shot.console.is_empty(),
            "{name}: the console says {:?}",
            shot.console
        );
        let share = shot.drawn_share();
        assert!(share > 0.01, "{name}: only {share} of the pixels are drawn");
        assert!(shot.colours() > 8, "{name}: {} colours", shot.colours());
        if let Some(keep) = &keep {
            std::fs::create_dir_all(keep).unwrap();
            std::fs::copy(&png, keep.join(format!("{name}.png"))).unwrap();
        }
    }
}

#[test]
fn the_browser_check_catches_a_page_with_a_script_error_and_a_blank_page() {
    let Some(browser) = chromium() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.html");
    std::fs::write(
        &broken,
        "<!DOCTYPE html><html><body><p>x</p><script>no_such_function();</script></body></html>",
    )
    .unwrap();
    let shot = open_in_browser(
        &browser,
        &broken,
        &dir.path().join("broken.png"),
        (400, 300),
    );
    assert!(
        shot.console.iter().any(|l| l.contains("no_such_function")),
        "{:?}",
        shot.console
    );
    let blank = dir.path().join("blank.html");
    std::fs::write(&blank, "<!DOCTYPE html><html><body></body></html>").unwrap();
    let shot = open_in_browser(&browser, &blank, &dir.path().join("blank.png"), (400, 300));
    assert_eq!(shot.drawn_share(), 0.0);
}
