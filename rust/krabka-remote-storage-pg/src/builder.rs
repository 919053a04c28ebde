//! The builder of the manager: its target, deadlines, list bound, TLS and
//! runtime.

use {
    crate::{
        manager::RlmmdRemoteLogMetadataManager,
        proto::remote_log_metadata_service_client::RemoteLogMetadataServiceClient,
    },
    krabka_remote_storage::RemoteStorageError,
    std::{io, path::PathBuf, time::Duration},
    tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity},
};

/// The deadline of every call but the lists, unless configured (as the
/// Kafka plugin's `rlmmd.call.timeout.ms`).
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// The deadline of a whole list, unless configured (as the Kafka plugin's
/// `rlmmd.list.timeout.ms`).
pub const DEFAULT_LIST_TIMEOUT: Duration = Duration::from_secs(60);
/// The most a list collects, in bytes of the segments' encoded messages,
/// unless configured.
pub const DEFAULT_MAX_LIST_BYTES: usize = 64 << 20;

/// The largest message the client sends or accepts. rlmmd keeps a list's
/// messages at about 1 MiB; an rlmmd of before that bound sent 256 segments
/// a message whatever their custom metadata (up to 64 KiB each by default),
/// over gRPC's usual 4 MiB limit.
const MAX_MESSAGE_BYTES: usize = 32 << 20;

/// Configures an [`RlmmdRemoteLogMetadataManager`].
#[derive(Debug, Clone)]
pub struct RlmmdRemoteLogMetadataManagerBuilder {
    target: String,
    call_timeout: Duration,
    list_timeout: Duration,
    max_list_bytes: usize,
    tls_ca_file: Option<PathBuf>,
    tls_identity_files: Option<(PathBuf, PathBuf)>,
    tls_domain_name: Option<String>,
    worker_threads: usize,
}

impl RlmmdRemoteLogMetadataManagerBuilder {
    pub(crate) fn new(target: String) -> Self {
        Self {
            target,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            list_timeout: DEFAULT_LIST_TIMEOUT,
            max_list_bytes: DEFAULT_MAX_LIST_BYTES,
            tls_ca_file: None,
            tls_identity_files: None,
            tls_domain_name: None,
            worker_threads: 1,
        }
    }

    /// The deadline of every call but the lists (default
    /// [`DEFAULT_CALL_TIMEOUT`]). It also bounds connecting.
    #[must_use]
    pub fn call_timeout(mut self, d: Duration) -> Self {
        self.call_timeout = d;
        self
    }

    /// The deadline of a whole list, from the call until the last segment
    /// is read (default [`DEFAULT_LIST_TIMEOUT`]).
    #[must_use]
    pub fn list_timeout(mut self, d: Duration) -> Self {
        self.list_timeout = d;
        self
    }

    /// The most a list collects, counted in bytes of the segments' encoded
    /// messages (default [`DEFAULT_MAX_LIST_BYTES`]); a longer list fails
    /// with [`RemoteStorageError::Backend`] and nothing of it is kept.
    #[must_use]
    pub fn max_list_bytes(mut self, n: usize) -> Self {
        self.max_list_bytes = n;
        self
    }

    /// Turns TLS on: the PEM CA that signed rlmmd's certificate (rlmmd's
    /// `--tls-cert`). TCP targets only.
    #[must_use]
    pub fn tls_ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls_ca_file = Some(path.into());
        self
    }

    /// Mutual TLS: the PEM certificate and key this client presents
    /// (rlmmd's `--tls-client-ca` must have signed it). Needs
    /// [`tls_ca_file`](Self::tls_ca_file).
    #[must_use]
    pub fn tls_identity_files(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.tls_identity_files = Some((cert.into(), key.into()));
        self
    }

    /// The name rlmmd's certificate must carry, when it is not the
    /// target's host.
    #[must_use]
    pub fn tls_domain_name(mut self, name: impl Into<String>) -> Self {
        self.tls_domain_name = Some(name.into());
        self
    }

    /// Threads of the manager's own runtime (default 1: one thread serves
    /// thousands of calls a second, and a call's tasks then never cross
    /// threads inside the runtime, which measured faster on two cores).
    #[must_use]
    pub fn worker_threads(mut self, n: usize) -> Self {
        self.worker_threads = n.max(1);
        self
    }

    /// The manager. It does not contact rlmmd: the first call connects,
    /// and a lost connection is made again by the next call
    /// ([`RlmmdRemoteLogMetadataManager::probe`] checks that rlmmd
    /// answers).
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::InvalidArgument`] for a target, timeout or TLS
    /// setting that cannot work; [`RemoteStorageError::Io`] when a TLS
    /// file cannot be read or the runtime cannot start.
    pub fn build(self) -> Result<RlmmdRemoteLogMetadataManager, RemoteStorageError> {
        let invalid = |m: String| RemoteStorageError::InvalidArgument(m);
        if self.call_timeout.is_zero() || self.list_timeout.is_zero() {
            return Err(invalid("call and list timeouts must be positive".into()));
        }
        if self.tls_identity_files.is_some() && self.tls_ca_file.is_none() {
            return Err(invalid(
                "mutual TLS (tls_identity_files) needs tls_ca_file: TLS first".into(),
            ));
        }
        let unix = self.target.starts_with("unix:");
        if unix && self.tls_ca_file.is_some() {
            return Err(invalid(format!(
                "target {}: TLS is for TCP targets; a unix socket is plaintext",
                self.target
            )));
        }
        let uri = if unix {
            self.target.clone()
        } else {
            let host_port = self.target.strip_prefix("dns:///").unwrap_or(&self.target);
            let scheme = if self.tls_ca_file.is_some() {
                "https"
            } else {
                "http"
            };
            format!("{scheme}://{host_port}")
        };
        let mut endpoint = Endpoint::from_shared(uri.clone())
            .map_err(|e| {
                invalid(format!(
                    "target {}: want host:port or unix:/path ({e})",
                    self.target
                ))
            })?
            .connect_timeout(self.call_timeout)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(30))
            .keep_alive_timeout(self.call_timeout)
            .keep_alive_while_idle(true);
        if let Some(ca) = &self.tls_ca_file {
            let read = |p: &PathBuf| {
                std::fs::read(p).map_err(|e| {
                    RemoteStorageError::Io(io::Error::new(
                        e.kind(),
                        format!("{}: {e}", p.display()),
                    ))
                })
            };
            let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read(ca)?));
            if let Some((cert, key)) = &self.tls_identity_files {
                tls = tls.identity(Identity::from_pem(read(cert)?, read(key)?));
            }
            if let Some(name) = &self.tls_domain_name {
                tls = tls.domain_name(name.clone());
            }
            endpoint = endpoint
                .tls_config(tls)
                .map_err(|e| invalid(format!("TLS for {}: {e}", self.target)))?;
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(self.worker_threads)
            .thread_name("rlmmd-client")
            .enable_all()
            .build()
            .map_err(RemoteStorageError::Io)?;
        // The channel's background task needs a runtime to start on: ours.
        // Entering it is allowed from inside another runtime too.
        let channel: Channel = {
            let _guard = rt.enter();
            endpoint.connect_lazy()
        };
        let client = RemoteLogMetadataServiceClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Ok(RlmmdRemoteLogMetadataManager::new(
            rt,
            client,
            self.target,
            self.call_timeout,
            self.list_timeout,
            self.max_list_bytes,
        ))
    }
}
