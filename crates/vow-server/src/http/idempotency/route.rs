//! The routes that honour `Idempotency-Key`, by name (as `VOW_REQUIRE_IDEMPOTENCY_KEY` and the
//! key-status endpoint name them) and by template (what records are scoped to): every `POST` of
//! the API that changes state (the creates, and the inbound operations of pull consumers and
//! operators). `PUT`, `PATCH` and `DELETE` are idempotent by nature (the same request again
//! leaves the same state), so they take no key, as the IETF draft allows; neither do the public
//! ingest routes (`/in/...`), which deduplicate by the provider's event id.
//!
//! Each route lists the query parameters it reads: they are part of the request's identity
//! (`vow_idempotency::http::Route` reads them, and the target, the one way the fingerprint
//! covers them). An application's routes scope their records to the application in the path
//! ([`APPLICATION`]).

pub use vow_idempotency::http::Route;

/// The path parameter that names the application an application's route's records are scoped
/// to (resolved, so its uid and id share keys).
pub const APPLICATION: &str = "app_id";

/// Every route that honours the header.
pub const ROUTES: &[Route] = &[
    Route {
        name: "application.create",
        template: "/api/v1/app",
        query: &["get_if_exists"],
    },
    Route {
        name: "event_type.create",
        template: "/api/v1/event-type",
        query: &[],
    },
    Route {
        name: "endpoint.create",
        template: "/api/v1/app/{app_id}/endpoint",
        query: &[],
    },
    Route {
        name: "endpoint.secret.rotate",
        template: "/api/v1/app/{app_id}/endpoint/{endpoint_id}/secret/rotate",
        query: &[],
    },
    Route {
        name: "endpoint.recover",
        template: "/api/v1/app/{app_id}/endpoint/{endpoint_id}/recover",
        query: &[],
    },
    Route {
        name: "endpoint.replay",
        template: "/api/v1/app/{app_id}/endpoint/{endpoint_id}/replay",
        query: &[],
    },
    Route {
        name: "endpoint.send_example",
        template: "/api/v1/app/{app_id}/endpoint/{endpoint_id}/send-example",
        query: &[],
    },
    Route {
        name: "message.create",
        template: "/api/v1/app/{app_id}/msg",
        query: &["with_content"],
    },
    Route {
        name: "message.resend",
        template: "/api/v1/app/{app_id}/msg/{msg_id}/endpoint/{endpoint_id}/resend",
        query: &[],
    },
    Route {
        name: "source.create",
        template: "/api/v1/source",
        query: &[],
    },
    Route {
        name: "source.replay",
        template: "/api/v1/source/{source_id}/replay",
        query: &[],
    },
    Route {
        name: "source.event.claim",
        template: "/api/v1/source/{source_id}/event/claim",
        query: &[],
    },
    Route {
        name: "source.event.complete",
        template: "/api/v1/source/{source_id}/event/{event_id}/complete",
        query: &[],
    },
    Route {
        name: "source.event.fail",
        template: "/api/v1/source/{source_id}/event/{event_id}/fail",
        query: &[],
    },
    Route {
        name: "source.event.resolve",
        template: "/api/v1/source/{source_id}/event/{event_id}/resolve",
        query: &[],
    },
    Route {
        name: "source.event.replay",
        template: "/api/v1/source/{source_id}/event/{event_id}/replay",
        query: &[],
    },
    Route {
        name: "source.event.release",
        template: "/api/v1/source/{source_id}/event/{event_id}/release",
        query: &[],
    },
    Route {
        name: "source.event.discard",
        template: "/api/v1/source/{source_id}/event/{event_id}/discard",
        query: &[],
    },
];

/// The route called `name`.
pub fn named(name: &str) -> Option<&'static Route> {
    ROUTES.iter().find(|r| r.name == name)
}

/// The route whose template is `template` (axum's `MatchedPath`).
pub fn at(template: &str) -> Option<&'static Route> {
    ROUTES.iter().find(|r| r.template == template)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_found_by_name_and_by_template() {
        let rotate = named("endpoint.secret.rotate").unwrap();
        assert_eq!(at(rotate.template), Some(rotate));
        assert!(rotate.has_param(APPLICATION));
        assert!(!named("application.create").unwrap().has_param(APPLICATION));
        assert_eq!(named("message.delete"), None);
    }

    #[test]
    fn the_target_fills_in_every_parameter_but_the_application() {
        let resend = named("message.resend").unwrap();
        let target = resend.target(
            APPLICATION,
            [
                ("app_id", "acme"),
                ("msg_id", "msg_1"),
                ("endpoint_id", "ep_2"),
            ],
        );
        assert_eq!(
            target,
            "/api/v1/app/{app_id}/msg/msg_1/endpoint/ep_2/resend"
        );
        let create = named("message.create").unwrap();
        assert_eq!(
            create.target(APPLICATION, [("app_id", "acme")]),
            create.template
        );
    }

    #[test]
    fn the_query_keeps_what_the_route_reads_in_a_canonical_order() {
        let create = named("application.create").unwrap();
        assert_eq!(create.canonical_query(None), "");
        assert_eq!(create.canonical_query(Some("other=1")), "");
        assert_eq!(
            create.canonical_query(Some("z=9&get_if_exists=tru%65")),
            "get_if_exists=true"
        );
        let msg = named("message.create").unwrap();
        assert_eq!(
            msg.canonical_query(Some("with_content=false&x=1&with_content=a+b")),
            "with_content=false&with_content=a+b"
        );
        let resend = named("message.resend").unwrap();
        assert_eq!(resend.canonical_query(Some("with_content=false")), "");
    }

    #[test]
    fn names_and_templates_are_unique() {
        for (i, a) in ROUTES.iter().enumerate() {
            for b in &ROUTES[i + 1..] {
                assert!(a.name != b.name && a.template != b.template, "{a:?} {b:?}");
            }
        }
    }
}
