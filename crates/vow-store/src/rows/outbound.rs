//! The outbound models as rows: applications, event types, endpoints (and what a claim needs of
//! one), messages, deliveries and attempts.

use chrono::{DateTime, Utc};

use super::read::{Columns, FromColumns, Reader};
use crate::queue::{
    Attempt, DeliveryState, DeliveryTarget, MessageStatus, NewAttempt, RecentAttempt, TailedAttempt,
};
use crate::rules::fan_out::FanOutEndpoint;
use crate::{
    Application, ApplicationFields, Delivery, DeliveryOptions, DeliveryStatus, Endpoint,
    EndpointFields, EndpointSecret, EventType, Message,
};

impl FromColumns for Application {
    const COLUMNS: &'static str = "id, uid, name, throttle_rate, metadata, created_at, updated_at";

    fn read_from<C: Columns + ?Sized>(r: &mut Reader<'_, C>) -> Result<Self, C::Error> {
        Ok(Application {
            id: r.parse()?,
            fields: ApplicationFields {
                uid: r.opt_text()?,
                name: r.text()?,
                throttle_rate: r.opt_int()?,
                metadata: r.json()?,
            },
            created_at: r.time()?,
            updated_at: r.time()?,
        })
    }
}

impl FromColumns for EventType {
    const COLUMNS: &'static str =
        "name, description, archived, deprecated, feature_flag, schemas, created_at, updated_at";

    fn read_from<C: Columns + ?Sized>(r: &mut Reader<'_, C>) -> Result<Self, C::Error> {
        Ok(EventType {
            name: r.text()?,
            description: r.text()?,
            archived: r.bool()?,
            deprecated: r.bool()?,
            feature_flag: r.opt_text()?,
            schemas: r.opt_json()?,
            created_at: r.time()?,
            updated_at: r.time()?,
        })
    }
}

impl FromColumns for DeliveryOptions {
    const COLUMNS: &'static str = "signature_style, timeout_ms, retry_schedule";

    fn read_from<C: Columns + ?Sized>(r: &mut Reader<'_, C>) -> Result<Self, C::Error> {
        Ok(DeliveryOptions {
            signature_style: r.parse()?,
            timeout_ms: r.opt_int()?,
            retry_schedule: r.opt_parse()?,
        })
    }
}

impl FromColumns for Endpoint {
    const COLUMNS: &'static str = "id, app_id, uid, url, description, disabled, event_types, \
                                  channels, throttle_rate, metadata, headers, signature_style, \
                                  timeout_ms, retry_schedule, disabled_reason, created_at, \
                                  updated_at";

    fn read_from<C: Columns + ?Sized>(r: &mut Reader<'_, C>) -> Result<Self, C::Error> {
        Ok(Endpoint {
            id: r.parse()?,
            app_id: r.parse()?,
            fields: EndpointFields {
                uid: r.opt_text()?,
                url: r.text()?,
                description: r.text()?,
                disabled: r.bool()?,
                event_types: r.opt_strings()?,
                channels: r.opt_strings()?,
                throttle_rate: r.opt_int()?,
                metadata: r.json()?,
                headers: r.json()?,
                delivery: r.take()?,
            },
            disabled_reason: r.opt_text()?,
            created_at: r.time()?,
            updated_at: r.time()?,
        })
    }
}

/// What a claim needs of an endpoint, its secrets aside (each backend reads those its own way:
/// [`EndpointSecret`] rows, or arrays).
impl FromColumns for DeliveryTarget {
    const COLUMNS: &'static str = "url, headers, disabled, throttle_rate, signature_style, \
                                  timeout_ms, retry_schedule, updated_at";

    fn read_from<C: Columns + ?Sized>(r: &mut Reader<'_, C>) -> Result<Self, C::Error> {
        Ok(DeliveryTarget {
            url: r.text()?,
            headers: r.json()?,
            disabled: r.bool()?,
            throttle_rate: r.opt_int()?,
            options: r.take()?,
            updated_at: r.time()?,
            secrets: Vec::new(),
        })
    }
}

impl FromColumns for EndpointSecret {
    const COLUMNS: &'static str = "key, valid_until";

    fn read_from<C: Columns + ?Sized>(r: &mut Reader<'_, C>) -> Result<Self, C::Error> {
        Ok(EndpointSecret {
            key: r.text()?,
            valid_until: r.opt_time()?,
        })
    }
}

impl FromColumns for FanOutEndpoint {
    const COLUMNS: &'static str = "id, disabled, event_types, channels";

    fn read_from<C: Columns + ?Sized>(r: &mut Reader<'_, C>) -> Result<Self, C::Error> {
        Ok(FanOutEndpoint {
            id: r.text()?,
            disabled: r.bool()?,
            event_types: r.opt_strings()?,
            channels: r.opt_strings()?,
        })
    }
}

impl FromColumns for Message {
    const COLUMNS: &'static str =
        "id, app_id, event_id, event_type, channels, payload, payload_expires_at, created_at, \
         traceparent";

    fn read_from<C: Columns + ?Sized>(r: &mut Reader<'_, C>) -> Result<Self, C::Error> {
        Ok(Message {
            id: r.parse()?,
            app_id: r.parse()?,
            event_id: r.opt_text()?,
            event_type: r.text()?,
            channels: r.opt_strings()?,
            payload: r.opt_text()?,
            payload_expires_at: r.time()?,
            created_at: r.time()?,
            traceparent: r.opt_text()?,
        })
    }
}

