//! The progress line an OTF2 import shows on a terminal: locations and events read.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use mtfdb::ingest::Progress;

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

    /// Redraws the line (at most ten times a second).
    pub fn show(&mut self, p: &Progress) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now - t < Duration::from_millis(100))
        {
            return;
        }
        self.last = Some(now);
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

fn millions(n: u64) -> String {
    if n >= 1_000_000 {
        format!("{:.1}M", n as f64 / 1e6)
    } else {
        n.to_string()
    }
}
