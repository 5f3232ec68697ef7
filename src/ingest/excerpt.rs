//! What an input error shows of the input: a token its message quotes, and the line under
//! it with the caret. A damaged or mutated input can hold a token or line of megabytes; an
//! error shows a few dozen characters of it and says how long it is, never the whole of it.

/// The characters of a token a message quotes.
pub(crate) const QUOTE_CHARS: usize = 60;

/// The characters of a line shown under an error.
pub(crate) const LINE_CHARS: usize = 160;

/// `token` quoted for a message as `{:?}` quotes it (`"MPI_Sned"`); past [`QUOTE_CHARS`]
/// characters, its start followed by `…` and its whole length
/// (`"abcabc…abcabc"… (100000 characters)`).
pub(crate) fn quoted(token: &str) -> String {
    match token.char_indices().nth(QUOTE_CHARS) {
        None => format!("{token:?}"),
        Some((cut, _)) => format!(
            "{:?}… ({} characters)",
            &token[..cut],
            token.chars().count()
        ),
    }
}

/// `text` as a message shows it without quotes, cut as [`quoted`] cuts a token.
pub(crate) fn clipped(text: &str) -> String {
    match text.char_indices().nth(QUOTE_CHARS) {
        None => text.to_string(),
        Some((cut, _)) => format!("{}… ({} characters)", &text[..cut], text.chars().count()),
    }
}

/// The characters of another library's error a message quotes (which may itself quote
/// the input whole).
pub(crate) const MESSAGE_CHARS: usize = 240;

/// Another library's error text for a message, cut as [`clipped`] cuts a token, after
/// [`MESSAGE_CHARS`] characters.
pub(crate) fn clipped_message(text: &str) -> String {
    match text.char_indices().nth(MESSAGE_CHARS) {
        None => text.to_string(),
        Some((cut, _)) => format!("{}… ({} characters)", &text[..cut], text.chars().count()),
    }
}

/// [`quoted`] for bytes read as text (what is not UTF-8 shown as U+FFFD).
pub(crate) fn quoted_bytes(token: &[u8]) -> String {
    quoted(&String::from_utf8_lossy(token))
}

/// The line an input error shows under its message, where the caret marks `column` (1-based,
/// in characters): the whole line when it is short; when long, its first [`LINE_CHARS`]
/// characters followed by `…` and its length, or nothing at all when `column` lies so far in
/// that the caret would stand past them (the message's `file:line:column` still says where).
pub(crate) fn shown_line(line: &str, column: u64) -> String {
    let Some((cut, _)) = line.char_indices().nth(LINE_CHARS) else {
        return line.to_string();
    };
    if column > (LINE_CHARS - 20) as u64 {
        return String::new();
    }
    format!("{}… ({} characters)", &line[..cut], line.chars().count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_tokens_and_lines_are_shown_whole() {
        assert_eq!(quoted("MPI_Sned"), "\"MPI_Sned\"");
        assert_eq!(quoted("a\"b\n"), "\"a\\\"b\\n\"");
        let sixty = "é".repeat(QUOTE_CHARS);
        assert_eq!(quoted(&sixty), format!("{sixty:?}"));
        assert_eq!(shown_line("0 10 20 Send c=0", 5), "0 10 20 Send c=0");
        assert_eq!(quoted_bytes(b"ab\xffc"), "\"ab\u{fffd}c\"");
        assert_eq!(clipped("PRCR9"), "PRCR9");
        assert_eq!(clipped_message("expected `</attr>`"), "expected `</attr>`");
    }

    #[test]
    fn long_tokens_are_cut_with_their_length() {
        let big = "X".repeat(2_000_000);
        let q = quoted(&big);
        assert_eq!(
            q,
            format!("\"{}\"… (2000000 characters)", "X".repeat(QUOTE_CHARS))
        );
        assert_eq!(
            clipped(&big),
            format!("{}… (2000000 characters)", "X".repeat(QUOTE_CHARS))
        );
        assert_eq!(
            clipped_message(&big),
            format!("{}… (2000000 characters)", "X".repeat(MESSAGE_CHARS))
        );
        let wide = "ü".repeat(100);
        assert_eq!(
            quoted(&wide),
            format!("\"{}\"… (100 characters)", "ü".repeat(QUOTE_CHARS))
        );
    }

    #[test]
    fn long_lines_keep_their_start_under_an_early_caret_and_nothing_under_a_late_one() {
        let line = format!("0 10 20 Send c={}", "9".repeat(100_000));
        let shown = shown_line(&line, 16);
        assert!(shown.starts_with("0 10 20 Send c=999"), "{shown}");
        assert!(shown.ends_with("… (100015 characters)"), "{shown}");
        assert!(shown.chars().count() < LINE_CHARS + 30);
        assert_eq!(shown_line(&line, 50_000), "");
    }
}
