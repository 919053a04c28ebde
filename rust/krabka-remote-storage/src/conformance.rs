//! A conformance suite any [`RemoteLogMetadataManager`] must pass.
//!
//! Each check takes a fresh manager and panics, naming what differed, when
//! the manager does not behave as the store's API defines. Every check uses
//! its own random topic id, so checks may share one store.

use {
    crate::{
        CustomMetadata, RemoteLogMetadataManager, RemoteLogSegmentId, RemoteLogSegmentMetadata,
        RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState, RemotePartitionDeleteMetadata,
        RemotePartitionDeleteState, RemoteStorageError, TopicIdPartition,
    },
    krabka_ids::LeaderEpoch,
    std::collections::BTreeMap,
    uuid::Uuid,
};

use RemoteLogSegmentState::{
    CopySegmentFinished as CF, CopySegmentStarted as CS, DeleteSegmentFinished as DF,
    DeleteSegmentStarted as DS,
};

/// One conformance check: panics when the manager misbehaves.
pub type Check = fn(&dyn RemoteLogMetadataManager);

/// Every check, by name.
pub const CHECKS: &[(&str, Check)] = &[
    ("lifecycle", lifecycle),
    ("segment_transitions", segment_transitions),
    ("refused_adds", refused_adds),
    ("lookup_overlaps", lookup_overlaps),
    ("lists_and_highest", lists_and_highest),
    ("partition_delete", partition_delete),
    ("unknown_partition", unknown_partition),
];

/// A fresh partition with a random topic id.
#[must_use]
pub fn new_tp(partition: i32) -> TopicIdPartition {
    TopicIdPartition {
        topic_id: Uuid::new_v4(),
        topic: "conformance".into(),
        partition,
    }
}

/// A `CopySegmentStarted` segment of `tp` over `[start, end]` with `epochs`.
#[must_use]
pub fn segment(
    tp: &TopicIdPartition,
    start: i64,
    end: i64,
    epochs: &[(i32, i64)],
) -> RemoteLogSegmentMetadata {
    RemoteLogSegmentMetadata {
        remote_log_segment_id: RemoteLogSegmentId {
            topic_id_partition: tp.clone(),
            id: Uuid::new_v4(),
        },
        start_offset: start,
        end_offset: end,
        max_timestamp_ms: 1000 + end,
        broker_id: 1,
        event_timestamp_ms: 10,
        segment_size_in_bytes: 100,
        custom_metadata: None,
        state: CS,
        segment_leader_epochs: epochs.iter().map(|&(e, o)| (LeaderEpoch(e), o)).collect(),
        txn_index_empty: true,
    }
}

fn update(
    m: &RemoteLogSegmentMetadata,
    state: RemoteLogSegmentState,
) -> RemoteLogSegmentMetadataUpdate {
    RemoteLogSegmentMetadataUpdate {
        remote_log_segment_id: m.remote_log_segment_id.clone(),
        event_timestamp_ms: 20,
        custom_metadata: None,
        state,
        broker_id: 2,
    }
}

fn with_state(
    m: &RemoteLogSegmentMetadata,
    state: RemoteLogSegmentState,
) -> RemoteLogSegmentMetadata {
    let mut m = m.clone();
    m.state = state;
    if state != CS {
        m.broker_id = 2;
        m.event_timestamp_ms = 20;
    }
    m
}

fn add_in(
    rlmm: &dyn RemoteLogMetadataManager,
    m: &RemoteLogSegmentMetadata,
    to: &[RemoteLogSegmentState],
) {
    rlmm.add_remote_log_segment_metadata(m.clone())
        .expect("add");
    for &s in to {
        rlmm.update_remote_log_segment_metadata(update(m, s))
            .expect("update");
    }
}

fn ids(v: &[RemoteLogSegmentMetadata]) -> Vec<Uuid> {
    v.iter().map(|m| m.remote_log_segment_id.id).collect()
}

