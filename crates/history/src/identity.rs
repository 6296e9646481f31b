//! Who a study is in the history, defined once for the store and the trend: its key in the store
//! ([`StudyKey`]: one study, one night) and its identity ([`StudyIdentity`]: which series its
//! nights belong to).

use latency_results::history::row::Row;
use latency_results::provenance::Provenance;

/// A study in the store: its partition values.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct StudyKey {
    /// `YYYY-MM-DD` of its start (UTC).
    pub date: String,
    /// Its id ([`latency_results::history::row::study_id`]).
    pub study: String,
}

/// What makes studies nights of one series: the same plan's study name (the rows' `name`) on the
/// same testbed (`testbed`: `sim`, or the inventory's name). A study of another plan, named
/// otherwise, or of the same plan on another testbed, is a series of its own: the trend never
/// compares their figures. The plan may change between nights (its hash is not part of the
/// identity), as a nightly job's plan does.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub struct StudyIdentity {
    /// The plan's study name.
    pub name: String,
    /// The testbed it ran on.
    pub testbed: String,
}

impl StudyIdentity {
    /// The identity of the study a row belongs to.
    pub fn of_row(row: &Row) -> StudyIdentity {
        StudyIdentity { name: row.name.clone(), testbed: row.testbed.clone() }
    }

    /// The identity of the study a provenance records (the one its rows carry).
    pub fn of_provenance(prov: &Provenance) -> StudyIdentity {
        StudyIdentity { name: prov.study.clone(), testbed: prov.testbed.name.clone() }
    }
}

impl std::fmt::Display for StudyIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` on {}", self.name, self.testbed)
    }
}
