//! Lookups and writes through rlmmd, from the Rust manager.
//!
//! Starts a throwaway PostgreSQL (bin/rlmm-pgfixture) and an rlmmd process
//! (bin/rlmmd) as the tests do, on a unix socket and on loopback TCP; on
//! each: cached lookups (a leader partition of 1,000 finished segments) at
//! 1 and 8 threads, p50 and p99; then add + finish pairs per second at 8
//! threads, each on its own partition.
//!
//!     cargo bench -p krabka-remote-storage-pg --bench rlmmd
//!
//! RLMM_BENCH_LOOKUPS (default 20000) lookups per thread count after 2,000
//! unmeasured; RLMM_BENCH_WRITE_SECS (default 5) seconds of writes;
//! RLMM_BENCH_WORKERS the manager's runtime threads (default 1, the builder's default);
//! RLMM_BENCH_TARGET an rlmmd already running, instead of starting one;
//! RLMM_BENCH_GO=1 also runs the same workload from Go's gRPC client
//! (benches/goclient, through `go run`) against the same rlmmd.

#[path = "../tests/support/mod.rs"]
mod support;

use {
    krabka_ids::LeaderEpoch,
    krabka_remote_storage::{
        RemoteLogMetadataManager, RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState,
        conformance::{new_tp, segment},
    },
    krabka_remote_storage_pg::RlmmdRemoteLogMetadataManager,
    std::{
        sync::Arc,
        time::{Duration, Instant},
    },
    support::{Postgres, Rlmmd, wait_until},
};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn finish(m: &krabka_remote_storage::RemoteLogSegmentMetadata) -> RemoteLogSegmentMetadataUpdate {
    RemoteLogSegmentMetadataUpdate {
        remote_log_segment_id: m.remote_log_segment_id.clone(),
        event_timestamp_ms: 1,
        custom_metadata: None,
        state: RemoteLogSegmentState::CopySegmentFinished,
        broker_id: 1,
    }
}

fn percentile(sorted: &[Duration], p: usize) -> f64 {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)].as_secs_f64() * 1e6
}

fn lookups(rlmm: &Arc<RlmmdRemoteLogMetadataManager>, threads: usize, total: u64) -> (f64, f64) {
    const SEGMENTS: i64 = 1000;
    let tp = new_tp(0);
    rlmm.on_partition_leadership_changes(std::slice::from_ref(&tp), &[])
        .unwrap();
    for i in 0..SEGMENTS {
        let m = segment(&tp, i * 100, i * 100 + 99, &[(0, i * 100)]);
        rlmm.add_remote_log_segment_metadata(m.clone()).unwrap();
        rlmm.update_remote_log_segment_metadata(finish(&m)).unwrap();
    }
    wait_until("caught up", || matches!(rlmm.caught_up(&tp), Ok(true)));
    let per = (total as usize / threads).max(1);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (rlmm, tp) = (Arc::clone(rlmm), tp.clone());
            std::thread::spawn(move || {
                let mut x = 0x9e37_79b9_u64 + t as u64;
                let mut next = move || {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % (SEGMENTS as u64 * 100)) as i64
                };
                for _ in 0..2000 / threads {
                    rlmm.remote_log_segment_metadata(&tp, LeaderEpoch(0), next())
                        .unwrap()
                        .unwrap();
                }
                let mut lat = Vec::with_capacity(per);
                for _ in 0..per {
                    let off = next();
                    let t0 = Instant::now();
                    let found = rlmm
                        .remote_log_segment_metadata(&tp, LeaderEpoch(0), off)
                        .unwrap();
                    lat.push(t0.elapsed());
                    assert!(found.is_some(), "no segment for {off}");
                }
                lat
            })
        })
        .collect();
    let mut all: Vec<Duration> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    all.sort();
    (percentile(&all, 50), percentile(&all, 99))
}

fn writes(rlmm: &Arc<RlmmdRemoteLogMetadataManager>, threads: usize, secs: u64) -> f64 {
    let until = Instant::now() + Duration::from_secs(secs);
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let rlmm = Arc::clone(rlmm);
            std::thread::spawn(move || {
                let tp = new_tp(0);
                let mut n = 0i64;
                while Instant::now() < until {
                    let m = segment(&tp, n * 10, n * 10 + 9, &[(0, n * 10)]);
                    rlmm.add_remote_log_segment_metadata(m.clone()).unwrap();
                    rlmm.update_remote_log_segment_metadata(finish(&m)).unwrap();
                    n += 1;
                }
                n
            })
        })
        .collect();
    let pairs: i64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    pairs as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` would pass
    // nothing to run.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let total = env("RLMM_BENCH_LOOKUPS", 20_000);
    let secs = env("RLMM_BENCH_WRITE_SECS", 5);
    let workers = env("RLMM_BENCH_WORKERS", 1) as usize;
    let run = |transport: &str, target: &str, dsn: Option<&str>| {
        let rlmm = Arc::new(
            RlmmdRemoteLogMetadataManager::builder(target)
                .worker_threads(workers)
                .build()
                .unwrap(),
        );
        for threads in [1, 8] {
            let (p50, p99) = lookups(&rlmm, threads, total);
            println!(
                "{transport}: cached lookup, {threads} thread(s), {total} lookups: p50 {p50:.0} µs, p99 {p99:.0} µs"
            );
        }
        let rate = writes(&rlmm, 8, secs);
        println!("{transport}: add + finish, 8 threads, {secs} s: {rate:.0} pairs/s");
        if std::env::var("RLMM_BENCH_GO").is_ok_and(|v| v == "1") {
            let st = std::process::Command::new("go")
                .args(["run", ".", "-target", target])
                .args(["-lookups", &total.to_string(), "-secs", &secs.to_string()])
                .args(dsn.map(|d| ["-dsn", d]).into_iter().flatten())
                .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/benches/goclient"))
                .status()
                .expect("go run benches/goclient");
            assert!(st.success(), "benches/goclient failed");
        }
    };
    if let Ok(target) = std::env::var("RLMM_BENCH_TARGET") {
        run("given", &target, None);
        return;
    }
    let pg = Postgres::start();
    for transport in ["unix", "tcp"] {
        let dsn = pg.database();
        let d = if transport == "unix" {
            Rlmmd::unix(&dsn)
        } else {
            Rlmmd::tcp(&dsn)
        };
        run(transport, &d.target, Some(&dsn));
    }
}