/// Add, finish, look up, delete, forget.
pub fn lifecycle(rlmm: &dyn RemoteLogMetadataManager) {
    let tp = new_tp(0);
    let m = segment(&tp, 0, 99, &[(0, 0), (3, 50)]);
    rlmm.add_remote_log_segment_metadata(m.clone()).unwrap();
    assert_eq!(rlmm.list_remote_log_segments(&tp).unwrap(), vec![m.clone()]);
    assert_eq!(
        rlmm.remote_log_segment_metadata(&tp, LeaderEpoch(0), 10)
            .unwrap(),
        None,
        "started segments are invisible to lookups"
    );
    let mut u = update(&m, CF);
    u.custom_metadata = Some(CustomMetadata(vec![1, 2, 3]));
    rlmm.update_remote_log_segment_metadata(u).unwrap();
    let mut fin = with_state(&m, CF);
    fin.custom_metadata = Some(CustomMetadata(vec![1, 2, 3]));
    assert_eq!(
        rlmm.remote_log_segment_metadata(&tp, LeaderEpoch(0), 10)
            .unwrap(),
        Some(fin.clone())
    );
    assert_eq!(
        rlmm.remote_log_segment_metadata(&tp, LeaderEpoch(0), 50)
            .unwrap(),
        None,
        "offset 50 is in epoch 3's range"
    );
    assert_eq!(
        rlmm.remote_log_segment_metadata(&tp, LeaderEpoch(3), 99)
            .unwrap(),
        Some(fin.clone())
    );
    assert_eq!(
        rlmm.highest_offset_for_epoch(&tp, LeaderEpoch(0)).unwrap(),
        Some(99)
    );
    rlmm.update_remote_log_segment_metadata(update(&m, DS))
        .unwrap();
    assert_eq!(
        rlmm.remote_log_segment_metadata(&tp, LeaderEpoch(0), 10)
            .unwrap(),
        None
    );
    assert_eq!(
        ids(&rlmm.list_remote_log_segments(&tp).unwrap()),
        vec![m.remote_log_segment_id.id]
    );
    rlmm.update_remote_log_segment_metadata(update(&m, DF))
        .unwrap();
    assert_eq!(rlmm.list_remote_log_segments(&tp).unwrap(), vec![]);
    // A finished-and-forgotten id stays taken.
    assert!(matches!(
        rlmm.add_remote_log_segment_metadata(m.clone()),
        Err(RemoteStorageError::InvalidAdd { .. })
    ));
    assert!(rlmm.caught_up(&tp).is_ok());
}

/// Every pair of states, from each reachable state.
pub fn segment_transitions(rlmm: &dyn RemoteLogMetadataManager) {
    let paths: &[(RemoteLogSegmentState, &[RemoteLogSegmentState])] =
        &[(CS, &[]), (CF, &[CF]), (DS, &[DS]), (DF, &[DS, DF])];
    for &(from, path) in paths {
        for to in [CS, CF, DS, DF] {
            let tp = new_tp(0);
            let m = segment(&tp, 0, 9, &[(0, 0)]);
            add_in(rlmm, &m, path);
            let r = rlmm.update_remote_log_segment_metadata(update(&m, to));
            let allowed = from.can_transition_to(to);
            match (&r, allowed) {
                (Ok(()), true) => {}
                (
                    Err(RemoteStorageError::InvalidSegmentTransition { from: f, to: t, .. }),
                    false,
                ) => {
                    assert_eq!(*t, to);
                    if to != CS {
                        assert_eq!(*f, from);
                    }
                    if from != DF {
                        let listed = rlmm.list_remote_log_segments(&tp).unwrap();
                        assert_eq!(listed.len(), 1);
                        assert_eq!(listed[0].state, from, "a refused update changes nothing");
                    }
                }
                _ => panic!("{from} -> {to}: got {r:?}, allowed={allowed}"),
            }
        }
    }
    // An update to COPY_SEGMENT_STARTED is refused even for an unknown id.
    let tp = new_tp(0);
    let ghost = segment(&tp, 0, 9, &[(0, 0)]);
    assert!(matches!(
        rlmm.update_remote_log_segment_metadata(update(&ghost, CS)),
        Err(RemoteStorageError::InvalidSegmentTransition { .. })
    ));
    assert!(matches!(
        rlmm.update_remote_log_segment_metadata(update(&ghost, CF)),
        Err(RemoteStorageError::SegmentNotFound(_))
    ));
    // An id under another partition is not found.
    let m = segment(&tp, 0, 9, &[(0, 0)]);
    rlmm.add_remote_log_segment_metadata(m.clone()).unwrap();
    let mut other = update(&m, CF);
    other.remote_log_segment_id.topic_id_partition.partition = 1;
    assert!(matches!(
        rlmm.update_remote_log_segment_metadata(other),
        Err(RemoteStorageError::SegmentNotFound(_))
    ));
}

