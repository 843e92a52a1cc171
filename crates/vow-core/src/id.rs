//! Typed, prefixed, time-sortable ids.
//!
//! Every id is `<prefix>_<ULID>`: the prefix says what it names (as Svix's do), the ULID makes ids
//! unique across processes and sorts them by creation time, so a listing ordered by id is ordered
//! by age and an id works as a pagination cursor. Each id type is made by [`prefixed_id!`], so a
//! parse that meets another type's prefix can say exactly what it got.

use std::fmt;
use std::str::FromStr;

/// One generator per process, so ids made in the same millisecond still sort in creation order
/// (the random part is incremented instead of drawn anew).
static GENERATOR: std::sync::Mutex<ulid::Generator> = std::sync::Mutex::new(ulid::Generator::new());

/// A new ULID, later than every earlier one of this process.
fn next_ulid() -> ulid::Ulid {
    let mut generator = GENERATOR.lock().unwrap_or_else(|p| p.into_inner());
    // Only fails when 2^80 ids were made in one millisecond.
    generator.generate().unwrap_or_else(|_| ulid::Ulid::new())
}

/// Why a string is not an id of the expected type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdError {
    /// The string carries another id type's prefix, e.g. an endpoint id where an app id belongs.
    #[error("expected {expected} id (`{expected_prefix}_…`), got {found} id")]
    WrongPrefix {
        /// What the caller asked for ("an application").
        expected: &'static str,
        /// Its prefix.
        expected_prefix: &'static str,
        /// What the string turned out to be ("an endpoint").
        found: &'static str,
    },
    /// The string is not `<prefix>_<26-character ULID>`.
    #[error("expected {expected} id of the form `{expected_prefix}_` followed by 26 characters")]
    Malformed {
        /// What the caller asked for.
        expected: &'static str,
        /// Its prefix.
        expected_prefix: &'static str,
    },
}

/// All id kinds vow issues: `(prefix, what it names)`. Used to name a wrong prefix precisely.
const KINDS: &[(&str, &str)] = &[
    ("app", "an application"),
    ("ep", "an endpoint"),
    ("msg", "a message"),
    ("atmpt", "an attempt"),
    ("dlv", "a delivery"),
    ("src", "a source"),
    ("dst", "a destination"),
    ("inevt", "an inbound event"),
    ("inrej", "an inbound rejection"),
    ("rpl", "a replay"),
];

/// What kind of id `s` is (e.g. "an endpoint"), if it is any vow id at all.
pub(crate) fn kind_of_id(s: &str) -> Option<&'static str> {
    let (prefix, rest) = s.split_once('_')?;
    if ulid::Ulid::from_string(rest).is_err() {
        return None;
    }
    KINDS
        .iter()
        .find(|(p, _)| *p == prefix)
        .map(|(_, what)| *what)
}

/// Parses `<prefix>_<ULID>`, naming another kind's prefix when it finds one.
fn parse_ulid(s: &str, prefix: &'static str, what: &'static str) -> Result<ulid::Ulid, IdError> {
    let malformed = IdError::Malformed {
        expected: what,
        expected_prefix: prefix,
    };
    match s.split_once('_') {
        Some((p, rest)) if p == prefix => ulid::Ulid::from_string(rest).map_err(|_| malformed),
        _ => Err(match kind_of_id(s) {
            Some(found) => IdError::WrongPrefix {
                expected: what,
                expected_prefix: prefix,
                found,
            },
            None => malformed,
        }),
    }
}

/// Declares a prefixed id type.
macro_rules! prefixed_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal, $what:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(ulid::Ulid);

        impl $name {
            /// The prefix every id of this type starts with (without the `_`).
            pub const PREFIX: &'static str = $prefix;

            /// A new id, sorting after every id made earlier in time.
            pub fn new() -> Self {
                Self(next_ulid())
            }

            /// A new id as if made at `at` (its random part drawn anew), for rows whose
            /// creation time is given rather than read from the clock. Times before 1970 are
            /// 1970.
            pub fn new_at(at: chrono::DateTime<chrono::Utc>) -> Self {
                let at = std::time::SystemTime::from(at.max(chrono::DateTime::UNIX_EPOCH));
                Self(ulid::Ulid::from_datetime(at))
            }

            /// When this id was made (to the millisecond).
            pub fn made_at(&self) -> chrono::DateTime<chrono::Utc> {
                let ms = i64::try_from(self.0.timestamp_ms()).unwrap_or(i64::MAX);
                chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default()
            }

            /// Parses `<prefix>_<ULID>`.
            pub fn parse(s: &str) -> Result<Self, IdError> {
                parse_ulid(s, $prefix, $what).map(Self)
            }

            /// Whether `s` looks like an id of this type (the prefix and a well-formed ULID).
            pub fn is_id(s: &str) -> bool {
                Self::parse(s).is_ok()
            }

            /// The smallest id of this type made at `at`: every id made at `at` or later sorts
            /// at or after it (as text too), every one made earlier before it. A store counts
            /// the rows made since a time as a range of their ids. Times before 1970 are 1970.
            pub fn first_at(at: chrono::DateTime<chrono::Utc>) -> Self {
                let millis = u64::try_from(at.timestamp_millis()).unwrap_or(0);
                Self(ulid::Ulid::from_parts(millis, 0))
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}_{}", $prefix, self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(self, f)
            }
        }

        impl FromStr for $name {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, IdError> {
                Self::parse(s)
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        #[cfg(feature = "utoipa")]
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                crate::openapi::id_schema($prefix, $what)
            }
        }

        #[cfg(feature = "utoipa")]
        impl utoipa::ToSchema for $name {}

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                Self::parse(&s).map_err(serde::de::Error::custom)
            }
        }
    };
}

