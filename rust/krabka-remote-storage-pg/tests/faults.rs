//! Faults: rlmmd killed and restarted mid-run, PostgreSQL restarted. Calls
//! fail with Io within their deadline, nothing acknowledged is lost, and
//! the same manager recovers (no rebuild), assignment included.

mod support;

use {
    krabka_ids::LeaderEpoch,
    krabka_remote_storage::{
        RemoteLogMetadataManager, RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate,
        RemoteLogSegmentState, RemoteStorageError, TopicIdPartition,
        conformance::{new_tp, segment},
    },
    krabka_remote_storage_pg::{RlmmdRemoteLogMetadataManager, outcome_unknown},
    std::{
        collections::HashMap,
        sync::{
            Arc, Mutex,
            atomic::{AtomicBool, Ordering},
        },
        time::{Duration, Instant},
    },
    support::{Postgres, Rlmmd, wait_until},
    uuid::Uuid,
};

const DEADLINE: Duration = Duration::from_secs(3);
/// What a busy machine may add to a deadline before the caller has its
/// answer.
const SLACK: Duration = Duration::from_secs(5);

fn short_deadline_manager(target: &str) -> RlmmdRemoteLogMetadataManager {
    RlmmdRemoteLogMetadataManager::builder(target)
        .call_timeout(DEADLINE)
        .list_timeout(DEADLINE)
        .build()
        .unwrap()
}

fn finish(m: &RemoteLogSegmentMetadata) -> RemoteLogSegmentMetadataUpdate {
    RemoteLogSegmentMetadataUpdate {
        remote_log_segment_id: m.remote_log_segment_id.clone(),
        event_timestamp_ms: 7,
        custom_metadata: None,
        state: RemoteLogSegmentState::CopySegmentFinished,
        broker_id: 1,
    }
}

/// What the writer learnt of each segment.
#[derive(Default)]
struct Ledger {
    /// Acknowledged: the segment must be stored in at least this state.
    acked: HashMap<Uuid, RemoteLogSegmentState>,
    /// Failed with an unknown outcome: may or may not be stored.
    unknown: usize,
    /// Failed calls, each checked to be Io within the deadline.
    failures: usize,
    /// Acknowledged calls.
    oks: usize,
}

/// One call by the writer: checked and recorded.
fn record(
    ledger: &Mutex<Ledger>,
    id: Uuid,
    state: RemoteLogSegmentState,
    call: impl FnOnce() -> Result<(), RemoteStorageError>,
) -> bool {
    let start = Instant::now();
    let r = call();
    let took = start.elapsed();
    let mut l = ledger.lock().unwrap();
    match r {
        Ok(()) => {
            l.acked.insert(id, state);
            l.oks += 1;
            true
        }
        Err(e) => {
            assert!(matches!(e, RemoteStorageError::Io(_)), "{state}: {e:?}");
            assert!(
                took < DEADLINE + SLACK,
                "a failed call took {took:?}, deadline {DEADLINE:?}: {e}"
            );
            l.failures += 1;
            if outcome_unknown(&e) {
                l.unknown += 1;
            }
            false
        }
    }
}

/// A writer thread: add and finish segments of `tp` until told to stop.
fn writer(
    rlmm: Arc<RlmmdRemoteLogMetadataManager>,
    tp: TopicIdPartition,
    ledger: Arc<Mutex<Ledger>>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut i = 0;
        while !stop.load(Ordering::Relaxed) {
            let m = segment(&tp, i * 10, i * 10 + 9, &[(0, i * 10)]);
            let id = m.remote_log_segment_id.id;
            i += 1;
            if record(
                &ledger,
                id,
                RemoteLogSegmentState::CopySegmentStarted,
                || rlmm.add_remote_log_segment_metadata(m.clone()),
            ) {
                if !record(
                    &ledger,
                    id,
                    RemoteLogSegmentState::CopySegmentFinished,
                    || rlmm.update_remote_log_segment_metadata(finish(&m)),
                ) {
                    // Pace the retries while the store is down.
                    std::thread::sleep(Duration::from_millis(10));
                }
            } else {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    })
}

/// Every acknowledged segment is stored, in its acknowledged state or a
/// later one.
fn nothing_acknowledged_is_lost(
    rlmm: &RlmmdRemoteLogMetadataManager,
    tp: &TopicIdPartition,
    ledger: &Ledger,
) {
    let stored: HashMap<Uuid, RemoteLogSegmentState> = rlmm
        .list_remote_log_segments(tp)
        .unwrap()
        .into_iter()
        .map(|s| (s.remote_log_segment_id.id, s.state))
        .collect();
    for (id, state) in &ledger.acked {
        let got = stored
            .get(id)
            .unwrap_or_else(|| panic!("acknowledged segment {id} ({state}) is lost"));
        assert!(
            got >= state,
            "segment {id}: acknowledged {state}, stored {got}"
        );
    }
}

fn until_caught_up(rlmm: &RlmmdRemoteLogMetadataManager, tp: &TopicIdPartition) {
    wait_until(&format!("caught up on {tp}"), || {
        matches!(rlmm.caught_up(tp), Ok(true))
    });
}

fn oks(ledger: &Mutex<Ledger>) -> usize {
    ledger.lock().unwrap().oks
}

fn failures(ledger: &Mutex<Ledger>) -> usize {
    ledger.lock().unwrap().failures
}

#[test]
fn rlmmd_killed_and_restarted_mid_run() {
    killed_and_restarted(Rlmmd::unix);
}

#[test]
fn rlmmd_killed_and_restarted_mid_run_over_tcp() {
    killed_and_restarted(Rlmmd::tcp);
}

