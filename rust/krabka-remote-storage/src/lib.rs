//! The remote log metadata SPI of KIP-405 tiered storage
//! ([`RemoteLogMetadataManager`]), its types and errors, and the in-memory
//! reference implementation ([`InmemoryRemoteLogMetadataManager`]).
//!
//! The cargo feature `conformance` (off by default) adds the module
//! `conformance`: the checks any implementation must pass, for tests.

#[cfg(feature = "conformance")]
pub mod conformance;
pub mod error;
pub mod inmemory;
pub mod metadata;
pub mod metadata_manager;

pub use {
    error::RemoteStorageError,
    inmemory::{DEFAULT_MAX_CUSTOM_METADATA_BYTES, InmemoryRemoteLogMetadataManager},
    metadata::{
        CustomMetadata, RemoteLogSegmentId, RemoteLogSegmentMetadata,
        RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState, RemotePartitionDeleteMetadata,
        RemotePartitionDeleteState, TopicIdPartition,
    },
    metadata_manager::RemoteLogMetadataManager,
};
