//! Long results on a terminal go through a pager, as psql's do: `$PAGER`, else `less -S`
//! (long lines scroll sideways instead of wrapping).

use std::io::Write;
use std::process::{Command, Stdio};

use mtfdb::Error;

/// Whether a result of `lines` lines is longer than the terminal on standard output shows
/// (false when standard output is not a terminal).
pub fn longer_than_screen(lines: usize) -> bool {
    match terminal_size::terminal_size_of(std::io::stdout()) {
        // The prompt's line stays on the screen.
        Some((_, terminal_size::Height(rows))) => lines >= rows as usize,
        None => false,
    }
}

/// Shows `text` through the pager and waits for it to end; false when the pager could not
/// be run (not installed), and `text` is still to be shown.
pub fn page(text: &str) -> Result<bool, Error> {
    let pager = std::env::var("PAGER")
        .ok()
        .filter(|p| !p.trim().is_empty())
        .unwrap_or_else(|| "less -S".to_string());
    let Ok(mut child) = Command::new("sh")
        .arg("-c")
        .arg(&pager)
        .stdin(Stdio::piped())
        .spawn()
    else {
        return Ok(false);
    };
    if let Some(mut stdin) = child.stdin.take() {
        // The pager may quit before it read everything (q in less): that is not an error.
        let _ = stdin.write_all(text.as_bytes());
    }
    let status = child
        .wait()
        .map_err(|e| Error::Usage(format!("the pager {pager:?}: {e}")))?;
    // 127: the shell found no such command.
    Ok(status.code() != Some(127))
}
