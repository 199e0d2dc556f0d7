//! A fixed-size set of positions kept as u64 words, walked as the kernel walks a cpumask
//! with for_each_cpu_wrap: from a start position up to the end, then on from 0, one
//! trailing_zeros per set bit over masked words, so empty stretches cost a word each.
//!
//! The walks take the words through a function, so one walk can run over the
//! intersection of several sets without building it.

/// Positions 0..len, each set or not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BitSet {
    words: Vec<u64>,
    len: usize,
}

impl BitSet {
    /// No positions.
    pub const EMPTY: BitSet = BitSet {
        words: Vec::new(),
        len: 0,
    };

    /// `len` positions, none set.
    pub fn new(len: usize) -> BitSet {
        BitSet {
            words: vec![0; len.div_ceil(64)],
            len,
        }
    }

    /// How many positions the set has room for.
    pub fn len(&self) -> usize {
        self.len
    }

    /// No room for any position.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether position `i` is set.
    pub fn contains(&self, i: usize) -> bool {
        self.words[i / 64] >> (i % 64) & 1 != 0
    }

    /// Sets or clears position `i`.
    pub fn set(&mut self, i: usize, on: bool) {
        let bit = 1u64 << (i % 64);
        if on {
            self.words[i / 64] |= bit;
        } else {
            self.words[i / 64] &= !bit;
        }
    }

    /// Some position is set.
    pub fn any(&self) -> bool {
        self.words.iter().any(|&w| w != 0)
    }

    /// Word `i` (positions 64·i ..).
    pub fn word(&self, i: usize) -> u64 {
        self.words[i]
    }
}

/// The offsets d < `len`, ascending, at which position (start + d) mod n is set in the
/// words `word` gives, for a set of `n` positions: the walk of for_each_cpu_wrap from
/// `start`, cut after `len` positions. `start` < n and `len` ≤ n.
pub fn ones_wrapping<W: Fn(usize) -> u64>(word: W, n: usize, start: usize, len: usize) -> Ones<W> {
    debug_assert!(len <= n && (start < n || len == 0));
    let (end, wrap_end) = if start + len <= n {
        (start + len, None)
    } else {
        (n, Some(start + len - n))
    };
    let cur = if len == 0 {
        0
    } else {
        word(start / 64) & (!0u64 << (start % 64))
    };
    Ones {
        word,
        n,
        start,
        wi: start / 64,
        cur,
        end: if len == 0 { 0 } else { end },
        wrap_end,
        wrapped: false,
    }
}

/// How many of the positions start, start + 1, ... (len of them, mod n) are set.
pub fn count_wrapping(word: impl Fn(usize) -> u64, n: usize, start: usize, len: usize) -> u32 {
    debug_assert!(len <= n && (start < n || len == 0));
    if start + len <= n {
        count_range(&word, start, start + len)
    } else {
        count_range(&word, start, n) + count_range(&word, 0, start + len - n)
    }
}

/// Set positions in a..b.
fn count_range(word: &impl Fn(usize) -> u64, a: usize, b: usize) -> u32 {
    if a >= b {
        return 0;
    }
    let (first, last) = (a / 64, (b - 1) / 64);
    let mut count = 0;
    for wi in first..=last {
        let mut w = word(wi);
        if wi == first {
            w &= !0u64 << (a % 64);
        }
        if wi == last {
            w &= !0u64 >> (63 - (b - 1) % 64);
        }
        count += w.count_ones();
    }
    count
}

/// The walk [`ones_wrapping`] returns.
pub struct Ones<W> {
    word: W,
    n: usize,
    start: usize,
    /// The word being walked, and its bits not yet returned.
    wi: usize,
    cur: u64,
    /// Where the stretch being walked ends (exclusive).
    end: usize,
    /// Where the stretch from 0 ends, while it is still to walk.
    wrap_end: Option<usize>,
    /// Walking the stretch from 0.
    wrapped: bool,
}

impl<W: Fn(usize) -> u64> Iterator for Ones<W> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        loop {
            if self.cur != 0 {
                let p = self.wi * 64 + self.cur.trailing_zeros() as usize;
                if p < self.end {
                    self.cur &= self.cur - 1;
                    return Some(if self.wrapped {
                        p + self.n - self.start
                    } else {
                        p - self.start
                    });
                }
            } else if (self.wi + 1) * 64 < self.end {
                self.wi += 1;
                self.cur = (self.word)(self.wi);
                continue;
            }
            // This stretch is done: on to the one from 0, if any.
            match self.wrap_end.take() {
                Some(e) if e > 0 => {
                    self.wrapped = true;
                    self.end = e;
                    self.wi = 0;
                    self.cur = (self.word)(0);
                }
                _ => {
                    self.cur = 0;
                    self.end = 0;
                    return None;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every window of every start over sets of awkward sizes, against a walk bit by bit.
    #[test]
    fn the_walks_agree_with_testing_each_position() {
        let mut rng = fastrand::Rng::with_seed(7);
        for n in [1, 5, 63, 64, 65, 112, 128, 130, 200] {
            for _ in 0..20 {
                let mut s = BitSet::new(n);
                let density = rng.f64();
                for i in 0..n {
                    s.set(i, rng.f64() < density);
                }
                for start in 0..n {
                    let len = rng.usize(0..=n);
                    let want: Vec<usize> =
                        (0..len).filter(|d| s.contains((start + d) % n)).collect();
                    let got: Vec<usize> = ones_wrapping(|i| s.word(i), n, start, len).collect();
                    assert_eq!(got, want, "n {n} start {start} len {len}");
                    assert_eq!(
                        count_wrapping(|i| s.word(i), n, start, len) as usize,
                        want.len()
                    );
                }
            }
        }
    }
}
