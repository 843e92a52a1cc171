//! The outcome policy: what one delivery attempt's result means for the delivery (delivered, retry
//! at a time, dead-letter, or dead-letter and disable the endpoint), and when repeated
//! dead-letters disable an endpoint. Pure: the caller passes `now` and the RNG.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use rand::Rng;

use super::{
    delay::equal_jitter,
    outcome::{AttemptContext, AttemptResult, DeadLetterReason, Decision, Failure},
    retry_after::parse_retry_after,
    RetrySchedule,
};

/// A delivery dead-letters at its third client-error (4xx) response: the first one plus two
/// further attempts, counted over the whole delivery.
pub const MAX_CLIENT_ERROR_RESPONSES: u32 = 3;

/// The shortest wait a `Retry-After` header can ask for (unless the schedule's cap is shorter).
pub const MIN_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Consecutive dead-lettered deliveries after which an endpoint is disabled, by default.
pub const DEFAULT_DISABLE_THRESHOLD: u32 = 3;

/// Judges one attempt's result.
///
/// - 2xx → [`Decision::Delivered`].
/// - 410 → [`Decision::DeadLetterAndDisable`], on any attempt. [`AttemptResult::Refused`] →
///   [`Decision::DeadLetter`] at once.
/// - A client error ([`AttemptResult::is_client_error`]) that is the delivery's
///   [`MAX_CLIENT_ERROR_RESPONSES`]th → dead-letter.
/// - Any other failure (3xx, 408, 429, 5xx, an unexpected status, timeout, no connection) and
///   client errors within budget → retry on the schedule, or dead-letter if `ctx.attempt` was its
///   last attempt.
///
/// The retry time is `now` plus the schedule's delay with equal jitter (within `[d/2, d]`). A
/// parseable `Retry-After` on the response is clamped to `[1 s, schedule cap]` (the cap wins if it
/// is under 1 s) and can only lengthen that wait, never shorten it: a receiver that says "retry in
/// 1 s" on every 503 would otherwise burn the whole schedule in seconds, when the schedule exists to
/// span an outage. So the retry time is always within `[now + d/2, now + cap]`.
pub fn decide(
    result: &AttemptResult<'_>,
    ctx: AttemptContext,
    schedule: &RetrySchedule,
    now: DateTime<Utc>,
    rng: &mut impl Rng,
) -> Decision {
    let attempt = ctx.attempt.max(1);
    let (failure, retry_after) = match *result {
        AttemptResult::Refused => return dead_letter(DeadLetterReason::Refused),
        AttemptResult::Response { status, .. } if (200..=299).contains(&status) => {
            return Decision::Delivered
        }
        AttemptResult::Response { status: 410, .. } => {
            return Decision::DeadLetterAndDisable {
                reason: DeadLetterReason::Gone,
            }
        }
        AttemptResult::Response {
            status,
            retry_after,
        } => (Failure::Status(status), retry_after),
        AttemptResult::Timeout => (Failure::Timeout, None),
        AttemptResult::ConnectFailed => (Failure::ConnectFailed, None),
    };
    if let (true, Failure::Status(last_status)) = (result.is_client_error(), failure) {
        let count = ctx.client_errors_before.saturating_add(1);
        if count >= MAX_CLIENT_ERROR_RESPONSES {
            return dead_letter(DeadLetterReason::ClientErrors { count, last_status });
        }
    }
    let Some(base) = schedule.delay_after(attempt) else {
        return dead_letter(DeadLetterReason::Exhausted {
            attempts: attempt,
            last: failure,
        });
    };
    let mut wait = equal_jitter(base, rng);
    if let Some(hint) = retry_after.and_then(|v| parse_retry_after(v, now)) {
        let cap = schedule.cap();
        wait = wait.max(hint.max(MIN_RETRY_AFTER).min(cap));
    }
    Decision::RetryAt(add(now, wait))
}

