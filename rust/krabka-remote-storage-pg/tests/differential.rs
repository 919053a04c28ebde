//! A randomized differential test: the same seeded random sequences of
//! operations against the in-memory reference and the rlmmd-backed
//! manager, every answer compared.
//!
//! RLMM_DIFF_SEEDS=n runs n seeds (default 40); RLMM_DIFF_SEED=s runs seed
//! s alone, to reproduce a failure.

mod support;

use {
    krabka_ids::LeaderEpoch,
    krabka_remote_storage::{
        CustomMetadata, InmemoryRemoteLogMetadataManager, RemoteLogMetadataManager,
        RemoteLogSegmentId, RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate,
        RemoteLogSegmentState, RemotePartitionDeleteMetadata, RemotePartitionDeleteState,
        RemoteStorageError, TopicIdPartition,
    },
    std::{collections::BTreeMap, fmt::Debug},
    support::{Rlmmd, manager, shared_postgres},
    uuid::Uuid,
};

/// splitmix64: small, seedable, good enough to pick operations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    fn percent(&mut self, p: u64) -> bool {
        self.below(100) < p
    }

    fn uuid(&mut self) -> Uuid {
        Uuid::from_u64_pair(self.next(), self.next())
    }

    fn pick<T: Clone>(&mut self, v: &[T]) -> T {
        v[self.below(v.len() as u64) as usize].clone()
    }
}

const SEGMENT_STATES: [RemoteLogSegmentState; 4] = [
    RemoteLogSegmentState::CopySegmentStarted,
    RemoteLogSegmentState::CopySegmentFinished,
    RemoteLogSegmentState::DeleteSegmentStarted,
    RemoteLogSegmentState::DeleteSegmentFinished,
];

const DELETE_STATES: [RemotePartitionDeleteState; 3] = [
    RemotePartitionDeleteState::DeletePartitionMarked,
    RemotePartitionDeleteState::DeletePartitionStarted,
    RemotePartitionDeleteState::DeletePartitionFinished,
];

const OVERSIZED: usize = 65537;

fn custom(rng: &mut Rng, oversized_percent: u64) -> Option<CustomMetadata> {
    match rng.below(100) {
        p if p < oversized_percent => Some(CustomMetadata(vec![7; OVERSIZED])),
        p if p < 30 => Some(CustomMetadata(
            (0..rng.below(16)).map(|i| i as u8).collect(),
        )),
        _ => None,
    }
}

fn new_segment(rng: &mut Rng, tp: &TopicIdPartition) -> RemoteLogSegmentMetadata {
    let start = rng.range(0, 200);
    let end = start + rng.range(0, 50);
    let mut epochs = BTreeMap::new();
    let mut epoch = rng.range(0, 2) as i32;
    let mut at = start;
    for _ in 0..rng.range(1, 3) {
        if at > end {
            break;
        }
        epochs.insert(LeaderEpoch(epoch), at);
        epoch += rng.range(1, 2) as i32;
        at += rng.range(1, 20);
    }
    RemoteLogSegmentMetadata {
        remote_log_segment_id: RemoteLogSegmentId {
            topic_id_partition: tp.clone(),
            id: rng.uuid(),
        },
        start_offset: start,
        end_offset: end,
        max_timestamp_ms: rng.range(0, 1_000_000),
        broker_id: rng.range(0, 3) as i32,
        event_timestamp_ms: rng.range(0, 1_000_000),
        segment_size_in_bytes: rng.range(0, 1 << 20) as i32,
        custom_metadata: custom(rng, 0),
        state: RemoteLogSegmentState::CopySegmentStarted,
        segment_leader_epochs: epochs,
        txn_index_empty: rng.percent(50),
    }
}

/// An add that breaks one rule, or `m` itself.
fn maybe_break_add(
    rng: &mut Rng,
    m: &mut RemoteLogSegmentMetadata,
    added: &[RemoteLogSegmentMetadata],
) {
    if !rng.percent(20) {
        return;
    }
    match rng.below(6) {
        0 => m.end_offset = m.start_offset - 1 - rng.range(0, 5), // offsets out of order
        1 => m.segment_leader_epochs.clear(),
        2 => m.custom_metadata = Some(CustomMetadata(vec![1; OVERSIZED])),
        3 => m.state = rng.pick(&SEGMENT_STATES[1..]),
        4 if !added.is_empty() => {
            // a duplicate id, in the same partition or another
            m.remote_log_segment_id.id = rng.pick(added).remote_log_segment_id.id;
        }
        _ => {
            m.segment_leader_epochs
                .insert(LeaderEpoch(9), m.end_offset + 1);
        }
    }
}

