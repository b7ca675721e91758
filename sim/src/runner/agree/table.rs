//! The agreement table as Markdown: a header that says how it was made,
//! and a row per file.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::{
    row::{Row, Tally},
    stats,
};
use crate::config::Expect;

/// How a table was made: what its header says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// When the run started (UTC, RFC 3339).
    pub date: String,
    /// The commit it ran (`git rev-parse HEAD`), and whether the tree had
    /// uncommitted changes.
    pub commit: String,
    /// The command line.
    pub command: String,
    /// The machine: its cores and load average at the start.
    pub machine: String,
    /// Simulated seeds per file.
    pub sim_seeds: u64,
    /// The budget the real runs were planned for, in seconds.
    pub budget_s: u64,
    /// What the simulated seeds took, in seconds.
    pub sim_s: u64,
    /// How the real runs' partitions were made
    /// (`chaos::netns::Network::partitions`); empty in an archive made
    /// before it was kept.
    #[serde(default)]
    pub partitions: String,
}

/// A tally as `k of n: r % (low–high %)`, over the seeds that count, with
/// those that proved nothing named.
fn rate(tally: Tally) -> String {
    let (low, high) = stats::wilson(tally.showing, tally.valid());
    let mut text = format!(
        "{} of {}: {:.1} % ({:.1}–{:.1} %)",
        tally.showing,
        tally.valid(),
        100.0 * tally.rate(),
        100.0 * low,
        100.0 * high
    );
    if tally.inconclusive > 0 {
        let _ = write!(text, "; {} proved nothing", tally.inconclusive);
    }
    text
}

/// The table, with `header`'s account of how it was made.
pub fn markdown(rows: &[Row], header: &Header) -> String {
    let real_s: u128 = rows.iter().map(|row| row.real_ms).sum::<u128>() / 1000;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Made by `sim agree` on {}, commit {}, with `{}`. Machine: {}. \
         Simulator: seeds 0..{} of each file ({} s). Real processes: seeds 0..K-1 \
         of each file, each with the simulator's fault schedule for that seed, one at \
         a time ({real_s} s; planned for a budget of {} s). A rate is the seeds \
         that show the violation the file is about, over the seeds that proved \
         something, with its 95 % Wilson interval; p is a two-sided Fisher test \
         of the two rates. A row agrees when the real verdict is the file's \
         expectation, every real run proved something, and p ≥ 0.05.\n",
        header.date,
        header.commit,
        header.command,
        header.machine,
        header.sim_seeds,
        header.sim_s,
        header.budget_s,
    );
    if !header.partitions.is_empty() {
        let _ = writeln!(out, "\nPartitions: {}.", header.partitions);
    }
    out.push_str(
        "| scenario | topology | server | expects | simulator | real | p | agrees | K, and why |\n",
    );
    out.push_str("|---|---|---|---|---|---|---|---|---|\n");
    for row in rows {
        let expects = match (row.expect, &row.property) {
            (Expect::Safe, Some(p)) => format!("safe ({p})"),
            (Expect::Safe, None) => "safe".to_owned(),
            (Expect::Violation, Some(p)) => format!("violation ({p})"),
            (Expect::Violation, None) => "violation".to_owned(),
        };
        let (real, p, agrees, plan) = match &row.not_run {
            Some(why) => (
                format!("not run: {}", why.replace('|', "\\|").replace('\n', " ")),
                "–".to_owned(),
                "–",
                "–".to_owned(),
            ),
            None => (
                rate(row.real),
                format!("{:.3}", row.fisher_p),
                if row.agrees() { "yes" } else { "**no**" },
                format!("{}: {}", row.real.seeds, row.plan),
            ),
        };
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {expects} | {} | {real} | {p} | {agrees} | {plan} |",
            row.name,
            row.topology,
            row.server,
            rate(row.simulated),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_prints_both_rates_with_their_intervals_and_the_test() {
        let mut row = Row {
            file: "scenarios/x.toml".into(),
            name: "x".into(),
            topology: "single".into(),
            server: "valkey-9.1".into(),
            expect: Expect::Violation,
            property: Some("lease-exclusion".into()),
            simulated: Tally {
                seeds: 1500,
                showing: 131,
                inconclusive: 0,
            },
            real: Tally {
                seeds: 33,
                showing: 5,
                inconclusive: 0,
            },
            plan: "why".into(),
            fisher_p: 1.0,
            real_ms: 12_000,
            not_run: None,
        };
        row.test();
        let header = Header {
            date: "2026-11-29T13:00:00Z".into(),
            commit: "abc".into(),
            command: "sim agree x.toml".into(),
            machine: "2 cores".into(),
            sim_seeds: 1500,
            budget_s: 600,
            sim_s: 40,
            partitions: "iptables".into(),
        };
        let text = markdown(&[row], &header);
        assert!(
            text.contains(
                "| `x` | single | valkey-9.1 | violation (lease-exclusion) | 131 of 1500: 8.7 % (7.4–10.3 %) | 5 of 33: 15.2 % (6.7–30.9 %) | 0.207 | yes | 33: why |"
            ),
            "{text}"
        );
        assert!(
            text.contains("commit abc") && text.contains("(12 s;"),
            "{text}"
        );
    }
}
