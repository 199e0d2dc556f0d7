//! Observers of replay's decisions: each gets every policy's decision for every replayed
//! wakeup, and writes it out its own way, so the replay loop does not know its outputs.

use std::io::Write;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int32Array, RecordBatch, StringArray, UInt32Array, UInt64Array};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;

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
    /// False in a dataset partitioned by policy, whose path holds it.
    with_policy: bool,
}

impl<W: Write> CsvDecisions<W> {
    /// The CSV's first line: wakeup time (ns), wakee, waker's CPU, prev_cpu, the kernel's
    /// CPU, then the policy, its CPU, its search path, runqueues probed and search time
    /// (ns), then what every policy's search started from: the target, the step of
    /// select_task_rq_fair that chose it, and the waker's and wakee's flips wake_wide
    /// compared (a miss is told from them: wake_wide's edge, or wake_affine's loads);
    /// last, the CPUs the policy let select_idle_cpu examine (empty where the search
    /// ended before it).
    pub const HEADER: &'static str = "ts_ns,pid,waker_cpu,prev_cpu,recorded_cpu,policy,cpu,path,\
         probed,search_ns,target,stage,waker_flips,wakee_flips,budget";

    /// Writes to `out`; the header goes out with the first row, or at the end if none.
    pub fn new(out: W) -> CsvDecisions<W> {
        CsvDecisions {
            out,
            header_written: false,
            with_policy: true,
        }
    }

    /// The same rows without the policy column, for a file of one policy's decisions.
    pub fn without_policy(out: W) -> CsvDecisions<W> {
        CsvDecisions {
            with_policy: false,
            ..CsvDecisions::new(out)
        }
    }

    /// Rows that continue another writer's: no header.
    pub fn continuing(&mut self) {
        self.header_written = true;
    }

    /// The output.
    pub fn into_inner(self) -> W {
        self.out
    }

    fn header(&mut self) -> std::io::Result<()> {
        if !self.header_written {
            let header = if self.with_policy {
                Self::HEADER.to_string()
            } else {
                Self::HEADER.replace(",policy,", ",")
            };
            writeln!(self.out, "{header}")?;
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
        write!(
            self.out,
            "{},{},{},{},{},",
            w.now, w.pid, w.waker_cpu, w.prev, w.recorded_cpu
        )?;
        if self.with_policy {
            write!(self.out, "{policy},")?;
        }
        write!(
            self.out,
            "{},{},{},{},{},{},{},{},",
            d.cpu,
            d.path.name(),
            d.probed,
            d.search_ns,
            w.target,
            w.affine_stage,
            w.flips.0,
            w.flips.1
        )?;
        match d.budget {
            Some(b) => writeln!(self.out, "{b}"),
            None => writeln!(self.out),
        }
    }

    fn finish(&mut self) -> std::io::Result<()> {
        self.header()?;
        self.out.flush()
    }
}

/// Where `--decisions` goes: CSV, or Parquet for files named `*.parquet`.
pub enum DecisionsOut {
    /// One CSV row per wakeup and policy, header [`CsvDecisions::HEADER`].
    Csv(Box<dyn Write + Send>),
    /// The same rows and columns as Parquet, typed, for notebooks and query engines.
    Parquet(Box<dyn Write + Send>),
    /// Another writer of the rows, e.g. a dataset's partitions by policy (one-pass
    /// replays only: time slices merge their rows as CSV or Parquet).
    Observer(Box<dyn DecisionObserver + Send>),
}

/// Rows buffered before they are written as one Parquet row group's batch.
const PARQUET_BATCH_ROWS: usize = 1 << 16;

/// `--decisions F.parquet`: the CSV's columns, typed, in batches of
/// `PARQUET_BATCH_ROWS` rows (65536); the file's footer is written when the replay ends.
pub struct ParquetDecisions<W: Write + Send> {
    writer: Option<ArrowWriter<W>>,
    schema: Arc<Schema>,
    ts_ns: Vec<u64>,
    pid: Vec<i32>,
    waker_cpu: Vec<u32>,
    prev_cpu: Vec<u32>,
    recorded_cpu: Vec<u32>,
    /// None in a dataset partitioned by policy, whose path holds it.
    policy: Option<Vec<String>>,
    cpu: Vec<u32>,
    path: Vec<&'static str>,
    probed: Vec<u32>,
    search_ns: Vec<u64>,
    target: Vec<u32>,
    stage: Vec<&'static str>,
    waker_flips: Vec<u32>,
    wakee_flips: Vec<u32>,
    budget: Vec<Option<u32>>,
}

impl<W: Write + Send> ParquetDecisions<W> {
    /// A writer of decisions into `out`.
    pub fn new(out: W) -> std::io::Result<ParquetDecisions<W>> {
        Self::with_columns(out, true)
    }

