//! A Sentinel failover on real sentinels, in the world the simulator draws
//! for the same seed (`world::SentinelDraws`): the same sentinel leads it,
//! and each other one adopts it its drawn `sentinel_lag` after the
//! leader's hello.
//!
//! On loopback every sentinel hears the leader's hello within 0.1 s (the
//! leader forces one as soon as the promoted replica's `INFO` shows the
//! promotion), so the lag is the controller's to apply: each other
//! sentinel with a lag is made deaf ([`Ears`]) before the failover is
//! asked for, and heard again its lag after the leader announces the new
//! configuration (its `+failover-state-reconf-slaves` event, the moment
//! the hello goes out). Until then it names the old primary to whoever
//! asks, as a simulated sentinel does until its own switch.

use std::time::Duration;

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    time::Instant,
};

use super::{
    ChaosError,
    deploy::{Deployment, Ears, MASTER, admin},
};
use crate::world::Adoption;

/// The leader's event for the moment it publishes the new configuration.
const RECONF_EVENT: &str = "+failover-state-reconf-slaves";

/// How long the controller waits for [`RECONF_EVENT`] before it hears
/// every deaf sentinel again (a failover that never reaches that state).
const RECONF_WAIT: Duration = Duration::from_secs(10);

/// Asks the sentinel `adoption` names as leader to fail the primary over
/// (`SENTINEL FAILOVER`: no vote, the old primary stays up), the others
/// deaf until their lags have passed; if it refuses, every sentinel is
/// heard again and the others are asked in turn, with no lag.
pub(super) async fn failover(
    deployment: &Deployment,
    adoption: &Adoption,
) -> Result<(), ChaosError> {
    let count = deployment.sentinels.len();
    let leader = adoption.leader.min(count.saturating_sub(1));
    let no_sentinel = || ChaosError::Start {
        what: "SENTINEL FAILOVER".to_owned(),
        why: "no sentinel accepted it".to_owned(),
    };
    let leader_port = deployment
        .sentinels
        .get(leader)
        .ok_or_else(no_sentinel)?
        .port;
    let delayed: Vec<(Ears, Duration)> = adoption
        .lags
        .iter()
        .enumerate()
        .filter_map(|(index, lag)| {
            let lag = (*lag)?;
            let ears = (!lag.is_zero()).then(|| deployment.ears(index))??;
            Some((ears, lag))
        })
        .collect();
    let watch = subscribe(leader_port).await;
    for (ears, _) in &delayed {
        ears.set(true);
    }
    if ask(leader_port).await {
        tokio::spawn(hear_again(watch, delayed));
        return Ok(());
    }
    for (ears, _) in &delayed {
        ears.set(false);
    }
    for turn in 1..count {
        if ask(deployment.sentinels[(leader + turn) % count].port).await {
            return Ok(());
        }
    }
    Err(no_sentinel())
}

/// `SENTINEL FAILOVER` on the sentinel at `port`; whether it accepted.
async fn ask(port: u16) -> bool {
    let Ok(mut conn) = admin(port).await else {
        return false;
    };
    let done: redis::RedisResult<redis::Value> = redis::cmd("SENTINEL")
        .arg("FAILOVER")
        .arg(MASTER)
        .query_async(&mut conn)
        .await;
    done.is_ok()
}

/// A connection subscribed to [`RECONF_EVENT`] on the sentinel at `port`,
/// once the subscription is confirmed (`None` if it could not be made).
async fn subscribe(port: u16) -> Option<TcpStream> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
    let command = format!(
        "*2\r\n$9\r\nSUBSCRIBE\r\n${}\r\n{RECONF_EVENT}\r\n",
        RECONF_EVENT.len()
    );
    stream.write_all(command.as_bytes()).await.ok()?;
    let confirmed = read_until(&mut stream, "subscribe", Duration::from_secs(2)).await;
    confirmed.then_some(stream)
}

