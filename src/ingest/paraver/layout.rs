//! How a Paraver trace's objects become the MTF model's: the MPI application's tasks become
//! the ranks (world rank = task index within the application, in order), their threads the
//! ranks' threads; every thread of another application becomes a non-MPI location. Nodes
//! become processors, the MPI application's communicator lines communicators (their tasks
//! as world ranks).

use super::header::Header;
use super::names::Row;
use crate::hash::FxHashMap;
use crate::model::{
    Anomaly, CommId, Communicator, Location, LocationKind, Process, Processor, Rank, TraceHeader,
};

/// What one thread of the trace is in the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// A thread of an MPI rank (`thread` counts from 0, the main thread).
    Rank { rank: Rank, thread: u32 },
    /// A thread of another application: kept as a non-MPI location.
    Outside,
}

/// The trace's threads and communicators as the model sees them.
#[derive(Debug)]
pub(crate) struct Layout {
    /// The model's header (processors, processes, communicators).
    pub header: TraceHeader,
    /// The MPI application, counted from 0.
    pub mpi_app: usize,
    /// The world communicator, on which point-to-point messages travel (Paraver's
    /// communication records name no communicator).
    pub world: CommId,
    /// Per application, the global index of each task's first thread.
    first_thread: Vec<Vec<usize>>,
    /// Per application, per task, its number of threads.
    threads: Vec<Vec<u32>>,
    /// Every thread, by global index (applications, tasks, threads in order).
    pub roles: Vec<Role>,
    /// Per thread, its name and its group (the task's name).
    pub names: Vec<(String, String)>,
    /// Per thread, its (application, task, thread), from 1.
    pub ids: Vec<(u32, u32, u32)>,
    /// Paraver communicator id → the model's, for the MPI application's communicators.
    comms: FxHashMap<u64, CommId>,
    /// Each communicator's members as the import's seam keeps them (the first declaration
    /// of an id, without members that are no rank or are listed again): the header hands
    /// communicators over as declared, for the seam to report what breaks the rules.
    members: FxHashMap<CommId, Vec<Rank>>,
    /// What the header declares but the model cannot hold.
    pub anomalies: Vec<Anomaly>,
}

impl Layout {
    /// Lays out the trace whose header is `header`, with the names of `row`; `mpi_app`
    /// (from 0) is the application whose tasks become ranks.
    pub fn new(header: &Header, row: Option<&Row>, mpi_app: usize, trace_name: &str) -> Layout {
        let name_of = |list: Option<&Vec<String>>, i: usize, default: String| {
            list.and_then(|l| l.get(i)).cloned().unwrap_or(default)
        };
        let processors = header
            .nodes
            .iter()
            .enumerate()
            .map(|(i, _)| Processor {
                id: i as u32,
                name: name_of(row.map(|r| &r.nodes), i, format!("node {}", i + 1)),
            })
            .collect();

        let mut first_thread = Vec::new();
        let mut threads = Vec::new();
        let mut roles = Vec::new();
        let mut names = Vec::new();
        let mut ids = Vec::new();
        let mut processes = Vec::new();
        let mut global_task = 0usize;
        for (a, tasks) in header.apps.iter().enumerate() {
            let mut firsts = Vec::with_capacity(tasks.len());
            for (t, decl) in tasks.iter().enumerate() {
                let task_name = name_of(
                    row.map(|r| &r.tasks),
                    global_task,
                    format!("TASK {}.{}", a + 1, t + 1),
                );
                global_task += 1;
                if a == mpi_app {
                    processes.push(Process {
                        rank: t as Rank,
                        name: task_name.clone(),
                        processor: decl.node.checked_sub(1),
                    });
                }
                firsts.push(roles.len());
                for h in 0..decl.threads {
                    roles.push(if a == mpi_app {
                        Role::Rank {
                            rank: t as Rank,
                            thread: h,
                        }
                    } else {
                        Role::Outside
                    });
                    let thread_name = name_of(
                        row.map(|r| &r.threads),
                        names.len(),
                        format!("THREAD {}.{}.{}", a + 1, t + 1, h + 1),
                    );
                    names.push((thread_name, task_name.clone()));
                    ids.push((a as u32 + 1, t as u32 + 1, h + 1));
                }
            }
            first_thread.push(firsts);
            threads.push(tasks.iter().map(|d| d.threads).collect());
        }

        let mut anomalies = Vec::new();
        let (communicators, comms, world) =
            communicators(header, mpi_app, processes.len(), &mut anomalies);
        let mut members = FxHashMap::default();
        for c in &communicators {
            members
                .entry(c.id)
                .or_insert_with(|| as_kept(&c.members, processes.len()));
        }
        Layout {
            header: TraceHeader {
                trace_name: trace_name.to_string(),
                comments: format!("Paraver trace recorded {}", header.date),
                processors,
                processes,
                communicators,
                ..TraceHeader::default()
            },
            mpi_app,
            world,
            first_thread,
            threads,
            roles,
            names,
            ids,
            comms,
            members,
            anomalies,
        }
    }

