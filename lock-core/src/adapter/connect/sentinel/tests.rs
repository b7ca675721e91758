//! Resolution against scripted nodes on in-memory streams: each node is a
//! tiny RESP server (`connect::scripted`) that answers `SENTINEL` and
//! `ROLE` as told (and `+OK` to redis-rs's handshake). tests/it/topology_blocks.rs does the same against
//! a real Sentinel group.

use std::collections::BTreeMap;

use tokio::io::DuplexStream;

use super::*;
use crate::adapter::{ConnectFuture, RedisStream, connect::scripted};

/// How a scripted node behaves.
#[derive(Clone)]
enum Script {
    /// Refuses the connection.
    Refuse,
    /// Accepts and never answers.
    Silent,
    /// Answers `SENTINEL ...` with these RESP bytes.
    Sentinel(&'static str),
    /// Answers `ROLE` with these RESP bytes.
    Node(&'static str),
}

/// A dialer over scripted nodes, by port.
struct Scripted(BTreeMap<u16, Script>);

impl Dialer for Scripted {
    fn dial<'a>(&'a self, _host: &'a str, port: u16) -> ConnectFuture<'a> {
        let script = self.0.get(&port).cloned().unwrap_or(Script::Refuse);
        Box::pin(async move {
            if matches!(script, Script::Refuse) {
                return Err(io::Error::from(io::ErrorKind::ConnectionRefused));
            }
            let (client, server) = tokio::io::duplex(4096);
            tokio::spawn(serve(server, script));
            Ok(Box::new(client) as Box<dyn RedisStream>)
        })
    }
}

/// Answers each command by its first word, as `script` says.
async fn serve(server: DuplexStream, script: Script) {
    scripted::serve(server, move |command| match (&script, command) {
        (Script::Silent, _) => None,
        (Script::Sentinel(reply), "SENTINEL") | (Script::Node(reply), "ROLE") => Some(*reply),
        _ => Some("+OK\r\n"),
    })
    .await;
}

const MASTER: &str = "*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n";
const REPLICA: &str = "*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:7001\r\n$9\r\nconnected\r\n:0\r\n";
const NAMES_7001: &str = "*2\r\n$9\r\n127.0.0.1\r\n$4\r\n7001\r\n";
const NAMES_7002: &str = "*2\r\n$9\r\n127.0.0.1\r\n$4\r\n7002\r\n";
const UNKNOWN_NAME: &str = "*-1\r\n";

fn resolver(ports: &[u16]) -> SentinelResolver {
    let sentinels = ports
        .iter()
        .map(|&port| NodeAddress::new("127.0.0.1", port))
        .collect();
    SentinelResolver::new(sentinels, "lockmaster").timeout(Duration::from_millis(200))
}

fn scripted(nodes: &[(u16, Script)]) -> Scripted {
    Scripted(nodes.iter().cloned().collect())
}

#[tokio::test]
async fn skips_a_dead_sentinel_and_confirms_the_master() {
    let dialer = scripted(&[
        (26380, Script::Sentinel(NAMES_7001)),
        (7001, Script::Node(MASTER)),
    ]);
    let resolved = resolver(&[26379, 26380]).resolve(&dialer).await;
    assert_eq!(
        resolved,
        Ok(Resolved {
            master: NodeAddress::new("127.0.0.1", 7001),
            answered_by: 1,
        })
    );
}

#[tokio::test]
async fn a_stale_sentinel_is_outvoted_by_the_next_one() {
    let dialer = scripted(&[
        (26379, Script::Sentinel(NAMES_7001)),
        (26380, Script::Sentinel(NAMES_7002)),
        (7001, Script::Node(REPLICA)),
        (7002, Script::Node(MASTER)),
    ]);
    let resolved = resolver(&[26379, 26380]).resolve(&dialer).await;
    assert_eq!(resolved.map(|r| r.master.port), Ok(7002));
}

#[tokio::test]
async fn a_candidate_that_is_not_a_master_is_refused() {
    let dialer = scripted(&[
        (26379, Script::Sentinel(NAMES_7001)),
        (7001, Script::Node(REPLICA)),
    ]);
    let error = resolver(&[26379]).resolve(&dialer).await;
    assert_eq!(
        error,
        Err(SentinelError::NotAMaster {
            name: "lockmaster".into(),
            address: NodeAddress::new("127.0.0.1", 7001),
            role: "slave".into(),
        })
    );
}

#[tokio::test]
async fn not_a_master_outranks_an_unreachable_candidate() {
    let dialer = scripted(&[
        (26379, Script::Sentinel(NAMES_7002)),
        (26380, Script::Sentinel(NAMES_7001)),
        (7001, Script::Node(REPLICA)),
    ]);
    let error = resolver(&[26379, 26380]).resolve(&dialer).await;
    assert!(
        matches!(error, Err(SentinelError::NotAMaster { .. })),
        "{error:?}"
    );
    let only_unreachable = resolver(&[26379]).resolve(&dialer).await;
    assert!(
        matches!(&only_unreachable, Err(SentinelError::MasterUnreachable { address, .. }) if address.port == 7002),
        "{only_unreachable:?}"
    );
}

#[tokio::test]
async fn an_unknown_name_is_reported_as_such() {
    let dialer = scripted(&[(26379, Script::Sentinel(UNKNOWN_NAME))]);
    let error = resolver(&[26378, 26379]).resolve(&dialer).await;
    assert_eq!(
        error,
        Err(SentinelError::UnknownMaster {
            name: "lockmaster".into()
        })
    );
}

#[tokio::test]
async fn silent_and_dead_sentinels_are_no_sentinel_reachable() {
    let dialer = scripted(&[(26380, Script::Silent)]);
    let error = resolver(&[26379, 26380]).resolve(&dialer).await;
    let Err(SentinelError::NoSentinelReachable { tried }) = &error else {
        panic!("{error:?}");
    };
    assert_eq!(tried.len(), 2);
    assert!(tried[1].1.contains("no answer within"), "{tried:?}");
    let message = error
        .as_ref()
        .err()
        .map(ToString::to_string)
        .unwrap_or_default();
    assert!(
        message.starts_with("none of the 2 sentinels answered; first: 127.0.0.1:26379"),
        "{message}"
    );
}

#[tokio::test]
async fn no_sentinels_is_an_error_not_a_hang() {
    let error = SentinelResolver::new(Vec::new(), "m")
        .resolve(&scripted(&[]))
        .await;
    assert_eq!(error, Err(SentinelError::NoSentinels));
}

#[test]
fn switch_master_messages_parse() {
    let switch = SwitchMaster::parse("lockmaster 127.0.0.1 7001 127.0.0.1 7002").expect("valid");
    assert_eq!(switch.master_name, "lockmaster");
    assert_eq!(switch.from, NodeAddress::new("127.0.0.1", 7001));
    assert_eq!(switch.to, NodeAddress::new("127.0.0.1", 7002));
    let v6 = SwitchMaster::parse("m ::1 7001 2001:db8::2 7002").expect("ipv6");
    assert_eq!(v6.to, NodeAddress::new("2001:db8::2", 7002));
    for bad in [
        "",
        "m 1.1.1.1 1 2.2.2.2",
        "m 1.1.1.1 x 2.2.2.2 2",
        "m a 1 b 2 extra",
    ] {
        assert_eq!(SwitchMaster::parse(bad), None, "{bad}");
    }
}

#[tokio::test]
async fn a_node_that_is_no_sentinel_counts_as_unreachable_with_its_error() {
    let dialer = scripted(&[(
        26379,
        Script::Sentinel("-ERR unknown command 'SENTINEL'\r\n"),
    )]);
    let error = resolver(&[26379]).resolve(&dialer).await;
    let Err(SentinelError::NoSentinelReachable { tried }) = &error else {
        panic!("{error:?}");
    };
    assert!(tried[0].1.contains("unknown command"), "{tried:?}");
}

#[tokio::test(start_paused = true)]
async fn a_silent_sentinel_first_costs_the_attempt_delay_not_the_timeout() {
    let dialer = scripted(&[
        (26379, Script::Silent),
        (26380, Script::Sentinel(NAMES_7001)),
        (7001, Script::Node(MASTER)),
    ]);
    let timeout = Duration::from_secs(10);
    let begun = tokio::time::Instant::now();
    let resolved = resolver(&[26379, 26380])
        .timeout(timeout)
        .resolve(&dialer)
        .await;
    assert_eq!(resolved.map(|r| r.answered_by), Ok(1));
    // Paused time: the second sentinel is asked exactly one attempt delay
    // after the first, and everything else takes no time.
    assert_eq!(
        begun.elapsed(),
        crate::adapter::connect::attempts::ATTEMPT_DELAY
    );
}