/// Reads `stream` until what came contains `needle` (true) or `within`
/// passes or the stream ends (false).
async fn read_until(stream: &mut TcpStream, needle: &str, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    let mut seen = Vec::new();
    let mut buffer = [0u8; 512];
    loop {
        let read = tokio::time::timeout_at(deadline, stream.read(&mut buffer)).await;
        match read {
            Ok(Ok(n)) if n > 0 => seen.extend_from_slice(&buffer[..n]),
            _ => return false,
        }
        if String::from_utf8_lossy(&seen).contains(needle) {
            return true;
        }
    }
}

/// Waits for the leader's [`RECONF_EVENT`] on `watch` (at most
/// [`RECONF_WAIT`]), then hears each deaf sentinel again its lag later.
async fn hear_again(watch: Option<TcpStream>, delayed: Vec<(Ears, Duration)>) {
    if let Some(mut stream) = watch {
        // The event arrives as a pub/sub `message`.
        let _ = read_until(&mut stream, "message", RECONF_WAIT).await;
    }
    let hello = Instant::now();
    let mut delayed = delayed;
    delayed.sort_by_key(|(_, lag)| *lag);
    for (ears, lag) in delayed {
        tokio::time::sleep_until(hello + lag).await;
        ears.set(false);
    }
}

#[cfg(test)]
mod tests {
    use std::{
        net::{IpAddr, Ipv4Addr, SocketAddr},
        sync::Arc,
    };

    use tokio::{
        net::{TcpListener, TcpSocket},
        sync::Notify,
    };

    use super::*;
    use crate::chaos::{deploy::Sentinel, proxy};

    /// The first whole RESP command in `buffer`, and how many bytes it
    /// took (`None` until one has arrived whole).
    fn command(buffer: &[u8]) -> Option<(Vec<String>, usize)> {
        let text = std::str::from_utf8(buffer).ok()?;
        let (head, mut rest) = text.strip_prefix('*')?.split_once("\r\n")?;
        let count: usize = head.parse().ok()?;
        let mut words = Vec::with_capacity(count);
        for _ in 0..count {
            let (len, after) = rest.strip_prefix('$')?.split_once("\r\n")?;
            let len: usize = len.parse().ok()?;
            words.push(after.get(..len)?.to_owned());
            rest = after.get(len + 2..)?;
        }
        Some((words, text.len() - rest.len()))
    }

