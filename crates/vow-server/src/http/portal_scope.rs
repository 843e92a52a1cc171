//! Where an app portal token reaches, by route template: its own application's routes
//! (`/api/v1/app/{app_id}/...`, and reading the application itself), reading event types (the
//! customer picks an endpoint's), and logging itself out. Everything else (other applications,
//! listing or creating applications, sources, metrics, key status, issuing portal tokens) is
//! 403, naming why. Another application's routes answer 404 exactly as a missing application
//! does, whether it exists or not, so a token cannot probe ids. A read-only token writes
//! nothing: every method but `GET` and `HEAD` is 403, logout aside.

use axum::http::Method;
use vow_core::AppId;
use vow_store::AppKey;

use crate::error::{ApiError, ApiResult};
use crate::http::api::keys::app_key;
use crate::state::AppState;

/// The logout route, the one route outside the application a portal token may write to.
pub const LOGOUT: &str = "/api/v1/auth/logout";

/// Why a portal token is refused a route outside its application.
pub const ONLY_OWN_APP: &str = "an app portal token reaches only its own application";

/// What a route is to a portal token.
#[derive(Debug, PartialEq, Eq)]
enum Reach {
    /// A route of the application in the path (`itself`: the application's own route).
    App { itself: bool },
    /// The event types: readable.
    EventTypes,
    /// Logging out.
    Logout,
    /// Anything else.
    Elsewhere,
}

fn reach(template: &str) -> Reach {
    match template {
        "/api/v1/app/{app_id}" => Reach::App { itself: true },
        t if t.starts_with("/api/v1/app/{app_id}/") => Reach::App { itself: false },
        "/api/v1/event-type" | "/api/v1/event-type/{event_type_name}" => Reach::EventTypes,
        LOGOUT => Reach::Logout,
        _ => Reach::Elsewhere,
    }
}

/// Lets a token of application `own` (`read_only` or not) through to `method template`, whose
/// `{app_id}` is `app_param` (as sent); else the 404 or 403 it gets (see the module docs).
pub async fn admit(
    state: &AppState,
    own: AppId,
    read_only: bool,
    method: &Method,
    template: &str,
    app_param: Option<&str>,
) -> ApiResult<()> {
    let reads = method == Method::GET || method == Method::HEAD;
    match reach(template) {
        Reach::Logout => return Ok(()),
        Reach::App { itself } => {
            let raw = app_param.ok_or_else(|| {
                ApiError::Internal(format!("{template} has no {{app_id}} parameter").into())
            })?;
            if !is_own(state, own, raw).await? {
                return Err(ApiError::not_found("Application"));
            }
            if itself && !reads {
                return Err(ApiError::Forbidden(
                    "an app portal token cannot change or delete its application".into(),
                ));
            }
        }
        Reach::EventTypes if reads => {}
        Reach::EventTypes => {
            return Err(ApiError::Forbidden(
                "an app portal token can only read event types".into(),
            ))
        }
        Reach::Elsewhere => return Err(ApiError::Forbidden(ONLY_OWN_APP.into())),
    }
    if read_only && !reads {
        return Err(ApiError::Forbidden(
            "this app portal token is read-only: it cannot change anything".into(),
        ));
    }
    Ok(())
}

/// Whether `raw` (an id or a uid) names application `own`. An id is compared as it is; a uid
/// is looked up.
async fn is_own(state: &AppState, own: AppId, raw: &str) -> ApiResult<bool> {
    match app_key(raw)? {
        AppKey::Id(id) => Ok(id == own),
        key => Ok(state
            .store
            .get_application(&key)
            .await?
            .is_some_and(|app| app.id == own)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_sorted_by_what_they_reach() {
        assert_eq!(reach("/api/v1/app/{app_id}"), Reach::App { itself: true });
        for t in [
            "/api/v1/app/{app_id}/endpoint",
            "/api/v1/app/{app_id}/msg/{msg_id}",
            "/api/v1/app/{app_id}/attempt/endpoint/{endpoint_id}",
            "/api/v1/app/{app_id}/attempt/stream",
        ] {
            assert_eq!(reach(t), Reach::App { itself: false }, "{t}");
        }
        assert_eq!(reach("/api/v1/event-type"), Reach::EventTypes);
        assert_eq!(
            reach("/api/v1/event-type/{event_type_name}"),
            Reach::EventTypes
        );
        assert_eq!(reach(LOGOUT), Reach::Logout);
        for t in [
            "/api/v1/app",
            "/api/v1/attempt/stream",
            "/api/v1/source",
            "/api/v1/source/{source_id}/event",
            "/api/v1/idempotency-key/{key}",
            "/api/v1/auth/app-portal-access/{app_id}",
            "/metrics",
        ] {
            assert_eq!(reach(t), Reach::Elsewhere, "{t}");
        }
    }
}
