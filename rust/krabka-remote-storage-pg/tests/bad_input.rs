//! Bad input through rlmmd: each refused with its variant, and nothing
//! stored: the partition lists as before, and a refused add leaves its id
//! free for a valid add.

mod support;

use {
    krabka_ids::LeaderEpoch,
    krabka_remote_storage::{
        CustomMetadata, RemoteLogMetadataManager, RemoteLogSegmentMetadataUpdate,
        RemoteLogSegmentState, RemoteStorageError,
        conformance::{new_tp, segment},
    },
    support::{Rlmmd, manager, shared_postgres},
    uuid::Uuid,
};

#[test]
fn bad_adds_are_invalid_add_and_store_nothing() {
    let d = Rlmmd::unix(&shared_postgres().database());
    let rlmm = manager(&d.target);
    let tp = new_tp(0);
    let existing = segment(&tp, 0, 9, &[(0, 0)]);
    rlmm.add_remote_log_segment_metadata(existing.clone())
        .unwrap();
    let before = rlmm.list_remote_log_segments(&tp).unwrap();
    type Break = fn(&mut krabka_remote_storage::RemoteLogSegmentMetadata);
    let cases: [(&str, Break); 4] = [
        ("offsets out of order", |m| {
            m.end_offset = m.start_offset - 1
        }),
        ("empty epoch map", |m| m.segment_leader_epochs.clear()),
        ("oversized custom metadata", |m| {
            m.custom_metadata = Some(CustomMetadata(vec![0; 65537]));
        }),
        ("epoch start outside the segment", |m| {
            m.segment_leader_epochs
                .insert(LeaderEpoch(5), m.end_offset + 1);
        }),
    ];
    for (what, break_it) in cases {
        let good = segment(&tp, 10, 19, &[(0, 10)]);
        let mut bad = good.clone();
        break_it(&mut bad);
        match rlmm.add_remote_log_segment_metadata(bad) {
            Err(RemoteStorageError::InvalidAdd { id, .. }) => {
                assert_eq!(id, good.remote_log_segment_id, "{what}");
            }
            r => panic!("{what}: {r:?}"),
        }
        assert_eq!(
            rlmm.list_remote_log_segments(&tp).unwrap(),
            before,
            "{what}"
        );
        // The id was not taken: the valid add of it succeeds.
        rlmm.add_remote_log_segment_metadata(good.clone())
            .unwrap_or_else(|e| panic!("{what}: the id stayed taken: {e:?}"));
        // Forget it again, so that the next case starts from `before`.
        for state in [
            RemoteLogSegmentState::DeleteSegmentStarted,
            RemoteLogSegmentState::DeleteSegmentFinished,
        ] {
            rlmm.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate {
                remote_log_segment_id: good.remote_log_segment_id.clone(),
                event_timestamp_ms: 1,
                custom_metadata: None,
                state,
                broker_id: 1,
            })
            .unwrap();
        }
        assert_eq!(
            rlmm.list_remote_log_segments(&tp).unwrap(),
            before,
            "{what}"
        );
    }
    // A duplicate id: refused, the stored segment unchanged.
    let mut dup = segment(&tp, 100, 199, &[(0, 100)]);
    dup.remote_log_segment_id = existing.remote_log_segment_id.clone();
    assert!(matches!(
        rlmm.add_remote_log_segment_metadata(dup),
        Err(RemoteStorageError::InvalidAdd { .. })
    ));
    assert_eq!(rlmm.list_remote_log_segments(&tp).unwrap(), before);
}

#[test]
fn an_unknown_segment_is_not_found_and_nothing_is_stored() {
    let d = Rlmmd::unix(&shared_postgres().database());
    let rlmm = manager(&d.target);
    let tp = new_tp(0);
    let ghost = segment(&tp, 0, 9, &[(0, 0)]);
    for state in [
        RemoteLogSegmentState::CopySegmentFinished,
        RemoteLogSegmentState::DeleteSegmentStarted,
    ] {
        let r = rlmm.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate {
            remote_log_segment_id: ghost.remote_log_segment_id.clone(),
            event_timestamp_ms: 1,
            custom_metadata: Some(CustomMetadata(vec![1])),
            state,
            broker_id: 1,
        });
        match r {
            Err(RemoteStorageError::SegmentNotFound(id)) => {
                assert_eq!(id, ghost.remote_log_segment_id);
            }
            r => panic!("{state}: {r:?}"),
        }
    }
    assert_eq!(rlmm.list_remote_log_segments(&tp).unwrap(), vec![]);
    assert_eq!(
        rlmm.remote_log_segment_metadata(&tp, LeaderEpoch(0), 5)
            .unwrap(),
        None
    );
    // The id is free.
    rlmm.add_remote_log_segment_metadata(ghost.clone()).unwrap();
    assert_eq!(rlmm.list_remote_log_segments(&tp).unwrap(), vec![ghost]);
    // An update with oversized custom metadata: refused, nothing changed.
    let other = Uuid::new_v4();
    let mut id = rlmm.list_remote_log_segments(&tp).unwrap()[0]
        .remote_log_segment_id
        .clone();
    let before = rlmm.list_remote_log_segments(&tp).unwrap();
    for target in [id.clone(), {
        id.id = other;
        id
    }] {
        let r = rlmm.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate {
            remote_log_segment_id: target,
            event_timestamp_ms: 1,
            custom_metadata: Some(CustomMetadata(vec![0; 65537])),
            state: RemoteLogSegmentState::CopySegmentFinished,
            broker_id: 1,
        });
        assert!(
            matches!(r, Err(RemoteStorageError::InvalidSegmentTransition { .. })),
            "{r:?}"
        );
        assert_eq!(rlmm.list_remote_log_segments(&tp).unwrap(), before);
    }
}
