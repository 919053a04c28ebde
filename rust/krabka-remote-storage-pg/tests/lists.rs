//! Lists: streamed by rlmmd in batches, collected up to max_list_bytes.

mod support;

use {
    krabka_ids::LeaderEpoch,
    krabka_remote_storage::{
        CustomMetadata, RemoteLogMetadataManager, RemoteStorageError,
        conformance::{new_tp, segment},
    },
    krabka_remote_storage_pg::RlmmdRemoteLogMetadataManager,
    std::time::Duration,
    support::{Rlmmd, manager, shared_postgres},
};

#[test]
fn batches_larger_than_grpcs_usual_four_mebibytes_are_read() {
    let d = Rlmmd::unix(&shared_postgres().database());
    let rlmm = manager(&d.target);
    let tp = new_tp(0);
    // 300 segments of 60 KiB of custom metadata each: 18 MiB in all, which
    // rlmmd sends in messages of about 1 MiB (an older rlmmd sent 256
    // segments, about 15 MiB, in its first).
    let added: Vec<_> = (0..300)
        .map(|i| {
            let mut m = segment(&tp, i * 10, i * 10 + 9, &[(0, i * 10)]);
            m.custom_metadata = Some(CustomMetadata(vec![i as u8; 60 << 10]));
            rlmm.add_remote_log_segment_metadata(m.clone()).unwrap();
            m
        })
        .collect();
    assert_eq!(rlmm.list_remote_log_segments(&tp).unwrap(), added);
    assert_eq!(
        rlmm.list_remote_log_segments_by_epoch(&tp, LeaderEpoch(0))
            .unwrap(),
        added
    );
}

#[test]
fn a_list_longer_than_max_list_bytes_fails() {
    let d = Rlmmd::unix(&shared_postgres().database());
    let rlmm = RlmmdRemoteLogMetadataManager::builder(&d.target)
        .call_timeout(Duration::from_secs(30))
        .max_list_bytes(4096)
        .build()
        .unwrap();
    let (short, long) = (new_tp(0), new_tp(1));
    for i in 0..5 {
        rlmm.add_remote_log_segment_metadata(segment(&short, i * 10, i * 10 + 9, &[(0, i * 10)]))
            .unwrap();
    }
    for i in 0..100 {
        rlmm.add_remote_log_segment_metadata(segment(&long, i * 10, i * 10 + 9, &[(0, i * 10)]))
            .unwrap();
    }
    assert_eq!(rlmm.list_remote_log_segments(&short).unwrap().len(), 5);
    match rlmm.list_remote_log_segments(&long) {
        Err(RemoteStorageError::Backend(m)) => assert!(m.contains("max_list_bytes"), "{m}"),
        r => panic!("a list over the bound: {r:?}"),
    }
}
