//! Partitions as iptables rules, in the run's own network namespace
//! ([`super::netns`]).
//!
//! Every link of a run passes a proxy of the controller's with a port of
//! its own (each client has its own proxy to each node; each node its
//! replication and bus proxies), and every node and sentinel connects out
//! from a loopback address of its own (`bind-source-addr`). So the links a
//! partition cuts ([`super::cut`]'s acts) are rules on the proxy's port,
//! narrowed to one source address where the act is one node's own
//! connections: what is sent toward the port (`up`) matches
//! `--dport`, what comes back (`down`) `--sport`. The proxy then holds
//! nothing; the kernel drops the packets and retransmits them as it would
//! between two hosts.
//!
//! Each fault's rules carry a comment naming it, so that its end deletes
//! exactly its own (another fault may hold the same link) and its
//! counters say how many packets it dropped: the evidence that the
//! partition cut something.

use std::{net::IpAddr, process::Stdio};

use tokio::io::AsyncWriteExt;

use super::{ChaosError, wire::mono_ns};

/// Which way of a link a rule drops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Way {
    /// What the dialling side sends toward the port.
    Up,
    /// What comes back from the port.
    Down,
}

/// One `DROP` rule: the packets of the links through `port` going `way`,
/// from (up) or to (down) `peer` only when it is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Rule {
    pub port: u16,
    pub way: Way,
    pub peer: Option<IpAddr>,
}

impl Rule {
    /// The rules that drop what goes toward the link on `port` (`up`) and
    /// what comes back (`down`), from and to `peer` alone when it is set.
    pub(super) fn link(port: u16, peer: Option<IpAddr>, up: bool, down: bool) -> Vec<Self> {
        [(up, Way::Up), (down, Way::Down)]
            .into_iter()
            .filter(|(on, _)| *on)
            .map(|(_, way)| Self { port, way, peer })
            .collect()
    }

    /// The rule's iptables specification, after the chain, tagged `tag`.
    fn spec(self, tag: &str) -> String {
        let (port, peer) = match self.way {
            Way::Up => ("--dport", "-s"),
            Way::Down => ("--sport", "-d"),
        };
        let mut spec = format!("-p tcp {port} {}", self.port);
        if let Some(address) = self.peer {
            spec.push_str(&format!(" {peer} {address}"));
        }
        spec.push_str(&format!(" -m comment --comment {tag} -j DROP"));
        spec
    }
}

/// The input of `iptables-restore --noflush` that adds (`add`) or deletes
/// `rules`, each tagged `tag`, to the `OUTPUT` chain (every packet on
/// loopback passes it once).
fn script(rules: &[Rule], tag: &str, add: bool) -> String {
    let verb = if add { "-A" } else { "-D" };
    let mut script = String::from("*filter\n");
    for rule in rules {
        script.push_str(&format!("{verb} OUTPUT {}\n", rule.spec(tag)));
    }
    script.push_str("COMMIT\n");
    script
}

/// The packets the rules tagged `tag` dropped, summed from the output of
/// `iptables-save -c` (`[packets:bytes] -A OUTPUT … --comment TAG …`).
fn dropped(saved: &str, tag: &str) -> u64 {
    let needle = format!("--comment {tag} ");
    saved
        .lines()
        .filter(|line| line.contains(&needle))
        .filter_map(|line| {
            let counters = line.strip_prefix('[')?.split(']').next()?;
            counters.split(':').next()?.parse::<u64>().ok()
        })
        .sum()
}

/// The run's firewall: the `OUTPUT` chain of its namespace, which it owns.
#[derive(Debug, Clone, Copy)]
pub(super) struct Firewall;

impl Firewall {
    /// Empties the chain, then lets every packet from or to `spared` (the
    /// sentinels' addresses: a partition of a node leaves their links to
    /// it alone, as in the simulator) through ahead of any rule a fault
    /// adds.
    pub(super) async fn reset(spared: &[IpAddr]) -> Result<Self, ChaosError> {
        let mut script = String::from("*filter\n-F OUTPUT\n");
        for address in spared {
            script.push_str(&format!("-A OUTPUT -s {address} -j ACCEPT\n"));
            script.push_str(&format!("-A OUTPUT -d {address} -j ACCEPT\n"));
        }
        script.push_str("COMMIT\n");
        restore(&script).await?;
        Ok(Self)
    }