impl FromColumns for Delivery {
    const COLUMNS: &'static str = "id, app_id, msg_id, endpoint_id, status, attempts, \
                                  client_errors, last_status, dead_letter_reason, \
                                  next_attempt_at, created_at, manual";

    fn read_from<C: Columns + ?Sized>(r: &mut Reader<'_, C>) -> Result<Self, C::Error> {
        Ok(Delivery {
            id: r.parse()?,
            app_id: r.parse()?,
            msg_id: r.parse()?,
            endpoint_id: r.parse()?,
            status: r.named(DeliveryStatus::parse)?,
            attempts: r.int()?,
            client_errors: r.int()?,
            last_status: r.opt_int()?,
            dead_letter_reason: r.opt_text()?,
            next_attempt_at: r.time()?,
            created_at: r.time()?,
            manual: r.bool()?,
        })
    }
}

/// A delivery's columns, then its lease's end: [`delivery_state`] reads them and one more, the
/// key its caller pairs the state by.
pub const DELIVERY_STATE_COLUMNS: &str = "id, app_id, msg_id, endpoint_id, status, attempts, \
                                          client_errors, last_status, dead_letter_reason, \
                                          next_attempt_at, created_at, manual, lease_until";

/// A delivery and its Svix status at `now`, from [`DELIVERY_STATE_COLUMNS`] and a last TEXT
/// column: the key (a message or endpoint id) the state goes under.
pub fn delivery_state<C: Columns + ?Sized>(
    row: &C,
    now: DateTime<Utc>,
) -> Result<(String, DeliveryState), C::Error> {
    let mut r = Reader::new(row);
    let delivery: Delivery = r.take()?;
    let lease_until = r.opt_time()?;
    let status = MessageStatus::of(delivery.status, lease_until, now);
    Ok((r.text()?, DeliveryState { delivery, status }))
}

impl FromColumns for Attempt {
    const COLUMNS: &'static str = "id, app_id, msg_id, endpoint_id, delivery_id, started_at, url, \
                                  response_status, response, duration_ms, success, error, trigger";

    fn read_from<C: Columns + ?Sized>(r: &mut Reader<'_, C>) -> Result<Self, C::Error> {
        let id = r.parse()?;
        Ok(Attempt {
            id,
            app_id: r.parse()?,
            msg_id: r.parse()?,
            endpoint_id: r.parse()?,
            delivery_id: r.parse()?,
            attempt: NewAttempt {
                id,
                started_at: r.time()?,
                url: r.text()?,
                response_status: r.opt_int()?,
                response: r.text()?,
                duration_ms: r.int()?,
                success: r.bool()?,
                error: r.opt_text()?,
                trigger: r.named(crate::queue::AttemptTrigger::parse)?,
            },
        })
    }
}

impl FromColumns for RecentAttempt {
    /// The excerpt is cut in SQL, so a long response never leaves the store.
    const COLUMNS: &'static str = "id, endpoint_id, started_at, response_status, duration_ms, \
                                   success, error, \
                                   CASE WHEN success THEN '' ELSE substr(response, 1, 300) END";

    fn read_from<C: Columns + ?Sized>(r: &mut Reader<'_, C>) -> Result<Self, C::Error> {
        Ok(RecentAttempt {
            id: r.parse()?,
            endpoint_id: r.parse()?,
            started_at: r.time()?,
            response_status: r.opt_int()?,
            duration_ms: r.int()?,
            success: r.bool()?,
            error: r.opt_text()?,
            excerpt: r.text()?,
        })
    }
}

impl FromColumns for TailedAttempt {
    /// Over `attempts a` joined to its message `m` and its delivery `d`. The attempt's number
    /// counts its delivery's attempts up to it in one short range of the by-message index
    /// (matched by `delivery_id`, which no index leads with: by `endpoint_id`, a planner
    /// without statistics walks the endpoint's whole history instead).
    const COLUMNS: &'static str = "a.id, a.app_id, a.msg_id, a.endpoint_id, a.started_at, a.url, \
         a.response_status, a.duration_ms, a.success, a.error, m.event_type, \
         (SELECT count(*) FROM attempts p WHERE p.app_id = a.app_id AND p.msg_id = a.msg_id \
             AND p.delivery_id = a.delivery_id AND p.id <= a.id), \
         CASE WHEN d.status = 'pending' AND d.next_attempt_at > a.started_at \
             THEN d.next_attempt_at END";

    fn read_from<C: Columns + ?Sized>(r: &mut Reader<'_, C>) -> Result<Self, C::Error> {
        Ok(TailedAttempt {
            id: r.parse()?,
            app_id: r.parse()?,
            msg_id: r.parse()?,
            endpoint_id: r.parse()?,
            started_at: r.time()?,
            url: r.text()?,
            response_status: r.opt_int()?,
            duration_ms: r.int()?,
            success: r.bool()?,
            error: r.opt_text()?,
            event_type: r.text()?,
            attempt: r.int()?,
            next_attempt_at: r.opt_time()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recent_attempt_cuts_its_excerpt_at_the_documented_length() {
        let cut = format!("substr(response, 1, {})", crate::queue::EXCERPT_CHARS);
        assert!(RecentAttempt::COLUMNS.contains(&cut));
    }

    #[test]
    fn a_delivery_state_reads_the_delivery_then_its_lease() {
        assert_eq!(
            DELIVERY_STATE_COLUMNS,
            format!("{}, lease_until", Delivery::COLUMNS)
        );
    }
}