prefixed_id!(
    /// An application: the tenant every other row belongs to.
    AppId, "app", "an application"
);
prefixed_id!(
    /// An endpoint of an application.
    EndpointId, "ep", "an endpoint"
);
prefixed_id!(
    /// A message (one event sent by an application).
    MessageId, "msg", "a message"
);
prefixed_id!(
    /// One delivery attempt of a message to an endpoint.
    AttemptId, "atmpt", "an attempt"
);
prefixed_id!(
    /// The delivery of one message to one endpoint (the unit of work workers claim).
    DeliveryId, "dlv", "a delivery"
);
prefixed_id!(
    /// An inbound source: a provider (Stripe, GitHub, …) that sends webhooks to vow.
    SourceId, "src", "a source"
);
prefixed_id!(
    /// Where a source's inbound events are forwarded.
    DestinationId, "dst", "a destination"
);
prefixed_id!(
    /// One stored inbound delivery (claimed, duplicate-free, or quarantined).
    InboundEventId, "inevt", "an inbound event"
);
prefixed_id!(
    /// One refused inbound request (bad signature, stale timestamp, too large, ...).
    RejectionId, "inrej", "an inbound rejection"
);
prefixed_id!(
    /// One operator replay of an endpoint's failed deliveries: recorded on each delivery it
    /// requeued, so their outcomes can be counted apart from the rest.
    ReplayId, "rpl", "a replay"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_says_the_millisecond_it_was_made() {
        let now = chrono::Utc::now();
        let made = AttemptId::first_at(now).made_at();
        assert_eq!(made, chrono::SubsecRound::trunc_subsecs(now, 3));
    }

    #[test]
    fn an_id_round_trips_through_its_text_form() {
        let id = AppId::new();
        let text = id.to_string();
        assert!(text.starts_with("app_"));
        assert_eq!(text.len(), 4 + 26);
        assert_eq!(AppId::parse(&text), Ok(id));
    }

    #[test]
    fn ids_made_later_sort_later_even_within_a_millisecond() {
        let ids: Vec<MessageId> = (0..1000).map(|_| MessageId::new()).collect();
        for pair in ids.windows(2) {
            assert!(pair[0].to_string() < pair[1].to_string());
            assert!(pair[0] < pair[1]);
        }
    }

    #[test]
    fn the_first_id_at_a_time_bounds_the_ids_made_from_then_on() {
        let at = chrono::Utc::now();
        let made = MessageId::new();
        let first = MessageId::first_at(at);
        let later = MessageId::first_at(at + chrono::TimeDelta::milliseconds(1000));
        assert!(first <= made && made < later);
        assert!(first.to_string() <= made.to_string());
        assert!(made.to_string() < later.to_string());
        assert_eq!(MessageId::parse(&first.to_string()), Ok(first));
        let epoch = chrono::DateTime::UNIX_EPOCH;
        assert_eq!(
            MessageId::first_at(epoch - chrono::TimeDelta::days(1)),
            MessageId::first_at(epoch)
        );
    }

    #[test]
    fn an_id_made_as_if_at_a_time_says_that_time_and_is_unique() {
        let at = chrono::DateTime::from_timestamp_millis(1_704_067_200_123).unwrap();
        let (a, b) = (MessageId::new_at(at), MessageId::new_at(at));
        assert_eq!((a.made_at(), b.made_at()), (at, at));
        assert_ne!(a, b);
        assert!(MessageId::first_at(at) <= a);
        assert!(a < MessageId::first_at(at + chrono::TimeDelta::milliseconds(1)));
        let before_1970 = chrono::DateTime::UNIX_EPOCH - chrono::TimeDelta::days(1);
        assert_eq!(
            MessageId::new_at(before_1970).made_at(),
            chrono::DateTime::UNIX_EPOCH
        );
    }

    #[test]
    fn another_kinds_prefix_is_named_in_the_error() {
        let ep = EndpointId::new().to_string();
        assert_eq!(
            AppId::parse(&ep),
            Err(IdError::WrongPrefix {
                expected: "an application",
                expected_prefix: "app",
                found: "an endpoint"
            })
        );
        let msg = AppId::parse(&ep).unwrap_err().to_string();
        assert!(msg.contains("expected an application id"), "{msg}");
    }

    #[test]
    fn garbage_is_malformed() {
        for s in [
            "",
            "app_",
            "app_123",
            "app",
            "_",
            "app_01ARZ3NDEKTSV4RRFFQ69G5FAVX",
            "x_y",
        ] {
            assert!(
                matches!(AppId::parse(s), Err(IdError::Malformed { .. })),
                "{s}"
            );
        }
    }

    #[test]
    fn serde_uses_the_text_form() {
        let id = EndpointId::new();
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, format!("\"{id}\""));
        let back: EndpointId = serde_json::from_str(&json).unwrap();
        assert_eq!(back, id);
    }
}
