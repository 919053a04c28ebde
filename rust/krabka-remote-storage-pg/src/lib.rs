//! The
//! [`RemoteLogMetadataManager`](krabka_remote_storage::RemoteLogMetadataManager)
//! SPI over rlmmd, the gRPC service that keeps the metadata in PostgreSQL:
//! [`RlmmdRemoteLogMetadataManager`].
//!
//! The trait's methods are synchronous and safe from any thread, including
//! a tokio runtime's worker: the manager owns a small tokio runtime of its
//! own, submits each call to it and waits on a channel, never `block_on` on
//! the caller's thread. Every call has a deadline
//! ([`RlmmdRemoteLogMetadataManagerBuilder::call_timeout`]).
//!
//! ```no_run
//! use std::time::Duration;
//! use krabka_remote_storage::RemoteLogMetadataManager;
//! use krabka_remote_storage_pg::RlmmdRemoteLogMetadataManager;
//!
//! let rlmm = RlmmdRemoteLogMetadataManager::builder("unix:/run/rlmmd/rlmmd.sock")
//!     .call_timeout(Duration::from_secs(5))
//!     .build()
//!     .expect("a valid target");
//! ```

mod builder;
mod convert;
mod manager;
mod status;

/// The messages and client generated from `proto/remotestorage/v1/rlmm.proto`.
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod proto {
    tonic::include_proto!("remotestorage.v1");
}

pub use {
    builder::{
        DEFAULT_CALL_TIMEOUT, DEFAULT_LIST_TIMEOUT, DEFAULT_MAX_LIST_BYTES,
        RlmmdRemoteLogMetadataManagerBuilder,
    },
    manager::RlmmdRemoteLogMetadataManager,
    status::{RlmmdCallError, outcome_unknown},
};
