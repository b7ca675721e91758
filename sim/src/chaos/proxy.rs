//! A userspace TCP proxy per link (one client to one server port), inside
//! the controller, so that partitions and latency need no root: a held
//! direction stops being read (TCP backs up, as through a cut cable that
//! heals: nothing is lost, it arrives late), a delayed one delivers every
//! chunk `delay` after it was read, in order.

use std::{net::Ipv4Addr, time::Duration};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::{mpsc, watch},
    time::Instant,
};

/// What a link does to its traffic now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct LinkMode {
    /// Hold what the client sends.
    pub hold_up: bool,
    /// Hold what the server sends.
    pub hold_down: bool,
    /// Extra one-way delay, both directions.
    pub delay: Duration,
}

/// The switch of one link.
#[derive(Debug, Clone)]
pub(super) struct Link {
    mode: watch::Sender<LinkMode>,
    /// The port the client dials.
    pub port: u16,
}

impl Link {
    /// Changes what the link does from now on.
    pub(super) fn set(&self, change: impl FnOnce(&mut LinkMode)) {
        self.mode.send_modify(change);
    }
}

/// Starts a proxy to `upstream` on a fresh loopback port; it runs on the
/// current runtime until the runtime stops.
pub(super) async fn start(upstream: u16) -> std::io::Result<Link> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let port = listener.local_addr()?.port();
    let (mode, watching) = watch::channel(LinkMode::default());
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let watching = watching.clone();
            tokio::spawn(async move {
                let Ok(server) = TcpStream::connect((Ipv4Addr::LOCALHOST, upstream)).await else {
                    return;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                let up = pipe(client_read, server_write, watching.clone(), true);
                let down = pipe(server_read, client_write, watching, false);
                // Either side closing ends the connection.
                tokio::select! {
                    () = up => {}
                    () = down => {}
                }
            });
        }
    });
    Ok(Link { mode, port })
}

/// Copies one direction, holding and delaying as the mode says.
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut mode: watch::Receiver<LinkMode>,
    up: bool,
) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let writer = async move {
        while let Some((due, bytes)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if to.write_all(&bytes).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    let reader = async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            // Held: stop reading until released.
            loop {
                let now = *mode.borrow_and_update();
                let held = if up { now.hold_up } else { now.hold_down };
                if !held {
                    break;
                }
                if mode.changed().await.is_err() {
                    return;
                }
            }
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            // A chunk read just before a hold began is held too.
            loop {
                let now = *mode.borrow_and_update();
                let held = if up { now.hold_up } else { now.hold_down };
                if !held {
                    break;
                }
                if mode.changed().await.is_err() {
                    return;
                }
            }
            let delay = mode.borrow().delay;
            if tx
                .send((Instant::now() + delay, buf[..n].to_vec()))
                .is_err()
            {
                return;
            }
        }
    };
    tokio::join!(reader, writer);
}
