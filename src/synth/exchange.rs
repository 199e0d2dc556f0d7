//! Request-response pairs in a traced workload: what the trace does not show of them.
//!
//! A trace shows a write only when it woke its reader and a read only when it blocked.
//! Two tasks that only ever wake each other (a pipe or socket ping-pong, a client and its
//! server thread) write and read in turn; when the reader was still running or queued,
//! the write woke no one and the read that followed did not block, so neither is in the
//! trace, and the step lists built from it hold a run of wakes on one side and a run of
//! sleeps on the other. Replayed under another timing those lists lose wakeups: a wake
//! that finds its peer awake is kept for the peer's next sleep, but the peer's write that
//! the trace did not show never comes. This pass puts them back: in each such pair every
//! task alternates writing to its peer and waiting for it, so a wake that follows a wake
//! gets the read between them, and a sleep that follows a sleep gets the write between
//! them. The simulator then makes a wakeup of a write only when its reader waits.
//!
//! A task is taken for one side of a pair when one other task accounts for at least
//! 95 % of the wakeups it gives and of those it gets, and that task for the same of it;
//! the pair is completed when the trace hid at least 10 % of its turns (two tasks on
//! different CPUs each wait at every turn, and the trace shows all of them: the odd
//! double sleep there is a wake from elsewhere, and filling it in would put a message
//! into the exchange that never was).
//! Tasks with several peers (hackbench's senders and receivers) are left alone: which
//! receiver a missing write went to cannot be told.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use super::Step;

/// What the pass found and added.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Exchanges {
    /// Pairs of tasks that only wake each other.
    pub pairs: u64,
    /// Writes to the peer added (the trace's woke no one).
    pub writes_added: u64,
    /// Waits for the peer added (the trace's read found data).
    pub reads_added: u64,
}

/// A pair needs this many wakeups each way to be taken for an exchange.
const MIN_WAKES_EACH_WAY: usize = 2;
/// The share of a task's wakeups, given and received, that its peer must account for
/// (below it, a task's wakeups are spread over several peers: see [`super::streams`]).
pub(super) const DOMINANT_PCT: usize = 95;
/// A pair is completed when the trace hid at least this share of its turns (per cent of
/// the writes and sleeps it shows).
const MIN_HIDDEN_PCT: u64 = 10;

/// Completes the exchanges of request-response pairs in the tasks' step lists; `moved`
/// gets, for each task whose list changed, the new index of each of its old steps.
pub fn complete(tasks: &mut [Vec<Step>], moved: &mut BTreeMap<usize, Vec<usize>>) -> Exchanges {
    let n = tasks.len();
    // Per task: how often it woke each other task, and how often each woke it.
    let mut woke = vec![BTreeMap::<usize, usize>::new(); n];
    let mut woken_by = vec![BTreeMap::<usize, usize>::new(); n];
    for (i, steps) in tasks.iter().enumerate() {
        for s in steps {
            if let Step::Wake { task, .. } = *s {
                if task < n && task != i {
                    *woke[i].entry(task).or_default() += 1;
                    *woken_by[task].entry(i).or_default() += 1;
                }
            }
        }
    }
    let peer_of = |i: usize| -> Option<usize> {
        let out = dominant(&woke[i])?;
        (dominant(&woken_by[i]) == Some(out)).then_some(out)
    };
    let mut found = Exchanges::default();
    for i in 0..n {
        let Some(p) = peer_of(i) else { continue };
        if p < i || peer_of(p) != Some(i) {
            continue;
        }
        let (mut a, mut b) = (tasks[i].clone(), tasks[p].clone());
        let (wa, ra, moved_a) = alternate(&mut a, p);
        let (wb, rb, moved_b) = alternate(&mut b, i);
        let traced = exchange_ops(&tasks[i], p) + exchange_ops(&tasks[p], i);
        if (wa + ra + wb + rb) * 100 < traced * MIN_HIDDEN_PCT {
            // A pair whose trace shows nearly every write and read (its tasks on
            // different CPUs, each waiting at each turn): the few odd steps are more
            // likely wakes from elsewhere than hidden turns.
            continue;
        }
        tasks[i] = a;
        tasks[p] = b;
        moved.insert(i, moved_a);
        moved.insert(p, moved_b);
        found.pairs += 1;
        found.writes_added += wa + wb;
        found.reads_added += ra + rb;
    }
    found
}

/// The writes to `peer` and the sleeps of a step list.
fn exchange_ops(steps: &[Step], peer: usize) -> u64 {
    steps
        .iter()
        .filter(|s| {
            matches!(s, Step::Sleep) || matches!(s, Step::Wake { task, .. } if *task == peer)
        })
        .count() as u64
}

