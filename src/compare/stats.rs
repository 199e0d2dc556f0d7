//! Mean, standard deviation and t-tests over per-window values, to tell whether a
//! difference between two arms is larger than the trace's own variation: paired when
//! both arms were replayed over the same windows of one trace (the workload's own swing
//! from window to window then cancels), Welch's when they come from different traces.

/// Mean and sample standard deviation.
pub fn mean_std(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let m = v.iter().sum::<f64>() / n;
    if v.len() < 2 {
        return (m, 0.0);
    }
    let var = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0);
    (m, var.sqrt())
}

/// Two-sided 5 % critical values of Student's t for 1..=30 degrees of freedom.
const T_CRIT: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// Welch's t-test at 5 %, two-sided: (t, Welch–Satterthwaite df, significant). Degrees of
/// freedom are rounded down for the table; above 30 the normal 1.96 is used.
pub fn welch(a: &[f64], b: &[f64]) -> (f64, f64, bool) {
    if a.len() < 2 || b.len() < 2 {
        return (0.0, 0.0, false);
    }
    let (ma, sa) = mean_std(a);
    let (mb, sb) = mean_std(b);
    let (va, vb) = (sa * sa / a.len() as f64, sb * sb / b.len() as f64);
    if va + vb == 0.0 {
        // No variation at all: any difference is beyond the noise.
        return (f64::INFINITY, f64::INFINITY, ma != mb);
    }
    let t = (ma - mb) / (va + vb).sqrt();
    let df =
        (va + vb).powi(2) / (va * va / (a.len() as f64 - 1.0) + vb * vb / (b.len() as f64 - 1.0));
    (t, df, t.abs() > critical(df))
}

/// The two-sided 5 % critical value of Student's t at `df` degrees of freedom (rounded
/// down); the normal 1.96 above 30.
fn critical(df: f64) -> f64 {
    if df >= 31.0 {
        1.96
    } else {
        T_CRIT[(df.floor().max(1.0) as usize) - 1]
    }
}

/// The 95 % confidence interval of the mean of b − a over `(a_i, b_i)` pairs; None with
/// fewer than two.
pub fn paired_interval(pairs: &[(f64, f64)]) -> Option<(f64, f64)> {
    if pairs.len() < 2 {
        return None;
    }
    let d: Vec<f64> = pairs.iter().map(|(a, b)| b - a).collect();
    let (md, sd) = mean_std(&d);
    let half = critical((d.len() - 1) as f64) * sd / (d.len() as f64).sqrt();
    Some((md - half, md + half))
}

/// The 95 % confidence interval of mean(b) − mean(a) for independent samples (Welch).
pub fn welch_interval(a: &[f64], b: &[f64]) -> Option<(f64, f64)> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (ma, sa) = mean_std(a);
    let (mb, sb) = mean_std(b);
    let (va, vb) = (sa * sa / a.len() as f64, sb * sb / b.len() as f64);
    let d = mb - ma;
    if va + vb == 0.0 {
        return Some((d, d));
    }
    let df =
        (va + vb).powi(2) / (va * va / (a.len() as f64 - 1.0) + vb * vb / (b.len() as f64 - 1.0));
    let half = critical(df) * (va + vb).sqrt();
    Some((d - half, d + half))
}

/// Paired t-test at 5 %, two-sided, over `(a_i, b_i)` pairs: (t of b − a, df,
/// significant).
pub fn paired(pairs: &[(f64, f64)]) -> (f64, f64, bool) {
    if pairs.len() < 2 {
        return (0.0, 0.0, false);
    }
    let d: Vec<f64> = pairs.iter().map(|(a, b)| b - a).collect();
    let (md, sd) = mean_std(&d);
    let df = (d.len() - 1) as f64;
    if sd == 0.0 {
        // Every window moved by the same amount: any difference is beyond the noise.
        return (f64::INFINITY, df, md != 0.0);
    }
    let t = md / (sd / (d.len() as f64).sqrt());
    (t, df, t.abs() > critical(df))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_sample_std() {
        let (m, s) = mean_std(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert!((m - 5.0).abs() < 1e-12);
        assert!((s - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn welch_by_hand() {
        // a: mean 10, var 1 (n 5); b: mean 12, var 1 (n 5): t = −2/√0.4 = −3.162, df 8,
        // critical 2.306: significant.
        let a = [9.0, 10.0, 11.0, 9.0, 11.0];
        let b = [11.0, 12.0, 13.0, 11.0, 13.0];
        let (t, df, sig) = welch(&a, &b);
        assert!((t + 2.0 / 0.4f64.sqrt()).abs() < 1e-9, "{t}");
        assert!((df - 8.0).abs() < 1e-9);
        assert!(sig);
        // Means 0.5 apart with the same spread: t = −0.79, not significant.
        let c = [9.5, 10.5, 11.5, 9.5, 11.5];
        assert!(!welch(&a, &c).2);
    }

    #[test]
    fn paired_by_hand() {
        // The windows swing 10..50 but b is a + 1 ± 0.1 in each: differences 1.1, 0.9,
        // 1.0, 1.1, 0.9, mean 1.0, sd 0.1, t = 1.0/(0.1/√5) = 22.36, df 4: significant,
        // where Welch's, against the swing, is not.
        let a = [10.0, 20.0, 30.0, 40.0, 50.0];
        let b = [11.1, 20.9, 31.0, 41.1, 50.9];
        let pairs: Vec<(f64, f64)> = a.iter().copied().zip(b.iter().copied()).collect();
        let (t, df, sig) = paired(&pairs);
        assert!((t - 1.0 / (0.1 / 5f64.sqrt())).abs() < 1e-6, "{t}");
        assert_eq!(df, 4.0);
        assert!(sig);
        assert!(!welch(&a, &b).2);
        // b lower in 3 of 5 windows and higher in 2, by the same amounts: no effect.
        let c = [9.0, 21.0, 29.0, 41.0, 49.0];
        let pairs: Vec<(f64, f64)> = a.iter().copied().zip(c.iter().copied()).collect();
        assert!(!paired(&pairs).2);
        assert!(!paired(&[(1.0, 2.0)]).2, "one pair says nothing");
        // The interval of the first case: 1.0 ± 2.776 · 0.1/√5 (t at 4 df).
        let pairs: Vec<(f64, f64)> = a.iter().copied().zip(b.iter().copied()).collect();
        let (lo, hi) = paired_interval(&pairs).unwrap();
        let half = 2.776 * 0.1 / 5f64.sqrt();
        assert!((lo - (1.0 - half)).abs() < 1e-9 && (hi - (1.0 + half)).abs() < 1e-9);
        // Welch's interval of the hand-worked case above: b − a = 2 ± 2.306 · √0.4 (8 df).
        let (lo, hi) = welch_interval(
            &[9.0, 10.0, 11.0, 9.0, 11.0],
            &[11.0, 12.0, 13.0, 11.0, 13.0],
        )
        .unwrap();
        assert!((lo - (2.0 - 2.306 * 0.4f64.sqrt())).abs() < 1e-9, "{lo}");
        assert!((hi - (2.0 + 2.306 * 0.4f64.sqrt())).abs() < 1e-9, "{hi}");
    }
}
