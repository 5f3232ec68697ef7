//! The query language's tokens, recognized with nom. Whitespace and `--` comments separate
//! tokens and are dropped; every token keeps its byte span for error positions.

use nom::branch::alt;
use nom::bytes::complete::{is_not, tag, take_while};
use nom::character::complete::{alpha1, alphanumeric1, char, digit1, multispace1, one_of};
use nom::combinator::{opt, recognize};
use nom::multi::many0_count;
use nom::sequence::{delimited, pair, preceded};
use nom::IResult;

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A keyword or a bare name: a letter or `_`, then letters, digits and `_`, with single `.`
    /// or `-` between them (`C1`, `MPI_Isend`, `wrf-16`).
    Word,
    /// Digits with an optional fraction: `12`, `0.5`.
    Number,
    /// A quoted name, `'…'` or `"…"`; the token's text excludes the quotes.
    Quoted,
    /// Punctuation or an operator: `( ) , - * ; : < <= = != <> >= >`.
    Symbol,
}

/// One token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Token<'a> {
    pub kind: Kind,
    /// The token's text (for quoted names, without the quotes).
    pub text: &'a str,
    /// Byte offset of the token's first character (the opening quote for quoted names).
    pub start: usize,
    /// Byte offset just past the token (past the closing quote).
    pub end: usize,
}

impl Token<'_> {
    /// True for a word equal to `keyword`, ignoring ASCII case.
    pub fn is_keyword(&self, keyword: &str) -> bool {
        self.kind == Kind::Word && self.text.eq_ignore_ascii_case(keyword)
    }

    /// True for the symbol `s`.
    pub fn is_symbol(&self, s: &str) -> bool {
        self.kind == Kind::Symbol && self.text == s
    }
}

/// A lexical error: a byte offset and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LexError {
    pub at: usize,
    pub message: String,
}

fn word(input: &str) -> IResult<&str, &str> {
    recognize(pair(
        alt((alpha1, tag("_"))),
        many0_count(alt((
            alphanumeric1,
            tag("_"),
            recognize(pair(one_of(".-"), alphanumeric1)),
        ))),
    ))(input)
}

fn number(input: &str) -> IResult<&str, &str> {
    recognize(pair(digit1, opt(pair(char('.'), digit1))))(input)
}

fn symbol(input: &str) -> IResult<&str, &str> {
    alt((
        tag("<="),
        tag(">="),
        tag("!="),
        tag("<>"),
        recognize(one_of("()<>=,-*;:/")),
    ))(input)
}

fn quoted(input: &str) -> IResult<&str, &str> {
    alt((
        delimited(char('\''), recognize(opt(is_not("'"))), char('\'')),
        delimited(char('"'), recognize(opt(is_not("\""))), char('"')),
    ))(input)
}

/// Whitespace and comments.
fn blank(input: &str) -> IResult<&str, usize> {
    many0_count(alt((
        multispace1,
        recognize(preceded(tag("--"), take_while(|c| c != '\n'))),
    )))(input)
}

/// Splits `text` into tokens.
pub(crate) fn tokenize(text: &str) -> Result<Vec<Token<'_>>, LexError> {
    let mut tokens = Vec::new();
    let mut rest = text;
    loop {
        if let Ok((r, _)) = blank(rest) {
            rest = r;
        }
        if rest.is_empty() {
            return Ok(tokens);
        }
        let start = text.len() - rest.len();
        let (kind, r, t) = if let Ok((r, t)) = word(rest) {
            (Kind::Word, r, t)
        } else if let Ok((r, t)) = number(rest) {
            (Kind::Number, r, t)
        } else if let Ok((r, t)) = quoted(rest) {
            (Kind::Quoted, r, t)
        } else if let Ok((r, t)) = symbol(rest) {
            (Kind::Symbol, r, t)
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            let message = if c == '\'' || c == '"' {
                format!("unterminated quoted name: expected a closing {c}")
            } else {
                format!("unexpected character \"{c}\"")
            };
            return Err(LexError { at: start, message });
        };
        rest = r;
        tokens.push(Token {
            kind,
            text: t,
            start,
            end: text.len() - rest.len(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(Kind, &str)> {
        tokenize(text)
            .unwrap()
            .into_iter()
            .map(|t| (t.kind, t.text))
            .collect()
    }

    #[test]
    fn tokens_and_spans() {
        assert_eq!(
            kinds("SELECT x-- c\n(3-6) 500ms 'a b' <= <> MPI_Isend wrf-16 FAN-IN"),
            vec![
                (Kind::Word, "SELECT"),
                (Kind::Word, "x"),
                (Kind::Symbol, "("),
                (Kind::Number, "3"),
                (Kind::Symbol, "-"),
                (Kind::Number, "6"),
                (Kind::Symbol, ")"),
                (Kind::Number, "500"),
                (Kind::Word, "ms"),
                (Kind::Quoted, "a b"),
                (Kind::Symbol, "<="),
                (Kind::Symbol, "<>"),
                (Kind::Word, "MPI_Isend"),
                (Kind::Word, "wrf-16"),
                (Kind::Word, "FAN-IN"),
            ]
        );
        let t = tokenize("  'ab' 1.25").unwrap();
        assert_eq!((t[0].start, t[0].end), (2, 6));
        assert_eq!((t[1].start, t[1].end, t[1].text), (7, 11, "1.25"));
    }

    #[test]
    fn lexical_errors() {
        assert_eq!(
            tokenize("SELECT # x"),
            Err(LexError {
                at: 7,
                message: "unexpected character \"#\"".into()
            })
        );
        assert_eq!(
            tokenize("USE TRACE 'abc").unwrap_err().message,
            "unterminated quoted name: expected a closing '"
        );
        assert_eq!(kinds("-- only a comment"), vec![]);
    }
}
