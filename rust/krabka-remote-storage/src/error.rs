//! The SPI's error type.

use crate::metadata::{
    RemoteLogSegmentId, RemoteLogSegmentState, RemotePartitionDeleteState, TopicIdPartition,
};

/// Why a [`RemoteLogMetadataManager`](crate::RemoteLogMetadataManager)
/// call failed.
#[derive(Debug, thiserror::Error)]
pub enum RemoteStorageError {
    /// The store could not be reached or failed; the call's effect is
    /// unknown unless the message says otherwise.
    #[error("remote log metadata store I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// No live segment with this id in this partition.
    #[error("remote log segment {0} not found")]
    SegmentNotFound(RemoteLogSegmentId),
    /// An add was refused; nothing was stored.
    #[error("cannot add remote log segment {id}: {reason}")]
    InvalidAdd {
        id: RemoteLogSegmentId,
        reason: String,
    },
    /// An update was refused; the stored segment is unchanged.
    #[error("remote log segment {id}: transition from {from} to {to} is not allowed")]
    InvalidSegmentTransition {
        id: RemoteLogSegmentId,
        from: RemoteLogSegmentState,
        to: RemoteLogSegmentState,
    },
    /// A partition-delete event was refused; nothing changed.
    #[error("partition {tp}: delete transition from {} to {to} is not allowed", .from.map_or_else(|| "no delete record".to_owned(), |s| s.to_string()))]
    InvalidPartitionDeleteTransition {
        tp: TopicIdPartition,
        from: Option<RemotePartitionDeleteState>,
        to: RemotePartitionDeleteState,
    },
    /// The caller passed a value no store accepts.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The store answered with an error that none of the other variants
    /// describes.
    #[error("remote log metadata store error: {0}")]
    Backend(String),
    /// The manager is still loading the partition it has just taken on.
    #[error("remote log metadata for partition {partition} is not ready yet")]
    NotReady { partition: i32 },
}