    /// A stand-in for the leading sentinel: `+OK` to every command, a
    /// subscription confirmed, and, 200 ms after `SENTINEL FAILOVER`, the
    /// reconfiguration event on every subscribed connection.
    async fn fake_leader() -> u16 {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("a loopback port is free");
        let port = listener.local_addr().expect("bound").port();
        let asked = Arc::new(Notify::new());
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let asked = Arc::clone(&asked);
                tokio::spawn(async move {
                    let mut buffer = Vec::new();
                    let mut chunk = [0u8; 512];
                    loop {
                        while let Some((words, used)) = command(&buffer) {
                            buffer.drain(..used);
                            let reply = match words.first().map(String::as_str) {
                                Some("SUBSCRIBE") => {
                                    let subscribed = format!(
                                        "*3\r\n$9\r\nsubscribe\r\n${}\r\n{RECONF_EVENT}\r\n:1\r\n",
                                        RECONF_EVENT.len()
                                    );
                                    let _ = stream.write_all(subscribed.as_bytes()).await;
                                    asked.notified().await;
                                    tokio::time::sleep(Duration::from_millis(200)).await;
                                    format!(
                                        "*3\r\n$7\r\nmessage\r\n${}\r\n{RECONF_EVENT}\r\n$6\r\nmaster\r\n",
                                        RECONF_EVENT.len()
                                    )
                                }
                                Some("SENTINEL") => {
                                    asked.notify_waiters();
                                    "+OK\r\n".to_owned()
                                }
                                _ => "+OK\r\n".to_owned(),
                            };
                            if stream.write_all(reply.as_bytes()).await.is_err() {
                                return;
                            }
                        }
                        match stream.read(&mut chunk).await {
                            Ok(n) if n > 0 => buffer.extend_from_slice(&chunk[..n]),
                            _ => return,
                        }
                    }
                });
            }
        });
        port
    }

    /// A server that echoes what it reads; its port.
    async fn echo() -> u16 {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("a loopback port is free");
        let port = listener.local_addr().expect("bound").port();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut chunk = [0u8; 64];
                    while let Ok(n) = stream.read(&mut chunk).await {
                        if n == 0 || stream.write_all(&chunk[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        port
    }

    /// A connection from `from` to the proxy on `port`.
    async fn dial(port: u16, from: IpAddr) -> TcpStream {
        let socket = TcpSocket::new_v4().expect("a socket");
        socket
            .bind(SocketAddr::new(from, 0))
            .expect("loopback addresses bind");
        socket
            .connect(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port))
            .await
            .expect("the proxy accepts")
    }

    /// Seconds from `began` until a byte sent on `stream` comes back
    /// (through an echo behind the proxy).
    async fn echoed_after(stream: &mut TcpStream, began: Instant) -> f64 {
        stream.write_all(b"x").await.expect("the proxy reads");
        let mut byte = [0u8; 1];
        stream
            .read_exact(&mut byte)
            .await
            .expect("the echo answers");
        began.elapsed().as_secs_f64()
    }

    #[test]
    fn a_sentinel_with_a_lag_hears_nothing_until_that_long_after_the_leaders_hello() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a test runtime starts");
        runtime.block_on(async {
            let leader = fake_leader().await;
            let upstream = echo().await;
            let link = |port| async move { proxy::start(port, 0).await.expect("a proxy starts") };
            let late = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 201));
            let node = link(upstream).await;
            let deployment = Deployment {
                clocks: None,
                nodes: vec![crate::chaos::deploy::Node {
                    port: upstream,
                    bus: None,
                    bus_link: None,
                    source: None,
                    announce: Some(node.clone()),
                    proc: None,
                    args: Vec::new(),
                }],
                sentinels: vec![
                    Sentinel {
                        port: leader,
                        source: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 200)),
                        peers: link(leader).await,
                    },
                    Sentinel {
                        port: upstream,
                        source: late,
                        peers: link(upstream).await,
                    },
                ],
                primary: 0,
                dir: std::env::temp_dir(),
                data: std::env::temp_dir(),
                preload: None,
                server: std::path::PathBuf::new(),
                identity: servers::Identity {
                    family: servers::Family::Redis,
                    version: servers::Version {
                        major: 7,
                        minor: 0,
                        patch: 15,
                    },
                },
            };
            let peers = deployment.sentinels[1].peers.port;
            let adoption = Adoption {
                leader: 0,
                lags: vec![None, Some(Duration::from_millis(600))],
            };
            // Connected before the failover, as the sentinels' links are.
            let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
            let mut other = dial(node.port, loopback).await;
            let mut from_node = dial(node.port, late).await;
            let mut from_peer = dial(peers, loopback).await;
            let began = Instant::now();
            failover(&deployment, &adoption)
                .await
                .expect("the leader accepts");
            // Anyone else hears the node at once; the leader's event comes
            // 200 ms after the failover, and what the node and the other
            // sentinels send the late one arrives 600 ms after that.
            let other = echoed_after(&mut other, began).await;
            let from_node = echoed_after(&mut from_node, began).await;
            let from_peer = echoed_after(&mut from_peer, began).await;
            assert!(other < 0.2, "another host: {other:.3} s");
            assert!((0.75..1.3).contains(&from_node), "node: {from_node:.3} s");
            assert!((0.75..1.3).contains(&from_peer), "peer: {from_peer:.3} s");
        });
    }
}