thread_local! {
    /// How many answers of each kind were compared, to show the sequences
    /// reach every outcome.
    static TALLY: std::cell::RefCell<BTreeMap<String, u64>> = std::cell::RefCell::default();
}

fn tally<T: Debug>(r: &Result<T, RemoteStorageError>) {
    let key = match r {
        Ok(v) => {
            let s = format!("{v:?}");
            if s == "()" {
                "ok".to_owned()
            } else if s == "None" || s == "[]" {
                "ok, none or empty".to_owned()
            } else {
                "ok, found".to_owned()
            }
        }
        Err(e) => format!("{e:?}")
            .split([' ', '(', '{'])
            .next()
            .unwrap()
            .to_owned(),
    };
    TALLY.with(|t| *t.borrow_mut().entry(key).or_default() += 1);
}

/// The same outcome from both managers, or a panic naming the difference.
fn same<T: PartialEq + Debug>(
    ctx: &str,
    want: Result<T, RemoteStorageError>,
    got: Result<T, RemoteStorageError>,
    compare_from: bool,
) {
    use RemoteStorageError as E;
    let ok = match (&want, &got) {
        (Ok(a), Ok(b)) => a == b,
        (Err(a), Err(b)) => match (a, b) {
            (E::InvalidAdd { id: a, .. }, E::InvalidAdd { id: b, .. }) => a == b,
            (E::SegmentNotFound(a), E::SegmentNotFound(b)) => a == b,
            (
                E::InvalidSegmentTransition {
                    id: a,
                    from: fa,
                    to: ta,
                },
                E::InvalidSegmentTransition {
                    id: b,
                    from: fb,
                    to: tb,
                },
            ) => a == b && ta == tb && (!compare_from || fa == fb),
            (
                E::InvalidPartitionDeleteTransition {
                    tp: a,
                    from: fa,
                    to: ta,
                },
                E::InvalidPartitionDeleteTransition {
                    tp: b,
                    from: fb,
                    to: tb,
                },
            ) => a == b && fa == fb && ta == tb,
            _ => false,
        },
        _ => false,
    };
    tally(&want);
    assert!(
        ok,
        "{ctx}:\n  in-memory reference: {want:?}\n  rlmmd:               {got:?}"
    );
}

