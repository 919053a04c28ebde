//! The values the SPI stores and returns.

use {
    krabka_ids::LeaderEpoch,
    std::{collections::BTreeMap, fmt},
    uuid::Uuid,
};

/// A partition of a topic. Identity is `(topic_id, partition)`; `topic` is
/// the human-readable name, kept for operators.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicIdPartition {
    pub topic_id: Uuid,
    pub topic: String,
    pub partition: i32,
}

impl fmt::Display for TopicIdPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{} ({})", self.topic, self.partition, self.topic_id)
    }
}

/// A remote segment's id: globally unique, and bound to its partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RemoteLogSegmentId {
    pub topic_id_partition: TopicIdPartition,
    pub id: Uuid,
}

impl fmt::Display for RemoteLogSegmentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} of {}", self.id, self.topic_id_partition)
    }
}

/// A segment's lifecycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RemoteLogSegmentState {
    CopySegmentStarted,
    CopySegmentFinished,
    DeleteSegmentStarted,
    DeleteSegmentFinished,
}

impl RemoteLogSegmentState {
    /// Whether a segment in `self` may move to `to`. A self-transition is an
    /// idempotent retry and is allowed, except into `CopySegmentStarted`,
    /// which no update may name.
    #[must_use]
    pub fn can_transition_to(self, to: Self) -> bool {
        use RemoteLogSegmentState::*;
        matches!(
            (self, to),
            (
                CopySegmentStarted,
                CopySegmentFinished | DeleteSegmentStarted
            ) | (
                CopySegmentFinished,
                CopySegmentFinished | DeleteSegmentStarted
            ) | (
                DeleteSegmentStarted,
                DeleteSegmentStarted | DeleteSegmentFinished
            ) | (DeleteSegmentFinished, DeleteSegmentFinished)
        )
    }
}

impl fmt::Display for RemoteLogSegmentState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::CopySegmentStarted => "COPY_SEGMENT_STARTED",
            Self::CopySegmentFinished => "COPY_SEGMENT_FINISHED",
            Self::DeleteSegmentStarted => "DELETE_SEGMENT_STARTED",
            Self::DeleteSegmentFinished => "DELETE_SEGMENT_FINISHED",
        })
    }
}

/// A partition's deletion state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RemotePartitionDeleteState {
    DeletePartitionMarked,
    DeletePartitionStarted,
    DeletePartitionFinished,
}

impl RemotePartitionDeleteState {
    /// Whether a partition whose delete state is `from` (`None`: no record)
    /// may move to `to`. Self-transitions are idempotent retries.
    #[must_use]
    pub fn can_transition(from: Option<Self>, to: Self) -> bool {
        use RemotePartitionDeleteState::*;
        matches!(
            (from, to),
            (None | Some(DeletePartitionMarked), DeletePartitionMarked)
                | (
                    Some(DeletePartitionMarked | DeletePartitionStarted),
                    DeletePartitionStarted
                )
                | (
                    Some(DeletePartitionStarted | DeletePartitionFinished),
                    DeletePartitionFinished
                )
        )
    }
}

impl fmt::Display for RemotePartitionDeleteState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::DeletePartitionMarked => "DELETE_PARTITION_MARKED",
            Self::DeletePartitionStarted => "DELETE_PARTITION_STARTED",
            Self::DeletePartitionFinished => "DELETE_PARTITION_FINISHED",
        })
    }
}

/// Opaque bytes that the remote storage manager attaches to a segment.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct CustomMetadata(pub Vec<u8>);

/// Everything known about one remote segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteLogSegmentMetadata {
    pub remote_log_segment_id: RemoteLogSegmentId,
    pub start_offset: i64,
    /// Inclusive.
    pub end_offset: i64,
    pub max_timestamp_ms: i64,
    pub broker_id: i32,
    pub event_timestamp_ms: i64,
    pub segment_size_in_bytes: i32,
    pub custom_metadata: Option<CustomMetadata>,
    pub state: RemoteLogSegmentState,
    /// Epoch -> first offset of that epoch inside this segment.
    pub segment_leader_epochs: BTreeMap<LeaderEpoch, i64>,
    pub txn_index_empty: bool,
}

impl RemoteLogSegmentMetadata {
    /// The range of `epoch` in this segment: from the epoch's start offset
    /// to the offset before the next larger epoch's start, or to
    /// `end_offset` when `epoch` is the segment's largest. `None` when the
    /// segment does not carry `epoch`.
    #[must_use]
    pub fn epoch_range(&self, epoch: LeaderEpoch) -> Option<(i64, i64)> {
        let start = *self.segment_leader_epochs.get(&epoch)?;
        let end = self
            .segment_leader_epochs
            .range((std::ops::Bound::Excluded(epoch), std::ops::Bound::Unbounded))
            .next()
            .map_or(self.end_offset, |(_, next)| next - 1);
        Some((start, end))
    }
}

/// A change of a known segment's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteLogSegmentMetadataUpdate {
    pub remote_log_segment_id: RemoteLogSegmentId,
    pub event_timestamp_ms: i64,
    /// `None`: keep the stored value.
    pub custom_metadata: Option<CustomMetadata>,
    pub state: RemoteLogSegmentState,
    pub broker_id: i32,
}

/// A partition-delete lifecycle event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemotePartitionDeleteMetadata {
    pub topic_id_partition: TopicIdPartition,
    pub state: RemotePartitionDeleteState,
    pub event_timestamp_ms: i64,
    pub broker_id: i32,
}
