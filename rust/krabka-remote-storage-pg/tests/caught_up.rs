//! caught_up across two rlmmd processes sharing one PostgreSQL: a write
//! acknowledged through one manager is seen through the other once the
//! other answers true.

mod support;

use {
    krabka_ids::LeaderEpoch,
    krabka_remote_storage::{
        RemoteLogMetadataManager, RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState,
        RemoteStorageError, TopicIdPartition,
        conformance::{new_tp, segment},
    },
    krabka_remote_storage_pg::RlmmdRemoteLogMetadataManager,
    support::{Rlmmd, manager, shared_postgres, wait_until},
};

fn update(
    m: &krabka_remote_storage::RemoteLogSegmentMetadata,
    state: RemoteLogSegmentState,
) -> RemoteLogSegmentMetadataUpdate {
    RemoteLogSegmentMetadataUpdate {
        remote_log_segment_id: m.remote_log_segment_id.clone(),
        event_timestamp_ms: 7,
        custom_metadata: None,
        state,
        broker_id: 1,
    }
}

/// Polls caught_up until true; false and NotReady are answers to wait
/// through, anything else fails the test. Returns whether NotReady was seen.
fn until_caught_up(rlmm: &RlmmdRemoteLogMetadataManager, tp: &TopicIdPartition) -> bool {
    let mut not_ready = false;
    wait_until(&format!("caught up on {tp}"), || match rlmm.caught_up(tp) {
        Ok(b) => b,
        Err(RemoteStorageError::NotReady { partition }) => {
            assert_eq!(partition, tp.partition);
            not_ready = true;
            false
        }
        Err(e) => panic!("caught_up of {tp}: {e:?}"),
    });
    not_ready
}

#[test]
fn a_write_through_one_rlmmd_is_seen_through_the_other_once_it_is_caught_up() {
    let dsn = shared_postgres().database();
    let (d1, d2) = (Rlmmd::unix(&dsn), Rlmmd::unix(&dsn));
    let (writer, reader) = (manager(&d1.target), manager(&d2.target));
    let tp = new_tp(0);
    assert!(
        !reader.caught_up(&tp).unwrap(),
        "a partition not assigned is not caught up"
    );
    reader
        .on_partition_leadership_changes(&[], std::slice::from_ref(&tp))
        .unwrap();
    until_caught_up(&reader, &tp);
    let mut previous = None;
    for i in 0..25 {
        let m = segment(&tp, i * 10, i * 10 + 9, &[(0, i * 10)]);
        writer.add_remote_log_segment_metadata(m.clone()).unwrap();
        writer
            .update_remote_log_segment_metadata(update(
                &m,
                RemoteLogSegmentState::CopySegmentFinished,
            ))
            .unwrap();
        if let Some(p) = previous.replace(m.clone()) {
            writer
                .update_remote_log_segment_metadata(update(
                    &p,
                    RemoteLogSegmentState::DeleteSegmentStarted,
                ))
                .unwrap();
        }
        until_caught_up(&reader, &tp);
        // Every acknowledged write is visible at once, without polling.
        let found = reader
            .remote_log_segment_metadata(&tp, LeaderEpoch(0), i * 10 + 5)
            .unwrap();
        assert_eq!(
            found.map(|s| (s.remote_log_segment_id, s.state)),
            Some((
                m.remote_log_segment_id.clone(),
                RemoteLogSegmentState::CopySegmentFinished
            )),
            "round {i}: the finished segment"
        );
        assert_eq!(
            reader.list_remote_log_segments(&tp).unwrap(),
            writer.list_remote_log_segments(&tp).unwrap(),
            "round {i}: the reader's list is the writer's"
        );
        assert_eq!(
            reader
                .highest_offset_for_epoch(&tp, LeaderEpoch(0))
                .unwrap(),
            Some(i * 10 + 9)
        );
    }
}

#[test]
fn a_stopped_partition_is_no_longer_caught_up_nor_assigned_again() {
    let d = Rlmmd::unix(&shared_postgres().database());
    let rlmm = manager(&d.target);
    let (leader, follower) = (new_tp(0), new_tp(1));
    rlmm.on_partition_leadership_changes(
        std::slice::from_ref(&leader),
        std::slice::from_ref(&follower),
    )
    .unwrap();
    until_caught_up(&rlmm, &leader);
    until_caught_up(&rlmm, &follower);
    rlmm.on_stop_partitions(std::slice::from_ref(&leader))
        .unwrap();
    // caught_up re-sends only what is assigned: a stopped partition stays
    // false however often it is asked.
    for _ in 0..5 {
        assert!(!rlmm.caught_up(&leader).unwrap());
    }
    assert!(rlmm.caught_up(&follower).unwrap());
}
