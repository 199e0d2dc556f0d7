//! Which CPUs of each LLC are idle, and whose SMT cores are wholly idle, as bitsets over
//! the CPUs' positions in the LLC's span: the cpumasks select_idle_cpu walks, so a scan
//! costs a word per 64 CPUs instead of a look at each CPU's runqueue. The Machine sets a
//! CPU's bits whenever its idleness may change (idle_cpu(): no task running or queued, no
//! wakeup pending).
//!
//! select_idle_core counts every core it meets on its way, so a walk that jumps to the
//! first wholly idle core must know how many cores lay before it. For an LLC whose SMT
//! lists split it into cores (each CPU's list holds itself, the lists of its members
//! agree, and none reaches outside the LLC, as on every kernel's machine), the positions
//! where a walk from each start first meets each core are kept as one more bitset per
//! start, and the count is a popcount.

use super::bitset::BitSet;
use super::machine::Topo;

/// One LLC's masks, over positions in its span (position i is the span's i-th CPU).
#[derive(Debug, Clone, Default)]
pub struct LlcMasks {
    /// idle_cpu() of each CPU.
    pub idle: BitSet,
    /// Each CPU's SMT siblings (itself included) are all idle: its core is wholly idle.
    pub core_idle: BitSet,
    /// Some SMT sibling of each CPU (itself included) is idle.
    pub core_has_idle: BitSet,
    /// When the span splits into cores: per start position, the positions where a walk
    /// from there meets a core for the first time.
    pub core_walks: Option<CoreWalks>,
}

/// How the walks of an LLC that splits into SMT cores meet its cores.
#[derive(Debug, Clone, Default)]
pub struct CoreWalks {
    /// Per start position, the positions where the walk meets a core first.
    pub first_met: Vec<BitSet>,
    /// The CPUs of the core at each position.
    pub core_size: Vec<u32>,
    /// Every core has this many CPUs; None when they differ.
    pub uniform_size: Option<u32>,
    /// Cores in the LLC.
    pub cores: u32,
}

impl CoreWalks {
    /// The cores a walk from `start` meets in its first `len` positions, and their CPUs
    /// (what select_idle_core probes).
    pub fn met(&self, start: usize, len: usize) -> (u32, u32) {
        let first = &self.first_met[start];
        let n = first.len();
        match self.uniform_size {
            Some(k) => {
                let cores = super::bitset::count_wrapping(|i| first.word(i), n, start, len);
                (cores, cores * k)
            }
            None => super::bitset::ones_wrapping(|i| first.word(i), n, start, len)
                .fold((0, 0), |(c, p), d| {
                    (c + 1, p + self.core_size[(start + d) % n])
                }),
        }
    }
}

/// The masks of every LLC, and where each CPU sits in them.
#[derive(Debug, Clone, Default)]
pub struct LlcIdle {
    /// Per CPU of the topology: its LLC's index in `llcs` and its position in the span.
    slot: Vec<(u32, u32)>,
    /// Per LLC, in the order of their ids.
    llcs: Vec<LlcMasks>,
    /// Per CPU: the CPUs whose SMT list holds it, whose core bits follow its idleness.
    in_smt_of: Vec<Vec<u32>>,
}

impl LlcIdle {
    /// Every CPU idle, as a machine starts.
    pub fn new(topo: &Topo) -> LlcIdle {
        let n = topo.nr_cpus as usize;
        let mut slot = vec![(0, 0); n];
        let mut llcs = Vec::with_capacity(topo.llc_cpus.len());
        for (li, span) in topo.llc_cpus.values().enumerate() {
            for (pos, &c) in span.iter().enumerate() {
                slot[c as usize] = (li as u32, pos as u32);
            }
            let mut all = BitSet::new(span.len());
            for pos in 0..span.len() {
                all.set(pos, true);
            }
            llcs.push(LlcMasks {
                idle: all.clone(),
                core_idle: all.clone(),
                core_has_idle: all,
                core_walks: if topo.smt_active {
                    core_walks(topo, span)
                } else {
                    None
                },
            });
        }
        let mut in_smt_of = vec![Vec::new(); n];
        for (c, sibs) in topo.smt.iter().enumerate() {
            for &s in sibs {
                if let Some(v) = in_smt_of.get_mut(s as usize) {
                    v.push(c as u32);
                }
            }
        }
        LlcIdle {
            slot,
            llcs,
            in_smt_of,
        }
    }

