//! The manager: a tonic client of rlmmd on a tokio runtime of its own.

use {
    crate::{
        builder::RlmmdRemoteLogMetadataManagerBuilder,
        convert::{partition_delete_to, segment_from, segment_to, tp_to, update_to},
        proto::{self as pb, remote_log_metadata_service_client::RemoteLogMetadataServiceClient},
        status::{Subject, deadline_error, to_error},
    },
    krabka_ids::LeaderEpoch,
    krabka_remote_storage::{
        RemoteLogMetadataManager, RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate,
        RemotePartitionDeleteMetadata, RemoteStorageError, TopicIdPartition,
    },
    prost::Message,
    std::{
        collections::HashMap,
        fmt, io,
        sync::{Arc, Mutex, mpsc},
        time::Duration,
    },
    tokio::runtime::{Handle, Runtime},
    tonic::transport::Channel,
};

/// How much longer than a call's deadline the caller waits for the
/// runtime's answer; the runtime's own timer ends the call first.
const ANSWER_GRACE: Duration = Duration::from_secs(1);

/// The partition a probe asks about: rlmmd consumes no such partition, so
/// it answers from memory (as the Kafka plugin's configure probe).
fn probe_tp() -> TopicIdPartition {
    TopicIdPartition {
        topic_id: uuid::Uuid::nil(),
        topic: "remotestorage-configure-probe".into(),
        partition: 0,
    }
}

/// The partitions assigned to this manager: true for a leader.
type Assigned = Arc<Mutex<HashMap<TopicIdPartition, bool>>>;

/// A [`RemoteLogMetadataManager`] that keeps the metadata in PostgreSQL
/// through rlmmd.
///
/// Every method is a gRPC call to rlmmd with a deadline; lists are
/// streamed and collected, up to
/// [`max_list_bytes`](RlmmdRemoteLogMetadataManagerBuilder::max_list_bytes).
/// The methods block the calling thread, whichever it is (a plain thread,
/// `spawn_blocking`, or a tokio worker, which they hold for at most the
/// deadline), and never the manager's own runtime.
///
/// [`caught_up`](RemoteLogMetadataManager::caught_up) is rlmmd's CaughtUp:
/// `false` for a partition not assigned through
/// [`on_partition_leadership_changes`](Self::on_partition_leadership_changes),
/// [`RemoteStorageError::NotReady`] while rlmmd loads it, `Io` when rlmmd
/// (or, for an assigned partition, its database) does not answer. The manager remembers the assignment: when
/// rlmmd answers `false` for an assigned partition (it restarted, or the
/// assignment call failed), `caught_up` sends it again, and a later call
/// answers `true` once rlmmd has loaded it.
pub struct RlmmdRemoteLogMetadataManager {
    handle: Handle,
    /// Some until dropped.
    rt: Option<Runtime>,
    client: RemoteLogMetadataServiceClient<Channel>,
    target: String,
    call_timeout: Duration,
    list_timeout: Duration,
    max_list_bytes: usize,
    assigned: Assigned,
}

impl fmt::Debug for RlmmdRemoteLogMetadataManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RlmmdRemoteLogMetadataManager")
            .field("target", &self.target)
            .field("call_timeout", &self.call_timeout)
            .field("list_timeout", &self.list_timeout)
            .field("max_list_bytes", &self.max_list_bytes)
            .finish_non_exhaustive()
    }
}

impl Drop for RlmmdRemoteLogMetadataManager {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which panics inside another runtime:
        // let its threads end in the background instead.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// How a call ended, before it is mapped on the caller's thread.
enum Failure {
    Status(tonic::Status),
    Deadline,
    Error(RemoteStorageError),
}

type Client = RemoteLogMetadataServiceClient<Channel>;

fn request<M>(m: M, deadline: Duration) -> tonic::Request<M> {
    let mut r = tonic::Request::new(m);
    // rlmmd learns the deadline (grpc-timeout) and gives up with the caller.
    r.set_timeout(deadline);
    r
}

async fn send_assignment(
    client: &mut Client,
    leaders: &[TopicIdPartition],
    followers: &[TopicIdPartition],
    deadline: Duration,
) -> Result<(), Failure> {
    let msg = pb::OnPartitionLeadershipChangesRequest {
        leaders: leaders.iter().map(tp_to).collect(),
        followers: followers.iter().map(tp_to).collect(),
    };
    client
        .on_partition_leadership_changes(request(msg, deadline))
        .await
        .map(|_| ())
        .map_err(Failure::Status)
}

impl RlmmdRemoteLogMetadataManager {
    pub(crate) fn new(
        rt: Runtime,
        client: RemoteLogMetadataServiceClient<Channel>,
        target: String,
        call_timeout: Duration,
        list_timeout: Duration,
        max_list_bytes: usize,
    ) -> Self {
        Self {
            handle: rt.handle().clone(),
            rt: Some(rt),
            client,
            target,
            call_timeout,
            list_timeout,
            max_list_bytes,
            assigned: Arc::default(),
        }
    }

