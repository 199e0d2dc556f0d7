//! Per-task values indexed by pid, for state updated at every event (causal order,
//! runtimes, names). Pids are small integers below the kernel's PID_MAX_LIMIT (2^22), so
//! they index pages of a table, allocated as pids appear: a load or two instead of
//! hashing, and memory that follows the pids in use, not the highest one. A pid outside
//! that range (a damaged or hand-made trace) goes to a map.

use std::collections::HashMap;

/// Entries per page.
const PAGE: usize = 1024;
/// Pids below this are paged: the kernel's PID_MAX_LIMIT on 64-bit.
const PAGED_PIDS: i32 = 1 << 22;

/// A value for every pid, `T::default()` for those never set.
#[derive(Debug, Clone)]
pub struct PidTable<T> {
    pages: Vec<Option<Box<[T; PAGE]>>>,
    others: HashMap<i32, T>,
}

impl<T> Default for PidTable<T> {
    fn default() -> Self {
        PidTable {
            pages: Vec::new(),
            others: HashMap::new(),
        }
    }
}

impl<T: Copy + Default + PartialEq> PidTable<T> {
    /// `pid`'s value.
    #[inline]
    pub fn get(&self, pid: i32) -> T {
        if (0..PAGED_PIDS).contains(&pid) {
            let p = pid as usize;
            match self.pages.get(p / PAGE) {
                Some(Some(page)) => page[p % PAGE],
                _ => T::default(),
            }
        } else {
            self.others.get(&pid).copied().unwrap_or_default()
        }
    }

    /// `pid`'s value, to change.
    #[inline]
    pub fn get_mut(&mut self, pid: i32) -> &mut T {
        let p = pid as usize;
        // Most calls find the page there: a pid seen before, or near one.
        if (0..PAGED_PIDS).contains(&pid) {
            if let Some(Some(_)) = self.pages.get(p / PAGE) {
                let Some(Some(page)) = self.pages.get_mut(p / PAGE) else {
                    unreachable!("just found")
                };
                return &mut page[p % PAGE];
            }
        }
        self.insert_slow(pid)
    }

    /// `pid`'s value, to change, where its page is not allocated or it is not paged.
    #[cold]
    #[inline(never)]
    fn insert_slow(&mut self, pid: i32) -> &mut T {
        if (0..PAGED_PIDS).contains(&pid) {
            let p = pid as usize;
            if self.pages.len() <= p / PAGE {
                self.pages.resize_with(p / PAGE + 1, || None);
            }
            let page = self.pages[p / PAGE].get_or_insert_with(|| Box::new([T::default(); PAGE]));
            &mut page[p % PAGE]
        } else {
            self.others.entry(pid).or_default()
        }
    }

    /// Sets `pid`'s value; the one it had.
    #[inline]
    pub fn replace(&mut self, pid: i32, v: T) -> T {
        std::mem::replace(self.get_mut(pid), v)
    }

    /// Every pid whose value is not the default, with it, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (i32, T)> + '_ {
        let paged = self.pages.iter().enumerate().flat_map(|(n, page)| {
            page.iter().flat_map(move |page| {
                page.iter()
                    .enumerate()
                    .map(move |(i, v)| ((n * PAGE + i) as i32, *v))
            })
        });
        paged
            .chain(self.others.iter().map(|(p, v)| (*p, *v)))
            .filter(|(_, v)| *v != T::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_kept_per_pid_paged_or_not() {
        let mut t = PidTable::<u64>::default();
        for pid in [
            0,
            1,
            1023,
            1024,
            4_194_303,
            4_194_304,
            -1,
            i32::MIN,
            i32::MAX,
        ] {
            assert_eq!(t.get(pid), 0);
            assert_eq!(t.replace(pid, (pid as u64).wrapping_add(7)), 0);
        }
        *t.get_mut(1) += 1;
        assert_eq!(t.get(1), 9);
        assert_eq!(t.get(1025), 0);
        assert_eq!(t.replace(1024, 0), 1031);
        let mut all: Vec<(i32, u64)> = t.iter().collect();
        all.sort();
        let want: Vec<(i32, u64)> = [i32::MIN, -1, 0, 1, 1023, 4_194_303, 4_194_304, i32::MAX]
            .into_iter()
            .map(|p| (p, (p as u64).wrapping_add(7 + (p == 1) as u64)))
            .collect();
        assert_eq!(all, want);
    }
}
