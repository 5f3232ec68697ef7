//! The identified topology, as the logicalization paper draws it: every rank at its
//! coordinates (grids and stencils as a grid, three dimensions as slices side by side, rings,
//! trees and all-to-all on a circle), the pairs that exchanged bytes as edges, those the
//! topology keeps in grey and those it drops in red.

use super::canvas::{format_count, Canvas, WIDTH};
use crate::analysis::stats::MatrixCells;
use crate::analysis::topology::Topology;

const TOP: f64 = 70.0;
const AREA: f64 = 760.0;

/// Where each rank of `t` is drawn, in the unit square (x, y in [0, 1]).
fn positions(t: &Topology) -> Vec<(f64, f64)> {
    let n = t.coordinates.len().max(1);
    let extent = |d: usize| t.dims.get(d).copied().unwrap_or(1).max(1) as f64;
    let scaled = |c: u32, d: usize| {
        if extent(d) <= 1.0 {
            0.5
        } else {
            c as f64 / (extent(d) - 1.0)
        }
    };
    t.coordinates
        .iter()
        .enumerate()
        .map(|(rank, c)| match c.len() {
            2 => (scaled(c[1], 1), scaled(c[0], 0)),
            3 => {
                // Slices along the first dimension, side by side.
                let slices = extent(0);
                let slice = c[0] as f64;
                let w = 1.0 / slices;
                (slice * w + scaled(c[2], 2) * w * 0.85, scaled(c[1], 1))
            }
            _ => {
                let angle = rank as f64 / n as f64 * std::f64::consts::TAU;
                (0.5 + 0.5 * angle.sin(), 0.5 - 0.5 * angle.cos())
            }
        })
        .collect()
}

/// The picture of topology `t` with the traffic of `matrix` as edges; `title` names it.
pub fn topology(title: &str, t: &Topology, matrix: &MatrixCells) -> Canvas {
    let mut canvas = Canvas::new(WIDTH, TOP + AREA + 60.0);
    canvas.heading(title);
    let at = positions(t);
    let left = (WIDTH - AREA) / 2.0;
    let place = |rank: u32| {
        at.get(rank as usize)
            .map(|&(x, y)| (left + x * AREA, TOP + y * AREA))
    };
    // Each unordered pair once, with the bytes both ways.
    let mut edges: Vec<(u32, u32, u128)> = matrix
        .cells
        .iter()
        .filter(|(s, d, _)| s != d)
        .map(|&(s, d, v)| (s.min(d), s.max(d), v))
        .collect();
    edges.sort_unstable();
    edges.dedup_by(|b, a| {
        if (a.0, a.1) == (b.0, b.1) {
            a.2 += b.2;
            true
        } else {
            false
        }
    });
    let (kept, dropped): (Vec<_>, Vec<_>) = edges.iter().partition(|e| t.adjacent(e.0, e.1));
    canvas.note(&format!(
        "{} ranks; {} pairs with traffic: {} kept by the topology, {} dropped ({:.1}% of the bytes)",
        t.coordinates.len(),
        edges.len(),
        kept.len(),
        dropped.len(),
        t.dropped_fraction * 100.0
    ));
    let stroke = (240.0 / (t.coordinates.len().max(1) as f64).sqrt()).clamp(0.3, 2.0);
    let dashed = " stroke-dasharray=\"4,3\"";
    for (group, class, list, colour, dash) in [
        ("edges-kept", "edge-kept", &kept, "#888888", ""),
        ("edges-dropped", "edge-dropped", &dropped, "#d62728", dashed),
    ] {
        canvas.group(group);
        for &&(a, b, bytes) in list.iter() {
            if let (Some(pa), Some(pb)) = (place(a), place(b)) {
                canvas.line(
                    class,
                    pa,
                    pb,
                    colour,
                    stroke,
                    &format!(" data-a=\"{a}\" data-b=\"{b}\" data-value=\"{bytes}\"{dash}"),
                    &format!("ranks {a} and {b}: {} bytes", format_count(bytes as f64)),
                );
            }
        }
        canvas.end_group();
    }
    let radius = (300.0 / (t.coordinates.len().max(1) as f64).sqrt()).clamp(1.0, 12.0);
    canvas.group("ranks");
    for (rank, c) in t.coordinates.iter().enumerate() {
        if let Some(p) = place(rank as u32) {
            let coords: Vec<String> = c.iter().map(u32::to_string).collect();
            canvas.circle(
                "rank",
                p,
                radius,
                "#4363d8",
                &format!("rank {rank} at ({})", coords.join(",")),
            );
            if radius >= 8.0 {
                canvas.text("rank-label", p.0, p.1 + 4.0, "middle", &rank.to_string());
            }
        }
    }
    canvas.end_group();
    canvas.key(
        (left, TOP + AREA + 40.0),
        &[
            ("kept edge".to_string(), "#888888".to_string()),
            ("dropped edge".to_string(), "#d62728".to_string()),
        ],
    );
    canvas
}