fn killed_and_restarted(rlmmd: fn(&str) -> Rlmmd) {
    let pg = Postgres::start();
    let mut d = rlmmd(&pg.database());
    let rlmm = Arc::new(short_deadline_manager(&d.target));
    let tp = new_tp(0);
    rlmm.on_partition_leadership_changes(std::slice::from_ref(&tp), &[])
        .unwrap();
    until_caught_up(&rlmm, &tp);

    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let w = writer(
        Arc::clone(&rlmm),
        tp.clone(),
        Arc::clone(&ledger),
        Arc::clone(&stop),
    );
    wait_until("20 acknowledged writes", || oks(&ledger) >= 20);
    d.kill();
    wait_until("3 failed writes while rlmmd is down", || {
        failures(&ledger) >= 3
    });
    // caught_up says Io, within its deadline, while nothing answers.
    let start = Instant::now();
    let e = rlmm.caught_up(&tp).expect_err("caught_up with rlmmd down");
    assert!(matches!(e, RemoteStorageError::Io(_)), "{e:?}");
    assert!(start.elapsed() < DEADLINE + SLACK);
    d.start(&[]);
    let before = oks(&ledger);
    wait_until("20 acknowledged writes after the restart", || {
        oks(&ledger) >= before + 20
    });
    stop.store(true, Ordering::Relaxed);
    w.join().expect("the writer");

    // The restarted rlmmd consumes nothing: caught_up sends the remembered
    // assignment again, and answers true once it is loaded.
    until_caught_up(&rlmm, &tp);
    let ledger = ledger.lock().unwrap();
    nothing_acknowledged_is_lost(&rlmm, &tp, &ledger);
    eprintln!(
        "rlmmd kill on {}: {} acknowledged calls, {} failed ({} with an unknown outcome)",
        d.target, ledger.oks, ledger.failures, ledger.unknown
    );
}

#[test]
fn postgres_restarted() {
    let pg = Postgres::start();
    let d = Rlmmd::unix(&pg.database());
    let rlmm = Arc::new(short_deadline_manager(&d.target));
    let (tp, unassigned) = (new_tp(0), new_tp(1));
    rlmm.on_partition_leadership_changes(std::slice::from_ref(&tp), &[])
        .unwrap();
    until_caught_up(&rlmm, &tp);

    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let w = writer(
        Arc::clone(&rlmm),
        tp.clone(),
        Arc::clone(&ledger),
        Arc::clone(&stop),
    );
    wait_until("20 acknowledged writes", || oks(&ledger) >= 20);
    pg.stop();
    let failed_before = failures(&ledger);
    wait_until("3 failed writes while PostgreSQL is down", || {
        failures(&ledger) >= failed_before + 3
    });
    // CaughtUp reads the primary's WAL position: Io. So does a
    // read of a partition rlmmd does not cache.
    for (what, r) in [
        ("caught_up", rlmm.caught_up(&tp).map(|_| ())),
        (
            "lookup of a partition not cached",
            rlmm.remote_log_segment_metadata(&unassigned, LeaderEpoch(0), 0)
                .map(|_| ()),
        ),
    ] {
        let e = r.expect_err(what);
        assert!(matches!(e, RemoteStorageError::Io(_)), "{what}: {e:?}");
    }
    // A partition not assigned is answered from rlmmd's memory.
    assert!(!rlmm.caught_up(&unassigned).unwrap());
    pg.start_again();
    let before = oks(&ledger);
    wait_until("20 acknowledged writes after the restart", || {
        oks(&ledger) >= before + 20
    });
    stop.store(true, Ordering::Relaxed);
    w.join().expect("the writer");
    until_caught_up(&rlmm, &tp);
    let ledger = ledger.lock().unwrap();
    nothing_acknowledged_is_lost(&rlmm, &tp, &ledger);
    eprintln!(
        "PostgreSQL restart: {} acknowledged calls, {} failed ({} with an unknown outcome)",
        ledger.oks, ledger.failures, ledger.unknown
    );
}

#[test]
fn a_frozen_rlmmd_ends_each_call_at_its_deadline() {
    let pg = Postgres::start();
    let d = Rlmmd::unix(&pg.database());
    let rlmm = short_deadline_manager(&d.target);
    let tp = new_tp(0);
    let m = segment(&tp, 0, 9, &[(0, 0)]);
    rlmm.add_remote_log_segment_metadata(m.clone()).unwrap();
    // SIGSTOP: the socket accepts, nothing answers.
    d.signal("STOP");
    let start = Instant::now();
    let e = rlmm
        .update_remote_log_segment_metadata(finish(&m))
        .expect_err("an update to a frozen rlmmd");
    let took = start.elapsed();
    assert!(matches!(e, RemoteStorageError::Io(_)), "{e:?}");
    assert!(
        outcome_unknown(&e),
        "the update may have reached rlmmd: {e}"
    );
    assert!(
        took >= DEADLINE && took < DEADLINE + SLACK,
        "the call ended after {took:?}, deadline {DEADLINE:?}"
    );
    let e = rlmm
        .caught_up(&tp)
        .expect_err("caught_up of a frozen rlmmd");
    assert!(matches!(e, RemoteStorageError::Io(_)), "{e:?}");
    d.signal("CONT");
    // The update's outcome was unknown: a retry is idempotent.
    wait_until("the retried update", || {
        rlmm.update_remote_log_segment_metadata(finish(&m)).is_ok()
    });
    let stored = rlmm.list_remote_log_segments(&tp).unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].state, RemoteLogSegmentState::CopySegmentFinished);
}
