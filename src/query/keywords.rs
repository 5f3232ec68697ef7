//! The query language's words in one list: the shell completes and highlights them, and the
//! fuzzer mutates statements with them. A test holds it to the parser: every word the parser
//! asks for by name is in it, and every word in it is one the query module or the MPI call
//! names spell.

/// The collectives a statement selects by word (`SELECT BROADCAST …`), each the calls of one
/// collective operation; part of [`KEYWORDS`], and of what the shell completes after `SELECT`.
pub const COLLECTIVE_WORDS: &[&str] = &[
    "BROADCAST",
    "BARRIER",
    "GATHER",
    "SCATTER",
    "REDUCE",
    "ALLREDUCE",
    "ALLGATHER",
    "ALLTOALL",
    "SCAN",
    "REDUCE_SCATTER",
];

/// Every keyword of the query language (and its units), as statements write them.
pub const KEYWORDS: &[&str] = &ALL_KEYWORDS;

/// [`OTHER_KEYWORDS`] and then [`COLLECTIVE_WORDS`], as one list.
const ALL_KEYWORDS: [&str; OTHER_KEYWORDS.len() + COLLECTIVE_WORDS.len()] =
    concat(OTHER_KEYWORDS, COLLECTIVE_WORDS);

/// `a` then `b` (at compile time: lists of words built from shared parts).
const fn concat<const N: usize>(a: &[&'static str], b: &[&'static str]) -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < a.len() {
        out[i] = a[i];
        i += 1;
    }
    let mut j = 0;
    while j < b.len() {
        out[i + j] = b[j];
        j += 1;
    }
    out
}

/// Every keyword but [`COLLECTIVE_WORDS`].
const OTHER_KEYWORDS: &[&str] = &[
    "SELECT",
    "ALL",
    "MESSAGES",
    "POINT_TO_POINT_OPERATIONS",
    "SENDS",
    "RECEIVES",
    "COLLECTIVE_OPERATIONS",
    "OPERATIONS",
    "BETWEEN",
    "AMONG",
    "FOR",
    "PROCESS",
    "PROCESSES",
    "IN",
    "COMM",
    "WORLD",
    "VIEW",
    "TIME",
    "AND",
    "OR",
    "NOT",
    "IS",
    "NULL",
    "WHERE",
    "SIZE",
    "TAG",
    "SENDER",
    "RECEIVER",
    "DURATION",
    "PEER",
    "ROOT",
    "WAIT",
    "STATES",
    "LATE",
    "SENDERS",
    "CRITICAL",
    "PATH",
    "SUMMARY",
    "DELAY",
    "COSTS",
    "SIMULATE",
    "NETWORK",
    "LATENCY",
    "OVERHEAD",
    "GAP",
    "BANDWIDTH",
    "EAGER",
    "CPU",
    "BURSTS",
    "OPERATION",
    "ROUTINE",
    "PATTERN",
    "PATTERNS",
    "PHASE",
    "PHASES",
    "TREE",
    "MATCH",
    "ERRORS",
    "THRESHOLD",
    "ENVELOPE",
    "REFRESH",
    "LOOPS",
    "GLOBAL",
    "MODEL",
    "TOPOLOGY",
    "LOGICAL",
    "WITH",
    "CLOCK",
    "CORRECTION",
    "FAN_IN",
    "FAN_OUT",
    "STATISTICS",
    "COMMUNICATION",
    "MATRIX",
    "OF",
    "BYTES",
    "COUNT",
    "HISTOGRAM",
    "BINS",
    "LOG2",
    "MPI",
    "SUM",
    "AVG",
    "MIN",
    "MAX",
    "FROM",
    "GROUP",
    "HAVING",
    "BY",
    "ORDER",
    "ASC",
    "DESC",
    "LIMIT",
    "EXPLAIN",
    "SHOW",
    "TRACES",
    "COMMUNICATORS",
    "VIEWS",
    "USE",
    "TABLES",
    "DESCRIBE",
    "CALLS",
    "REQUESTS",
    "COLLECTIVE",
    "INSTANCES",
    "ANOMALIES",
    "SENT",
    "RECEIVED",
    "TRACE",
    "CREATE",
    "DROP",
    "AS",
    "KiB",
    "MiB",
    "GiB",
    "ms",
    "us",
    "ns",
    "ANALYZE",
    "ARITHMETIC",
    "ON",
    "OFF",
    "SQL",
    "s",
    "sec",
    "PROFILE",
    "PER",
    "CALL",
    "OVER",
];

#[cfg(test)]
mod tests {
    use super::{COLLECTIVE_WORDS, KEYWORDS};

    #[test]
    fn keywords_hold_each_word_once() {
        let mut words: Vec<&str> = KEYWORDS.to_vec();
        words.sort_unstable();
        let n = words.len();
        words.dedup();
        assert_eq!(words.len(), n, "a keyword is listed twice");
    }

    #[test]
    fn every_collective_word_selects_the_calls_of_one_collective() {
        use crate::query::ast::{SelectBody, Statement, Target};
        for word in COLLECTIVE_WORDS {
            let parsed = crate::query::parse_statement(&format!("SELECT {word}"));
            let Ok(Statement::Select(select)) = parsed else {
                panic!("SELECT {word} does not parse as a selection: {parsed:?}");
            };
            match select.body {
                SelectBody::Rows(s) => match s.target {
                    Target::Operation(kind) => assert!(kind.is_collective(), "{word}: {kind:?}"),
                    other => panic!("SELECT {word} selects {other:?}"),
                },
                other => panic!("SELECT {word} is {other:?}"),
            }
        }
    }

    /// The sources that spell the language's words.
    const SOURCES: &[&str] = &[
        include_str!("parser.rs"),
        include_str!("catalog.rs"),
        include_str!("options.rs"),
        include_str!("ast.rs"),
        include_str!("../model/kind.rs"),
    ];

    fn listed(word: &str) -> bool {
        KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(word))
    }

    #[test]
    fn every_word_the_parser_asks_for_is_listed() {
        let parser = include_str!("parser.rs");
        let mut asked = 0;
        for call in ["is_keyword(\"", "eat_keyword(\"", "expect_keyword(\""] {
            for (at, _) in parser.match_indices(call) {
                let rest = &parser[at + call.len()..];
                let word = &rest[..rest.find('"').unwrap()];
                if word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    asked += 1;
                    assert!(
                        listed(word),
                        "the parser asks for {word:?}, not in KEYWORDS"
                    );
                }
            }
        }
        assert!(asked > 50, "found only {asked} keywords in the parser");
    }

    #[test]
    fn every_listed_word_is_spelled_by_the_language() {
        let sources = SOURCES.concat().to_ascii_uppercase();
        for word in KEYWORDS {
            let quoted = format!("\"{}", word.to_ascii_uppercase());
            let mpi = format!("MPI_{}", word.to_ascii_uppercase());
            assert!(
                sources.contains(&quoted) || sources.contains(&mpi),
                "{word:?} is in KEYWORDS but no source spells it"
            );
        }
    }
}
