//! Which endpoints a message fans out to.
//!
//! Svix's rules: an endpoint with no event-type filter takes every event type, otherwise only the
//! listed ones; an endpoint with no channel filter takes every message, otherwise only messages
//! that share at least one channel with it. Whether the endpoint is enabled is not a question of
//! matching: a disabled endpoint still gets its delivery row, held until it is enabled again.

/// An endpoint's filters.
#[derive(Debug, Clone, Copy)]
pub struct EndpointFilter<'a> {
    /// `eventTypes`: `None` = all.
    pub event_types: Option<&'a [String]>,
    /// `channels`: `None` = all messages.
    pub channels: Option<&'a [String]>,
}

/// Whether a message of `event_type` on `channels` goes to an endpoint with `filter`.
pub fn endpoint_matches(filter: EndpointFilter<'_>, event_type: &str, channels: &[String]) -> bool {
    let type_ok = filter
        .event_types
        .is_none_or(|types| types.iter().any(|t| t == event_type));
    let channel_ok = filter
        .channels
        .is_none_or(|wanted| wanted.iter().any(|c| channels.contains(c)));
    type_ok && channel_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn an_endpoint_without_filters_takes_everything() {
        let f = EndpointFilter {
            event_types: None,
            channels: None,
        };
        assert!(endpoint_matches(f, "a.b", &[]));
        assert!(endpoint_matches(f, "a.b", &s(&["x"])));
    }

    #[test]
    fn event_type_filters_are_exact() {
        let types = s(&["user.created"]);
        let f = EndpointFilter {
            event_types: Some(&types),
            channels: None,
        };
        assert!(endpoint_matches(f, "user.created", &[]));
        assert!(!endpoint_matches(f, "user.deleted", &[]));
        assert!(!endpoint_matches(f, "user", &[]));
    }

    #[test]
    fn a_channel_filter_needs_one_shared_channel() {
        let chans = s(&["a", "b"]);
        let f = EndpointFilter {
            event_types: None,
            channels: Some(&chans),
        };
        assert!(endpoint_matches(f, "t", &s(&["b", "z"])));
        assert!(!endpoint_matches(f, "t", &s(&["z"])));
        assert!(!endpoint_matches(f, "t", &[]));
    }
}
