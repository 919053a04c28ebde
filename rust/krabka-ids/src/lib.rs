//! Identifier newtypes shared by the krabka crates.

use std::fmt;

/// A partition leader epoch, as Kafka numbers them (an `i32`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct LeaderEpoch(pub i32);

impl From<i32> for LeaderEpoch {
    fn from(v: i32) -> Self {
        Self(v)
    }
}

impl From<LeaderEpoch> for i32 {
    fn from(v: LeaderEpoch) -> Self {
        v.0
    }
}

impl fmt::Display for LeaderEpoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