    /// A builder for a manager of the rlmmd at `target`: `host:port`
    /// (plaintext unless [`tls_ca_file`](RlmmdRemoteLogMetadataManagerBuilder::tls_ca_file)),
    /// or `unix:/path` (also `unix:///path`) for rlmmd's unix socket, as
    /// rlmmd's `--listen` and the Kafka plugin's `rlmmd.target` take them.
    #[must_use]
    pub fn builder(target: impl Into<String>) -> RlmmdRemoteLogMetadataManagerBuilder {
        RlmmdRemoteLogMetadataManagerBuilder::new(target.into())
    }

    /// The target this manager calls.
    #[must_use]
    pub fn target(&self) -> &str {
        &self.target
    }

    /// Runs `fut` on the manager's runtime and waits for it on this
    /// thread, at most `deadline` (and a grace for the runtime's answer).
    fn run<T: Send + 'static>(
        &self,
        deadline: Duration,
        fut: impl Future<Output = Result<T, Failure>> + Send + 'static,
    ) -> Result<T, Failure> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.handle.spawn(async move {
            let r = tokio::time::timeout(deadline, fut)
                .await
                .unwrap_or(Err(Failure::Deadline));
            let _ = tx.send(r);
        });
        match rx.recv_timeout(deadline + ANSWER_GRACE) {
            Ok(r) => r,
            Err(mpsc::RecvTimeoutError::Timeout) => Err(Failure::Deadline),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(Failure::Error(
                RemoteStorageError::Io(io::Error::other("the manager's runtime stopped")),
            )),
        }
    }

    fn finish<T>(
        r: Result<T, Failure>,
        what: impl FnOnce() -> String,
        subject: &Subject<'_>,
        deadline: Duration,
    ) -> Result<T, RemoteStorageError> {
        r.map_err(|f| match f {
            Failure::Status(s) => to_error(what(), subject, &s),
            Failure::Deadline => deadline_error(what(), subject, deadline),
            Failure::Error(e) => e,
        })
    }

    /// Checks that an rlmmd answers at the target, as the Kafka plugin's
    /// configure does: one CaughtUp of a partition no broker is assigned,
    /// which rlmmd answers from memory without asking its database.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::Io`] when no rlmmd answers within the call
    /// deadline; [`RemoteStorageError::Backend`] when the server there is
    /// not rlmmd (UNIMPLEMENTED).
    pub fn probe(&self) -> Result<(), RemoteStorageError> {
        let tp = probe_tp();
        self.caught_up_of(&tp, false).map(|_| ())
    }

    /// Kafka's assignment hook: this broker now leads `leaders` and follows
    /// `followers`. rlmmd loads them into its cache. The assignment is
    /// remembered before the call, so that
    /// [`caught_up`](RemoteLogMetadataManager::caught_up) sends it again
    /// when rlmmd has lost it (a restart) or the call failed.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::Io`] when rlmmd did not take it; the
    /// assignment stays remembered and is sent again by `caught_up`.
    pub fn on_partition_leadership_changes(
        &self,
        leaders: &[TopicIdPartition],
        followers: &[TopicIdPartition],
    ) -> Result<(), RemoteStorageError> {
        {
            let mut a = self.assigned.lock().unwrap_or_else(|p| p.into_inner());
            for tp in leaders {
                a.insert(tp.clone(), true);
            }
            for tp in followers {
                a.insert(tp.clone(), false);
            }
        }
        let mut c = self.client.clone();
        let (l, f) = (leaders.to_vec(), followers.to_vec());
        let t = self.call_timeout;
        let r = self.run(t, async move { send_assignment(&mut c, &l, &f, t).await });
        Self::finish(
            r,
            || {
                format!(
                    "assign {} leaders and {} followers",
                    leaders.len(),
                    followers.len()
                )
            },
            &Subject::Assignment,
            t,
        )
    }

    /// Kafka's stop hook: this broker no longer hosts `partitions`. They
    /// are forgotten here at once; rlmmd drops them from its cache.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::Io`] when rlmmd did not take it.
    pub fn on_stop_partitions(
        &self,
        partitions: &[TopicIdPartition],
    ) -> Result<(), RemoteStorageError> {
        {
            let mut a = self.assigned.lock().unwrap_or_else(|p| p.into_inner());
            for tp in partitions {
                a.remove(tp);
            }
        }
        let mut c = self.client.clone();
        let msg = pb::OnStopPartitionsRequest {
            partitions: partitions.iter().map(tp_to).collect(),
        };
        let t = self.call_timeout;
        let r = self.run(t, async move {
            c.on_stop_partitions(request(msg, t))
                .await
                .map(|_| ())
                .map_err(Failure::Status)
        });
        Self::finish(
            r,
            || format!("stop {} partitions", partitions.len()),
            &Subject::Assignment,
            t,
        )
    }

    fn caught_up_of(
        &self,
        tp: &TopicIdPartition,
        resend: bool,
    ) -> Result<bool, RemoteStorageError> {
        let mut c = self.client.clone();
        let msg = pb::CaughtUpRequest {
            topic_id_partition: Some(tp_to(tp)),
        };
        let t = self.call_timeout;
        let assigned = resend.then(|| self.assigned.clone());
        let key = tp.clone();
        let r = self.run(t, async move {
            let ok = c
                .caught_up(request(msg, t))
                .await
                .map_err(Failure::Status)?
                .into_inner()
                .caught_up;
            if !ok {
                // rlmmd does not consume a partition assigned here: it
                // restarted, or the assignment did not reach it. Send it
                // again; a later call answers true once it is loaded.
                let leader = assigned.and_then(|a| {
                    a.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .get(&key)
                        .copied()
                });
                if let Some(leader) = leader {
                    let one = std::slice::from_ref(&key);
                    let (l, f): (&[_], &[_]) = if leader { (one, &[]) } else { (&[], one) };
                    // Its failure leaves the answer false; the next call
                    // tries again.
                    let _ = send_assignment(&mut c, l, f, t).await;
                }
            }
            Ok(ok)
        });
        Self::finish(r, || format!("caught up of {tp}"), &Subject::Read(tp), t)
    }

    fn list(
        &self,
        tp: &TopicIdPartition,
        epoch: Option<LeaderEpoch>,
    ) -> Result<Vec<RemoteLogSegmentMetadata>, RemoteStorageError> {
        let mut c = self.client.clone();
        let msg = pb::ListSegmentsRequest {
            topic_id_partition: Some(tp_to(tp)),
            epoch: epoch.map(|e| e.0),
        };
        let t = self.list_timeout;
        let max = self.max_list_bytes;
        let r = self.run(t, async move {
            let mut stream = c
                .list_segments(request(msg, t))
                .await
                .map_err(Failure::Status)?
                .into_inner();
            let mut out = Vec::new();
            let mut bytes = 0usize;
            // A stream of a partition whose deletion finished carries
            // partition_deleted and no segment: an empty list, as the
            // trait wants.
            while let Some(batch) = stream.message().await.map_err(Failure::Status)? {
                for s in batch.segments {
                    bytes += s.encoded_len();
                    if bytes > max {
                        return Err(Failure::Error(RemoteStorageError::Backend(format!(
                            "the list is longer than max_list_bytes ({max} bytes of segments); nothing of it was kept"
                        ))));
                    }
                    out.push(segment_from(s).map_err(Failure::Error)?);
                }
            }
            Ok(out)
        });
        Self::finish(
            r,
            || match epoch {
                Some(e) => format!("list segments of {tp} for epoch {e}"),
                None => format!("list segments of {tp}"),
            },
            &Subject::Read(tp),
            t,
        )
    }
}

