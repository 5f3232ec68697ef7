//! Values as a person reads them: durations with the unit that reads best (`235.1 ms`), byte
//! sizes in binary units (`16.0 KiB`), large counts shortened (`819.2k`). Tables, pictures,
//! `info` and the report print through these; CSV, JSON, Arrow and Parquet keep exact values.

/// A duration in nanoseconds with the unit that reads best (ns, µs, ms, s), at most three
/// decimals, trailing zeros dropped: `1.5 µs`, `2 s`.
pub fn duration(ns: f64) -> String {
    let a = ns.abs();
    let (v, unit) = if a >= 1e9 {
        (ns / 1e9, "s")
    } else if a >= 1e6 {
        (ns / 1e6, "ms")
    } else if a >= 1e3 {
        (ns / 1e3, "µs")
    } else {
        (ns, "ns")
    };
    format!("{} {unit}", trim(v))
}

/// A count shortened with k, M, G, T (decimal): `819.2k`, `12`.
pub fn count(v: f64) -> String {
    let a = v.abs();
    let (x, unit) = if a >= 1e12 {
        (v / 1e12, "T")
    } else if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    format!("{}{unit}", trim(x))
}

/// A byte size in binary units with one decimal (`16.0 KiB`); below 1 KiB, exact (`512 B`).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// `v` with at most three decimals, trailing zeros dropped, never `-0`.
fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_read_as_people_write_them() {
        assert_eq!(duration(1_500.0), "1.5 µs");
        assert_eq!(duration(2_000_000_000.0), "2 s");
        assert_eq!(duration(235_100_000.0), "235.1 ms");
        assert_eq!(duration(999.0), "999 ns");
        assert_eq!(count(819_200.0), "819.2k");
        assert_eq!(count(12.0), "12");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(16 * 1024), "16.0 KiB");
        assert_eq!(bytes(3 * 1024 * 1024 + 512 * 1024), "3.5 MiB");
    }
}
