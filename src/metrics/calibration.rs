//! Fits the search-time model (a fixed entry cost plus a cost per runqueue probed) to
//! measured select_task_rq_fair durations, by ordinary least squares over the wakeups
//! where the traced kernel's model agreed with the kernel's choice (so its count of
//! probed runqueues is the kernel's likely count too).

use serde::Serialize;

/// The fitted line: duration = entry_ns + probe_ns · runqueues probed.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Fit {
    /// Wakeups the line was fitted to.
    pub samples: u64,
    /// Intercept: ns spent whatever the scan, in select_task_rq_fair itself.
    pub entry_ns: f64,
    /// Slope: ns per runqueue probed.
    pub probe_ns: f64,
    /// Share of the variance of the durations the line explains.
    pub r2: f64,
}

/// Running sums for y = a + b·x.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    n: f64,
    sx: f64,
    sy: f64,
    sxx: f64,
    sxy: f64,
    syy: f64,
}

impl Samples {
    /// One wakeup: runqueues the model probed, and the measured duration (ns).
    pub fn add(&mut self, probed: u32, ns: u64) {
        let (x, y) = (probed as f64, ns as f64);
        self.n += 1.0;
        self.sx += x;
        self.sy += y;
        self.sxx += x * x;
        self.sxy += x * y;
        self.syy += y * y;
    }

    /// Adds another set's sums.
    pub fn merge(&mut self, o: &Samples) {
        self.n += o.n;
        self.sx += o.sx;
        self.sy += o.sy;
        self.sxx += o.sxx;
        self.sxy += o.sxy;
        self.syy += o.syy;
    }

    /// None with fewer than two samples or when every sample probed the same count (the
    /// slope is then undetermined).
    pub fn fit(&self) -> Option<Fit> {
        let n = self.n;
        let var_x = n * self.sxx - self.sx * self.sx;
        if n < 2.0 || var_x <= 0.0 {
            return None;
        }
        let b = (n * self.sxy - self.sx * self.sy) / var_x;
        let a = (self.sy - b * self.sx) / n;
        let var_y = n * self.syy - self.sy * self.sy;
        let cov = n * self.sxy - self.sx * self.sy;
        let r2 = if var_y > 0.0 {
            cov * cov / (var_x * var_y)
        } else {
            1.0
        };
        Some(Fit {
            samples: n as u64,
            entry_ns: a,
            probe_ns: b,
            r2,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_a_line_and_reports_its_spread() {
        let mut s = Samples::default();
        // 800 ns + 120 ns per probe, exactly.
        for p in [0u32, 1, 2, 3, 8, 8, 4] {
            s.add(p, 800 + 120 * p as u64);
        }
        let f = s.fit().unwrap();
        assert!((f.entry_ns - 800.0).abs() < 1e-6 && (f.probe_ns - 120.0).abs() < 1e-6);
        assert!((f.r2 - 1.0).abs() < 1e-9);
        // Noise around the same line: slope still near, r2 below 1.
        let mut s = Samples::default();
        for (p, d) in [
            (0, 700),
            (0, 900),
            (4, 1180),
            (4, 1380),
            (8, 1660),
            (8, 1860),
        ] {
            s.add(p, d);
        }
        let f = s.fit().unwrap();
        assert!((f.probe_ns - 120.0).abs() < 1e-6 && (f.entry_ns - 800.0).abs() < 1e-6);
        assert!(f.r2 < 1.0 && f.r2 > 0.8);
        // One probe count only: no slope.
        let mut s = Samples::default();
        s.add(3, 10);
        s.add(3, 20);
        assert!(s.fit().is_none());
    }
}