impl RemoteLogMetadataManager for RlmmdRemoteLogMetadataManager {
    fn add_remote_log_segment_metadata(
        &self,
        metadata: RemoteLogSegmentMetadata,
    ) -> Result<(), RemoteStorageError> {
        let mut c = self.client.clone();
        let msg = pb::AddSegmentRequest {
            segment: Some(segment_to(&metadata)),
        };
        let t = self.call_timeout;
        let r = self.run(t, async move {
            c.add_segment(request(msg, t))
                .await
                .map(|_| ())
                .map_err(Failure::Status)
        });
        let id = &metadata.remote_log_segment_id;
        Self::finish(r, || format!("add segment {id}"), &Subject::Add(id), t)
    }

    fn update_remote_log_segment_metadata(
        &self,
        update: RemoteLogSegmentMetadataUpdate,
    ) -> Result<(), RemoteStorageError> {
        let mut c = self.client.clone();
        let msg = pb::UpdateSegmentRequest {
            update: Some(update_to(&update)),
        };
        let t = self.call_timeout;
        let r = self.run(t, async move {
            c.update_segment(request(msg, t))
                .await
                .map(|_| ())
                .map_err(Failure::Status)
        });
        let id = &update.remote_log_segment_id;
        Self::finish(
            r,
            || format!("update segment {id} to {}", update.state),
            &Subject::Update(id, update.state),
            t,
        )
    }

