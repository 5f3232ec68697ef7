//! The progress line shown on a terminal: an OTF2 import's locations and events read, and
//! the chunks a long analysis or the report reads (through the store's scans). Nothing is
//! drawn when standard error is not a terminal.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mtfdb::ingest::Progress;
use mtfdb::store::scan::{show_progress_with, ScanProgress};

/// A one-line progress display on standard error, drawn only when it is a terminal.
pub struct ProgressBar {
    started: Instant,
    last: Option<Instant>,
    enabled: bool,
    drawn: bool,
}

impl ProgressBar {
    pub fn new(started: Instant) -> ProgressBar {
        ProgressBar {
            started,
            last: None,
            enabled: std::io::stderr().is_terminal(),
            drawn: false,
        }
    }

    /// Whether a redraw is due (the line is drawn at most ten times a second).
    fn due(&mut self) -> Option<Instant> {
        if !self.enabled {
            return None;
        }
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now - t < Duration::from_millis(100))
        {
            return None;
        }
        self.last = Some(now);
        Some(now)
    }

    /// Redraws the line with an import's progress.
    pub fn show(&mut self, p: &Progress) {
        let Some(now) = self.due() else {
            return;
        };
        let share = if p.events_expected > 0 {
            let pct = (p.events as f64 / p.events_expected as f64 * 100.0).min(100.0);
            format!(" of {} ({pct:.0}%)", millions(p.events_expected))
        } else {
            String::new()
        };
        let line = format!(
            "reading: {}/{} locations done, {} events{share}, {:.1} s",
            p.locations_done,
            p.locations,
            millions(p.events),
            (now - self.started).as_secs_f64()
        );
        self.draw(&line);
    }

    /// Redraws the line with a scan's progress: `wait states: operation chunks 120 of 256
    /// (47%), 3.1 s`.
    pub fn show_scan(&mut self, p: &ScanProgress<'_>) {
        let Some(now) = self.due() else {
            return;
        };
        let pct = p.decoded as f64 / p.planned.max(1) as f64 * 100.0;
        let stage = if p.stage.is_empty() {
            "reading".to_string()
        } else {
            p.stage.to_string()
        };
        let line = format!(
            "{stage}: {} chunks {} of {} ({pct:.0}%), {:.1} s",
            p.table.name(),
            p.decoded,
            p.planned,
            (now - self.started).as_secs_f64()
        );
        self.draw(&line);
    }

    fn draw(&mut self, line: &str) {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{line}\x1b[K");
        let _ = err.flush();
        self.drawn = true;
    }

    /// Erases the line before the import's result is printed.
    pub fn clear(&mut self) {
        if self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
            self.drawn = false;
        }
    }
}

/// Shows the scans' progress (long analyses, the report) on a terminal from now on; the
/// returned bar is to be cleared before the command prints its result.
pub fn show_scans(started: Instant) -> Arc<Mutex<ProgressBar>> {
    let bar = Arc::new(Mutex::new(ProgressBar::new(started)));
    let shown = bar.clone();
    show_progress_with(Box::new(move |p| {
        // A worker that finds the line being drawn skips its turn rather than wait.
        if let Ok(mut bar) = shown.try_lock() {
            bar.show_scan(p);
        }
    }));
    bar
}

/// Erases the line of [`show_scans`].
pub fn clear(bar: &Mutex<ProgressBar>) {
    bar.lock().unwrap_or_else(|p| p.into_inner()).clear();
}

fn millions(n: u64) -> String {
    if n >= 1_000_000 {
        format!("{:.1}M", n as f64 / 1e6)
    } else {
        n.to_string()
    }
}
