//! The trait's types to and from the messages of `proto/`.

use {
    crate::proto as pb,
    krabka_ids::LeaderEpoch,
    krabka_remote_storage::{
        CustomMetadata, RemoteLogSegmentId, RemoteLogSegmentMetadata,
        RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState, RemotePartitionDeleteMetadata,
        RemotePartitionDeleteState, RemoteStorageError, TopicIdPartition,
    },
    uuid::Uuid,
};

pub fn tp_to(tp: &TopicIdPartition) -> pb::TopicIdPartition {
    pb::TopicIdPartition {
        topic_id: tp.topic_id.as_bytes().to_vec(),
        topic: tp.topic.clone(),
        partition: tp.partition,
    }
}

fn uuid_from(b: &[u8], what: &str) -> Result<Uuid, RemoteStorageError> {
    Uuid::from_slice(b).map_err(|_| {
        RemoteStorageError::Backend(format!(
            "rlmmd answered a {what} of {} bytes, want 16",
            b.len()
        ))
    })
}

fn tp_from(m: Option<pb::TopicIdPartition>) -> Result<TopicIdPartition, RemoteStorageError> {
    let m = m.ok_or_else(|| {
        RemoteStorageError::Backend("rlmmd answered a segment without its partition".into())
    })?;
    Ok(TopicIdPartition {
        topic_id: uuid_from(&m.topic_id, "topic id")?,
        topic: m.topic,
        partition: m.partition,
    })
}

pub fn segment_state_to(s: RemoteLogSegmentState) -> pb::SegmentState {
    match s {
        RemoteLogSegmentState::CopySegmentStarted => pb::SegmentState::CopySegmentStarted,
        RemoteLogSegmentState::CopySegmentFinished => pb::SegmentState::CopySegmentFinished,
        RemoteLogSegmentState::DeleteSegmentStarted => pb::SegmentState::DeleteSegmentStarted,
        RemoteLogSegmentState::DeleteSegmentFinished => pb::SegmentState::DeleteSegmentFinished,
    }
}

pub fn segment_state_from(s: i32) -> Result<RemoteLogSegmentState, RemoteStorageError> {
    match pb::SegmentState::try_from(s) {
        Ok(pb::SegmentState::CopySegmentStarted) => Ok(RemoteLogSegmentState::CopySegmentStarted),
        Ok(pb::SegmentState::CopySegmentFinished) => Ok(RemoteLogSegmentState::CopySegmentFinished),
        Ok(pb::SegmentState::DeleteSegmentStarted) => {
            Ok(RemoteLogSegmentState::DeleteSegmentStarted)
        }
        Ok(pb::SegmentState::DeleteSegmentFinished) => {
            Ok(RemoteLogSegmentState::DeleteSegmentFinished)
        }
        _ => Err(RemoteStorageError::Backend(format!(
            "rlmmd answered a segment in state {s}, none of the four"
        ))),
    }
}

pub fn partition_delete_state_to(s: RemotePartitionDeleteState) -> pb::PartitionDeleteState {
    match s {
        RemotePartitionDeleteState::DeletePartitionMarked => {
            pb::PartitionDeleteState::DeletePartitionMarked
        }
        RemotePartitionDeleteState::DeletePartitionStarted => {
            pb::PartitionDeleteState::DeletePartitionStarted
        }
        RemotePartitionDeleteState::DeletePartitionFinished => {
            pb::PartitionDeleteState::DeletePartitionFinished
        }
    }
}

fn segment_id_to(id: &RemoteLogSegmentId) -> pb::SegmentId {
    pb::SegmentId {
        topic_id_partition: Some(tp_to(&id.topic_id_partition)),
        id: id.id.as_bytes().to_vec(),
    }
}

pub fn segment_to(m: &RemoteLogSegmentMetadata) -> pb::Segment {
    pb::Segment {
        id: Some(segment_id_to(&m.remote_log_segment_id)),
        start_offset: m.start_offset,
        end_offset: m.end_offset,
        max_timestamp_ms: m.max_timestamp_ms,
        broker_id: m.broker_id,
        event_timestamp_ms: m.event_timestamp_ms,
        segment_size_in_bytes: m.segment_size_in_bytes,
        custom_metadata: m.custom_metadata.as_ref().map(|c| c.0.clone()),
        state: segment_state_to(m.state).into(),
        // A BTreeMap iterates in epoch order, as the message wants.
        segment_leader_epochs: m
            .segment_leader_epochs
            .iter()
            .map(|(e, &start_offset)| pb::EpochStart {
                epoch: e.0,
                start_offset,
            })
            .collect(),
        txn_index_empty: m.txn_index_empty,
    }
}

pub fn segment_from(m: pb::Segment) -> Result<RemoteLogSegmentMetadata, RemoteStorageError> {
    let id = m.id.ok_or_else(|| {
        RemoteStorageError::Backend("rlmmd answered a segment without its id".into())
    })?;
    Ok(RemoteLogSegmentMetadata {
        remote_log_segment_id: RemoteLogSegmentId {
            topic_id_partition: tp_from(id.topic_id_partition)?,
            id: uuid_from(&id.id, "segment id")?,
        },
        start_offset: m.start_offset,
        end_offset: m.end_offset,
        max_timestamp_ms: m.max_timestamp_ms,
        broker_id: m.broker_id,
        event_timestamp_ms: m.event_timestamp_ms,
        segment_size_in_bytes: m.segment_size_in_bytes,
        custom_metadata: m.custom_metadata.map(CustomMetadata),
        state: segment_state_from(m.state)?,
        segment_leader_epochs: m
            .segment_leader_epochs
            .into_iter()
            .map(|e| (LeaderEpoch(e.epoch), e.start_offset))
            .collect(),
        txn_index_empty: m.txn_index_empty,
    })
}

pub fn update_to(u: &RemoteLogSegmentMetadataUpdate) -> pb::SegmentUpdate {
    pb::SegmentUpdate {
        id: Some(segment_id_to(&u.remote_log_segment_id)),
        event_timestamp_ms: u.event_timestamp_ms,
        custom_metadata: u.custom_metadata.as_ref().map(|c| c.0.clone()),
        state: segment_state_to(u.state).into(),
        broker_id: u.broker_id,
    }
}

pub fn partition_delete_to(d: &RemotePartitionDeleteMetadata) -> pb::PartitionDelete {
    pb::PartitionDelete {
        topic_id_partition: Some(tp_to(&d.topic_id_partition)),
        state: partition_delete_state_to(d.state).into(),
        event_timestamp_ms: d.event_timestamp_ms,
        broker_id: d.broker_id,
    }
}