    /// Adds `rules`, tagged `tag` (a fault's name in the run).
    pub(super) async fn cut(self, rules: &[Rule], tag: &str) -> Result<(), ChaosError> {
        if rules.is_empty() {
            return Ok(());
        }
        restore(&script(rules, tag, true)).await
    }

    /// Deletes `rules` tagged `tag`; returns when the deletion was sent
    /// (the shared monotonic clock, ns: the heal is no earlier) and how
    /// many packets they dropped while they were in place.
    pub(super) async fn heal(self, rules: &[Rule], tag: &str) -> Result<(u64, u64), ChaosError> {
        if rules.is_empty() {
            return Ok((mono_ns(), 0));
        }
        let saved = run("iptables-save", &["-c"], None).await?;
        let healed = mono_ns();
        restore(&script(rules, tag, false)).await?;
        Ok((healed, dropped(&saved, tag)))
    }
}

/// Feeds `script` to `iptables-restore --noflush`: every rule of it at
/// once.
async fn restore(script: &str) -> Result<(), ChaosError> {
    run("iptables-restore", &["-w", "--noflush"], Some(script))
        .await
        .map(drop)
}

/// Runs `program` with `args` (and `input` on its standard input), without
/// blocking the controller's runtime; its standard output.
async fn run(program: &str, args: &[&str], input: Option<&str>) -> Result<String, ChaosError> {
    let failed = |why: String| ChaosError::Start {
        what: format!("{program} {}", args.join(" ")),
        why,
    };
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| failed(error.to_string()))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(input.unwrap_or("").as_bytes())
            .await
            .map_err(|error| failed(error.to_string()))?;
    }
    let output = child
        .wait_with_output()
        .await
        .map_err(|error| failed(error.to_string()))?;
    if !output.status.success() {
        return Err(failed(format!(
            "{}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    #[test]
    fn a_rule_drops_toward_or_from_its_port_and_narrows_to_its_peer() {
        let node = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 21));
        let rules = [
            Rule {
                port: 4101,
                way: Way::Up,
                peer: None,
            },
            Rule {
                port: 4102,
                way: Way::Down,
                peer: Some(node),
            },
        ];
        assert_eq!(
            script(&rules, "f3", true),
            "*filter\n\
             -A OUTPUT -p tcp --dport 4101 -m comment --comment f3 -j DROP\n\
             -A OUTPUT -p tcp --sport 4102 -d 127.0.0.21 -m comment --comment f3 -j DROP\n\
             COMMIT\n"
        );
        assert!(script(&rules, "f3", false).contains("-D OUTPUT -p tcp --dport 4101 "));
        // A one-way cut of what the dialling side sends: the up rule alone.
        assert_eq!(Rule::link(4101, None, true, false), vec![rules[0]]);
        assert_eq!(Rule::link(4102, Some(node), false, true), vec![rules[1]]);
    }

    #[test]
    fn the_packets_a_fault_dropped_are_summed_from_its_own_rules() {
        // As iptables-save -c prints them (nf_tables backend, 1.8.9).
        let saved = "*filter\n\
            :OUTPUT ACCEPT [0:0]\n\
            [0:0] -A OUTPUT -s 127.0.0.200/32 -j ACCEPT\n\
            [7:420] -A OUTPUT -p tcp -m tcp --dport 4101 -m comment --comment f3 -j DROP\n\
            [2:120] -A OUTPUT -d 127.0.0.21/32 -p tcp -m tcp --sport 4101 -m comment --comment f3 -j DROP\n\
            [5:300] -A OUTPUT -p tcp -m tcp --dport 4101 -m comment --comment f13 -j DROP\n\
            COMMIT\n";
        assert_eq!(dropped(saved, "f3"), 9);
        assert_eq!(dropped(saved, "f13"), 5);
        assert_eq!(dropped(saved, "f4"), 0);
    }
}
