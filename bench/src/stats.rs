//! The figures the bench binaries print: medians, same-run ratios with
//! their spread, and the machine's load while they ran.

/// The median of `values` (NaN for none).
pub fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.collect();
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => f64::midpoint(values[n / 2 - 1], values[n / 2]),
    }
}

/// `1.23x [1.10, 1.40]`: the median of per-round ratios, and their range.
pub fn spread(ratios: &[f64]) -> String {
    let min = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let max = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!(
        "{:.2}x [{min:.2}, {max:.2}]",
        median(ratios.iter().copied())
    )
}

/// The 1, 5 and 15 minute load averages, as `/proc/loadavg` gives them.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unreadable".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_none() {
        assert_eq!(median([3.0, 1.0, 2.0].into_iter()), 2.0);
        assert_eq!(median([4.0, 1.0, 2.0, 3.0].into_iter()), 2.5);
        assert!(median(std::iter::empty()).is_nan());
        assert_eq!(spread(&[1.0, 2.0, 4.0]), "2.00x [1.00, 4.00]");
    }
}
