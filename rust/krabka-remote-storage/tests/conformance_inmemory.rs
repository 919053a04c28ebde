//! The conformance suite against the in-memory reference.

use krabka_remote_storage::{InmemoryRemoteLogMetadataManager, conformance};

#[test]
fn inmemory_passes_every_conformance_check() {
    for (name, check) in conformance::CHECKS {
        let rlmm = InmemoryRemoteLogMetadataManager::new();
        eprintln!("check {name}");
        check(&rlmm);
    }
}

#[test]
fn checks_share_one_manager() {
    let rlmm = InmemoryRemoteLogMetadataManager::new();
    for (_, check) in conformance::CHECKS {
        check(&rlmm);
    }
}