/// Every rule of a valid add; a refused add stores nothing.
pub fn refused_adds(rlmm: &dyn RemoteLogMetadataManager) {
    let tp = new_tp(0);
    let base = segment(&tp, 10, 19, &[(0, 10), (1, 15)]);
    type Mutate = Box<dyn Fn(&mut RemoteLogSegmentMetadata)>;
    let cases: Vec<(&str, Mutate)> = vec![
        ("state not started", Box::new(|m| m.state = CF)),
        (
            "nil topic id",
            Box::new(|m| m.remote_log_segment_id.topic_id_partition.topic_id = Uuid::nil()),
        ),
        (
            "nil segment id",
            Box::new(|m| m.remote_log_segment_id.id = Uuid::nil()),
        ),
        (
            "empty topic",
            Box::new(|m| m.remote_log_segment_id.topic_id_partition.topic = String::new()),
        ),
        (
            "topic ..",
            Box::new(|m| m.remote_log_segment_id.topic_id_partition.topic = "..".into()),
        ),
        (
            "topic bad char",
            Box::new(|m| m.remote_log_segment_id.topic_id_partition.topic = "a/b".into()),
        ),
        (
            "topic too long",
            Box::new(|m| m.remote_log_segment_id.topic_id_partition.topic = "a".repeat(250)),
        ),
        (
            "negative partition",
            Box::new(|m| m.remote_log_segment_id.topic_id_partition.partition = -1),
        ),
        (
            "negative start",
            Box::new(|m| {
                m.start_offset = -1;
                m.segment_leader_epochs = BTreeMap::from([(LeaderEpoch(0), -1)]);
            }),
        ),
        ("offsets out of order", Box::new(|m| m.end_offset = 9)),
        (
            "empty epochs",
            Box::new(|m| m.segment_leader_epochs.clear()),
        ),
        (
            "negative epoch",
            Box::new(|m| {
                m.segment_leader_epochs.insert(LeaderEpoch(-1), 10);
            }),
        ),
        (
            "epoch start before segment",
            Box::new(|m| {
                m.segment_leader_epochs.insert(LeaderEpoch(0), 9);
            }),
        ),
        (
            "epoch start after segment",
            Box::new(|m| {
                m.segment_leader_epochs.insert(LeaderEpoch(2), 20);
            }),
        ),
        (
            "epoch starts not increasing",
            Box::new(|m| {
                m.segment_leader_epochs.insert(LeaderEpoch(1), 10);
            }),
        ),
        ("negative size", Box::new(|m| m.segment_size_in_bytes = -1)),
        (
            "oversized custom metadata",
            Box::new(|m| m.custom_metadata = Some(CustomMetadata(vec![0; 65537]))),
        ),
    ];
    for (name, mutate) in cases {
        let mut m = base.clone();
        m.remote_log_segment_id.id = Uuid::new_v4();
        mutate(&mut m);
        match rlmm.add_remote_log_segment_metadata(m.clone()) {
            Err(RemoteStorageError::InvalidAdd { .. } | RemoteStorageError::InvalidArgument(_)) => {
            }
            r => panic!("{name}: got {r:?}, want InvalidAdd"),
        }
        assert_eq!(
            rlmm.list_remote_log_segments(&m.remote_log_segment_id.topic_id_partition)
                .unwrap(),
            vec![],
            "{name}: nothing stored"
        );
    }
    // A duplicate id.
    rlmm.add_remote_log_segment_metadata(base.clone()).unwrap();
    let mut dup = base.clone();
    dup.start_offset = 10;
    dup.end_offset = 30;
    assert!(matches!(
        rlmm.add_remote_log_segment_metadata(dup),
        Err(RemoteStorageError::InvalidAdd { .. })
    ));
    assert_eq!(
        rlmm.list_remote_log_segments(&tp).unwrap(),
        vec![base.clone()]
    );
    // Oversized custom metadata on update, of a known and an unknown id.
    let mut ghost = update(&base, CF);
    ghost.remote_log_segment_id.id = Uuid::new_v4();
    ghost.custom_metadata = Some(CustomMetadata(vec![0; 65537]));
    assert!(matches!(
        rlmm.update_remote_log_segment_metadata(ghost),
        Err(RemoteStorageError::InvalidSegmentTransition { .. })
    ));
    let mut u = update(&base, CF);
    u.custom_metadata = Some(CustomMetadata(vec![0; 65537]));
    assert!(matches!(
        rlmm.update_remote_log_segment_metadata(u),
        Err(RemoteStorageError::InvalidSegmentTransition { .. })
    ));
    assert_eq!(rlmm.list_remote_log_segments(&tp).unwrap(), vec![base]);
}

