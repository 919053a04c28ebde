//! rlmmd's error statuses as [`RemoteStorageError`] variants.
//!
//! rlmmd puts an `ErrorDetail` in the details of every error status it
//! returns (`cmd/rlmmd/errors.go`): the library error behind it (its
//! `ErrorKind`) and whether a failed write may still have been applied
//! (`outcome_unknown`). A status without one comes from the transport (no
//! rlmmd answered) or from tonic.

use {
    crate::{
        convert::segment_state_from,
        proto::{self as pb, ErrorKind},
    },
    krabka_remote_storage::{
        RemoteLogSegmentId, RemoteLogSegmentState, RemotePartitionDeleteState, RemoteStorageError,
        TopicIdPartition,
    },
    prost::Message,
    std::{error::Error as _, io},
    tonic::Code,
};

/// What a failed [`RemoteStorageError::Io`] was: carried inside the
/// `std::io::Error` (`io_error.get_ref()` downcasts to it), so that a
/// caller can tell a write that was not applied from one whose outcome is
/// unknown ([`outcome_unknown`]).
#[derive(Debug, thiserror::Error)]
#[error("rlmmd {what}: {code:?}{}: {message}", if *.outcome_unknown { " [outcome unknown: the write may have been applied]" } else { "" })]
pub struct RlmmdCallError {
    /// The call, e.g. `add segment <id>`.
    pub what: String,
    /// The gRPC status code (`DeadlineExceeded` for the manager's own
    /// deadline too).
    pub code: Code,
    /// rlmmd's or the transport's message.
    pub message: String,
    /// True when a failed write may nevertheless have been applied: read
    /// back before retrying, or retry (a retried add then fails with
    /// `InvalidAdd`; a retried update is idempotent). Always false for
    /// reads, and for a call that never reached rlmmd.
    pub outcome_unknown: bool,
}

/// Whether `err` is an [`Io`](RemoteStorageError::Io) failure of a write
/// that may nevertheless have been applied. Every other error, and every
/// error of a read, leaves the store as it was.
#[must_use]
pub fn outcome_unknown(err: &RemoteStorageError) -> bool {
    match err {
        RemoteStorageError::Io(e) => e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<RlmmdCallError>())
            .is_some_and(|c| c.outcome_unknown),
        _ => false,
    }
}

