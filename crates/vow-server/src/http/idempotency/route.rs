//! The routes that honour `Idempotency-Key`, by name (as `VOW_REQUIRE_IDEMPOTENCY_KEY` and the
//! key-status endpoint name them) and by template (what records are scoped to): every `POST` of
//! the API that changes state (the creates, and the inbound operations of pull consumers and
//! operators). `PUT`, `PATCH` and `DELETE` are idempotent by nature (the same request again
//! leaves the same state), so they take no key, as the IETF draft allows; neither do the public
//! ingest routes (`/in/...`), which deduplicate by the provider's event id.

/// A route that honours `Idempotency-Key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// Its name, e.g. `message.create`.
    pub name: &'static str,
    /// Its template, e.g. `/api/v1/app/{app_id}/msg`: the records' scope.
    pub template: &'static str,
}

/// Every route that honours the header.
pub const ROUTES: &[Route] = &[
    Route {
        name: "application.create",
        template: "/api/v1/app",
    },
    Route {
        name: "event_type.create",
        template: "/api/v1/event-type",
    },
    Route {
        name: "endpoint.create",
        template: "/api/v1/app/{app_id}/endpoint",
    },
    Route {
        name: "endpoint.secret.rotate",
        template: "/api/v1/app/{app_id}/endpoint/{endpoint_id}/secret/rotate",
    },
    Route {
        name: "endpoint.recover",
        template: "/api/v1/app/{app_id}/endpoint/{endpoint_id}/recover",
    },
    Route {
        name: "endpoint.replay",
        template: "/api/v1/app/{app_id}/endpoint/{endpoint_id}/replay",
    },
    Route {
        name: "endpoint.send_example",
        template: "/api/v1/app/{app_id}/endpoint/{endpoint_id}/send-example",
    },
    Route {
        name: "message.create",
        template: "/api/v1/app/{app_id}/msg",
    },
    Route {
        name: "message.resend",
        template: "/api/v1/app/{app_id}/msg/{msg_id}/endpoint/{endpoint_id}/resend",
    },
    Route {
        name: "source.create",
        template: "/api/v1/source",
    },
    Route {
        name: "source.event.claim",
        template: "/api/v1/source/{source_id}/event/claim",
    },
    Route {
        name: "source.event.complete",
        template: "/api/v1/source/{source_id}/event/{event_id}/complete",
    },
    Route {
        name: "source.event.fail",
        template: "/api/v1/source/{source_id}/event/{event_id}/fail",
    },
    Route {
        name: "source.event.resolve",
        template: "/api/v1/source/{source_id}/event/{event_id}/resolve",
    },
    Route {
        name: "source.event.replay",
        template: "/api/v1/source/{source_id}/event/{event_id}/replay",
    },
    Route {
        name: "source.event.release",
        template: "/api/v1/source/{source_id}/event/{event_id}/release",
    },
    Route {
        name: "source.event.discard",
        template: "/api/v1/source/{source_id}/event/{event_id}/discard",
    },
];

impl Route {
    /// The route called `name`.
    pub fn named(name: &str) -> Option<&'static Route> {
        ROUTES.iter().find(|r| r.name == name)
    }

    /// The route whose template is `template` (axum's `MatchedPath`).
    pub fn at(template: &str) -> Option<&'static Route> {
        ROUTES.iter().find(|r| r.template == template)
    }

    /// Whether its records are scoped to the application in the path.
    pub fn has_application(&self) -> bool {
        self.template.contains("{app_id}")
    }

    /// What the fingerprint covers besides the body: the template with every parameter but the
    /// application (already the scope, resolved, so its uid and id share keys) filled in from
    /// `params`. The same key sent to two endpoints is a reuse, never a replay of the other's.
    pub fn target<'a>(&self, params: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
        params
            .into_iter()
            .filter(|(name, _)| *name != "app_id")
            .fold(self.template.to_owned(), |t, (name, value)| {
                t.replace(&format!("{{{name}}}"), value)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_found_by_name_and_by_template() {
        let rotate = Route::named("endpoint.secret.rotate").unwrap();
        assert_eq!(Route::at(rotate.template), Some(rotate));
        assert!(rotate.has_application());
        assert!(!Route::named("application.create")
            .unwrap()
            .has_application());
        assert_eq!(Route::named("message.delete"), None);
    }

    #[test]
    fn the_target_fills_in_every_parameter_but_the_application() {
        let resend = Route::named("message.resend").unwrap();
        let target = resend.target([
            ("app_id", "acme"),
            ("msg_id", "msg_1"),
            ("endpoint_id", "ep_2"),
        ]);
        assert_eq!(
            target,
            "/api/v1/app/{app_id}/msg/msg_1/endpoint/ep_2/resend"
        );
        let create = Route::named("message.create").unwrap();
        assert_eq!(create.target([("app_id", "acme")]), create.template);
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
