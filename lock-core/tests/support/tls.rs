//! A `redis-server` that speaks only TLS (`--port 0 --tls-port P`), with a
//! CA, a server certificate and a client certificate made for it in memory
//! (see [`super::pki`]).
#![allow(dead_code, unreachable_pub)]

use lock_core::TlsOptions;
use servers::{Launch, Process, Ready};

use super::pki::{Identity, Pki};

/// Whether the server demands a client certificate (`tls-auth-clients`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// Clients must present a certificate signed by the CA (mutual TLS).
    Required,
    /// Clients may connect without one.
    Optional,
}

/// A TLS-only `redis-server`, killed on drop.
pub struct TlsRedis {
    process: Process,
    pki: Pki,
    client: Identity,
}

impl TlsRedis {
    /// Starts a TLS-only server whose certificate names `127.0.0.1` and
    /// `localhost`, signed by a fresh CA.
    pub fn start(auth: ClientAuth) -> Self {
        let started = std::time::Instant::now();
        let pki = Pki::new("redis-lock test ca");
        let server = pki.server(&["127.0.0.1", "localhost"]);
        let client = pki.client("redis-lock test client");
        let auth = match auth {
            ClientAuth::Required => "yes",
            ClientAuth::Optional => "optional",
        };
        let process = Launch::server(super::binaries())
            .ready(Ready::Logs("Ready to accept"))
            .file("server.crt", server.cert_pem.clone())
            .file("server.key", server.key_pem.clone())
            .file("ca.crt", pki.ca_pem.clone())
            .start(|ports, dir| {
                let file = |name: &str| dir.join(name).display().to_string();
                [
                    // TLS only: no plain port.
                    "--port",
                    "0",
                    "--tls-port",
                    &ports[0].to_string(),
                    "--tls-cert-file",
                    &file("server.crt"),
                    "--tls-key-file",
                    &file("server.key"),
                    "--tls-ca-cert-file",
                    &file("ca.crt"),
                    "--tls-auth-clients",
                    auth,
                ]
                .map(str::to_owned)
                .to_vec()
            })
            .unwrap_or_else(|error| panic!("{error}"));
        eprintln!(
            "tls: certificates made and a TLS-only server ready in {:?}",
            started.elapsed()
        );
        Self {
            process,
            pki,
            client,
        }
    }

    /// `rediss://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}/", self.process.port())
    }

    /// The TLS port.
    pub fn port(&self) -> u16 {
        self.process.port()
    }

    /// The CA that signed the server's and the client's certificates.
    pub fn ca_pem(&self) -> &str {
        &self.pki.ca_pem
    }

    /// A client certificate the server accepts.
    pub fn client(&self) -> &Identity {
        &self.client
    }

    /// Options that trust the CA and present the client certificate.
    pub fn mutual_tls(&self) -> TlsOptions {
        TlsOptions::new()
            .ca_pem(self.pki.ca_pem.clone())
            .client_cert_pem(self.client.cert_pem.clone(), self.client.key_pem.clone())
    }

    /// The server's log.
    pub fn log(&self) -> String {
        self.process.log()
    }
}
