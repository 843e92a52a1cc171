//! The Idempotency-Key inspector: an operator names a key, the route it was sent on and (for
//! an application's route) the application, and sees what vow holds for it: its state, the
//! fingerprint version, the created resource (linked to its page), when the stored answer
//! stops being replayed and when the tombstone frees the key. The lookup is the API's own
//! ([`key_status`]).

use askama::Template;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use serde::Deserialize;
use vow_store::idempotency::KeyStatus;

use super::session::Operator;
use super::view::{render, Failure, PageResult};
use crate::http::idempotency::status::key_status;
use crate::http::idempotency::ROUTES;
use crate::state::AppState;

/// The inspector's form.
#[derive(Debug, Default, Deserialize)]
pub struct Lookup {
    #[serde(default)]
    key: String,
    #[serde(default)]
    route: String,
    #[serde(default)]
    app: String,
    /// Who sent it: `admin` (the admin token) or `portal` (an app portal link).
    #[serde(default)]
    by: String,
}

#[derive(Template)]
#[template(path = "console/keys.html")]
struct KeysPage {
    csrf: String,
    lookup: Lookup,
    routes: Vec<&'static str>,
    /// After a lookup: what was found (`None`: the key is free).
    found: Option<Option<KeyStatus>>,
    /// Where the created resource's page is, when vow has one.
    resource_page: Option<String>,
    error: Option<String>,
}

/// `GET /console/idempotency`: the form, and the answer when it was filled in.
pub async fn inspect(
    State(state): State<AppState>,
    operator: Operator,
    Query(lookup): Query<Lookup>,
) -> PageResult {
    let routes = ROUTES.iter().map(|r| r.name).collect();
    let mut page = KeysPage {
        csrf: operator.session.csrf,
        lookup,
        routes,
        found: None,
        resource_page: None,
        error: None,
    };
    if page.lookup.key.trim().is_empty() {
        return Ok(render(StatusCode::OK, &page));
    }
    let by = if page.lookup.by == "portal" {
        "portal"
    } else {
        "admin"
    };
    let app = Some(page.lookup.app.trim().to_string()).filter(|a| !a.is_empty());
    let looked = key_status(&state, by, page.lookup.key.trim(), &page.lookup.route, app).await;
    match looked {
        Ok((_, status)) => {
            page.resource_page = status
                .as_ref()
                .and_then(|s| s.resource.as_deref())
                .and_then(|r| resource_page(r, &page.lookup.app));
            page.found = Some(status);
            Ok(render(StatusCode::OK, &page))
        }
        Err(e) => {
            let refused = Failure::from(e);
            page.error = Some(refused.message().to_string());
            Ok(render(refused.status(), &page))
        }
    }
}

/// The console page of a created resource, by its id's prefix.
fn resource_page(resource: &str, app: &str) -> Option<String> {
    let app = app.trim();
    let (kind, _) = resource.split_once('_')?;
    match kind {
        "app" => Some(format!("/console/app/{resource}")),
        "msg" if !app.is_empty() => Some(format!("/console/app/{app}/msg/{resource}")),
        "ep" if !app.is_empty() => Some(format!("/console/app/{app}/endpoint/{resource}")),
        "src" => Some(format!("/console/source/{resource}")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_link_to_their_pages() {
        assert_eq!(
            resource_page("msg_01J", "shop").as_deref(),
            Some("/console/app/shop/msg/msg_01J")
        );
        assert_eq!(
            resource_page("app_01J", "").as_deref(),
            Some("/console/app/app_01J")
        );
        assert_eq!(resource_page("msg_01J", ""), None);
        assert_eq!(resource_page("qtask_1", "shop"), None);
    }
}