fn run_seed(
    seed: u64,
    rlmm: &dyn RemoteLogMetadataManager,
    assign: &dyn Fn(&[TopicIdPartition], &[TopicIdPartition]),
) {
    let mut rng = Rng(seed);
    let reference = InmemoryRemoteLogMetadataManager::new();
    let tps: Vec<TopicIdPartition> = (0..3)
        .map(|p| TopicIdPartition {
            topic_id: rng.uuid(),
            topic: format!("diff-{seed}"),
            partition: p,
        })
        .collect();
    // One partition rlmmd leads, one it follows (both answered from its
    // cache), one it does not consume (answered from PostgreSQL).
    assign(&tps[0..1], &tps[1..2]);
    let mut added: Vec<RemoteLogSegmentMetadata> = Vec::new();
    for step in 0..80 {
        let tp = rng.pick(&tps);
        let ctx = |what: String| format!("seed {seed} step {step}: {what}");
        match rng.below(100) {
            0..25 => {
                let mut m = new_segment(&mut rng, &tp);
                maybe_break_add(&mut rng, &mut m, &added);
                let c = ctx(format!("add {m:?}"));
                let want = reference.add_remote_log_segment_metadata(m.clone());
                let got = rlmm.add_remote_log_segment_metadata(m.clone());
                if want.is_ok() {
                    added.push(m);
                }
                same(&c, want, got, true);
            }
            25..55 => {
                let mut id = if added.is_empty() || rng.percent(10) {
                    RemoteLogSegmentId {
                        topic_id_partition: tp.clone(),
                        id: rng.uuid(),
                    }
                } else {
                    rng.pick(&added).remote_log_segment_id
                };
                if rng.percent(5) {
                    id.topic_id_partition = rng.pick(&tps);
                }
                let u = RemoteLogSegmentMetadataUpdate {
                    remote_log_segment_id: id,
                    event_timestamp_ms: rng.range(0, 1_000_000),
                    custom_metadata: custom(&mut rng, 5),
                    state: rng.pick(&SEGMENT_STATES),
                    broker_id: rng.range(0, 3) as i32,
                };
                // rlmmd refuses oversized custom metadata before it looks
                // the segment up, so its error cannot name the state found.
                let oversized = u
                    .custom_metadata
                    .as_ref()
                    .is_some_and(|c| c.0.len() == OVERSIZED);
                let c = ctx(format!("update {} to {}", u.remote_log_segment_id, u.state));
                same(
                    &c,
                    reference.update_remote_log_segment_metadata(u.clone()),
                    rlmm.update_remote_log_segment_metadata(u),
                    !oversized,
                );
            }
            55..60 => {
                let d = RemotePartitionDeleteMetadata {
                    topic_id_partition: tp.clone(),
                    state: rng.pick(&DELETE_STATES),
                    event_timestamp_ms: rng.range(0, 1000),
                    broker_id: 1,
                };
                let c = ctx(format!("partition delete {tp} to {}", d.state));
                same(
                    &c,
                    reference.put_remote_partition_delete_metadata(d.clone()),
                    rlmm.put_remote_partition_delete_metadata(d),
                    true,
                );
            }
            60..78 => {
                let (e, o) = (LeaderEpoch(rng.range(0, 5) as i32), rng.range(0, 260));
                same(
                    &ctx(format!("lookup {tp} epoch {e} offset {o}")),
                    reference.remote_log_segment_metadata(&tp, e, o),
                    rlmm.remote_log_segment_metadata(&tp, e, o),
                    true,
                );
            }
            78..86 => {
                let e = LeaderEpoch(rng.range(0, 5) as i32);
                same(
                    &ctx(format!("highest offset {tp} epoch {e}")),
                    reference.highest_offset_for_epoch(&tp, e),
                    rlmm.highest_offset_for_epoch(&tp, e),
                    true,
                );
            }
            86..93 => same(
                &ctx(format!("list {tp}")),
                reference.list_remote_log_segments(&tp),
                rlmm.list_remote_log_segments(&tp),
                true,
            ),
            _ => {
                let e = LeaderEpoch(rng.range(0, 5) as i32);
                same(
                    &ctx(format!("list {tp} epoch {e}")),
                    reference.list_remote_log_segments_by_epoch(&tp, e),
                    rlmm.list_remote_log_segments_by_epoch(&tp, e),
                    true,
                );
            }
        }
    }
    for tp in &tps {
        same(
            &format!("seed {seed} at the end: list {tp}"),
            reference.list_remote_log_segments(tp),
            rlmm.list_remote_log_segments(tp),
            true,
        );
    }
}

fn seeds() -> Vec<u64> {
    if let Some(s) = std::env::var("RLMM_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return vec![s];
    }
    let n = std::env::var("RLMM_DIFF_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    (1..=n).collect()
}

#[test]
fn rlmmd_answers_as_the_in_memory_reference() {
    let d = Rlmmd::unix(&shared_postgres().database());
    let rlmm = manager(&d.target);
    let seeds = seeds();
    for &seed in &seeds {
        run_seed(seed, &rlmm, &|leaders, followers| {
            rlmm.on_partition_leadership_changes(leaders, followers)
                .expect("assignment");
        });
    }
    let tally = TALLY.with(|t| t.borrow().clone());
    eprintln!(
        "{} seeds, 80 operations each, all answers equal: {tally:?}",
        seeds.len()
    );
    for kind in [
        "ok",
        "ok, found",
        "InvalidAdd",
        "SegmentNotFound",
        "InvalidSegmentTransition",
        "InvalidPartitionDeleteTransition",
    ] {
        assert!(
            tally.contains_key(kind),
            "no answer was {kind}: the sequences miss it"
        );
    }
}

#[test]
fn eight_seeds_at_once_through_one_manager() {
    // Concurrent callers of one manager, each on its own partitions with
    // its own reference: the manager's calls do not mix up answers.
    let d = Rlmmd::unix(&shared_postgres().database());
    let rlmm = std::sync::Arc::new(manager(&d.target));
    let threads: Vec<_> = (1001..1009)
        .map(|seed| {
            let rlmm = std::sync::Arc::clone(&rlmm);
            std::thread::spawn(move || {
                run_seed(seed, rlmm.as_ref(), &|leaders, followers| {
                    rlmm.on_partition_leadership_changes(leaders, followers)
                        .expect("assignment");
                });
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a seed");
    }
}
