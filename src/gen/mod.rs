//! Deterministic generators of MTF traces of real application shapes.
//!
//! [`generate`] streams a synthetic trace into any [`EventSink`] — the header, the string
//! table, then iteration by iteration the operations and routine events of every rank, then
//! `finish` — and returns the [`GroundTruth`] it tallied on the way. Nothing is built in
//! memory beyond a few numbers per rank, so traces of any length can be made.
//!
//! ```
//! use mtfdb::gen::{generate, GenConfig, NullSink, Scenario};
//! use mtfdb::model::OpKind;
//! let config = GenConfig::new(Scenario::Stencil2d, 16, 8);
//! let truth = generate(&config, &mut NullSink).unwrap();
//! assert_eq!(truth.messages, 48 * 8); // 24 edges of a 4x4 grid, both ways, per iteration
//! assert_eq!(truth.count(OpKind::Wait), 2 * truth.count(OpKind::Isend));
//! ```
//!
//! Every trace has the same skeleton per rank: `main { init { MPI_Init } setup { Bcast of
//! 40 bytes of MPI_INT from rank 0 } solve × iterations { … } finalize { MPI_Finalize } }`.
//! The world communicator is id 0 named `C1` with members 0..n. Processes are `P<rank>`,
//! four per processor `node<i>`.
//!
//! Collective byte counts are those Score-P records, so that bytes sent and received balance
//! over a collective: a Bcast root sends the buffer to every member (itself included) and
//! every member receives it; every Gather member sends its block and the root receives
//! n blocks; a Scatterv root sends the sum of the counts and every member (root included)
//! receives its own; Allreduce sends and receives the buffer; Alltoall sends and receives
//! n blocks.
//!
//! With `shuffle_ranks`, a seeded permutation maps each logical position of the topology to a
//! world rank; [`GroundTruth::permutation`] records it.

mod alltoall;
mod bt;
mod cg;
mod engine;
mod ring;
pub(crate) mod rng;
mod stencil;
mod topo;
mod truth;
mod wavefront;

use std::fmt;
use std::str::FromStr;

pub use truth::{GroundTruth, PairTruth, RankTruth};

use crate::error::{Error, Result};
use crate::ingest::EventSink;
use crate::model::{
    Communicator, OpKind, Operation, Process, Processor, Rank, RoutineEvent, StrId, Time,
    TraceHeader,
};
use engine::Gen;

/// The largest number of ranks the generators accept.
pub const MAX_RANKS: u32 = 1 << 20;

/// The application shape to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scenario {
    /// WRF-like halo exchange on a 2D mesh (Irecv/Isend/Wait with 2-4 neighbours) plus
    /// Bcast, Gather and Scatterv rooted at rank 0.
    Stencil2d,
    /// Blocking Send/Recv around a ring plus an Allreduce.
    Ring,
    /// Sweep3D: blocking wavefronts from the 4 corners of a 2D grid plus an Allreduce.
    Sweep,
    /// NAS LU: a wavefront down from (0,0) and one up from the opposite corner, plus an
    /// Allreduce.
    Lu,
    /// NAS BT/SP: a 6-point stencil on a 2D torus with Isend/Irecv and Waitall.
    Bt,
    /// NAS CG: row-partner and transpose exchanges plus Allreduces.
    Cg,
    /// Alltoall every iteration plus an Allreduce.
    Alltoall,
}

impl Scenario {
    /// Every scenario.
    pub const ALL: [Scenario; 7] = [
        Scenario::Stencil2d,
        Scenario::Ring,
        Scenario::Sweep,
        Scenario::Lu,
        Scenario::Bt,
        Scenario::Cg,
        Scenario::Alltoall,
    ];

