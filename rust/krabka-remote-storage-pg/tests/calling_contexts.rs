//! The trait's methods are synchronous: they must work, and fail within
//! their deadline, from a plain thread, from `spawn_blocking`, and from a
//! tokio runtime's worker (where `block_on` would panic), without
//! deadlocking the caller's runtime.

mod support;

use {
    krabka_ids::LeaderEpoch,
    krabka_remote_storage::{
        RemoteLogMetadataManager, RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState,
        RemoteStorageError,
        conformance::{new_tp, segment},
    },
    krabka_remote_storage_pg::{RlmmdRemoteLogMetadataManager, outcome_unknown},
    std::{
        sync::Arc,
        time::{Duration, Instant},
    },
    support::{Rlmmd, manager, shared_postgres},
};

/// Add, finish, look up and list one segment of a fresh partition.
fn exercise(rlmm: &dyn RemoteLogMetadataManager) {
    let tp = new_tp(0);
    let m = segment(&tp, 0, 9, &[(0, 0)]);
    rlmm.add_remote_log_segment_metadata(m.clone()).unwrap();
    rlmm.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate {
        remote_log_segment_id: m.remote_log_segment_id.clone(),
        event_timestamp_ms: 2,
        custom_metadata: None,
        state: RemoteLogSegmentState::CopySegmentFinished,
        broker_id: 1,
    })
    .unwrap();
    let found = rlmm
        .remote_log_segment_metadata(&tp, LeaderEpoch(0), 5)
        .unwrap()
        .expect("the finished segment");
    assert_eq!(found.remote_log_segment_id, m.remote_log_segment_id);
    assert_eq!(rlmm.list_remote_log_segments(&tp).unwrap().len(), 1);
    assert!(
        !rlmm.caught_up(&tp).unwrap(),
        "a partition not assigned is not caught up"
    );
}

fn multi_thread_runtime(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn from_a_plain_thread() {
    let d = Rlmmd::unix(&shared_postgres().database());
    let rlmm = Arc::new(manager(&d.target));
    rlmm.probe().expect("rlmmd answers the probe");
    let r = Arc::clone(&rlmm);
    std::thread::spawn(move || exercise(r.as_ref()))
        .join()
        .expect("the thread's calls");
}

#[test]
fn from_spawn_blocking() {
    let d = Rlmmd::unix(&shared_postgres().database());
    let rlmm = Arc::new(manager(&d.target));
    let rt = multi_thread_runtime(2);
    let r = Arc::clone(&rlmm);
    rt.block_on(rt.spawn_blocking(move || exercise(r.as_ref())))
        .expect("the blocking task's calls");
}

#[test]
fn from_inside_tokio_workers_of_a_small_runtime() {
    let d = Rlmmd::unix(&shared_postgres().database());
    let rlmm = Arc::new(manager(&d.target));
    // Two workers, eight tasks that each block a worker in a call: the
    // caller's runtime is fully occupied, the manager's own runtime still
    // serves every call.
    let rt = multi_thread_runtime(2);
    rt.block_on(async {
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let r = Arc::clone(&rlmm);
                tokio::spawn(async move {
                    assert!(tokio::runtime::Handle::try_current().is_ok());
                    exercise(r.as_ref());
                })
            })
            .collect();
        for t in tasks {
            t.await.expect("the task's calls");
        }
    });
}

#[test]
fn from_a_current_thread_runtime_and_built_and_dropped_inside_one() {
    let d = Rlmmd::unix(&shared_postgres().database());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // Built and dropped on a runtime thread: dropping the manager's
        // own runtime there must not panic.
        let rlmm = manager(&d.target);
        exercise(&rlmm);
        drop(rlmm);
        tokio::task::yield_now().await;
    });
}

/// A manager of a target where nothing answers, with a short deadline.
fn unreachable(target: &str, deadline: Duration) -> RlmmdRemoteLogMetadataManager {
    RlmmdRemoteLogMetadataManager::builder(target)
        .call_timeout(deadline)
        .list_timeout(deadline)
        .build()
        .unwrap()
}

/// Every method fails with Io within the deadline (and a slack for a busy
/// machine); a write's outcome is unknown only if it may have reached a
/// server.
fn fails_in_time(rlmm: &dyn RemoteLogMetadataManager, deadline: Duration, reaches_server: bool) {
    let slack = Duration::from_secs(5);
    let tp = new_tp(0);
    let m = segment(&tp, 0, 9, &[(0, 0)]);
    let timed = |what: &str, f: &dyn Fn() -> Result<(), RemoteStorageError>| {
        let start = Instant::now();
        let e = f().expect_err(what);
        assert!(
            start.elapsed() < deadline + slack,
            "{what} took {:?}",
            start.elapsed()
        );
        assert!(matches!(e, RemoteStorageError::Io(_)), "{what}: {e:?}");
        e
    };
    let e = timed("add", &|| rlmm.add_remote_log_segment_metadata(m.clone()));
    assert_eq!(outcome_unknown(&e), reaches_server, "add: {e:?}");
    timed("lookup", &|| {
        rlmm.remote_log_segment_metadata(&tp, LeaderEpoch(0), 0)
            .map(|_| ())
    });
    let e = timed("list", &|| rlmm.list_remote_log_segments(&tp).map(|_| ()));
    assert!(!outcome_unknown(&e), "a read never has an unknown outcome");
    timed("caught up", &|| rlmm.caught_up(&tp).map(|_| ()));
}

#[test]
fn a_missing_socket_fails_fast_from_every_context() {
    let path = std::env::temp_dir().join(support::unique("absent"));
    let target = format!("unix:{}.sock", path.display());
    let deadline = Duration::from_secs(2);
    let rlmm = Arc::new(unreachable(&target, deadline));
    assert!(matches!(rlmm.probe(), Err(RemoteStorageError::Io(_))));
    fails_in_time(rlmm.as_ref(), deadline, false);
    let rt = multi_thread_runtime(1);
    let r = Arc::clone(&rlmm);
    rt.block_on(async move { fails_in_time(r.as_ref(), deadline, false) });
    let r = Arc::clone(&rlmm);
    rt.block_on(rt.spawn_blocking(move || fails_in_time(r.as_ref(), deadline, false)))
        .unwrap();
}

#[test]
fn a_server_that_never_answers_ends_each_call_at_its_deadline() {
    // A listener that is never accepted from: the kernel completes the
    // handshake, nothing answers, the call must end at its deadline.
    let hole = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let target = hole.local_addr().unwrap().to_string();
    let deadline = Duration::from_secs(1);
    let rlmm = Arc::new(unreachable(&target, deadline));
    let rt = multi_thread_runtime(1);
    let r = Arc::clone(&rlmm);
    rt.block_on(async move {
        tokio::spawn(async move { fails_in_time(r.as_ref(), deadline, true) })
            .await
            .unwrap()
    });
    drop(hole);
}
