//! The fan-out: which of an application's endpoints a new message gets a delivery to, and in
//! which state. Every endpoint whose filters ([`endpoint_matches`]) accept the message's event
//! type and channels gets one (with `only`, the one endpoint named, whatever its filters):
//! `pending` and due at once, or `held` when the endpoint is disabled.

use vow_core::matching::{endpoint_matches, EndpointFilter};

use crate::{DeliveryStatus, NewMessage};

/// The part of an endpoint the fan-out reads (`rows`: `id, disabled, event_types, channels`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FanOutEndpoint {
    /// Its id, as stored.
    pub id: String,
    /// Whether it is disabled.
    pub disabled: bool,
    /// Its event-type filter.
    pub event_types: Option<Vec<String>>,
    /// Its channel filter.
    pub channels: Option<Vec<String>>,
}

/// The state of `new`'s delivery to `endpoint`, or `None` when it gets none. With `only`
/// (the caller read only the endpoint it named), the filters are not asked.
pub fn delivery_status(
    endpoint: &FanOutEndpoint,
    new: &NewMessage,
    only: bool,
) -> Option<DeliveryStatus> {
    let filter = EndpointFilter {
        event_types: endpoint.event_types.as_deref(),
        channels: endpoint.channels.as_deref(),
    };
    let channels = new.channels.as_deref().unwrap_or_default();
    if !only && !endpoint_matches(filter, &new.event_type, channels) {
        return None;
    }
    Some(if endpoint.disabled {
        DeliveryStatus::Held
    } else {
        DeliveryStatus::Pending
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use vow_core::{AppId, MessageId};

    fn message(event_type: &str) -> NewMessage {
        NewMessage {
            id: MessageId::new(),
            app_id: AppId::new(),
            event_id: None,
            event_type: event_type.into(),
            channels: None,
            payload: "{}".into(),
            payload_expires_at: Utc::now(),
            now: Utc::now(),
            traceparent: None,
        }
    }

    fn endpoint(disabled: bool, event_types: Option<&[&str]>) -> FanOutEndpoint {
        FanOutEndpoint {
            id: "ep_1".into(),
            disabled,
            event_types: event_types.map(|t| t.iter().map(|s| s.to_string()).collect()),
            channels: None,
        }
    }

    #[test]
    fn a_matching_endpoint_gets_a_pending_delivery_and_a_disabled_one_a_held_one() {
        let new = message("user.created");
        assert_eq!(
            delivery_status(&endpoint(false, None), &new, false),
            Some(DeliveryStatus::Pending)
        );
        assert_eq!(
            delivery_status(&endpoint(true, Some(&["user.created"])), &new, false),
            Some(DeliveryStatus::Held)
        );
    }

    #[test]
    fn a_filtered_out_endpoint_gets_none_unless_it_is_the_only_one_named() {
        let new = message("user.created");
        let other = endpoint(false, Some(&["invoice.paid"]));
        assert_eq!(delivery_status(&other, &new, false), None);
        assert_eq!(
            delivery_status(&other, &new, true),
            Some(DeliveryStatus::Pending)
        );
    }
}
