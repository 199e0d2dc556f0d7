//! perf.data records put in time order a round at a time, as perf itself does.
//!
//! `perf record` empties the CPUs' ring buffers in turn and writes a FINISHED_ROUND
//! after each pass; a record written after it is no earlier than the latest record
//! written before the previous one. So at the end of each round, everything up to the
//! latest timestamp of the round before is final and can go, and only the rest waits.
//! Equal timestamps keep the order the records were written in, as `perf script` shows
//! them.
//!
//! Each CPU's buffer is written in time order, so the records are kept in one queue per
//! CPU and merged: nothing is sorted or moved but to enter and leave its queue. A record
//! out of order in its own queue (which no CPU's buffer holds) is put in its place.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Order of items: timestamp, then arrival.
type Key = (u64, u64);

/// Items waiting for their round to end, one queue per CPU, each in order.
#[derive(Debug)]
pub struct Rounds<T> {
    queues: Vec<VecDeque<(Key, T)>>,
    /// The head of each non-empty queue, rebuilt when a round ends.
    heads: BinaryHeap<Reverse<(Key, usize)>>,
    /// Items up to this timestamp may go.
    limit: u64,
    /// The latest timestamp of the rounds before the current one, and of all so far.
    prev_max: u64,
    cur_max: u64,
    /// Items so far: the next item's arrival number.
    arrived: u64,
}

impl<T> Default for Rounds<T> {
    fn default() -> Self {
        Rounds {
            queues: Vec::new(),
            heads: BinaryHeap::new(),
            limit: 0,
            prev_max: 0,
            cur_max: 0,
            arrived: 0,
        }
    }
}

impl<T> Rounds<T> {
    /// Adds an item of the current round to the queue of its CPU (any queue is correct;
    /// the CPU's own keeps the queue in order as it comes).
    #[inline]
    pub fn push(&mut self, queue: usize, ts: u64, item: T) {
        if self.queues.len() <= queue {
            self.queues.resize_with(queue + 1, VecDeque::new);
        }
        let key = (ts, self.arrived);
        self.arrived += 1;
        self.cur_max = self.cur_max.max(ts);
        let q = &mut self.queues[queue];
        match q.back() {
            Some((last, _)) if *last > key => {
                let at = q.partition_point(|(k, _)| *k < key);
                q.insert(at, (key, item));
            }
            _ => q.push_back((key, item)),
        }
    }

    /// Ends a round: what no later record can precede may now be taken with `pop`.
    pub fn finish_round(&mut self) {
        self.limit = self.prev_max;
        self.prev_max = self.cur_max;
        self.rebuild_heads();
    }

    /// No more records will come: everything may be taken.
    pub fn finish(&mut self) {
        self.limit = u64::MAX;
        self.rebuild_heads();
    }

    fn rebuild_heads(&mut self) {
        self.heads.clear();
        for (i, q) in self.queues.iter().enumerate() {
            if let Some((k, _)) = q.front() {
                self.heads.push(Reverse((*k, i)));
            }
        }
    }

    /// The next item in order, if the rounds ended so far let it go.
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        let Reverse((key, i)) = *self.heads.peek()?;
        if key.0 > self.limit {
            return None;
        }
        let q = &mut self.queues[i];
        let (_, item) = q.pop_front()?;
        match q.front() {
            Some((k, _)) => {
                // Replaces the top without a pop and a push.
                *self.heads.peek_mut()? = Reverse((*k, i));
            }
            None => {
                self.heads.pop();
            }
        }
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(r: &mut Rounds<&'static str>, end: bool) -> Vec<&'static str> {
        if end {
            r.finish();
        } else {
            r.finish_round();
        }
        std::iter::from_fn(|| r.pop()).collect()
    }

    /// A round's items go once the next round has ended, in time order, ties in arrival
    /// order; what a later round could still precede waits.
    #[test]
    fn items_leave_in_time_order_once_final() {
        let mut r = Rounds::default();
        // Round 1: two CPUs' runs.
        r.push(0, 10, "a10");
        r.push(0, 30, "a30");
        r.push(1, 20, "b20");
        r.push(1, 30, "b30");
        assert_eq!(drain(&mut r, false), Vec::<&str>::new());
        // Round 2 may still hold items as early as round 1's.
        r.push(0, 25, "a25");
        r.push(1, 40, "b40");
        assert_eq!(drain(&mut r, false), ["a10", "b20", "a25", "a30", "b30"]);
        r.push(0, 40, "a40");
        r.push(2, 35, "c35");
        assert_eq!(drain(&mut r, false), ["c35", "b40", "a40"]);
        r.push(0, 50, "z");
        assert_eq!(drain(&mut r, true), ["z"]);
        assert_eq!(drain(&mut r, true), Vec::<&str>::new());
    }

    /// Items out of order within their own queue still leave in time order.
    #[test]
    fn a_queue_out_of_order_is_put_in_order() {
        let mut r = Rounds::default();
        r.push(0, 30, "30");
        r.push(0, 10, "10");
        r.push(0, 20, "20a");
        r.push(1, 20, "20b");
        r.push(0, 20, "20c");
        assert_eq!(drain(&mut r, true), ["10", "20a", "20b", "20c", "30"]);
    }
}