    /// The global index of thread `thread` of task `task` of application `app` (all from
    /// 1), if the header declares it.
    #[inline]
    pub fn thread_index(&self, app: u64, task: u64, thread: u64) -> Option<usize> {
        let a = usize::try_from(app).ok()?.checked_sub(1)?;
        let t = usize::try_from(task).ok()?.checked_sub(1)?;
        let h = u32::try_from(thread).ok()?.checked_sub(1)?;
        let count = *self.threads.get(a)?.get(t)?;
        (h < count).then(|| self.first_thread[a][t] + h as usize)
    }

    /// What the header declares, for the anomaly about a record of an undeclared thread.
    pub fn describe(&self) -> String {
        let apps: Vec<String> = self
            .threads
            .iter()
            .enumerate()
            .map(|(a, t)| format!("application {} has {} tasks", a + 1, t.len()))
            .collect();
        apps.join(", ")
    }

    /// The model's communicator for Paraver communicator `id` of the MPI application.
    pub fn comm(&self, id: u64) -> Option<CommId> {
        self.comms.get(&id).copied()
    }

    /// The world rank of the member with rank `local` in communicator `comm`.
    pub fn member(&self, comm: CommId, local: u64) -> Option<Rank> {
        let local = usize::try_from(local).ok()?;
        self.members.get(&comm)?.get(local).copied()
    }

    /// The index of world rank `rank` among communicator `comm`'s members.
    pub fn member_index(&self, comm: CommId, rank: Rank) -> Option<usize> {
        self.members.get(&comm)?.iter().position(|&m| m == rank)
    }

    /// The number of members of communicator `comm` (0 if it is not declared).
    pub fn size(&self, comm: CommId) -> usize {
        self.members.get(&comm).map_or(0, Vec::len)
    }

    /// Whether `id` is the id of a communicator of the model's header (declared by a line, or
    /// the world made when no line declares it).
    pub fn declares(&self, id: CommId) -> bool {
        self.members.contains_key(&id)
    }

    /// The non-MPI location of thread `index`, with nothing recorded yet.
    pub fn location(&self, index: usize, kind: LocationKind) -> Location {
        let (name, group) = &self.names[index];
        let mut l = Location::new(name, kind);
        l.group = group.clone();
        if let Role::Rank { rank, thread } = self.roles[index] {
            l.rank = Some(rank);
            l.thread = Some(thread);
        }
        l
    }
}

/// Members as the import's seam keeps them: without those that are no rank of `ranks`, each
/// once.
fn as_kept(members: &[Rank], ranks: usize) -> Vec<Rank> {
    let mut kept: Vec<Rank> = Vec::with_capacity(members.len());
    for &m in members {
        if (m as usize) < ranks && !kept.contains(&m) {
            kept.push(m);
        }
    }
    kept
}

