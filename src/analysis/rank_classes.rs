//! The global model at any rank count: ranks that do the same thing relative to themselves
//! merged once. P1 keeps concrete ranks in its global model and names "compacting models
//! along the spatial dimension" as future work; without it the model of a 2D stencil holds
//! every rank's sends, and merging them costs per rank. Here each process's loop nest is
//! rewritten with its peers as offsets from its own rank (`S5` on rank 4 is `S(r+1)`), the
//! ranks whose rewritten nests are equal form a class (a stencil's interior, edges and
//! corners), and the classes are merged as P1 merges processes
//! ([`loops::merge_classes`]). The model stays exact: projected on a rank it gives back
//! that rank's events, and a construct of one rank reads with concrete ranks as before.

use super::loops::{self, GlobalModel, Item, LoopNest, Peer, Role};
use super::process_events::{Alphabet, Envelope, EventKey};
use crate::hash::FxHashMap;
use crate::model::Rank;

/// A symbol of the global model: a send or receive with its peer as an offset from the
/// rank that has it, or any other event as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum RelativeKey {
    Send(i64, Option<Envelope>),
    Receive(i64, Option<Envelope>),
    /// Any other event: its symbol in the trace's alphabet.
    Same(u32),
}

/// The processes' loop nests merged into one model with peers relative to each rank (see
/// the module's documentation): what `SELECT GLOBAL MODEL` shows.
#[derive(Debug, Clone)]
pub struct RankModel {
    /// The trace's alphabet, whose symbols [`RankModel::project`] gives.
    pub alphabet: Alphabet,
    /// The model; its symbols are indexes into `keys`.
    pub model: GlobalModel,
    keys: Vec<RelativeKey>,
    /// Number of classes merged (at most the number of ranks).
    pub classes: usize,
}

impl RankModel {
    /// Merges the loop nests of `nests` (one per rank) over `alphabet`, which the model keeps.
    pub fn merge(alphabet: Alphabet, nests: &[(Rank, LoopNest)]) -> RankModel {
        let mut keys = Vec::new();
        let mut ids: FxHashMap<RelativeKey, u32> = FxHashMap::default();
        let mut classes: FxHashMap<LoopNest, Vec<u32>> = FxHashMap::default();
        for (rank, nest) in nests {
            let mut intern = |key: RelativeKey| {
                *ids.entry(key).or_insert_with(|| {
                    keys.push(key);
                    keys.len() as u32 - 1
                })
            };
            let relative = LoopNest {
                items: relative_items(&nest.items, *rank, &alphabet, &mut intern),
            };
            classes.entry(relative).or_default().push(*rank);
        }
        // In the order of their first ranks, as the processes would be.
        let mut classes: Vec<(Vec<u32>, LoopNest)> = classes
            .into_iter()
            .map(|(n, mut r)| {
                r.sort_unstable();
                (r, n)
            })
            .collect();
        classes.sort_unstable_by_key(|(ranks, _)| ranks[0]);
        let role = |s: u32| match keys[s as usize] {
            RelativeKey::Send(d, _) => Role::Send(Peer::Offset(d)),
            RelativeKey::Receive(d, _) => Role::Receive(Peer::Offset(d)),
            RelativeKey::Same(s) => super::structure::role(&alphabet, s),
        };
        let model = loops::merge_classes(classes.iter().map(|(r, n)| (&r[..], n)), role);
        RankModel {
            alphabet,
            model,
            keys,
            classes: classes.len(),
        }
    }

    /// The symbol (of [`RankModel::alphabet`]) that the model's `symbol` is on `rank`: always
    /// one for a rank of the construct that holds it, whose events it was made from.
    fn absolute(&self, symbol: u32, rank: u32) -> Option<u32> {
        let on = |key: fn(Rank) -> EventKey, d: i64, envelope| {
            Peer::Offset(d)
                .of(rank)
                .and_then(|q| self.alphabet.get_with(key(q), envelope))
        };
        match self.keys[symbol as usize] {
            RelativeKey::Same(s) => Some(s),
            RelativeKey::Send(d, e) => on(EventKey::Send, d, e),
            RelativeKey::Receive(d, e) => on(EventKey::Receive, d, e),
        }
    }

    /// The sequence of `rank`'s events the model stands for, in the trace's alphabet.
    pub fn project(&self, rank: u32) -> Vec<u32> {
        self.model
            .project(rank)
            .into_iter()
            .filter_map(|s| {
                let absolute = self.absolute(s, rank);
                debug_assert!(absolute.is_some(), "symbol {s} of rank {rank}");
                absolute
            })
            .collect()
    }

    /// The model as text ([`GlobalModel::render`]): events of one rank name their peers
    /// (`S5`), events of several name them relative to each rank (`S(r+1)`, `R(r-128)`).
    pub fn render(&self) -> String {
        self.model.render_with(|s, ranks| {
            let key = self.keys[s as usize];
            let first = ranks.first().copied().unwrap_or(0);
            let (kind, d) = match key {
                RelativeKey::Same(s) => return self.alphabet.name(s),
                RelativeKey::Send(d, _) => ("S", d),
                RelativeKey::Receive(d, _) => ("R", d),
            };
            let peer = || match d {
                0 => "(r)".to_string(),
                d if d > 0 => format!("(r+{d})"),
                d => format!("(r-{})", d.unsigned_abs()),
            };
            match (self.absolute(s, first), ranks.len()) {
                (Some(a), 1) => self.alphabet.name(a),
                (Some(a), _) => self.alphabet.name_with_peer(a, &peer()),
                // Cannot happen (see `absolute`); the words without the envelope.
                (None, _) => format!("{kind}{}", peer()),
            }
        })
    }
}

/// `items` of `rank`'s nest with each send and receive written relative to `rank`.
fn relative_items(
    items: &[Item],
    rank: u32,
    alphabet: &Alphabet,
    intern: &mut impl FnMut(RelativeKey) -> u32,
) -> Vec<Item> {
    items
        .iter()
        .map(|item| match item {
            Item::Symbol(s) => {
                let offset = |q: Rank| i64::from(q) - i64::from(rank);
                let envelope = alphabet.envelope(*s);
                Item::Symbol(intern(match alphabet.key(*s) {
                    EventKey::Send(q) => RelativeKey::Send(offset(q), envelope),
                    EventKey::Receive(q) => RelativeKey::Receive(offset(q), envelope),
                    _ => RelativeKey::Same(*s),
                }))
            }
            Item::Loop { count, body } => Item::Loop {
                count: *count,
                body: relative_items(body, rank, alphabet, intern),
            },
        })
        .collect()
}
