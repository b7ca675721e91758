//! The statistics of the agreement table: Wilson score intervals for a
//! rate, Fisher's exact test for two rates, and how many real runs a file
//! needs.

/// The normal quantile of a two-sided 95 % interval.
const Z95: f64 = 1.959_963_984_540_054;

/// The Wilson score interval (95 %) of `k` successes in `n` trials, as
/// fractions; `(0, 1)` for no trials.
pub fn wilson(k: u64, n: u64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (k, n) = (k as f64, n as f64);
    let p = k / n;
    let z2 = Z95 * Z95;
    let denominator = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denominator;
    let half = Z95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denominator;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// `ln(n!)` for every `n` up to `max`.
fn ln_factorials(max: u64) -> Vec<f64> {
    let mut table = Vec::with_capacity(max as usize + 1);
    let mut sum = 0.0;
    table.push(0.0);
    for i in 1..=max {
        sum += (i as f64).ln();
        table.push(sum);
    }
    table
}

/// Fisher's exact test, two-sided: the probability, with both rows' and
/// both columns' totals fixed, of a table at most as likely as
/// `[[a, b], [c, d]]` (row 1: `a` of `a + b`; row 2: `c` of `c + d`).
/// Summed in logarithms, so a row of thousands does not overflow.
pub fn fisher(a: u64, b: u64, c: u64, d: u64) -> f64 {
    let n = a + b + c + d;
    let row = a + b;
    let column = a + c;
    let ln = ln_factorials(n);
    let at = |x: u64| -> f64 {
        let f = |i: u64| ln[i as usize];
        // ln of C(row, x) C(n - row, column - x) / C(n, column)
        f(row) - f(x) - f(row - x) + f(n - row)
            - f(column - x)
            - f(n - row - column + x)
            - (f(n) - f(column) - f(n - column))
    };
    let observed = at(a);
    let low = column.saturating_sub(n - row);
    let high = row.min(column);
    let p: f64 = (low..=high)
        .map(at)
        // A relative tolerance, as R's fisher.test, so that tables exactly
        // as likely as the observed one are not lost to rounding.
        .filter(|ln_p| *ln_p <= observed + 1e-7)
        .map(f64::exp)
        .sum();
    p.min(1.0)
}

/// Real runs an unsafe file needs for a real rate equal to the simulated
/// `rate` to show at least once with probability `confidence`:
/// the least `k` with `1 - (1 - rate)^k >= confidence`. `None` when the
/// simulator never showed it (no rate to plan from).
pub fn runs_to_show(rate: f64, confidence: f64) -> Option<u64> {
    if rate <= 0.0 {
        return None;
    }
    if rate >= 1.0 {
        return Some(1);
    }
    let k = ((1.0 - confidence).ln() / (1.0 - rate).ln()).ceil();
    Some(k.max(1.0) as u64)
}

/// The probability that `runs` real runs at `rate` show it at least once.
pub fn chance_to_show(rate: f64, runs: u64) -> f64 {
    1.0 - (1.0 - rate).powi(i32::try_from(runs).unwrap_or(i32::MAX))
}

/// The rate that `runs` runs with no violation rule out (95 %): the upper
/// end of the one-sided interval, `1 - 0.05^(1/runs)`.
pub fn ruled_out_above(runs: u64) -> f64 {
    if runs == 0 {
        return 1.0;
    }
    1.0 - 0.05_f64.powf(1.0 / runs as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, within: f64) -> bool {
        (a - b).abs() <= within
    }

    #[test]
    fn wilson_matches_published_values() {
        // 5 of 33 and 131 of 1,500 (R: prop.test(correct = FALSE)$conf.int).
        let (low, high) = wilson(5, 33);
        assert!(
            close(low, 0.0666, 0.0005) && close(high, 0.3090, 0.0005),
            "{low} {high}"
        );
        let (low, high) = wilson(131, 1500);
        assert!(
            close(low, 0.0740, 0.0005) && close(high, 0.1027, 0.0005),
            "{low} {high}"
        );
        // None in 20: the interval still reaches 16.1 %.
        let (low, high) = wilson(0, 20);
        assert!(low == 0.0 && close(high, 0.1611, 0.0005), "{low} {high}");
        assert_eq!(wilson(0, 0), (0.0, 1.0));
    }

    #[test]
    fn fisher_matches_published_values() {
        // The tea-tasting table: 3 of 4 against 1 of 4, p = 0.4857.
        assert!(close(fisher(3, 1, 1, 3), 0.4857, 0.0001));
        // 5 of 33 against 131 of 1,500: p = 0.207 (R: fisher.test).
        assert!(close(fisher(5, 28, 131, 1369), 0.207, 0.001));
        // 10 of 10 against 0 of 10.
        assert!(close(fisher(10, 0, 0, 10), 1.0825e-5, 1e-8));
        // Identical rates: 1.
        assert!(close(fisher(0, 20, 0, 1500), 1.0, 1e-12));
        assert!(close(fisher(2, 8, 20, 80), 1.0, 1e-9));
    }

    #[test]
    fn runs_to_show_a_rate_at_95_percent() {
        // 8.7 %: 33 runs (32 show it with 94.6 % only).
        assert_eq!(runs_to_show(0.0873, 0.95), Some(33));
        assert!(chance_to_show(0.0873, 33) >= 0.95);
        assert!(chance_to_show(0.0873, 32) < 0.95);
        assert_eq!(runs_to_show(1.0, 0.95), Some(1));
        assert_eq!(runs_to_show(0.5, 0.95), Some(5));
        assert_eq!(runs_to_show(0.0, 0.95), None);
    }

    #[test]
    fn no_violation_in_k_runs_rules_out_rates_above_the_bound() {
        assert!(close(ruled_out_above(20), 0.1391, 0.0005));
        assert!(close(ruled_out_above(3), 0.6316, 0.0005));
        assert_eq!(ruled_out_above(0), 1.0);
    }
}