    /// The same rows without the policy column, for a file of one policy's decisions.
    pub fn without_policy(out: W) -> std::io::Result<ParquetDecisions<W>> {
        Self::with_columns(out, false)
    }

    fn with_columns(out: W, with_policy: bool) -> std::io::Result<ParquetDecisions<W>> {
        let u32f = |n| Field::new(n, DataType::UInt32, false);
        let mut fields = vec![
            Field::new("ts_ns", DataType::UInt64, false),
            Field::new("pid", DataType::Int32, false),
            u32f("waker_cpu"),
            u32f("prev_cpu"),
            u32f("recorded_cpu"),
        ];
        if with_policy {
            fields.push(Field::new("policy", DataType::Utf8, false));
        }
        fields.extend([
            u32f("cpu"),
            Field::new("path", DataType::Utf8, false),
            u32f("probed"),
            Field::new("search_ns", DataType::UInt64, false),
            u32f("target"),
            Field::new("stage", DataType::Utf8, false),
            u32f("waker_flips"),
            u32f("wakee_flips"),
            Field::new("budget", DataType::UInt32, true),
        ]);
        let schema = Arc::new(Schema::new(fields));
        let writer =
            ArrowWriter::try_new(out, schema.clone(), None).map_err(std::io::Error::other)?;
        Ok(ParquetDecisions {
            writer: Some(writer),
            schema,
            ts_ns: Vec::new(),
            pid: Vec::new(),
            waker_cpu: Vec::new(),
            prev_cpu: Vec::new(),
            recorded_cpu: Vec::new(),
            policy: with_policy.then(Vec::new),
            cpu: Vec::new(),
            path: Vec::new(),
            probed: Vec::new(),
            search_ns: Vec::new(),
            target: Vec::new(),
            stage: Vec::new(),
            waker_flips: Vec::new(),
            wakee_flips: Vec::new(),
            budget: Vec::new(),
        })
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.ts_ns.is_empty() {
            return Ok(());
        }
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(UInt64Array::from(std::mem::take(&mut self.ts_ns))),
            Arc::new(Int32Array::from(std::mem::take(&mut self.pid))),
            Arc::new(UInt32Array::from(std::mem::take(&mut self.waker_cpu))),
            Arc::new(UInt32Array::from(std::mem::take(&mut self.prev_cpu))),
            Arc::new(UInt32Array::from(std::mem::take(&mut self.recorded_cpu))),
        ];
        if let Some(p) = self.policy.as_mut() {
            columns.push(Arc::new(StringArray::from(std::mem::take(p))));
        }
        columns.extend([
            Arc::new(UInt32Array::from(std::mem::take(&mut self.cpu))) as ArrayRef,
            Arc::new(StringArray::from(std::mem::take(&mut self.path))),
            Arc::new(UInt32Array::from(std::mem::take(&mut self.probed))),
            Arc::new(UInt64Array::from(std::mem::take(&mut self.search_ns))),
            Arc::new(UInt32Array::from(std::mem::take(&mut self.target))),
            Arc::new(StringArray::from(std::mem::take(&mut self.stage))),
            Arc::new(UInt32Array::from(std::mem::take(&mut self.waker_flips))),
            Arc::new(UInt32Array::from(std::mem::take(&mut self.wakee_flips))),
            Arc::new(UInt32Array::from(std::mem::take(&mut self.budget))),
        ]);
        let batch = RecordBatch::try_new(self.schema.clone(), columns)
            .expect("one array per column of the schema");
        match self.writer.as_mut() {
            Some(w) => w.write(&batch).map_err(std::io::Error::other),
            None => Ok(()),
        }
    }
}

