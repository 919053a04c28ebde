//! The reference implementation: everything in one process's memory.

use {
    crate::{
        error::RemoteStorageError,
        metadata::{
            RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState,
            RemotePartitionDeleteMetadata, RemotePartitionDeleteState, TopicIdPartition,
        },
        metadata_manager::RemoteLogMetadataManager,
    },
    krabka_ids::LeaderEpoch,
    std::{
        collections::{HashMap, HashSet},
        sync::Mutex,
    },
    uuid::Uuid,
};

/// The largest custom metadata an add or update accepts unless configured.
pub const DEFAULT_MAX_CUSTOM_METADATA_BYTES: usize = 65536;

/// The reference [`RemoteLogMetadataManager`]: validation, transitions and
/// query semantics as the store's API defines them, held in memory.
///
/// It never purges forgotten segments: a segment id that reached
/// `DeleteSegmentFinished` stays taken for the manager's life.
#[derive(Debug)]
pub struct InmemoryRemoteLogMetadataManager {
    max_custom_metadata_bytes: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Every segment id ever added, with the partition it was added under.
    taken: HashSet<Uuid>,
    partitions: HashMap<(Uuid, i32), Partition>,
    seq: u64,
}

#[derive(Debug, Default)]
struct Partition {
    delete_state: Option<RemotePartitionDeleteState>,
    segments: HashMap<Uuid, Entry>,
}

#[derive(Debug)]
struct Entry {
    meta: RemoteLogSegmentMetadata,
    /// Order of the add, for ties in lists.
    added: u64,
    /// Order of the first `CopySegmentFinished`, for ties in lookups.
    finished: Option<u64>,
}

fn key(tp: &TopicIdPartition) -> (Uuid, i32) {
    (tp.topic_id, tp.partition)
}

