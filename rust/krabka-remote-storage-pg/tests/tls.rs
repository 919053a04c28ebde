//! TLS and mutual TLS, as rlmmd offers them (--tls-cert, --tls-key,
//! --tls-client-ca), with certificates made for the test.

mod support;

use {
    krabka_remote_storage::{
        RemoteLogMetadataManager, RemoteStorageError,
        conformance::{new_tp, segment},
    },
    krabka_remote_storage_pg::RlmmdRemoteLogMetadataManager,
    rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair},
    std::{path::PathBuf, time::Duration},
    support::{Rlmmd, shared_postgres, unique},
};

/// PEM files of a CA, a server certificate (localhost, 127.0.0.1) and a
/// client certificate it signed.
struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(unique("rlmmd-tls"));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = Self::ca(&dir, "ca");
        Self::ca(&dir, "other-ca");
        let leaf = |name: &str, sans: Vec<String>, usage| {
            let key = KeyPair::generate().unwrap();
            let mut p = CertificateParams::new(sans).unwrap();
            p.extended_key_usages = vec![usage];
            let cert = p.signed_by(&key, &ca).unwrap();
            std::fs::write(dir.join(format!("{name}.pem")), cert.pem()).unwrap();
            std::fs::write(dir.join(format!("{name}.key")), key.serialize_pem()).unwrap();
        };
        leaf(
            "server",
            vec!["localhost".into(), "127.0.0.1".into()],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        leaf("client", vec![], ExtendedKeyUsagePurpose::ClientAuth);
        Self { dir }
    }

    fn ca(dir: &std::path::Path, name: &str) -> Issuer<'static, KeyPair> {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let cert = p.self_signed(&key).unwrap();
        std::fs::write(dir.join(format!("{name}.pem")), cert.pem()).unwrap();
        Issuer::new(p, key)
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn works(rlmm: &RlmmdRemoteLogMetadataManager) {
    let tp = new_tp(0);
    let m = segment(&tp, 0, 9, &[(0, 0)]);
    rlmm.add_remote_log_segment_metadata(m.clone()).unwrap();
    assert_eq!(rlmm.list_remote_log_segments(&tp).unwrap(), vec![m]);
}

fn refused(rlmm: &RlmmdRemoteLogMetadataManager, why: &str) {
    let e = rlmm.caught_up(&new_tp(0)).expect_err(why);
    assert!(matches!(e, RemoteStorageError::Io(_)), "{why}: {e:?}");
}

fn builder(target: &str) -> krabka_remote_storage_pg::RlmmdRemoteLogMetadataManagerBuilder {
    RlmmdRemoteLogMetadataManager::builder(target).call_timeout(Duration::from_secs(10))
}

#[test]
fn tls() {
    let pki = Pki::new();
    let (cert, key) = (pki.path("server.pem"), pki.path("server.key"));
    let d = Rlmmd::tcp_with(
        &shared_postgres().database(),
        &["--tls-cert", &cert, "--tls-key", &key],
    );
    works(
        &builder(&d.target)
            .tls_ca_file(pki.path("ca.pem"))
            .build()
            .unwrap(),
    );
    works(
        &builder(&d.target.replace("127.0.0.1", "localhost"))
            .tls_ca_file(pki.path("ca.pem"))
            .build()
            .unwrap(),
    );
    refused(
        &builder(&d.target).build().unwrap(),
        "plaintext to a TLS rlmmd",
    );
    refused(
        &builder(&d.target)
            .tls_ca_file(pki.path("other-ca.pem"))
            .build()
            .unwrap(),
        "a certificate signed by another CA",
    );
    refused(
        &builder(&d.target)
            .tls_ca_file(pki.path("ca.pem"))
            .tls_domain_name("rlmmd.example")
            .build()
            .unwrap(),
        "a certificate of another name",
    );
}

#[test]
fn mutual_tls() {
    let pki = Pki::new();
    let (cert, key, ca) = (
        pki.path("server.pem"),
        pki.path("server.key"),
        pki.path("ca.pem"),
    );
    let d = Rlmmd::tcp_with(
        &shared_postgres().database(),
        &[
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--tls-client-ca",
            &ca,
        ],
    );
    works(
        &builder(&d.target)
            .tls_ca_file(&ca)
            .tls_identity_files(pki.path("client.pem"), pki.path("client.key"))
            .build()
            .unwrap(),
    );
    refused(
        &builder(&d.target).tls_ca_file(&ca).build().unwrap(),
        "no client certificate",
    );
}

#[test]
fn settings_that_cannot_work_are_refused_at_build() {
    for (why, b) in [
        (
            "mutual TLS without a CA",
            builder("127.0.0.1:1").tls_identity_files("c.pem", "c.key"),
        ),
        (
            "TLS on a unix socket",
            builder("unix:/tmp/x.sock").tls_ca_file("ca.pem"),
        ),
        (
            "a zero deadline",
            builder("127.0.0.1:1").call_timeout(Duration::ZERO),
        ),
        ("not a target", builder("no target at all")),
    ] {
        match b.build() {
            Err(RemoteStorageError::InvalidArgument(_)) => {}
            r => panic!("{why}: {r:?}"),
        }
    }
    match builder("127.0.0.1:1")
        .tls_ca_file("/nonexistent/ca.pem")
        .build()
    {
        Err(RemoteStorageError::Io(_)) => {}
        r => panic!("a CA file that cannot be read: {r:?}"),
    }
}