/// The MPI application's communicators (with the world communicator first found or made),
/// the map from Paraver ids, and the world's id. A line of another application, or whose id
/// does not fit 32 bits or that lists a task below 1 (MPItrace's `-1` for `MPI_COMM_SELF`),
/// is reported and left out. What breaks Table 3.1's rules (an id declared again, no task, a
/// task beyond the application's, a task listed twice) is kept as declared, for the import's
/// seam to report and repair; the layout looks members up as the seam keeps them.
fn communicators(
    header: &Header,
    mpi_app: usize,
    ranks: usize,
    anomalies: &mut Vec<Anomaly>,
) -> (Vec<Communicator>, FxHashMap<u64, CommId>, CommId) {
    let mut skip = |line: u64, why: String| {
        anomalies.push(Anomaly::SkippedRecord {
            rank: None,
            time: None,
            what: format!("communicator line {line}: {why}"),
        });
    };
    let mut list: Vec<Communicator> = Vec::new();
    // Whether each of `list` is the first declaration of its id.
    let mut first = Vec::new();
    let mut ids = FxHashMap::default();
    for c in &header.comms {
        if c.app != mpi_app as u64 + 1 {
            skip(
                c.line,
                format!(
                    "communicator {} belongs to application {}, not to the MPI application {}",
                    c.id,
                    c.app,
                    mpi_app + 1
                ),
            );
            continue;
        }
        let Ok(id) = CommId::try_from(c.id) else {
            skip(
                c.line,
                format!("communicator id {} does not fit 32 bits", c.id),
            );
            continue;
        };
        let members: Option<Vec<Rank>> = c
            .members
            .iter()
            .map(|&m| Rank::try_from(m).ok().and_then(|m| m.checked_sub(1)))
            .collect();
        let Some(members) = members else {
            let bad: Vec<String> = c
                .members
                .iter()
                .filter(|&&m| Rank::try_from(m).map_or(true, |m| m < 1))
                .map(i64::to_string)
                .collect();
            skip(
                c.line,
                format!(
                    "communicator {id} lists task {} but application {} has tasks 1 to {ranks}",
                    bad.join(", "),
                    mpi_app + 1
                ),
            );
            continue;
        };
        first.push(!ids.contains_key(&c.id));
        ids.entry(c.id).or_insert(id);
        list.push(Communicator {
            id,
            name: format!("C{id}"),
            members,
        });
    }
    let is_world = |c: &Communicator| {
        c.members.len() == ranks && c.members.iter().enumerate().all(|(i, &r)| r as usize == i)
    };
    // Only the first declaration of an id is kept by the seam.
    let world = match list
        .iter_mut()
        .zip(&first)
        .find(|(c, first)| **first && is_world(c))
    {
        Some((c, _)) => {
            c.name = "MPI_COMM_WORLD".to_string();
            c.id
        }
        None => {
            // No line declares the world: it is made, with the next free id.
            let id = list.iter().map(|c| c.id + 1).max().unwrap_or(0);
            list.push(Communicator {
                id,
                name: "MPI_COMM_WORLD".to_string(),
                members: (0..ranks as Rank).collect(),
            });
            id
        }
    };
    // A rank alone in a communicator (Extrae declares each task's MPI_COMM_SELF so; Paraver
    // names no communicator) has it as its self communicator, as the OTF2 reader names them.
    let mut has_self = vec![false; ranks];
    let firsts = list
        .iter_mut()
        .zip(&first)
        .filter(|(c, first)| **first && c.id != world);
    for (c, _) in firsts {
        if let [rank] = c.members[..] {
            let Some(has) = has_self.get_mut(rank as usize) else {
                continue;
            };
            if !std::mem::replace(has, true) {
                c.name = format!("MPI_COMM_SELF of rank {rank}");
            }
        }
    }
    // The world first, then the others in the order of their lines.
    list.sort_by_key(|c| c.id != world);
    (list, ids, world)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::paraver::header::{CommLine, TaskDecl};

    fn header() -> Header {
        let task = |threads| TaskDecl { threads, node: 1 };
        let comm = |line, app, id, members: &[i64]| CommLine {
            line,
            app,
            id,
            members: members.to_vec(),
        };
        Header {
            date: "today".into(),
            ns_per_unit: 1,
            nodes: vec![4],
            apps: vec![vec![task(1), task(1)], vec![task(2), task(1), task(1)]],
            comms: vec![
                comm(2, 2, 7, &[1, 2, 3]),
                comm(3, 1, 1, &[1, 2, 3]),
                comm(4, 2, 8, &[2, 1]),
                comm(5, 2, 9, &[2, 1]),
                comm(6, 2, 4, &[-1]),
            ],
            intercomm_lines: vec![],
        }
    }

    #[test]
    fn the_mpi_application_gives_ranks_and_the_others_locations() {
        let l = Layout::new(&header(), None, 1, "t");
        assert_eq!(l.header.processes.len(), 3);
        assert_eq!(l.thread_index(1, 2, 1), Some(1));
        assert_eq!(l.roles[1], Role::Outside);
        assert_eq!(l.thread_index(2, 1, 2), Some(3));
        assert_eq!(l.roles[3], Role::Rank { rank: 0, thread: 1 });
        assert_eq!(l.thread_index(2, 1, 3), None);
        assert_eq!(l.thread_index(3, 1, 1), None);
        assert_eq!(
            l.names[3],
            ("THREAD 2.1.2".to_string(), "TASK 2.1".to_string())
        );
        // Communicator 7 lists every task in order: it is the world.
        let names: Vec<(u32, &str, Vec<u32>)> = l
            .header
            .communicators
            .iter()
            .map(|c| (c.id, c.name.as_str(), c.members.clone()))
            .collect();
        assert_eq!(
            names,
            vec![
                (7, "MPI_COMM_WORLD", vec![0, 1, 2]),
                (8, "C8", vec![1, 0]),
                (9, "C9", vec![1, 0])
            ]
        );
        assert_eq!((l.world, l.comm(8), l.comm(1)), (7, Some(8), None));
        let why: Vec<String> = l
            .anomalies
            .iter()
            .map(|a| match a {
                Anomaly::SkippedRecord { what, .. } => what.clone(),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(
            why,
            vec![
                "communicator line 3: communicator 1 belongs to application 1, not to the MPI application 2",
                "communicator line 6: communicator 4 lists task -1 but application 2 has tasks 1 to 3",
            ]
        );
    }

    #[test]
    fn a_world_is_made_when_no_line_declares_one() {
        let mut h = header();
        h.comms.clear();
        let l = Layout::new(&h, None, 0, "t");
        assert_eq!(l.header.communicators.len(), 1);
        assert_eq!(l.header.communicators[0].members, vec![0, 1]);
        assert_eq!(l.world, 0);
    }
}