/// The task that accounts for nearly all of `counts` (a few strays are wakes the trace
/// gave the wrong waker, such as a parent's), seen often enough.
fn dominant(counts: &BTreeMap<usize, usize>) -> Option<usize> {
    let total: usize = counts.values().sum();
    let (&task, &most) = counts.iter().max_by_key(|(&t, &c)| (c, Reverse(t)))?;
    (most >= MIN_WAKES_EACH_WAY && most * 100 >= total * DOMINANT_PCT).then_some(task)
}

/// The exchange operations of a step list.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Write,
    Read,
}

/// Makes `steps` alternate writes to `peer` and sleeps (reads); returns the writes and
/// reads added, and the new index of each old step. Timed sleeps are not reads and are
/// left where they are.
fn alternate(steps: &mut Vec<Step>, peer: usize) -> (u64, u64, Vec<usize>) {
    let mut out = Vec::with_capacity(steps.len() + steps.len() / 2);
    let mut moved = Vec::with_capacity(steps.len());
    let (mut writes, mut reads) = (0, 0);
    let mut last = None;
    for &s in steps.iter() {
        match s {
            Step::Wake { task, .. } if task == peer => {
                if last == Some(Op::Write) {
                    out.push(Step::Sleep);
                    reads += 1;
                }
                last = Some(Op::Write);
            }
            Step::Sleep => {
                if last == Some(Op::Read) {
                    out.push(Step::Wake {
                        task: peer,
                        sync: true,
                    });
                    writes += 1;
                }
                last = Some(Op::Read);
            }
            _ => {}
        }
        moved.push(out.len());
        out.push(s);
    }
    *steps = out;
    (writes, reads, moved)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(task: usize) -> Step {
        Step::Wake { task, sync: true }
    }

    #[test]
    fn a_ping_pong_seen_one_way_gets_the_other_half_back() {
        // As a trace shows it while task 1 preempts task 0 at each wakeup: task 0's
        // writes woke task 1, task 1's first answer found task 0 queued (not traced) and
        // task 0's read found data (not traced); then the roles switch.
        let mut tasks = vec![
            vec![
                Step::Run(5),
                w(1),
                Step::Run(5),
                w(1),
                Step::Run(5),
                Step::Sleep,
            ],
            vec![
                Step::Run(3),
                Step::Sleep,
                Step::Run(3),
                Step::Sleep,
                w(0),
                Step::Run(3),
                Step::Sleep,
                w(0),
            ],
        ];
        let mut moved = BTreeMap::new();
        let found = complete(&mut tasks, &mut moved);
        assert_eq!(
            found,
            Exchanges {
                pairs: 1,
                writes_added: 1,
                reads_added: 1,
            }
        );
        // Task 0 waits for the answer between its two writes.
        assert_eq!(
            tasks[0],
            [
                Step::Run(5),
                w(1),
                Step::Run(5),
                Step::Sleep,
                w(1),
                Step::Run(5),
                Step::Sleep
            ]
        );
        // Task 1 answers between its two reads.
        assert_eq!(
            tasks[1],
            [
                Step::Run(3),
                Step::Sleep,
                Step::Run(3),
                w(0),
                Step::Sleep,
                w(0),
                Step::Run(3),
                Step::Sleep,
                w(0)
            ]
        );
        // Where each old step went: after the read put in before task 0's second
        // write, and after the write put in before task 1's second read.
        assert_eq!(moved[&0], [0, 1, 2, 4, 5, 6]);
        assert_eq!(moved[&1], [0, 1, 2, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn tasks_with_several_peers_are_left_alone() {
        // Task 0 writes to 1 and 2 (a hackbench sender); 1 and 2 answer it.
        let tasks0 = vec![
            vec![w(1), w(2), w(1), w(2), Step::Sleep, Step::Sleep],
            vec![Step::Sleep, w(0), Step::Sleep, w(0)],
            vec![Step::Sleep, w(0), Step::Sleep, w(0)],
        ];
        let mut tasks = tasks0.clone();
        assert_eq!(
            complete(&mut tasks, &mut BTreeMap::new()),
            Exchanges::default()
        );
        assert_eq!(tasks, tasks0);
    }

    #[test]
    fn a_pair_seen_waking_once_each_way_is_not_taken_for_an_exchange() {
        let tasks0 = vec![vec![w(1), w(1), Step::Sleep], vec![Step::Sleep, w(0)]];
        let mut tasks = tasks0.clone();
        assert_eq!(complete(&mut tasks, &mut BTreeMap::new()).pairs, 0);
        assert_eq!(tasks, tasks0);
    }
}