    fn remote_log_segment_metadata(
        &self,
        topic_id_partition: &TopicIdPartition,
        leader_epoch: LeaderEpoch,
        offset: i64,
    ) -> Result<Option<RemoteLogSegmentMetadata>, RemoteStorageError> {
        let mut c = self.client.clone();
        let msg = pb::GetSegmentRequest {
            topic_id_partition: Some(tp_to(topic_id_partition)),
            epoch: leader_epoch.0,
            offset,
        };
        let t = self.call_timeout;
        let r = self.run(t, async move {
            let resp = c
                .get_segment(request(msg, t))
                .await
                .map_err(Failure::Status)?
                .into_inner();
            resp.segment
                .map(segment_from)
                .transpose()
                .map_err(Failure::Error)
        });
        Self::finish(
            r,
            || format!("segment of {topic_id_partition} at epoch {leader_epoch} offset {offset}"),
            &Subject::Read(topic_id_partition),
            t,
        )
    }

    fn highest_offset_for_epoch(
        &self,
        topic_id_partition: &TopicIdPartition,
        leader_epoch: LeaderEpoch,
    ) -> Result<Option<i64>, RemoteStorageError> {
        let mut c = self.client.clone();
        let msg = pb::HighestOffsetForEpochRequest {
            topic_id_partition: Some(tp_to(topic_id_partition)),
            epoch: leader_epoch.0,
        };
        let t = self.call_timeout;
        let r = self.run(t, async move {
            let resp = c
                .highest_offset_for_epoch(request(msg, t))
                .await
                .map_err(Failure::Status)?
                .into_inner();
            Ok(resp.found.then_some(resp.offset))
        });
        Self::finish(
            r,
            || format!("highest offset of {topic_id_partition} for epoch {leader_epoch}"),
            &Subject::Read(topic_id_partition),
            t,
        )
    }

    fn list_remote_log_segments(
        &self,
        topic_id_partition: &TopicIdPartition,
    ) -> Result<Vec<RemoteLogSegmentMetadata>, RemoteStorageError> {
        self.list(topic_id_partition, None)
    }

    fn list_remote_log_segments_by_epoch(
        &self,
        topic_id_partition: &TopicIdPartition,
        leader_epoch: LeaderEpoch,
    ) -> Result<Vec<RemoteLogSegmentMetadata>, RemoteStorageError> {
        self.list(topic_id_partition, Some(leader_epoch))
    }

    fn put_remote_partition_delete_metadata(
        &self,
        metadata: RemotePartitionDeleteMetadata,
    ) -> Result<(), RemoteStorageError> {
        let mut c = self.client.clone();
        let msg = pb::PutPartitionDeleteRequest {
            partition_delete: Some(partition_delete_to(&metadata)),
        };
        let t = self.call_timeout;
        let r = self.run(t, async move {
            c.put_partition_delete(request(msg, t))
                .await
                .map(|_| ())
                .map_err(Failure::Status)
        });
        let tp = &metadata.topic_id_partition;
        Self::finish(
            r,
            || format!("partition {tp} to {}", metadata.state),
            &Subject::PartitionDelete(tp, metadata.state),
            t,
        )
    }

    fn caught_up(&self, topic_id_partition: &TopicIdPartition) -> Result<bool, RemoteStorageError> {
        self.caught_up_of(topic_id_partition, true)
    }
}
