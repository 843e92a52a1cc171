//! What a request with a key does once it has begun its record, shared by this crate's `run`
//! and any host with a flow of its own (vow's server): [`next`] decides from the [`Begun`]
//! alone (run the operation, replay, or refuse with a problem), and [`begin_until`] begins the
//! record again every [`POLL`] while another request holds it and the request's
//! `Prefer: wait` allows.

use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use crate::record::{Begun, LeaseToken, Settings, StoredResponse};
use crate::Problem;

/// How often a waiting request looks at the record again.
pub const POLL: Duration = Duration::from_millis(50);

/// What a request that began its record does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Run the operation holding this lease.
    Run {
        /// The lease token of the record.
        token: LeaseToken,
        /// Whether the record was taken over from a request whose lease ran out.
        taken_over: bool,
    },
    /// Replay the stored response ([`super::respond::replay`]).
    Replay {
        /// The stored response.
        response: StoredResponse,
        /// When the record stops being replayable.
        expires_at: DateTime<Utc>,
    },
    /// Answer with this problem: reused 422, in progress 409 (with a `Retry-After` of at most
    /// one lease), expired 422.
    Refuse(Problem),
}

/// What `begun` (under `settings`) tells its request to do.
pub fn next(begun: Begun, settings: &Settings) -> Next {
    match begun {
        Begun::Owner(token) => Next::Run {
            token,
            taken_over: false,
        },
        Begun::TakenOver(token) => Next::Run {
            token,
            taken_over: true,
        },
        Begun::Replay {
            response,
            expires_at,
        } => Next::Replay {
            response,
            expires_at,
        },
        Begun::Reused { differences } => Next::Refuse(Problem::KeyReused { differences }),
        // The owner's clock can be a hair ahead of this request's (they raced), which would
        // make the lease look longer than it is: never more than one lease.
        Begun::InProgress { retry_after_secs } => Next::Refuse(Problem::InProgress {
            retry_after: retry_after_secs.min(settings.lease.as_secs()).max(1),
        }),
        Begun::Expired { .. } => Next::Refuse(Problem::KeyExpired),
    }
}

/// Begins a record with `begin` (told how many polls came before this one), and again every
/// [`POLL`] while the record is in progress and `until` has not come: the first outcome that is
/// not [`Begun::InProgress`], or the last one. Nothing is held between the polls.
pub async fn begin_until<E, F, Fut>(until: Instant, mut begin: F) -> Result<Begun, E>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<Begun, E>>,
{
    let mut polls = 0;
    loop {
        let begun = begin(polls).await?;
        let left = until.saturating_duration_since(Instant::now());
        if !matches!(begun, Begun::InProgress { .. }) || left.is_zero() {
            return Ok(begun);
        }
        polls += 1;
        tokio::time::sleep(POLL.min(left)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_progress(retry_after_secs: u64) -> Begun {
        Begun::InProgress { retry_after_secs }
    }

    #[test]
    fn the_owner_runs_and_a_takeover_says_so() {
        let settings = Settings::default();
        let token = LeaseToken("t".into());
        let run = |taken_over| Next::Run {
            token: token.clone(),
            taken_over,
        };
        assert_eq!(next(Begun::Owner(token.clone()), &settings), run(false));
        assert_eq!(next(Begun::TakenOver(token.clone()), &settings), run(true));
    }

    #[test]
    fn the_others_replay_or_refuse_and_never_wait_longer_than_a_lease() {
        let settings = Settings::default();
        assert_eq!(
            next(in_progress(31), &settings),
            Next::Refuse(Problem::InProgress { retry_after: 30 })
        );
        let reused = Begun::Reused {
            differences: vec!["/a".into()],
        };
        assert_eq!(
            next(reused, &settings),
            Next::Refuse(Problem::KeyReused {
                differences: vec!["/a".into()]
            })
        );
        let expired = Begun::Expired { resource: None };
        assert_eq!(next(expired, &settings), Next::Refuse(Problem::KeyExpired));
    }

    #[tokio::test]
    async fn begin_polls_while_in_progress_until_its_deadline() {
        let until = Instant::now() + Duration::from_millis(120);
        let mut calls = Vec::new();
        let begun = begin_until(until, |polls| {
            calls.push(polls);
            async { Ok::<_, ()>(in_progress(1)) }
        })
        .await;
        assert_eq!(begun, Ok(in_progress(1)));
        assert!(Instant::now() >= until, "it polled until the deadline");
        assert!(calls.len() >= 2, "{calls:?}");
        assert!(calls.iter().copied().eq(0..calls.len() as u32), "{calls:?}");
        let now = begin_until(Instant::now(), |_| async { Ok::<_, ()>(in_progress(1)) });
        assert_eq!(now.await, Ok(in_progress(1)), "no wait: one begin");
        let token = LeaseToken("t".into());
        let mut left = 2;
        let owner = begin_until(Instant::now() + Duration::from_secs(5), |_| {
            left -= 1;
            let begun = if left == 0 {
                Begun::Owner(token.clone())
            } else {
                in_progress(1)
            };
            async move { Ok::<_, ()>(begun) }
        })
        .await;
        assert_eq!(owner, Ok(Begun::Owner(token)));
    }
}
