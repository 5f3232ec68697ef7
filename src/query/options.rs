//! The parameters of the analysis statements as the language writes them (`WITH TANDEMS OFF,
//! NGRAM 3`): which ones each statement takes, and each one's effective value, which a
//! statement prints back when it is not the default and `EXPLAIN` prints always.

use super::ast::{
    Analysis, ClockCorrection, LoopParams, PatternParams, PhaseParams, TemplateParams,
    TopologyParams,
};

/// One parameter's effective value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Setting {
    /// As a `WITH` clause writes it: `TANDEMS OFF`, `THRESHOLD 0.05`.
    pub text: String,
    /// The value is the parameter's default.
    pub default: bool,
}

/// The names of the parameters `WITH` takes after `analysis` (the first word of each).
pub(crate) fn parameters(analysis: &Analysis) -> &'static [&'static str] {
    const PATTERNS: &[&str] = &["DELIMITERS", "TANDEMS", "ENVELOPE"];
    const PHASES: &[&str] = &["THRESHOLD", "THESIS", "DELIMITERS", "TANDEMS", "ENVELOPE"];
    match analysis {
        Analysis::ProcessPatterns { .. } | Analysis::CommunicationPatterns { .. } => PATTERNS,
        Analysis::Phases(_) | Analysis::PhaseTree(_) => PHASES,
        Analysis::Match { .. } => &["ERRORS", "NGRAM"],
        Analysis::Loops(..) | Analysis::GlobalModel(_) => &["BODY"],
        Analysis::Topology { .. } => &["THRESHOLD"],
        Analysis::LogicalTrace { .. } => &["BODY", "THRESHOLD"],
        Analysis::CriticalPath { .. } => &["CLOCK"],
        Analysis::DelayCosts { .. } => &["CLOCK"],
        Analysis::Refresh
        | Analysis::Simulate { .. }
        | Analysis::FitNetwork
        | Analysis::WhatIf { .. }
        | Analysis::Profile { .. }
        | Analysis::TimeProfile { .. }
        | Analysis::CommunicationOverTime { .. } => &[],
    }
}

/// The statement's head, as a parameter error names it: `SELECT PHASES`.
pub(crate) fn statement_name(analysis: &Analysis) -> &'static str {
    match analysis {
        Analysis::ProcessPatterns { .. } => "SELECT PATTERNS",
        Analysis::CommunicationPatterns { .. } => "SELECT COMMUNICATION PATTERNS",
        Analysis::Match { .. } => "MATCH PATTERN",
        Analysis::Phases(_) => "SELECT PHASES",
        Analysis::PhaseTree(_) => "SHOW PHASE TREE",
        Analysis::Refresh => "REFRESH PATTERNS",
        Analysis::Loops(..) => "SELECT LOOPS",
        Analysis::GlobalModel(_) => "SELECT GLOBAL MODEL",
        Analysis::Topology { .. } => "SELECT TOPOLOGY",
        Analysis::LogicalTrace { .. } => "SELECT LOGICAL TRACE",
        Analysis::CriticalPath { .. } => "SELECT CRITICAL PATH",
        Analysis::DelayCosts { .. } => "SELECT DELAY COSTS",
        Analysis::Simulate { .. } => "SIMULATE",
        Analysis::FitNetwork => "SELECT NETWORK MODEL",
        Analysis::WhatIf { .. } => "SIMULATE",
        Analysis::Profile { .. } => "SELECT PROFILE",
        Analysis::TimeProfile { .. } => "SELECT TIME PROFILE",
        Analysis::CommunicationOverTime { .. } => "SELECT COMMUNICATION OVER TIME",
    }
}

/// How a parameter reads in an error message: `THESIS ARITHMETIC`, `BODY LIMIT`.
pub(crate) fn spelled(name: &str) -> &str {
    match name {
        "THESIS" => "THESIS ARITHMETIC",
        "BODY" => "BODY LIMIT",
        "CLOCK" => "CLOCK CORRECTION",
        other => other,
    }
}

