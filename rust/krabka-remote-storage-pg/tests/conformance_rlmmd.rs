//! The conformance suite against the rlmmd-backed manager, over a real
//! rlmmd and PostgreSQL.

mod support;

use {
    krabka_remote_storage::conformance,
    support::{Rlmmd, manager, shared_postgres},
};

#[test]
fn rlmmd_passes_every_conformance_check_each_on_a_fresh_database() {
    let pg = shared_postgres();
    for (name, check) in conformance::CHECKS {
        let d = Rlmmd::unix(&pg.database());
        eprintln!("check {name} on {}", d.target);
        check(&manager(&d.target));
    }
}

#[test]
fn checks_share_one_manager_over_tcp() {
    let d = Rlmmd::tcp(&shared_postgres().database());
    let rlmm = manager(&d.target);
    for (name, check) in conformance::CHECKS {
        eprintln!("check {name}");
        check(&rlmm);
    }
}
