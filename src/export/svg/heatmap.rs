//! The communication matrix as a heatmap: senders down, receivers across, a cell per pair
//! with traffic coloured on a (log) scale with its legend. Beyond [`MAX_BLOCKS`] ranks a
//! side, ranks are drawn in blocks of consecutive ranks, each block's cell the sum of its
//! pairs, so that 16,384 ranks draw as 410 x 410 blocks instead of 2^28 cells.

use super::canvas::{format_count, Canvas, ColourScale, WIDTH};
use crate::analysis::stats::{MatrixCells, MatrixOf};
use crate::hash::FxHashMap as HashMap;
use crate::model::{rank_ranges, Rank};

/// The most rows (and columns) of cells drawn: two pixels a cell at the least.
pub const MAX_BLOCKS: usize = 410;

/// The heatmap of `matrix`, titled `title`.
pub fn heatmap(matrix: &MatrixCells, title: &str) -> Canvas {
    let n = matrix.ranks.len().max(1);
    let per_block = n.div_ceil(MAX_BLOCKS);
    let blocks = n.div_ceil(per_block);
    let (left, top, side) = (90.0, 110.0, 820.0);
    let cell = side / blocks as f64;
    let mut canvas = Canvas::new(WIDTH, top + side + 70.0);
    canvas.heading(title);
    let what = match matrix.of {
        MatrixOf::Bytes => "bytes",
        MatrixOf::Count => "messages",
    };
    canvas.note(&if per_block == 1 {
        format!(
            "{} ranks; {} pairs with traffic; rows send, columns receive",
            n,
            matrix.cells.len()
        )
    } else {
        format!(
            "{n} ranks in blocks of {per_block}; {} pairs with traffic; rows send, columns receive",
            matrix.cells.len()
        )
    });

    let index: HashMap<Rank, usize> = matrix
        .ranks
        .iter()
        .enumerate()
        .map(|(i, &r)| (r, i / per_block))
        .collect();
    let mut sums: HashMap<(usize, usize), (u128, u64)> = HashMap::default();
    for &(s, d, v) in &matrix.cells {
        if let (Some(&bs), Some(&bd)) = (index.get(&s), index.get(&d)) {
            let e = sums.entry((bs, bd)).or_default();
            e.0 += v;
            e.1 += 1;
        }
    }
    let mut drawn: Vec<((usize, usize), (u128, u64))> = sums.into_iter().collect();
    drawn.sort_unstable();
    let scale = ColourScale::of(drawn.iter().map(|(_, (v, _))| *v as f64));
    let block_ranks = |b: usize| {
        let lo = b * per_block;
        let hi = ((b + 1) * per_block).min(matrix.ranks.len());
        matrix.ranks.get(lo..hi).unwrap_or(&[])
    };

    canvas.rect(
        "frame",
        left,
        top,
        side,
        side,
        "#f7f7f7",
        " stroke=\"#999999\" stroke-width=\"0.5\"",
        "",
    );
    canvas.group("cells");
    for ((bs, bd), (value, pairs)) in &drawn {
        let (senders, receivers) = (block_ranks(*bs), block_ranks(*bd));
        let title = if per_block == 1 {
            format!(
                "rank {} → rank {}: {} {what}",
                senders[0], receivers[0], value
            )
        } else {
            format!(
                "ranks {} → ranks {}: {value} {what} over {pairs} pairs",
                rank_ranges(senders),
                rank_ranges(receivers)
            )
        };
        let attributes = format!(
            " data-sender=\"{}\" data-receiver=\"{}\" data-value=\"{value}\" data-pairs=\"{pairs}\"",
            rank_ranges(senders),
            rank_ranges(receivers)
        );
        canvas.rect(
            "cell",
            left + *bd as f64 * cell,
            top + *bs as f64 * cell,
            cell,
            cell,
            &scale.colour(*value as f64),
            &attributes,
            &title,
        );
    }
    canvas.end_group();

    // Rank labels, thinned to one every 28 pixels at the most.
    let every = ((28.0 / cell).ceil() as usize).max(1);
    for b in (0..blocks).step_by(every) {
        let first = block_ranks(b).first().copied().unwrap_or_default();
        let at = (b as f64 + 0.5) * cell;
        canvas.text(
            "rank-label",
            left + at,
            top - 6.0,
            "middle",
            &first.to_string(),
        );
        canvas.text(
            "rank-label",
            left - 6.0,
            top + at + 4.0,
            "end",
            &first.to_string(),
        );
    }
    canvas.text(
        "axis-title",
        left + side / 2.0,
        top - 24.0,
        "middle",
        "receiver",
    );
    canvas.vertical_text("axis-title", left - 50.0, top + side / 2.0, "sender");
    if !drawn.is_empty() {
        canvas.legend((left + side + 40.0, top + 20.0), &scale, what);
        let total: u128 = drawn.iter().map(|(_, (v, _))| v).sum();
        canvas.text(
            "total",
            left + side + 40.0,
            top + 80.0,
            "start",
            &format!("total {} {what}", format_count(total as f64)),
        );
    }
    canvas
}