/// Every parameter of `analysis` with its effective value, in the order `WITH` lists them.
pub(crate) fn settings(analysis: &Analysis) -> Vec<Setting> {
    match analysis {
        Analysis::ProcessPatterns { options, .. } | Analysis::CommunicationPatterns { options } => {
            pattern_settings(options)
        }
        Analysis::Phases(p) | Analysis::PhaseTree(p) => phase_settings(p),
        Analysis::Match { options, .. } => template_settings(options),
        Analysis::Loops(_, p) | Analysis::GlobalModel(p) => vec![loop_setting(p)],
        Analysis::Topology { options, .. } => vec![topology_setting(options)],
        Analysis::LogicalTrace {
            loops, topology, ..
        } => vec![loop_setting(loops), topology_setting(topology)],
        Analysis::CriticalPath { clock, .. } | Analysis::DelayCosts { clock, .. } => vec![setting(
            super::ast::clock_setting(*clock),
            *clock == ClockCorrection::None,
        )],
        Analysis::Refresh
        | Analysis::Simulate { .. }
        | Analysis::FitNetwork
        | Analysis::WhatIf { .. }
        | Analysis::Profile { .. }
        | Analysis::TimeProfile { .. }
        | Analysis::CommunicationOverTime { .. } => Vec::new(),
    }
}

fn setting(text: String, default: bool) -> Setting {
    Setting { text, default }
}

fn switch(name: &str, on: bool, default: bool) -> Setting {
    let word = if on { "ON" } else { "OFF" };
    setting(format!("{name} {word}"), on == default)
}

fn pattern_settings(p: &PatternParams) -> Vec<Setting> {
    let d = PatternParams::default();
    vec![
        switch("DELIMITERS", p.delimiters, d.delimiters),
        switch("TANDEMS", p.tandems, d.tandems),
        switch("ENVELOPE", p.envelope, d.envelope),
    ]
}

fn phase_settings(p: &PhaseParams) -> Vec<Setting> {
    let d = PhaseParams::default();
    let mut out = vec![
        setting(
            format!("THRESHOLD {}", thousandths(i64::from(p.threshold))),
            p.threshold == d.threshold,
        ),
        switch("THESIS ARITHMETIC", p.thesis_compat, d.thesis_compat),
    ];
    out.extend(pattern_settings(&p.patterns));
    out
}

fn template_settings(p: &TemplateParams) -> Vec<Setting> {
    let d = TemplateParams::default();
    vec![
        setting(format!("ERRORS {}", p.errors), p.errors == d.errors),
        setting(format!("NGRAM {}", p.ngram), p.ngram == d.ngram),
    ]
}

fn loop_setting(p: &LoopParams) -> Setting {
    setting(
        format!("BODY LIMIT {}", p.max_body),
        *p == LoopParams::default(),
    )
}

fn topology_setting(p: &TopologyParams) -> Setting {
    setting(
        format!("THRESHOLD {}", thousandths(i64::from(p.threshold))),
        *p == TopologyParams::default(),
    )
}

/// A number kept in thousandths, as the shortest decimal: `-1.25`, `0.05`, `2`.
pub(crate) fn thousandths(n: i64) -> String {
    let sign = if n < 0 { "-" } else { "" };
    let (whole, frac) = (n.unsigned_abs() / 1000, n.unsigned_abs() % 1000);
    if frac == 0 {
        format!("{sign}{whole}")
    } else {
        let frac = format!("{frac:03}");
        format!("{sign}{whole}.{}", frac.trim_end_matches('0'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousandths_print_as_the_shortest_decimal() {
        assert_eq!(thousandths(50), "0.05");
        assert_eq!(thousandths(-1250), "-1.25");
        assert_eq!(thousandths(2000), "2");
        assert_eq!(thousandths(0), "0");
    }

    #[test]
    fn only_parameters_away_from_their_defaults_are_not_default() {
        let a = Analysis::Phases(PhaseParams {
            threshold: 500,
            ..PhaseParams::default()
        });
        let texts: Vec<(String, bool)> = settings(&a)
            .into_iter()
            .map(|s| (s.text, s.default))
            .collect();
        assert_eq!(
            texts,
            vec![
                ("THRESHOLD 0.5".to_string(), false),
                ("THESIS ARITHMETIC OFF".to_string(), true),
                ("DELIMITERS ON".to_string(), true),
                ("TANDEMS ON".to_string(), true),
                ("ENVELOPE OFF".to_string(), true),
            ]
        );
    }
}
