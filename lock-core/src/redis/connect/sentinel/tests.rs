//! Resolution against scripted nodes on in-memory streams: each node is a
//! tiny RESP server that answers `SENTINEL` and `ROLE` as told (and `+OK`
//! to redis-rs's handshake). tests/it/topology_blocks.rs does the same against
//! a real Sentinel group.

use std::collections::BTreeMap;

use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

use super::*;
use crate::redis::{ConnectFuture, RedisStream};

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

/// Reads RESP arrays of bulk strings and answers each by its first word.
async fn serve(mut stream: DuplexStream, script: Script) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        while let Some((command, used)) = parse_command(&buffer) {
            buffer.drain(..used);
            let reply = match (&script, command.as_str()) {
                (Script::Silent, _) => continue,
                (Script::Sentinel(reply), "SENTINEL") | (Script::Node(reply), "ROLE") => *reply,
                _ => "+OK\r\n",
            };
            if stream.write_all(reply.as_bytes()).await.is_err() {
                return;
            }
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(read) => buffer.extend_from_slice(&chunk[..read]),
        }
    }
}

/// The upper-cased command name of the first complete RESP array in
/// `buffer`, and the bytes it used.
fn parse_command(buffer: &[u8]) -> Option<(String, usize)> {
    let line = |at: usize| -> Option<(&[u8], usize)> {
        let end = buffer[at..].windows(2).position(|w| w == b"\r\n")? + at;
        Some((&buffer[at..end], end + 2))
    };
    let (header, mut at) = line(0)?;
    let count: usize = std::str::from_utf8(header.strip_prefix(b"*")?)
        .ok()?
        .parse()
        .ok()?;
    let mut name = None;
    for _ in 0..count {
        let (length, next) = line(at)?;
        let length: usize = std::str::from_utf8(length.strip_prefix(b"$")?)
            .ok()?
            .parse()
            .ok()?;
        let word = buffer.get(next..next + length)?;
        name.get_or_insert_with(|| String::from_utf8_lossy(word).to_ascii_uppercase());
        at = next + length + 2;
        if buffer.len() < at {
            return None;
        }
    }
    Some((name?, at))
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
