//! Query parameters are held to the published document: on a documented operation, a parameter
//! it does not declare is refused with a 422 naming it (unless its value is empty), so a Svix
//! parameter vow does not support, or a misspelt one, is never silently ignored. The declared
//! names come from the same generated document the router serves, so the check and the contract
//! cannot drift apart.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use utoipa::openapi::OpenApi;

use crate::error::{ApiError, ValidationItem};

/// The query parameters each documented operation declares, by method and route template.
#[derive(Clone, Default)]
pub struct DeclaredQuery(Arc<HashMap<(Method, String), HashSet<String>>>);

impl DeclaredQuery {
    /// What `doc` declares (path-level parameters included).
    pub fn of(doc: &OpenApi) -> Self {
        let doc = serde_json::to_value(doc).unwrap_or_default();
        let query_names = |params: &Value| -> Vec<String> {
            params
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["in"] == "query")
                .filter_map(|p| p["name"].as_str().map(str::to_string))
                .collect()
        };
        let mut declared = HashMap::new();
        for (path, item) in doc["paths"].as_object().into_iter().flatten() {
            let shared = query_names(&item["parameters"]);
            for (method, op) in item.as_object().into_iter().flatten() {
                let method = match method.as_str() {
                    "get" => Method::GET,
                    "post" => Method::POST,
                    "put" => Method::PUT,
                    "patch" => Method::PATCH,
                    "delete" => Method::DELETE,
                    "head" => Method::HEAD,
                    _ => continue, // `parameters`, `summary`, ...
                };
                let names: HashSet<String> = shared
                    .iter()
                    .cloned()
                    .chain(query_names(&op["parameters"]))
                    .collect();
                declared.insert((method, path.clone()), names);
            }
        }
        Self(Arc::new(declared))
    }

    /// The undeclared, non-empty parameters of `query` on `method` `route`; none for an
    /// undocumented route.
    fn undeclared(&self, method: &Method, route: &str, query: &str) -> Vec<String> {
        let Some(names) = self.0.get(&(method.clone(), route.to_string())) else {
            return Vec::new();
        };
        let mut refused: Vec<String> = form_urlencoded::parse(query.as_bytes())
            .filter(|(k, v)| !v.is_empty() && !names.contains(k.as_ref()))
            .map(|(k, _)| k.into_owned())
            .collect();
        refused.dedup();
        refused
    }
}

/// Refuses a request whose query carries parameters its operation does not declare.
pub async fn refuse_undeclared(
    State(declared): State<DeclaredQuery>,
    route: MatchedPath,
    req: Request,
    next: Next,
) -> Response {
    let query = req.uri().query().unwrap_or_default();
    let refused = declared.undeclared(req.method(), route.as_str(), query);
    if refused.is_empty() {
        return next.run(req).await;
    }
    let items = refused
        .into_iter()
        .map(|name| ValidationItem {
            loc: vec!["query".into(), name],
            msg: "vow does not support this parameter; leave it out".into(),
            kind: "value_error.unsupported_field".into(),
        })
        .collect();
    ApiError::Validation(items).into_response()
}