/// Whether an endpoint whose last `consecutive_dead_letters` deliveries all dead-lettered should be
/// disabled: at `threshold` or more ([`DEFAULT_DISABLE_THRESHOLD`] by default). A threshold of 0
/// turns auto-disabling off. (A 410 disables regardless, through
/// [`Decision::DeadLetterAndDisable`].)
pub fn should_disable(consecutive_dead_letters: u32, threshold: u32) -> bool {
    threshold > 0 && consecutive_dead_letters >= threshold
}

fn dead_letter(reason: DeadLetterReason) -> Decision {
    Decision::DeadLetter { reason }
}

/// `now + wait`, saturating at the largest representable time.
fn add(now: DateTime<Utc>, wait: Duration) -> DateTime<Utc> {
    TimeDelta::from_std(wait)
        .ok()
        .and_then(|d| now.checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use proptest::prelude::*;
    use rand::{rngs::StdRng, SeedableRng};

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 3, 10, 12, 0, 0).unwrap()
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn status(status: u16) -> AttemptResult<'static> {
        AttemptResult::Response {
            status,
            retry_after: None,
        }
    }

    fn with_retry_after(status: u16, value: &str) -> AttemptResult<'_> {
        AttemptResult::Response {
            status,
            retry_after: Some(value),
        }
    }

    fn ctx(attempt: u32, client_errors_before: u32) -> AttemptContext {
        AttemptContext {
            attempt,
            client_errors_before,
        }
    }

    fn judge(result: AttemptResult<'_>, ctx: AttemptContext, schedule: &RetrySchedule) -> Decision {
        decide(&result, ctx, schedule, now(), &mut StdRng::seed_from_u64(7))
    }

    /// The wait a decision asks for; panics unless it is a retry.
    fn wait(decision: Decision) -> Duration {
        match decision {
            Decision::RetryAt(at) => (at - now()).to_std().expect("retry is not before now"),
            other => panic!("expected a retry, got {other:?}"),
        }
    }

    fn assert_retried_within_jitter(decision: Decision, d: Duration) {
        let w = wait(decision);
        assert!(w >= d / 2 && w <= d, "{w:?} outside [{:?}, {d:?}]", d / 2);
    }

    #[test]
    fn a_2xx_is_delivered() {
        for code in [200, 201, 202, 204, 299] {
            let decision = judge(status(code), ctx(1, 0), &RetrySchedule::default());
            assert_eq!(decision, Decision::Delivered, "{code}");
        }
    }

    #[test]
    fn transient_failures_are_retried_on_the_schedule() {
        let results = [429, 408, 500, 502, 503, 504, 599, 100, 600]
            .map(status)
            .into_iter()
            .chain([AttemptResult::Timeout, AttemptResult::ConnectFailed]);
        for result in results {
            let decision = judge(result, ctx(1, 0), &RetrySchedule::default());
            assert_retried_within_jitter(decision, secs(30));
        }
    }

    #[test]
    fn a_3xx_is_a_failure_retried_on_the_schedule() {
        for code in [301, 302, 303, 304, 307, 308] {
            let decision = judge(status(code), ctx(3, 0), &RetrySchedule::default());
            assert_retried_within_jitter(decision, secs(8 * 60));
        }
    }

    #[test]
    fn a_4xx_gets_exactly_two_further_attempts() {
        let schedule = RetrySchedule::default();
        for code in [400, 401, 403, 404, 422] {
            assert_retried_within_jitter(judge(status(code), ctx(1, 0), &schedule), secs(30));
            assert_retried_within_jitter(judge(status(code), ctx(2, 1), &schedule), secs(120));
            assert_eq!(
                judge(status(code), ctx(3, 2), &schedule),
                Decision::DeadLetter {
                    reason: DeadLetterReason::ClientErrors {
                        count: 3,
                        last_status: code
                    }
                }
            );
        }
    }

    #[test]
    fn only_client_errors_count_toward_the_client_error_budget() {
        // 404, 503, 404: two client errors so far, so a third attempt is still made.
        let schedule = RetrySchedule::default();
        assert_retried_within_jitter(judge(status(404), ctx(3, 1), &schedule), secs(8 * 60));
        assert!(matches!(
            judge(status(400), ctx(4, 2), &schedule),
            Decision::DeadLetter { .. }
        ));
    }

    #[test]
    fn a_410_dead_letters_and_disables_on_any_attempt() {
        for attempt in [1, 4, 8, 9] {
            assert_eq!(
                judge(status(410), ctx(attempt, 0), &RetrySchedule::default()),
                Decision::DeadLetterAndDisable {
                    reason: DeadLetterReason::Gone
                }
            );
        }
    }

    #[test]
    fn a_refused_destination_dead_letters_at_once() {
        assert_eq!(
            judge(AttemptResult::Refused, ctx(1, 0), &RetrySchedule::default()),
            Decision::DeadLetter {
                reason: DeadLetterReason::Refused
            }
        );
    }

    #[test]
    fn the_schedule_is_exhausted_at_exactly_max_attempts() {
        let schedule = RetrySchedule::default();
        assert_retried_within_jitter(judge(status(503), ctx(7, 0), &schedule), secs(86_400));
        let decision = judge(status(503), ctx(schedule.max_attempts(), 0), &schedule);
        let Decision::DeadLetter { reason } = decision else {
            panic!("expected a dead-letter, got {decision:?}");
        };
        assert_eq!(reason.to_string(), "exhausted 8 attempts; last: 503");

        let short = RetrySchedule::parse("1s,2s,4s").unwrap();
        assert_retried_within_jitter(judge(AttemptResult::Timeout, ctx(3, 0), &short), secs(4));
        assert_eq!(
            judge(AttemptResult::Timeout, ctx(4, 0), &short),
            Decision::DeadLetter {
                reason: DeadLetterReason::Exhausted {
                    attempts: 4,
                    last: Failure::Timeout
                }
            }
        );
    }

    #[test]
    fn with_no_retries_the_first_failure_dead_letters() {
        let decision = judge(
            AttemptResult::ConnectFailed,
            ctx(1, 0),
            &RetrySchedule::none(),
        );
        assert_eq!(
            decision,
            Decision::DeadLetter {
                reason: DeadLetterReason::Exhausted {
                    attempts: 1,
                    last: Failure::ConnectFailed
                }
            }
        );
    }

    #[test]
    fn attempt_zero_is_judged_as_the_first_attempt() {
        assert_retried_within_jitter(
            judge(status(500), ctx(0, 0), &RetrySchedule::default()),
            secs(30),
        );
    }

    #[test]
    fn retry_after_in_seconds_lengthens_the_wait() {
        let decision = judge(
            with_retry_after(429, "120"),
            ctx(1, 0),
            &RetrySchedule::default(),
        );
        assert_eq!(decision, Decision::RetryAt(now() + TimeDelta::seconds(120)));
    }

    #[test]
    fn retry_after_as_an_http_date_is_measured_from_now() {
        let result = with_retry_after(503, "Mon, 10 Mar 2025 12:05:00 GMT");
        let decision = judge(result, ctx(1, 0), &RetrySchedule::default());
        assert_eq!(decision, Decision::RetryAt(now() + TimeDelta::seconds(300)));
    }

    #[test]
    fn retry_after_is_clamped_to_the_schedules_cap() {
        let decision = judge(
            with_retry_after(503, "999999"),
            ctx(1, 0),
            &RetrySchedule::default(),
        );
        assert_eq!(decision, Decision::RetryAt(now() + TimeDelta::hours(24)));
        let short = RetrySchedule::parse("1s,2s,4s").unwrap();
        let decision = judge(with_retry_after(503, "60"), ctx(1, 0), &short);
        assert_eq!(decision, Decision::RetryAt(now() + TimeDelta::seconds(4)));
    }

    #[test]
    fn retry_after_is_clamped_up_to_one_second() {
        let schedule = RetrySchedule::parse("100ms,5s").unwrap();
        for value in ["0", "Sun, 06 Nov 1994 08:49:37 GMT"] {
            let decision = judge(with_retry_after(503, value), ctx(1, 0), &schedule);
            assert_eq!(
                decision,
                Decision::RetryAt(now() + TimeDelta::seconds(1)),
                "{value}"
            );
        }
        // A cap under one second wins over the one-second floor.
        let tiny = RetrySchedule::parse("100ms").unwrap();
        assert_retried_within_jitter(
            judge(with_retry_after(503, "0"), ctx(1, 0), &tiny),
            Duration::from_millis(100),
        );
    }

    #[test]
    fn retry_after_never_shortens_the_schedules_wait() {
        let decision = judge(
            with_retry_after(503, "5"),
            ctx(3, 0),
            &RetrySchedule::default(),
        );
        assert_retried_within_jitter(decision, secs(8 * 60));
    }

    #[test]
    fn garbage_retry_after_is_ignored() {
        for value in ["soon", "-5", "1.5", "", "Mon, 10 Mar 2025 12:05:00 PST"] {
            let decision = judge(
                with_retry_after(503, value),
                ctx(1, 0),
                &RetrySchedule::default(),
            );
            assert_retried_within_jitter(decision, secs(30));
        }
    }

    #[test]
    fn jitter_keeps_every_delay_of_the_schedule_within_half_and_all_of_it() {
        let schedule = RetrySchedule::default();
        let mut rng = StdRng::seed_from_u64(42);
        for attempt in 1..schedule.max_attempts() {
            let d = schedule.delay_after(attempt).unwrap();
            for _ in 0..200 {
                let decision = decide(&status(503), ctx(attempt, 0), &schedule, now(), &mut rng);
                assert_retried_within_jitter(decision, d);
            }
        }
    }

    #[test]
    fn an_endpoint_is_disabled_at_the_threshold_of_consecutive_dead_letters() {
        assert!(!should_disable(0, DEFAULT_DISABLE_THRESHOLD));
        assert!(!should_disable(2, DEFAULT_DISABLE_THRESHOLD));
        assert!(should_disable(3, DEFAULT_DISABLE_THRESHOLD));
        assert!(should_disable(4, DEFAULT_DISABLE_THRESHOLD));
        assert!(should_disable(1, 1));
        // A threshold of zero never disables.
        assert!(!should_disable(0, 0));
        assert!(!should_disable(u32::MAX, 0));
    }

    proptest! {
        #[test]
        fn the_next_attempt_is_never_before_now_and_within_the_bounds(
            attempt in 1u32..8,
            seed: u64,
            code in prop::sample::select(vec![301, 408, 429, 500, 502, 503, 504]),
            retry_after in prop::option::of(prop_oneof![
                "[0-9]{1,25}",
                ".{0,40}",
                Just("Mon, 10 Mar 2025 12:05:00 GMT".to_owned()),
                Just("Sun, 06 Nov 1994 08:49:37 GMT".to_owned()),
            ]),
        ) {
            let schedule = RetrySchedule::default();
            let d = schedule.delay_after(attempt).unwrap();
            let result = AttemptResult::Response { status: code, retry_after: retry_after.as_deref() };
            let mut rng = StdRng::seed_from_u64(seed);
            let Decision::RetryAt(at) = decide(&result, ctx(attempt, 0), &schedule, now(), &mut rng) else {
                panic!("expected a retry");
            };
            let w = (at - now()).to_std().expect("retry before now");
            prop_assert!(w >= d / 2);
            let upper = if retry_after.is_some() { schedule.cap() } else { d };
            prop_assert!(w <= upper, "{:?} > {:?}", w, upper);
        }
    }
}
