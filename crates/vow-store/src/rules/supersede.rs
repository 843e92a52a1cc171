//! Supersede-by-version: which of one entity's due inbound events a claim takes, which it
//! supersedes, and which wait ([`turns`]).
//!
//! An entity's *mark* is the version last claimed for it and the event that claimed it. Going
//! through the entity's candidates earliest due first, each one not newer than the mark
//! ([`supersedes`]) is superseded; the first that is newer is taken and moves the mark; one that
//! holds the mark already (claimed before, its lease ran out) is taken as it is; with no mark
//! yet, the first is taken. The candidates after the taken one wait for a later claim: one event
//! of an entity runs at a time. (That no event of the entity is being processed already is the
//! claim's SQL.) A claim groups its candidates by entity with [`by_entity`].

use std::collections::BTreeMap;

use crate::inbound::processing::supersedes;

/// An entity's mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark<'a> {
    /// The version last claimed.
    pub version: &'a str,
    /// The id of the event that claimed it.
    pub event: &'a str,
}

/// A due event of the entity, with its version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate<'a> {
    /// The event's id.
    pub event: &'a str,
    /// Its version.
    pub version: &'a str,
}

/// What a claim does with one candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Turn {
    /// Claim it; `moves_mark` when the entity's mark must be set to this event and version.
    Take {
        /// Whether the mark moves (false when the event holds it already).
        moves_mark: bool,
    },
    /// Not newer than the mark: supersede it, with this note for operators.
    Supersede(String),
    /// Another candidate of its entity goes first: leave it for a later claim.
    Wait,
}

/// The turn of each of one entity's `candidates` (earliest due first) given its `mark` (see the
/// module docs), in the same order.
pub fn turns(mark: Option<Mark<'_>>, candidates: &[Candidate<'_>]) -> Vec<Turn> {
    let mut turns = vec![Turn::Wait; candidates.len()];
    for (candidate, turn) in candidates.iter().zip(&mut turns) {
        let moves_mark = match mark {
            Some(mark) if mark.event == candidate.event => false,
            Some(mark) => match supersedes(candidate.version, mark.version) {
                Some(note) => {
                    *turn = Turn::Supersede(note);
                    continue;
                }
                None => true,
            },
            None => true,
        };
        *turn = Turn::Take { moves_mark };
        break;
    }
    turns
}

/// The indexes of each entity's candidates, in the order of `candidates` (earliest due first),
/// by `entity_of` (the entity of a candidate with an entity and a version: the source and the
/// entity, `None` otherwise; a candidate without is simply taken). The entities come in key
/// order, so claims that lock them all lock them in one order.
pub fn by_entity<'c, C, K: Ord>(
    candidates: &'c [C],
    entity_of: impl Fn(&'c C) -> Option<K>,
) -> BTreeMap<K, Vec<usize>> {
    let mut entities: BTreeMap<K, Vec<usize>> = BTreeMap::new();
    for (i, candidate) in candidates.iter().enumerate() {
        if let Some(entity) = entity_of(candidate) {
            entities.entry(entity).or_default().push(i);
        }
    }
    entities
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn candidates<'a>(events: &'a [(String, String)]) -> Vec<Candidate<'a>> {
        events
            .iter()
            .map(|(event, version)| Candidate { event, version })
            .collect()
    }

    const TAKE: Turn = Turn::Take { moves_mark: true };

    #[test]
    fn older_versions_are_superseded_until_a_newer_one_is_taken() {
        let mark = Mark {
            version: "5",
            event: "e0",
        };
        let events = [("e1", "4"), ("e2", "5"), ("e3", "6"), ("e4", "7")]
            .map(|(e, v)| (e.to_owned(), v.to_owned()));
        let turns = turns(Some(mark), &candidates(&events));
        assert!(matches!(&turns[0], Turn::Supersede(note) if note.contains("not newer")));
        assert!(matches!(&turns[1], Turn::Supersede(_)));
        assert_eq!(turns[2..], [TAKE, Turn::Wait]);
    }

    #[test]
    fn the_mark_holder_is_taken_as_it_is_and_a_new_entity_takes_its_first() {
        let mark = Mark {
            version: "9",
            event: "e1",
        };
        let events = [("e1", "9"), ("e2", "10")].map(|(e, v)| (e.to_owned(), v.to_owned()));
        let events = candidates(&events);
        assert_eq!(
            turns(Some(mark), &events),
            [Turn::Take { moves_mark: false }, Turn::Wait]
        );
        assert_eq!(turns(None, &events), [TAKE, Turn::Wait]);
        assert_eq!(turns(None, &[]), []);
    }

    #[test]
    fn an_unorderable_version_is_superseded() {
        let mark = Mark {
            version: "2026-01-01T00:00:00Z",
            event: "e0",
        };
        let events = [("e1", "v2"), ("e2", "3")].map(|(e, v)| (e.to_owned(), v.to_owned()));
        let turns = turns(Some(mark), &candidates(&events));
        assert!(turns
            .iter()
            .all(|t| matches!(t, Turn::Supersede(n) if n.contains("cannot be ordered"))));
    }

    #[test]
    fn candidates_group_by_source_and_entity_in_order() {
        let candidates = [
            ("s1", Some("a")),
            ("s2", Some("a")),
            ("s1", None),
            ("s1", Some("a")),
        ];
        let groups = by_entity(&candidates, |&(source, entity)| entity.map(|e| (source, e)));
        let groups: Vec<_> = groups.into_iter().collect();
        assert_eq!(groups, [(("s1", "a"), vec![0, 3]), (("s2", "a"), vec![1])]);
    }

    proptest! {
        #[test]
        fn one_event_at_a_time_and_never_an_older_one(
            mark in proptest::option::of((0u8..4, 0u32..20)),
            events in proptest::collection::vec((0u8..4, 0u32..20), 0..8),
        ) {
            let events: Vec<(String, String)> = events
                .into_iter()
                .map(|(e, v)| (format!("e{e}"), v.to_string()))
                .collect();
            let mark_text = mark.map(|(e, v)| (format!("e{e}"), v.to_string()));
            let mark = mark_text.as_ref().map(|(event, version)| Mark { event, version });
            let candidates = candidates(&events);
            let turns = turns(mark, &candidates);
            prop_assert_eq!(turns.len(), candidates.len());
            let taken = turns.iter().position(|t| matches!(t, Turn::Take { .. }));
            // At most one is taken; all before it are superseded, all after it wait.
            let superseded_until = taken.unwrap_or(turns.len());
            prop_assert!(turns[..superseded_until].iter().all(|t| matches!(t, Turn::Supersede(_))));
            if let Some(i) = taken {
                prop_assert!(turns[i + 1..].iter().all(|t| *t == Turn::Wait));
                let c = candidates[i];
                match mark {
                    None => prop_assert_eq!(i, 0),
                    Some(m) if m.event == c.event => {
                        prop_assert_eq!(&turns[i], &Turn::Take { moves_mark: false })
                    }
                    Some(m) => {
                        prop_assert!(c.version.parse::<u32>().unwrap() > m.version.parse::<u32>().unwrap());
                        prop_assert_eq!(&turns[i], &TAKE);
                    }
                }
            }
            // A superseded one is never newer than the mark, and never holds it.
            for (c, t) in candidates.iter().zip(&turns) {
                if let (Turn::Supersede(_), Some(m)) = (t, mark) {
                    prop_assert!(c.event != m.event);
                    prop_assert!(c.version.parse::<u32>().unwrap() <= m.version.parse::<u32>().unwrap());
                }
            }
        }
    }
}