/// What a call was about, for the fields of the variants.
pub enum Subject<'a> {
    Add(&'a RemoteLogSegmentId),
    Update(&'a RemoteLogSegmentId, RemoteLogSegmentState),
    PartitionDelete(&'a TopicIdPartition, RemotePartitionDeleteState),
    Read(&'a TopicIdPartition),
    Assignment,
}

impl Subject<'_> {
    fn is_write(&self) -> bool {
        matches!(
            self,
            Self::Add(_) | Self::Update(..) | Self::PartitionDelete(..)
        )
    }
}

const ERROR_DETAIL_TYPE: &str = "type.googleapis.com/remotestorage.v1.ErrorDetail";

/// The `ErrorDetail` of a status, if rlmmd put one there: the details of
/// the status are a `google.rpc.Status` (`tonic_types::Status`), and its
/// `details` hold the `ErrorDetail` as a `google.protobuf.Any`.
fn detail(status: &tonic::Status) -> Option<pb::ErrorDetail> {
    if status.details().is_empty() {
        return None;
    }
    let st = tonic_types::Status::decode(status.details()).ok()?;
    st.details
        .iter()
        .find(|a| a.type_url == ERROR_DETAIL_TYPE)
        .and_then(|a| pb::ErrorDetail::decode(a.value.as_slice()).ok())
}

/// Whether the transport failed before anything reached rlmmd: nothing
/// listens at the target (connection refused, no such socket).
fn never_sent(status: &tonic::Status) -> bool {
    let mut src: Option<&(dyn std::error::Error + 'static)> = status.source();
    while let Some(e) = src {
        if let Some(io) = e.downcast_ref::<io::Error>()
            && matches!(
                io.kind(),
                io::ErrorKind::ConnectionRefused | io::ErrorKind::NotFound
            )
        {
            return true;
        }
        src = e.source();
    }
    false
}

const SEGMENT_STATES: [RemoteLogSegmentState; 4] = [
    RemoteLogSegmentState::CopySegmentStarted,
    RemoteLogSegmentState::CopySegmentFinished,
    RemoteLogSegmentState::DeleteSegmentStarted,
    RemoteLogSegmentState::DeleteSegmentFinished,
];

const PARTITION_DELETE_STATES: [RemotePartitionDeleteState; 3] = [
    RemotePartitionDeleteState::DeletePartitionMarked,
    RemotePartitionDeleteState::DeletePartitionStarted,
    RemotePartitionDeleteState::DeletePartitionFinished,
];

/// The state a refused update found: the `ErrorDetail`'s
/// `found_segment_state`, or, from an rlmmd that does not send it, its
/// message ("… FROM to TO"). `to` when neither names one (the refusal read
/// no segment: an update to `CopySegmentStarted`, oversized custom
/// metadata).
fn segment_from_state(
    detail: Option<&pb::ErrorDetail>,
    message: &str,
    to: RemoteLogSegmentState,
) -> RemoteLogSegmentState {
    if let Some(found) = detail.and_then(|d| d.found_segment_state) {
        return segment_state_from(found).unwrap_or(to);
    }
    SEGMENT_STATES
        .into_iter()
        .find(|from| message.contains(&format!("{from} to {to}")))
        .unwrap_or(to)
}

/// The delete state a refused partition-delete event found (`None`: no
/// record): the `ErrorDetail`'s `found_partition_delete_state`, or, from an
/// rlmmd that does not send it, its message ("… FROM to TO", FROM is
/// `NONE` without a record).
fn partition_delete_from_state(
    detail: Option<&pb::ErrorDetail>,
    message: &str,
    to: RemotePartitionDeleteState,
) -> Option<RemotePartitionDeleteState> {
    if let Some(found) = detail.and_then(|d| d.found_partition_delete_state) {
        return match pb::PartitionDeleteState::try_from(found) {
            Ok(pb::PartitionDeleteState::DeletePartitionMarked) => {
                Some(RemotePartitionDeleteState::DeletePartitionMarked)
            }
            Ok(pb::PartitionDeleteState::DeletePartitionStarted) => {
                Some(RemotePartitionDeleteState::DeletePartitionStarted)
            }
            Ok(pb::PartitionDeleteState::DeletePartitionFinished) => {
                Some(RemotePartitionDeleteState::DeletePartitionFinished)
            }
            _ => None,
        };
    }
    PARTITION_DELETE_STATES
        .into_iter()
        .find(|from| message.contains(&format!("{from} to {to}")))
}

fn io_error(kind: io::ErrorKind, call: RlmmdCallError) -> RemoteStorageError {
    RemoteStorageError::Io(io::Error::new(kind, call))
}

/// The manager's own deadline ran out before rlmmd answered.
pub fn deadline_error(
    what: String,
    subject: &Subject<'_>,
    after: std::time::Duration,
) -> RemoteStorageError {
    io_error(
        io::ErrorKind::TimedOut,
        RlmmdCallError {
            what,
            code: Code::DeadlineExceeded,
            message: format!("no answer within the deadline of {after:?}"),
            outcome_unknown: subject.is_write(),
        },
    )
}

/// The variant for a failed call.
pub fn to_error(what: String, subject: &Subject<'_>, status: &tonic::Status) -> RemoteStorageError {
    let message = status.message().to_owned();
    let d = detail(status);
    let kind = d
        .as_ref()
        .and_then(|d| ErrorKind::try_from(d.kind).ok())
        .unwrap_or(ErrorKind::Unspecified);
    match (kind, subject) {
        (ErrorKind::InvalidAdd, Subject::Add(id)) => {
            return RemoteStorageError::InvalidAdd {
                id: (*id).clone(),
                reason: message,
            };
        }
        (ErrorKind::SegmentNotFound, Subject::Update(id, _)) => {
            return RemoteStorageError::SegmentNotFound((*id).clone());
        }
        (ErrorKind::InvalidSegmentTransition, Subject::Update(id, to)) => {
            return RemoteStorageError::InvalidSegmentTransition {
                id: (*id).clone(),
                from: segment_from_state(d.as_ref(), &message, *to),
                to: *to,
            };
        }
        (ErrorKind::InvalidPartitionDeleteTransition, Subject::PartitionDelete(tp, to)) => {
            return RemoteStorageError::InvalidPartitionDeleteTransition {
                tp: (*tp).clone(),
                from: partition_delete_from_state(d.as_ref(), &message, *to),
                to: *to,
            };
        }
        (ErrorKind::NotReady, Subject::Read(tp)) => {
            return RemoteStorageError::NotReady {
                partition: tp.partition,
            };
        }
        _ => {}
    }
    let io_kind = match status.code() {
        Code::DeadlineExceeded => Some(io::ErrorKind::TimedOut),
        Code::Cancelled => Some(io::ErrorKind::Interrupted),
        Code::Unavailable | Code::Unknown | Code::Internal | Code::Aborted => {
            Some(io::ErrorKind::Other)
        }
        _ if kind == ErrorKind::Io => Some(io::ErrorKind::Other),
        _ => None,
    };
    match io_kind {
        Some(io_kind) => {
            let outcome_unknown = match &d {
                Some(d) => d.outcome_unknown,
                // No detail: the transport failed. A write that reached
                // rlmmd may have been applied.
                None => subject.is_write() && !never_sent(status),
            };
            let io_kind = if d.is_none() && never_sent(status) {
                io::ErrorKind::NotConnected
            } else {
                io_kind
            };
            io_error(
                io_kind,
                RlmmdCallError {
                    what,
                    code: status.code(),
                    message,
                    outcome_unknown,
                },
            )
        }
        None if status.code() == Code::InvalidArgument => {
            RemoteStorageError::InvalidArgument(format!("rlmmd {what}: {message}"))
        }
        None => RemoteStorageError::Backend(format!(
            "rlmmd {what}: {:?} ({kind:?}): {message}",
            status.code()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_states_are_read_from_the_detail_or_else_rlmmds_messages() {
        use RemoteLogSegmentState::*;
        let m = "remotestorage: invalid segment state transition: segment 1f: DELETE_SEGMENT_STARTED to COPY_SEGMENT_FINISHED";
        assert_eq!(
            segment_from_state(None, m, CopySegmentFinished),
            DeleteSegmentStarted
        );
        let found = pb::ErrorDetail {
            kind: ErrorKind::InvalidSegmentTransition.into(),
            found_segment_state: Some(pb::SegmentState::DeleteSegmentFinished.into()),
            ..Default::default()
        };
        assert_eq!(
            segment_from_state(Some(&found), m, CopySegmentFinished),
            DeleteSegmentFinished,
            "the detail first"
        );
        let m = "remotestorage: invalid segment state transition: segment 1f: no segment may move to COPY_SEGMENT_STARTED";
        assert_eq!(
            segment_from_state(None, m, CopySegmentStarted),
            CopySegmentStarted
        );
        use RemotePartitionDeleteState::*;
        let m = "remotestorage: invalid partition delete state transition: partition t-0: NONE to DELETE_PARTITION_STARTED";
        assert_eq!(
            partition_delete_from_state(None, m, DeletePartitionStarted),
            None
        );
        let m = "remotestorage: invalid partition delete state transition: partition t-0: DELETE_PARTITION_FINISHED to DELETE_PARTITION_MARKED";
        assert_eq!(
            partition_delete_from_state(None, m, DeletePartitionMarked),
            Some(DeletePartitionFinished)
        );
        let none = pb::ErrorDetail {
            kind: ErrorKind::InvalidPartitionDeleteTransition.into(),
            found_partition_delete_state: Some(pb::PartitionDeleteState::Unspecified.into()),
            ..Default::default()
        };
        assert_eq!(
            partition_delete_from_state(Some(&none), m, DeletePartitionMarked),
            None,
            "the detail first: no record"
        );
    }

    #[test]
    fn the_detail_is_found_among_others_and_garbage_has_none() {
        use tonic_types::{ErrorDetails, StatusExt};
        let d = pb::ErrorDetail {
            kind: ErrorKind::InvalidSegmentTransition.into(),
            found_segment_state: Some(pb::SegmentState::DeleteSegmentStarted.into()),
            ..Default::default()
        };
        // A standard detail (google.rpc.ErrorInfo) before rlmmd's.
        let other = tonic::Status::with_error_details(
            Code::FailedPrecondition,
            "refused",
            ErrorDetails::with_error_info("REASON", "rlmmd", []),
        );
        let mut st = tonic_types::Status::decode(other.details()).unwrap();
        st.details.push(prost_types::Any {
            type_url: ERROR_DETAIL_TYPE.into(),
            value: d.encode_to_vec(),
        });
        let status = tonic::Status::with_details(
            Code::FailedPrecondition,
            "refused",
            st.encode_to_vec().into(),
        );
        assert_eq!(detail(&status), Some(d));
        let garbage = tonic::Status::with_details(Code::Internal, "x", vec![0xff, 0xff].into());
        assert_eq!(detail(&garbage), None);
        assert_eq!(detail(&tonic::Status::internal("x")), None);
    }

    #[test]
    fn a_detail_names_the_variant_and_the_outcome() {
        let d = pb::ErrorDetail {
            kind: ErrorKind::Io.into(),
            outcome_unknown: true,
            ..Default::default()
        };
        let st = tonic_types::Status {
            code: Code::Unavailable as i32,
            message: "down".into(),
            details: vec![prost_types::Any {
                type_url: ERROR_DETAIL_TYPE.into(),
                value: d.encode_to_vec(),
            }],
        };
        let status =
            tonic::Status::with_details(Code::Unavailable, "down", st.encode_to_vec().into());
        let tp = TopicIdPartition {
            topic_id: uuid::Uuid::nil(),
            topic: "t".into(),
            partition: 0,
        };
        let id = RemoteLogSegmentId {
            topic_id_partition: tp,
            id: uuid::Uuid::nil(),
        };
        let e = to_error("add".into(), &Subject::Add(&id), &status);
        assert!(matches!(e, RemoteStorageError::Io(_)), "{e:?}");
        assert!(outcome_unknown(&e));
    }
}