/// Overlapping uploads: the range that starts latest wins; a tie goes to
/// the segment finished last; a retried finish changes nothing.
pub fn lookup_overlaps(rlmm: &dyn RemoteLogMetadataManager) {
    let tp = new_tp(0);
    let a = segment(&tp, 0, 100, &[(0, 0)]);
    let b = segment(&tp, 50, 150, &[(0, 50)]);
    add_in(rlmm, &a, &[CF]);
    add_in(rlmm, &b, &[CF]);
    let at = |o| {
        rlmm.remote_log_segment_metadata(&tp, LeaderEpoch(0), o)
            .unwrap()
            .map(|m| m.remote_log_segment_id.id)
    };
    assert_eq!(at(10), Some(a.remote_log_segment_id.id));
    assert_eq!(
        at(60),
        Some(b.remote_log_segment_id.id),
        "the range that starts latest wins"
    );
    assert_eq!(at(151), None);
    // Tie on the range start: the one finished last wins.
    let c = segment(&tp, 50, 120, &[(0, 50)]);
    let d = segment(&tp, 50, 120, &[(0, 50)]);
    add_in(rlmm, &d, &[]);
    add_in(rlmm, &c, &[CF]);
    rlmm.update_remote_log_segment_metadata(update(&d, CF))
        .unwrap();
    assert_eq!(at(60), Some(d.remote_log_segment_id.id));
    rlmm.update_remote_log_segment_metadata(update(&c, CF))
        .unwrap();
    assert_eq!(
        at(60),
        Some(d.remote_log_segment_id.id),
        "a retried finish changes nothing"
    );
    // Epoch ranges end before the next epoch's start.
    let tp2 = new_tp(1);
    let e = segment(&tp2, 0, 99, &[(1, 0), (2, 40)]);
    add_in(rlmm, &e, &[CF]);
    assert!(
        rlmm.remote_log_segment_metadata(&tp2, LeaderEpoch(1), 39)
            .unwrap()
            .is_some()
    );
    assert!(
        rlmm.remote_log_segment_metadata(&tp2, LeaderEpoch(1), 40)
            .unwrap()
            .is_none()
    );
    assert!(
        rlmm.remote_log_segment_metadata(&tp2, LeaderEpoch(2), 40)
            .unwrap()
            .is_some()
    );
    assert!(
        rlmm.remote_log_segment_metadata(&tp2, LeaderEpoch(0), 10)
            .unwrap()
            .is_none()
    );
}

/// List order, by-epoch lists, and the highest offset of an epoch.
pub fn lists_and_highest(rlmm: &dyn RemoteLogMetadataManager) {
    let tp = new_tp(3);
    let s1 = segment(&tp, 100, 199, &[(1, 100)]);
    let s2 = segment(&tp, 0, 99, &[(0, 0), (1, 50)]);
    let s3 = segment(&tp, 100, 150, &[(2, 100)]);
    add_in(rlmm, &s1, &[CF]);
    add_in(rlmm, &s2, &[]);
    add_in(rlmm, &s3, &[CF, DS]);
    let all = rlmm.list_remote_log_segments(&tp).unwrap();
    assert_eq!(
        ids(&all),
        ids(&[s2.clone(), s1.clone(), s3.clone()]),
        "by start offset, ties by add order"
    );
    assert_eq!(
        ids(&rlmm
            .list_remote_log_segments_by_epoch(&tp, LeaderEpoch(1))
            .unwrap()),
        ids(&[s2.clone(), s1.clone()])
    );
    assert_eq!(
        ids(&rlmm
            .list_remote_log_segments_by_epoch(&tp, LeaderEpoch(2))
            .unwrap()),
        ids(std::slice::from_ref(&s3))
    );
    assert_eq!(
        rlmm.highest_offset_for_epoch(&tp, LeaderEpoch(1)).unwrap(),
        Some(199)
    );
    assert_eq!(
        rlmm.highest_offset_for_epoch(&tp, LeaderEpoch(0)).unwrap(),
        None,
        "only finished segments count"
    );
    assert_eq!(
        rlmm.highest_offset_for_epoch(&tp, LeaderEpoch(2)).unwrap(),
        None
    );
}