    /// The masks of `cpu`'s LLC (of LLC id 0 for a CPU beyond the topology, as
    /// Topo::llc_span); empty ones when there is no such LLC.
    pub fn of(&self, topo: &Topo, cpu: u32) -> &LlcMasks {
        static EMPTY: LlcMasks = LlcMasks {
            idle: BitSet::EMPTY,
            core_idle: BitSet::EMPTY,
            core_has_idle: BitSet::EMPTY,
            core_walks: None,
        };
        match self.slot.get(cpu as usize) {
            Some(&(li, _)) => &self.llcs[li as usize],
            None => topo
                .llc_cpus
                .keys()
                .position(|&l| l == topo.llc(cpu))
                .map_or(&EMPTY, |li| &self.llcs[li]),
        }
    }

    /// Where a CPU of the topology sits in its LLC's span; None beyond the topology.
    pub fn position(&self, cpu: u32) -> Option<usize> {
        self.slot.get(cpu as usize).map(|&(_, pos)| pos as usize)
    }

    /// The mirrored idle_cpu() of a CPU of the topology; false beyond it.
    pub fn is_idle(&self, cpu: u32) -> bool {
        self.idle_of(cpu).unwrap_or(false)
    }

    /// The mirrored idle_cpu() of a CPU of the topology; None beyond it.
    pub fn idle_of(&self, cpu: u32) -> Option<bool> {
        let &(li, pos) = self.slot.get(cpu as usize)?;
        Some(self.llcs[li as usize].idle.contains(pos as usize))
    }

    /// `cpu` is idle or not now: its bit, and the core bits of the CPUs whose SMT list
    /// holds it. CPUs beyond the topology are in no LLC's span.
    pub fn set_idle(&mut self, topo: &Topo, cpu: u32, idle: bool) {
        let Some(&(li, pos)) = self.slot.get(cpu as usize) else {
            return;
        };
        let masks = &mut self.llcs[li as usize];
        if masks.idle.contains(pos as usize) == idle {
            return;
        }
        masks.idle.set(pos as usize, idle);
        for &c in &self.in_smt_of[cpu as usize] {
            let sibs = &topo.smt[c as usize];
            let all = sibs.iter().all(|&s| self.is_idle(s));
            let any = sibs.iter().any(|&s| self.is_idle(s));
            let (lc, pc) = self.slot[c as usize];
            let m = &mut self.llcs[lc as usize];
            m.core_idle.set(pc as usize, all);
            m.core_has_idle.set(pc as usize, any);
        }
    }
}

#[cfg(test)]
impl LlcIdle {
    /// Every bit as `is_idle` (the runqueues) says it should be.
    pub fn agrees(&self, topo: &Topo, is_idle: impl Fn(u32) -> bool) -> bool {
        (0..topo.nr_cpus).all(|c| {
            let (li, pos) = self.slot[c as usize];
            let m = &self.llcs[li as usize];
            let sibs = &topo.smt[c as usize];
            m.idle.contains(pos as usize) == is_idle(c)
                && m.core_idle.contains(pos as usize) == sibs.iter().all(|&s| is_idle(s))
                && m.core_has_idle.contains(pos as usize) == sibs.iter().any(|&s| is_idle(s))
        })
    }
}

/// The walks of an LLC whose SMT lists split it into cores; None when they do not.
fn core_walks(topo: &Topo, span: &[u32]) -> Option<CoreWalks> {
    let n = span.len();
    let llc = topo.llc(*span.first()?);
    // Each position's core, named by its lowest position.
    let pos_of = |c: u32| span.binary_search(&c).ok();
    let mut core_of = vec![0usize; n];
    let mut core_size = vec![0u32; n];
    for (pos, &c) in span.iter().enumerate() {
        let sibs = &topo.smt[c as usize];
        let mut members = Vec::with_capacity(sibs.len());
        for &s in sibs {
            if topo.llc_of.get(s as usize) != Some(&llc) {
                return None;
            }
            members.push(pos_of(s)?);
        }
        let mut sorted = members.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != members.len() || !sorted.contains(&pos) {
            return None;
        }
        for &s in sibs {
            let mut theirs: Vec<usize> = topo.smt[s as usize]
                .iter()
                .map(|&x| pos_of(x))
                .collect::<Option<_>>()?;
            theirs.sort_unstable();
            if theirs != sorted {
                return None;
            }
        }
        core_of[pos] = sorted[0];
        core_size[pos] = sorted.len() as u32;
    }
    let mut first_met = Vec::with_capacity(n);
    let mut met = vec![false; n];
    for start in 0..n {
        met.iter_mut().for_each(|m| *m = false);
        let mut first = BitSet::new(n);
        for d in 0..n {
            let pos = (start + d) % n;
            if !std::mem::replace(&mut met[core_of[pos]], true) {
                first.set(pos, true);
            }
        }
        first_met.push(first);
    }
    let uniform_size = Some(core_size[0]).filter(|&k| core_size.iter().all(|&s| s == k));
    let cores = (0..n).filter(|&p| core_of[p] == p).count() as u32;
    Some(CoreWalks {
        first_met,
        core_size,
        uniform_size,
        cores,
    })
}