impl<W: Write + Send> ParquetDecisions<W> {
    /// Writes the rows still buffered and the footer, and gives back the output.
    pub fn into_inner(mut self) -> std::io::Result<W> {
        self.flush()?;
        let w = self
            .writer
            .take()
            .ok_or_else(|| std::io::Error::other("the decisions were already closed"))?;
        w.into_inner().map_err(std::io::Error::other)
    }
}

impl<W: Write + Send> DecisionObserver for ParquetDecisions<W> {
    fn decision(
        &mut self,
        w: &Replayed,
        policy: &str,
        d: &Decision,
        _: &[String],
    ) -> std::io::Result<()> {
        self.ts_ns.push(w.now);
        self.pid.push(w.pid);
        self.waker_cpu.push(w.waker_cpu);
        self.prev_cpu.push(w.prev);
        self.recorded_cpu.push(w.recorded_cpu);
        if let Some(p) = self.policy.as_mut() {
            p.push(policy.to_string());
        }
        self.cpu.push(d.cpu);
        self.path.push(d.path.name());
        self.probed.push(d.probed);
        self.search_ns.push(d.search_ns);
        self.target.push(w.target);
        self.stage.push(w.affine_stage);
        self.waker_flips.push(w.flips.0);
        self.wakee_flips.push(w.flips.1);
        self.budget.push(d.budget);
        if self.ts_ns.len() >= PARQUET_BATCH_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    fn finish(&mut self) -> std::io::Result<()> {
        self.flush()?;
        match self.writer.take() {
            Some(w) => w.close().map(drop).map_err(std::io::Error::other),
            None => Ok(()),
        }
    }
}

/// `--explain TS_NS`: every policy's steps for the wakeup at one timestamp.
#[derive(Debug, Default)]
pub struct Explainer {
    /// Trace time (ns) of the sched_waking to explain.
    pub ts: u64,
    /// Policy → steps, for each explained wakeup.
    pub explained: Vec<(String, Vec<String>)>,
    /// The replayed wakeups nearest to `ts` before and after it, for a `ts` that
    /// matches none: the sched_waking times to ask for instead.
    pub nearest: (Option<u64>, Option<u64>),
}

impl Explainer {
    /// Explains the wakeups whose sched_waking is at `ts` ns.
    pub fn at(ts: u64) -> Explainer {
        Explainer {
            ts,
            ..Explainer::default()
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
        // Wakeups are decided in the order their searches ran, not always in the order
        // of their sched_waking: the nearest are the latest before and earliest after.
        if w.now < self.ts {
            self.nearest.0 = self.nearest.0.max(Some(w.now));
            return Ok(());
        }
        if w.now > self.ts {
            self.nearest.1 = Some(self.nearest.1.map_or(w.now, |t| t.min(w.now)));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::windows::Slot;
    use crate::wakeup::sis::Path;

    fn replayed(now: u64) -> Replayed {
        Replayed {
            now,
            pid: 5,
            waker_cpu: 0,
            prev: 1,
            target: 0,
            recorded_cpu: 1,
            ipi: false,
            affine_stage: "wake_affine_idle",
            flips: (0, 0),
            span_idle: true,
            slot: Slot {
                index: 0,
                start_ns: 0,
            },
            kernel_idle_scan: None,
            recorded_state: crate::metrics::CpuSeen::Idle,
        }
    }

    /// Searches are decided in the order they ran, which a held-back probe can make
    /// differ from their sched_waking order: the nearest before and after `ts` are still
    /// the latest before and the earliest after.
    #[test]
    fn the_nearest_wakeups_do_not_depend_on_the_order_they_were_decided_in() {
        let d = Decision {
            cpu: 1,
            path: Path::Prev,
            probed: 0,
            search_ns: 0,
            counters: Default::default(),
            steps: Vec::new(),
            cleared_idle_cores: false,
            budget: None,
        };
        let mut x = Explainer::at(130);
        for now in [120, 100, 200, 150, 90] {
            x.decision(&replayed(now), "sis_util", &d, &[]).unwrap();
        }
        assert!(x.explained.is_empty());
        assert_eq!(x.nearest, (Some(120), Some(150)));
        x.decision(&replayed(130), "sis_util", &d, &[]).unwrap();
        assert_eq!(x.explained.len(), 1);
    }
}