    /// The scenario's name (`stencil2d`).
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Stencil2d => "stencil2d",
            Scenario::Ring => "ring",
            Scenario::Sweep => "sweep",
            Scenario::Lu => "lu",
            Scenario::Bt => "bt",
            Scenario::Cg => "cg",
            Scenario::Alltoall => "alltoall",
        }
    }

    /// What the scenario imitates, in a sentence.
    pub fn description(self) -> &'static str {
        match self {
            Scenario::Stencil2d => {
                "WRF-like 2D halo exchange (Irecv/Isend/Wait with mesh neighbours) \
                 with Bcast, Gather and Scatterv rooted at rank 0"
            }
            Scenario::Ring => "blocking Send/Recv around a ring with an Allreduce",
            Scenario::Sweep => "Sweep3D-like wavefronts from the 4 corners of a 2D grid",
            Scenario::Lu => "NAS LU-like lower and upper triangular wavefronts with an Allreduce",
            Scenario::Bt => "NAS BT/SP-like 6-point stencil on a 2D torus (Isend/Irecv/Waitall)",
            Scenario::Cg => "NAS CG-like row-partner and transpose exchanges with Allreduces",
            Scenario::Alltoall => "FFT-like Alltoall transposes with an Allreduce checksum",
        }
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Scenario {
    type Err = Error;

    fn from_str(s: &str) -> Result<Scenario> {
        Scenario::ALL
            .iter()
            .copied()
            .find(|sc| sc.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                let names: Vec<&str> = Scenario::ALL.iter().map(|sc| sc.name()).collect();
                Error::Usage(format!(
                    "unknown scenario {s:?}; expected one of: {}",
                    names.join(", ")
                ))
            })
    }
}

/// What to generate.
#[derive(Debug, Clone, PartialEq)]
pub struct GenConfig {
    /// The application shape.
    pub scenario: Scenario,
    /// Number of ranks (processes).
    pub ranks: u32,
    /// Iterations of the main loop (`solve` calls per rank).
    pub iterations: u32,
    /// The seed of every random choice (timing jitter, the rank permutation).
    pub seed: u64,
    /// Scramble the numbering: logical position i becomes world rank `permutation[i]`.
    pub shuffle_ranks: bool,
    /// Imbalance to inject: each makes one rank compute longer in one iteration.
    pub delays: Vec<Delay>,
    /// Time every MPI call by this network model (`gen --network`) instead of the default
    /// timing: the trace is then the ground truth of a replay with the same model.
    pub network: Option<crate::analysis::replay::network::NetworkModel>,
}

/// Extra computation of one rank in one iteration of the main loop (`gen --delay
/// RANK:ITERATION:DURATION`): the rank starts that iteration's communication `duration` ns
/// later, and whoever waits for it waits that much longer.
///
/// ```
/// use mtfdb::gen::Delay;
/// let d: Delay = "3:5:2ms".parse().unwrap();
/// assert_eq!(d, Delay { rank: 3, iteration: 5, duration: 2_000_000 });
/// assert_eq!("3:5:250".parse::<Delay>().unwrap().duration, 250);
/// assert!("3:5".parse::<Delay>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delay {
    /// The world rank that computes longer.
    pub rank: Rank,
    /// The iteration of the main loop, from 0.
    pub iteration: u32,
    /// How much longer (ns).
    pub duration: Time,
}

impl std::str::FromStr for Delay {
    type Err = String;

    /// `RANK:ITERATION:DURATION`, the duration in ns or with a unit `ns`, `us`, `ms` or `s`.
    fn from_str(text: &str) -> std::result::Result<Delay, String> {
        let usage = || format!("a delay is RANK:ITERATION:DURATION (like 3:5:2ms), not {text:?}");
        let [rank, iteration, duration] = text.split(':').collect::<Vec<_>>()[..] else {
            return Err(usage());
        };
        let (digits, unit) = duration
            .find(|c: char| !c.is_ascii_digit())
            .map_or((duration, ""), |at| duration.split_at(at));
        let scale: Time = match unit {
            "" | "ns" => 1,
            "us" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            _ => return Err(usage()),
        };
        let duration = digits
            .parse::<Time>()
            .ok()
            .and_then(|d| d.checked_mul(scale))
            .ok_or_else(usage)?;
        Ok(Delay {
            rank: rank.parse().map_err(|_| usage())?,
            iteration: iteration.parse().map_err(|_| usage())?,
            duration,
        })
    }
}

impl GenConfig {
    /// A configuration with seed 1 and no shuffling.
    pub fn new(scenario: Scenario, ranks: u32, iterations: u32) -> GenConfig {
        GenConfig {
            scenario,
            ranks,
            iterations,
            seed: 1,
            shuffle_ranks: false,
            delays: Vec::new(),
            network: None,
        }
    }

