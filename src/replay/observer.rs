//! Observers of replay's decisions: each gets every policy's decision for every replayed
//! wakeup, and writes it out its own way, so the replay loop does not know its outputs.

use std::io::Write;

use crate::metrics::Replayed;
use crate::wakeup::sis::Decision;

/// Sees every decision of every policy.
pub trait DecisionObserver {
    /// Whether the decisions at `now` should carry their steps in words (costly: asked
    /// for one wakeup at a time).
    fn wants_steps(&self, _now: u64) -> bool {
        false
    }

    /// `policy` decided `d` for `w`; `affine_steps` are the target's steps in words when
    /// [`wants_steps`](DecisionObserver::wants_steps) asked for them.
    fn decision(
        &mut self,
        w: &Replayed,
        policy: &str,
        d: &Decision,
        affine_steps: &[String],
    ) -> std::io::Result<()>;

    /// The replay ended.
    fn finish(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `--decisions F.csv`: one row per wakeup and policy.
pub struct CsvDecisions<W: Write> {
    out: W,
    header_written: bool,
}

impl<W: Write> CsvDecisions<W> {
    pub const HEADER: &'static str =
        "ts_ns,pid,waker_cpu,prev_cpu,recorded_cpu,policy,cpu,path,probed,search_ns";

    pub fn new(out: W) -> CsvDecisions<W> {
        CsvDecisions {
            out,
            header_written: false,
        }
    }

    fn header(&mut self) -> std::io::Result<()> {
        if !self.header_written {
            writeln!(self.out, "{}", Self::HEADER)?;
            self.header_written = true;
        }
        Ok(())
    }
}

impl<W: Write> DecisionObserver for CsvDecisions<W> {
    fn decision(
        &mut self,
        w: &Replayed,
        policy: &str,
        d: &Decision,
        _: &[String],
    ) -> std::io::Result<()> {
        self.header()?;
        writeln!(
            self.out,
            "{},{},{},{},{},{},{},{},{},{}",
            w.now,
            w.pid,
            w.waker_cpu,
            w.prev,
            w.recorded_cpu,
            policy,
            d.cpu,
            d.path.name(),
            d.probed,
            d.search_ns
        )
    }

    fn finish(&mut self) -> std::io::Result<()> {
        self.header()?;
        self.out.flush()
    }
}

/// `--explain TS_NS`: every policy's steps for the wakeup at one timestamp.
#[derive(Debug, Default)]
pub struct Explainer {
    pub ts: u64,
    /// Policy → steps, for each explained wakeup.
    pub explained: Vec<(String, Vec<String>)>,
}

impl Explainer {
    pub fn at(ts: u64) -> Explainer {
        Explainer {
            ts,
            explained: Vec::new(),
        }
    }
}

impl DecisionObserver for Explainer {
    fn wants_steps(&self, now: u64) -> bool {
        now == self.ts
    }

    fn decision(
        &mut self,
        w: &Replayed,
        policy: &str,
        d: &Decision,
        affine_steps: &[String],
    ) -> std::io::Result<()> {
        if w.now != self.ts {
            return Ok(());
        }
        let mut steps = vec![format!(
            "pid {} woken on CPU {}, prev {}, target {}, kernel chose {}",
            w.pid, w.waker_cpu, w.prev, w.target, w.recorded_cpu
        )];
        steps.extend(affine_steps.iter().cloned());
        steps.extend(d.steps.iter().cloned());
        self.explained.push((policy.to_string(), steps));
        Ok(())
    }
}