fn legal_topic(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 249
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl Default for InmemoryRemoteLogMetadataManager {
    fn default() -> Self {
        Self::new()
    }
}

impl InmemoryRemoteLogMetadataManager {
    /// A manager that accepts custom metadata up to
    /// [`DEFAULT_MAX_CUSTOM_METADATA_BYTES`].
    #[must_use]
    pub fn new() -> Self {
        Self::with_max_custom_metadata_bytes(DEFAULT_MAX_CUSTOM_METADATA_BYTES)
    }

    /// A manager that refuses custom metadata longer than `max` bytes.
    #[must_use]
    pub fn with_max_custom_metadata_bytes(max: usize) -> Self {
        Self {
            max_custom_metadata_bytes: max,
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves no half-applied change:
        // every mutation below is validated first and applied last.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn validate_add(&self, m: &RemoteLogSegmentMetadata) -> Result<(), String> {
        let tp = &m.remote_log_segment_id.topic_id_partition;
        if m.state != RemoteLogSegmentState::CopySegmentStarted {
            return Err(format!(
                "state is {}, must be {}",
                m.state,
                RemoteLogSegmentState::CopySegmentStarted
            ));
        }
        if tp.topic_id.is_nil() {
            return Err("topic id is the zero UUID".into());
        }
        if m.remote_log_segment_id.id.is_nil() {
            return Err("segment id is the zero UUID".into());
        }
        if !legal_topic(&tp.topic) {
            return Err(format!(
                "topic name {:?} is not a legal Kafka topic name (1-249 of [a-zA-Z0-9._-], not . or ..)",
                tp.topic
            ));
        }
        if tp.partition < 0 {
            return Err(format!("partition {} is negative", tp.partition));
        }
        if m.start_offset < 0 {
            return Err(format!("start offset {} is negative", m.start_offset));
        }
        if m.start_offset > m.end_offset {
            return Err(format!(
                "start offset {} is after end offset {}",
                m.start_offset, m.end_offset
            ));
        }
        if m.segment_leader_epochs.is_empty() {
            return Err("segment leader epochs are empty".into());
        }
        let mut prev: Option<i64> = None;
        for (epoch, &start) in &m.segment_leader_epochs {
            if epoch.0 < 0 {
                return Err(format!("leader epoch {epoch} is negative"));
            }
            if start < m.start_offset || start > m.end_offset {
                return Err(format!(
                    "leader epoch {epoch} starts at {start}, outside [{}, {}]",
                    m.start_offset, m.end_offset
                ));
            }
            if let Some(p) = prev
                && start <= p
            {
                return Err(format!(
                    "leader epoch {epoch} starts at {start}, not after the previous epoch's start {p}"
                ));
            }
            prev = Some(start);
        }
        if m.segment_size_in_bytes < 0 {
            return Err(format!(
                "segment size {} is negative",
                m.segment_size_in_bytes
            ));
        }
        if let Some(c) = &m.custom_metadata
            && c.0.len() > self.max_custom_metadata_bytes
        {
            return Err(format!(
                "custom metadata is {} bytes, more than the limit of {}",
                c.0.len(),
                self.max_custom_metadata_bytes
            ));
        }
        Ok(())
    }

    /// The live segments of `tp` that pass `keep`, in list order.
    fn list_where(
        &self,
        tp: &TopicIdPartition,
        keep: impl Fn(&RemoteLogSegmentMetadata) -> bool,
    ) -> Vec<RemoteLogSegmentMetadata> {
        let st = self.lock();
        let Some(p) = st.partitions.get(&key(tp)) else {
            return Vec::new();
        };
        if p.delete_state == Some(RemotePartitionDeleteState::DeletePartitionFinished) {
            return Vec::new();
        }
        let mut v: Vec<&Entry> = p
            .segments
            .values()
            .filter(|e| e.meta.state != RemoteLogSegmentState::DeleteSegmentFinished)
            .filter(|e| keep(&e.meta))
            .collect();
        v.sort_by_key(|e| (e.meta.start_offset, e.added));
        v.into_iter().map(|e| e.meta.clone()).collect()
    }
}

impl RemoteLogMetadataManager for InmemoryRemoteLogMetadataManager {
    fn add_remote_log_segment_metadata(
        &self,
        metadata: RemoteLogSegmentMetadata,
    ) -> Result<(), RemoteStorageError> {
        let invalid = |reason: String| RemoteStorageError::InvalidAdd {
            id: metadata.remote_log_segment_id.clone(),
            reason,
        };
        self.validate_add(&metadata).map_err(invalid)?;
        let mut st = self.lock();
        let id = metadata.remote_log_segment_id.id;
        if st.taken.contains(&id) {
            return Err(invalid("the segment id was added before".into()));
        }
        let k = key(&metadata.remote_log_segment_id.topic_id_partition);
        if let Some(ds) = st.partitions.get(&k).and_then(|p| p.delete_state) {
            return Err(invalid(format!("the partition is being deleted ({ds})")));
        }
        st.seq += 1;
        let added = st.seq;
        st.taken.insert(id);
        st.partitions.entry(k).or_default().segments.insert(
            id,
            Entry {
                meta: metadata,
                added,
                finished: None,
            },
        );
        Ok(())
    }

    fn update_remote_log_segment_metadata(
        &self,
        update: RemoteLogSegmentMetadataUpdate,
    ) -> Result<(), RemoteStorageError> {
        let sid = &update.remote_log_segment_id;
        if update.state == RemoteLogSegmentState::CopySegmentStarted {
            return Err(RemoteStorageError::InvalidSegmentTransition {
                id: sid.clone(),
                from: RemoteLogSegmentState::CopySegmentStarted,
                to: update.state,
            });
        }
        // Oversized custom metadata is refused before the segment is looked
        // up, as the store does; the error then names the target state as
        // both ends when the segment is unknown.
        let too_big = update
            .custom_metadata
            .as_ref()
            .is_some_and(|c| c.0.len() > self.max_custom_metadata_bytes);
        let mut st = self.lock();
        if too_big {
            let from = st
                .partitions
                .get(&key(&sid.topic_id_partition))
                .and_then(|p| p.segments.get(&sid.id))
                .map_or(update.state, |e| e.meta.state);
            return Err(RemoteStorageError::InvalidSegmentTransition {
                id: sid.clone(),
                from,
                to: update.state,
            });
        }
        st.seq += 1;
        let seq = st.seq;
        let not_found = || RemoteStorageError::SegmentNotFound(sid.clone());
        let p = st
            .partitions
            .get_mut(&key(&sid.topic_id_partition))
            .ok_or_else(not_found)?;
        if p.delete_state == Some(RemotePartitionDeleteState::DeletePartitionFinished) {
            return Err(not_found());
        }
        let e = p.segments.get_mut(&sid.id).ok_or_else(not_found)?;
        let from = e.meta.state;
        if !from.can_transition_to(update.state) {
            return Err(RemoteStorageError::InvalidSegmentTransition {
                id: sid.clone(),
                from,
                to: update.state,
            });
        }
        if update.state == RemoteLogSegmentState::CopySegmentFinished && e.finished.is_none() {
            e.finished = Some(seq);
        }
        e.meta.state = update.state;
        e.meta.broker_id = update.broker_id;
        e.meta.event_timestamp_ms = update.event_timestamp_ms;
        if let Some(c) = update.custom_metadata {
            e.meta.custom_metadata = Some(c);
        }
        Ok(())
    }

    fn remote_log_segment_metadata(
        &self,
        topic_id_partition: &TopicIdPartition,
        leader_epoch: LeaderEpoch,
        offset: i64,
    ) -> Result<Option<RemoteLogSegmentMetadata>, RemoteStorageError> {
        let st = self.lock();
        let Some(p) = st.partitions.get(&key(topic_id_partition)) else {
            return Ok(None);
        };
        if p.delete_state == Some(RemotePartitionDeleteState::DeletePartitionFinished) {
            return Ok(None);
        }
        let best = p
            .segments
            .values()
            .filter(|e| e.meta.state == RemoteLogSegmentState::CopySegmentFinished)
            .filter_map(|e| {
                let (lo, hi) = e.meta.epoch_range(leader_epoch)?;
                (lo <= offset && offset <= hi).then_some((lo, e.finished, e))
            })
            .max_by_key(|(lo, finished, _)| (*lo, *finished));
        Ok(best.map(|(_, _, e)| e.meta.clone()))
    }

    fn highest_offset_for_epoch(
        &self,
        topic_id_partition: &TopicIdPartition,
        leader_epoch: LeaderEpoch,
    ) -> Result<Option<i64>, RemoteStorageError> {
        Ok(self
            .list_where(topic_id_partition, |m| {
                m.state == RemoteLogSegmentState::CopySegmentFinished
                    && m.segment_leader_epochs.contains_key(&leader_epoch)
            })
            .iter()
            .map(|m| m.end_offset)
            .max())
    }

    fn list_remote_log_segments(
        &self,
        topic_id_partition: &TopicIdPartition,
    ) -> Result<Vec<RemoteLogSegmentMetadata>, RemoteStorageError> {
        Ok(self.list_where(topic_id_partition, |_| true))
    }

    fn list_remote_log_segments_by_epoch(
        &self,
        topic_id_partition: &TopicIdPartition,
        leader_epoch: LeaderEpoch,
    ) -> Result<Vec<RemoteLogSegmentMetadata>, RemoteStorageError> {
        Ok(self.list_where(topic_id_partition, |m| {
            m.segment_leader_epochs.contains_key(&leader_epoch)
        }))
    }

    fn put_remote_partition_delete_metadata(
        &self,
        metadata: RemotePartitionDeleteMetadata,
    ) -> Result<(), RemoteStorageError> {
        let tp = &metadata.topic_id_partition;
        let mut st = self.lock();
        let k = key(tp);
        let from = st.partitions.get(&k).and_then(|p| p.delete_state);
        // A partition no add could name is refused as the store refuses it.
        let bad_tp = tp.topic_id.is_nil() || !legal_topic(&tp.topic) || tp.partition < 0;
        if bad_tp || !RemotePartitionDeleteState::can_transition(from, metadata.state) {
            return Err(RemoteStorageError::InvalidPartitionDeleteTransition {
                tp: metadata.topic_id_partition,
                from,
                to: metadata.state,
            });
        }
        st.partitions.entry(k).or_default().delete_state = Some(metadata.state);
        Ok(())
    }

    fn caught_up(
        &self,
        _topic_id_partition: &TopicIdPartition,
    ) -> Result<bool, RemoteStorageError> {
        Ok(true)
    }
}