    /// The trace name put in the header (`stencil2d-16`).
    pub fn trace_name(&self) -> String {
        format!("{}-{}", self.scenario, self.ranks)
    }
}

/// A sink that drops everything (for measuring the generator, or for the ground truth alone).
#[derive(Debug, Clone, Copy, Default)]
pub struct NullSink;

impl EventSink for NullSink {
    fn header(&mut self, _: &TraceHeader) -> Result<()> {
        Ok(())
    }
    fn string(&mut self, _: StrId, _: &str) -> Result<()> {
        Ok(())
    }
    fn operation(&mut self, _: &Operation) -> Result<()> {
        Ok(())
    }
    fn routine(&mut self, _: &RoutineEvent) -> Result<()> {
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

/// One scenario's communication, driven by [`generate`].
pub(crate) trait Program {
    /// The topology in words (`4x4 grid`).
    fn topology(&self) -> String;

    /// Communicators besides `C1` (ids from 1), with world-rank members.
    fn communicators(&self, _perm: &[Rank]) -> Vec<Communicator> {
        Vec::new()
    }

    /// Defines the strings the scenario uses (called once, before any event).
    fn prepare(&mut self, g: &mut Gen<'_>) -> Result<()>;

    /// Iteration `i`, inside every rank's `solve` routine.
    fn iteration(&mut self, g: &mut Gen<'_>, i: u32) -> Result<()>;

    /// After how many iterations the events repeat exactly (1 when every iteration is the
    /// same).
    fn period(&self) -> u32 {
        1
    }
}

/// Compute time of the setup phase (ns).
const SETUP_COMPUTE: u64 = 1_000_000;
/// Bytes of the setup Bcast (10 MPI_INTs of input parameters).
const SETUP_BCAST_BYTES: u64 = 40;

fn usage(config: &GenConfig, what: &str) -> Error {
    Error::Usage(format!(
        "scenario {} cannot run on {} ranks: {what}",
        config.scenario, config.ranks
    ))
}

fn program(config: &GenConfig) -> Result<Box<dyn Program>> {
    let n = config.ranks;
    if n == 0 {
        return Err(usage(config, "it needs at least 1 rank"));
    }
    if n > MAX_RANKS {
        return Err(usage(
            config,
            &format!("the generators support at most {MAX_RANKS} ranks"),
        ));
    }
    Ok(match config.scenario {
        Scenario::Stencil2d => Box::new(stencil::Stencil2d::new(n)),
        Scenario::Ring => {
            if n < 2 {
                return Err(usage(config, "a ring needs at least 2 ranks"));
            }
            Box::new(ring::Ring::new(n))
        }
        Scenario::Sweep => Box::new(wavefront::Wavefront::sweep(n)),
        Scenario::Lu => Box::new(wavefront::Wavefront::lu(n)),
        Scenario::Bt => {
            let side = (f64::from(n).sqrt().round()) as u32;
            if side * side != n || side < 2 {
                return Err(usage(
                    config,
                    "bt needs a square number of ranks, at least 4 (4, 9, 16, 25, …)",
                ));
            }
            Box::new(bt::Bt::new(side))
        }
        Scenario::Cg => {
            if !n.is_power_of_two() {
                return Err(usage(
                    config,
                    "cg needs a power of two ranks (1, 2, 4, 8, 16, …)",
                ));
            }
            Box::new(cg::Cg::new(n))
        }
        Scenario::Alltoall => Box::new(alltoall::Alltoall::new(n)),
    })
}

fn header(config: &GenConfig, program: &dyn Program, perm: &[Rank]) -> TraceHeader {
    let n = config.ranks;
    let processors = (0..n.div_ceil(4))
        .map(|i| Processor {
            id: i,
            name: format!("node{i}"),
        })
        .collect();
    let processes = (0..n)
        .map(|r| Process {
            rank: r,
            name: format!("P{r}"),
            processor: Some(r / 4),
        })
        .collect();
    let mut communicators = vec![Communicator {
        id: 0,
        name: "C1".to_string(),
        members: (0..n).collect(),
    }];
    communicators.extend(program.communicators(perm));
    TraceHeader {
        scenario: format!(
            "{}: {} on a {}",
            config.scenario,
            config.scenario.description(),
            program.topology()
        ),
        trace_name: config.trace_name(),
        comments: format!(
            "generated by mtfdb: {} ranks, {} iterations, seed {}, ranks {}",
            n,
            config.iterations,
            config.seed,
            if config.shuffle_ranks {
                "shuffled"
            } else {
                "in topology order"
            }
        ) + &config
            .delays
            .iter()
            .map(|d| {
                format!(
                    ", rank {} {} ns late in iteration {}",
                    d.rank, d.duration, d.iteration
                )
            })
            .collect::<String>(),
        processors,
        processes,
        communicators,
        locations: Vec::new(),
        untimed: false,
    }
}

/// Generates the trace `config` describes into `sink` and returns its ground truth.
///
/// Fails with [`Error::Usage`] when the scenario cannot run on that many ranks (0 ranks; a
/// ring of 1; bt on a non-square count or 1; cg on a count that is not a power of two), and
/// with whatever error the sink returns.
pub fn generate(config: &GenConfig, sink: &mut dyn EventSink) -> Result<GroundTruth> {
    let mut program = program(config)?;
    let n = config.ranks;
    let perm: Vec<Rank> = if config.shuffle_ranks {
        rng::permutation(n, config.seed)
    } else {
        (0..n).collect()
    };
    for d in &config.delays {
        if d.rank >= n || d.iteration >= config.iterations {
            return Err(Error::Usage(format!(
                "a delay of rank {} in iteration {}: the trace has ranks 0-{} and iterations 0-{}",
                d.rank,
                d.iteration,
                n.saturating_sub(1),
                config.iterations.saturating_sub(1)
            )));
        }
    }
    let header = header(config, program.as_ref(), &perm);
    let mut g = Gen::new(sink, perm, config.seed);
    g.set_delays(&config.delays);
    if let Some(net) = config.network {
        g.set_network(net);
    }
    g.header(&header)?;
    let main = g.intern("main")?;
    let init = g.intern("init")?;
    let setup = g.intern("setup")?;
    let solve = g.intern("solve")?;
    let finalize = g.intern("finalize")?;
    let int = g.intern("MPI_INT")?;
    program.prepare(&mut g)?;

    g.start_clocks(10_000);
    g.enter_all(main)?;
    g.enter_all(init)?;
    g.environment(OpKind::Init)?;
    g.leave_all(init)?;

    g.enter_all(setup)?;
    for p in 0..n {
        g.compute(p, SETUP_COMPUTE);
    }
    let members = n as usize;
    g.world_collective(OpKind::Bcast, Some(0), int, &|local| {
        engine::bcast_sizes(local, 0, members, SETUP_BCAST_BYTES)
    })?;
    g.pattern("setup: MPI_Bcast", n, 1);
    g.leave_all(setup)?;

    for i in 0..config.iterations {
        g.enter_all(solve)?;
        g.start_iteration(i);
        program.iteration(&mut g, i)?;
        g.leave_all(solve)?;
    }

    g.enter_all(finalize)?;
    g.environment(OpKind::Finalize)?;
    g.leave_all(finalize)?;
    g.leave_all(main)?;

    let truth = GroundTruth {
        scenario: config.scenario.to_string(),
        trace_name: config.trace_name(),
        topology: program.topology(),
        ranks: n,
        iterations: config.iterations,
        period: program.period(),
        seed: config.seed,
        ..GroundTruth::default()
    };
    g.finish(truth)
}

/// The number of iterations that makes a trace of `scenario` on `ranks` ranks hold about
/// `events` events (operations plus routine events), at least 1. Exact to within one
/// iteration's worth of events (stencil2d's Gather and Scatterv rounds come every 4th and
/// 8th iteration, so its per-iteration count is an average).
pub fn iterations_for_events(scenario: Scenario, ranks: u32, events: u64) -> Result<u32> {
    let count = |iterations| -> Result<u64> {
        let config = GenConfig::new(scenario, ranks, iterations);
        Ok(generate(&config, &mut NullSink)?.events)
    };
    let (e8, e16) = (count(8)?, count(16)?);
    let per = ((e16 - e8) / 8).max(1);
    let fixed = e8.saturating_sub(8 * per);
    let k = events.saturating_sub(fixed).div_ceil(per).max(1);
    Ok(k.min(u64::from(u32::MAX)) as u32)
}
