//! A throwaway certificate authority for TLS tests, made in memory with
//! rcgen: no `openssl` binary, no files unless a test writes them.
//!
//! Shared by the integration tests (`support::pki`) and the TLS unit tests
//! in `src/adapter/connect/tls/tests.rs`, which include this file by path.
#![allow(dead_code, unreachable_pub)]

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// A certificate and its private key, both PEM.
#[derive(Clone)]
pub struct Identity {
    /// The certificate (leaf only; the CA is the test's trust anchor).
    pub cert_pem: String,
    /// Its PKCS#8 private key.
    pub key_pem: String,
}

/// A self-signed CA that signs server and client certificates.
pub struct Pki {
    /// The CA's certificate: what clients and servers trust.
    pub ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    /// A new CA named `name`.
    pub fn new(name: &str) -> Self {
        let key = KeyPair::generate().expect("rcgen generates a key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("no names is valid");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let certificate = params.self_signed(&key).expect("rcgen self-signs");
        Self {
            ca_pem: certificate.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A server certificate for `names` (DNS names or IP addresses).
    pub fn server(&self, names: &[&str]) -> Identity {
        self.leaf(names, ExtendedKeyUsagePurpose::ServerAuth)
    }

    /// A client certificate whose common name is `name`.
    pub fn client(&self, name: &str) -> Identity {
        self.leaf(&[name], ExtendedKeyUsagePurpose::ClientAuth)
    }

    /// A certificate for `names` good for both ends of a connection: what a
    /// cluster node presents to clients and to the nodes it dials.
    pub fn node(&self, names: &[&str]) -> Identity {
        self.leaf_with(
            names,
            vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        )
    }

    fn leaf(&self, names: &[&str], usage: ExtendedKeyUsagePurpose) -> Identity {
        self.leaf_with(names, vec![usage])
    }

    fn leaf_with(&self, names: &[&str], usages: Vec<ExtendedKeyUsagePurpose>) -> Identity {
        let key = KeyPair::generate().expect("rcgen generates a key");
        let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        let mut params = CertificateParams::new(names.clone()).expect("valid names");
        params.distinguished_name.push(
            DnType::CommonName,
            names.first().cloned().unwrap_or_default(),
        );
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = usages;
        let certificate = params
            .signed_by(&key, &self.issuer)
            .expect("the CA signs the leaf");
        Identity {
            cert_pem: certificate.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}
