//! Time windows of a replay, for run-to-run variation. The trace's length is not known in
//! advance, so counts go into fine windows (1 ms at first) whose length doubles, merging
//! neighbours pairwise, whenever there would be more than [`MAX_FINE`] of them; at the end
//! they are regrouped into the number of windows asked for.

use super::Window;

/// Fine windows are doubled in length whenever there would be more than this many.
pub const MAX_FINE: usize = 4096;

/// The first fine window length, ns.
const FIRST_FINE_NS: u64 = 1_000_000;

/// Where a time falls among the fine windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Fine window number, counted from the first event at the current window length.
    pub index: usize,
    /// Trace time the window starts at (ns).
    pub start_ns: u64,
}

/// The fine windows' common clock: their origin (the first event) and current length.
#[derive(Debug, Clone)]
pub struct WindowClock {
    t0: Option<u64>,
    fine_ns: u64,
}

impl Default for WindowClock {
    fn default() -> WindowClock {
        WindowClock {
            t0: None,
            fine_ns: FIRST_FINE_NS,
        }
    }
}

impl WindowClock {
    /// Sets the origin, once: the first event seen.
    pub fn start(&mut self, now: u64) {
        self.t0.get_or_insert(now);
    }

    /// The slot of `now` and how many times the windows had to double to hold it: every
    /// series kept on this clock must be halved that many times (see [`halve`]) before
    /// the slot is used.
    pub fn slot(&mut self, now: u64) -> (Slot, u32) {
        let t0 = *self.t0.get_or_insert(now);
        let mut doubled = 0;
        let mut index = (now.saturating_sub(t0) / self.fine_ns) as usize;
        while index >= MAX_FINE {
            self.fine_ns *= 2;
            doubled += 1;
            index = (now.saturating_sub(t0) / self.fine_ns) as usize;
        }
        let start_ns = t0 + index as u64 * self.fine_ns;
        (Slot { index, start_ns }, doubled)
    }

    /// The fine window length now (ns).
    pub fn fine_ns(&self) -> u64 {
        self.fine_ns
    }

    /// Doubles the windows until they are `fine_ns` long; returns how many times, as
    /// [`WindowClock::slot`] does.
    pub fn widen_to(&mut self, fine_ns: u64) -> u32 {
        let mut doubled = 0;
        while self.fine_ns < fine_ns {
            self.fine_ns *= 2;
            doubled += 1;
        }
        doubled
    }
}

/// Window `slot` of a series, created (with its start) if the series is shorter.
pub fn window_at(w: &mut Vec<Window>, slot: Slot) -> &mut Window {
    if w.len() <= slot.index {
        w.resize_with(slot.index + 1, Window::default);
    }
    let wd = &mut w[slot.index];
    wd.start_ns = slot.start_ns;
    wd
}

/// Merges neighbouring windows pairwise.
pub fn halve(w: &mut Vec<Window>) {
    let merged = w
        .chunks(2)
        .map(|pair| {
            let mut m = pair[0].clone();
            if let Some(b) = pair.get(1) {
                m.merge(b);
            }
            m
        })
        .collect();
    *w = merged;
}

/// Groups fine windows into `n` windows of equal length (the last may be shorter).
pub fn regroup(fine: Vec<Window>, n: usize) -> Vec<Window> {
    if fine.len() <= n {
        return fine;
    }
    let per = fine.len().div_ceil(n);
    fine.chunks(per)
        .map(|c| {
            let mut m = c[0].clone();
            for w in &c[1..] {
                m.merge(w);
            }
            m
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_doubles_past_max_fine_windows() {
        let mut c = WindowClock::default();
        c.start(1_000);
        assert_eq!(c.slot(1_000 + 5 * FIRST_FINE_NS + 1).0.index, 5);
        // The first time past 4096 ms needs 2 ms windows: one doubling.
        let (slot, doubled) = c.slot(1_000 + MAX_FINE as u64 * FIRST_FINE_NS);
        assert_eq!((slot.index, doubled), (MAX_FINE / 2, 1));
        assert_eq!(slot.start_ns, 1_000 + MAX_FINE as u64 * FIRST_FINE_NS);
        assert_eq!(c.slot(1_000).1, 0);
    }

    #[test]
    fn halving_and_regrouping_keep_every_count() {
        let w: Vec<Window> = (0..5)
            .map(|i| Window {
                start_ns: i * 10,
                wakeups: i + 1,
                ..Window::default()
            })
            .collect();
        let mut h = w.clone();
        halve(&mut h);
        assert_eq!(
            h.iter().map(|w| w.wakeups).collect::<Vec<_>>(),
            vec![3, 7, 5]
        );
        let r = regroup(w, 2);
        assert_eq!(r.iter().map(|w| w.wakeups).collect::<Vec<_>>(), vec![6, 9]);
        assert_eq!(r[1].start_ns, 30);
    }
}