/// Partition deletion: transitions, adds refused, everything forgotten.
pub fn partition_delete(rlmm: &dyn RemoteLogMetadataManager) {
    use RemotePartitionDeleteState::*;
    let put = |tp: &TopicIdPartition, state| {
        rlmm.put_remote_partition_delete_metadata(RemotePartitionDeleteMetadata {
            topic_id_partition: tp.clone(),
            state,
            event_timestamp_ms: 5,
            broker_id: 1,
        })
    };
    let paths: &[(
        Option<RemotePartitionDeleteState>,
        &[RemotePartitionDeleteState],
    )] = &[
        (None, &[]),
        (Some(DeletePartitionMarked), &[DeletePartitionMarked]),
        (
            Some(DeletePartitionStarted),
            &[DeletePartitionMarked, DeletePartitionStarted],
        ),
        (
            Some(DeletePartitionFinished),
            &[
                DeletePartitionMarked,
                DeletePartitionStarted,
                DeletePartitionFinished,
            ],
        ),
    ];
    for &(from, path) in paths {
        for to in [
            DeletePartitionMarked,
            DeletePartitionStarted,
            DeletePartitionFinished,
        ] {
            let tp = new_tp(0);
            for &s in path {
                put(&tp, s).unwrap();
            }
            let r = put(&tp, to);
            match (&r, RemotePartitionDeleteState::can_transition(from, to)) {
                (Ok(()), true) => {}
                (
                    Err(RemoteStorageError::InvalidPartitionDeleteTransition {
                        from: f,
                        to: t,
                        ..
                    }),
                    false,
                ) => {
                    assert_eq!((*f, *t), (from, to));
                }
                _ => panic!("{from:?} -> {to}: got {r:?}"),
            }
        }
    }
    let mut bad = new_tp(0);
    bad.topic = "..".into();
    assert!(matches!(
        put(&bad, DeletePartitionMarked),
        Err(RemoteStorageError::InvalidPartitionDeleteTransition { .. })
    ));
    let tp = new_tp(0);
    let m = segment(&tp, 0, 9, &[(0, 0)]);
    add_in(rlmm, &m, &[CF]);
    put(&tp, DeletePartitionMarked).unwrap();
    assert!(matches!(
        rlmm.add_remote_log_segment_metadata(segment(&tp, 10, 19, &[(0, 10)])),
        Err(RemoteStorageError::InvalidAdd { .. })
    ));
    rlmm.update_remote_log_segment_metadata(update(&m, DS))
        .unwrap();
    put(&tp, DeletePartitionStarted).unwrap();
    put(&tp, DeletePartitionFinished).unwrap();
    assert_eq!(rlmm.list_remote_log_segments(&tp).unwrap(), vec![]);
    assert!(matches!(
        rlmm.update_remote_log_segment_metadata(update(&m, DF)),
        Err(RemoteStorageError::SegmentNotFound(_))
    ));
}

/// An unknown partition is not an error.
pub fn unknown_partition(rlmm: &dyn RemoteLogMetadataManager) {
    let tp = new_tp(7);
    assert_eq!(
        rlmm.remote_log_segment_metadata(&tp, LeaderEpoch(0), 0)
            .unwrap(),
        None
    );
    assert_eq!(
        rlmm.highest_offset_for_epoch(&tp, LeaderEpoch(0)).unwrap(),
        None
    );
    assert_eq!(rlmm.list_remote_log_segments(&tp).unwrap(), vec![]);
    assert_eq!(
        rlmm.list_remote_log_segments_by_epoch(&tp, LeaderEpoch(0))
            .unwrap(),
        vec![]
    );
}
